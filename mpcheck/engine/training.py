"""The training-loop model: which scaler scaled which loss, which optimizer holds what.

The dtype pass calls :mod:`mpcheck.engine.training_loop`, which uses this module, when it meets a
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
from collections.abc import Iterable
from dataclasses import dataclass, replace

import libcst as cst

from mpcheck.engine.facts import (
    Fact,
    Kind,
    Prec,
    TrainInfo,
    element,
    join,
    trainable_params,
)
from mpcheck.engine.sites import Autocast, Flags, Operand, Scope
from mpcheck.project.names import dotted

STATE = "<training>"  # environment key of the loop state; not a Python name
TRAINING_KINDS = (Kind.SCALER, Kind.OPTIMIZER, Kind.ACCELERATOR)
FP16_TINY = 2.0**-24  # smallest float16 subnormal (5.96e-8): a smaller eps rounds to 0 or to it
FP16_MIN_NORMAL = 2.0**-14  # smallest normal float16 (6.1e-5); below it only subnormals


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
    bf16_mode: cst.BaseExpression | None = None  # made in a bfloat16-only branch: this test
    # what enables it at run time: ``enabled=`` of a torch scaler, ``fp16=`` of
    # TrainingArguments, ``mixed_precision=`` (or ``fp16=``) of an Accelerator
    flag: cst.BaseExpression | None = None

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
    # False under DeepSpeed, which scales on its own; None: on the runs a ``deepspeed_plugin=``
    # that may be None gives none (accelerate's own scaler and autocast on the others)
    own_scaler: bool | None = True
    flag: cst.BaseExpression | None = None  # ``mixed_precision=args.mixed_precision``

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        if not isinstance(other, Accelerator) or other == self:
            return self
        mp = self.mixed_precision if self.mixed_precision == other.mixed_precision else None
        own = self.own_scaler or other.own_scaler
        if own is not True and None in (self.own_scaler, other.own_scaler):
            own = None
        return replace(self, mixed_precision=mp, own_scaler=own)

    def forward_region(self, torch_version: tuple[int, int] | None) -> Autocast | None:
        """The autocast accelerate wraps around the ``forward`` of a model it prepares: with
        native mixed precision (fp16, bf16 or set at launch time); not under DeepSpeed, which
        casts the model instead."""
        if not self.own_scaler or self.mixed_precision not in (None, "fp16", "bf16"):
            return None
        dtype = {"fp16": "float16", "bf16": "bfloat16"}.get(self.mixed_precision or "")
        return Autocast(
            self.node,
            "cuda",
            dtype,
            True if dtype else None,
            dtype_known=dtype is not None,
            torch_version=torch_version,
        )

    @property
    def scaler(self) -> Scaler:
        enabled = None if self.mixed_precision is None else self.mixed_precision == "fp16"
        if self.own_scaler is False:
            enabled = False
        elif self.own_scaler is None and enabled:
            enabled = None  # (not on the DeepSpeed runs)
        return Scaler(self.node, self.text, "accelerate", None, enabled, flag=self.flag)


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
    """On a parameter's fact: the modules it belongs to, as ``(env path, module fact, flags)``;
    the flags are those known where the parameters were taken (``model.parameters()``
    inside ``if args.train_text_encoder:``), so the module is read as it is on those paths."""

    sources: tuple[tuple[str | None, Fact, Flags], ...]

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        if not isinstance(other, Params):
            return self
        return Params(tuple(dict.fromkeys(self.sources + other.sources)))


@dataclass(frozen=True)
class Shares:
    """On a pipeline's fact: the modules it was handed (``from_pretrained(..., unet=unet)``).

    A diffusers pipeline built around the training model holds that very module, so
    ``pipeline.to(dtype=torch.float16)`` casts the trainable parameters in place too.
    """

    modules: tuple[Fact, ...]

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        if not isinstance(other, Shares):
            return self
        return Shares(tuple(dict.fromkeys(self.modules + other.modules)))


@dataclass(frozen=True)
class ParamGroup:
    """``{"params": ..., "lr": ...}``: one parameter group of an optimizer."""

    params: Fact

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        if not isinstance(other, ParamGroup):
            return self
        return ParamGroup(join(self.params, other.params))


@dataclass(frozen=True)
class TrainingArguments:
    """``transformers.TrainingArguments(...)``: whether the Trainer given it scales losses.

    With ``fp16=True`` the Trainer hands ``mixed_precision="fp16"`` to accelerate, whose
    GradScaler unscales every step's gradients; not under DeepSpeed (``deepspeed=``), which
    scales them itself, and FSDP's sharded scaler (``fsdp=``) takes float16 gradients."""

    node: cst.CSTNode
    text: str
    fp16: bool | None  # None: decided at run time (``fp16=args.fp16``)
    deepspeed: bool | None = False  # None: a value that may be None (``deepspeed=args.ds``)
    fsdp: bool = False
    flag: cst.BaseExpression | None = None  # ``fp16=args.fp16``

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        if not isinstance(other, TrainingArguments) or other == self:
            return self
        return replace(
            self,
            fp16=tri(self.fp16, other.fp16),
            deepspeed=tri(self.deepspeed, other.deepspeed),
            fsdp=self.fsdp and other.fsdp,
        )

    @property
    def scaler(self) -> Scaler | None:
        """The GradScaler the Trainer steps through, or None when it runs none."""
        if self.fp16 is False or self.deepspeed is True:
            return None
        enabled = None if self.fp16 is None or self.deepspeed is None else True
        return Scaler(
            self.node, self.text, "transformers", None, enabled, self.fsdp, flag=self.flag
        )


