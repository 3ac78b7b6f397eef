"""Dtype facts: what the engine knows about a value, and where that came from.

A fact is deliberately coarse. Rules ask one question of it -- "can these two
tensors meet with different dtypes when the model runs in half precision?" --
so the lattice only separates what matters for that: the model's own dtype,
a forced full-precision dtype, an explicit half dtype, integers and bools.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import libcst as cst

from mpcheck.project.summary import Place


class Kind(enum.Enum):
    TENSOR = "tensor"
    MODULE = "module"  # an nn.Module instance; ``prec`` is its parameters' dtype
    DTYPE = "dtype"  # a torch.dtype object; ``prec`` is the dtype it denotes
    SCALAR = "scalar"  # a Python number: never promotes a tensor
    SEQ = "seq"  # tuple/list of values
    OTHER = "other"  # anything else (shapes, devices, strings, unknown objects)
    # Training-loop objects (see mpcheck.engine.training); ``train`` holds what is known of them.
    SCALER = "scaler"  # a GradScaler
    OPTIMIZER = "optimizer"  # a torch.optim optimizer (or a look-alike)
    ACCELERATOR = "accelerator"  # an accelerate.Accelerator
    # Loaded data: a data loader's batch or a processor's ``return_tensors="pt"`` output.
    # Its items are tensors as loaded (knowledge.data_api says which are floats, ints or other).
    BATCH = "batch"


class Prec(enum.Enum):
    MODEL = "model"  # the model's compute dtype: half when the model runs in half
    FULL = "full"  # forced float32/float64, whatever the model runs in
    HALF = "half"  # explicitly float16 or bfloat16
    INT = "int"
    BOOL = "bool"
    UNKNOWN = "unknown"


class Cause(enum.Enum):
    """What produced a fact; rules use it to decide which of them owns a finding."""

    ACTIVATION = "activation"  # forward input, submodule output
    PARAMETER = "parameter"  # nn.Parameter / nn.Buffer of the model (weights, not activations)
    UPCAST = "upcast"  # .float(), .double(), .to(torch.float32), .type(torch.float32)
    FACTORY = "factory"  # torch.ones(...) & co. without dtype=: float32 by default
    INT_FLOAT = "int-float"  # an int64 tensor (arange) turned float32 by arithmetic
    CAST = "cast"  # .half(), .to(torch.float16), dtype=torch.bfloat16
    SAME_AS = "same-as"  # .to(x.dtype), .type_as(x), *_like(x), dtype=x.dtype
    AUTOCAST = "autocast"  # the output dtype of an op that autocast recast
    MODEL_CAST = "model-cast"  # model.half(), model.to(dtype), torch_dtype=
    LITERAL = "literal"
    DATA = "data"  # loaded by a data loader or a processor: float32 unless cast
    TABLE = "table"  # a scheduler's 1-D float32 table (``alphas_cumprod``, ``sigmas``)
    BUFFER = "buffer"  # a float32 non-persistent buffer, which ``from_pretrained`` leaves as is
    FROZEN = "frozen"  # DTYPE: fixed when a module was built (``self.dtype = dtype``), not cast
    # Half only by a library's contract that the project does not show holding: a pipeline's
    # model (``pipe.vae``) in an application that never loads it in half. A premise.
    CONTRACT = "contract"


# Causes of a float32 tensor that nobody asked for: the default dtype of a factory, of int
# arithmetic, of data as loaded, of a scheduler's tables, of a buffer the checkpoint does not
# hold. Rules treat them alike (MPC102 reports where they meet).
DEFAULT_FLOAT32 = frozenset({Cause.FACTORY, Cause.INT_FLOAT, Cause.DATA, Cause.TABLE, Cause.BUFFER})


class TrainInfo(Protocol):
    """Training-loop knowledge a fact carries (mpcheck.engine.training): joinable across paths."""

    def join(self, other: TrainInfo | None) -> TrainInfo | None: ...


@dataclass(frozen=True)
class Origin:
    """Where a fact was decided (the node, why, and a phrase saying so in messages)."""

    node: cst.CSTNode
    cause: Cause
    text: str  # human phrase, e.g. "upcast to float32 by `.float()`"
    # A cast to a dtype held in a variable (``model.to(weight_dtype)``): where that dtype
    # was decided (``weight_dtype = torch.float16``), so a finding can point there too.
    via: Origin | None = None
    # An input taken for a tensor without evidence that it is one (no annotation, never
    # indexed nor called a method on): it may be a Python number (mpcheck.engine.tensor_use).
    unproven: bool = False
    # Decided in another file of the project (a function's return, a class's default, a
    # module's constant): that place, which every finding about the fact names as a related
    # location. Kept by the origins worded from this one (``the output of ... (a KVCache
    # ...)``), so the place follows the words.
    place: Place | None = None


@dataclass(frozen=True)
class Fact:
    """What the walk knows about a value: its kind, precision and dtype, and their origin."""

    kind: Kind
    prec: Prec = Prec.UNKNOWN
    dtype: str | None = None  # "float32", "float16", "bfloat16", "int64", ... when known
    origin: Origin | None = None
    params: frozenset[int] = frozenset()  # function summaries: derived from these params
    zero_dim: bool = False
    items: tuple[Fact, ...] | None = None  # SEQ of known length
    elem: Fact | None = None  # SEQ element when the length is unknown; BATCH: its float items, cast
    layer: str | None = None  # MODULE: the torch.nn class name, when known
    container: bool = False  # MODULE: an nn.Sequential (ModuleList, ...); ``layer`` is its first
    # MODULE: an instance of a project class (``layer`` is its name): its parts may have their
    # own dtype (``Linear(base)`` of a half ``base``), it is no bare torch layer
    project: bool = False
    # MODULE: built from torch's or a library's class (``nn.Embedding(...)``): ``layer`` names
    # that class, whose forward runs, never a project class of the same name
    library: bool = False
    maybe: bool = False  # DTYPE/MODULE: holds on some paths only; TENSOR: origin on some
    value: float | None = None  # SCALAR: the number, when it is a literal
    # TENSOR: a forced float32 value that absorbed a model-dtype one (``mask`` + ``latents``):
    # ``node`` is where they met, ``cause``/``text`` describe the absorbed side.
    mixed: Origin | None = None
    train: TrainInfo | None = None  # training-loop objects and links (mpcheck.engine.training)
    # TENSOR: float32 from ``origin`` when the value was None, what was passed otherwise: the
    # default of an optional input (``if state is None: state = torch.zeros(...)``).
    defaulted: bool = False
    # TENSOR: on some path the code itself found this tensor's dtype different from the model
    # at this path (``elif latents.dtype != self.vae.dtype:`` without a cast on every path):
    # the model's path and where that was tested.
    apart: tuple[str, Origin] | None = None
    # TENSOR: an upper bound on |x| over its elements (mpcheck.engine.ranges), None when
    # nothing bounds it. Coarse on purpose: it only has to tell 1 and 255 from 65504.
    bound: float | None = None
    # TENSOR: every element is an integer (``arange`` of integers, then casts, shape ops and
    # integer arithmetic): distinct elements differ by at least 1, which ``bound`` alone does
    # not say (``linspace(0, 1, 4096)`` is bounded by 1 and 4096 positions apart by 1/4095).
    integral: bool = False
    # TENSOR: rows that are exactly 0 by construction may be in it (mpcheck.engine.zero_rows):
    # where they were made (zero padding, ``torch.zeros`` rows, a masked fill with 0). At a
    # function's input it names the parameter itself: what the caller hands decides.
    # MODULE: a layer that maps a zero row to a zero row (built without a bias): where.
    zeros: Origin | None = None

    # -- questions rules ask -------------------------------------------------
    @property
    def is_tensor(self) -> bool:
        return self.kind is Kind.TENSOR

    @property
    def floating(self) -> bool:
        return self.kind is Kind.TENSOR and self.prec in (Prec.MODEL, Prec.FULL, Prec.HALF)

    @property
    def default_float32(self) -> bool:
        """A dimensioned float32 tensor nobody asked for: a factory's, int math's, data's."""
        return (
            self.kind is Kind.TENSOR
            and self.prec is Prec.FULL
            and self.cause in DEFAULT_FLOAT32
            and not self.zero_dim
        )

    @property
    def float32_buffer(self) -> bool:
        """A float32 buffer that ``from_pretrained`` leaves as built (``Cause.BUFFER``), on
        every path or added on one (``if i == 0: h = h + self.pos_embed``): the branch decides
        whether it is added, not its dtype, so where it meets the activations it is float32."""
        return self.is_tensor and self.cause is Cause.BUFFER and not self.zero_dim

    @property
    def kept_float32(self) -> bool:
        """A parameter kept float32 apart from its model (``_keep_in_fp32_modules``, a peft
        adapter): a layer given it computes in float32, or refuses half input."""
        return self.prec is Prec.FULL and self.cause is Cause.MODEL_CAST and not self.zero_dim

    @property
    def default_float32_layer(self) -> bool:
        """MODULE: a torch layer built outside any model without ``dtype=`` (float32, the
        default) and never cast since: its weights refuse a half input. Not a container
        (``nn.Sequential(nn.Linear(..., dtype=torch.bfloat16))``) nor a project class
        (``Linear(base)`` wrapping a half layer): their parts have their own."""
        return (
            self.kind is Kind.MODULE
            and self.prec is Prec.FULL
            and self.cause is Cause.LITERAL
            and self.layer is not None
            and not self.container
            and not self.project
        )

    @property
    def autocast_half(self) -> bool:
        """TENSOR: computed in half precision by autocast (a matmul, linear or conv output)."""
        return self.kind is Kind.TENSOR and self.prec is Prec.HALF and self.cause is Cause.AUTOCAST

    @property
    def float32_under_autocast(self) -> bool:
        """TENSOR: float32 when autocast runs a float32 model, as mixed-precision training
        does: forced float32, or the model's dtype without autocast's say (its weights and
        buffers, embeddings and inputs, what is built like them)."""
        if self.kind is not Kind.TENSOR:
            return False
        return self.prec is Prec.FULL or (
            self.prec is Prec.MODEL and self.cause is not Cause.AUTOCAST
        )

    @property
    def zero_rows(self) -> Origin | None:
        """TENSOR: where the code made rows of it exactly 0 (not an input's own marker)."""
        zeros = self.zeros
        return zeros if zeros is not None and not isinstance(zeros.node, cst.Param) else None

    @property
    def from_input(self) -> bool:
        """The value a function was handed (its origin is the parameter)."""
        return self.origin is not None and isinstance(self.origin.node, cst.Param)

    def position_bound(self) -> float | None:
        """An integer position or timestep bounded by N (``arange(n)``, ``len(...)``, also
        once cast to a floating dtype): N."""
        if self.kind is Kind.TENSOR and (self.prec is Prec.INT or self.integral):
            return self.bound
        return None

    @property
    def cause(self) -> Cause | None:
        return self.origin.cause if self.origin else None

    def with_origin(self, node: cst.CSTNode, cause: Cause, text: str) -> Fact:
        return replace(self, origin=Origin(node, cause, text))


