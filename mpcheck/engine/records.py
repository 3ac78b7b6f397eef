"""A dataclass's fields hold what its constructions give them.

A ``@dataclass`` has no ``__init__`` to walk: ``self.past_keys`` is whatever a construction
passes. Its own factory (``return cls(past_keys=torch.empty(..., dtype=torch.get_default_dtype()))``
in a ``@classmethod``) is such a construction, so the
fields take the join of what they pass (float32 there: a KV-cache entry whose ``append``
concatenates half keys onto float32 past keys returns float32 keys). Only the class's own
methods count: its other methods are walked after those factories, with the fields in
``self``, and the class's summary then tells other files what ``append`` returns
(TransformerLens's cache entry, fixed by ``dtype=cfg.dtype``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import libcst as cst

from mpcheck.engine.facts import Fact, join
from mpcheck.engine.frames import ClassInfo
from mpcheck.engine.sites import Operand

__all__ = ["factories_first", "fields", "record_construction"]

Resolve = Callable[[cst.BaseExpression], str | None]


def fields(cls: cst.ClassDef, resolve: Resolve) -> list[str] | None:
    """The field names of ``cls`` in order when it is a dataclass (None otherwise)."""
    if not any(_names_dataclass(d.decorator, resolve) for d in cls.decorators):
        return None
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    names = []
    for stmt in body:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
            names.append(small.target.value)
    return names


def _names_dataclass(decorator: cst.BaseExpression, resolve: Resolve) -> bool:
    target = decorator.func if isinstance(decorator, cst.Call) else decorator
    return resolve(target) == "dataclasses.dataclass"


def record_construction(
    info: ClassInfo,
    names: list[str],
    args: tuple[Operand, ...],
    kwargs: dict[str, Operand],
) -> None:
    """What one construction passes becomes (or joins) each field's fact in ``self``."""
    passed = {name: arg.fact for name, arg in zip(names, args, strict=False)}
    passed |= {name: kwargs[name].fact for name in names if name in kwargs}
    for name, fact in passed.items():
        if not fact.is_tensor:
            continue
        key = f"self.{name}"
        before = info.attrs.get(key)
        info.attrs[key] = _as_state(fact) if before is None else join(before, _as_state(fact))


def _as_state(fact: Fact) -> Fact:
    """A field is the object's state, no input of the methods that read it."""
    return replace(fact, params=frozenset())


def factories_first(methods: list[cst.FunctionDef]) -> list[cst.FunctionDef]:
    """Class and static methods (the factories) before the rest, order kept otherwise."""

    def factory(fn: cst.FunctionDef) -> bool:
        names = {d.decorator.value for d in fn.decorators if isinstance(d.decorator, cst.Name)}
        return bool(names & {"classmethod", "staticmethod"})

    return sorted(methods, key=lambda fn: not factory(fn))
