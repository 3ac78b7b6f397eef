"""What one file exports to the files that import it: small, plain, serialisable data.

The checking phase asks "what does ``apply_rope(q, k)`` from ``layers/rope.py`` return?" or
"which submodules of ``MyBlock`` keep float32 weights?" without walking ``rope.py`` again.
A summary answers in terms of the caller's arguments (``same_as`` lists the parameters a
result follows), so one summary serves every call site. It holds no syntax tree: facts that
came from another file carry a :class:`Place` (path, line, column and the phrase a message
quotes) instead of a node, and the whole summary round-trips through JSON for the cache and
for ``-j`` workers. Everything is sorted by name, so a summary does not depend on the order
files were read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from mpcheck.files.hashing import hex_digest

__all__ = [
    "ClassSummary",
    "Exports",
    "External",
    "Function",
    "ModuleSummary",
    "Place",
    "Pool",
    "ProjectLookup",
    "digest_of",
    "Value",
]

FORMAT = 17  # bump when the JSON layout changes: older cached summaries are then ignored


@dataclass(frozen=True, slots=True)
class Place:
    """Where a fact was decided in another file: ``rope.py:11:9: upcast by `.float()```."""

    path: str
    line: int
    column: int
    text: str


@dataclass(frozen=True, slots=True)
class Value:
    """A value a function returns (or a module-level constant), as the engine's facts see it.

    ``kind``/``prec``/``dtype``/``cause`` are the names of the engine's enums, so this module
    stays free of engine imports. ``same_as`` holds the indices of the parameters the value
    follows (``return x.to(dtype)`` follows parameter 0 unless ``dtype`` is known).
    """

    kind: str
    prec: str = "unknown"
    dtype: str | None = None
    cause: str | None = None
    origin: Place | None = None
    same_as: tuple[int, ...] = ()
    zero_dim: bool = False
    maybe: bool = False  # holds on some paths only
    layer: str | None = None  # a module value: its torch.nn class name, when known
    items: tuple[Value, ...] | None = None  # a tuple of known length (``return q, k``)
    number: float | None = None  # a Python number bound at module level (``NEAR_INF = 1e20``)
    # an ``accelerate.Accelerator`` returned: its ``mixed_precision`` ("fp16", "bf16", "no";
    # "launch" when set at launch time; "deepspeed" when DeepSpeed scales, not accelerate)
    mode: str | None = None


@dataclass(frozen=True, slots=True)
class Function:
    """A function or method: its parameter names (to bind a call's keywords to the indices
    of ``Value.same_as``; ``self`` excluded for methods) and what it returns."""

    params: tuple[str, ...]
    returns: Value
    # (model, dtype) parameter positions: it casts the model handed to it to that dtype in
    # place (a module's cast changes the object the caller holds)
    casts: tuple[tuple[int, int], ...] = ()
    # parameter positions whose GradScaler (a scaler, or an accelerator's) takes float16
    # gradients after the call: it replaces ``_unscale_grads_`` to pass ``allow_fp16=True``
    fp16_unscale: tuple[int, ...] = ()
    # it casts its first argument (a module, or its weights) to half in place, as
    # ``convert_module_to_f16`` does for ``model.input_blocks.apply(...)``
    halves: bool = False


@dataclass(frozen=True, slots=True)
class ClassSummary:
    """A class as another file uses it: as a base, a submodule, or a model it builds."""

    bases: tuple[str, ...]  # qualified where the import table resolves them
    is_module: bool
    keep_fp32: bool  # its weights stay float32 whatever the model is cast to
    keep_fp32_attrs: tuple[str, ...] = ()  # ``_keep_in_fp32_modules`` and float32 submodules
    submodules: dict[str, str] = field(default_factory=dict)  # attr -> layer, norm, attention ...
    methods: dict[str, Function] = field(default_factory=dict)  # ``forward`` among them
    # ``self.<attr>`` after ``__init__`` (modules and tensors): what a subclass inherits
    attrs: dict[str, Value] = field(default_factory=dict)
    # its own ``_keep_in_fp32_modules`` names: they also keep a subclass's parts in float32
    keep_patterns: tuple[str, ...] = ()
    # ``__init__(..., dtype=torch.float32)`` (or ``torch.half``) building its parts: the
    # position of ``dtype`` (``self`` excluded), where the default is, the dtype it names and
    # the parameters an ``if`` around its every use tests; built without ``dtype`` or any of
    # those, the class is in that dtype
    dtype_default: tuple[int, Place, str, tuple[tuple[int, str], ...]] | None = None
    # ``forward`` hands its first input as it came to one of its own layers: a caller must
    # pass it in the module's dtype (``x_embedder(x.float())`` raises in a half model)
    feeds_weights: bool = False
    # ``forward`` casts its input (or a value made of it) itself: a half model of it takes
    # any dtype (``wav = wav.clamp(-1, 1).float()``, ``x = x.to(self.dtype)``)
    casts_input: bool = False
    # the positions (``self`` excluded) of every input ``forward`` hands as it came, alone or
    # in arithmetic with others, to its own layers: a float32 argument there meets half weights
    fed_inputs: tuple[int, ...] = ()
    # the dict classes whose entries peft's ``cast_adapter_dtype`` upcasts, read in this
    # class's file or its bases' (None: not seen), for the tuner layers built on it
    adapter_casts: tuple[str, ...] | None = None
    # a part it keeps float32 joins the residual stream ahead of a fused norm that refuses
    # mixed input (:mod:`mpcheck.engine.kept_residual`): that norm's name, the kept part's,
    # and the places of the ``_keep_in_fp32_modules`` entry, the residual add, the norm and
    # its substitution
    kept_residual: tuple[str, str, tuple[Place, ...]] | None = None
    # (method, input positions, the layer call): a public method (``forward``, ``decode``,
    # ...) that hands those inputs (``self`` excluded), as they came or in arithmetic with
    # each other, to a Linear, conv or RNN of its own, outside any autocast it opens, with no
    # cast between (``self.post_quant_conv(z)``). torch never casts a layer's input to its
    # weights, so a float32 model of the class refuses half values there; the place's text
    # is the layer as the method writes it. The first such call per method and positions.
    feeds: tuple[tuple[str, tuple[int, ...], Place], ...] = ()
    # a plain class whose methods step a moving average in place of a copy ``__init__`` makes
    # (:func:`mpcheck.engine.averages.keeper`): "copied" (the dtype it is handed, or given
    # as ``dtype=``), "float32" (``__init__`` keeps its copy in float32), "" for no keeper
    averages: str = ""


@dataclass(frozen=True, slots=True)
class ModuleSummary:
    """Everything one file exports. ``reexports`` maps a name bound by an import to the
    ``(dotted module, level, attribute)`` it came from, so ``from .rope import apply_rope``
    in a package ``__init__.py`` leads a lookup on to ``rope.py``.

    What ``from module import *`` brings (:mod:`mpcheck.project.exports`): ``names``, its
    public module-level names, or ``public``, its literal ``__all__``; and ``stars``, the
    ``(dotted, level)`` of each module it star-imports in turn (whose public names it passes
    on when it has no ``__all__``, and where a lookup of a name it does not bind goes on)."""

    module: str
    path: str
    functions: dict[str, Function] = field(default_factory=dict)
    classes: dict[str, ClassSummary] = field(default_factory=dict)
    constants: dict[str, Value] = field(default_factory=dict)
    reexports: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    names: tuple[str, ...] = ()
    public: tuple[str, ...] | None = None
    stars: tuple[tuple[str, int], ...] = ()

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, **_plain(self)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ModuleSummary | None:
        """The summary stored in ``text``; None when it is not one this version can read."""
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.pop("format", None) != FORMAT:
                return None
            return _module(data)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None

    @property
    def digest(self) -> str:
        """A hash of what importers can see: when it is unchanged, they need no re-check."""
        return digest_of(self.to_json())


def digest_of(text: str) -> str:
    """The digest of a summary from its ``to_json`` text (made once for the cache)."""
    return hex_digest(text.encode())


_T = TypeVar("_T")


class Pool:
    """One copy of each equal name, place and value among the summaries a run keeps.

    A project's summaries repeat themselves: thousands of classes have a ``q_proj``, built
    in float32 the same way, and methods returning the same facts. A summary is immutable,
    so equal parts can be one object; on transformers this is about a third of the store.
    """

    def __init__(self) -> None:
        self._seen: dict[Any, Any] = {}

    def summary(self, summary: ModuleSummary) -> ModuleSummary:
        """``summary`` made of the pool's objects (equal to it, digest included)."""
        one = self._one
        return ModuleSummary(
            module=one(summary.module),
            path=summary.path,
            functions=self._names(summary.functions, self._function),
            classes=self._names(summary.classes, self._class),
            constants=self._names(summary.constants, self._value),
            reexports={one(k): (one(m), n, one(a)) for k, (m, n, a) in summary.reexports.items()},
            names=self._strings(summary.names),
            public=None if summary.public is None else self._strings(summary.public),
            stars=one(tuple((one(m), n) for m, n in summary.stars)),
        )

    def _one(self, obj: _T) -> _T:
        found: _T = self._seen.setdefault(obj, obj)
        return found

    def _strings(self, names: tuple[str, ...]) -> tuple[str, ...]:
        return self._one(tuple(self._one(n) for n in names))

    def _names(self, items: dict[str, _T], part: Callable[[_T], _T]) -> dict[str, _T]:
        return {self._one(name): part(item) for name, item in items.items()}

    def _place(self, place: Place) -> Place:
        if place in self._seen:
            found: Place = self._seen[place]
            return found
        one = self._one
        return one(Place(one(place.path), place.line, place.column, one(place.text)))

    def _value(self, value: Value) -> Value:
        if value in self._seen:
            found: Value = self._seen[value]
            return found
        one = self._one
        items = value.items
        return one(
            Value(
                kind=one(value.kind),
                prec=one(value.prec),
                dtype=value.dtype and one(value.dtype),
                cause=value.cause and one(value.cause),
                origin=None if value.origin is None else self._place(value.origin),
                same_as=one(value.same_as),
                zero_dim=value.zero_dim,
                maybe=value.maybe,
                layer=value.layer and one(value.layer),
                items=None if items is None else one(tuple(self._value(i) for i in items)),
                number=value.number,
                mode=value.mode and one(value.mode),
            )
        )

    def _function(self, function: Function) -> Function:
        params, returns = self._strings(function.params), self._value(function.returns)
        one = self._one
        made = Function(
            params, returns, one(function.casts), one(function.fp16_unscale), function.halves
        )
        return one(made)

    def _class(self, cls: ClassSummary) -> ClassSummary:
        one = self._one
        default = cls.dtype_default
        return ClassSummary(
            bases=self._strings(cls.bases),
            is_module=cls.is_module,
            keep_fp32=cls.keep_fp32,
            keep_fp32_attrs=self._strings(cls.keep_fp32_attrs),
            submodules={one(k): one(v) for k, v in cls.submodules.items()},
            methods=self._names(cls.methods, self._function),
            attrs=self._names(cls.attrs, self._value),
            keep_patterns=self._strings(cls.keep_patterns),
            dtype_default=None
            if default is None
            else (default[0], self._place(default[1]), one(default[2]), one(default[3])),
            feeds_weights=cls.feeds_weights,
            casts_input=cls.casts_input,
            fed_inputs=one(cls.fed_inputs),
            adapter_casts=None if cls.adapter_casts is None else self._strings(cls.adapter_casts),
            kept_residual=cls.kept_residual,
            feeds=one(tuple((one(m), one(i), self._place(p)) for m, i, p in cls.feeds)),
            averages=cls.averages,
        )