_T = TypeVar("_T")


def replace(obj: _T, /, **changes: Any) -> _T:
    """``dataclasses.replace``, at a third of its cost for a :class:`Fact`, which the walk
    copies with a change a quarter of a million times on a large project: a Fact holds its
    fields and nothing derived from them (no ``__post_init__``, no cached property), so its
    fields with ``changes`` over them are what its ``__init__`` would build."""
    if type(obj) is not Fact:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    if not _FACT_FIELDS.issuperset(changes):
        raise TypeError(f"Fact has no field {sorted(set(changes) - _FACT_FIELDS)}")
    new = object.__new__(Fact)
    held = new.__dict__  # (a frozen dataclass's fields live in its ``__dict__``)
    held.update(obj.__dict__)
    held.update(changes)
    return new  # type: ignore[return-value]


_FACT_FIELDS = frozenset(f.name for f in dataclasses.fields(Fact))


UNKNOWN = Fact(Kind.OTHER)
UNKNOWN_TENSOR = Fact(Kind.TENSOR)
SCALAR = Fact(Kind.SCALAR)

FULL_DTYPES = {"float32": "float32", "float": "float32", "float64": "float64", "double": "float64"}
HALF_DTYPES = {"float16": "float16", "half": "float16", "bfloat16": "bfloat16"}
INT_DTYPES = {
    "int64",
    "long",
    "int32",
    "int",
    "int16",
    "short",
    "int8",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
}


