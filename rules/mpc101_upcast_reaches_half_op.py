"""MPC101: an explicit upcast reaches a half-precision op without a cast back."""

from __future__ import annotations

import libcst as cst

from mpcheck.api import (
    CONTAINER_LAYERS,
    LIBRARY_LAYERS,
    CallSite,
    Cause,
    Edit,
    Fix,
    Operand,
    OpKind,
    Prec,
    Rule,
    Severity,
    is_kernel,
    module_dtype,
)

LIBRARY_LAYER_NAMES = frozenset(LIBRARY_LAYERS.values())  # no ``.weight`` to cast to


class UpcastReachesHalfOp(Rule):
    code = "MPC101"
    name = "upcast-reaches-half-op"
    summary = (
        "A tensor upcast with `.float()` / `.to(torch.float32)` reaches a layer or matmul "
        "that runs in the model's half dtype, without being cast back."
    )
    why = """
        Upcasting to float32 for a numerically sensitive step (a norm, softmax, rotary
        embedding) is right, but the result must be cast back before it meets the model's own
        weights. When the model runs in float16/bfloat16 (`model.half()`,
        `torch_dtype=torch.float16`), a Linear, conv, matmul or norm whose parameters are half
        refuses a float32 input. Outside `torch.autocast` this raises on every device. Under
        autocast, matmul-like ops recast their inputs, so mpcheck stays quiet there, and so
        in a call of a model `accelerator.prepare` wrapped in its autocast (see MPC102). A
        region is autocast however the context reaches the `with`: `torch.autocast(...)`
        written there, a name bound once to it (in the function, the module, or `self.ctx`
        of the class; chosen against `nullcontext()`, or picked from a table such as
        `{"bf16": torch.autocast(...), "fp32": nullcontext()}[precision]`), a call of
        `functools.partial(torch.autocast, ...)`, or `accelerator.autocast()`; a table or
        condition that may pick `enabled=False` covers nothing. A region given
        `dtype=torch.float32` is CUDA's alone: every other device's autocast takes float16
        and bfloat16 only and turns itself off for it, so written for the CPU it covers
        nothing, and where its device is known only at run time (`device_type=x.device.type`,
        `"mps" if ... else "cuda"`) a mix inside it is a warning stating that premise
        ("latent: when this runs off CUDA: ..."), the region as its related location. Norms
        are not recast on CPU and still raise. Autocast does not recast a compiled kernel
        (natten's, a package's `_C` extension) nor a call with `out=`: in a module method,
        mpcheck also checks those as if the method ran under the CUDA autocast of
        mixed-precision training, where a softmax runs in float32 and a Linear's output is
        half (`natten2dav(torch.softmax(qk, -1), v)`), and reports a mix as a warning.

        The float32 value may come from a helper or library module that always returns
        float32 (diffusers' `Timesteps`), and the half layer may sit one module further
        down: an upcast context handed to an output block defined in the same file, or to
        a module of another project file whose `forward` runs its input straight through
        its own layers (a patch embedding), is reported at the call that hands it over.

        The float32 may also be a dtype the module wrote down when it was built: an
        `__init__(..., dtype=torch.float32)` that stores `self.dtype = dtype` (or
        `torch.get_default_dtype()`) but builds its layers without it. Casting the model
        (`model.to(device, torch.bfloat16)`, `model.half()`) casts the layers and leaves
        the attribute float32, so `x.to(self.dtype)` in `forward` makes a half input
        float32 before the first layer:

        ```python
        class VideoDiT(nn.Module):
            def __init__(self, dim, dtype=torch.float32):
                super().__init__()
                self.dtype = dtype  # still float32 after model.to(torch.bfloat16)
                self.patch = nn.Conv3d(4, dim, 2, stride=2)

            def forward(self, x):
                return self.patch(x.to(self.dtype))  # float32 input, bfloat16 weights
        ```

        Read the dtype from the weights instead (`self.patch.weight.dtype`, or a `dtype`
        property that does). mpcheck stays quiet when the layers are built with that dtype
        (the model is then made half by passing it), when another method updates the
        attribute, and when it only casts what the module returns.

        A cast to a fixed half dtype is the same hazard with the other half: a module that
        interpolates in float32 and casts back with `.to(torch.bfloat16)` (instead of to the
        dtype it came in with) hands bfloat16 to its own conv, whose weights are float16 where
        the project casts the model with `.to(torch.float16)` or `.half()` (a demo's fallback
        without bfloat16 hardware): "Input type (c10::BFloat16) and bias type (c10::Half)
        should be the same". It belongs here and not to MPC104 (parts of one model in two
        dtypes): the weights share one dtype, and it is the activation that was cast to a
        dtype of its own. mpcheck reports it only where a cast of the project writes the
        other half dtype down and reaches the class; a dtype variable (`weight_dtype`) says
        neither, and a model cast to the hard-coded dtype runs.

        Scripts, samplers and trainers count too: a model they cast to a working dtype, or a
        pipeline's `unet`/`vae` reached through `pipe`, takes its input and its conditioning
        keywords (`encoder_hidden_states=`, `pooled_projections=`) in its own dtype.
        So does an adapter dict a tuner layer leaves in the base layer's dtype: when the
        project's own upcast of adapters (`cast_adapter_dtype`) covers only some dict
        classes, the dicts it skips stay half while an input cast to the upcast adapters'
        float32 is handed to them.
        """
    symptom = """
        `RuntimeError: mat1 and mat2 must have the same dtype, but got Float and Half`
        (also `expected scalar type Float but found Half`, `Input type (float) and bias type
        (c10::Half) should be the same`, `mixed dtype (CPU): expect parameter to have scalar
        type of Float`).
        """
    how_to_fix = """
        Cast the result back to the dtype it came in with, e.g. `.to(x.dtype)` or
        `.type_as(x)`, right after the float32 computation. mpcheck's fix casts the operand to
        the weights' dtype at the call (an unsafe fix: it changes the precision of the call).
        """
    bad = """
        class Block(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.norm = nn.LayerNorm(dim)
                self.proj = nn.Linear(dim, dim)

            def forward(self, x):
                h = self.norm(x).float()
                h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
                return self.proj(h)  # float32 input, half weights
        """
    good = """
        class Block(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.norm = nn.LayerNorm(dim)
                self.proj = nn.Linear(dim, dim)

            def forward(self, x):
                h = self.norm(x).float()
                h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
                return self.proj(h.to(x.dtype))
        """
    fixable = True
    fix_applicability = "unsafe"  # it changes a precision: --unsafe-fixes

    def check_call(self, call: CallSite) -> None:
        clash = _clash(call)
        if clash is None:
            self.check_literal(call)
            self.check_through(call)
            return
        upcast, half = clash
        what = self.ctx.code(upcast.node)
        if call.is_module_call and call.receiver is not None:
            where = f"`{self.ctx.code(call.receiver.node)}` has the model's weights"
            # a layer has a ``weight``; a whole model or a container only has parameters
            module = self.ctx.exact(call.receiver.node)
            whole = (
                call.op is OpKind.MODEL
                or call.receiver.fact.layer in CONTAINER_LAYERS
                or not call.scope.in_module  # a script calls models, not bare layers
            )
            fact = call.receiver.fact
            dtype_of = (
                module_dtype(module, fact.layer, whole=whole, container=fact.container)
                if module is not None
                else None
            )
        else:
            where = f"`{self.ctx.code(half.node)}` has the model's dtype"
            source = self.ctx.exact(half.node)
            dtype_of = f"{source}.dtype" if source is not None else None
        if half.fact.prec is Prec.HALF and half.fact.dtype:
            kind = f"which are {half.fact.dtype}"
        else:
            kind = "half when the model runs in half precision"
        # ``.to(self.dtype)``: where the dtype it was cast to was decided
        clause, decided = self.decided(upcast.fact.origin.via if upcast.fact.origin else None)
        message = (
            f"`{what}` is float32 ({self.where(upcast.fact)}{clause}) but {where}, {kind}; "
            "cast it back before this call"
        )
        related = self.related_for(what, upcast.fact) + decided
        if half.fact.origin is not None and half.fact.cause in (Cause.MODEL_CAST, Cause.CONTRACT):
            related.append((half.fact.origin.node, f"the model is {half.fact.origin.text}"))
        fix = None
        library = call.receiver is not None and call.receiver.fact.layer in LIBRARY_LAYER_NAMES
        # float32 on some paths only (``if self.config.class_embed_type == "timestep":``): a
        # cast here would also recast what the other paths pass (int labels an Embedding takes)
        if dtype_of is not None and len(dtype_of) < 60 and not library and not upcast.fact.maybe:
            fix = Fix(
                f"Cast `{what}` to `{dtype_of}`",
                (Edit(upcast.node, f"{self.ctx.atom(upcast.node)}.to({dtype_of})"),),
                applicability="unsafe",
            )
        self.report_evidenced(
            call.node, message, call.scope, half.fact, related=related, fix=fix, op=call
        )

    def check_literal(self, call: CallSite) -> None:
        """``self.conv(x.to(torch.bfloat16))`` in a class the project casts to float16: the
        value the code hard-codes to one half dtype meets weights of the other."""
        evidence = call.scope.evidence
        if evidence is None or not evidence.written:
            return  # (no cast of the project writes a half dtype down for this class)
        clash = _literal_clash(call)
        if clash is None:
            return
        literal, model = clash
        dtype = literal.fact.dtype or ""
        found = evidence.cast_to_other(dtype)
        if found is None:
            return
        weights, other = found
        what = self.ctx.code(literal.node)
        if call.is_module_call and call.receiver is not None:
            where = f"`{self.ctx.code(call.receiver.node)}` has the model's weights"
        else:
            where = f"`{self.ctx.code(model.node)}` has the model's dtype"
        message = (
            f"`{what}` is {dtype} ({self.where(literal.fact)}) but {where}, which are "
            f"{weights} where the project casts the model to it ({other}); cast it to the "
            "weights' dtype instead of a fixed one"
        )
        related = self.related_for(what, literal.fact)
        if evidence.node is not None:  # (the class's place, the cast, follows it)
            note = evidence.note if other == evidence.text else None
            related.append((evidence.node, other if note is None else note))
        self.report(call.node, message, related=related)

    def check_through(self, call: CallSite) -> None:
        """``self.output(context, x)`` with ``context`` upcast: a half layer inside gets it."""
        for item in call.through:
            clash = _clash(item.site)
            if clash is None or (item.unsplit is not None and _clash(item.unsplit) is not None):
                continue
            upcast, _ = clash
            outer = next(
                (
                    o
                    for o in (*call.args, *call.kwargs.values())
                    if o.fact.origin is not None and o.fact.origin == upcast.fact.origin
                ),
                None,
            )
            if outer is None or call.receiver is None:
                continue
            what, module = self.ctx.code(outer.node), self.ctx.code(call.receiver.node)
            site = item.site
            inner = site.receiver.node if site.is_module_call and site.receiver else site.node
            inner_text = self.ctx.code(inner.func if isinstance(inner, cst.Call) else inner)
            clause, decided = self.decided(outer.fact.origin.via if outer.fact.origin else None)
            message = (
                f"`{what}` is float32 ({self.where(outer.fact)}{clause}) and `{module}` hands it "
                f"to `{inner_text}` at {self.line(item.site.node)}, which runs in the model's "
                "dtype, half when the model runs in half precision; cast it back before this call"
            )
            related = self.related_for(what, outer.fact) + decided
            related.append((item.site.node, f"`{inner_text}` gets `{what}` in float32 here"))
            fix, dtype_of = None, None
            weights = site.receiver.fact.layer if site.is_module_call and site.receiver else None
            inner_exact = self.ctx.exact(inner.func if isinstance(inner, cst.Call) else inner)
            module_exact = self.ctx.exact(call.receiver.node)
            if (
                inner_exact is not None
                and module_exact is not None
                and inner_exact.startswith("self.")
                and weights
                and weights not in LIBRARY_LAYER_NAMES
            ):
                assert site.receiver is not None
                container = site.receiver.fact.container
                dtype_of = module_dtype(
                    f"{module_exact}{inner_exact[4:]}", weights, container=container
                )
            if dtype_of is not None:  # ``self.output.dense``: of a layer with ``.weight``
                fix = Fix(
                    f"Cast `{what}` to `{dtype_of}`",
                    (Edit(outer.node, f"{self.ctx.atom(outer.node)}.to({dtype_of})"),),
                    applicability="unsafe",
                )
            half = call.receiver.fact
            self.report_evidenced(
                call.node, message, call.scope, half, related=related, fix=fix, op=call
            )
            return

    def check_ambient(self, call: CallSite) -> None:
        """A compiled kernel in a module method under a trainer's autocast: autocast does not
        recast its inputs, so a softmax it ran in float32, or a float32 weight, meets a half
        matmul output there (k-diffusion's ``natten2dav(torch.softmax(qk, -1), v)``)."""
        blind = is_kernel(call.qualname) or "out" in call.kwargs
        split = call.autocast_split() if blind else None
        region = call.scope.autocast
        if split is None or region is None or not isinstance(call.node, cst.Call):
            return
        half, full = split
        what, low = self.ctx.code(full.node), self.ctx.code(half.node)
        callee = self.ctx.code(call.node.func)
        if is_kernel(call.qualname):
            why = f"`{callee}` is a compiled kernel autocast does not recast"
        else:
            why = (
                f"autocast does not recast a call with `out=`, so `{callee}` gets them as they are"
            )
        message = (
            f"{region.premise}, `{what}` is float32 ({self.where(full.fact)}) but `{low}` is "
            f"{half.fact.dtype or 'half'} ({self.where(half.fact)}): {why}; cast `{what}` to "
            f"`{low}.dtype`"
        )
        related = self.related_for(what, full.fact) + self.related_for(low, half.fact)
        exact = self.ctx.exact(half.node)
        fix = None
        if exact is not None and len(exact) < 40:
            edit = Edit(full.node, f"{self.ctx.atom(full.node)}.to({exact}.dtype)")
            fix = Fix(f"Cast `{what}` to `{exact}.dtype`", (edit,), applicability="unsafe")
        self.report(call.node, message, related=related, fix=fix, severity=Severity.WARNING)