@dataclass(frozen=True)
class ArgumentsClass:
    """``TrainingArguments`` used as a value (handed to ``HfArgumentParser``)."""

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        return self


@dataclass(frozen=True)
class ArgumentParser:
    """``HfArgumentParser((ModelArguments, TrainingArguments))``: which of the classes it
    fills are TrainingArguments, whose ``fp16`` the command line then decides."""

    node: cst.CSTNode
    text: str
    arguments: tuple[bool, ...]

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        return self


@dataclass(frozen=True)
class Trainer:
    """A transformers ``Trainer``: ``trainer.train()`` steps ``optimizer`` (the one it builds
    over the model's parameters, or the one handed to it) through ``scaler``."""

    node: cst.CSTNode
    scaler: Scaler | None
    optimizer: Optimizer | None

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        return self  # (another trainer on another path: keep the first)


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
    # module -> a later cast of it to half (``pipeline.to(dtype=weight_dtype)`` on a pipeline
    # sharing it): kept on every path that saw it, so the next iteration's step sees it
    recasts: tuple[tuple[Fact, Fact], ...] = ()
    # where each model ``accelerator.prepare`` returned came from (its origin node) -> the
    # autocast accelerate runs its ``forward`` in: kept only where every path prepared it
    autocast_models: tuple[tuple[cst.CSTNode, Autocast], ...] = ()
    # a torch clip since the last step that followed no scaled backward (on some path), and
    # the scalers known None where it ran: a step of another scaler after it steps gradients
    # that scaler scaled, in another method or in the caller (see ``clip_before``)
    clip: tuple[cst.Call, tuple[cst.CSTNode, ...]] | None = None
    # a script's ``model.half()``/``model.to(torch.bfloat16)`` of a module (its path, the module
    # as it was, the cast) not yet cast back: ``model.float()`` after it makes it a recast
    halved: tuple[tuple[str, Fact, Fact], ...] = ()
    # the modules an optimizer step has trained so far on this path (as bound then)
    stepped: tuple[Fact, ...] = ()
    # the scalers (their nodes: an accelerator's scaler is its node) told to take float16
    # gradients (``mpcheck.engine.scaler_patch``), each with the flags known where that ran:
    # () is every run; kept from every path that saw it (the flags say which runs)
    patched: tuple[tuple[cst.CSTNode, Flags], ...] = ()
    # the ``with`` blocks of the enabled autocast regions entered so far, with their region:
    # where a loss a plain ``backward()`` runs on may have been computed (``loss_regions``)
    blocks: tuple[tuple[Autocast, cst.With], ...] = ()

    def join(self, other: TrainInfo | None) -> TrainInfo | None:
        if not isinstance(other, State) or other == self:
            return self
        mine = {id(s.scaler.node): s for s in self.scalers}
        theirs = {id(s.scaler.node): s for s in other.scalers}
        scalers = []
        for key in dict.fromkeys([*mine, *theirs]):
            a, b = mine.get(key), theirs.get(key)
            scalers.append(a.join(b) if a is not None else b.join(a) if b is not None else None)
        # a module cast on one path only keeps its own dtype on the other path
        modules = dict.fromkeys([m for m, _ in self.trainable] + [m for m, _ in other.trainable])
        trainable = {m: join(self.trainable_of(m), other.trainable_of(m)) for m in modules}
        return State(
            tuple(s for s in scalers if s is not None),
            unique(self.prepared + other.prepared),
            tuple(trainable.items()),
            unique(self.regions + other.regions),
            unique(self.recasts + other.recasts),
            tuple(
                (node, region)
                for node, region in self.autocast_models
                if any(node is n for n, _ in other.autocast_models)
            ),
            self.clip or other.clip,
            unique(self.halved + other.halved),
            unique(self.stepped + other.stepped),
            unique(self.patched + other.patched),
            unique(self.blocks + other.blocks),
        )

    def forward_region(self, module: Fact) -> Autocast | None:
        """The autocast ``module``'s ``forward`` runs in: accelerate's, when it prepared it.

        A mixed precision set at launch time may be ``no``, which turns it off: a model half
        whatever the run (loaded in bfloat16) then raises, so only a model half on some paths
        (cast to a ``weight_dtype`` that follows the mixed precision) is covered."""
        if module.origin is None:
            return None
        node = module.origin.node
        region = next((region for n, region in self.autocast_models if n is node), None)
        if region is None or region.enabled or module.maybe or module.prec is not Prec.HALF:
            return region
        return None

    def clip_before(self, scaler: Scaler) -> cst.Call | None:
        """The clip a step of ``scaler`` follows on some path, unless it was None there."""
        if self.clip is None or any(n is scaler.node for n in self.clip[1]):
            return None
        return self.clip[0]

    def scaler_state(self, scaler: Scaler) -> ScalerState:
        """What ``scaler`` did on this path; a scaler used here exists here (not absent)."""
        for s in self.scalers:
            if s.scaler.node is scaler.node:
                return ScalerState(s.scaler) if s.absent else s
        return ScalerState(scaler)

    def with_scaler(self, state: ScalerState) -> State:
        rest = tuple(s for s in self.scalers if s.scaler.node is not state.scaler.node)
        return replace(self, scalers=rest + (state,))

    def patch_of(self, scaler: Scaler | None) -> Flags | None:
        """The flags of the runs on which ``scaler`` takes float16 gradients: () on every
        run; None when nothing patched it, or when it is patched on runs the walk cannot
        tell apart by one flag (then it is taken as not patched)."""
        found = [
            flags for node, flags in self.patched if scaler is not None and node is scaler.node
        ]
        if () in found:
            return ()
        single = [flags for flags in found if len(flags) == 1]
        return single[0] if single else None

    def trainable_of(self, module: Fact) -> Fact:
        """The fact of ``module``'s trainable parameters (whose gradients a scaler sees)."""
        for key, params in self.trainable:
            if key == module:
                return params
        return trainable_params(module)


