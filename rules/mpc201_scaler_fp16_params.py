"""MPC201: a GradScaler unscales the gradients of float16 parameters."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from mpcheck.api import (
    Branches,
    Cause,
    Choice,
    Fact,
    OptimizerUse,
    Origin,
    Rule,
    RuleContext,
    Scaler,
    Severity,
    TrainingSite,
    can_be_fp16,
    scaler_choices,
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
        each call passes it. A call that passes none (nor `None`) to a parameter defaulting
        to `None`, or to the `**kwargs`, loads as `from_pretrained` without a dtype does:
        float32, transformers' default up to its version 4, the one modelled here.
        (transformers 5 loads without a dtype as `dtype="auto"` does; pass
        `torch_dtype=torch.float32` to keep float32 master weights on either.)
        `torch_dtype or torch.float16` is float16 whenever the caller leaves `torch_dtype`
        None, its default. `torch_dtype="auto"` loads the dtype the checkpoint is stored in:
        half if it is stored so, which the code does not say.

        Severity follows the evidence. An error when the code shows both the float16
        parameters and the scaler on: a load or cast in float16 the code makes (on every
        run, or on a path an option of the run takes) beside a scaler made enabled
        (`GradScaler()`, `fp16=True`, `mixed_precision="fp16"`, or
        `torch.cuda.is_available()`, true on every run a CUDA scaler scales), or a cast made
        on the very choice of the run that turns the scaler on (`weight_dtype = torch.float16` under
        `accelerator.mixed_precision == "fp16"` beside accelerate's scaler, or under the test
        a GradScaler's `enabled=` reads; an option is one by its name, whatever object holds
        it). When either rests on a choice the code leaves to the run, it is a warning whose
        message says what the run must choose ("raises ... when the run sets fp16 and makes
        the trained parameters float16"): `fp16` parsed by `HfArgumentParser`, spread from
        `**config` or handed in as `TrainingArguments`; a dtype picked by an option that is
        not the scaler's (`enabled=args.amp` beside `--precision fp16`); a dtype handed in
        (a parameter), which may be either half; `torch_dtype="auto"`; a scaler handed in by
        a caller the project does not show. A dtype decided in another file is a premise
        too: only the tests of the file that uses it are read.
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
        self.branches = Branches(ctx.module)

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
        premise = self.premise(scaler, cast)
        when = "" if premise is None else f" when the run {premise}"
        message = (
            f"`{self.ctx.code(origin.node)}` casts the model the optimizer built at "
            f"{self.line(use.optimizer.node)} trains to half precision ({origin.text}{clause}), "
            f"trainable parameters included: the next `{self.ctx.code(site.node)}` "
            f"({self.line(site.node)}) unscales float16 gradients and raises "
            f'"Attempting to unscale FP16 gradients."{when}; move the model without a dtype'
        )
        related: list[tuple[cst.CSTNode, str]] = [*decided]
        related.append((site.node, "the next step unscales the gradients here"))
        related.append((use.optimizer.node, f"the optimizer {use.optimizer.text} is built here"))
        related.append((scaler.node, _scaler_role(scaler)))
        severity = None if premise is None else Severity.WARNING
        self.report(origin.node, message, related=related, severity=severity)

    def _report(self, site: TrainingSite, scaler: Scaler, use: OptimizerUse, half: Fact) -> None:
        optimizer = use.optimizer
        call = self.ctx.code(site.node)
        dtype = "float16" if half.dtype == "float16" and not half.maybe else "float16 on some paths"
        clause, decided = self.decided(half.origin.via if half.origin is not None else None)
        where = self.where(half) + clause
        source = f" ({where})" if where else ""
        premise = self.premise(scaler, half)
        when = "" if premise is None else f" when the run {premise}"
        message = (
            f'`{call}` unscales float16 gradients and raises "Attempting to unscale FP16 '
            f'gradients."{when}: the optimizer built at {self.line(optimizer.node)} trains '
            f"parameters that are {dtype}{source} and were not upcast to float32"
        )
        related: list[tuple[cst.CSTNode, str]] = []
        if half.origin is not None:
            related.append((half.origin.node, f"the trainable parameters are {half.origin.text}"))
        related += decided
        related.append((optimizer.node, f"the optimizer {optimizer.text} is built here"))
        related.append((scaler.node, _scaler_role(scaler)))
        self.reported.add(_key(use, site))
        pending = (site.node, message, related, None if premise is None else Severity.WARNING)
        self.seen.setdefault(id(optimizer.node), []).append((id(site.scope.function), pending))

    def finish(self) -> None:
        for sites in self.seen.values():
            for i, (function, pending) in enumerate(sites):
                if pending is None:
                    continue
                later = sites[i + 1 :]
                if any(f != function and p is None for f, p in later):
                    continue  # (a hook defined before the state the loop ends in)
                node, message, related, severity = pending
                self.report(node, message, related=related, severity=severity)

    def premise(self, scaler: Scaler, half: Fact) -> str | None:
        """What a run must choose for the unscale to raise, or None when the code itself
        shows it: the parameters float16 on every run (a load or cast in float16 the code
        makes unconditionally) and the scaler on, or the cast made on a choice of the run that
        turns the scaler on (``weight_dtype = torch.float16`` under
        ``accelerator.mixed_precision == "fp16"``, accelerate's scaler). A float16 that rests
        on another option (a dtype from the command line), or on what a checkpoint stores
        (``torch_dtype="auto"``), and a scaler that the run turns on (``fp16`` parsed from
        the command line, ``enabled=args.amp``), are premises: the finding is a warning."""
        contract = half.cause is Cause.CONTRACT
        half_sure = half.dtype == "float16" and not half.maybe and not contract
        scaler_sure = scaler.enabled is True
        if scaler_sure and half.dtype == "float16" and not contract:
            return None  # (a scaler on every run: any path the code casts to float16 raises)
        cast = self._chosen(half.origin)
        if not contract and any(way <= cast for way in scaler_choices(scaler, self.branches)):
            return None  # (float16 only on runs that turn the scaler on)
        premises = [] if scaler_sure else [_scaler_premise(scaler, self.ctx.code)]
        if contract:
            premises.append("loads a checkpoint stored in float16")
        elif not half_sure:
            premises.append("makes the trained parameters float16")
        return " and ".join(premises)

    def _chosen(self, origin: Origin | None) -> frozenset[Choice]:
        """The choices of the run under which the cast or load ``origin`` and the decision
        of the dtype it uses (``weight_dtype = torch.float16``) are made: each must hold for
        the parameters to be float16 (only nodes of this file say; another file's do not)."""
        if origin is None:
            return frozenset()
        found = self.branches.choices(origin.node)
        if origin.via is not None:
            found |= self.branches.choices(origin.via.node)
        return found


_Pending = tuple[cst.CSTNode, str, list[tuple[cst.CSTNode, str]], Severity | None]


def _scaler_premise(scaler: Scaler, code: Callable[[cst.CSTNode], str]) -> str:
    """What the run must choose for ``scaler`` to be on (quoting what turns it on)."""
    if isinstance(scaler.node, cst.Param) and scaler.via == "torch":
        return f"hands the function an enabled GradScaler as `{scaler.node.name.value}`"
    keyword = {"transformers": "fp16", "accelerate": "mixed_precision"}.get(scaler.via, "enabled")
    given = f" (`{keyword}={code(scaler.flag)}`)" if scaler.flag is not None else ""
    if scaler.via == "transformers":
        return f"sets fp16{given}"
    if scaler.via == "accelerate":
        return f"runs accelerate in fp16 mixed precision{given}"
    return f"enables the GradScaler{given}"


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
