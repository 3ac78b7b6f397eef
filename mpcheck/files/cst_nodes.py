"""libcst's node constructors, made cheaper without changing what they build.

A cold run builds tens of millions of nodes, and building them is part of what libcst's
native parser costs (most of the rest is native code). Two costs are libcst's own choices,
not needs of a tree its parser made:

- Each node validates itself (``CSTNode.__post_init__``), although a tree parsed from
  source is valid by construction (every node of 7,655 files of libraries, training code
  and our tests passes validation afterwards; libcst's own comment there suggests not
  validating parsed trees). Our parse thread skips it, except for the one kind whose
  validation catches what libcst's grammar lets through (a str and a bytes literal
  concatenated: CPython's syntax error); nodes built anywhere else (fixes, other users of
  libcst in the process) are validated as before.
- The frozen dataclasses' generated ``__init__`` stores each field with
  ``object.__setattr__``, which looks the slot up by name on every call. The constructors
  installed here take the same arguments, apply the same defaults and validation, and store
  each field through its slot directly: twice as fast per node, a tenth of a parse. A class
  whose constructor is not such a plain generated one keeps libcst's.
"""

from __future__ import annotations

import abc
import dataclasses
import os
import threading
from abc import ABCMeta
from collections.abc import Callable, Iterator
from typing import Any

import libcst as cst

__all__ = ["ORIGINAL_INITS", "install_constructors", "parsing_here", "want_constructors"]

# The threads whose nodes are not validated: each process's parse thread (a forked child has
# none until it starts its own, and its new threads may reuse the parent's identifiers).
_PARSING: set[int] = set()
os.register_at_fork(after_in_child=_PARSING.clear)
# The constructors replaced, by class: the tests build nodes both ways and compare.
ORIGINAL_INITS: dict[type[cst.CSTNode], Callable[..., None]] = {}
# Validated on the parse thread too: libcst's grammar accepts ``b"a" "c"``, its validation
# (and CPython) does not.
_GRAMMAR_LETS_THROUGH: frozenset[type[cst.CSTNode]] = frozenset({cst.ConcatenatedString})


def parsing_here() -> None:
    """The calling thread builds nodes only by parsing source: they need no validation."""
    _PARSING.add(threading.get_ident())


def _post_init(node: cst.CSTNode) -> None:
    if threading.get_ident() not in _PARSING or type(node) in _GRAMMAR_LETS_THROUGH:
        node._validate()


def _node_classes() -> Iterator[type[cst.CSTNode]]:
    seen: set[type] = set()
    stack: list[type] = [cst.CSTNode]
    while stack:
        sub: type
        for sub in stack.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
                yield sub


def _slot_init(cls: type[cst.CSTNode]) -> Callable[..., None] | None:
    """A constructor equal to the dataclass-generated one of ``cls`` that stores each field
    through its slot; None when ``cls`` is not a plain frozen, slotted node dataclass."""
    params = cls.__dict__.get("__dataclass_params__")
    if params is None or not params.init or not params.frozen or "__slots__" not in cls.__dict__:
        return None
    if "__init__" not in cls.__dict__ or cls.__post_init__ is not _post_init:
        return None
    fields = [f for f in dataclasses.fields(cls) if f.init]
    original = cls.__init__
    code = original.__code__
    names = list(code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount])
    if names != [f.name for f in fields] or any(f.kw_only for f in fields):
        return None  # an InitVar or a keyword-only field: not the shape generated below
    slots: dict[str, Any] = {f.name: cls.__dict__.get(f.name) for f in fields}
    if any(type(slot).__name__ != "member_descriptor" for slot in slots.values()):
        return None
    # The generated constructor's defaults, as they are: a field with a default factory has
    # dataclasses' marker as its default, and a caller passing that marker gets the factory.
    defaults = dict(zip(reversed(names), reversed(original.__defaults__ or ()), strict=False))
    if [f.name in defaults for f in fields] != [
        f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        for f in fields
    ]:
        return None
    scope: dict[str, Any] = {"_get_ident": threading.get_ident, "_PARSING": _PARSING}
    params_text, body = ["self"], []
    for i, f in enumerate(fields):
        scope[f"_set{i}"] = slots[f.name].__set__
        value = f.name
        if f.name in defaults:
            scope[f"_default{i}"] = defaults[f.name]
            params_text.append(f"{f.name}=_default{i}")
        else:
            params_text.append(f.name)
        if f.default_factory is not dataclasses.MISSING:
            scope[f"_factory{i}"] = f.default_factory
            value = f"_factory{i}() if {f.name} is _default{i} else {f.name}"
        body.append(f"    _set{i}(self, {value})")
    if cls in _GRAMMAR_LETS_THROUGH:
        body.append("    self._validate()")
    else:
        body.append("    if _get_ident() not in _PARSING:\n        self._validate()")
    source = f"def __init__({', '.join(params_text)}):\n" + "\n".join(body) + "\n"
    exec(source, scope)  # as dataclasses itself builds constructors  # noqa: S102
    init: Callable[..., None] = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


_wanted = False


def want_constructors() -> None:
    """This process may parse many files: the first parse installs the cheaper constructors
    (a run that finds everything in the cache parses nothing and pays nothing)."""
    global _wanted
    _wanted = True


def wanted() -> bool:
    """Whether :func:`want_constructors` was called in this process (or before its fork)."""
    return _wanted


class _PlainChecks(ABCMeta):
    """libcst's node classes as they are, with ``isinstance`` and ``issubclass`` answered
    from the class hierarchy by ``type``'s own checks in C.

    Every node class is an ``ABC``, so each ``isinstance(node, cst.BaseExpression)`` that
    the walk asks (millions per run; a node of another class answers through ABCMeta's
    Python-level hook) pays a Python call. ABCs differ from plain classes in these checks
    only by virtual subclasses (``register``, ``__subclasshook__``), and libcst has none:
    :func:`_plain_checks` swaps the metaclass only while that holds."""

    __instancecheck__ = type.__instancecheck__
    __subclasscheck__ = type.__subclasscheck__


def _plain_checks(classes: list[type]) -> None:
    """``classes`` answer type checks by their hierarchy (:class:`_PlainChecks`), when none
    has a virtual subclass or a subclass hook; else they stay as they are."""
    dump = getattr(abc, "_get_dump", None)  # (C ``abc``: how it shows a class's registry)
    if dump is None:
        return
    for cls in classes:
        registered, *_ = dump(cls)
        if type(cls) is not ABCMeta or registered or "__subclasshook__" in cls.__dict__:
            return
    for cls in classes:
        setattr(cls, "__class__", _PlainChecks)  # noqa: B010 - a metaclass swap


def install_constructors() -> None:
    """Give libcst's node classes the cheaper constructors and type checks (once; 25 ms,
    which a run that parses many files recovers in its first few, and a one-file check
    would not)."""
    if ORIGINAL_INITS or cst.CSTNode.__post_init__ is not _post_init:
        return
    classes = list(_node_classes())
    for cls in classes:
        init = _slot_init(cls)
        if init is not None:
            ORIGINAL_INITS[cls] = cls.__init__
            cls.__init__ = init  # type: ignore[method-assign]
    _plain_checks([cst.CSTNode, *classes])


# Only while libcst's ``__post_init__`` does nothing but validate (1.x does).
_VALIDATE = getattr(cst.CSTNode, "__post_init__", None)
if getattr(getattr(_VALIDATE, "__code__", None), "co_names", ()) == ("_validate",):
    cst.CSTNode.__post_init__ = _post_init  # type: ignore[method-assign,assignment]