@dataclass(frozen=True, slots=True)
class External:
    """A name a project file binds to something outside the project, found by following it
    there: ``torch.nn.BatchNorm2d`` for ``from .wrappers import BatchNorm2d`` when wrappers.py
    says ``BatchNorm2d = torch.nn.BatchNorm2d`` (or imports it). Made by lookups, not kept."""

    qualname: str


@dataclass(frozen=True, slots=True)
class Exports:
    """What ``from module import *`` binds: each name, with the library name it stands for
    when it leads out of the project (``torch`` for a module's own ``import torch``; None:
    defined in the project, looked up through the module). Made by lookups, not kept."""

    names: tuple[tuple[str, str | None], ...]


# What a file's walk asks of the project: the symbol ``dotted`` names when imported with
# ``level`` leading dots from that file (None outside the project or unknown).
ProjectLookup = Callable[
    [str, int], "Function | Value | ClassSummary | ModuleSummary | External | Exports | None"
]


def _plain(obj: object) -> Any:
    """Dataclasses to dicts, tuples to lists, dict keys sorted by ``json.dumps``."""
    kind = type(obj)
    if kind in _LEAVES:  # (most of a summary: asked first, by exact class)
        return obj
    names = _FIELD_NAMES.get(kind)
    if names is None and isinstance(obj, (Place, Value, Function, ClassSummary, ModuleSummary)):
        names = _FIELD_NAMES[kind] = tuple(f.name for f in fields(obj))
    if names is not None:
        return {name: _plain(getattr(obj, name)) for name in names}
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return [_plain(v) for v in obj]
    return obj


