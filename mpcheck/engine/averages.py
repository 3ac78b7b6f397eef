"""What a step of an exponential moving average looks like in code.

An EMA of weights moves its average ``e`` towards the weights ``p`` by a small share of the
gap, in place: ``e.mul_(decay).add_(p, alpha=1 - decay)``, ``e.lerp_(p, 1 - decay)``,
``e.sub_((1 - decay) * (e - p))``, ``e.copy_(decay * e + (1 - decay) * p)`` or torch's
``_foreach_lerp_``. The shapes are read from syntax alone, so the project summary (a class
whose methods step an average: :class:`mpcheck.project.summary.ClassSummary.averages`) and
the walk (MPC207, an average stepped in half) recognise the same steps.

A multiplier counts as a decay when it is a number in [0.5, 1) or a name that says so
(``decay``, ``momentum``, ``beta``, ``ema``); a step weight is ``1 - decay``, a number in
(0, 0.5], or, for ``lerp_``, a named weight: a weight computed in place (``1.0 / (i + 2)``)
or one above 0.5 is an interpolation, not an average's small step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import libcst as cst

from mpcheck.engine.facts import Fact, Kind, Prec
from mpcheck.engine.sites import Operand

AVERAGE = "<moving average>"  # the ``layer`` of an EMA keeper's fact: it holds an average
DECAY_WORDS = ("decay", "momentum", "beta", "ema")
MAX_RATE = 0.5  # a larger weight moves a value by a share of its gap that half precision holds

Number = Callable[[cst.BaseExpression], "float | None"]
_MODULE = cst.Module([])


def literal(node: cst.BaseExpression) -> float | None:
    """A number written here."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return float(node.evaluated_value)
    return None


def code(node: cst.CSTNode) -> str:
    return _MODULE.code_for_node(node)