def carried(result: Fact, node: cst.CSTNode, cause: Cause = Cause.DATA) -> Fact:
    """Loaded data carried on by an op (``pixel_values.to(device)``, ``torch.stack(masks)``),
    or a float32 buffer read (``self.pos_embed``), is placed there: that is where a cast
    belongs, and the load (the ``register_buffer``) stays as ``via``."""
    origin = result.origin
    if not result.default_float32 or origin is None or origin.cause is not cause:
        return result
    if origin.node is node or result.mixed is not None:
        return result  # (once mixed into activations, MPC102 tells where that happened)
    first = origin.via or origin
    return replace(result, origin=Origin(node, cause, origin.text, first, place=origin.place))


def tensor_of_dtype(name: str, node: cst.CSTNode, cause: Cause, text: str) -> Fact:
    """A tensor fact for a concrete torch dtype attribute name (``float16``, ...)."""
    origin = Origin(node, cause, text)
    if name in FULL_DTYPES:
        return Fact(Kind.TENSOR, Prec.FULL, FULL_DTYPES[name], origin)
    if name in HALF_DTYPES:
        return Fact(Kind.TENSOR, Prec.HALF, HALF_DTYPES[name], origin)
    if name in INT_DTYPES:
        return Fact(Kind.TENSOR, Prec.INT, name, origin)
    if name == "bool":
        return Fact(Kind.TENSOR, Prec.BOOL, "bool", origin)
    return Fact(Kind.TENSOR, Prec.UNKNOWN, None, origin)


