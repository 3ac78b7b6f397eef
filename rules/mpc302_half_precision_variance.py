"""MPC302: a mean of squares or a variance computed in float16 (the hand-written RMSNorm)."""

from __future__ import annotations

import libcst as cst

from mpcheck.api import (
    EVIDENCE_AUTOCAST,
    CallSite,
    Cause,
    Edit,
    Fact,
    Fix,
    Operand,
    Prec,
    Rule,
    RuleContext,
    Scope,
    Severity,
    can_be_fp16,
)

# Reductions that turn elementwise squares into a mean square (``x.pow(2).mean(-1)``).
REDUCTIONS = frozenset({"mean", "sum", "nanmean", "nansum"})
# Reductions whose *result* overflows float16 on its own: a variance of 256² and more.
# ``norm``/``std`` are not here: their kernels accumulate in float32 and the result (a root)
# fits float16 (measured: |x|~300 over 64 values gives norm ~2400, std ~300).
VARIANCES = frozenset({"var", "var_mean"})
SQRTS = frozenset({"torch.rsqrt", "torch.sqrt"})
ROOTS = frozenset({"rsqrt", "sqrt", "rsqrt_", "sqrt_"})
DIVISIONS = frozenset({"div", "true_divide", "divide", "div_"})
# Arithmetic that keeps a mean square a mean square (``variance + eps``, ``.clamp(min=eps)``).
CARRIERS = frozenset(
    {"add", "add_", "clamp", "clamp_min", "clamp_", "clip", "mul", "to", "type_as"}
)
# A mean square minus a square is a variance (``meansqr - mean * mean``, batch norm's
# E[x²] - E[x]²); something minus a mean square (``1 - x.pow(2).sum()``) is not, nor a mean
# square minus a scaled square (a scale-invariant loss, ``d2.mean() - lam * d.mean() ** 2``).
SUBTRACTIONS = frozenset({"sub", "subtract", "sub_"})
# float16's largest finite value.
FP16_MAX = 65504.0
# Reductions whose result is bounded by their input's bound (a mean of bounded squares).
MEANS = frozenset({"mean", "nanmean"})


