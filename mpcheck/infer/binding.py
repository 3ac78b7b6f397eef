"""One argument binder: which fact a call passes for each parameter of a local function.

Summaries substitute arguments for parameters, a helper first reached from a call is
walked with what that call passes, and modules and training helpers are walked again
with the caller's facts; all of them bind arguments the same way, here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import libcst as cst

from mpcheck.facts import Fact, Kind, Origin, Prec
from mpcheck.names import children, dotted
from mpcheck.sites import Operand


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


def float32_default(
    init: cst.FunctionDef | None,
    resolve: Callable[[cst.BaseExpression], str | None],
) -> tuple[int, cst.BaseExpression] | None:
    """The position (``self`` excluded) and default of a module's ``__init__(...,
    dtype=torch.float32)`` that its parts and buffers are built with (``torch.zeros(shape,
    dtype=dtype)``): a class built without ``dtype`` is built in float32, as with a literal
    ``dtype=torch.float32``."""
    if init is None:
        return None
    for index, param in enumerate(parameters(init, skip_self=True)):
        if param.name.value != "dtype" or param.default is None:
            continue
        if resolve(param.default) not in ("torch.float32", "torch.float"):
            return None
        return (index, param.default) if _builds_with_dtype(init.body) else None
    return None


def _builds_with_dtype(body: cst.CSTNode) -> bool:
    """``dtype=dtype`` or ``.to(dtype)`` somewhere in ``body`` (a tree search, no codegen)."""
    stack = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Arg) and _is_dtype_name(node.value):
            if node.keyword is not None and node.keyword.value == "dtype":
                return True
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            only = node.args[0] if len(node.args) == 1 else None
            if node.func.attr.value == "to" and only is not None and only.keyword is None:
                if _is_dtype_name(only.value):
                    return True
        stack.extend(children(node))
    return False


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
    made = Origin(origin.node, origin.cause, text, origin.via)
    return Fact(Kind.TENSOR, Prec.FULL, "float32", made, maybe=True, apart=given.apart)
