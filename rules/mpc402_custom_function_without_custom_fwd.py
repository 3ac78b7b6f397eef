"""MPC402: a matmul-like ``autograd.Function`` used with autocast lacks custom_fwd/bwd."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from mpcheck.api import (
    AUTOGRAD_FUNCTIONS,
    CallSite,
    ClassSite,
    Decorator,
    FunctionSite,
    Operand,
    OpKind,
    Rule,
    RuleContext,
    Severity,
    dotted,
    input_names,
    is_kernel,
)

# Ops that autocast recasts in forward and that refuse mixed dtypes in backward.
_MIXING_OPS = frozenset({OpKind.LINEAR, OpKind.CONV, OpKind.MATMUL, OpKind.ATTENTION})
_SCALERS = frozenset(
    {
        "torch.amp.GradScaler",
        "torch.cuda.amp.GradScaler",
        "torch.cpu.amp.GradScaler",
        "torch.cuda.amp.grad_scaler.GradScaler",
    }
)


@dataclass
class _Candidate:
    """A `torch.autograd.Function` of the file, and the custom_fwd/bwd decorators it lacks."""

    node: cst.ClassDef
    forward: cst.FunctionDef
    backward: cst.FunctionDef
    missing: list[str] = field(default_factory=list)


class CustomFunctionWithoutCustomFwd(Rule):
    code = "MPC402"
    name = "custom-function-without-custom-fwd"
    summary = (
        "A `torch.autograd.Function` whose forward and backward do matmul-like work, in a file "
        "that uses autocast, lacks `@torch.amp.custom_fwd` on `forward` or "
        "`@torch.amp.custom_bwd` on `backward`."
    )
    why = """
        Autocast is a thread-local mode: it is on while `forward` runs (so a matmul in it
        returns float16/bfloat16 and its gradient arrives in that dtype), but `loss.backward()`
        normally runs after the `with` block, so `backward` runs with autocast off. There the
        low-precision gradient meets the float32 tensors saved in `forward` (inputs, weights)
        in a plain matmul, which refuses mixed dtypes. `@torch.amp.custom_bwd` runs `backward`
        under the same autocast state as `forward`; `@torch.amp.custom_fwd` records that state
        (and with `cast_inputs=torch.float32` runs `forward` in float32 instead). Measured with
        torch 2.13 under `torch.autocast("cpu", dtype=torch.bfloat16)`: a custom linear
        Function without the decorators, or with `custom_fwd` alone, raises in `backward`;
        with both it runs, and `custom_bwd` alone fails with `AttributeError: ... no attribute
        '_fwd_used_autocast'`. Hence an error.

        mpcheck reports a Function only when both `forward` and `backward` call a linear,
        conv, matmul or attention op (elementwise Functions promote and work), and only in a
        file that uses autocast (an autocast region, a GradScaler, or another Function with
        `custom_fwd`): the check is per file, so a Function defined in a library module and
        used under autocast elsewhere is not reported. A `forward` that never computes under
        autocast is fine without `custom_bwd`: one decorated with `autocast(enabled=False)` or
        with `custom_fwd(cast_inputs=torch.float32)` (autocast is off inside and the inputs
        share one dtype, so output, gradient and saved tensors agree; measured), or one whose
        matmuls run in a `with autocast(..., enabled=False)` block. A `forward` or `backward`
        with a decorator mpcheck cannot see into (`custom_fwd(...)` kept in a variable, another
        library's decorator) is not reported either, nor a `backward` that enters autocast
        itself (DeepSpeed re-enters the state `forward` recorded: what `custom_bwd` does).

        A Function whose `forward` hands its tensors to a compiled kernel (a package's `_C`
        extension) is also reported where a module method calls it with a half and a float32
        tensor as if under the CUDA autocast of mixed-precision training (a Linear's output
        and a softmax's), as a warning: autocast does not
        recast the kernel, so it gets both. `custom_fwd(cast_inputs=torch.float32)` hands it
        float32 tensors. Likewise a `forward` that hands two of its inputs to a matmul with
        `out=` (autocast does not recast calls with `out=`) without casting them to one dtype:
        under autocast a half activation meets a float32 weight there (measured on CPU
        autocast: `expected m1 and m2 to have the same dtype`).
        """
    symptom = """
        `RuntimeError: expected m1 and m2 to have the same dtype, but got: c10::Half != float`
        (or `mat1 and mat2 must have the same dtype`) from the Function's `backward` during
        `loss.backward()`; the forward pass ran fine.
        """
    how_to_fix = """
        Decorate the static methods, below `@staticmethod`, with the autocast device the code
        runs on: `@torch.amp.custom_fwd(device_type="cuda")` on `forward` and
        `@torch.amp.custom_bwd(device_type="cuda")` on `backward` (torch >= 2.4; older code
        spells them `@torch.cuda.amp.custom_fwd` / `custom_bwd`, and so does the message when
        `target-torch-version` is below 2.4). If `forward` must run in
        float32 (a custom kernel), use `custom_fwd(device_type="cuda",
        cast_inputs=torch.float32)`. The decorators take the device, so the CPU autocast needs
        `device_type="cpu"`. No automatic fix: the device is a choice.
        """
    bad = """
        class LinearFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                ctx.save_for_backward(x, weight)
                return x @ weight.t()

            @staticmethod
            def backward(ctx, grad):
                x, weight = ctx.saved_tensors
                return grad @ weight, grad.t() @ x  # half grad @ float32 weight


        with torch.autocast("cuda"):
            loss = LinearFn.apply(x, weight).sum()
        scaler.scale(loss).backward()
        """
    good = """
        class LinearFn(torch.autograd.Function):
            @staticmethod
            @torch.amp.custom_fwd(device_type="cuda")
            def forward(ctx, x, weight):
                ctx.save_for_backward(x, weight)
                return x @ weight.t()

            @staticmethod
            @torch.amp.custom_bwd(device_type="cuda")
            def backward(ctx, grad):
                x, weight = ctx.saved_tensors
                return grad @ weight, grad.t() @ x
        """

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        self.functions: set[str] = set()  # local classes that are autograd Functions
        self.candidates: list[_Candidate] = []
        self.decorated: dict[cst.FunctionDef, set[str]] = {}  # custom_fwd/custom_bwd it has
        self.autocast_off: set[cst.FunctionDef] = set()  # runs with autocast disabled
        self.opaque: set[cst.FunctionDef] = set()  # has a decorator that is not torch's
        self.mixing: dict[cst.FunctionDef, cst.CSTNode] = {}  # first matmul-like op in it
        # ... of those, the first one that autocast can lower (not in an ``enabled=False`` block)
        self.lowered: dict[cst.FunctionDef, cst.CSTNode] = {}
        self.signal: tuple[cst.CSTNode, str] | None = None  # where the file uses autocast
        # functions whose matmul-like ops run in an autocast they enter themselves: a backward
        # that re-enters the forward's autocast state by hand does what custom_bwd does
        self.reentered: set[cst.FunctionDef] = set()
        self.kernels: dict[cst.FunctionDef, cst.Call] = {}  # first compiled-kernel call in it
        # ``Fn.apply(...)`` in a module method walked under a trainer's autocast, handed a half
        # and a float32 tensor: reported in ``finish`` when ``Fn`` runs a compiled kernel.
        self.ambient: list[tuple[str, CallSite, Operand, Operand]] = []
        # a call autocast does not recast (a compiled kernel, ``out=``) that takes tensors
        # derived from two or more of the function's inputs
        self.blind_mixes: dict[cst.FunctionDef, CallSite] = {}

    def check_class(self, site: ClassSite) -> None:
        if not any(b in AUTOGRAD_FUNCTIONS or b in self.functions for b in site.bases):
            return
        self.functions.add(site.node.name.value)
        methods = {s.name.value: s for s in site.node.body.body if isinstance(s, cst.FunctionDef)}
        forward, backward = methods.get("forward"), methods.get("backward")
        if forward is not None and backward is not None:
            self.candidates.append(_Candidate(site.node, forward, backward))

    def check_function(self, site: FunctionSite) -> None:
        leaves = {(d.qualname or "").rsplit(".", 1)[-1] for d in site.decorators}
        amp = leaves & {"custom_fwd", "custom_bwd"}
        if amp:
            self.decorated[site.node] = amp
            self._signal(site.node, "`custom_fwd`/`custom_bwd` is used")
        if any(_opaque(d) for d in site.decorators):
            # ``fwd_fp32 = custom_fwd(device_type=..., cast_inputs=...)`` then ``@fwd_fp32``:
            # a decorator mpcheck cannot see into may well be custom_fwd/custom_bwd.
            self.opaque.add(site.node)
        if any(_casts_inputs(d) for d in site.decorators):
            # ``custom_fwd(cast_inputs=...)`` runs forward with autocast off on inputs of one
            # dtype: its output, saved tensors and gradient agree (measured: no custom_bwd needed).
            self.autocast_off.add(site.node)
        region = site.scope.autocast
        if region is not None and region.enabled is False:
            self.autocast_off.add(site.node)
        elif region is not None:
            self._signal(region.node, "autocast is used")

    def check_call(self, call: CallSite) -> None:
        function = call.scope.function
        region = call.scope.autocast
        if call.op in _MIXING_OPS and function is not None:
            self.mixing.setdefault(function, call.node)
            if (region is None or region.active) and "out" not in call.kwargs:
                self.lowered.setdefault(function, call.node)  # ``out=``: autocast passes it by
            if region is not None and region.active:  # a method's own ``with`` or decorator
                self.reentered.add(function)
        if is_kernel(call.qualname) and function is not None and isinstance(call.node, cst.Call):
            self.kernels.setdefault(function, call.node)
        if call.op is not None and "out" in call.kwargs and function is not None:
            # inputs of the function that reach a matmul-like ``out=`` call, which autocast
            # does not recast (``torch.mm(x, w[a:b].t(), out=buf)``)
            reached = {i for o in _operands(call) if o.fact.is_tensor for i in o.fact.params}
            if len(reached) > 1:
                self.blind_mixes.setdefault(function, call)
        if region is not None and region.active:
            self._signal(region.node, "autocast is used")
        elif call.qualname in _SCALERS:
            self._signal(call.node, "a GradScaler is used")

    def check_ambient(self, call: CallSite) -> None:
        split = call.autocast_split()
        if call.method == "apply" and call.receiver is not None and split is not None:
            name = dotted(call.receiver.node)
            if name is not None:
                self.ambient.append((name, call, *split))

    def _signal(self, node: cst.CSTNode, text: str) -> None:
        if self.signal is None or (self.signal[1] != "autocast is used" and "autocast" in text):
            self.signal = (node, text)

    def finish(self) -> None:
        self.finish_kernels()
        self.finish_blind_mixes()
        if self.signal is None:
            return
        for cand in self.candidates:
            if cand.forward in self.autocast_off or {cand.forward, cand.backward} & self.opaque:
                continue
            if cand.backward in self.reentered:
                continue  # ``with torch.autocast(..., enabled=ctx._fwd_used_autocast):``
            op = self.lowered.get(cand.forward)
            back = self.mixing.get(cand.backward)
            if op is None or back is None:
                continue
            # ``torch.amp.custom_fwd`` is torch 2.4's: an older target has the CUDA spelling only
            amp = "torch.amp" if self.ctx.torch_has((2, 4)) else "torch.cuda.amp"
            missing = [
                f"`@{amp}.custom_{kind}` on `{method.name.value}`"
                for kind, method in (("fwd", cand.forward), ("bwd", cand.backward))
                if f"custom_{kind}" not in self.decorated.get(method, set())
            ]
            if missing:
                self.report_candidate(cand, missing, op, back)

    def finish_blind_mixes(self) -> None:
        """A Function whose ``forward`` hands several of its inputs to a matmul with ``out=``,
        which autocast does not recast: under autocast they arrive as the caller made them,
        a half activation and a float32 weight (a chunked LM head's hand-written backward)."""
        for cand in self.candidates:
            call = self.blind_mixes.get(cand.forward)
            if call is None or cand.forward in self.autocast_off or cand.forward in self.opaque:
                continue
            if call.scope.no_autocast:
                continue  # the project never turns autocast on: inputs come as made
            assert isinstance(call.node, cst.Call)
            callee = self.ctx.code(call.node.func, 40)
            names = input_names(cand.forward)
            reached = sorted(
                {i for o in _operands(call) if o.fact.is_tensor for i in o.fact.params}
            )
            inputs = ", ".join(f"`{names[i]}`" for i in reached if i < len(names))
            amp = "torch.amp" if self.ctx.torch_has((2, 4)) else "torch.cuda.amp"
            message = (
                f"autograd Function `{cand.node.name.value}` hands its inputs {inputs} to "
                f"`{callee}` with `out=`, which autocast does not recast, and nothing casts "
                "them to one dtype: under autocast they come as the caller made them (a half "
                "activation, float32 weights); cast them to one dtype or decorate `forward` with "
                f'`@{amp}.custom_fwd(device_type="cuda", cast_inputs=torch.float32)`'
            )
            related = [(cand.forward.name, "`forward` has no `custom_fwd(cast_inputs=...)`")]
            self.report(call.node, message, related=related, severity=Severity.WARNING)

    def finish_kernels(self) -> None:
        """A Function over a compiled kernel, handed a half and a float32 tensor by a module
        method under a trainer's autocast: without ``custom_fwd(cast_inputs=torch.float32)``
        the kernel gets them as they are (a deformable-attention kernel's inputs)."""
        functions = {c.node.name.value: c for c in self.candidates}
        for name, call, half, full in self.ambient:
            cand = functions.get(name)
            kernel = self.kernels.get(cand.forward) if cand is not None else None
            region = call.scope.autocast
            if cand is None or kernel is None or region is None:
                continue
            if cand.forward in self.autocast_off or cand.forward in self.opaque:
                continue
            low, wide = self.ctx.code(half.node), self.ctx.code(full.node)
            amp = "torch.amp" if self.ctx.torch_has((2, 4)) else "torch.cuda.amp"
            message = (
                f"{region.premise}, `{name}` hands `{low}` in {half.fact.dtype or 'half'} "
                f"({self.where(half.fact)}) and `{wide}` in float32 ({self.where(full.fact)}) "
                f"to the compiled kernel `{self.ctx.code(kernel.func, 40)}`, which autocast "
                f"does not recast; decorate its `forward` with "
                f'`@{amp}.custom_fwd(device_type="cuda", cast_inputs=torch.float32)`'
            )
            related = [
                (kernel, "the kernel takes its tensors as they come"),
                (cand.forward.name, f"`{name}.forward` has no `custom_fwd(cast_inputs=...)`"),
                *self.related_for(low, half.fact),
                *self.related_for(wide, full.fact),
            ]
            self.report(call.node, message, related=related, severity=Severity.WARNING)

    def report_candidate(
        self, cand: _Candidate, missing: list[str], op: cst.CSTNode, back: cst.CSTNode
    ) -> None:
        assert self.signal is not None
        node, text = self.signal
        name = cand.node.name.value
        message = (
            f"autograd Function `{name}` has no {' or '.join(missing)}, and {text} in this file "
            f"({self.line(node)}): `backward` runs outside autocast, so the half-precision "
            f"gradient of `{self.ctx.code(op, 40)}` meets the float32 tensors saved in "
            f"`forward` at `{self.ctx.code(back, 40)}`"
        )
        related = [
            (op, "autocast runs this in half precision in `forward`"),
            (back, "`backward` mixes the half gradient with saved float32 tensors here"),
            (node, text[0].upper() + text[1:]),
        ]
        self.report(cand.node.name, message, related=related)


def _opaque(deco: Decorator) -> bool:
    """A decorator that is neither torch's nor a plain ``staticmethod``: it may be custom_fwd."""
    qual = deco.qualname or ""
    leaf = qual.rsplit(".", 1)[-1]
    known = qual.startswith("torch.") or qual in ("staticmethod", "classmethod")
    return not known and leaf not in ("custom_fwd", "custom_bwd")


def _casts_inputs(deco: Decorator) -> bool:
    """``@custom_fwd(..., cast_inputs=<dtype>)``: forward runs with autocast disabled."""
    if not (deco.qualname or "").endswith("custom_fwd") or deco.call is None:
        return False
    return any(
        a.keyword is not None
        and a.keyword.value == "cast_inputs"
        and not (isinstance(a.value, cst.Name) and a.value.value == "None")
        for a in deco.call.args
    )


def _operands(call: CallSite) -> list[Operand]:
    """What a call computes from (its ``out=`` buffer only receives)."""
    receiver = [call.receiver] if call.receiver is not None else []
    return [*receiver, *call.args, *(o for k, o in call.kwargs.items() if k != "out")]
