"""What a step of an exponential moving average looks like in code.

An EMA of weights moves its average ``e`` towards the weights ``p`` by a small share of the
gap, in place: ``e.mul_(decay).add_(p, alpha=1 - decay)``, ``e.lerp_(p, 1 - decay)``,
``e.sub_((1 - decay) * (e - p))``, ``e.copy_(decay * e + (1 - decay) * p)`` or torch's
``_foreach_lerp_``. The shapes are read from syntax alone, so the project summary (a class
whose methods step an average: :class:`mpcheck.project.summary.ClassSummary.averages`) and
the walk (MPC207, an average stepped in half) recognise the same steps.

A multiplier counts as a decay when it is a number in [0.9, 1) or a name that says so
(``decay``, ``ema``); a step is one minus such a decay (``1 - decay``, ``one_minus_decay``),
for ``lerp_`` also a number in (0, 0.1] or a name saying a decay or a rate; a chained
``mul_(decay).add_(...)`` must add the complement of the same decay. Not steps of an average
of weights: an interpolation (a soup's ``lerp_(q, 0.5)``, Lookahead's ``lerp_(p, alpha)``,
a weight computed in place), a momentum sum (``buf.mul_(momentum).add_(grad)``), an L2 term
(``grad.add_(p, alpha=weight_decay)``) and an optimizer's moments of a gradient (a target
that names ``grad``; their steps are a tenth of a noisy gap, which half precision holds).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import libcst as cst

from mpcheck.engine.facts import Fact, Kind, Prec
from mpcheck.engine.sites import Operand

DECAY_WORDS = ("decay", "ema")
# The methods a step is made with (what :func:`accumulator` reads; any other call is none).
STEP_METHODS = frozenset({"lerp_", "add_", "sub_", "copy_", "_foreach_lerp_", "_foreach_add_"})
MIN_DECAY = 0.9  # an average of weights decays by this or more per step
MAX_RATE = 0.1  # a larger weight is an interpolation (a soup, Lookahead's 0.5), not an EMA step
# A keeper's ``averages``: it copies what it is handed, or keeps its copy in float32.
COPIED, FLOAT32 = "copied", "float32"
# torch factories that make float32 without ``dtype=`` (a shadow made with one is float32)
_FLOAT32_FACTORIES = frozenset({"zeros", "ones", "empty", "full", "rand", "randn"})

Number = Callable[[cst.BaseExpression], "float | None"]
_MODULE = cst.Module([])


def literal(node: cst.BaseExpression) -> float | None:
    """A number written here."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return float(node.evaluated_value)
    return None


def code(node: cst.CSTNode) -> str:
    """The source of ``node``: a step is told by what its operands say, the average by name."""
    return _MODULE.code_for_node(node)