def _clash(call: CallSite) -> tuple[Operand, Operand] | None:
    """The upcast operand and the half one of a call that refuses to mix them."""
    if call.op in (None, OpKind.EMBEDDING) or call.is_attention or call.recast_by_autocast:
        return None
    region = call.scope.autocast
    if region is not None and region.enabled is False and not region.refused:
        # ``with autocast(enabled=False): head(feats.float())``: float32 on purpose, as MPC403
        # asks; the code runs its model under autocast, so its weights are float32 (a region
        # torch turned off for a dtype its device refuses was written to compute, not to
        # leave autocast: it says nothing of the weights)
        return None
    first, params = call.operands()
    operands = [first, *params] if first is not None else []
    if call.op is OpKind.MODEL:  # ``unet(x, t, encoder_hidden_states=e.float())``
        operands = [*params, *call.model_inputs()]
    upcast = next((o for o in operands if _is_upcast(o)), None)
    half = next((o for o in operands if o.fact.prec in (Prec.MODEL, Prec.HALF)), None)
    if upcast is None or half is None:
        return None
    if call.op is OpKind.NORM and upcast is not first:
        return None  # a low input with float32 norm parameters is supported
    return upcast, half


def _literal_clash(call: CallSite) -> tuple[Operand, Operand] | None:
    """The operand cast to a written-down half dtype (``.to(torch.bfloat16)``, ``.half()``)
    and the one in the model's dtype, of a call that refuses to mix them."""
    if call.op in (None, OpKind.EMBEDDING, OpKind.MODEL) or call.is_attention:
        return None
    if call.recast_by_autocast or call.scope.autocast is not None:
        return None  # (autocast recasts both, or says what the weights are)
    first, params = call.operands()
    if first is None:
        return None
    fact = first.fact
    if not (fact.prec is Prec.HALF and fact.cause is Cause.CAST and not fact.maybe):
        return None
    if fact.dtype not in ("float16", "bfloat16"):
        return None
    model = next((o for o in params if o.fact.prec is Prec.MODEL), None)
    return None if model is None else (first, model)


def _is_upcast(operand: Operand) -> bool:
    fact = operand.fact
    return fact.prec is Prec.FULL and fact.cause is Cause.UPCAST and not fact.zero_dim