# The classes :func:`_plain` returns as they are, and the field names of each summary class.
_LEAVES = frozenset({str, int, float, bool, type(None)})
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _place(data: dict[str, Any] | None) -> Place | None:
    return None if data is None else Place(**data)


def _value(data: dict[str, Any]) -> Value:
    items = data.get("items")
    return Value(
        kind=data["kind"],
        prec=data["prec"],
        dtype=data["dtype"],
        cause=data["cause"],
        origin=_place(data["origin"]),
        same_as=tuple(data["same_as"]),
        zero_dim=data["zero_dim"],
        maybe=data["maybe"],
        layer=data["layer"],
        items=None if items is None else tuple(_value(i) for i in items),
        number=data.get("number"),
        mode=data.get("mode"),
    )


def _function(data: dict[str, Any]) -> Function:
    casts = tuple((int(m), int(d)) for m, d in data.get("casts", ()))
    unscale = tuple(int(i) for i in data.get("fp16_unscale", ()))
    halves = bool(data.get("halves", False))
    return Function(tuple(data["params"]), _value(data["returns"]), casts, unscale, halves)


def _class(data: dict[str, Any]) -> ClassSummary:
    return ClassSummary(
        bases=tuple(data["bases"]),
        is_module=data["is_module"],
        keep_fp32=data["keep_fp32"],
        keep_fp32_attrs=tuple(data["keep_fp32_attrs"]),
        submodules=dict(data["submodules"]),
        methods={k: _function(v) for k, v in data["methods"].items()},
        attrs={k: _value(v) for k, v in data["attrs"].items()},
        keep_patterns=tuple(data["keep_patterns"]),
        dtype_default=_default(data["dtype_default"]),
        feeds_weights=data["feeds_weights"],
        casts_input=bool(data.get("casts_input", False)),
        fed_inputs=tuple(int(i) for i in data["fed_inputs"]),
        adapter_casts=None if data["adapter_casts"] is None else tuple(data["adapter_casts"]),
        kept_residual=_kept_residual(data.get("kept_residual")),
        feeds=tuple(
            (str(m), tuple(int(i) for i in at), Place(**p)) for m, at, p in data.get("feeds", ())
        ),
        averages=str(data.get("averages", "")),
    )


def _kept_residual(data: list[Any] | None) -> tuple[str, str, tuple[Place, ...]] | None:
    if data is None:
        return None
    return str(data[0]), str(data[1]), tuple(Place(**p) for p in data[2])


def _default(data: list[Any] | None) -> tuple[int, Place, str, tuple[tuple[int, str], ...]] | None:
    if data is None:
        return None
    place = _place(data[1])
    guards = tuple((int(i), str(name)) for i, name in data[3])
    return None if place is None else (int(data[0]), place, str(data[2]), guards)


def _module(data: dict[str, Any]) -> ModuleSummary:
    return ModuleSummary(
        module=data["module"],
        path=data["path"],
        functions={k: _function(v) for k, v in data["functions"].items()},
        classes={k: _class(v) for k, v in data["classes"].items()},
        constants={k: _value(v) for k, v in data["constants"].items()},
        reexports={k: (v[0], int(v[1]), v[2]) for k, v in data["reexports"].items()},
        names=tuple(data["names"]),
        public=None if data["public"] is None else tuple(data["public"]),
        stars=tuple((m, int(n)) for m, n in data["stars"]),
    )