def accumulator(call: cst.Call, number: Number = literal) -> cst.BaseExpression | None:
    """The average an in-place averaging step updates (``e`` of ``e.lerp_(p, 1 - d)``, the
    list of ``torch._foreach_lerp_(ema, params, w)``), or None when ``call`` is no such step."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    if method not in STEP_METHODS:
        return None
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    alpha = keywords.get("alpha")
    if method in ("_foreach_lerp_", "_foreach_add_"):  # ``torch._foreach_lerp_(ema, p, w)``
        if not positional or "grad" in code(positional[0]):
            return None
        if method == "_foreach_lerp_":
            weight = positional[2] if len(positional) > 2 else keywords.get("weight")
            return positional[0] if _weight(weight, number) else None
        return positional[0] if alpha is not None and _one_minus(alpha, number) else None
    receiver = func.value
    if "grad" in code(receiver):
        return None  # a gradient or an optimizer's moment of it: no average of weights
    if method == "lerp_":
        weight = positional[1] if len(positional) > 1 else keywords.get("weight")
        return receiver if _weight(weight, number) else None
    if method == "add_" and _chained_decay(receiver, number):
        decay = _decay_of(receiver)  # ``e.mul_(decay).add_(p, alpha=1 - decay)``
        step = alpha if alpha is not None else (positional[0] if positional else None)
        if step is not None and decay is not None and _complement(step, decay, number):
            return _inner_receiver(receiver)
        return None
    if method == "add_" and alpha is not None and _one_minus(alpha, number):
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


def keeper(cls: cst.ClassDef) -> str:
    """What a plain class keeps, when it is an EMA keeper: a method steps an average in place
    and ``__init__`` copies what it is handed (``copy.deepcopy``, ``.clone()``,
    ``.detach()``). :data:`FLOAT32` when ``__init__`` casts to float32 unconditionally or
    makes its storage with a float32 factory (``torch.zeros(shape)``), the usual fix;
    :data:`COPIED` otherwise (the dtype handed in); "" for no keeper. Casts in other methods
    (logging, saving) and under a test (``p.float() if p.ndim == 1 else p``) keep only part
    of the average and do not count."""
    init = next(
        (s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"),
        None,
    )
    if init is None or not _copies(init) or not steps_average(cls):
        return ""
    return FLOAT32 if _float32(init) else COPIED


def kept_average(
    args: Sequence[Operand], kwargs: Mapping[str, Operand], cast: Fact | None, keeps: str
) -> Fact:
    """What an EMA keeper built here holds (``keeps``: :func:`keeper`'s answer, or
    :data:`COPIED` for a library's): an average in the dtype given as ``dtype=`` (``cast``,
    the walk's reading of that cast; None without one, or ``dtype=None``), else float32 for
    a keeper that keeps float32, else the dtype of the model or parameters it copies (its
    first argument, ``model=`` or ``parameters=``): what ``CallSite.average`` holds."""
    given = kwargs.get("dtype")
    if given is not None and cast is not None:
        if cast.prec is not Prec.HALF or cast.origin is None:
            return Fact(Kind.OTHER, cast.prec, cast.dtype)
        text = f"kept in the dtype given as `dtype={code(given.node)}`"
        origin = replace(cast.origin, node=given.node, text=text)
        return replace(cast, kind=Kind.OTHER, origin=origin)
    if keeps == FLOAT32:
        return Fact(Kind.OTHER, Prec.FULL, "float32")
    source = args[0] if args else kwargs.get("model") or kwargs.get("parameters")
    if source is None:
        return Fact(Kind.OTHER)
    fact = source.fact
    if fact.kind is Kind.SEQ and fact.elem is not None:
        fact = fact.elem  # ``EMAModel(unet.parameters())``: the parameters' dtype
    if fact.kind not in (Kind.TENSOR, Kind.MODULE):
        return Fact(Kind.OTHER)
    return replace(fact, kind=Kind.OTHER, elem=None, items=None, train=None)


def _copies(init: cst.FunctionDef) -> bool:
    """Whether ``__init__`` copies what it is handed (a deep copy, a clone, a detach)."""
    found = False

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            nonlocal found
            func = call.func
            name = func.attr.value if isinstance(func, cst.Attribute) else None
            if isinstance(func, cst.Name):
                name = func.value
            if name in ("deepcopy", "clone", "detach"):
                found = True

    init.visit(Finder())
    return found


def _float32(init: cst.FunctionDef) -> bool:
    """Whether ``__init__`` makes float32 outside any test: ``.float()``, ``torch.float32``,
    or a float32 factory without ``dtype=`` (``torch.zeros(p.shape)``)."""
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
            if tested or not isinstance(func, cst.Attribute):
                return
            if func.attr.value == "float" and not call.args:
                found = True
            typed = any(a.keyword is not None and a.keyword.value == "dtype" for a in call.args)
            factory = func.attr.value in _FLOAT32_FACTORIES and code(func.value) == "torch"
            if factory and not typed:
                found = True

    init.visit(Finder())
    return found


def _inner_receiver(node: cst.BaseExpression) -> cst.BaseExpression:
    """``e`` of ``e.mul_(decay)``."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return node.func.value
    return node


def _decay_of(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``decay`` of ``e.mul_(decay)``."""
    if isinstance(node, cst.Call) and node.args:
        return node.args[0].value
    return None


def _decay(node: cst.BaseExpression, number: Number) -> bool:
    """A multiplier that is an average's decay: a number in [0.9, 1) or a decay's name."""
    value = number(node)
    if value is not None:
        return MIN_DECAY <= value < 1.0
    return _named(node, DECAY_WORDS)


def _weight(node: cst.BaseExpression | None, number: Number) -> bool:
    """A ``lerp_`` weight that is an average's step (see the module's docstring)."""
    if node is None:
        return False
    if _one_minus(node, number):
        return True
    value = number(node)
    if value is not None:
        return 0.0 < value <= MAX_RATE
    return _named(node, (*DECAY_WORDS, "rate"))


def _one_minus(node: cst.BaseExpression, number: Number) -> bool:
    """``1 - decay``, ``1. - self.decay``, ``1 - 0.999``, or a name saying so
    (``one_minus_decay``)."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        return _named(node, ("one_minus",))
    if not isinstance(node, cst.BinaryOperation) or not isinstance(node.operator, cst.Subtract):
        return False
    return literal(node.left) == 1.0 and _decay(node.right, number)


def _complement(node: cst.BaseExpression, decay: cst.BaseExpression, number: Number) -> bool:
    """The step of a chained ``mul_(decay).add_(...)``: one minus that decay, the number
    completing it to 1, or the added value scaled so (``(1 - decay) * p``)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        return _complement(node.left, decay, number) or _complement(node.right, decay, number)
    if isinstance(node, cst.BinaryOperation) and _one_minus(node, number):
        return code(node.right) == code(decay)
    if _one_minus(node, number):
        return True  # ``one_minus_decay``
    value, kept = number(node), number(decay)
    return value is not None and kept is not None and abs(value + kept - 1.0) < 1e-9


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
        if _one_minus(factor, number):
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


def _named(node: cst.BaseExpression, words: tuple[str, ...]) -> bool:
    """A name or attribute whose last part says one of ``words``, as a word of its own
    (``ema_decay``, ``self.decay``; not ``schema`` or ``remaining`` for ``ema``); a word with
    an underscore (``one_minus``) is looked for as written."""
    if isinstance(node, cst.Attribute):
        node = node.attr
    if not isinstance(node, cst.Name):
        return False
    name = node.value.lower()
    parts = set(name.split("_"))
    return any(w in name if "_" in w else w in parts for w in words)