def _square_base(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``x`` of ``x.pow(2)``, ``x ** 2``, ``x * x``, ``x.square()``, ``torch.square(x)``,
    ``torch.pow(x, 2)``; None for anything else."""
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.Power) and _is_two(node.right):
            return node.left
        if isinstance(node.operator, cst.Multiply) and node.left.deep_equals(node.right):
            return node.left
        return None
    if not isinstance(node, cst.Call):
        return None
    func = node.func
    if isinstance(func, cst.Attribute):
        name = func.attr.value
        if name == "square" and not node.args and not _is_torch(func.value):
            return func.value
        if name == "pow" and len(node.args) == 1 and not _is_torch(func.value):
            return func.value if _is_two(node.args[0].value) else None
        if _is_torch(func.value) and name == "square" and len(node.args) == 1:
            return node.args[0].value
        if _is_torch(func.value) and name == "pow" and len(node.args) == 2:
            return node.args[0].value if _is_two(node.args[1].value) else None
    return None


def _subtraction(call: CallSite) -> tuple[Operand | None, Operand | None]:
    """``(a, b)`` of ``a - b``, ``a.sub(b)``, ``torch.sub(a, b)``."""
    if call.receiver is not None:
        return call.receiver, call.arg(0, "other")
    return call.arg(0, "input"), call.arg(1, "other")


def _is_two(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.Integer, cst.Float)) and float(node.value) == 2.0


def _is_torch(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "torch"


def _fits(call: CallSite, name: str, squares: Operand) -> bool:
    """The engine bounds the squares and their reduction within float16's range
    (``wav.pow(2).mean()`` of a waveform in [-1, 1]): nothing can overflow."""
    inside = squares.fact.bound is not None and squares.fact.bound <= FP16_MAX
    if name in MEANS:
        return inside
    return inside and call.result.bound is not None and call.result.bound <= FP16_MAX


class HalfPrecisionVariance(Rule):
    code = "MPC302"
    name = "half-precision-variance"
    severity = Severity.WARNING
    summary = (
        "A mean of squares or a variance (`x.pow(2).mean(-1)`, `(x * x).sum()`, `torch.var(x)`), "
        "or linear attention's `k.transpose(-1, -2) @ v`, is computed on a tensor that is "
        "float16 when the model runs in half precision."
    )
    why = """
        float16's largest finite value is 65504, so any element with |x| > 256 squares to
        `inf`. Hand-written RMSNorm and LayerNorm compute `x.pow(2).mean(-1, keepdim=True)`
        (or `(x * x).mean`, `x.square().sum`, `torch.var(x)`) and then divide by its square
        root (batch and layer norms written by hand take `meansqr - mean * mean` as the
        variance): once one activation passes 256 -- common in the residual stream of large
        models -- the variance is `inf`, `rsqrt(inf)` is 0, and the normalised output
        collapses to zeros (or NaN where `inf - inf` appears). `torch.var` overflows on its
        own when the standard deviation passes 256, even though its kernel accumulates in
        float32: the result does not fit. Nothing raises. `x.norm()` and `x.std()` are not
        reported: their kernels accumulate in float32 and return a root, which fits.
        bfloat16 has float32's range, so a tensor that is only ever bfloat16 is not reported
        (in the model's dtype too, when every half path of the project reaching the class
        writes bfloat16 down: `.to(torch.bfloat16)`, `torch_dtype=torch.bfloat16`, a dtype
        variable every half value of which is bfloat16 (`weight_dtype = torch.bfloat16 if
        bf16 else torch.float32`, read off its assignments; a parameter, a call or a
        configuration's string may be float16), and every autocast region lowers to
        bfloat16: `dtype=torch.bfloat16`, the CPU's default),
        nor one whose values the engine bounds below 256 (a waveform in [-1, 1] from
        `torchaudio.load`, a `softmax`, `tanh` or `sin` output, pixels after `/ 255`, and what
        shape-only ops, `clamp` and arithmetic with numbers make of them): their squares fit.
        A variance of values within b is at most b² only with `unbiased=False`
        (`correction=0`, or `False` passed in `unbiased`'s place): torch's default unbiased
        variance reaches 2b² (two values ±b), so it fits only for values within 181. The
        variance of `torch.var_mean`'s pair is bounded as `var`'s.
        An STFT bin is bounded by `n_fft * max|window| * max|x|`, so the power of a short
        frame of bounded audio fits (128 points: 16384), and that of a 1024-point frame
        may not (a full-scale sine gives |X| = 256 with a Hann window, whose square is inf).
        Inside a CUDA autocast region `pow`, `sum` and `rsqrt` run in float32, so
        `x.pow(2).mean()` is safe there while `(x * x).mean()` (`mul` is not on autocast's
        float32 list) is not; CPU autocast upcasts none of them, nor does a region given
        `dtype=torch.float32` on any device but CUDA (its autocast turns itself off): where
        such a region's device is known only at run time (a decorator picking
        `"mps" if ... else "cuda"`), a square that overflows with the region off is reported
        as a warning stating that device premise. The same holds in a
        module every run of which the project makes under autocast, in any file (a model
        never cast and called only inside regions, or every cast model reaching it so
        called): a region written for the CPU (`torch.autocast("cpu")`) leaves `pow` in
        float16, one whose device the code does not write is taken for CUDA's.

        Linear attention has the same flaw as a sum of products: `kv = k.transpose(-1, -2) @ v`
        sums over every position of the sequence, and the function then divides by such a
        sum (`out = q @ kv; out[..., :-1] / (out[..., -1:] + eps)`, EfficientViT's LiteMSA).
        Over a few thousand tokens the sums pass 65504 and `inf / inf` is NaN, under a float16
        autocast region too (matmul is on its float16 list). Only a product with its left
        operand transposed whose result the same function divides by is reported: ordinary
        attention (`q @ k.transpose(-2, -1)`) sums over the head dim, and channel attention
        (`q.transpose(-2, -1) @ k` then a softmax) normalises with a softmax.
        A finding whose tensor follows the model's dtype says why that is half here (the
        cast of the class or of a model that builds it, in any file, or its library base),
        with the cast as a related location, or states its premise ("latent: if `X` runs
        in float16").
        """
    symptom = """
        No error: the norm's output is all zeros or NaN for the tokens whose activations
        passed 256, the loss turns NaN, or generated text/images degrade only in float16
        (bfloat16 and float32 runs are fine).
        """
    how_to_fix = """
        Upcast before squaring and cast the normalised result back, as transformers'
        `LlamaRMSNorm` does:
        `variance = x.float().pow(2).mean(-1, keepdim=True)` then
        `x = (x.float() * torch.rsqrt(variance + eps)).to(input_dtype)`.
        Or use the fused `F.rms_norm`/`F.layer_norm`, which accumulate in float32.
        mpcheck's fix covers the one-expression form
        `x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)`: it upcasts `x` inside the
        root and casts the root back to `x.dtype` (the root of a mean square fits float16).
        When the variance is stored in a variable first, the cast back belongs where the
        division ends, which only you can place: no fix is offered. For linear attention,
        upcast `q`, `k` and `v`, compute the products and the division with autocast disabled
        (`torch.autocast(device_type=v.device.type, enabled=False)`), and cast the output back.
        """
    bad = """
        class RMSNorm(nn.Module):
            def forward(self, x):
                variance = x.pow(2).mean(-1, keepdim=True)  # inf once |x| > 256 in float16
                return self.weight * x * torch.rsqrt(variance + self.eps)
        """
    good = """
        class RMSNorm(nn.Module):
            def forward(self, x):
                variance = x.float().pow(2).mean(-1, keepdim=True)
                normed = x.float() * torch.rsqrt(variance + self.eps)
                return self.weight * normed.to(x.dtype)
        """
    fixable = True
    fix_applicability = "unsafe"  # it changes a precision: --unsafe-fixes

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        # A mean square is reported once it reaches a root or a division (the norm pattern;
        # ``(a - b).pow(2).mean()`` as a loss, or a distance for ``argmin``, is not one).
        # Values are followed by the identity of their facts: the reduction's result, then
        # what arithmetic on it (``variance + eps``) gives, each kept alive in ``carried``.
        self.pending: dict[cst.CSTNode, tuple[str, list[tuple[cst.CSTNode, str]]]] = {}
        self.carried: dict[int, tuple[Fact, cst.CSTNode]] = {}
        self.confirmed: list[cst.CSTNode] = []
        self.fixes: dict[cst.CSTNode, Fix] = {}

    def check_call(self, call: CallSite) -> None:
        self._follow(call)
        if call.scope.full_precision is not None:
            return  # ``if x.dtype == torch.float32:``: a half-precision run never gets here
        if self.against_half(call.scope, call.result):
            return  # a class the project only builds in float32, or never builds
        if call.attention == "context" and self._may_be_fp16(call.result, call.scope):
            self._context(call)
            return
        name = call.method or _torch_function(call.qualname)
        if name is None or not isinstance(call.node, cst.Call):
            return
        subject = call.receiver if call.method else (call.args[0] if call.args else None)
        if subject is None:
            return
        if name in VARIANCES:
            # the engine bounds a variance by its input's bound (2b² unbiased, b² not)
            variance = _variance(call.result)
            fits = variance.bound is not None and variance.bound <= FP16_MAX
            if self._may_be_fp16(subject.fact, call.scope) and not fits:
                self._pend(call, subject.node, subject.fact, "a variance", variance)
            return
        base = _square_base(subject.node) if name in REDUCTIONS else None
        if (
            base is not None
            and self._may_be_fp16(subject.fact, call.scope)
            and not _fits(call, name, subject)
        ):
            self._pend(call, base, subject.fact, "a mean of squares")

    def finish(self) -> None:
        for node in dict.fromkeys(self.confirmed):
            message, related = self.pending[node]
            self.report(node, message, related=related, fix=self.fixes.get(node))

    def _may_be_fp16(self, fact: Fact, scope: Scope) -> bool:
        """In the model's dtype (float16 when the model is, unless every half path reaching
        the class writes bfloat16 down), or half and not bfloat16-only."""
        if not fact.is_tensor:
            return False
        if fact.prec is Prec.MODEL:
            return not self.bfloat16_only(scope, fact)
        return can_be_fp16(fact)

    def _follow(self, call: CallSite) -> None:
        """Carry a pending mean square through arithmetic; confirm it at a root or division."""
        operands = [*call.args, *call.kwargs.values()]
        if call.receiver is not None:
            operands.append(call.receiver)
        reductions = [self.carried[id(o.fact)][1] for o in operands if id(o.fact) in self.carried]
        if not reductions:
            return
        name = call.method or _torch_function(call.qualname) or ""
        if name in ROOTS or (
            name in DIVISIONS
            and call.args
            and call.args[-1] is not call.receiver
            and id(call.args[-1].fact) in self.carried
        ):
            self.confirmed.extend(reductions)
            if call.qualname in SQRTS:
                self._root(call)
        elif name in CARRIERS:
            self.carried[id(call.result)] = (call.result, reductions[0])
        elif name in SUBTRACTIONS:
            minuend, subtrahend = _subtraction(call)
            if (
                minuend is not None
                and subtrahend is not None
                and id(minuend.fact) in self.carried
                and _square_base(subtrahend.node) is not None
            ):
                self.carried[id(call.result)] = (call.result, self.carried[id(minuend.fact)][1])

    def _context(self, call: CallSite) -> None:
        """Linear attention's ``kᵀ @ v``: a sum over every position of the sequence."""
        if call.result.prec is Prec.HALF and call.result.cause is Cause.AUTOCAST:
            dtype = "float16 by autocast"
        elif call.result.prec is Prec.HALF:
            dtype = "float16" if call.result.dtype == "float16" else "half precision"
        else:
            dtype = "the model's dtype, float16 when the model runs in fp16"
        message = (
            f"`{self.ctx.code(call.node)}` sums products over the whole sequence in {dtype} "
            "and is then divided by such a sum (linear attention): past 65504 the sums are "
            "inf and the output NaN; compute it in float32 (`.float()` operands, autocast "
            "disabled) and cast the result back"
        )
        origin = call.result.origin
        inline = origin is None or origin.node is call.node
        related = [] if inline or origin is None else [(origin.node, origin.text)]
        self.pending[call.node] = (message, related)
        self.confirmed.append(call.node)

    def _pend(
        self,
        call: CallSite,
        tensor: cst.BaseExpression,
        fact: Fact,
        what: str,
        result: Fact | None = None,
    ) -> None:
        """Hold the finding until ``result`` (the call's, or the variance of its pair)
        reaches a root or a division."""
        evidence = call.scope.evidence
        autocast = evidence is not None and evidence.kind == EVIDENCE_AUTOCAST
        if fact.prec is Prec.HALF:
            dtype = "float16" if fact.dtype == "float16" else "half precision (float16 on a path)"
        elif autocast:  # (never cast: half only where an op autocast lowers made it)
            dtype = "the dtype autocast leaves it in, float16 where autocast lowered it"
        else:
            dtype = "the model's dtype, float16 when the model runs in fp16"
        # ``var`` accumulates in float32 and rounds only its result: that overflows once the
        # spread passes 256 (measured: one 300 among 1023 zeros gives 87.9), not one value
        hazard = (
            "a standard deviation above 256 makes it inf"
            if what == "a variance"
            else "any value above 256 squares to inf"
        )
        message = (
            f"{what} of `{self.ctx.code(tensor)}` is computed in {dtype}: {hazard}, so a norm "
            "built on it outputs zeros or NaN; upcast first (`.float()`) and cast the "
            "normalised result back"
        )
        related = [(fact.origin.node, fact.origin.text)] if fact.origin is not None else []
        premise = "if `{subject}` runs in float16"  # (or why the model's dtype is float16)
        message, related, _ = self.with_evidence(message, call.scope, fact, related, premise)
        if autocast and evidence is not None:
            message += f" (under autocast, whose lists leave this op alone: {evidence.text})"
        self.pending[call.node] = (message, related)
        result = call.result if result is None else result
        self.carried[id(result)] = (result, call.node)

    def _root(self, call: CallSite) -> None:
        """``rsqrt(x.pow(2).mean(...) + eps)`` -> ``rsqrt(x.float().pow(2).mean(...) + eps)
        .to(x.dtype)``: the root of a mean square fits float16, so the cast back is safe."""
        arg = call.arg(0, "input")
        if arg is None or not isinstance(call.node, cst.Call):
            return
        inner = arg.node
        if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Add):
            inner = inner.left
        if inner not in self.pending or not isinstance(inner, cst.Call):
            return
        receiver = inner.func.value if isinstance(inner.func, cst.Attribute) else None
        base = _square_base(receiver) if receiver is not None else None
        if not isinstance(base, cst.Name) or receiver is None:
            return
        name = base.value
        source = self.ctx.module.code_for_node
        square = source(receiver)
        if not square.startswith(f"{name}."):
            return
        root = source(call.node).replace(square, f"{name}.float(){square[len(name) :]}", 1)
        self.fixes[inner] = Fix(
            f"upcast `{name}` before squaring and cast the root back to `{name}.dtype`",
            (Edit(call.node, f"{root}.to({name}.dtype)"),),
            applicability="unsafe",
        )


def _variance(result: Fact) -> Fact:
    """The variance a call gives: its result, or the first item of ``var_mean``'s pair."""
    return result.items[0] if result.items else result


def _torch_function(qualname: str | None) -> str | None:
    if qualname and qualname.startswith("torch.") and qualname.count(".") == 1:
        return qualname.split(".", 1)[1]
    return None