def accumulator(call: cst.Call, number: Number = literal) -> cst.BaseExpression | None:
    """The average an in-place averaging step updates (``e`` of ``e.lerp_(p, 1 - d)``, the
    list of ``torch._foreach_lerp_(ema, params, w)``), or None when ``call`` is no such step."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    if method in ("_foreach_lerp_", "_foreach_add_"):  # ``torch._foreach_lerp_(ema, p, w)``
        if not positional:
            return None
        if method == "_foreach_lerp_":
            weight = positional[2] if len(positional) > 2 else keywords.get("weight")
            return positional[0] if _rate(weight, number, loose=True) else None
        return positional[0] if _rate(keywords.get("alpha"), number, loose=False) else None
    receiver = func.value
    if method == "lerp_":
        weight = positional[1] if len(positional) > 1 else keywords.get("weight")
        return receiver if _rate(weight, number, loose=True) else None
    if method == "add_" and _chained_decay(receiver, number):
        return _inner_receiver(receiver)  # ``e.mul_(decay).add_(p, alpha=1 - decay)``
    if method == "add_" and _rate(keywords.get("alpha"), number, loose=False):
        return receiver  # ``e.mul_(decay)`` then ``e.add_(p, alpha=1 - decay)``
    text = _unwrapped(code(receiver))
    if method in ("add_", "sub_") and positional and _scaled_gap(positional[0], text, number):
        return receiver  # ``e.sub_((1 - decay) * (e - p))``
    if method == "copy_" and positional and _blend(positional[0], text, number):
        return receiver  # ``e.copy_(decay * e + (1 - decay) * p)``
    return None


def steps_average(node: cst.CSTNode) -> bool:
    """Whether code under ``node`` (a class, a function) steps a moving average in place."""
    found = False

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> bool:
            nonlocal found
            if not found and accumulator(call) is not None:
                found = True
            return not found

    node.visit(Finder())
    return found


def keeper(cls: cst.ClassDef) -> bool:
    """Whether a plain class is an EMA keeper whose average takes the dtype it is handed: a
    method steps an average in place, and nothing in it casts to float32."""
    return steps_average(cls) and not keeps_float32(cls)


def keeps_float32(node: cst.CSTNode) -> bool:
    """Whether a class casts to float32 unconditionally (``.float()``, ``torch.float32``):
    an EMA class that does keeps its average in float32, the usual fix, whatever it is
    handed. A cast under a test (``p.float() if p.ndim == 1 else p``) keeps only some of it."""
    found = False
    tested = 0

    class Finder(cst.CSTVisitor):
        def visit_If(self, _: cst.If) -> None:
            nonlocal tested
            tested += 1

        def leave_If(self, _: cst.If) -> None:
            nonlocal tested
            tested -= 1

        def visit_IfExp(self, _: cst.IfExp) -> None:
            nonlocal tested
            tested += 1

        def leave_IfExp(self, _: cst.IfExp) -> None:
            nonlocal tested
            tested -= 1

        def visit_Attribute(self, attr: cst.Attribute) -> None:
            nonlocal found
            name = attr.attr.value
            if not tested and name in ("float32", "float") and code(attr.value) == "torch":
                found = True

        def visit_Call(self, call: cst.Call) -> None:
            nonlocal found
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "float" and not call.args:
                found = found or not tested

    node.visit(Finder())
    return found


def kept_average(args: Sequence[Operand], kwargs: Mapping[str, Operand], cast: Fact | None) -> Fact:
    """What an EMA keeper built here holds: an average in the dtype it is given as
    ``dtype=`` (``cast``: the walk's reading of that cast, None without one), else in the
    dtype of the model or parameters it copies (its first argument, ``model=`` or
    ``parameters=``), marked :data:`AVERAGE` for the rules."""
    given = kwargs.get("dtype")
    if given is not None and cast is not None:
        if cast.prec is not Prec.HALF or cast.origin is None:
            return Fact(Kind.OTHER, cast.prec, cast.dtype, layer=AVERAGE)
        text = f"kept in the dtype given as `dtype={code(given.node)}`"
        origin = replace(cast.origin, node=given.node, text=text)
        return replace(cast, kind=Kind.OTHER, origin=origin, layer=AVERAGE)
    source = args[0] if args else kwargs.get("model") or kwargs.get("parameters")
    if source is None:
        return Fact(Kind.OTHER, layer=AVERAGE)
    fact = source.fact
    if fact.kind is Kind.SEQ and fact.elem is not None:
        fact = fact.elem  # ``EMAModel(unet.parameters())``: the parameters' dtype
    if fact.kind not in (Kind.TENSOR, Kind.MODULE):
        return Fact(Kind.OTHER, layer=AVERAGE)
    return replace(fact, kind=Kind.OTHER, layer=AVERAGE, elem=None, items=None, train=None)


def _inner_receiver(node: cst.BaseExpression) -> cst.BaseExpression:
    """``e`` of ``e.mul_(decay)``."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return node.func.value
    return node


def _decay(node: cst.BaseExpression, number: Number) -> bool:
    """A multiplier that is an average's decay: a number in [0.5, 1) or a decay's name."""
    value = number(node)
    if value is not None:
        return MAX_RATE <= value < 1.0
    return _named(node, DECAY_WORDS)


def _rate(node: cst.BaseExpression | None, number: Number, *, loose: bool) -> bool:
    """An average's step weight (see the module's docstring)."""
    if node is None:
        return False
    if _one_minus(node):
        return True
    value = number(node)
    if value is not None:
        return 0.0 < value <= MAX_RATE
    if loose and isinstance(node, (cst.Name, cst.Attribute)):
        return True
    return _named(node, ("decay",))


def _chained_decay(node: cst.BaseExpression, number: Number) -> bool:
    """``e.mul_(decay)``: the receiver of a chained add is a decay's in-place product."""
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
        return False
    if node.func.attr.value != "mul_" or len(node.args) != 1:
        return False
    return _decay(node.args[0].value, number)


def _scaled_gap(node: cst.BaseExpression, average: str, number: Number) -> bool:
    """``(1 - decay) * (e - p)`` or ``(p - e) * rate``: a step along the gap to ``e``."""
    if not isinstance(node, cst.BinaryOperation) or not isinstance(node.operator, cst.Multiply):
        return False
    for factor, gap in ((node.left, node.right), (node.right, node.left)):
        if not _is_gap(gap, average):
            continue
        if _one_minus(factor) or _named(factor, ("decay",)):
            return True
        value = number(factor)
        if value is not None and 0.0 < value <= MAX_RATE:
            return True
    return False


def _blend(node: cst.BaseExpression, average: str, number: Number) -> bool:
    """``decay * e + (1 - decay) * p`` (either order): the average's new value."""
    if not isinstance(node, cst.BinaryOperation) or not isinstance(node.operator, cst.Add):
        return False
    for term in (node.left, node.right):
        if not isinstance(term, cst.BinaryOperation) or not isinstance(term.operator, cst.Multiply):
            return False
    for term in (node.left, node.right):
        assert isinstance(term, cst.BinaryOperation)
        for own, factor in ((term.left, term.right), (term.right, term.left)):
            if _unwrapped(code(own)) == average and _decay(factor, number):
                return True
    return False


def _is_gap(node: cst.BaseExpression, average: str) -> bool:
    """``e - p`` or ``p - e`` with ``e`` the average."""
    if not isinstance(node, cst.BinaryOperation) or not isinstance(node.operator, cst.Subtract):
        return False
    return average in (_unwrapped(code(node.left)), _unwrapped(code(node.right)))


def _unwrapped(text: str) -> str:
    """``e.data`` and ``e`` are the same average."""
    return text.removesuffix(".data").removesuffix(".detach()")


def _one_minus(node: cst.BaseExpression) -> bool:
    """``1 - decay``, ``1. - self.decay`` or ``1 - 0.999``: one minus a decay."""
    if not isinstance(node, cst.BinaryOperation) or not isinstance(node.operator, cst.Subtract):
        return False
    if literal(node.left) != 1.0:
        return False
    right = literal(node.right)
    return right is None or MAX_RATE <= right < 1.0


def _named(node: cst.BaseExpression, words: tuple[str, ...]) -> bool:
    """A name or attribute whose last part says one of ``words``."""
    if isinstance(node, cst.Attribute):
        node = node.attr
    if not isinstance(node, cst.Name):
        return False
    name = node.value.lower()
    return any(w in name for w in words)
