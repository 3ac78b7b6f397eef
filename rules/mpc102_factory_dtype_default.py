"""MPC102: a tensor made without ``dtype=`` (float32) meets the model's half activations."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from mpcheck.api import (
    LOSS_LAYERS,
    PASS_THROUGH_LAYERS,
    TAKES_DTYPE,
    Autocast,
    CallSite,
    Cause,
    Edit,
    Fact,
    Fix,
    Operand,
    OpKind,
    Prec,
    ReturnSite,
    Rule,
    RuleContext,
    Scope,
    children,
    items,
    module_dtype,
    one_path_factory,
)


@dataclass(frozen=True)
class _Mixing:
    """Where a float32 factory absorbed the model's activations (``torch.cat([x, mask])``)."""

    factory: str  # what to call the factory tensor: ``mask``
    how: str  # "`torch.cat` at line N"
    verb: str  # "concatenates it with `latents` (the model's dtype)"
    fix: Fix | None


class FactoryDtypeDefault(Rule):
    code = "MPC102"
    name = "factory-dtype-default"
    summary = (
        "A tensor made by a factory without `dtype=` (float32 by default) is concatenated, "
        "stacked, `where`'d or added into the model's activations, or fed to a layer that runs "
        "in the model's half dtype."
    )
    why = """
        `torch.ones`, `torch.zeros`, `torch.full`, `torch.randn`, `torch.linspace` and
        `torch.tensor([1.0, ...])` make float32 tensors unless told otherwise, and an int64
        `torch.arange` turns float32 as soon as it is divided or exponentiated. When the model
        runs in float16/bfloat16, `torch.cat`, `torch.stack`, `torch.where` and `+` promote
        the half activations to float32 without a word, and the next Linear, conv or matmul
        with half weights raises. The error shows up there, a few lines (or files) after the
        factory that caused it, which is why mpcheck reports the factory: once the float32
        result reaches a layer, a matmul, attention or a submodule, or leaves a module's
        `forward` (where the next layer takes it). A float32 result that only feeds a loss,
        is cast back (`.to(x.dtype)`) or is written into a buffer in place is harmless and
        not reported.

        Data is float32 as loaded too: the items of a data loader's batch
        (`batch["pixel_values"]`, cached `batch["prompt_embeds"]`) and a processor's
        `return_tensors="pt"` output reach a model cast to half the same way, and so do a
        scheduler's float32 tables (`alphas_cumprod[timesteps]`) and noise that a sampler's
        `step` adds to the sample it hands back to the model. Token ids, labels and
        attention masks are int64 by name and not reported. Loaded data is reported where it
        was last carried on before the model (where the cast belongs), with the load as a
        related location.

        A float32 buffer registered with `persistent=False` in a class that `from_pretrained`
        loads (diffusers' `ModelMixin`, transformers' `PreTrainedModel`) stays float32 too:
        `from_pretrained(torch_dtype=torch.float16)` loads the checkpoint's tensors in float16
        without casting the module, and a non-persistent buffer is not in the checkpoint. It is
        reported where it is read into the activations (`hidden_states + self.pos_embed`),
        with the `register_buffer` as a related location.

        Factory kwargs reach only what they are handed: a module whose `__init__` takes
        `dtype` and hands it on (`nn.Linear(..., **factory_kwargs)`) is made half by building
        it with `dtype=torch.bfloat16`, and a parameter or buffer it makes without that dtype
        (`nn.Parameter(torch.ones(n, device=device))`) stays float32. When nothing casts the
        module once built, that factory is reported where the parameter meets the half
        activations; code that upcasts to meet it (mamba's MIMO weights) is right.

        Python scalars and 0-dim tensors (`torch.tensor(1.0)`, `torch.full((), 0.0)`, a
        loss) never promote a tensor, and integer or bool tensors used as indices or masks
        are fine. Under `torch.autocast`,
        matmul-like layers recast their inputs, so a float32 input only raises outside it.
        A model `accelerator.prepare` returned on every path runs its `forward` under that
        autocast too when the accelerator's mixed precision is fp16 or bf16 (accelerate wraps
        it; not under DeepSpeed, which casts the model instead). A mixed precision set at
        launch time may be `no`, so then only a model whose half dtype follows it (a
        `weight_dtype` chosen by `accelerator.mixed_precision`) is covered, not one loaded in
        half whatever the run; and a frozen half model that was never prepared is reported.
        Attention inputs (`q`, `k`, `v`) that reach attention with a factory's float32 are
        reported by MPC103, unless a concatenation already mixed them here.

        A layer is made by a factory too: `nn.Conv2d(...)` / `nn.Linear(...)` built on its own,
        outside any model, without `dtype=` has float32 weights. Fed a tensor that a sampler or
        script cast to the run's working dtype (`mask.to(dtype=train_dtype)`), it refuses that
        input on half runs ("Input type (torch.HalfTensor) and weight type
        (torch.FloatTensor) should be the same"); it is reported where it is built. A float32
        norm is not: it takes a half input and returns its dtype.

        A placeholder built empty (`self.pe = torch.zeros(0, d)` or a buffer registered so in
        `__init__`, a 0 in its shape) that the class rebuilds whenever a size test finds it
        too small (`if self.pe.size(0) < n: self.pe = ...`, or `if self.pe.size(0) >= n:
        return` before the rebuild) holds no element: every input with a position meets the
        table rebuilt for it, so its own float32 is not reported (it is where the class reads
        its dtype or hands it to a call, `torch.cat([self.pe, k])`). A table built with one
        row is no placeholder: a length-1 input meets it as built.

        A factory made on one path only (an optional state's default, `if state is None:
        state = torch.zeros(...)`, a cache entry's float32 keys returned when a cache is
        passed) is reported where that path joins the activations (a concatenation, a layer,
        a matmul, attention, an input a submodule feeds its layers), in a module's method or a
        sampler; in a script, where what takes the result (a model run
        under autocast, a loss computed in float32) is not seen at the join or the
        arithmetic that mixes it in, only where it reaches a layer.
        """
    symptom = """
        `RuntimeError: Input type (float) and bias type (c10::Half) should be the same` (a mask
        concatenated with half latents, then a half conv), `mat1 and mat2 must have the same
        dtype, but got Float and Half` (a float32 sinusoidal timestep embedding into a half
        `linear_1`), `expected scalar type Float but found Half` (matmul).
        """
    how_to_fix = """
        Make the tensor in the dtype of the activations it meets: `torch.ones_like(x)`,
        `x.new_zeros(...)`, `torch.ones(..., dtype=x.dtype)`, or cast it before it meets them
        (`emb.to(sample.dtype)`). mpcheck's fix adds `dtype=<other operand>.dtype` to the
        factory when that operand is an input of the same function (an unsafe fix: it changes
        the factory's dtype everywhere it is used).
        """
    bad = """
        class InpaintUNet(nn.Module):
            def forward(self, latents, masked_latents):
                mask = torch.ones(latents.shape[0], 1, *latents.shape[2:])  # float32
                sample = torch.cat([latents, mask, masked_latents], dim=1)  # now float32
                return self.conv_in(sample)  # half conv: raises
        """
    good = """
        class InpaintUNet(nn.Module):
            def forward(self, latents, masked_latents):
                mask = torch.ones_like(latents[:, :1])
                sample = torch.cat([latents, mask, masked_latents], dim=1)
                return self.conv_in(sample)
        """
    fixable = True
    fix_applicability = "unsafe"  # it changes a precision: --unsafe-fixes

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        self.mixings: dict[int, _Mixing] = {}  # id of the mixing call -> how it mixed

    def check_call(self, call: CallSite) -> None:
        result = call.result
        if _factory(result) and result.mixed is not None and result.mixed.node is call.node:
            self.record_mixing(call, result)
        self.check_default_path(call)
        if call.op in (None, OpKind.EMBEDDING) and call.is_module_call:
            self.check_module_input(call)
        elif call.is_attention:
            self.check_attention(call)
        elif call.op not in (None, OpKind.EMBEDDING):
            self.check_consumer(call)

    def check_return(self, site: ReturnSite) -> None:
        """``return x + drop * mask``: a module's output that a factory made float32, or a
        sampler's next sample (``prev_sample + eta * torch.randn(shape)``)."""
        function = site.scope.function
        if function is None:
            return
        if not site.scope.sampler and not (
            site.scope.in_module and function.name.value == "forward"
        ):
            return  # only a forward's output, or a sampler's next sample, feeds the model next
        if _autocast(site.scope.autocast):
            return
        values = [site.value] if site.value.fact.is_tensor else list(items(site.value))
        for value in values:
            mixing = self.mixing_of(value.fact, one_path=site.scope.sampler)
            if mixing is not None:
                what = "the output of `forward`, which the next half-precision layer rejects"
                if site.scope.sampler:
                    what = f"the next sample from `{function.name.value}`, which goes back "
                    what += "into the model"
                sink = f"is returned at {self.line(site.node)} as {what}"
                self.report_mixed(value.fact, mixing, site.node, sink, "returned here", site.scope)
                return

    def record_mixing(self, call: CallSite, result: Fact) -> None:
        """``torch.cat([latents, mask])``: remember how; report if the result reaches a layer.

        A float32 result that only feeds a loss, is cast back (``.to(x.dtype)``) or is
        written into a buffer (``copy_``, ``+=``) is harmless, so the mixing itself is not
        reported: the layer, attention, submodule or ``forward`` return it reaches is.
        """
        operands = _operands(call)
        factory = next((o for o in operands if _same_origin(o.fact, result)), None)
        low = next((o for o in operands if _low(o.fact)), None)
        if factory is None or low is None or result.origin is None:
            return
        if _autocast(call.scope.autocast):
            return  # the next matmul-like layer recasts its input under autocast
        if not _joins(call) and not _activation(low, call):
            return  # arithmetic on weights or on a helper's arguments: see `_activation`
        if isinstance(call.node, cst.Call):
            how = f"`{self.ctx.code(call.node.func)}` at {self.line(call.node)}"
        else:
            how = f"the `{_OPERATORS.get(call.aten, call.aten)}` at {self.line(call.node)}"
        low_text, low_desc = self.ctx.code(low.node), _describe(low.fact)
        verb = _verb(call).format(other=f"`{low_text}` ({low_desc})")
        name = self._name(factory.node, result)
        self.mixings[id(call.node)] = _Mixing(name, how, verb, self._fix(call, result, low))

    def mixing_of(self, fact: Fact, *, one_path: bool = False) -> _Mixing | None:
        """How ``fact`` absorbed the activations: on every path, or (``one_path``) on one,
        as a sampler's ``if eta > 0: prev_sample = prev_sample + noise`` does, or a buffer
        left in float32 (``Fact.float32_buffer``)."""
        if fact.mixed is None:
            return None
        if not (_factory(fact) or fact.float32_buffer or (one_path and one_path_factory(fact))):
            return None
        return self.mixings.get(id(fact.mixed.node))

    def report_mixed(
        self,
        fact: Fact,
        mixing: _Mixing,
        sink: cst.CSTNode,
        where: str,
        note: str,
        scope: Scope,
        half: Fact | None = None,
    ) -> None:
        """Report at the factory: how it absorbed the activations, and where that raises."""
        assert fact.origin is not None and fact.mixed is not None
        message = (
            f"`{mixing.factory}` is {fact.origin.text}; {mixing.how} {mixing.verb}, so the "
            f"result is float32 and {where}"
        )
        related = [*_loaded(fact), (fact.mixed.node, f"{mixing.verb} here"), (sink, note)]
        self.report_evidenced(
            fact.origin.node, message, scope, half, related=related, fix=mixing.fix
        )

    def check_default_path(self, call: CallSite) -> None:
        """``if state is None: state = torch.zeros(...)``, then ``torch.cat([state, h])`` or
        ``self.hh(state)``: the factory path is a real one (the default), so it is reported
        although the other path's dtype is whatever the caller passed."""
        if _autocast(call.scope.autocast) or call.recast_by_autocast:
            return
        if _joins(call) or call.aten in _OPERATORS:
            operands = _operands(call)
        elif call.op not in (None, OpKind.EMBEDDING):  # a layer, a matmul, attention
            first, params = call.operands()
            operands = [first, *params] if first is not None else []
            if call.op is OpKind.MODEL:  # ``self.fusion(x, residual)``: what it feeds too
                operands += [o for o in call.model_inputs() if o is not first]
        else:
            return
        default = next((o for o in operands if one_path_factory(o.fact)), None)
        low = next((o for o in operands if _low(o.fact) and o is not default), None)
        if default is None or low is None or default.fact.origin is None:
            return
        if (_joins(call) or call.aten in _OPERATORS) and not (
            call.scope.in_module or call.scope.sampler
        ):
            # a script's concatenation or arithmetic: the result is no hazard by itself (a
            # float32 loss input, a value cast back), and what takes it is judged there
            return
        if not (_joins(call) or call.op is not None) and not _activation(low, call):
            return
        origin = default.fact.origin
        name = self._name(default.node, default.fact)
        if _joins(call) or call.aten in _OPERATORS:
            verb = _verb(call).format(other=f"`{self.ctx.code(low.node)}` ({_describe(low.fact)})")
            where = f"{self._call_text(call)} {verb}, so the result is float32 on that path"
        else:
            target = call.receiver.node if call.is_module_call and call.receiver else call.node
            where = (
                f"it reaches `{self.ctx.code(target)}` at {self.line(call.node)}, which runs in "
                "the model's dtype and raises when that is half"
            )
        path = (
            "the default when none is passed"
            if default.fact.defaulted
            else f"the path through {self.line(origin.node)}"
        )
        message = f"`{name}` is {origin.text} on one path ({path}); {where}"
        related = [(call.node, "meets the model's activations here")]
        fix = self._fix(call, default.fact, low)
        self.report_evidenced(
            origin.node, message, call.scope, low.fact, related=related, fix=fix, op=call
        )

    def _call_text(self, call: CallSite) -> str:
        if isinstance(call.node, cst.Call):
            return f"`{self.ctx.code(call.node.func)}` at {self.line(call.node)}"
        return f"the `{_OPERATORS.get(call.aten, call.aten)}` at {self.line(call.node)}"

    def check_module_input(self, call: CallSite) -> None:
        """``self.decoder(inputs_embeds=x)``: a submodule that runs in the model's dtype."""
        module = call.receiver
        if module is None or module.fact.prec not in (Prec.MODEL, Prec.HALF):
            return
        layer = module.fact.layer
        if layer in LOSS_LAYERS or layer in PASS_THROUGH_LAYERS:
            return  # a loss follows its inputs; a pass-through layer hands them on
        if _autocast(call.scope.autocast):
            return
        for operand in _operands(call, receiver=False):
            mixing = self.mixing_of(operand.fact)
            if mixing is not None:
                name = self.ctx.code(module.node)
                where = (
                    f"reaches `{name}` at {self.line(call.node)}, which runs in the model's "
                    "dtype and raises when that is half"
                )
                note = f"`{name}` runs in the model's dtype here"
                self.report_mixed(
                    operand.fact, mixing, call.node, where, note, call.scope, module.fact
                )
                return

    def check_attention(self, call: CallSite) -> None:
        """A KV cache concatenated from a float32 factory: MPC103 leaves it to this rule."""
        if call.recast_by_autocast:
            return
        first, params = call.operands()
        operands = [first, *params] if first is not None else []
        if not any(_low(o.fact) for o in operands):
            return
        for operand in operands:
            mixing = self.mixing_of(operand.fact)
            if mixing is not None:
                what = self.ctx.code(
                    call.node.func if isinstance(call.node, cst.Call) else call.node
                )
                where = (
                    f"reaches `{what}` at {self.line(call.node)}, which needs one dtype for all "
                    "of its inputs and raises when the model runs in half precision"
                )
                low = next((o.fact for o in operands if _low(o.fact)), None)
                note = "attention runs here"
                self.report_mixed(operand.fact, mixing, call.node, where, note, call.scope, low)
                return

    def check_consumer(self, call: CallSite) -> None:
        """``self.linear_1(t_emb)``: a float32 factory tensor reaches a half layer/matmul."""
        if call.recast_by_autocast:
            return  # autocast recasts the inputs of matmul-like layers
        self.check_default_layer(call)
        first, params = call.operands()
        operands = [first, *params] if first is not None else []
        if call.op is OpKind.MODEL:  # ``unet(x, t, encoder_hidden_states=e)``: e counts too
            operands = [*params, *call.model_inputs()]
        low = next((o for o in operands if _low(o.fact)), None)
        if low is None:
            return
        for factory in operands:
            fact = factory.fact
            if not (_factory(fact) or fact.float32_buffer):
                continue
            if not (call.op is OpKind.NORM and factory is not first):
                # (a half input with float32 norm parameters is supported)
                self.report_consumed(call, factory, low)

    def check_default_layer(self, call: CallSite) -> None:
        """``kernel = nn.Conv2d(1, 1, 5)`` built on its own (float32, never cast), then
        ``kernel(mask)`` of a mask in the model's or the working dtype: its weights are the
        factory's float32, and the layer refuses the half input."""
        module, (first, _) = call.receiver, call.operands()
        if not call.is_module_call or module is None or call.owner is not None:
            return  # a part of a model: MPC104 follows how it was cast apart
        if call.op not in (OpKind.LINEAR, OpKind.CONV, OpKind.RECURRENT):
            return  # a float32 norm takes a half input and returns its dtype
        if first is None or not _low(first.fact) or not module.fact.default_float32_layer:
            return
        origin = module.fact.origin
        assert origin is not None
        name, x = self.ctx.code(module.node), self.ctx.code(first.node)
        message = (
            f"`{name}` is a `{module.fact.layer}` {origin.text} at {self.line(origin.node)} "
            f"and never cast; it is fed `{x}` ({self.where(first.fact)}) at "
            f"{self.line(call.node)}, and its float32 weights refuse that input when it is half"
        )
        related = [(call.node, f"`{x}` reaches the float32 `{name}` here")]
        self.report_evidenced(
            origin.node, message, call.scope, first.fact, related=related, op=call
        )

    def report_consumed(self, call: CallSite, factory: Operand, low: Operand) -> None:
        """Report a float32 tensor ``factory`` that a half consumer ``call`` takes in."""
        fact = factory.fact
        assert fact.origin is not None
        if fact.cause is Cause.DATA and call.casts_pixel_values:
            return  # loaded data into an encoder that casts it itself
        target = call.receiver.node if call.is_module_call and call.receiver else call.node
        name = self.ctx.code(target)
        where = (
            f"reaches `{name}` at {self.line(call.node)}, which runs in the model's dtype and "
            "raises when that is half"
        )
        mixing = self.mixing_of(fact)
        if mixing is not None:
            note = f"`{name}` runs in the model's dtype here"
            self.report_mixed(fact, mixing, call.node, where, note, call.scope, low.fact)
            return
        message = f"`{self._name(factory.node, fact)}` is {fact.origin.text}; it {where}"
        related = _loaded(fact)
        if fact.mixed is not None:
            message += f" (it absorbed the model's activations at {self.line(fact.mixed.node)})"
            related.append((fact.mixed.node, f"mixed with {fact.mixed.text} here"))
        related.append((call.node, f"`{name}` runs in the model's dtype here"))
        fix = self._fix(call, fact, low)
        self.report_evidenced(
            fact.origin.node, message, call.scope, low.fact, related=related, fix=fix, op=call
        )

    # -- helpers -------------------------------------------------------------------------
    def _name(self, node: cst.CSTNode, fact: Fact) -> str:
        """What to call the factory tensor: its name where it is used, or the factory call."""
        if isinstance(node, (cst.Name, cst.Attribute)) or fact.origin is None:
            return self.ctx.code(node)
        return _short(self.ctx, fact.origin.node)

    def _fix(self, call: CallSite, fact: Fact, low: Operand) -> Fix | None:
        """Add ``dtype=<low>.dtype`` to the factory, when ``low`` is visible there."""
        origin = fact.origin
        if origin is None or origin.cause is not Cause.FACTORY:
            return None
        factory = origin.node
        function = call.scope.function
        if not isinstance(factory, cst.Call) or function is None:
            return None
        if self.ctx.imports.resolve(factory.func) not in TAKES_DTYPE:
            return None  # a helper made it, or a call without ``dtype=`` (``torch.where``)
        if not _contains(function, factory):
            return None
        if any(a.star == "**" for a in factory.args):
            return None
        dtype = None
        if isinstance(low.node, cst.Name) and _is_param_of(low, function):
            dtype = f"{low.node.value}.dtype"
        elif call.is_module_call and (self.ctx.exact(low.node) or "").startswith("self."):
            receiver = call.receiver
            layer = receiver.fact.layer if receiver is not None else None
            whole = call.op is OpKind.MODEL or (receiver is not None and receiver.fact.container)
            dtype = module_dtype(self.ctx.exact(low.node) or "", layer, whole=whole)
        if dtype is None:
            return None
        if not factory.args:
            return None
        if factory.lpar:
            return None  # ``(torch.zeros(n))``: the call's span would not hold its parentheses
        # Rebuild the call with one more argument and replace the call as a whole: a
        # parenthesised last argument (``torch.zeros((b, 1, h, w))``) keeps its parentheses,
        # a multi-line call its layout, and a trailing comma stays after the new argument.
        *head, last = factory.args
        new_arg = cst.Arg(
            cst.parse_expression(dtype),
            keyword=cst.Name("dtype"),
            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
            comma=last.comma,  # the magic trailing comma (and its line break) moves along
        )
        last = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        rebuilt = factory.with_changes(args=[*head, last, new_arg])
        edit = Edit(factory, self.ctx.module.code_for_node(rebuilt))
        return Fix(f"Pass `dtype={dtype}`", (edit,), applicability="unsafe")


