"""MPC207: an exponential moving average of weights kept and updated in half precision."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from mpcheck.api import (
    EMA_KEEPERS,
    CallSite,
    Fact,
    Kind,
    Operand,
    Prec,
    Rule,
    RuleContext,
    Severity,
)

# Names that say a multiplier is the average's decay (``self.decay``, ``ema_momentum``).
DECAY_WORDS = ("decay", "momentum", "beta", "ema")
# A weight of ``lerp_`` above this is an interpolation, not an average's small step.
MAX_RATE = 0.5


class HalfMovingAverage(Rule):
    code = "MPC207"
    name = "half-moving-average"
    severity = Severity.WARNING
    summary = (
        "An exponential moving average of weights (an EMA model) is kept in float16 or "
        "bfloat16 and updated in place: each small update rounds away, so the average stalls."
    )
    why = """
        An EMA update moves the average `e` towards the weights `p` by `(1 - decay) * (p -
        e)`, a step of 1e-3 or 1e-4 of the gap for the usual decays 0.999 and 0.9999. A
        float16 value changes only when the step exceeds half its spacing (2**-11 of its
        size), a bfloat16 value only past 2**-8 of it: with weights that move slowly, almost
        every step rounds back to the old value. Measured under torch 2.13 (4096 weights of
        std 0.02 drifting by 10 % over 2000 steps, decay 0.999): 72 % of a float16 EMA's
        entries and 97 % of a bfloat16 EMA's never move, and the averages fall 74 % and 98 %
        short of the float32 EMA's movement.

        Reported where the code keeps the average in half precision on evidence: a model or
        tensor the code casts or loads in float16/bfloat16 (`.half()`, `.to(weight_dtype)`,
        `torch_dtype=`), or a copy of one (`copy.deepcopy(model)` keeps the dtype), is

        - handed to a library EMA that keeps its copy in the dtype it is given (diffusers'
          `EMAModel` clones the parameters, timm's `ModelEma*`, `ema_pytorch.EMA` and
          torch's `AveragedModel` deep-copy the model), or
        - updated in place by an averaging step: `e.mul_(decay).add_(p, alpha=1 - decay)`,
          `e.lerp_(p, 1 - decay)`, `e.sub_((1 - decay) * (e - p))`, `e.copy_(decay * e +
          (1 - decay) * p)`, `torch._foreach_lerp_(ema_params, params, 1 - decay)`.

        A multiplier counts as a decay when it is a number in [0.5, 1) or a name that says
        so (`decay`, `momentum`, `beta`, `ema`); a `lerp_` weight above 0.5 is no average.
        Not reported: an average the code keeps in float32 (a copy made before the model is
        cast, `.float()` on it), a model the code only runs in half by autocast, or a
        class's parameter that only "may run in half" (the average's dtype is then unknown).
        With a dtype variable (`weight_dtype`) that is float32 on some runs, the message
        says the finding holds on the runs where it is half.
        """
    symptom = """
        Nothing raises. The EMA model's samples or metrics lag far behind the trained
        model's, or stay at the initial weights; a bfloat16 EMA barely moves at all.
        """
    how_to_fix = """
        Keep the average in float32 and update it from the weights cast to float32: make the
        copy before casting the model to half, or cast it back (`ema =
        copy.deepcopy(model).float()`, `EMAModel(...)` of float32 parameters), and update it
        with `e.lerp_(p.float(), 1 - decay)`. Cast the EMA to half only for inference or to
        save it. mpcheck offers no automatic fix: where the float32 copy lives (GPU memory,
        CPU offload) is the author's choice.
        """
    bad = """
        model = Net().to(torch.bfloat16)
        ema = copy.deepcopy(model)  # a bfloat16 copy
        ...
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.lerp_(p, 1 - 0.999)  # rounds away: e never moves
        """
    good = """
        model = Net().to(torch.bfloat16)
        ema = copy.deepcopy(model).float()
        ...
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.lerp_(p.float(), 1 - 0.999)
        """

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        self.seen: set[int] = set()  # nodes reported (a loop's body is walked twice)

    def check_call(self, call: CallSite) -> None:
        if call.scope.full_precision is not None or self.never_runs(call.scope):
            return
        keeper = EMA_KEEPERS.get(call.qualname or "")
        if keeper is not None:
            given = call.arg(0, "parameters") or call.arg(0, "model")
            if given is not None and _half(given.fact) is not None:
                self._report(call, given, f"keeps its moving average as {keeper}")
            return
        accumulator = self._updated(call)
        if accumulator is not None:
            self._report(call, accumulator, "steps a moving average in place")

    def _updated(self, call: CallSite) -> Operand | None:
        """The accumulator an averaging step updates in place, when it is half on evidence."""
        method = call.method
        if call.qualname in ("torch._foreach_lerp_", "torch._foreach_add_"):
            first = call.arg(0, "self")
            if first is None or _half(first.fact) is None:
                return None
            if call.qualname == "torch._foreach_lerp_":
                return first if self._rate(call.arg(2, "weight"), loose=True) else None
            return first if self._rate(call.kwargs.get("alpha"), loose=False) else None
        receiver = call.receiver
        if method is None or receiver is None or _half(receiver.fact) is None:
            return None
        if method == "lerp_":
            return receiver if self._rate(call.arg(1, "weight"), loose=True) else None
        if method == "add_" and _chained_decay(call.node, self._decay):
            return receiver  # ``e.mul_(decay).add_(p, alpha=1 - decay)``
        if method == "add_" and self._rate(call.kwargs.get("alpha"), loose=False):
            return receiver  # ``e.mul_(decay)`` then ``e.add_(p, alpha=1 - decay)``
        if method in ("add_", "sub_") and call.args:
            text = self.ctx.code(receiver.node)
            if self._scaled_gap(call.args[0].node, text):
                return receiver  # ``e.sub_((1 - decay) * (e - p))``
        if method == "copy_" and call.args:
            if self._blend(call.args[0].node, self.ctx.code(receiver.node)):
                return receiver  # ``e.copy_(decay * e + (1 - decay) * p)``
        return None

    # -- the shapes of an average's step ------------------------------------------------
    def _decay(self, node: cst.BaseExpression) -> bool:
        """A multiplier that is an average's decay: a number in [0.5, 1) or a decay's name."""
        number = _number(node)
        if number is not None:
            return MAX_RATE <= number < 1.0
        return _named(node, DECAY_WORDS)

    def _rate(self, operand: Operand | None, *, loose: bool) -> bool:
        """An average's step weight: ``1 - decay``, a number in (0, 0.5], or (``loose``,
        for ``lerp_``) a named weight the code does not show above 0.5."""
        if operand is None:
            return False
        if _one_minus(operand.node):
            return True
        number = operand.number if operand.number is not None else _number(operand.node)
        if number is not None:
            return 0.0 < number <= MAX_RATE
        if loose and isinstance(operand.node, (cst.Name, cst.Attribute)):
            return True  # (a weight computed here, ``1.0 / (i + 2)``, is an interpolation)
        return _named(operand.node, ("decay",))

    def _scaled_gap(self, node: cst.BaseExpression, accumulator: str) -> bool:
        """``(1 - decay) * (e - p)`` or ``(p - e) * rate``: a step along the gap to ``e``."""
        if not isinstance(node, cst.BinaryOperation) or not isinstance(node.operator, cst.Multiply):
            return False
        for factor, gap in ((node.left, node.right), (node.right, node.left)):
            if not _is_gap(gap, accumulator, self.ctx.code):
                continue
            if _one_minus(factor) or _named(factor, ("decay",)):
                return True
            number = _number(factor)
            if number is not None and 0.0 < number <= MAX_RATE:
                return True
        return False

    def _blend(self, node: cst.BaseExpression, accumulator: str) -> bool:
        """``decay * e + (1 - decay) * p`` (either order): the average's new value."""
        if not isinstance(node, cst.BinaryOperation) or not isinstance(node.operator, cst.Add):
            return False
        terms = (node.left, node.right)
        if not all(
            isinstance(t, cst.BinaryOperation) and isinstance(t.operator, cst.Multiply)
            for t in terms
        ):
            return False
        for term in terms:
            assert isinstance(term, cst.BinaryOperation)
            for own, factor in ((term.left, term.right), (term.right, term.left)):
                if _unwrapped(self.ctx.code(own)) == accumulator and self._decay(factor):
                    return True
        return False

    # -- the finding -----------------------------------------------------------------------
    def _report(self, call: CallSite, held: Operand, does: str) -> None:
        if id(call.node) in self.seen:
            return
        self.seen.add(id(call.node))
        half = _half(held.fact)
        assert half is not None
        dtype = half.dtype if half.dtype and not half.maybe else "half precision"
        spacing = {"bfloat16": "2**-9", "float16": "2**-12"}.get(dtype, "2**-12 or 2**-9")
        origin = half.origin
        where = f", {self.where(half)}" if origin is not None else ""
        clause, decided = self.decided(origin.via if origin is not None else None)
        held_text = self.ctx.code(_accumulator(held.node), 40)
        message = (
            f"`{self.ctx.code(call.node, 60)}` {does} (`{held_text}` is {dtype}{where}"
            f"{clause}): a step smaller than {spacing} of the average rounds away in "
            f"{'float16 or bfloat16' if dtype == 'half precision' else dtype}, so the "
            "average stalls; keep it in float32 and update it from `p.float()`"
        )
        related: list[tuple[cst.CSTNode, str]] = [*decided]
        if origin is not None:
            related.append((origin.node, f"{dtype} here: {origin.text}"))
        self.report(call.node, message, related=related)