def dtype_object(name: str, node: cst.CSTNode) -> Fact:
    """The fact for the ``torch.<name>`` dtype object itself."""
    t = tensor_of_dtype(name, node, Cause.LITERAL, f"torch.{name}")
    return replace(t, kind=Kind.DTYPE)


_MODEL_CAUSES = (Cause.ACTIVATION, Cause.PARAMETER)


def as_tensor_of(dtype: Fact, node: cst.CSTNode, cause: Cause, text: str) -> Fact:
    """A tensor whose dtype is given by a dtype-valued fact (``dtype=x.dtype``)."""
    if dtype.kind is not Kind.DTYPE:
        return UNKNOWN_TENSOR
    if dtype.prec is Prec.MODEL or (dtype.prec is Prec.UNKNOWN and dtype.params):
        keep = dtype.origin if dtype.origin and dtype.origin.cause in _MODEL_CAUSES else None
        return Fact(Kind.TENSOR, dtype.prec, dtype.dtype, keep, dtype.params)
    if dtype.prec is Prec.HALF and dtype.maybe:
        # ``weight_dtype`` that is fp16 on some paths: a model-dtype value.
        return Fact(Kind.TENSOR, Prec.MODEL, None, Origin(node, Cause.CAST, text))
    return Fact(Kind.TENSOR, dtype.prec, dtype.dtype, Origin(node, cause, text), dtype.params)


_FLOAT_RANK = {Prec.FULL: 3, Prec.HALF: 2, Prec.MODEL: 1}
_LOWER_OR_UNKNOWN = frozenset({Prec.MODEL, Prec.HALF, Prec.UNKNOWN})


def promote(facts: Iterable[Fact], node: cst.CSTNode | None = None) -> Fact:
    """torch's type promotion over the operands of an elementwise op (see ``_promote``); a
    tensor found apart from a model stays apart through arithmetic that does not widen it."""
    operands = list(facts)
    result = _promote(operands, node)
    apart = next((f.apart for f in operands if f.kind is Kind.TENSOR and f.apart), None)
    if apart is not None and result.is_tensor and result.prec is not Prec.FULL:
        return replace(result, apart=apart)
    return result