def _factory(fact: Fact) -> bool:
    return fact.default_float32


def _loaded(fact: Fact) -> list[tuple[cst.CSTNode, str]]:
    """Where loaded data was loaded, when it is reported where it was last carried on."""
    via = fact.origin.via if fact.origin is not None else None
    if via is None:
        return []
    note = "registered here" if via.cause is Cause.BUFFER else "loaded here, in float32"
    return [(via.node, note)]


def _low(fact: Fact) -> bool:
    return fact.is_tensor and fact.prec in (Prec.MODEL, Prec.HALF) and not fact.zero_dim


def _autocast(region: Autocast | None) -> bool:
    """Inside an enabled autocast region: matmul-like layers recast a float32 input."""
    return region is not None and region.active


def _activation(operand: Operand, call: CallSite) -> bool:
    """Whether arithmetic with ``operand`` is arithmetic on the model's activations.

    Not on its weights (re-parametrisation sums end in ``copy_``, which casts back), and not
    on an argument of a free helper function, which may as well be a Python float
    (``sigma``, ``gamma``): only a model's ``forward`` inputs are activations for sure.
    """
    origin = operand.fact.origin
    if origin is None or origin.cause is Cause.PARAMETER:
        return False
    return call.scope.in_module or call.scope.sampler or not isinstance(origin.node, cst.Param)


