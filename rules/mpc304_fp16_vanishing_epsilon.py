"""MPC304: a guard constant float16 cannot hold (``p + 1e-8``) protects a log, root or division."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from mpcheck.api import (
    EVIDENCE_CAST,
    EVIDENCE_LIBRARY,
    EVIDENCE_SETTING,
    CallSite,
    Cause,
    Fact,
    Kind,
    Operand,
    Origin,
    Prec,
    Rule,
    RuleContext,
    Scope,
    Severity,
    to_fp16,
)

# Adding a guard: ``x + eps``, ``x.add(eps)``, ``x += eps`` (the engine's ``add_``).
ADDS = frozenset({"add", "add_"})
# Flooring a value: ``x.clamp(min=eps)``, ``x.clamp_min(eps)``, ``torch.clamp(x, eps)``.
CLAMPS = {"clamp": (0, "min"), "clamp_": (0, "min"), "clip": (0, "min"), "clip_": (0, "min")}
CLAMPS |= {"clamp_min": (0, "min"), "clamp_min_": (0, "min")}
# What a guarded value protects: the op gives -inf/inf (NaN after) on an exact 0. (``sqrt``
# of 0 is 0: only its gradient is inf, so a root is followed to what divides by it.)
GUARDED = {"log": "-inf", "log2": "-inf", "log10": "-inf", "log_": "-inf"}
GUARDED |= {"rsqrt": "inf", "reciprocal": "inf"}
# Ops that carry a guarded value unchanged in its zeros (shape ops, casts after the add):
# ``(p + 1e-8).float().log()`` is still log(0), the eps vanished before the cast.
CARRIERS = frozenset(
    {
        "view",
        "reshape",
        "unsqueeze",
        "squeeze",
        "expand",
        "expand_as",
        "flatten",
        "transpose",
        "permute",
        "contiguous",
        "clone",
        "detach",
        "float",
        "double",
        "to",
        "type_as",
        "mul",
        "sqrt",
    }
)
DIVISIONS = frozenset({"div", "div_", "true_divide", "divide"})
# torch functions that divide by a norm floored at ``eps`` (computed in the input's dtype):
# qualname -> (slot and keyword of eps, its default, the aten op CUDA autocast runs in float32).
FLOORED = {
    "torch.nn.functional.normalize": (3, 1e-12, "norm"),
    "torch.nn.functional.cosine_similarity": (3, 1e-8, "cosine_similarity"),
    "torch.cosine_similarity": (3, 1e-8, "cosine_similarity"),
}
# Why a class may run in half (``Scope.evidence.kind``): only a cast of the project that
# writes float16 down says float16. A library base or the configuration says "half" (float16
# or bfloat16, which holds the guard), and the premise that any module may run in half says
# nothing: neither is evidence of float16 (:meth:`_fp16` reads the cast's written dtypes).
# What says the class runs in half without saying float16: a library base whose users load it
# in half, the configuration, a cast to a dtype the code does not write down. Where the code
# makes rows of the guarded value exactly 0 (zero padding, a masked fill with 0), that is a
# latent hazard: a warning stating the float16 premise. The bare premise that any module may
# run in half is not enough, even then.
HALF_BY_CONTRACT = frozenset({EVIDENCE_LIBRARY, EVIDENCE_SETTING, EVIDENCE_CAST})


@dataclass(frozen=True)
class Guard:
    """A constant added to (or flooring) a tensor that is float16 on evidence."""

    constant: Operand
    number: float
    tensor: Fact
    site: CallSite
    zeros: Origin | None = None  # only a premise: float16 is not shown, exact-zero rows are


class Fp16VanishingEpsilon(Rule):
    code = "MPC304"
    name = "fp16-vanishing-epsilon"
    summary = (
        "A guard constant below float16's smallest subnormal (`p + 1e-8`, "
        "`x.clamp(min=1e-10)`) is added to a float16 tensor before a log, root or division: "
        "it rounds to 0, so the guard does nothing."
    )
    why = """
        float16's smallest subnormal is 2**-24 (5.96e-8) and anything below 2**-25 (2.98e-8)
        rounds to 0: `torch.tensor(1e-8, dtype=torch.float16)` is 0. A Python number added
        to a tensor takes the tensor's dtype (type promotion: a scalar never widens a
        tensor), so the guard in `torch.log(p + 1e-8)`, `x / (norm + 1e-10)`,
        `torch.rsqrt(var + 1e-12)` or `p.clamp(min=1e-10).log()` adds nothing to a float16
        tensor: where `p`, `norm` or `var` is 0 -- a probability float16 rounds to 0 (a
        sigmoid below about -17), an all-zero feature, a constant row -- the log is -inf, the
        root's reciprocal inf and the division inf or NaN (measured on torch 2.13: all of
        them). Autocast does not help: the add runs in its operand's dtype (a Linear,
        matmul or conv output is float16 under CUDA's default autocast), and a log, `rsqrt`
        or `pow` on autocast's float32 list only upcasts the 0 the add made. bfloat16 has
        float32's exponent range (1e-8 survives), and so does float32: neither is reported.

        Reported: a positive constant below 2**-25 -- a literal, a constant of the file or
        of another project file (`EPS = 1e-8`), a parameter's default that no call of the
        file replaces (`def encode(self, boxes, eps=1e-8)`), or `self.eps` set once in
        `__init__` from one -- added to a tensor (`+`, `add`, `add_`, `+=`) or flooring it (`clamp`/
        `clip` with `min=`, `clamp_min`), whose result -- directly or through shape ops and
        casts -- is the argument of `log`/`log2`/`log10`, `rsqrt`, `reciprocal`, a negative
        power, or the divisor of a division (also through a `sqrt`). A constant that is only
        added, or a guard float16 holds (2**-24 and up, e.g. 1e-7 or 1e-6), is not reported.
        `F.normalize` and `F.cosine_similarity` divide by a norm floored at their `eps`
        (1e-12 and 1e-8 by default), computed in the input's dtype: the same hazard, NaN for
        an all-zero row of a float16 input (measured), except under CUDA autocast, which
        computes the norm in float32 (`x.norm() + 1e-12` keeps its guard there too, and
        in a module every run of which the project makes under CUDA autocast, in any
        file; CPU autocast's float32 list holds no norm). A learned feature's row is all
        zero only where code makes it so, so such a norm of a tensor float16 on evidence
        is an error where the code makes its rows exactly 0 (below) and a warning stating
        that premise elsewhere
        (an encoder's pooled embedding, a projection's output).

        Reported only on evidence that the tensor is float16, not just half: the code makes
        it float16 itself (`.half()`, `.to(torch.float16)`, a float16 load, the output of an
        op float16 autocast lowers), or a cast of the project writes float16 for the module
        it is in (`model.half()` in any file, named in the message). A library base whose
        users run it in half, the `models-run-in-half` setting or a cast to a dtype the code
        does not say (`.to(weight_dtype)`) mean float16 or bfloat16, and bfloat16 holds the
        guard; the premise that any module may run in half says nothing (measured on the
        unseen tuning sets: such findings were mostly code never run in float16). None of
        them is an error, nor a tensor that is bfloat16 or float32, or in a module the
        project only builds in float32, only runs under autocast or never builds. One
        exception, a warning stating the float16 premise: where the code itself makes rows
        of the guarded value exactly 0 -- zero padding (`F.pad` without `value=`), rows of
        `torch.zeros` joined to data, a masked fill with 0 -- and hands them through ops
        that keep a zero row 0 (reshapes, casts, products, a `Linear` built with
        `bias=False`, into a module of the file: Swin v2's window attention pads the
        feature map, and its bias-free key projection gives all-zero keys that
        `F.normalize` turns into NaN, measured), under a library's contract or the
        configuration. A
        learned weight is never exactly 0 (`1 / (alpha + 1e-9)` of a parameter): not
        reported. `sqrt(0)` is 0 (only its gradient is inf), so a root is followed to the
        division that needs its guard.
        """
    symptom = """
        No error: `-inf` in a log-probability or focal cost (an assignment solver then
        raises `ValueError: matrix contains invalid numeric entries`), `inf`/NaN after a
        normalisation of an all-zero vector, NaN losses -- only in float16 runs; bfloat16 and
        float32 runs are fine.
        """
    how_to_fix = """
        Use a guard float16 holds -- a normal number such as `1e-6`, or the tensor's own
        `torch.finfo(x.dtype).eps` (9.8e-4 in float16, 1.2e-7 in float32) -- or compute the
        guarded op in float32: `(p.float() + 1e-8).log()`, then cast back if needed.
        `torch.finfo(x.dtype).tiny` (6.1e-5 in float16) holds in float16 but is 1.2e-38 in
        float32: `log(p + tiny)` is then -87 where `p` is 0 and its gradient 1/tiny
        overflows, so it changes float32 runs. No fix is offered: which guard keeps the
        float32 results is the author's choice.
        """
    bad = """
        class FocalCost(nn.Module):
            def forward(self, logits):
                prob = logits.sigmoid()
                return -(prob + 1e-8).log()  # 1e-8 is 0 in float16: log(0) = -inf


        cost = FocalCost().half()
        """
    good = """
        class FocalCost(nn.Module):
            def forward(self, logits):
                prob = logits.sigmoid()
                return -(prob.float() + 1e-8).log()


        cost = FocalCost().half()
        """

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        # Guarded values, followed by the identity of their facts (kept alive here).
        self.guarded: dict[int, tuple[Fact, Guard]] = {}
        self.reported: set[cst.CSTNode] = set()

    def check_call(self, call: CallSite) -> None:
        if self.never_runs(call.scope):
            return  # (a helper nothing calls: even a tensor it casts to float16 is no hazard)
        self._check(call, None)
        for site in _handed_zero_rows(call):
            self._check(site, call)

    def _check(self, call: CallSite, via: CallSite | None) -> None:
        """One call; ``via``: the module call that hands it exact-zero rows (a re-walk)."""
        if call.qualname in FLOORED:
            self._floored(call, via)
            return
        self._consume(call, via)
        guard = self._guard(call, via)
        if guard is not None:
            self.guarded[id(call.result)] = (call.result, guard)

    # -- where a guard is made ---------------------------------------------------------
    def _guard(self, call: CallSite, via: CallSite | None) -> Guard | None:
        if call.scope.full_precision is not None:
            return None  # ``if x.dtype == torch.float32:``: a float16 run never gets here
        name = call.method or _torch_function(call.qualname)
        if name is None:
            return None
        pair = self._operands(call, name)
        if pair is None:
            return None
        tensor, constant = pair
        number = constant.number
        if number is None or number <= 0.0 or to_fp16(number) != 0.0:
            return None  # no guard, or one float16 holds (2**-25 and up round to 2**-24)
        if not tensor.fact.is_tensor:
            return None
        if via is None and self._fp16(tensor.fact, call.scope):
            return Guard(constant, number, tensor.fact, call)
        zeros = self._zero_premise(tensor.fact, call.scope)
        return Guard(constant, number, tensor.fact, call, zeros) if zeros is not None else None

    def _operands(self, call: CallSite, name: str) -> tuple[Operand, Operand] | None:
        """``(tensor, constant)`` of an add or a floor; None for any other call."""
        if name in ADDS:
            if call.method is not None and call.receiver is not None:
                other = call.arg(0, "other")
                return (call.receiver, other) if other is not None else None
            if len(call.args) == 2:
                left, right = call.args
                return (right, left) if left.fact.kind is Kind.SCALAR else (left, right)
            return None
        if name in CLAMPS:
            index, keyword = CLAMPS[name]
            if call.method is not None and call.receiver is not None:
                bound = call.arg(index, keyword)
                return (call.receiver, bound) if bound is not None else None
            first = call.arg(0, "input")
            bound = call.arg(index + 1, keyword)
            return (first, bound) if first is not None and bound is not None else None
        return None

    def _fp16(self, fact: Fact, scope: Scope) -> bool:
        """Whether the project shows that ``fact`` can be float16 here (see the rule page).
        A learned weight (``self.alpha``, a codebook) is never exactly 0: not guarded."""
        if fact.cause is Cause.PARAMETER:
            return False
        if fact.prec is Prec.HALF:
            return fact.dtype == "float16"
        if fact.prec is not Prec.MODEL or self.against_half(scope, fact):
            return False
        evidence = scope.evidence
        if evidence is None:
            return False
        return evidence.kind == EVIDENCE_CAST and any(d == "float16" for d, _ in evidence.written)

    def _zero_premise(self, fact: Fact, scope: Scope) -> Origin | None:
        """Where the code made rows of ``fact`` exactly 0, when only a contract (not a cast
        of the project) says the class runs in half, float16 or bfloat16 (see the rule page)."""
        zeros = fact.zero_rows
        if zeros is None or fact.cause is Cause.PARAMETER or self._fp16(fact, scope):
            return None
        if fact.prec is Prec.HALF:
            return zeros if fact.dtype is None else None  # a half dtype the code does not say
        if fact.prec is not Prec.MODEL or self.against_half(scope, fact):
            return None
        evidence = scope.evidence
        if evidence is None or evidence.float32 or evidence.kind not in HALF_BY_CONTRACT:
            return None
        return zeros

    def _floored(self, call: CallSite, via: CallSite | None) -> None:
        """``F.normalize(x)``: ``x / x.norm(...).clamp_min(1e-12)``, all in ``x``'s dtype."""
        slot, default, aten = FLOORED[call.qualname or ""]
        given = call.arg(slot, "eps")
        number = default if given is None else given.number
        tensor = call.arg(0, "input") or call.arg(0, "x1")
        if number is None or number <= 0.0 or to_fp16(number) != 0.0 or tensor is None:
            return
        if call.scope.full_precision is not None or not tensor.fact.is_tensor:
            return
        region = call.scope.autocast
        if region is not None and region.recasts(aten):
            return  # CUDA autocast computes the norm in float32, where eps survives
        if call.scope.caller_float32(aten, self.ctx.target_torch):
            return  # (so does the autocast every run of this code is under, in its callers)
        zeros = None
        if via is not None or not self._fp16(tensor.fact, call.scope):
            zeros = self._zero_premise(tensor.fact, call.scope)
            if zeros is None:
                return
        node = call.node if given is None else given.node
        eps = f"eps={number:g}" + (" (its default)" if given is None else "")
        message = (
            f"`{self.ctx.code(call.node, 50)}` divides by a norm floored at {eps}, which "
            "rounds to 0 in float16 (so does anything below 2**-25, about 3e-8): an all-zero "
            "row gives 0 / 0 = NaN; pass an eps float16 holds (1e-6) or compute it in float32"
        )
        if zeros is not None:
            self._latent(node, message, zeros, call, via)
            return
        if tensor.fact.zero_rows is None:  # float16 shown; the NaN needs an all-zero row
            message += " (latent: only an all-zero row gives NaN, and no code here makes one)"
            self._finish(node, message, tensor.fact, call, severity=Severity.WARNING)
            return
        self._finish(node, message, tensor.fact, call)

    def _latent(
        self,
        node: cst.CSTNode,
        message: str,
        zeros: Origin,
        use: CallSite,
        via: CallSite | None,
        related: list[tuple[cst.CSTNode, str]] | None = None,
    ) -> None:
        """A warning stating the premise: float16 is not shown, the exact-zero rows are."""
        if node in self.reported:
            return
        self.reported.add(node)
        evidence = use.scope.evidence
        subject = (evidence.subject if evidence is not None else None) or use.scope.class_name
        why = f"{evidence.text}, and bfloat16 holds the guard" if evidence is not None else ""
        made = f"{zeros.text} at {self.line(zeros.node)}"
        if via is not None:
            made += f", handed in by `{self.ctx.code(via.node, 50)}` at {self.line(via.node)}"
        premise = f"if `{subject}` runs in float16" if subject else "if this runs in float16"
        message += f" (latent: {premise}; {why}; rows are exactly 0 there: {made})"
        more = list(related or ())
        more.append((zeros.node, f"rows made exactly 0 here: {zeros.text}"))
        if via is not None:
            more.append((via.node, "the zero rows are handed in here"))
        self.report(node, message, related=more, severity=Severity.WARNING)

    # -- where a guard is needed -------------------------------------------------------
    def _consume(self, call: CallSite, via: CallSite | None) -> None:
        name = call.method or _torch_function(call.qualname) or ""
        subject = call.receiver if call.method else (call.args[0] if call.args else None)
        held = self._held(subject)
        if held is not None and name in GUARDED:
            self._report(held, call, GUARDED[name], via)
            return
        if held is not None and name == "pow" and _negative_power(call):
            self._report(held, call, "inf", via)
            return
        if name in DIVISIONS:
            divisor = call.arg(0, "other") if call.method else call.arg(1, "other")
            guard = self._held(divisor)
            if guard is not None:
                self._report(guard, call, "inf or NaN", via)
            return
        if held is not None and name in CARRIERS:
            self.guarded[id(call.result)] = (call.result, held)

    def _held(self, operand: Operand | None) -> Guard | None:
        if operand is None:
            return None
        entry = self.guarded.get(id(operand.fact))
        return entry[1] if entry is not None and entry[0] is operand.fact else None

    def _report(self, guard: Guard, use: CallSite, gives: str, via: CallSite | None) -> None:
        node = guard.constant.node
        if node in self.reported:
            return
        shown = f"`{self.ctx.code(node)}`"
        if not guard.constant.spelled:
            shown += f" ({guard.number:g})"
        tensor = guard.tensor
        message = (
            f"{shown} rounds to 0 in float16 (so does anything below 2**-25, about 3e-8): "
            f"`{self.ctx.code(guard.site.node, 50)}` guards nothing in a float16 tensor, and "
            f"`{self.ctx.code(use.node, 50)}` gives {gives} where the tensor is 0; use a guard "
            "float16 holds (1e-6, or `torch.finfo(x.dtype).eps`) or compute in float32"
        )
        related: list[tuple[cst.CSTNode, str]] = []
        made = guard.constant.fact.origin
        if made is not None and not guard.constant.spelled:  # set on another line or file
            related.append((made.node, f"{guard.number:g} comes from `{made.text}`"))
        if guard.zeros is not None:
            self._latent(node, message, guard.zeros, use, via, related)
            return
        self.reported.add(node)
        self._finish(node, message, tensor, use, related)

    def _finish(
        self,
        node: cst.CSTNode,
        message: str,
        tensor: Fact,
        use: CallSite,
        related: list[tuple[cst.CSTNode, str]] | None = None,
        severity: Severity | None = None,
    ) -> None:
        """Report with the evidence that ``tensor`` is float16 (its cast, or the module's)."""
        related = list(related or ())
        if tensor.prec is Prec.HALF:  # the code makes it float16 itself
            message += f" (the tensor is float16: {self.where(tensor)})"
            if tensor.origin is not None:
                related.append((tensor.origin.node, f"float16 here: {tensor.origin.text}"))
        else:
            # the cast of the project that writes float16 for this module (``_fp16``)
            message, related, _ = self.with_evidence(message, use.scope, tensor, related)
        self.report(node, message, related=related, severity=severity)


def _handed_zero_rows(call: CallSite) -> list[CallSite]:
    """The calls inside a module of this file that a call hands exact-zero rows, in walk
    order, nested calls' own after theirs (the engine's re-walk: ``CallSite.through``)."""
    found: list[CallSite] = []
    for item in call.through:
        if item.unsplit is None:  # (a re-walk for zero rows pairs with no plain walk)
            found.append(item.site)
            found.extend(_handed_zero_rows(item.site))
    return found


def _negative_power(call: CallSite) -> bool:
    exponent = call.arg(1, "exponent") if call.method is None else call.arg(0, "exponent")
    number = exponent.number if exponent is not None else None
    return number is not None and number < 0


def _torch_function(qualname: str | None) -> str | None:
    if qualname and qualname.startswith("torch.") and qualname.count(".") == 1:
        return qualname.split(".", 1)[1]
    return None
