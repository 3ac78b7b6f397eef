"""The training-loop model: which scaler scaled which loss, which optimizer holds what.

The dtype pass (:mod:`mpcheck.analysis`) calls into this module when it meets a
``GradScaler``, an optimizer, an ``accelerate.Accelerator`` or one of their methods.
What it learns lives in facts, so it flows through assignments, branches, helper
functions and ``accelerator.prepare(...)`` tuples like any other value:

- a ``Kind.SCALER`` fact carries a :class:`Scaler` (device, enabled state);
- a ``Kind.ACCELERATOR`` fact carries an :class:`Accelerator` (its mixed precision);
- a ``Kind.OPTIMIZER`` fact carries an :class:`Optimizer`: the facts of the parameters
  it was given (each linked to the module it came from), its ``eps`` and who prepared it;
- ``model.parameters()`` yields tensor facts linked to ``model`` (:class:`Params`), so
  an optimizer built from them sees later in-place casts of the model;
- the per-path loop state (:class:`State`: what each scaler did since its last step,
  which modules had their trainable parameters cast in place, which autocast regions
  ran) is a fact bound under :data:`STATE` in the environment, copied at branches and
  joined after them.

Rules see the loop through :class:`TrainingSite`: one per backward, unscale, clip and
step, in statement order, with the facts as they hold at that point.
"""

from __future__ import annotations

import enum
import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import libcst as cst

from mpcheck.facts import (
    UNKNOWN,
    Cause,
    Fact,
    Kind,
    Prec,
    TrainInfo,
    element,
    join,
    seq_of,
    tensor_of_dtype,
)
from mpcheck.names import dotted
from mpcheck.sites import Autocast, Operand, Scope

if TYPE_CHECKING:
    from mpcheck.analysis import FileAnalysis, Frame

STATE = "<training>"  # environment key of the loop state; not a Python name
TRAINING_KINDS = (Kind.SCALER, Kind.OPTIMIZER, Kind.ACCELERATOR)
FP16_TINY = 2.0**-24  # smallest float16 subnormal (5.96e-8): a smaller eps rounds to 0 or to it
FP16_MIN_NORMAL = 2.0**-14  # smallest normal float16 (6.1e-5); below it only subnormals

# --- what torch & co. offer ------------------------------------------------------------

# GradScaler classes: (device when not given, index of a positional ``enabled``, device arg?)
SCALER_CLASSES: dict[str, tuple[str, int, bool]] = {
    "torch.amp.GradScaler": ("cuda", 5, True),
    "torch.GradScaler": ("cuda", 5, True),
    "torch.cuda.amp.GradScaler": ("cuda", 4, False),
    "torch.cuda.amp.grad_scaler.GradScaler": ("cuda", 4, False),
    "torch.cpu.amp.GradScaler": ("cpu", 4, False),
    "torch.cpu.amp.grad_scaler.GradScaler": ("cpu", 4, False),
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler": ("cuda", 5, True),
    "torch.distributed.fsdp.ShardedGradScaler": ("cuda", 5, True),
}
# ShardedGradScaler unscales float16 gradients (FSDP may train in fp16): no raise.
FP16_TOLERANT_SCALERS = frozenset(
    {
        "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
        "torch.distributed.fsdp.ShardedGradScaler",
    }
)
ACCELERATORS = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})
OPTIMIZER_PACKAGES = (
    "torch.optim.",
    "bitsandbytes.optim.",
    "transformers.optimization.",
    "timm.optim.",
    "apex.optimizers.",
    "torchao.optim.",
)
NOT_OPTIMIZERS = ("lr_scheduler", "swa_utils", "Schedule", "Lookahead")
OPTIMIZER_FACTORIES = frozenset(
    {
        "timm.optim.create_optimizer_v2",
        "timm.optim.create_optimizer",
        "timm.optim.optim_factory.create_optimizer_v2",
        "timm.optim.optim_factory.create_optimizer",
        "timm.optim._optim_factory.create_optimizer_v2",
    }
)
# torch.optim optimizers whose for-loop/foreach update adds ``eps`` in the parameters'
# dtype: default eps and the positional index of ``eps``. (``fused=True`` computes in
# float32; bitsandbytes' 8-bit optimizers do too, in their kernels.)
EPS_OPTIMIZERS: dict[str, tuple[float, int]] = {
    "Adam": (1e-8, 3),
    "AdamW": (1e-8, 3),
    "Adamax": (1e-8, 3),
    "NAdam": (1e-8, 3),
    "RAdam": (1e-8, 3),
    "SparseAdam": (1e-8, 3),
    "RMSprop": (1e-8, 3),
    "Adagrad": (1e-10, 5),
}
CLIP_FUNCTIONS = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad_norm",
        "torch.nn.utils.clip_grad_value_",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
        "torch.nn.utils.clip_grad.clip_grad_norm",
        "torch.nn.utils.clip_grad.clip_grad_value_",
        "torch.nn.utils.clip_grads_with_norm_",  # scales by max_norm / a norm computed apart
        "torch.nn.utils.clip_grad.clip_grads_with_norm_",
        "timm.utils.dispatch_clip_grad",
        "timm.utils.clip_grad.dispatch_clip_grad",
    }
)
# Clip helpers known by their name where the import table cannot resolve them: inside
# their own package (timm's ``from .clip_grad import dispatch_clip_grad``).
CLIP_NAMES = frozenset({"dispatch_clip_grad"})
# Helpers that cast the trainable (``requires_grad``) parameters of models in place.
TRAINABLE_CASTS = frozenset({"diffusers.training_utils.cast_training_params"})
# ... also by name: training scripts copy diffusers' helper into their own utilities (its
# ``if not isinstance(model, list): model = [model]`` defeats following its body).
TRAINABLE_CAST_NAMES = frozenset({"cast_training_params"})
PEFT_WRAPPERS = frozenset(
    {"peft.get_peft_model", "peft.mapping.get_peft_model", "peft.mapping_func.get_peft_model"}
)
SCALER_PARAM_NAMES = frozenset({"scaler", "grad_scaler", "amp_scaler", "gradient_scaler"})
SEQ_BUILTINS = frozenset({"list", "tuple", "sorted", "reversed", "iter", "set", "frozenset"})


