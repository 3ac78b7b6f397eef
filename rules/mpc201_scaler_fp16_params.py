"""MPC201: a GradScaler unscales the gradients of float16 parameters."""

from __future__ import annotations

import libcst as cst

from mpcheck.api import (
    Fact,
    OptimizerUse,
    Rule,
    RuleContext,
    Scaler,
    Severity,
    TrainingSite,
    can_be_fp16,
)


class ScalerFp16Params(Rule):
    code = "MPC201"
    name = "scaler-fp16-params"
    severity = Severity.ERROR
    summary = (
        "A GradScaler (`torch.amp.GradScaler`, or accelerate's with fp16 mixed precision) "
        "unscales the gradients of an optimizer whose trainable parameters are float16."
    )
    why = """
        Loss scaling is for float32 parameters trained under fp16 autocast: the gradients
        that reach the optimizer are float32, and `GradScaler.unscale_` divides them by the
        scale. It refuses float16 gradients outright (it checks only the gradient dtype, on
        every device; bfloat16 is accepted). They arrive when the model was cast with
        `.half()` / `.to(torch.float16)` / `.to(weight_dtype)` with `weight_dtype` float16
        under `--mixed_precision fp16`, and the trainable parameters were not upcast again:
        LoRA adapters added after the cast take the base layer's dtype, and
        `[p for p in model.parameters() if p.requires_grad]` are the half weights themselves.
        `scaler.unscale_(opt)`, `scaler.step(opt)`, accelerate's `clip_grad_norm_` and the
        prepared optimizer's `step()` all go through `unscale_`.

        Parameters handed to the optimizer under a plain flag (`if args.train_text_encoder:`)
        are read as the model is on that flag's paths: a text encoder cast to the working
        dtype only under `if not args.train_text_encoder:` never brings float16 parameters to
        the optimizer, and is not reported; cast under the same flag, it always does. The
        flag is assumed to keep its value between the two tests, as a parsed command-line
        argument does.

        transformers' `Trainer` does the same on its own: given
        `TrainingArguments(fp16=True)` it asks accelerate for fp16 mixed precision, whose
        GradScaler (made on CUDA and the other accelerators; accelerate makes none on the
        CPU) unscales the gradients of the optimizer the Trainer builds over the model's
        parameters at every `trainer.train()` step. A model loaded with
        `torch_dtype=torch.float16` and trained whole therefore raises at the first step.
        Not reported: `bf16=True`, `deepspeed=` (DeepSpeed scales the loss itself), `fsdp=`
        (its sharded scaler takes float16 gradients), a `peft_config=` or a peft model
        (peft keeps adapters in float32, `get_peft_model` and `PeftModel.from_pretrained`
        alike), a model `prepare_model_for_kbit_training` froze and upcast, and
        `optimizers=` whose parameters were upcast.

        The load may happen in the project's own loader: a function that hands its
        `torch_dtype` parameter, or its `**kwargs`, to `from_pretrained` loads in the dtype
        each call passes it. `torch_dtype or torch.float16` is float16 whenever the caller
        leaves `torch_dtype` None, its default.
        """
    symptom = "`ValueError: Attempting to unscale FP16 gradients.` at the first step."
    how_to_fix = """
        Keep the frozen base in half precision but upcast the trainable parameters to
        float32 before building the optimizer: diffusers'
        `cast_training_params(model, dtype=torch.float32)` (what its LoRA scripts do when
        `args.mixed_precision == "fp16"`), or `p.data = p.data.float()` for each
        `p.requires_grad` parameter. For a full fine-tune keep the model in float32 and let
        autocast run the forward in fp16. With transformers' `Trainer`, load the model in
        float32 and keep `fp16=True` (autocast does the rest), or use `bf16=True` with
        bfloat16 weights, or train LoRA adapters, which peft keeps in float32.
        """
    bad = """
        def train(args, unet, lora_config, accelerator, loader):
            weight_dtype = torch.float16 if args.mixed_precision == "fp16" else torch.float32
            unet.to(accelerator.device, dtype=weight_dtype)
            unet.add_adapter(lora_config)  # LoRA weights follow the base layer: float16
            params = [p for p in unet.parameters() if p.requires_grad]
            optimizer = torch.optim.AdamW(params, lr=1e-4)
            unet, optimizer = accelerator.prepare(unet, optimizer)
            for batch in loader:
                loss = unet(batch).sample.mean()
                accelerator.backward(loss)
                accelerator.clip_grad_norm_(params, 1.0)  # unscales: raises
                optimizer.step()
        """
    good = """
        def train(args, unet, lora_config, accelerator, loader):
            weight_dtype = torch.float16 if args.mixed_precision == "fp16" else torch.float32
            unet.to(accelerator.device, dtype=weight_dtype)
            unet.add_adapter(lora_config)
            if args.mixed_precision == "fp16":
                cast_training_params(unet, dtype=torch.float32)  # only the LoRA weights
            params = [p for p in unet.parameters() if p.requires_grad]
            optimizer = torch.optim.AdamW(params, lr=1e-4)
            unet, optimizer = accelerator.prepare(unet, optimizer)
            for batch in loader:
                loss = unet(batch).sample.mean()
                accelerator.backward(loss)
                accelerator.clip_grad_norm_(params, 1.0)
                optimizer.step()
        """

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        self.recasts_seen: set[int] = set()  # recasts reported (one finding each)
        # (optimizer, function) pairs whose first unscale was reported: a hook or closure
        # defined inside the loop's function runs at another time (a gradient hook during
        # ``backward``), so its report does not stand for the loop's own unscale
        self.reported: set[tuple[int, int]] = set()
        # each optimizer's unscales in walk order: (function, report or None when quiet). A
        # hook is walked where it is defined, before what the function does next (a scaler
        # patch under a flag); the function's own later unscale sees the final state, so a
        # hook's report stands only if no later unscale of another function is quiet
        self.seen: dict[int, list[tuple[int, _Pending | None]]] = {}

    def check_training(self, site: TrainingSite) -> None:
        scaler = site.scaler
        if not site.unscales or scaler is None or not scaler.raises_on_fp16:
            return
        for use in site.optimizers:
            if use.unscaled is True or (use.unscaled is None and _key(use, site) in self.reported):
                continue  # an earlier call unscaled them (and was reported)
            # (unscaled on some paths only, and not reported: a path that skipped the step
            # after a clip, ``continue``, comes round to this call with them unscaled; the
            # first round does not)
            half = next((p for p in use.params if can_be_fp16(p)), None)
            if half is not None:
                self._report(site, scaler, use, half)
            else:
                self.seen.setdefault(id(use.optimizer.node), []).append(
                    (id(site.scope.function), None)
                )
                for cast in filter(can_be_fp16, use.recast):  # bfloat16 ones: MPC205
                    self._report_recast(site, scaler, use, cast)

    def _report_recast(
        self, site: TrainingSite, scaler: Scaler, use: OptimizerUse, cast: Fact
    ) -> None:
        """A cast to half of the trained model after its parameters were kept float32:
        reported at the cast, once, since the step that raises is the next one."""
        origin = cast.origin
        if origin is None or id(origin.node) in self.recasts_seen:
            return
        self.recasts_seen.add(id(origin.node))
        clause, decided = self.decided(origin.via)
        message = (
            f"`{self.ctx.code(origin.node)}` casts the model the optimizer built at "
            f"{self.line(use.optimizer.node)} trains to half precision ({origin.text}{clause}), "
            f"trainable parameters included: the next `{self.ctx.code(site.node)}` "
            f"({self.line(site.node)}) unscales float16 gradients and raises "
            '"Attempting to unscale FP16 gradients."; move the model without a dtype'
        )
        related: list[tuple[cst.CSTNode, str]] = [*decided]
        related.append((site.node, "the next step unscales the gradients here"))
        related.append((use.optimizer.node, f"the optimizer {use.optimizer.text} is built here"))
        related.append((scaler.node, _scaler_role(scaler)))
        self.report(origin.node, message, related=related)

    def _report(self, site: TrainingSite, scaler: Scaler, use: OptimizerUse, half: Fact) -> None:
        optimizer = use.optimizer
        call = self.ctx.code(site.node)
        dtype = "float16" if half.dtype == "float16" and not half.maybe else "float16 on some paths"
        clause, decided = self.decided(half.origin.via if half.origin is not None else None)
        where = self.where(half) + clause
        source = f" ({where})" if where else ""
        message = (
            f'`{call}` unscales float16 gradients and raises "Attempting to unscale FP16 '
            f'gradients.": the optimizer built at {self.line(optimizer.node)} trains '
            f"parameters that are {dtype}{source} and were not upcast to float32"
        )
        related: list[tuple[cst.CSTNode, str]] = []
        if half.origin is not None:
            related.append((half.origin.node, f"the trainable parameters are {half.origin.text}"))
        related += decided
        related.append((optimizer.node, f"the optimizer {optimizer.text} is built here"))
        related.append((scaler.node, _scaler_role(scaler)))
        self.reported.add(_key(use, site))
        pending = (site.node, message, related)
        self.seen.setdefault(id(optimizer.node), []).append((id(site.scope.function), pending))

    def finish(self) -> None:
        for sites in self.seen.values():
            for i, (function, pending) in enumerate(sites):
                if pending is None:
                    continue
                later = sites[i + 1 :]
                if any(f != function and p is None for f, p in later):
                    continue  # (a hook defined before the state the loop ends in)
                node, message, related = pending
                self.report(node, message, related=related)


_Pending = tuple[cst.CSTNode, str, list[tuple[cst.CSTNode, str]]]


def _key(use: OptimizerUse, site: TrainingSite) -> tuple[int, int]:
    return id(use.optimizer.node), id(site.scope.function)


def _scaler_role(scaler: Scaler) -> str:
    if scaler.via == "accelerate":
        when = "" if scaler.enabled else " when mixed_precision is fp16"
        return f"{scaler.text} runs a GradScaler{when}"
    if scaler.via == "transformers":
        when = "" if scaler.enabled else " when fp16 is set"
        return f"{scaler.text} makes the Trainer step through a GradScaler{when}"
    return f"the GradScaler {scaler.text} is made here"