def unique(items: Iterable[object]) -> tuple:  # type: ignore[type-arg]
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
    # ``loss.backward()`` of a loss no scaler scaled: ``regions`` are the enabled autocast
    # regions its forward ran in (``mpcheck.engine.loss_regions``); ``scaler`` is None, or a
    # scaler made ``enabled=False`` whose ``scale(loss)`` it went through
    PLAIN_BACKWARD = "plain backward"


@dataclass(frozen=True)
class OptimizerUse:
    """An optimizer a call acts on, with its parameters as they hold at that point."""

    optimizer: Optimizer
    params: tuple[Fact, ...]  # its trainable parameters' facts, after in-place casts
    unscaled: bool | None  # the scaler already unscaled its gradients (None: on some paths)
    # casts to half (float16 or bfloat16) of its parameters' modules seen earlier on some path
    # (a validation pipeline's ``.to(dtype=...)``), each a tensor fact whose origin is the cast
    recast: tuple[Fact, ...] = ()


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
    # STEP: a torch clip on this path since the last step, which followed no scaled backward
    # of this function (``State.clip_before``): the gradients were scaled elsewhere
    clip: cst.Call | None = None
    # STEP after a ``clip``: the method of this class that made the scaler, when it is another
    # one and the class never unscales: ``self`` holds the scaler, and the scaled backward ran
    # in another method or in the caller (``mpcheck.engine.held``)
    held: cst.FunctionDef | None = None
    # PLAIN_BACKWARD: the file shows loss scaling somewhere (a GradScaler made or handed, a
    # scaled loss of its own): the unscaled backward may be a path the author chose on purpose
    scaling_in_file: bool = False

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
        other = lhs if is_none_literal(rhs) else rhs if is_none_literal(lhs) else None
        name = dotted(other) if other is not None and is_none else None
        return frozenset({name}) if name is not None else frozenset()
    name = dotted(test)
    return frozenset({name}) if name is not None and not truth else frozenset()