def _promote(facts: Iterable[Fact], node: cst.CSTNode | None = None) -> Fact:
    """torch's type promotion over the operands of an elementwise op.

    Python scalars and 0-dim tensors do not promote a floating tensor; an
    integer tensor meeting a Python float becomes float32 (the default dtype).
    An unknown operand does not hide a known floating one: the known side
    decides, which keeps the model's dtype flowing through ``x * mask``.
    """
    tensors: list[Fact] = []
    float_scalar = False
    for f in facts:
        if f.kind is Kind.TENSOR:
            tensors.append(f)
        elif f.kind is Kind.SCALAR and (f.value is None or not float(f.value).is_integer()):
            float_scalar = float_scalar or f.value is not None
    if not tensors:
        return SCALAR
    sized = [f for f in tensors if not f.zero_dim] or tensors
    floats = [f for f in sized if f.prec in _FLOAT_RANK]
    if floats:
        best = max(floats, key=lambda f: _FLOAT_RANK[f.prec])
        if best.prec is Prec.FULL:
            wide = [f for f in floats if f.prec is Prec.FULL and f.dtype == "float64"]
            best = wide[0] if wide else best
        elif best.prec is Prec.HALF and best.cause is Cause.AUTOCAST:
            # Autocast made it half, so the model runs in float32: the model's own weights and
            # inputs promote the result back to the model's dtype (``h * self.scale``).
            model = [f for f in floats if f.prec is Prec.MODEL and f.cause is not Cause.AUTOCAST]
            best = model[0] if model else best
        params = frozenset().union(*(f.params for f in tensors))
        zero_dim = all(f.zero_dim for f in tensors)
        either = next((f for f in sized if float32_on_a_path(f)), None)
        if either is not None and best.prec is not Prec.FULL:
            # ``if upcast: q = q.float()`` then ``eye - q``: float32 on the upcast's path
            # (float32 meets the lower dtype), the lower dtype on the other: the join's fact
            return Fact(
                Kind.TENSOR,
                origin=either.origin,
                params=params,
                maybe=True,
                zero_dim=zero_dim,
                mixed=either.mixed,
            )
        mixed = best.mixed
        if best.prec is Prec.FULL and mixed is None and node is not None:
            low = next((f for f in floats if f.prec in (Prec.MODEL, Prec.HALF)), None)
            if low is not None:
                text = low.origin.text if low.origin else "a tensor in the model's dtype"
                mixed = Origin(node, low.cause or Cause.ACTIVATION, text)
        return replace(best, params=params, zero_dim=zero_dim, mixed=mixed)
    if any(f.prec is Prec.UNKNOWN for f in sized):
        params = frozenset().union(*(f.params for f in tensors))
        default = next((f for f in sized if one_path_factory(f)), None)
        if (
            default is not None
            and node is not None
            and not default.params  # (an argument's own default is not taken once it is passed)
            and default.mixed is None
            and any(f.params for f in sized if f is not default)
        ):
            # ``torch.cat((self.k, k))`` in a helper whose ``k`` its caller decides: float32
            # on the default's path once the caller passes activations (see ``substitute``)
            mixed = Origin(node, Cause.ACTIVATION, "the tensors it is passed")
            return replace(default, params=params, mixed=mixed)
        return Fact(Kind.TENSOR, Prec.UNKNOWN, params=params)
    ints = [f for f in sized if f.prec is Prec.INT]
    if ints and float_scalar and node is not None:
        src = ints[0]
        text = "an integer tensor turned float32 by arithmetic with a Python float"
        if src.origin is not None:
            text = f"{src.origin.text}, turned float32 by arithmetic with a Python float"
        origin = Origin(node, Cause.INT_FLOAT, text, place=placed(src))
        zero_dim = all(f.zero_dim for f in tensors)  # ``torch.full((), 64) ** 0.25`` stays 0-dim
        return Fact(Kind.TENSOR, Prec.FULL, "float32", origin, zero_dim=zero_dim)
    if ints:
        return ints[0]
    return sized[0]


def placed(fact: Fact) -> Place | None:
    """Where in another file ``fact``'s dtype was decided, for an origin worded from its own."""
    return fact.origin.place if fact.origin is not None else None