def _accumulator(node: cst.BaseExpression) -> cst.BaseExpression:
    """``e`` of ``e.mul_(decay)``: the average a chained step starts from."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        if node.func.attr.value == "mul_":
            return node.func.value
    return node


def _half(fact: Fact) -> Fact | None:
    """The half fact of a model, tensor or sequence of parameters the code makes half."""
    if fact.kind is Kind.SEQ and fact.elem is not None:
        fact = fact.elem
    if fact.kind not in (Kind.TENSOR, Kind.MODULE) or fact.prec is not Prec.HALF:
        return None
    return fact


def _chained_decay(node: cst.CSTNode, decay: Callable[[cst.BaseExpression], bool]) -> bool:
    """``e.mul_(decay).add_(...)``: the add's receiver is a decay's in-place product."""
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
        return False
    inner = node.func.value
    if not isinstance(inner, cst.Call) or not isinstance(inner.func, cst.Attribute):
        return False
    if inner.func.attr.value != "mul_" or len(inner.args) != 1:
        return False
    return decay(inner.args[0].value)


def _is_gap(node: cst.BaseExpression, accumulator: str, code: Callable[[cst.CSTNode], str]) -> bool:
    """``e - p`` or ``p - e`` with ``e`` the accumulator."""
    if not isinstance(node, cst.BinaryOperation) or not isinstance(node.operator, cst.Subtract):
        return False
    sides = (_unwrapped(code(node.left)), _unwrapped(code(node.right)))
    return accumulator in sides


def _unwrapped(text: str) -> str:
    """``e.data`` and ``e`` are the same accumulator."""
    return text.removesuffix(".data").removesuffix(".detach()")


def _one_minus(node: cst.BaseExpression) -> bool:
    """``1 - decay``, ``1. - self.decay`` or ``1 - 0.999``: one minus a decay."""
    if not isinstance(node, cst.BinaryOperation) or not isinstance(node.operator, cst.Subtract):
        return False
    if _number(node.left) != 1.0:
        return False
    right = _number(node.right)
    return right is None or MAX_RATE <= right < 1.0


def _number(node: cst.BaseExpression) -> float | None:
    """A number written here."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return float(node.evaluated_value)
    return None


def _named(node: cst.BaseExpression, words: tuple[str, ...]) -> bool:
    """A name or attribute whose last part says one of ``words``."""
    if isinstance(node, cst.Attribute):
        node = node.attr
    if not isinstance(node, cst.Name):
        return False
    name = node.value.lower()
    return any(w in name for w in words)