def is_none_literal(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def flatten(fact: Fact) -> list[Fact]:
    """The parameter facts an optimizer is handed: lists, generators, param groups, a model."""
    if fact.kind is Kind.TENSOR:
        return [fact]
    if fact.kind is Kind.SEQ:
        items = fact.items if fact.items is not None else (fact.elem,) if fact.elem else ()
        return [p for item in items if item is not None for p in flatten(item)]
    if isinstance(fact.train, ParamGroup):
        return flatten(fact.train.params)
    if fact.kind is Kind.MODULE:  # timm's create_optimizer_v2(model, ...)
        link = Params(((None, fact, ()),))
        return [Fact(Kind.TENSOR, fact.prec, fact.dtype, fact.origin, train=link)]
    return []


def with_trainable(state: State, module: Fact, params: Fact) -> State:
    rest = tuple((m, p) for m, p in state.trainable if m != module)
    return replace(state, trainable=rest + ((module, params),))


def chain(args: tuple[Operand, ...]) -> Fact:
    elems = [element(a.fact) for a in args if a.fact.kind is Kind.SEQ]
    if not elems:
        return Fact(Kind.SEQ)
    out = elems[0]
    for e in elems[1:]:
        out = join(out, e)
    return Fact(Kind.SEQ, elem=out)


def worth(fact: Fact, in_module: bool) -> bool:
    """Whether handing ``fact`` to a helper is worth walking the helper with it."""
    if fact.kind in TRAINING_KINDS or isinstance(fact.train, Shares):
        return True
    if fact.kind is Kind.MODULE:
        return not in_module and fact.prec is not Prec.UNKNOWN
    if fact.kind is Kind.SEQ and fact.items is not None:
        return any(worth(f, in_module) for f in fact.items)
    return False


def has_training(fact: Fact) -> bool:
    if fact.kind in TRAINING_KINDS or isinstance(fact.train, Shares):
        return True
    if fact.kind is Kind.SEQ:
        items = fact.items if fact.items is not None else (fact.elem,) if fact.elem else ()
        return any(f is not None and has_training(f) for f in items)
    return False


def pick(generic: Fact, special: Fact | None) -> Fact:
    """What a helper returns: its summary, unless the walk with the call's facts knows more."""
    if special is None:
        return generic
    if has_training(special):
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
            items=tuple(pick(g, s) for g, s in zip(generic.items, special.items, strict=False)),
        )
    if special.kind is Kind.SEQ and has_training(special):
        return special
    if (  # ``return [m for m in models]``: the call's models, item for item
        special.kind is Kind.SEQ
        and special.items is not None
        and generic.kind is Kind.SEQ
        and generic.items is None
        and any(f.kind is Kind.MODULE and f.prec is not Prec.UNKNOWN for f in special.items)
    ):
        return special
    return generic


BF16_MODES = ("bf16", "bfloat16", "bf16-mixed", "bf16-true", "torch.bfloat16")


def bf16_when(test: cst.BaseExpression, truth: bool) -> cst.BaseExpression | None:
    """The comparison that makes ``test`` ``truth`` only in bfloat16 mode, if any.

    ``mode == "bf16"`` (or ``dtype == torch.bfloat16``) when true, ``mode != "bf16"`` when
    false, and a true ``and`` with such a conjunct; ``or`` and membership tests say nothing.
    """
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And) and truth:
        return bf16_when(test.left, truth) or bf16_when(test.right, truth)
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    wanted = cst.Equal if truth else cst.NotEqual
    if not isinstance(target.operator, wanted):
        return None
    sides = (test.left, target.comparator)
    if any((string_value(n) or dotted(n)) in BF16_MODES for n in sides):
        return test
    return None


def string_value(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def bool_value(node: cst.CSTNode) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def scaling_switch(node: cst.CSTNode) -> bool | None:
    """What a scaler's switch (``enabled=`` of a CUDA ``GradScaler``, ``fp16=`` of
    ``TrainingArguments`` or ``Accelerator``) is on the runs that scale: a literal, or
    ``torch.cuda.is_available()``, true on every run a CUDA scaler scales (``GradScaler("cuda")``
    turns itself off without CUDA, and transformers and accelerate make their fp16 scaler on
    an accelerator only)."""
    if isinstance(node, cst.Call) and not node.args and dotted(node.func) == _CUDA_AVAILABLE:
        return True
    return bool_value(node)


_CUDA_AVAILABLE = "torch.cuda.is_available"
