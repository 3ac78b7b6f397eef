"""MPC203: a GradScaler scales a loss computed in bfloat16."""

from __future__ import annotations

import libcst as cst

from mpcheck.diagnostics import Severity
from mpcheck.rule import Rule, RuleContext
from mpcheck.training import Action, TrainingSite, is_bf16


class ScalerWithBf16(Rule):
    code = "MPC203"
    name = "scaler-with-bf16"
    severity = Severity.WARNING
    summary = "A GradScaler is used with bfloat16 autocast or bfloat16 parameters: it is useless."
    why = """
        Loss scaling exists because float16's exponent range is small: gradients below
        6e-8 underflow to zero unless the loss is multiplied first. bfloat16 has float32's
        exponent range, so nothing underflows and there is nothing to scale. A GradScaler
        around a bfloat16 forward costs a multiply, an unscale, an inf/NaN check and a
        host sync every step, and skipped steps when the scale grows past what bf16 holds,
        and it tells the reader the model trains in float16 when it does not. Usually it is
        left over from switching `dtype=torch.float16` to `torch.bfloat16`.
        """
    symptom = "No error: slower steps and code that says fp16 where it runs bf16."
    how_to_fix = """
        Drop the scaler for bfloat16 (`loss.backward(); optimizer.step()`), or build it
        with `enabled=(amp_dtype == torch.float16)` so it only runs for float16.
        """
    bad = """
        scaler = torch.amp.GradScaler("cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        """
    good = """
        scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16)
        with torch.autocast("cuda", dtype=amp_dtype):
            loss = model(x)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        """

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        self.seen: set[int] = set()  # scalers reported (one finding each)

    def check_training(self, site: TrainingSite) -> None:
        scaler = site.scaler
        if scaler is None or scaler.via != "torch" or scaler.enabled is not True:
            return
        if id(scaler.node) in self.seen:
            return  # one finding per scaler
        evidence: tuple[cst.CSTNode, str] | None = None
        if site.action is Action.BACKWARD:
            regions = [r for r in site.regions if r.active]
            if regions and all(r.low_dtype == "bfloat16" for r in regions):
                evidence = (regions[-1].node, "the loss is computed under bfloat16 autocast here")
            elif site.loss is not None and is_bf16(site.loss) and site.loss.origin is not None:
                evidence = (site.loss.origin.node, f"the loss is {site.loss.origin.text}")
        elif site.action is Action.STEP:
            params = [p for use in site.optimizers for p in use.params]
            if params and all(is_bf16(p) for p in params) and params[0].origin is not None:
                evidence = (params[0].origin.node, f"the parameters are {params[0].origin.text}")
        if evidence is None:
            return
        self.seen.add(id(scaler.node))
        call = self.ctx.code(site.node)
        message = (
            f"`{call}` goes through the GradScaler {scaler.text} (made at "
            f"{self.line(scaler.node)}), but the training runs in bfloat16 "
            f"({evidence[1]} at {self.line(evidence[0])}): bfloat16 has float32's range, "
            "so loss scaling does nothing but cost time; drop the scaler or enable it only "
            "for float16"
        )
        self.report(site.node, message, related=[evidence, (scaler.node, "the GradScaler")])