def int_to_float(src: Fact, node: cst.CSTNode, how: str) -> Fact:
    """An integer tensor turned float32 (the default dtype) by ``how`` (true division, exp).

    Only a tensor known to be integer (``torch.arange``, pixels a decoder gives as uint8) is:
    one guessed from its name (``t``, ``timesteps``) may well be float already, so the result
    is unknown.
    """
    decoded = src.cause is Cause.DATA and src.dtype == "uint8"  # (names only guess int64)
    if src.cause is not Cause.FACTORY and not decoded:
        return Fact(Kind.TENSOR, zero_dim=src.zero_dim)
    text = f"an integer tensor turned float32 by {how}"
    if src.origin is not None:
        text = f"{src.origin.text}, turned float32 by {how}"
    origin = Origin(node, Cause.INT_FLOAT, text, place=placed(src))
    return Fact(Kind.TENSOR, Prec.FULL, "float32", origin, zero_dim=src.zero_dim)


def join(a: Fact, b: Fact) -> Fact:
    """Merge the facts of two control-flow paths."""
    if a == b or a is b:
        return a
    joined = _join(a, b)
    bound = None if a.bound is None or b.bound is None else max(a.bound, b.bound)
    if joined.bound != bound and joined.kind is Kind.TENSOR:
        joined = replace(joined, bound=bound)
    integral = a.integral and b.integral
    if joined.integral != integral and joined.kind is Kind.TENSOR:
        joined = replace(joined, integral=integral)
    apart = a.apart or b.apart  # found apart from a model on one path: apart on some
    if apart is not None and joined.is_tensor and joined.apart is None:
        joined = replace(joined, apart=apart)
    # zero rows made on one path: on some (made ones outrank a parameter's own)
    made = [z for z in (a.zeros, b.zeros) if z is not None and not isinstance(z.node, cst.Param)]
    zeros = made[0] if made else a.zeros or b.zeros
    if joined.is_tensor and joined.zeros != zeros:
        joined = replace(joined, zeros=zeros)
    return joined


def none_literal(node: cst.CSTNode) -> Fact:
    """``None`` passed or returned: no dtype, no tensor (``.to(dtype=None)`` casts nothing)."""
    return Fact(Kind.OTHER, origin=Origin(node, Cause.LITERAL, "`None`"))


def is_none(fact: Fact) -> bool:
    """A fact :func:`none_literal` made."""
    origin = fact.origin
    return (
        fact.kind is Kind.OTHER
        and fact.train is None
        and origin is not None
        and origin.cause is Cause.LITERAL
        and origin.text == "`None`"
    )


def cast_to_working_dtype(fact: Fact) -> bool:
    """A model cast to a dtype the code does not spell (a working dtype, half on some runs):
    linked by ``params`` to the parameter that held it in a function's summary."""
    return (
        fact.kind is Kind.MODULE
        and fact.prec is Prec.HALF
        and fact.maybe
        and fact.cause is Cause.MODEL_CAST
    )


def casts_nothing_known(dtype: Fact) -> bool:
    """A dtype argument that is no evidence of a cast to half: ``None``, or a parameter's
    dtype a helper passes on some runs only (None on the others)."""
    return is_none(dtype) or (
        dtype.kind is Kind.DTYPE and dtype.maybe and dtype.prec is Prec.UNKNOWN
    )


def settled(returns: Fact | None) -> Fact:
    """What a walked function returns, as its callers take it: a function that only ever
    returns ``None`` returns nothing known."""
    return UNKNOWN if returns is None or is_none(returns) else returns


@dataclass(frozen=True)
class Trainable:
    """On a model's fact: the fact of its trainable parameters when they are not in the
    model's dtype (peft's float32 adapters on a half base), wherever the model goes."""

    params: Fact

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        return Trainable(join(self.params, other.params)) if isinstance(other, Trainable) else self


def trainable_params(module: Fact) -> Fact:
    """The fact of a model's trainable parameters: its own dtype, unless it says otherwise."""
    if isinstance(module.train, Trainable):
        return module.train.params
    return Fact(Kind.TENSOR, module.prec, module.dtype, module.origin, maybe=module.maybe)