def tri(a: bool | None, b: bool | None) -> bool | None:
    """Join two paths' answers: equal ones stay, different ones become None ("on some paths")."""
    return a if a == b else None


# --- the objects ------------------------------------------------------------------------


@dataclass(frozen=True)
class Scaler:
    """A GradScaler, or the one an ``Accelerator(mixed_precision="fp16")`` runs."""

    node: cst.CSTNode  # where it was made (or the parameter it arrived through)
    text: str  # "`torch.amp.GradScaler('cpu')`"
    via: str = "torch"  # "torch" | "accelerate"
    device: str | None = None
    enabled: bool | None = True  # None: decided at run time (``enabled=args.amp``)
    allow_fp16: bool = False  # ShardedGradScaler: float16 gradients are fine

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        if not isinstance(other, Scaler) or other == self:
            return self
        return replace(
            self,
            device=self.device if self.device == other.device else None,
            enabled=tri(self.enabled, other.enabled),
            allow_fp16=self.allow_fp16 and other.allow_fp16,
        )

    @property
    def may_scale(self) -> bool:
        return self.enabled is not False

    @property
    def raises_on_fp16(self) -> bool:
        """Whether its ``unscale_``/``step`` can raise "Attempting to unscale FP16 gradients."."""
        return self.enabled is not False and not self.allow_fp16


@dataclass(frozen=True)
class Accelerator:
    """An ``accelerate.Accelerator``; with fp16 mixed precision it owns a GradScaler."""

    node: cst.CSTNode
    text: str
    mixed_precision: str | None  # "fp16" | "bf16" | "no" | ...; None: set at launch time
    own_scaler: bool = True  # False under DeepSpeed, which scales on its own

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        if not isinstance(other, Accelerator) or other == self:
            return self
        mp = self.mixed_precision if self.mixed_precision == other.mixed_precision else None
        return replace(self, mixed_precision=mp, own_scaler=self.own_scaler or other.own_scaler)

    @property
    def scaler(self) -> Scaler:
        enabled = None if self.mixed_precision is None else self.mixed_precision == "fp16"
        if not self.own_scaler:
            enabled = False
        return Scaler(self.node, self.text, "accelerate", None, enabled)


@dataclass(frozen=True)
class OptimizerClass:
    """An optimizer class used as a value: ``optimizer_cls = torch.optim.AdamW``."""

    names: tuple[str, ...]

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        if not isinstance(other, OptimizerClass):
            return self
        return OptimizerClass(tuple(dict.fromkeys(self.names + other.names)))


@dataclass(frozen=True)
class Optimizer:
    """An optimizer and what it was given."""

    node: cst.CSTNode  # the constructor call
    text: str  # "`torch.optim.AdamW(...)`"
    names: tuple[str, ...]  # the classes it can be ("torch.optim.AdamW"); () when unknown
    params: tuple[Fact, ...]  # the tensors handed to it, param groups flattened
    eps: float | None = None  # the eps it adds; None when not a literal
    eps_node: cst.CSTNode | None = None  # the ``eps=`` argument, when given
    fused: bool | None = False
    accelerator: Accelerator | None = None  # prepared by ``accelerator.prepare``

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        if not isinstance(other, Optimizer) or other == self or other.node is not self.node:
            return self  # another optimizer on another path: keep the first
        acc = self.accelerator or other.accelerator
        if self.accelerator is not None and other.accelerator is not None:
            acc = self.accelerator.join(other.accelerator)  # type: ignore[assignment]
        params = tuple(dict.fromkeys(self.params + other.params))
        return replace(self, params=params, accelerator=acc)


@dataclass(frozen=True)
class Params:
    """On a parameter's fact: the modules it belongs to, as ``(env path, module fact)``."""

    sources: tuple[tuple[str | None, Fact], ...]

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        if not isinstance(other, Params):
            return self
        return Params(tuple(dict.fromkeys(self.sources + other.sources)))


@dataclass(frozen=True)
class ParamGroup:
    """``{"params": ..., "lr": ...}``: one parameter group of an optimizer."""

    params: Fact

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        if not isinstance(other, ParamGroup):
            return self
        return ParamGroup(join(self.params, other.params))


@dataclass(frozen=True)
class Scaled:
    """On a loss's fact: it was multiplied by ``scaler`` (``scaler.scale(loss)``)."""

    scaler: Scaler

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        return self


# --- the loop state -----------------------------------------------------------------------


