"""One argument binder: which fact a call passes for each parameter of a local function.

Summaries substitute arguments for parameters, a helper first reached from a call is
walked with what that call passes, and modules and training helpers are walked again
with the caller's facts; all of them bind arguments the same way, here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

import libcst as cst

from mpcheck.engine.facts import Fact, Kind, Origin, Prec, none_literal
from mpcheck.engine.sites import Operand
from mpcheck.project.names import children, descendants, dotted


def parameters(fn: cst.FunctionDef, *, skip_self: bool) -> list[cst.Param]:
    """``fn``'s named parameters in order (no ``*args``/``**kwargs``), less ``self`` if asked
    (a method called on an object; a ``@staticmethod`` called so has no ``self`` to skip)."""
    params = list(fn.params.posonly_params) + list(fn.params.params)
    params += list(fn.params.kwonly_params)
    if skip_self and params and not is_static(fn):
        return params[1:]
    return params


def is_static(fn: cst.FunctionDef) -> bool:
    """Decorated ``@staticmethod``: its first parameter is an argument like the others."""
    return any(dotted(d.decorator) == "staticmethod" for d in fn.decorators)


def input_names(fn: cst.FunctionDef) -> list[str]:
    """The names of a method's inputs in the order ``Fact.params`` numbers them: its
    parameters, less a leading ``self``/``cls`` (a staticmethod's ``ctx`` is input 0)."""
    names = [p.name.value for p in parameters(fn, skip_self=False)]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def bind_arguments(
    fn: cst.FunctionDef,
    args: tuple[Operand, ...],
    kwargs: Mapping[str, Operand],
    *,
    skip_self: bool,
) -> list[Fact | None]:
    """The fact the call passes for each of :func:`parameters`; None where it passes none.

    A keyword wins over a position; keyword-only parameters take keywords only.
    """
    kwonly = fn.params.kwonly_params
    bound: list[Fact | None] = []
    for i, param in enumerate(parameters(fn, skip_self=skip_self)):
        name = param.name.value
        if name in kwargs:
            bound.append(kwargs[name].fact)
        elif i < len(args) and param not in kwonly:
            bound.append(args[i].fact)
        else:
            bound.append(None)
    return bound


def passed(
    fn: cst.FunctionDef,
    args: tuple[Operand, ...],
    kwargs: Mapping[str, Operand],
    *,
    skip_self: bool,
) -> dict[str, Fact]:
    """The parameters the call passes, by name: what a re-walk of ``fn`` binds."""
    params = parameters(fn, skip_self=skip_self)
    bound = bind_arguments(fn, args, kwargs, skip_self=skip_self)
    return {p.name.value: f for p, f in zip(params, bound, strict=True) if f is not None}


def none_arguments(
    fn: cst.FunctionDef, args: tuple[Operand, ...], kwargs: Mapping[str, Operand]
) -> dict[str, Fact]:
    """The parameters a call leaves ``None`` (passes ``None``, or passes nothing for a
    ``None`` default): ``None`` in a re-walk of ``fn`` for it, where ``dtype=None`` is no
    dtype (``set_module_tensor_to_device(..., dtype=dtype)`` then keeps each tensor's)."""
    out = {}
    positional = [p for p in parameters(fn, skip_self=False) if p not in fn.params.kwonly_params]
    for i, param in enumerate(parameters(fn, skip_self=False)):
        name = param.name.value
        given = kwargs.get(name) or (args[i] if param in positional and i < len(args) else None)
        node = given.node if given is not None else param.default
        if isinstance(node, cst.Name) and node.value == "None":
            out[name] = none_literal(node)
    return out


class FixedDefault(NamedTuple):
    """``__init__(..., dtype=torch.half)`` building its parts with ``dtype``: the position
    of ``dtype`` (``self`` excluded), its default, the dtype it names, and the parameters
    tested by an ``if`` around every use of ``dtype`` (``if weight is None:``): a call
    passing one of them may take a path that builds nothing in that dtype."""

    position: int
    default: cst.BaseExpression
    dtype: str
    guards: tuple[tuple[int, str], ...]  # (position, name) of each

    def taken_by(self, node: cst.Call) -> bool:
        return by_default(node, self.position, self.guards)


def by_default(node: cst.Call, index: int, guards: tuple[tuple[int, str], ...]) -> bool:
    """Whether ``node`` builds its class in the default ``dtype`` at ``index``: it passes
    neither ``dtype`` nor a parameter (a guard) that may choose another path."""
    if passes(node, index, "dtype"):
        return False
    return not any(passes(node, i, name) for i, name in guards)


FIXED_DTYPES = {
    "torch.float32": "float32",
    "torch.float": "float32",
    "torch.float16": "float16",
    "torch.half": "float16",
    "torch.bfloat16": "bfloat16",
}


def fixed_default(
    init: cst.FunctionDef | None,
    resolve: Callable[[cst.BaseExpression], str | None],
) -> FixedDefault | None:
    """A module's ``__init__(..., dtype=<a floating dtype>)`` whose parts and buffers are
    built with ``dtype`` (``torch.zeros(shape, dtype=dtype)``, ``.to(dtype)``): a class
    built without ``dtype`` is built in that dtype, as with a literal ``dtype=``."""
    if init is None:
        return None
    params = parameters(init, skip_self=True)
    for index, param in enumerate(params):
        if param.name.value != "dtype" or param.default is None:
            continue
        dtype = FIXED_DTYPES.get(resolve(param.default) or "")
        uses = _dtype_uses(init.body)
        if dtype is None or not uses:
            return None
        tested = frozenset.intersection(*(frozenset(g) for g in uses))
        guards = tuple((i, p.name.value) for i, p in enumerate(params) if p.name.value in tested)
        return FixedDefault(index, param.default, dtype, guards)
    return None


def float32_default(
    init: cst.FunctionDef | None,
    resolve: Callable[[cst.BaseExpression], str | None],
) -> tuple[int, cst.BaseExpression] | None:
    """:func:`fixed_default` when it is float32: the position and default of ``dtype``."""
    found = fixed_default(init, resolve)
    return (found.position, found.default) if found and found.dtype == "float32" else None


def _dtype_uses(body: cst.CSTNode) -> list[tuple[str, ...]]:
    """For each ``dtype=dtype`` or ``.to(dtype)`` in ``body`` (an iterative tree search, no
    codegen), the names the ``if`` statements around it test."""
    found: list[tuple[str, ...]] = []
    stack: list[tuple[cst.CSTNode, tuple[str, ...]]] = [(body, ())]
    while stack:
        node, tested = stack.pop()
        if isinstance(node, cst.Arg) and _is_dtype_name(node.value):
            if node.keyword is not None and node.keyword.value == "dtype":
                found.append(tested)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            only = node.args[0] if len(node.args) == 1 else None
            if node.func.attr.value == "to" and only is not None and only.keyword is None:
                if _is_dtype_name(only.value):
                    found.append(tested)
        if isinstance(node, cst.If):
            names = descendants(node.test)
            tested = tested + tuple(n.value for n in names if isinstance(n, cst.Name))
        stack.extend((child, tested) for child in children(node))
    return found


def _is_dtype_name(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "dtype"


def passes(node: cst.Call, index: int, name: str) -> bool:
    """Whether ``node`` may pass the parameter at ``index`` (``self`` excluded) named ``name``."""
    if any(arg.star for arg in node.args):
        return True
    positional = [arg for arg in node.args if arg.keyword is None]
    named = {arg.keyword.value for arg in node.args if arg.keyword is not None}
    return len(positional) > index or name in named


def joined_default(fact: Fact, given: Fact, fn: cst.FunctionDef) -> Fact:
    """What a helper returns when it joined a factory's float32 of one of its paths (a cache
    allocated without ``dtype=`` unless one is passed) with the activations it was given:
    float32 on that path, whatever the model runs in."""
    origin = fact.origin
    assert origin is not None
    when = "when no other value is passed" if fact.defaulted else "on one of its paths"
    text = (
        f"{origin.text} {when}, and returned by `{fn.name.value}` after joining it with "
        "the tensors it is passed"
    )
    made = Origin(origin.node, origin.cause, text, origin.via, place=origin.place)
    return Fact(Kind.TENSOR, Prec.FULL, "float32", made, maybe=True, apart=given.apart)
