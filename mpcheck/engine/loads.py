"""A model loaded in the dtype its caller hands: ``from_pretrained(p, torch_dtype=torch_dtype)``.

A project's loader that hands its own ``torch_dtype`` parameter, or its ``**kwargs``, to
``from_pretrained`` loads, at each call, in the dtype that call hands it. A call that hands
none (nor ``None``) leaves ``from_pretrained`` without a dtype, as a direct call without one:
float32, transformers' default load dtype up to its version 4 (and diffusers'), when the
parameter defaults to ``None`` or is the ``**kwargs``; a parameter whose default is another
value loads in that value, unknown here. (transformers 5 loads a checkpoint without a dtype
as ``dtype="auto"`` does, in the dtype it is stored in: the version 4 default is modelled,
and the rule documentation says so.)

The walk of the loader marks such a load (:func:`mark_default`) so that its summary, used by
other files, carries it too; :func:`loaded_in` answers for a call of this file or another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TypeVar

import libcst as cst

from mpcheck.engine.binding import parameters
from mpcheck.engine.facts import Cause, Fact, Kind, Origin, Prec, is_none

DEFAULT_MARK = "float32"  # ``Fact.dtype`` of a load in a parameter's dtype: float32 if unhanded

_V = TypeVar("_V")


def load_dtype(kwargs: Mapping[str, _V]) -> _V | None:
    """The dtype keyword of a load: ``torch_dtype=`` or its newer name ``dtype=``."""
    return kwargs.get("torch_dtype") or kwargs.get("dtype")


def unhanded_is_default(fn: cst.FunctionDef, slot: int, method: bool) -> bool:
    """Whether a call of ``fn`` that hands nothing for the parameter at ``slot`` (``self``
    not counted in a ``method``; one past the named parameters: the ``**kwargs``) leaves the
    load without a dtype: the ``**kwargs``, or a parameter that defaults to ``None``."""
    named = parameters(fn, skip_self=method)
    if slot >= len(named):
        return True
    default = named[slot].default
    return default is None or (isinstance(default, cst.Name) and default.value == "None")


def mark_default(loaded: Fact, default: bool) -> Fact:
    """``loaded`` (a load in a parameter's dtype), marked as float32 when a call hands none."""
    return replace(loaded, dtype=DEFAULT_MARK) if default else loaded


def loaded_in(
    load: Origin | None,
    who: str,
    given: Fact | None,
    layer: str | None,
    default: bool,
    where: str = "",
) -> Fact:
    """The model a load in a handed dtype loads at one call: in ``given``, the dtype the call
    hands (None: it hands none; :func:`~mpcheck.engine.facts.none_literal`: it hands
    ``None``), or float32 when it hands none and that leaves the load without a dtype
    (``default``: the load was marked). ``load`` is the load's origin as this call names it,
    ``who`` the loader (```load_model```), ``where`` its place in another file."""
    if given is None or is_none(given):
        if not default or load is None:
            return Fact(Kind.MODULE, layer=layer)
        text = f"loaded by {who}{where} in float32 (no dtype handed to it: the default)"
        default_load = replace(load, cause=Cause.LITERAL, text=text, via=None)
        return Fact(Kind.MODULE, Prec.FULL, "float32", default_load, layer=layer)
    if given.kind is not Kind.DTYPE or given.prec is Prec.UNKNOWN:
        return Fact(Kind.MODULE, layer=layer)  # (a dtype of the caller's own caller, ...)
    origin: Origin | None = None
    if load is not None and given.origin is not None:
        via = replace(given.origin, text=f"the dtype handed to {who} is {given.origin.text}")
        text = f"loaded by {who}{where} in the dtype handed to it"
        origin = replace(load, text=text, via=via)
    return Fact(Kind.MODULE, given.prec, given.dtype, origin, maybe=given.maybe, layer=layer)
