"""A torch layer built on its own and handed to a function: its dtype is then the callee's.

``proj = nn.Linear(8, 8)`` is float32, and stays so while nothing casts it: MPC102 reports it
when it is fed a half input. Handing it to a function (a quantizer, ``quantize_(proj)``; a
helper that casts or replaces its weights in place) passes the object itself, and the callee
may cast it (``layer.half()``): "built in float32 and never cast" no longer holds, so the
variable's dtype becomes unknown. Torch's own functions (``nn.Sequential(proj)``,
``checkpoint(proj, x)``) and the builtins that only look at it (``print``, ``isinstance``)
keep it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import libcst as cst

from mpcheck.engine.binding import bind_arguments, parameters
from mpcheck.engine.facts import UNKNOWN, Cause, Fact, Kind, Prec, join, seq_of
from mpcheck.engine.frames import Frame
from mpcheck.engine.sites import Operand
from mpcheck.project.names import descendants, dotted

__all__ = ["cast_by_callee", "cast_by_imported", "cast_each", "hand_over", "param_cast"]

_LOOKING = frozenset(
    "print len isinstance issubclass id repr str type hasattr getattr callable vars".split()
)


def hand_over(
    func: cst.BaseExpression,
    qual: str | None,
    args: tuple[Operand, ...],
    kwargs: dict[str, Operand],
    frame: Frame,
) -> None:
    """Forget that a stand-alone float32 layer handed to a call that may cast it is float32."""
    handed = [op for op in (*args, *kwargs.values()) if op.fact.kind is Kind.MODULE]
    if not handed:
        return  # (most calls hand no module: the callee's name is not needed)
    callee = qual or dotted(func)
    if (callee or "").startswith("torch.") or callee in _LOOKING:
        return
    for op in handed:
        fact = op.fact
        if not fact.default_float32_layer:
            continue
        path = dotted(op.node)
        if path is not None and frame.env.get(path) == fact:
            frame.env[path] = Fact(Kind.MODULE, Prec.UNKNOWN, layer=fact.layer)


def cast_by_callee(
    fn: cst.FunctionDef,
    args: tuple[Operand, ...],
    kwargs: Mapping[str, Operand],
    after: Frame,
    frame: Frame,
) -> None:
    """A helper of this file walked with the call's models (``after``: its frame at the end)
    that cast a model handed to it (``model.to(device, dtype=dtype)``, accelerate's
    ``set_module_tensor_to_device(model, name, device, value, dtype=dtype)``): a module's
    casts change the object itself, so the caller's variable is cast too (as it is where
    the helper returns: each ``return``, and its end when it falls off it)."""
    ends = [*after.exits, *(() if after.dead else (after.env,))]
    if not ends:
        return
    params = parameters(fn, skip_self=False)
    bound = bind_arguments(fn, args, kwargs, skip_self=False)
    for param, before in zip(params, bound, strict=True):
        if before is not None and before.kind is Kind.SEQ:
            _list_cast_by_callee(param.name.value, before, ends, args, kwargs, frame)
            continue
        if before is None or before.kind is not Kind.MODULE:
            continue
        name = param.name.value
        # on a path that bound the parameter to another model, the caller's is as it was
        seen = [f if _casts_handed(f, name) else before for f in (e.get(name) for e in ends)]
        now = seen[0]
        for other in seen[1:]:
            now = join(now, other)
        if (
            now is None
            or now == before
            or now.kind is not Kind.MODULE
            or now.origin is None
            or now.origin.cause is not Cause.MODEL_CAST
        ):
            continue
        op = next((o for o in (*args, *kwargs.values()) if o.fact is before), None)
        path = dotted(op.node) if op is not None else None
        held = frame.env.get(path) if path is not None else None
        if path is None or held is None or held.kind is not Kind.MODULE:
            continue  # (forgotten by :func:`hand_over` is still the object handed)
        frame.rebind(path, now)


def param_cast(
    fn: cst.FunctionDef | None, model: cst.BaseExpression, dtype: cst.BaseExpression
) -> tuple[int, int] | None:
    """``(i, j)`` when ``fn`` casts its ``i``-th parameter (a model) to its ``j``-th (a dtype
    defaulting to None or to nothing): what another file's call of it does to its model."""
    if fn is None or not isinstance(model, cst.Name) or not isinstance(dtype, cst.Name):
        return None
    params = parameters(fn, skip_self=False)
    names = [p.name.value for p in params]
    if model.value not in names or dtype.value not in names:
        return None
    j = names.index(dtype.value)
    default = params[j].default
    if default is not None and not (isinstance(default, cst.Name) and default.value == "None"):
        return None  # (a call that passes nothing casts to the default: not followed)
    return names.index(model.value), j