@dataclass(frozen=True)
class ScalerState:
    """What one scaler did since its last step."""

    scaler: Scaler
    scaled: bool | None = False  # gradients went backward through it (None: on some paths)
    unscaled: tuple[tuple[cst.CSTNode, bool | None], ...] = ()  # optimizer node -> unscaled
    backward: cst.CSTNode | None = None  # the last backward through it
    # The scaler is None on this path (``else`` of ``if scaler is not None:``): it did
    # nothing here, and a join keeps the other path's state, where it exists.
    absent: bool = False

    def unscaled_of(self, optimizer: cst.CSTNode) -> bool:
        return any(node is optimizer and done is True for node, done in self.unscaled)

    def maybe_unscaled_of(self, optimizer: cst.CSTNode) -> bool | None:
        for node, done in self.unscaled:
            if node is optimizer:
                return done
        return False

    @property
    def any_unscaled(self) -> bool | None:
        flags = [done for _, done in self.unscaled]
        if True in flags:
            return True
        return None if None in flags else False

    def join(self, other: ScalerState | None) -> ScalerState:
        if other is None:
            other = ScalerState(self.scaler)
        if other == self or other.absent:
            return self
        if self.absent:
            return other
        scaler = self.scaler.join(other.scaler)
        assert isinstance(scaler, Scaler)
        mine = {id(n): (n, d) for n, d in self.unscaled}
        theirs = {id(n): (n, d) for n, d in other.unscaled}
        unscaled = []
        for key in dict.fromkeys([*mine, *theirs]):
            node = (mine.get(key) or theirs[key])[0]
            a = mine[key][1] if key in mine else False
            b = theirs[key][1] if key in theirs else False
            unscaled.append((node, tri(a, b)))
        backward = self.backward or other.backward
        return ScalerState(scaler, tri(self.scaled, other.scaled), tuple(unscaled), backward)


@dataclass(frozen=True)
class State:
    """The training loop as it stands on one path through a function."""

    scalers: tuple[ScalerState, ...] = ()
    prepared: tuple[tuple[cst.CSTNode, Optimizer], ...] = ()  # accelerator node, optimizer
    trainable: tuple[tuple[Fact, Fact], ...] = ()  # module -> its trainable params, cast in place
    regions: tuple[Autocast, ...] = ()  # the active autocast regions entered so far

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        if not isinstance(other, State) or other == self:
            return self
        mine = {id(s.scaler.node): s for s in self.scalers}
        theirs = {id(s.scaler.node): s for s in other.scalers}
        scalers = []
        for key in dict.fromkeys([*mine, *theirs]):
            a, b = mine.get(key), theirs.get(key)
            scalers.append(a.join(b) if a is not None else b.join(a) if b is not None else None)
        trainable: dict[Fact, Fact] = dict(self.trainable)
        for module, params in other.trainable:
            trainable[module] = join(trainable[module], params) if module in trainable else params
        return State(
            tuple(s for s in scalers if s is not None),
            _unique(self.prepared + other.prepared),
            tuple(trainable.items()),
            _unique(self.regions + other.regions),
        )

    def scaler_state(self, scaler: Scaler) -> ScalerState:
        """What ``scaler`` did on this path; a scaler used here exists here (not absent)."""
        for s in self.scalers:
            if s.scaler.node is scaler.node:
                return ScalerState(s.scaler) if s.absent else s
        return ScalerState(scaler)

    def with_scaler(self, state: ScalerState) -> State:
        rest = tuple(s for s in self.scalers if s.scaler.node is not state.scaler.node)
        return replace(self, scalers=rest + (state,))

    def trainable_of(self, module: Fact) -> Fact:
        """The fact of ``module``'s trainable parameters (whose gradients a scaler sees)."""
        for key, params in self.trainable:
            if key == module:
                return params
        return Fact(Kind.TENSOR, module.prec, module.dtype, module.origin, maybe=module.maybe)


def _unique(items: Iterable[object]) -> tuple:  # type: ignore[type-arg]
    out: list[object] = []
    for item in items:
        if not any(item is seen or item == seen for seen in out):
            out.append(item)
    return tuple(out)


# --- what rules see -------------------------------------------------------------------------


class Action(enum.Enum):
    BACKWARD = "backward"  # ``scaler.scale(loss).backward()``, ``accelerator.backward(loss)``
    UNSCALE = "unscale"  # ``scaler.unscale_(opt)``, ``accelerator.unscale_gradients()``
    CLIP = "clip"  # ``clip_grad_norm_``/``clip_grad_value_`` (torch, timm or accelerate)
    STEP = "step"  # ``scaler.step(opt)``, ``opt.step()``


@dataclass(frozen=True)
class OptimizerUse:
    """An optimizer a call acts on, with its parameters as they hold at that point."""

    optimizer: Optimizer
    params: tuple[Fact, ...]  # its trainable parameters' facts, after in-place casts
    unscaled: bool | None  # the scaler already unscaled its gradients (None: on some paths)


@dataclass(frozen=True)
class TrainingSite:
    """A step of the training loop, reached in statement order."""

    node: cst.Call
    action: Action
    scope: Scope
    # BACKWARD/UNSCALE/STEP: the scaler doing it (None for a plain ``optimizer.step()``);
    # CLIP: the scaler whose scaled gradients are pending, if any.
    scaler: Scaler | None
    optimizers: tuple[OptimizerUse, ...] = ()
    scaled: bool | None = False  # CLIP: the gradients are multiplied by ``scaler``'s scale
    unscaled: bool | None = False  # CLIP: ``scaler`` unscaled some optimizer since then
    via: str = "torch"  # "torch" | "accelerate": whose API the call is
    loss: Fact | None = None  # BACKWARD: the loss
    regions: tuple[Autocast, ...] = ()  # active autocast regions entered so far, this one too
    backward: cst.CSTNode | None = None  # CLIP/UNSCALE/STEP: the backward that scaled the grads

    @property
    def unscales(self) -> bool:
        """This call runs ``GradScaler.unscale_`` on the optimizers' gradients."""
        if self.action is Action.UNSCALE:
            return True
        if self.action is Action.STEP:
            return self.scaler is not None
        return self.action is Action.CLIP and self.via == "accelerate"


def can_be_fp16(fact: Fact) -> bool:
    """float16 on at least one path (``weight_dtype`` is fp16 under ``--mixed_precision fp16``)."""
    return fact.prec is Prec.HALF and fact.dtype in ("float16", None)