def _join(a: Fact, b: Fact) -> Fact:
    if isinstance(a.train, Trainable) or isinstance(b.train, Trainable):
        # (a peft model on one path, a plain one on the other: each path's own parameters;
        # joined with anything but a model, the mark goes as the model does)
        base = join(replace(a, train=None), replace(b, train=None))
        if a.kind is not Kind.MODULE or b.kind is not Kind.MODULE or base.kind is not Kind.MODULE:
            return base
        # (joined as models join: half on one path stays half on some paths)
        params = join(*(replace(trainable_params(f), kind=Kind.MODULE) for f in (a, b)))
        return replace(base, train=Trainable(replace(params, kind=Kind.TENSOR)))
    if a.train is not None or b.train is not None:
        if a.kind is not b.kind:
            # ``scaler = GradScaler() if amp else None``: a training object on some paths.
            for side, other in ((a, b), (b, a)):
                if side.train is not None and (other == UNKNOWN or is_none(other)):
                    return replace(side, maybe=True)
            return UNKNOWN
        first, second = (a, b) if a.train is not None else (b, a)
        assert first.train is not None
        train = first.train.join(second.train)
        return replace(join(replace(a, train=None), replace(b, train=None)), train=train)
    if a.kind is not b.kind:
        # ``return weight_dtype if args.full_fp16 else None``: that dtype on some paths, no
        # dtype (nothing cast) on the others
        for side, other in ((a, b), (b, a)):
            if side.kind is Kind.DTYPE and is_none(other):
                return replace(side, maybe=True)
        return UNKNOWN
    if a.kind is Kind.SEQ:
        if a.items is not None and b.items is not None and len(a.items) == len(b.items):
            return replace(
                a, items=tuple(join(x, y) for x, y in zip(a.items, b.items, strict=False))
            )
        # A list grown on one path (``models = [unet]; if te: models.append(te)``): the
        # longer one, so what is done to "all of them" reaches every element it may hold.
        shorter, longer = (a, b) if len(a.items or ()) <= len(b.items or ()) else (b, a)
        if (
            shorter.items is not None
            and longer.items is not None
            and longer.items[: len(shorter.items)] == shorter.items
        ):
            return longer
        # Lists of different lengths (``params`` grown on one path): join their elements.
        elems = [element(s) for s in (a, b) if s.items != ()]
        elem = elems[0] if len(elems) == 1 else join(elems[0], elems[1]) if elems else UNKNOWN
        return Fact(Kind.SEQ, elem=None if elem == UNKNOWN else elem)
    if a.kind is Kind.TENSOR and a.prec is Prec.UNKNOWN and b.prec is Prec.UNKNOWN:
        # a helper returning its argument on one path and joined with a default on another:
        # the default's path is still there (``_promote`` made it, for ``substitute``)
        mixed = [f for f in (a, b) if joined_with_arguments(f)]
        if len(mixed) == 1:
            return replace(mixed[0], params=a.params | b.params)
    if a.prec is b.prec and a.dtype == b.dtype:
        return replace(a, maybe=a.maybe or b.maybe, params=a.params | b.params)
    if a.kind in (Kind.DTYPE, Kind.MODULE):
        if a.prec is Prec.HALF and b.prec is Prec.HALF:
            # float16 on one path, bfloat16 on another: half, dtype unknown; said from the
            # side that may be float16 (what a float16 hazard then names as its source)
            keep = b if a.dtype == "bfloat16" and b.dtype != "bfloat16" else a
            return replace(keep, dtype=None, maybe=a.maybe or b.maybe)
        # "weight_dtype is float16 on some paths": keep the half side, marked maybe.
        for side in (a, b):
            if side.prec is Prec.HALF:
                return replace(side, maybe=True)
        if a.prec is b.prec:
            return replace(a, dtype=None)
    if a.kind is Kind.TENSOR and a.prec is b.prec:
        return replace(a, dtype=None)
    full, other = (a, b) if a.prec is Prec.FULL else (b, a)
    if a.kind is Kind.TENSOR and full.prec is Prec.FULL and other.prec in _LOWER_OR_UNKNOWN:
        # ``if mask is not None: bias = bias + torch.where(mask, 0.0, -1e10)``: unknown
        # after the ``if``, but it still holds what the float32 path put in it
        return Fact(
            Kind.TENSOR,
            origin=full.origin,
            params=a.params | b.params,
            maybe=True,
            zero_dim=full.zero_dim,
            mixed=full.mixed,  # ``if eta > 0: prev = prev + noise``: mixed on that path
        )
    return Fact(a.kind, params=a.params | b.params)


