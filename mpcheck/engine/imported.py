"""Facts that cross a file boundary: a summary's plain values to and from the walk's facts.

The project phase stores what a function returns as a :class:`~mpcheck.project.summary.Value`
(no syntax tree, serialisable); a call in another file turns it back into a fact whose
origin is that call, worded with where the dtype was really decided
(``upcast to float32 by `.float()` in `apply_rope` (layers/rope.py:11)``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol

import libcst as cst

from mpcheck.engine.facts import (
    Cause,
    Fact,
    Kind,
    Origin,
    Prec,
    casts_nothing_known,
    none_literal,
    one_path_factory,
    promote,
)
from mpcheck.engine.frames import ClassInfo
from mpcheck.engine.keep_fp32 import KeepFp32
from mpcheck.engine.loads import DEFAULT_MARK, load_dtype, loaded_in
from mpcheck.engine.sites import Operand
from mpcheck.engine.training import Accelerator
from mpcheck.project.names import ImportTable, dotted
from mpcheck.project.summary import (
    ClassSummary,
    External,
    Function,
    Place,
    ProjectLookup,
    Value,
)

__all__ = ["call_result", "class_bases", "fact_of", "inherit", "value_of"]


def value_of(fact: Fact, place: Callable[[cst.CSTNode], tuple[int, int]], path: str) -> Value:
    """``fact`` (a function's return) as plain data; ``place`` gives a node's line and column."""
    origin = None
    if fact.origin is not None and fact.origin.place is not None:
        # decided in a third file: that place, which a caller's findings then name too
        origin = replace(fact.origin.place, text=fact.origin.text)
    elif fact.origin is not None:
        line, column = place(fact.origin.node)
        origin = Place(path, line, column, fact.origin.text)
    items = None
    if fact.kind is Kind.SEQ and fact.items is not None:
        items = tuple(value_of(item, place, path) for item in fact.items)
    return Value(
        kind=fact.kind.value,
        prec=fact.prec.value,
        dtype=fact.dtype,
        cause=fact.cause.value if fact.cause else None,
        origin=origin,
        same_as=tuple(sorted(fact.params)),
        zero_dim=fact.zero_dim,
        maybe=fact.maybe,
        layer=fact.layer,
        items=items,
        number=fact.value if fact.kind is Kind.SCALAR else None,
        mode=_mode(fact),
    )


def _mode(fact: Fact) -> str | None:
    """An accelerator's mixed precision as a summary keeps it (:attr:`Value.mode`)."""
    acc = fact.train
    if fact.kind is not Kind.ACCELERATOR or not isinstance(acc, Accelerator):
        return None
    if isinstance(acc.node, cst.Param):
        return None  # the caller's own accelerator, handed back
    if acc.own_scaler is False:
        return "deepspeed"
    mode = acc.mixed_precision or "launch"
    return mode if acc.own_scaler else f"{mode}+deepspeed"


def call_result(
    node: cst.Call,
    name: str,
    function: Function,
    args: tuple[Operand, ...],
    kwargs: Mapping[str, Operand],
) -> Fact:
    """What calling ``function`` (imported as ``name``) with these arguments returns."""

    loads = function.returns.kind == Kind.MODULE.value

    def argument(index: int) -> Fact | None:
        given = None
        if index < len(args):
            given = args[index]
        elif index < len(function.params) and function.params[index] in kwargs:
            given = kwargs[function.params[index]]
        elif index == len(function.params) and loads:
            # (``**kwargs`` forwarded to a load: the keyword no named parameter takes)
            given = load_dtype({k: v for k, v in kwargs.items() if k not in function.params})
        if given is None:
            return None
        node = given.node
        return (
            none_literal(node)
            if isinstance(node, cst.Name) and node.value == "None"
            else given.fact
        )

    return fact_of(function.returns, node, name, argument)


def fact_of(
    value: Value,
    node: cst.CSTNode,
    name: str,
    argument: Callable[[int], Fact | None] = lambda _: None,
) -> Fact:
    """``value`` as a fact of this file: its origin is ``node`` (the call, the base class),
    worded with where it was decided (``... in `apply_rope` (layers/rope.py:11)``)."""
    kind = Kind(value.kind)
    if kind is Kind.SEQ:
        items = None
        if value.items is not None:
            items = tuple(fact_of(v, node, name, argument) for v in value.items)
        elif len(value.same_as) == 1:  # ``[m.module if ddp else m for m in models]``
            handed = argument(value.same_as[0])
            if handed is not None and handed.kind is Kind.SEQ and handed.items is not None:
                return handed
        return Fact(Kind.SEQ, items=items)
    if value.same_as and kind is Kind.MODULE and value.cause == Cause.MODEL_CAST.value:
        if Prec(value.prec) is Prec.UNKNOWN:  # loaded in the dtype a parameter holds
            return _loaded_in(value, node, name, argument(value.same_as[0]))
    if value.same_as and Prec(value.prec) in (Prec.MODEL, Prec.UNKNOWN):
        actual = [f for f in map(argument, value.same_as) if f is not None]
        if len(actual) == 1 and one_path_factory(actual[0]):
            return actual[0]  # float32 on the path where a factory made the argument
        if actual:
            if kind is Kind.TENSOR:
                return promote(actual, node)
            # (``return weight_dtype if args.full_fp16 else None``: that dtype on some paths)
            return replace(actual[0], maybe=True) if value.maybe else actual[0]
        return Fact(kind)
    handed = _working_dtype_argument(value, argument)
    if handed is not None and casts_nothing_known(handed):
        return Fact(Kind.MODULE, layer=value.layer)  # ``dtype=None`` casts nothing
    origin = None
    if value.origin is not None:
        where = f"{value.origin.path}:{value.origin.line}"
        text = f"{value.origin.text} in `{name}` ({where})"
        cause = Cause(value.cause) if value.cause else Cause.LITERAL
        origin = Origin(node, cause, text, place=value.origin)
    return Fact(
        kind,
        Prec(value.prec),
        value.dtype,
        origin,
        # (the caller's own parameter decides in its turn: its summary links it)
        handed.params if handed is not None else frozenset(),
        zero_dim=value.zero_dim,
        maybe=value.maybe,
        layer=value.layer,
        value=value.number,
    )


def _loaded_in(value: Value, node: cst.CSTNode, name: str, given: Fact | None) -> Fact:
    """A model a function of another file loads in the dtype its parameter (or its
    ``**kwargs``) holds: at this call, in the dtype the call hands
    (:mod:`~mpcheck.engine.loads`)."""
    place = value.origin
    load = None if place is None else Origin(node, Cause.MODEL_CAST, "", place=place)
    where = "" if place is None else f" ({place.path}:{place.line})"
    return loaded_in(load, f"`{name}`", given, value.layer, value.dtype == DEFAULT_MARK, where)


def _working_dtype_argument(value: Value, argument: Callable[[int], Fact | None]) -> Fact | None:
    """A model the function returns cast to the working dtype its caller hands it
    (``load(..., weight_dtype)`` loading the weights in ``weight_dtype``): that argument."""
    if value.kind != Kind.MODULE.value or value.cause != Cause.MODEL_CAST.value:
        return None
    if not value.same_as or not value.maybe or Prec(value.prec) is not Prec.HALF:
        return None
    return argument(value.same_as[0])


Elsewhere = tuple[cst.BaseExpression, str, int, ClassSummary]


def class_bases(
    node: cst.ClassDef, imports: ImportTable, project: ProjectLookup | None
) -> tuple[tuple[str, ...], tuple[Elsewhere, ...]]:
    """The qualified name of each base of ``node`` (through the imports, and through another
    project file that binds it to a library's class: ``from .wrappers import BatchNorm2d``
    where wrappers.py says ``BatchNorm2d = torch.nn.BatchNorm2d``), and the bases defined in
    other project files, with the module each is in. One project lookup per base."""
    names: list[str] = []
    found: list[Elsewhere] = []
    for arg in node.bases:
        if arg.keyword:
            continue
        qual = imports.resolve(arg.value)
        located = None if (qual or "").startswith("torch.") else imports.locate(arg.value)
        # (``nn.Module``: the engine knows torch's classes)
        symbol = project(*located) if project is not None and located is not None else None
        if isinstance(symbol, External):
            qual = symbol.qualname
        elif isinstance(symbol, ClassSummary) and located is not None:
            found.append((arg.value, located[0].rpartition(".")[0], located[1], symbol))
        names.append(qual or dotted(arg.value) or "")
    return tuple(names), tuple(found)


class Inheriting(Protocol):
    """What :func:`inherit` needs of the walk."""

    classes: dict[str, ClassInfo]
    imported: dict[str, ClassSummary]
    keep: KeepFp32
    project: ProjectLookup | None

    def code(self, node: cst.CSTNode) -> str: ...


def inherit(
    walk: Inheriting,
    info: ClassInfo,
    base: cst.BaseExpression,
    module: str,
    level: int,
    cls: ClassSummary,
) -> None:
    """What ``info`` gets from its base ``cls`` of another project file (``module``): the
    ``self.<attr>`` facts of its ``__init__`` (and the classes those parts are instances of)
    and its ``_keep_in_fp32_modules`` names, which keep a subclass's parts float32 too."""
    if cls.keep_patterns:
        walk.keep.kept_params.setdefault(info.node.name.value, set()).update(cls.keep_patterns)
    name = walk.code(base)
    for attr, value in sorted(cls.attrs.items()):
        fact = fact_of(value, base, name)
        layer = fact.layer or ""
        if fact.kind is Kind.MODULE and layer and layer not in walk.classes and walk.project:
            found = walk.project(f"{module}.{layer}", level)
            if isinstance(found, ClassSummary) and found.is_module:
                walk.imported.setdefault(layer, found)
        info.attrs.setdefault(f"self.{attr}", fact)
