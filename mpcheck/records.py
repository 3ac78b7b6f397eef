"""``dataclass`` at a quarter of the import cost: the same methods, compiled in one ``exec``.

A one-file check defines about sixty dataclasses. On Python 3.11 each costs about 0.6 ms to
create, most of it compiling its generated methods one ``exec`` at a time (3.13 batches
them); together they were a third of what a one-file check costs beyond ``import libcst``.
Here the standard library still processes the class (fields, defaults, ``__match_args__``,
``dataclasses.fields``/``replace`` all work) but is asked for no methods, and ``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, the order methods and the frozen ``__setattr__`` /
``__delattr__`` are generated as it would generate them, in a single ``exec``.

Modules use it as ``from mpcheck.records import dataclass``; type checkers see the real
``dataclasses.dataclass`` (below ``TYPE_CHECKING``). Only what mpcheck uses is supported
(``frozen``, ``order``, ``kw_only``, ``field(default=, default_factory=, compare=)``,
``__post_init__``); anything else, or a class that defines one of those methods itself, is
handed to the standard library unchanged. ``tests/test_records.py`` holds the equivalence.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

__all__ = ["dataclass"]

_OWN = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__")
_ORDER = (("__lt__", "<"), ("__le__", "<="), ("__gt__", ">"), ("__ge__", ">="))


def _fast(cls: type, frozen: bool, order: bool, kw_only: bool) -> type:
    if any(name in cls.__dict__ for name in (*_OWN, *(n for n, _ in _ORDER))):
        return dataclasses.dataclass(cls, frozen=frozen, order=order, kw_only=kw_only)
    documented = bool(cls.__dict__.get("__doc__"))
    cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False, kw_only=kw_only)
    fields = dataclasses.fields(cls)
    if len(fields) != len(cls.__dict__["__dataclass_fields__"]):  # InitVar, ClassVar
        pseudo = set(cls.__dict__["__dataclass_fields__"]) - {f.name for f in fields}
        if any("InitVar" in str(cls.__annotations__.get(name, "")) for name in pseudo):
            raise TypeError(f"{cls.__qualname__}: InitVar is not supported here")
    names: dict[str, Any] = {
        "__cls": cls,
        "__object": object,
        "__missing": _FACTORY,
        "__frozen_error": dataclasses.FrozenInstanceError,
        "__field_names": frozenset(f.name for f in fields),
    }
    lines = [_init(fields, frozen, names, hasattr(cls, "__post_init__")), _repr(fields)]
    compared = [f.name for f in fields if f.compare]
    own = f"({''.join(f'self.{n},' for n in compared)})"
    other = f"({''.join(f'other.{n},' for n in compared)})"
    lines.append(
        "def __eq__(self, other):\n"
        f"    if other.__class__ is self.__class__:\n        return {own} == {other}\n"
        "    return NotImplemented\n"
    )
    if order:
        for method, op in _ORDER:
            lines.append(
                f"def {method}(self, other):\n"
                f"    if other.__class__ is self.__class__:\n        return {own} {op} {other}\n"
                "    return NotImplemented\n"
            )
    if frozen:
        hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
        lines.append(
            f"def __hash__(self):\n    return hash(({''.join(f'self.{n},' for n in hashed)}))\n"
        )
        for method, args in (("__setattr__", "name, value"), ("__delattr__", "name")):
            lines.append(
                f"def {method}(self, {args}):\n"
                "    if type(self) is __cls or name in __field_names:\n"
                "        raise __frozen_error(f'cannot assign to field {name!r}')\n"
                f"    super(__cls, self).{method}({args})\n"
            )
    namespace: dict[str, Any] = {}
    exec("".join(lines), names, namespace)  # noqa: S102 - our own generated code, as dataclasses
    annotations = {f.name: f.type for f in fields if f.init}
    namespace["__init__"].__annotations__ = {**annotations, "return": None}
    for name, function in namespace.items():
        function.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, _recursive_repr(function) if name == "__repr__" else function)
    if not frozen:
        cls.__hash__ = None  # type: ignore[assignment]  # eq without frozen: unhashable
    if not documented:  # as dataclasses: the signature stands in for a docstring
        import inspect

        signature = str(inspect.signature(cls)).replace(" -> None", "")
        cls.__doc__ = cls.__name__ + signature
    return cls


class _Factory:
    """Stands for "call the default factory" in a signature, shown as dataclasses shows it."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _init(
    fields: tuple[dataclasses.Field[Any], ...], frozen: bool, names: dict[str, Any], post: bool
) -> str:
    positional, keyword, body = ["self"], list[str](), list[str]()
    for f in fields:
        if f.init:
            params = keyword if f.kw_only else positional
            if f.default is not dataclasses.MISSING:
                names[f"__default_{f.name}"] = f.default
                params.append(f"{f.name}=__default_{f.name}")
            elif f.default_factory is not dataclasses.MISSING:
                params.append(f"{f.name}=__missing")
            else:
                params.append(f.name)
        if f.default_factory is not dataclasses.MISSING:
            names[f"__factory_{f.name}"] = f.default_factory
            value = (
                f"__factory_{f.name}() if {f.name} is __missing else {f.name}"
                if f.init
                else f"__factory_{f.name}()"
            )
        elif f.init:
            value = f.name
        else:
            continue  # a class attribute holds its default
        if frozen:
            body.append(f"    __object.__setattr__(self, {f.name!r}, {value})\n")
        else:
            body.append(f"    self.{f.name} = {value}\n")
    if post:
        body.append("    self.__post_init__()\n")
    params = [*positional, *(["*", *keyword] if keyword else [])]
    code = "".join(body) or "    pass\n"
    return f"def __init__({', '.join(params)}):\n{code}"


def _repr(fields: tuple[dataclasses.Field[Any], ...]) -> str:
    shown = ", ".join(f"{f.name}={{self.{f.name}!r}}" for f in fields if f.repr)
    return f"def __repr__(self):\n    return f'{{self.__class__.__qualname__}}({shown})'\n"


def _recursive_repr(function: Any) -> Any:
    """As ``dataclasses._recursive_repr``: ``...`` for an object already being shown."""
    import _thread
    import functools

    running: set[tuple[int, int]] = set()

    @functools.wraps(function)
    def wrapper(self: object) -> str:
        key = id(self), _thread.get_ident()
        if key in running:
            return "..."
        running.add(key)
        try:
            result: str = function(self)
        finally:
            running.discard(key)
        return result

    return wrapper


if TYPE_CHECKING:
    from dataclasses import dataclass
else:

    def dataclass(
        cls: type | None = None,
        /,
        *,
        frozen: bool = False,
        order: bool = False,
        kw_only: bool = False,
    ) -> Any:
        """``dataclasses.dataclass`` with ``frozen``, ``order`` and ``kw_only``."""
        if cls is None:
            return lambda c: _fast(c, frozen, order, kw_only)
        return _fast(cls, frozen, order, kw_only)