def to_fp16(value: float) -> float:
    """``value`` rounded to float16 (round half to even, as torch does); inf past 65504."""
    try:
        return float(struct.unpack("<e", struct.pack("<e", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def never_fp16(fact: Fact) -> bool:
    """Half only as bfloat16: bfloat16 on every path, or float32 on the others (``maybe``).

    ``weight_dtype = torch.bfloat16 if bf16 else torch.float32`` is; a dtype that is
    float16 on some path (joined to dtype None) is not.
    """
    return fact.prec is Prec.HALF and fact.dtype == "bfloat16"


# --- the engine side -------------------------------------------------------------------------


@dataclass
class Tracker:
    """Follows the training loop for one :class:`~mpcheck.analysis.FileAnalysis`."""

    analysis: FileAnalysis
    depth: int = 0  # nesting of helper walks (see :meth:`after_call`)
    budget: int = 200  # helper walks left for this file
    active: set[cst.FunctionDef] = field(default_factory=set)
    top_level: frozenset[cst.FunctionDef] | None = None

    # -- state ---------------------------------------------------------------------------
    @staticmethod
    def state(frame: Frame) -> State:
        fact = frame.env.get(STATE)
        return fact.train if fact is not None and isinstance(fact.train, State) else State()

    @staticmethod
    def set_state(frame: Frame, state: State) -> None:
        frame.env[STATE] = Fact(Kind.OTHER, train=state)

    def emit(self, site: TrainingSite) -> None:
        listener = self.analysis.listener
        if self.analysis.muted or not getattr(listener, "wants_training", False):
            return
        listener.on_training(site)

    def code(self, node: cst.CSTNode, limit: int = 60) -> str:
        text = " ".join(self.analysis.module.code_for_node(node).split())
        return text if len(text) <= limit else text[: limit - 3] + "..."

    # -- branches --------------------------------------------------------------------------
    def assume(self, test: cst.BaseExpression, truth: bool, frame: Frame) -> Frame:
        """The branch of an ``if`` where ``test`` is ``truth``: a scaler known None there.

        ``if scaler is not None: scaler.scale(loss).backward() else: loss.backward()``
        leaves the scaler's gradients scaled on some paths only; in the ``else`` of a later
        ``if scaler is not None:`` none of those paths is possible, so that branch holds no
        scaled backward (and can take no scaler step). Returns ``frame`` itself when the
        test says nothing about a scaler, else a copy where the scaler's name is bound to
        ``None``'s fact and its loop state is marked absent.
        """
        known = [
            (name, fact.train)
            for name in none_when(test, truth)
            if (fact := frame.env.get(name)) is not None and isinstance(fact.train, Scaler)
        ]
        if not known:
            return frame
        sub = replace(frame, env=dict(frame.env))
        for name, scaler in known:
            sub.env[name] = UNKNOWN  # what ``None`` evaluates to
            state = self.state(sub)
            self.set_state(sub, state.with_scaler(ScalerState(scaler, absent=True)))
        return sub

    # -- values ----------------------------------------------------------------------------
    @staticmethod
    def param_fact(param: cst.Param, name: str, annotation: str) -> Fact | None:
        """A function parameter that is a training object by its annotation or name."""
        if "GradScaler" in annotation or (name in SCALER_PARAM_NAMES and not annotation):
            text = f"`{name}`, an argument of the function"
            return Fact(Kind.SCALER, train=Scaler(param, text, enabled=None))
        if name == "accelerator" and (not annotation or "Accelerator" in annotation):
            text = f"`{name}`, an argument of the function"
            return Fact(Kind.ACCELERATOR, train=Accelerator(param, text, None))
        return None

    @staticmethod
    def global_value(qual: str) -> Fact | None:
        """``torch.optim.AdamW`` used as a value (to be called later)."""
        if _is_optimizer_class(qual):
            return Fact(Kind.OTHER, train=OptimizerClass((qual,)))
        return None

    def torch_call(
        self,
        node: cst.Call,
        qual: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact | None:
        """A call resolved through the imports; None when it is not a training call."""
        if qual in SCALER_CLASSES:
            return self.make_scaler(node, qual, args, kwargs)
        if qual in ACCELERATORS:
            return self.make_accelerator(node, kwargs)
        if _is_optimizer_class(qual):
            return self.make_optimizer(node, (qual,), args, kwargs)
        if qual in OPTIMIZER_FACTORIES:
            return self.make_optimizer(node, (), args, kwargs)
        if qual in CLIP_FUNCTIONS:
            self.clip(node, frame, via="torch")
            return None
        if qual in TRAINABLE_CASTS or qual.rsplit(".", 1)[-1] in TRAINABLE_CAST_NAMES:
            self.cast_trainable(node, args, kwargs, frame)
            return UNKNOWN
        if qual in PEFT_WRAPPERS and args:
            return self.peft_model(node, args[0], kwargs, frame)
        if qual == "itertools.chain":
            return _chain(args)
        return None

    def call_value(
        self,
        node: cst.Call,
        callee: Fact,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
    ) -> Fact | None:
        """Calling a value: ``optimizer_cls(params, lr=...)``."""
        if isinstance(callee.train, OptimizerClass):
            return self.make_optimizer(node, callee.train.names, args, kwargs)
        return None

    def named_call(self, node: cst.Call, name: str, frame: Frame) -> bool:
        """A call of a name neither defined nor resolved here: a clip helper by its name?"""
        if name in CLIP_NAMES:
            self.clip(node, frame, via="torch")
            return True
        return False

    @staticmethod
    def builtin(name: str, args: tuple[Operand, ...]) -> Fact | None:
        """``list(...)``, ``filter(f, ...)``, ``next(iter(...))``: keep the elements' facts."""
        if name in SEQ_BUILTINS and len(args) == 1 and args[0].fact.kind is Kind.SEQ:
            return Fact(Kind.SEQ, elem=element(args[0].fact))
        if name == "filter" and len(args) == 2 and args[1].fact.kind is Kind.SEQ:
            return Fact(Kind.SEQ, elem=element(args[1].fact))
        if name == "next" and args and args[0].fact.kind is Kind.SEQ:
            return element(args[0].fact)
        return None

    def make_scaler(
        self, node: cst.Call, qual: str, args: tuple[Operand, ...], kwargs: dict[str, Operand]
    ) -> Fact:
        default_device, enabled_at, takes_device = SCALER_CLASSES[qual]
        device: str | None = default_device
        dev = kwargs.get("device") or (args[0] if takes_device and args else None)
        if dev is not None:
            device = _string(dev.node)
            device = device.split(":")[0] if device else None
        flag = kwargs.get("enabled") or (args[enabled_at] if len(args) > enabled_at else None)
        enabled = True if flag is None else _bool(flag.node)
        scaler = Scaler(
            node, f"`{self.code(node)}`", "torch", device, enabled, qual in FP16_TOLERANT_SCALERS
        )
        return Fact(Kind.SCALER, train=scaler)

    def make_accelerator(self, node: cst.Call, kwargs: dict[str, Operand]) -> Fact:
        mp: str | None = None
        if "mixed_precision" in kwargs:
            mp = _string(kwargs["mixed_precision"].node)
        elif "fp16" in kwargs:
            flag = _bool(kwargs["fp16"].node)
            mp = None if flag is None else "fp16" if flag else "no"
        own = "deepspeed_plugin" not in kwargs
        accelerator = Accelerator(node, f"`{self.code(node)}`", mp, own)
        return Fact(Kind.ACCELERATOR, train=accelerator)

    def make_optimizer(
        self,
        node: cst.Call,
        names: tuple[str, ...],
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
    ) -> Fact:
        source = (
            kwargs.get("params") or kwargs.get("model_or_params") or (args[0] if args else None)
        )
        params = tuple(dict.fromkeys(_flatten(source.fact))) if source is not None else ()
        eps: float | None = None
        eps_node: cst.CSTNode | None = None
        leaves = {n.rsplit(".", 1)[-1] for n in names}
        if names and all(n.startswith("torch.optim.") for n in names) and len(leaves) == 1:
            default, index = EPS_OPTIMIZERS.get(next(iter(leaves)), (None, 0))
            given = kwargs.get("eps") or (args[index] if index and len(args) > index else None)
            if given is not None:
                eps_node = given.node
                eps = given.fact.value if given.fact.kind is Kind.SCALAR else None
            else:
                eps = default
        fused_arg = kwargs.get("fused")
        fused = False if fused_arg is None else _bool(fused_arg.node)
        text = f"`{self.code(node)}`"
        optimizer = Optimizer(node, text, names, params, eps, eps_node, fused)
        return Fact(Kind.OPTIMIZER, train=optimizer)

    def parameters(self, method: str, module: Fact, path: str | None) -> Fact | None:
        """``model.parameters()``: tensors in the model's dtype, linked back to ``model``."""
        if method not in ("parameters", "named_parameters"):
            return None
        link = Params(((path, module),))
        param = Fact(Kind.TENSOR, module.prec, module.dtype, module.origin, train=link)
        if method == "named_parameters":
            return Fact(Kind.SEQ, elem=seq_of([UNKNOWN, param]))
        return Fact(Kind.SEQ, elem=param)

    def dict_display(self, node: cst.Dict, frame: Frame) -> Fact:
        """A dict literal; ``{"params": ..., "lr": ...}`` is an optimizer's parameter group."""
        group: Fact | None = None
        for el in node.elements:
            if isinstance(el, cst.DictElement):
                self.analysis.expr(el.key, frame)
                value = self.analysis.expr(el.value, frame)
                if _string(el.key) == "params":
                    group = value
            else:
                self.analysis.expr(el.value, frame)
        if group is None:
            return UNKNOWN
        return Fact(Kind.OTHER, train=ParamGroup(group))

    # -- in-place casts of trainable parameters ------------------------------------------
    def store_data(self, target: cst.Attribute, value: Fact, frame: Frame) -> None:
        """``p.data = p.data.float()`` on a model's parameter: its trainable params change."""
        if value.kind is not Kind.TENSOR or value.prec not in (Prec.FULL, Prec.HALF):
            return
        base = frame.env.get(dotted(target.value) or "")
        if base is None or not isinstance(base.train, Params):
            return
        state = self.state(frame)
        for path, module in base.train.sources:
            now = frame.env.get(path) if path else None
            module = now if now is not None and now.kind is Kind.MODULE else module
            state = _with_trainable(state, module, value)
        self.set_state(frame, state)

    def cast_trainable(
        self,
        node: cst.Call,
        args: tuple[Operand, ...],
        kwargs: Mapping[str, Operand],
        frame: Frame,
    ) -> None:
        """``cast_training_params(models, dtype=torch.float32)`` (diffusers)."""
        dtype = kwargs.get("dtype") or (args[1] if len(args) > 1 else None)
        name = "float32"
        if dtype is not None:
            if dtype.fact.kind is not Kind.DTYPE or dtype.fact.prec is Prec.UNKNOWN:
                return
            name = dtype.fact.dtype or ("float16" if dtype.fact.prec is Prec.HALF else "float32")
            if dtype.fact.maybe:
                return
        cause = Cause.UPCAST if name in ("float32", "float64") else Cause.CAST
        verb = "upcast" if cause is Cause.UPCAST else "cast"
        text = f"trainable parameters {verb} to {name} by `{self.code(node)}`"
        value = tensor_of_dtype(name, node, cause, text)
        models = args[0].fact if args else kwargs["model"].fact if "model" in kwargs else UNKNOWN
        self._cast_modules(models, value, frame)

    def peft_model(
        self, node: cst.Call, model: Operand, kwargs: dict[str, Operand], frame: Frame
    ) -> Fact:
        """``get_peft_model(model, config)``: peft keeps half models' adapters in float32."""
        module = model.fact
        flag = kwargs.get("autocast_adapter_dtype")
        if module.kind is Kind.MODULE and module.prec is Prec.HALF:
            if flag is None or _bool(flag.node) is True:
                text = f"adapter weights kept in float32 by `{self.code(node)}`"
                self._cast_modules(
                    module, tensor_of_dtype("float32", node, Cause.UPCAST, text), frame
                )
        return module

    def _cast_modules(self, models: Fact, value: Fact, frame: Frame) -> None:
        modules = [models] if models.kind is Kind.MODULE else []
        if models.kind is Kind.SEQ:
            items = (
                models.items if models.items is not None else (models.elem,) if models.elem else ()
            )
            modules = [m for m in items if m is not None and m.kind is Kind.MODULE]
        state = self.state(frame)
        for module in modules:
            state = _with_trainable(state, module, value)
        self.set_state(frame, state)

    def enter_region(self, frame: Frame, region: Autocast) -> None:
        if region.active:
            state = self.state(frame)
            if not any(r.node is region.node for r in state.regions):
                self.set_state(frame, replace(state, regions=state.regions + (region,)))

    # -- methods of training objects ----------------------------------------------------
    def method(
        self,
        node: cst.Call,
        method: str,
        receiver: Operand,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact | None:
        recv = receiver.fact
        info = recv.train
        if isinstance(info, Scaler):
            return self.scaler_method(node, method, info, args, frame)
        if isinstance(info, Accelerator):
            return self.accelerator_method(node, method, info, args, kwargs, frame)
        if isinstance(info, Optimizer):
            if method == "step":
                self.optimizer_step(node, info, frame)
            return UNKNOWN
        if isinstance(info, Scaled) and method == "backward":
            self.backward(node, info.scaler, recv, frame)
            return UNKNOWN
        return None

    def scaler_method(
        self, node: cst.Call, method: str, scaler: Scaler, args: tuple[Operand, ...], frame: Frame
    ) -> Fact:
        if method == "scale":
            loss = args[0].fact if args else UNKNOWN
            base = loss if loss.kind is Kind.TENSOR else Fact(Kind.TENSOR)
            return replace(base, train=Scaled(scaler))
        if method in ("unscale_", "step") and args:
            # An optimizer we know, or one we do not (a parameter of a helper): either way
            # the scaler's gradients are unscaled (and stepped) from here on.
            optimizer = args[0].fact.train
            if not isinstance(optimizer, Optimizer):
                optimizer = Optimizer(args[0].node, f"`{self.code(args[0].node)}`", (), ())
            if method == "unscale_":
                self.unscale(node, scaler, (optimizer,), frame, via="torch")
            else:
                self.step(node, scaler, optimizer, frame, via="torch")
        elif method == "update":
            state = self.state(frame)
            self.set_state(frame, state.with_scaler(ScalerState(state.scaler_state(scaler).scaler)))
        return UNKNOWN

    def accelerator_method(
        self,
        node: cst.Call,
        method: str,
        acc: Accelerator,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact:
        if method in ("prepare", "prepare_optimizer", "prepare_model"):
            return self.prepare(acc, args, frame)
        if method == "backward" and args:
            self.backward(node, acc.scaler, args[0].fact, frame, via="accelerate")
        elif method in ("clip_grad_norm_", "clip_grad_value_"):
            self.clip(node, frame, via="accelerate", accelerator=acc)
        elif method == "unscale_gradients":
            self.unscale(node, acc.scaler, self.prepared(acc, frame), frame, via="accelerate")
        elif method in ("unwrap_model", "unwrap") and args:
            return args[0].fact
        return UNKNOWN

    def prepare(self, acc: Accelerator, args: tuple[Operand, ...], frame: Frame) -> Fact:
        """``accelerator.prepare(model, optimizer, ...)``: the same objects, optimizers wrapped."""
        state = self.state(frame)
        out = []
        for op in args:
            fact = op.fact
            if fact.kind is Kind.OPTIMIZER and isinstance(fact.train, Optimizer):
                optimizer = replace(fact.train, accelerator=acc)
                fact = replace(fact, train=optimizer)
                state = replace(state, prepared=_unique(state.prepared + ((acc.node, optimizer),)))
            out.append(fact)
        self.set_state(frame, state)
        return out[0] if len(out) == 1 else seq_of(out)

    def prepared(self, acc: Accelerator, frame: Frame) -> tuple[Optimizer, ...]:
        found = [o for n, o in self.state(frame).prepared if n is acc.node]
        return tuple({id(o.node): o for o in found}.values())

    # -- the loop's steps -------------------------------------------------------------------
    def use(self, optimizer: Optimizer, frame: Frame, unscaled: bool | None) -> OptimizerUse:
        state = self.state(frame)
        found: list[Fact] = []
        for param in optimizer.params:
            link = param.train
            if not isinstance(link, Params):
                found.append(param)
                continue
            for path, module in link.sources:
                now = frame.env.get(path) if path else None
                module = now if now is not None and now.kind is Kind.MODULE else module
                found.append(state.trainable_of(module))
        return OptimizerUse(optimizer, tuple(dict.fromkeys(found)), unscaled)

    def site(
        self,
        node: cst.Call,
        action: Action,
        frame: Frame,
        scaler: Scaler | None,
        *,
        optimizers: tuple[OptimizerUse, ...] = (),
        current: ScalerState | None = None,
        via: str = "torch",
        loss: Fact | None = None,
    ) -> TrainingSite:
        regions = self.state(frame).regions
        here = frame.scope.autocast
        if here is not None and here.active and not any(r.node is here.node for r in regions):
            regions = regions + (here,)
        scaled = current.scaled if current is not None else False
        unscaled = current.any_unscaled if current is not None else False
        backward = current.backward if current is not None else None
        return TrainingSite(
            node,
            action,
            frame.scope,
            scaler,
            optimizers,
            scaled,
            unscaled,
            via,
            loss,
            regions,
            backward,
        )

    def backward(
        self, node: cst.Call, scaler: Scaler, loss: Fact, frame: Frame, via: str = "torch"
    ) -> None:
        state = self.state(frame)
        current = state.scaler_state(scaler)
        self.emit(self.site(node, Action.BACKWARD, frame, scaler, via=via, loss=loss))
        self.set_state(frame, state.with_scaler(replace(current, scaled=True, backward=node)))

    def unscale(
        self,
        node: cst.Call,
        scaler: Scaler,
        optimizers: Sequence[Optimizer],
        frame: Frame,
        via: str,
    ) -> None:
        state = self.state(frame)
        current = state.scaler_state(scaler)
        uses = tuple(self.use(o, frame, current.maybe_unscaled_of(o.node)) for o in optimizers)
        self.emit(
            self.site(
                node, Action.UNSCALE, frame, scaler, optimizers=uses, current=current, via=via
            )
        )
        done = dict((id(n), (n, d)) for n, d in current.unscaled)
        for o in optimizers:
            done[id(o.node)] = (o.node, True)
        self.set_state(frame, state.with_scaler(replace(current, unscaled=tuple(done.values()))))

    def clip(
        self, node: cst.Call, frame: Frame, via: str, accelerator: Accelerator | None = None
    ) -> None:
        state = self.state(frame)
        if accelerator is not None:  # accelerate unscales first, then clips: that is the fix
            scaler = accelerator.scaler
            current = state.scaler_state(scaler)
            optimizers = self.prepared(accelerator, frame)
            uses = tuple(self.use(o, frame, current.maybe_unscaled_of(o.node)) for o in optimizers)
            site = self.site(
                node, Action.CLIP, frame, scaler, optimizers=uses, current=current, via=via
            )
            self.emit(site)
            done = dict((id(n), (n, d)) for n, d in current.unscaled)
            for o in optimizers:
                done[id(o.node)] = (o.node, True)
            self.set_state(
                frame, state.with_scaler(replace(current, unscaled=tuple(done.values())))
            )
            return
        pending = [s for s in state.scalers if s.scaled is not False and s.scaler.may_scale]
        pending.sort(key=lambda s: s.scaled is not True)
        if not pending:
            self.emit(self.site(node, Action.CLIP, frame, None, via=via))
            return
        first = pending[0]
        self.emit(self.site(node, Action.CLIP, frame, first.scaler, current=first, via=via))

    def step(
        self, node: cst.Call, scaler: Scaler, optimizer: Optimizer, frame: Frame, via: str
    ) -> None:
        state = self.state(frame)
        current = state.scaler_state(scaler)
        use = self.use(optimizer, frame, current.maybe_unscaled_of(optimizer.node))
        site = self.site(
            node, Action.STEP, frame, scaler, optimizers=(use,), current=current, via=via
        )
        self.emit(site)
        self.set_state(frame, state.with_scaler(ScalerState(current.scaler)))

    def optimizer_step(self, node: cst.Call, optimizer: Optimizer, frame: Frame) -> None:
        if optimizer.accelerator is not None:  # AcceleratedOptimizer.step goes through the scaler
            self.step(node, optimizer.accelerator.scaler, optimizer, frame, via="accelerate")
            return
        use = self.use(optimizer, frame, None)
        self.emit(self.site(node, Action.STEP, frame, None, optimizers=(use,)))

    # -- helper functions -------------------------------------------------------------------
    def after_call(
        self,
        node: cst.Call,
        fn: cst.FunctionDef,
        args: tuple[Operand, ...],
        kwargs: Mapping[str, Operand],
        frame: Frame,
        generic: Fact,
    ) -> Fact:
        """A call of a function of this file that is handed training objects or models.

        The function's own walk (its summary) sees its parameters as unknown inputs. When
        a call hands it a scaler, an optimizer, an accelerator or a model, its body is
        walked again with those facts and the caller's loop state, so the steps it takes
        are seen in order with the caller's; the loop state it leaves flows back. Only
        training sites are reported from that walk: the function's call sites were reported
        by its own walk.
        """
        analysis = self.analysis
        if fn.name.value in TRAINABLE_CAST_NAMES:  # a copy of diffusers' helper
            self.cast_trainable(node, args, kwargs, frame)
            return generic
        facts = [o.fact for o in args] + [o.fact for o in kwargs.values()]
        if (
            not any(_worth(f, frame.scope.in_module) for f in facts)
            or self.depth >= 3
            or self.budget <= 0
            or fn in self.active
            or fn in analysis.in_progress
            or not isinstance(fn.body, cst.IndentedBlock)
        ):
            return generic
        if self.top_level is None:
            self.top_level = frozenset(
                s for s in analysis.module.body if isinstance(s, cst.FunctionDef)
            )
        outer = None if fn in self.top_level else frame
        sub = analysis._function_frame(fn, None, outer)
        params = list(fn.params.posonly_params) + list(fn.params.params)
        for i, param in enumerate(params):
            name = param.name.value
            if name in kwargs:
                sub.env[name] = kwargs[name].fact
            elif i < len(args):
                sub.env[name] = args[i].fact
        for param in fn.params.kwonly_params:
            if param.name.value in kwargs:
                sub.env[param.name.value] = kwargs[param.name.value].fact
        if STATE in frame.env:
            sub.env[STATE] = frame.env[STATE]
        saved = analysis.recorder
        analysis.recorder = []  # the calls inside were reported by the function's own walk
        self.budget -= 1
        self.depth += 1
        self.active.add(fn)
        try:
            analysis.block(fn.body.body, sub)
        finally:
            analysis.recorder = saved
            self.depth -= 1
            self.active.discard(fn)
        if STATE in sub.env:
            frame.env[STATE] = sub.env[STATE]
        return _pick(generic, sub.returns)


# --- helpers -----------------------------------------------------------------------------------


def none_when(test: cst.BaseExpression, truth: bool) -> frozenset[str]:
    """The names (``scaler``, ``self.scaler``) that are None wherever ``test`` is ``truth``.

    Understands ``x is None``, ``x is not None`` (and ``==``/``!=``), bare ``x`` (a
    GradScaler is always truthy, so a false one is None), ``not``, ``and`` and ``or``.
    """
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return none_when(test.expression, not truth)
    if isinstance(test, cst.BooleanOperation):
        left, right = none_when(test.left, truth), none_when(test.right, truth)
        # ``a and b`` true and ``a or b`` false: both sides hold; otherwise only one does
        return left | right if isinstance(test.operator, cst.And) == truth else left & right
    if isinstance(test, cst.Comparison):
        if len(test.comparisons) != 1:
            return frozenset()
        comp = test.comparisons[0]
        if isinstance(comp.operator, (cst.Is, cst.Equal)):
            is_none = truth
        elif isinstance(comp.operator, (cst.IsNot, cst.NotEqual)):
            is_none = not truth
        else:
            return frozenset()
        lhs, rhs = test.left, comp.comparator
        other = lhs if _is_none(rhs) else rhs if _is_none(lhs) else None
        name = dotted(other) if other is not None and is_none else None
        return frozenset({name}) if name is not None else frozenset()
    name = dotted(test)
    return frozenset({name}) if name is not None and not truth else frozenset()


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _is_optimizer_class(qual: str) -> bool:
    if qual in ("transformers.Adafactor", "transformers.AdamW"):
        return True
    if not qual.startswith(OPTIMIZER_PACKAGES):
        return False
    leaf = qual.rsplit(".", 1)[-1]
    if not leaf[:1].isupper() or any(n in qual for n in NOT_OPTIMIZERS):
        return False
    return leaf not in ("Optimizer", "ParamGroup")


def _flatten(fact: Fact) -> list[Fact]:
    """The parameter facts an optimizer is handed: lists, generators, param groups, a model."""
    if fact.kind is Kind.TENSOR:
        return [fact]
    if fact.kind is Kind.SEQ:
        items = fact.items if fact.items is not None else (fact.elem,) if fact.elem else ()
        return [p for item in items if item is not None for p in _flatten(item)]
    if isinstance(fact.train, ParamGroup):
        return _flatten(fact.train.params)
    if fact.kind is Kind.MODULE:  # timm's create_optimizer_v2(model, ...)
        link = Params(((None, fact),))
        return [Fact(Kind.TENSOR, fact.prec, fact.dtype, fact.origin, train=link)]
    return []


def _with_trainable(state: State, module: Fact, params: Fact) -> State:
    rest = tuple((m, p) for m, p in state.trainable if m != module)
    return replace(state, trainable=rest + ((module, params),))


def _chain(args: tuple[Operand, ...]) -> Fact:
    elems = [element(a.fact) for a in args if a.fact.kind is Kind.SEQ]
    if not elems:
        return Fact(Kind.SEQ)
    out = elems[0]
    for e in elems[1:]:
        out = join(out, e)
    return Fact(Kind.SEQ, elem=out)


def _worth(fact: Fact, in_module: bool) -> bool:
    """Whether handing ``fact`` to a helper is worth walking the helper with it."""
    if fact.kind in TRAINING_KINDS:
        return True
    if fact.kind is Kind.MODULE:
        return not in_module and fact.prec is not Prec.UNKNOWN
    if fact.kind is Kind.SEQ and fact.items is not None:
        return any(_worth(f, in_module) for f in fact.items)
    return False


def _has_training(fact: Fact) -> bool:
    if fact.kind in TRAINING_KINDS:
        return True
    if fact.kind is Kind.SEQ:
        items = fact.items if fact.items is not None else (fact.elem,) if fact.elem else ()
        return any(f is not None and _has_training(f) for f in items)
    return False


def _pick(generic: Fact, special: Fact | None) -> Fact:
    """What a helper returns: its summary, unless the walk with the call's facts knows more."""
    if special is None:
        return generic
    if _has_training(special):
        return special
    known = special.kind is Kind.MODULE and special.prec is not Prec.UNKNOWN
    if known and (generic.kind is not Kind.MODULE or generic.prec is Prec.UNKNOWN):
        return special
    if (
        special.kind is Kind.SEQ
        and generic.kind is Kind.SEQ
        and special.items is not None
        and generic.items is not None
        and len(special.items) == len(generic.items)
    ):
        return replace(
            generic,
            items=tuple(_pick(g, s) for g, s in zip(generic.items, special.items, strict=False)),
        )
    if special.kind is Kind.SEQ and _has_training(special):
        return special
    return generic


def _string(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _bool(node: cst.CSTNode) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None