def _same_origin(fact: Fact, result: Fact) -> bool:
    return (
        fact.origin is not None
        and result.origin is not None
        and fact.origin.node is result.origin.node
    )


def _describe(fact: Fact) -> str:
    if fact.prec is Prec.HALF and fact.dtype:
        return fact.dtype
    return "the model's dtype"


def _operands(call: CallSite, *, receiver: bool = True) -> list[Operand]:
    """Every tensor operand of a call, with the elements of ``torch.cat([a, b])`` lists."""
    out: list[Operand] = []
    if receiver and call.method is not None and call.receiver is not None:
        out.append(call.receiver)
    for op in [*call.args, *call.kwargs.values()]:
        out += [op] if op.fact.is_tensor else list(items(op))
    return [o for o in out if o.fact.is_tensor]


_OPERATORS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floor_divide": "//"}


def _joins(call: CallSite) -> bool:
    """``torch.cat`` / ``torch.stack`` / ``torch.where``: they build activations."""
    leaf = (call.qualname or call.method or "").rsplit(".", 1)[-1]
    return leaf.endswith("stack") or leaf in ("cat", "concat", "concatenate", "where")


def _verb(call: CallSite) -> str:
    """How the call mixes the factory tensor with ``{other}``."""
    leaf = (call.qualname or call.method or "").rsplit(".", 1)[-1]
    if leaf.endswith("stack"):
        return "stacks it with {other}"
    if leaf in ("cat", "concat", "concatenate"):
        return "concatenates it with {other}"
    if leaf == "where":
        return "selects between it and {other}"
    if leaf == "add":
        return "adds it to {other}"
    if leaf == "mul":
        return "multiplies it with {other}"
    return "combines it with {other}"


def _short(ctx: RuleContext, node: cst.CSTNode) -> str:
    """``torch.ones(...)`` for a long factory call."""
    code = ctx.code(node)
    if isinstance(node, cst.Call) and len(code) > 40:
        return f"{ctx.code(node.func)}(...)"
    return code


def _is_param_of(operand: Operand, function: cst.FunctionDef) -> bool:
    origin = operand.fact.origin
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return origin is not None and any(origin.node is p for p in every)


def _contains(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    stack = [root]
    while stack:
        current = stack.pop()
        if current is node:
            return True
        stack.extend(children(current))
    return False