def cast_by_imported(
    casts: tuple[tuple[int, int], ...],
    params: tuple[str, ...],
    args: tuple[Operand, ...],
    kwargs: Mapping[str, Operand],
) -> list[tuple[str, Operand, Operand]]:
    """The caller's models that a function of another file casts in place (its summary's
    ``casts``), with the dtype each is cast to: (variable, model, dtype) for each passed
    model variable and a passed dtype that is not ``None``."""

    def argument(index: int) -> Operand | None:
        if index < len(args):
            return args[index]
        return kwargs.get(params[index]) if index < len(params) else None

    found = []
    for i, j in casts:
        model, dtype = argument(i), argument(j)
        if model is None or dtype is None or model.fact.kind is not Kind.MODULE:
            continue
        if isinstance(dtype.node, cst.Name) and dtype.node.value == "None":
            continue
        path = dotted(model.node)
        if path is not None:
            found.append((path, model, dtype))
    return found


def _casts_handed(fact: Fact | None, name: str) -> bool:
    """Whether ``fact`` is the helper's cast of the very object handed as ``name``
    (``model.to(...)``, ``model = model.half()``, ``set_module_tensor_to_device(model, ...)``),
    not another model bound to the parameter (``Model.from_pretrained(..., torch_dtype=...)``)."""
    node = fact.origin.node if fact is not None and fact.origin is not None else None
    if not isinstance(node, cst.Call):
        return False
    if isinstance(node.func, cst.Attribute) and dotted(node.func.value) == name:
        return True
    first = node.args[0].value if node.args else None
    return isinstance(first, cst.Name) and first.value == name


def cast_each(loop: cst.For, before: Fact, after: Fact | None, items: Fact, frame: Frame) -> None:
    """``for model in models: model.half()``: a module's cast changes the object itself, so
    each model the loop went over is cast: the list (``models``), or each name of a literal
    one (``for m in (unet, vae):``). ``before``/``after``: the loop variable's fact as the
    body got it and as the body left it."""
    target = loop.target
    if not isinstance(target, cst.Name) or after is None or after == before:
        return
    if after.kind is not Kind.MODULE or not _casts_handed(after, target.value):
        return
    if _rebinds(loop.body, target.value):
        return  # (``model = copy.deepcopy(model)``: what is cast is another object)
    cast = after  # (``if fp16: model.half()``: half on some paths, ``maybe``)
    source = loop.iter
    if isinstance(source, cst.Tuple | cst.List):
        for element in source.elements:
            path = dotted(element.value)
            held = frame.env.get(path) if path is not None else None
            if path is not None and held is not None and held.kind is Kind.MODULE:
                frame.rebind(path, _cast_object(held, cast))
        return
    path = dotted(source)
    if path is None or items.kind is not Kind.SEQ or frame.env.get(path) != items:
        return
    frame.rebind(path, _cast_list(items, cast))


def _cast_list(items: Fact, cast: Fact) -> Fact:
    """A list of models after each was cast by ``cast``."""
    if items.items is not None:
        return seq_of(_cast_object(f, cast) for f in items.items)
    return replace(items, elem=_cast_object(items.elem or UNKNOWN, cast))


def cast_module(module: Fact, cast: Fact) -> Fact:
    """The module ``module`` after ``cast`` (its dtype and why)."""
    return replace(
        module,
        prec=cast.prec,
        dtype=cast.dtype,
        origin=cast.origin,
        maybe=cast.maybe,
        params=cast.params,  # (to a parameter's working dtype: the caller's argument decides)
    )


def _cast_object(held: Fact, cast: Fact) -> Fact:
    """A model (or an object the walk does not know, which ``.half()`` shows is one) cast."""
    if held.kind is Kind.MODULE:
        return cast_module(held, cast)
    if held == UNKNOWN:
        return Fact(Kind.MODULE, cast.prec, cast.dtype, cast.origin, cast.params, maybe=cast.maybe)
    return held


def _list_cast_by_callee(
    name: str,
    before: Fact,
    ends: list[dict[str, Fact]],
    args: tuple[Operand, ...],
    kwargs: Mapping[str, Operand],
    frame: Frame,
) -> None:
    """A helper that casts each model of the list handed to it (:func:`cast_each` in its
    body): the caller's list is cast too, where the helper returns."""
    seen = [e.get(name) for e in ends]
    now = seen[0] if all(f == seen[0] for f in seen) else None
    if now is None or now == before or now.kind is not Kind.SEQ:
        return
    cast = [f for f in (now.items or (now.elem,)) if f is not None and f.kind is Kind.MODULE]
    if not cast or any(f.cause is not Cause.MODEL_CAST for f in cast):
        return
    op = next((o for o in (*args, *kwargs.values()) if o.fact is before), None)
    path = dotted(op.node) if op is not None else None
    if path is not None and frame.env.get(path) == before:
        frame.rebind(path, now)


def _rebinds(body: cst.CSTNode, name: str) -> bool:
    """Whether ``body`` assigns ``name`` (other than to the cast of itself, ``m = m.half()``)."""
    for node in descendants(body):
        if isinstance(node, cst.Assign):
            value = node.value
            func = value.func if isinstance(value, cst.Call) else None
            own = isinstance(func, cst.Attribute) and dotted(func.value) == name
            if not own and any(
                isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets
            ):
                return True
        elif isinstance(node, cst.AnnAssign | cst.AugAssign):
            if isinstance(node.target, cst.Name) and node.target.value == name:
                return True
    return False