def float32_on_a_path(fact: Fact) -> bool:
    """A dimensioned tensor float32 on some path and of a lower or unknown dtype on the
    others: what :func:`join` makes of them (``if upcast: q = q.float()``). It is no
    evidence of half: whatever it meets is "float32 or that" (torch promotes on each path)."""
    return (
        fact.kind is Kind.TENSOR
        and fact.prec is Prec.UNKNOWN
        and fact.maybe
        and fact.origin is not None
        and not fact.zero_dim
    )


def one_path_factory(fact: Fact) -> bool:
    """A tensor a factory made on one path only (an optional argument's default, a branch):
    unknown after the join, but it still holds the factory's float32 on that path."""
    return (
        fact.kind is Kind.TENSOR
        and fact.maybe
        and fact.prec is Prec.UNKNOWN
        and fact.cause in (Cause.FACTORY, Cause.INT_FLOAT)
        and not fact.zero_dim
    )


def joined_with_arguments(fact: Fact) -> bool:
    """A one-path factory that a helper joined with its arguments (``_promote``): float32 on
    that path once the caller passes activations for them."""
    return one_path_factory(fact) and bool(fact.params) and fact.mixed is not None


def tensor_or_none(tested: Fact, default: Fact, *, state: bool = False) -> Fact:
    """``tested`` in ``torch.zeros(...) if k is None else k``: a tensor of unknown dtype when
    its default is one (an ``__init__`` argument is no tensor by itself), so the join keeps
    the default's path. Kept as an object's ``state`` (in ``__init__``) it is no input of
    the methods that read it, so it loses its parameter mark."""
    if default.kind is Kind.TENSOR and tested.kind is Kind.OTHER and tested.train is None:
        return Fact(Kind.TENSOR, params=frozenset() if state else tested.params)
    return tested


def or_value(left: Fact, right: Fact) -> Fact:
    """``left or right``: ``right`` wherever ``left`` is falsy. ``None`` always is, so the
    value is ``right``; when ``right`` is a dtype, an object of unknown value (a
    constructor's ``torch_dtype=None`` argument, ``args.dtype``) is None on some paths, so
    the value is ``right`` on those (``maybe``); otherwise the two paths join."""
    if is_none(left):
        return right
    if right.kind is Kind.DTYPE and left.kind is Kind.OTHER and left.train is None:
        return replace(right, maybe=True)
    return join(left, right)


def defaulted(fact: Fact) -> Fact:
    """``fact`` as the value of ``x`` after ``if x is None: x = <factory>`` (or ``x or ...``)."""
    if fact.kind is Kind.TENSOR and fact.maybe and fact.origin is not None:
        return replace(fact, defaulted=True)
    return fact


def none_tested(test: cst.BaseExpression, negated: bool | None = None) -> str | None:
    """The name ``test`` compares with None: ``x is None`` (``negated=False``), ``x is not
    None`` (``negated=True``), either (``None``)."""
    operators: tuple[type[cst.BaseCompOp], ...] = (
        (cst.Is, cst.IsNot) if negated is None else (cst.IsNot,) if negated else (cst.Is,)
    )
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        is_none = isinstance(target.comparator, cst.Name) and target.comparator.value == "None"
        if is_none and isinstance(target.operator, operators):
            left = test.left
            if isinstance(left, cst.Name):
                return left.value
            if isinstance(left, cst.Attribute) and isinstance(left.value, cst.Name):
                return f"{left.value.value}.{left.attr.value}"
    return None


def seq_of(items: Iterable[Fact]) -> Fact:
    return Fact(Kind.SEQ, items=tuple(items))


def element(seq: Fact, index: int | None = None) -> Fact:
    """One element of a sequence fact; joins the items when the index is unknown."""
    if seq.kind is not Kind.SEQ:
        return seq if seq.kind is Kind.TENSOR else UNKNOWN
    if seq.items is not None:
        if index is not None and -len(seq.items) <= index < len(seq.items):
            return seq.items[index]
        if not seq.items:
            return UNKNOWN
        out = seq.items[0]
        for item in seq.items[1:]:
            out = join(out, item)
        return out
    return seq.elem or UNKNOWN
