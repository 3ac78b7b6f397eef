"""Following the training loop through a file: the engine side of :mod:`mpcheck.engine.training`.

The walk calls into :class:`Tracker` when it meets a ``GradScaler``, an optimizer, an
``accelerate.Accelerator`` or one of their methods, a branch on one of them, or a call
that hands them to a helper. The tracker uses the walk only through :class:`WalkApi`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import libcst as cst

from mpcheck.engine.binding import none_arguments, passed
from mpcheck.engine.facts import (
    UNKNOWN,
    Cause,
    Fact,
    Kind,
    Origin,
    Prec,
    Trainable,
    seq_of,
    settled,
    tensor_of_dtype,
)
from mpcheck.engine.frames import Frame, WalkApi
from mpcheck.engine.guards import linked_module, trained_flags
from mpcheck.engine.handed import cast_by_callee
from mpcheck.engine.held import held
from mpcheck.engine.loss_regions import loss_regions
from mpcheck.engine.scaler_patch import fp16_unscale_params
from mpcheck.engine.sites import Autocast, Flags, Operand
from mpcheck.engine.training import (
    STATE,
    Accelerator,
    Action,
    ArgumentParser,
    ArgumentsClass,
    Optimizer,
    OptimizerClass,
    OptimizerUse,
    ParamGroup,
    Params,
    Scaled,
    Scaler,
    ScalerState,
    State,
    Trainer,
    TrainingArguments,
    TrainingSite,
    bf16_when,
    bool_value,
    chain,
    flatten,
    none_when,
    pick,
    scaling_switch,
    string_value,
    unique,
    with_trainable,
    worth,
)
from mpcheck.knowledge import training_api as api
from mpcheck.project.names import descendants, dotted
from mpcheck.project.summary import Value

_NO_STATE = State()  # a path no training object reached (asked at every module call)


@dataclass
class Tracker:
    """Follows the training loop for one file's walk."""

    analysis: WalkApi
    depth: int = 0  # nesting of helper walks (see :meth:`after_call`)
    budget: int = 200  # helper walks left for this file
    active: set[cst.FunctionDef] = field(default_factory=set)
    top_level: frozenset[cst.FunctionDef] | None = None
    _scaling: bool | None = None  # :meth:`scaling_in_file`, once read

    # -- state ---------------------------------------------------------------------------
    @staticmethod
    def state(frame: Frame) -> State:
        fact = frame.env.get(STATE)
        return fact.train if fact is not None and isinstance(fact.train, State) else _NO_STATE

    @staticmethod
    def set_state(frame: Frame, state: State) -> None:
        frame.env[STATE] = Fact(Kind.OTHER, train=state)

    def emit(self, site: TrainingSite) -> None:
        reporting = self.analysis.reporting
        if reporting.takes("training"):
            reporting.listener.deliver("training", site)

    def code(self, node: cst.CSTNode, limit: int = 60) -> str:
        text = " ".join(self.analysis.module.code_for_node(node).split())
        return text if len(text) <= limit else text[: limit - 3] + "..."

    # -- branches --------------------------------------------------------------------------
    def assume(self, test: cst.BaseExpression, truth: bool, frame: Frame) -> Frame:
        """The branch of an ``if`` where ``test`` is ``truth``: a scaler known None there
        (its name bound to ``None``'s fact, its loop state absent), so the ``else`` of a later
        ``if scaler is not None:`` holds no scaled backward; and whether only bfloat16 runs."""
        mode = bf16_when(test, truth)
        if mode is not None:  # ``elif mixed_precision == "bf16":`` (a GradScaler here is idle)
            frame = replace(frame, scope=replace(frame.scope, bf16_mode=mode))
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
        if "GradScaler" in annotation or (name in api.SCALER_PARAM_NAMES and not annotation):
            text = f"`{name}`, an argument of the function"
            return Fact(Kind.SCALER, train=Scaler(param, text, enabled=None))
        if name == "accelerator" and (not annotation or "Accelerator" in annotation):
            text = f"`{name}`, an argument of the function"
            return Fact(Kind.ACCELERATOR, train=Accelerator(param, text, None))
        if annotation.rpartition(".")[2] in api.HF_TRAINING_ARGUMENT_NAMES:
            text = f"`{name}`, an argument of the function"
            return Fact(Kind.OTHER, train=TrainingArguments(param, text, None, None))
        return None

    @staticmethod
    def global_value(qual: str) -> Fact | None:
        """``torch.optim.AdamW`` used as a value (to be called later)."""
        if api.is_optimizer_class(qual):
            return Fact(Kind.OTHER, train=OptimizerClass((qual,)))
        if qual in api.HF_TRAINING_ARGUMENTS:
            return Fact(Kind.OTHER, train=ArgumentsClass())
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
        if qual in api.SCALER_CLASSES:
            return self.make_scaler(node, qual, args, kwargs, frame.scope.bf16_mode)
        if qual in api.ACCELERATORS:
            return self.make_accelerator(node, kwargs)
        if qual in api.DEEPSPEED_PLUGINS:  # (never None: accelerate then runs no scaler)
            return Fact(Kind.OTHER, layer=api.DEEPSPEED_PLUGINS[0])
        if api.is_optimizer_class(qual):
            return self.make_optimizer(node, (qual,), args, kwargs)
        if qual in api.OPTIMIZER_FACTORIES:
            return self.make_optimizer(node, (), args, kwargs)
        if qual in api.CLIP_FUNCTIONS:
            self.clip(node, frame, via="torch")
            return None
        if qual in api.TRAINABLE_CASTS or qual.rsplit(".", 1)[-1] in api.TRAINABLE_CAST_NAMES:
            self.cast_trainable(node, args, kwargs, frame)
            return UNKNOWN
        if (qual in api.PEFT_WRAPPERS or qual in api.PEFT_ADAPTER_LOADERS) and args:
            return self.peft_model(node, args[0], kwargs, frame)
        if qual in api.PEFT_KBIT_PREPARERS and (args or "model" in kwargs):
            return self.kbit_prepared(node, args[0] if args else kwargs["model"])
        if qual in api.HF_TRAINING_ARGUMENTS:
            return self.training_arguments(node, kwargs)
        if qual in api.HF_TRAINERS:
            return self.hf_trainer(node, args, kwargs, frame)
        if qual in api.HF_ARGUMENT_PARSERS and args:
            given = args[0].fact
            classes = given.items if given.items is not None else (given,)
            fills = tuple(isinstance(c.train, ArgumentsClass) for c in classes)
            text = f"`{self.code(node)}`"
            return Fact(Kind.OTHER, train=ArgumentParser(node, text, fills))
        if qual == "itertools.chain":
            return chain(args)
        return None

    def derived_call(
        self,
        node: cst.Call,
        bases: Iterable[str],
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact | None:
        """A project class deriving transformers' ``Trainer`` or ``TrainingArguments``
        (``class MyTrainer(Trainer)``, ``@dataclass class MyArgs(TrainingArguments)``) is
        built as its base is: a subclass overrides how the loss is computed, not what
        ``train()`` steps nor how ``fp16`` picks the scaler."""
        for base in bases:
            if base in api.HF_TRAINERS or base in api.HF_TRAINING_ARGUMENTS:
                return self.torch_call(node, base, args, kwargs, frame)
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
        if name in api.CLIP_NAMES:
            self.clip(node, frame, via="torch")
            return True
        return False

    def make_scaler(
        self,
        node: cst.Call,
        qual: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        bf16_mode: cst.BaseExpression | None = None,
    ) -> Fact:
        default_device, enabled_at, takes_device = api.SCALER_CLASSES[qual]
        device: str | None = default_device
        dev = kwargs.get("device") or (args[0] if takes_device and args else None)
        if dev is not None:
            device = string_value(dev.node)
            device = device.split(":")[0] if device else None
        flag = kwargs.get("enabled") or (args[enabled_at] if len(args) > enabled_at else None)
        enabled = True if flag is None else bool_value(flag.node)
        if flag is not None and device in (None, "cuda"):
            enabled = scaling_switch(flag.node)
        scaler = Scaler(
            node,
            f"`{self.code(node)}`",
            "torch",
            device,
            enabled,
            qual in api.FP16_TOLERANT_SCALERS,
            bf16_mode,
            flag.node if flag is not None else None,
        )
        return Fact(Kind.SCALER, train=scaler)

    def make_accelerator(self, node: cst.Call, kwargs: dict[str, Operand]) -> Fact:
        mp: str | None = None
        given = kwargs.get("mixed_precision")
        if "mixed_precision" in kwargs:
            mp = string_value(kwargs["mixed_precision"].node)
        elif "fp16" in kwargs:
            flag = scaling_switch(kwargs["fp16"].node)
            mp = None if flag is None else "fp16" if flag else "no"
        accelerator = Accelerator(
            node,
            f"`{self.code(node)}`",
            mp,
            own_scaler(kwargs),
            given.node if given is not None else None,
        )
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
        params = tuple(dict.fromkeys(flatten(source.fact))) if source is not None else ()
        eps: float | None = None
        eps_node: cst.CSTNode | None = None
        leaves = {n.rsplit(".", 1)[-1] for n in names}
        if names and all(n.startswith("torch.optim.") for n in names) and len(leaves) == 1:
            default, index = api.EPS_OPTIMIZERS.get(next(iter(leaves)), (None, 0))
            given = kwargs.get("eps") or (args[index] if index and len(args) > index else None)
            if given is not None:
                eps_node = given.node
                eps = given.fact.value if given.fact.kind is Kind.SCALAR else None
            else:
                eps = default
        fused_arg = kwargs.get("fused")
        fused = False if fused_arg is None else bool_value(fused_arg.node)
        text = f"`{self.code(node)}`"
        optimizer = Optimizer(node, text, names, params, eps, eps_node, fused)
        return Fact(Kind.OPTIMIZER, train=optimizer)

    def training_arguments(self, node: cst.Call, kwargs: dict[str, Operand]) -> Fact:
        """``TrainingArguments(fp16=True, ...)``: the GradScaler its Trainer steps through."""
        flag = kwargs.get("fp16")
        spread = any(arg.star == "**" for arg in node.args)  # (``**config`` may set fp16)
        fp16 = (None if spread else False) if flag is None else scaling_switch(flag.node)
        plugin = kwargs.get("deepspeed")
        deepspeed: bool | None = False
        if plugin is not None and not _is_none(plugin.node):
            literal = isinstance(plugin.node, (cst.SimpleString, cst.Dict))
            deepspeed = True if literal else None  # (a path that may be None at run time)
        sharding = kwargs.get("fsdp")  # (``None``, ``""`` and ``False`` shard nothing)
        fsdp = sharding is not None and not (
            _is_none(sharding.node)
            or string_value(sharding.node) == ""
            or bool_value(sharding.node) is False
        )
        text = f"`{self.code(node)}`"
        given = flag.node if flag is not None else None
        return Fact(Kind.OTHER, train=TrainingArguments(node, text, fp16, deepspeed, fsdp, given))

    def hf_trainer(
        self, node: cst.Call, args: tuple[Operand, ...], kwargs: dict[str, Operand], frame: Frame
    ) -> Fact:
        """``Trainer(model=model, args=training_args)``: ``train()`` steps an optimizer over
        the model's parameters as they are where the trainer is built (later in-place casts
        of the model reach them through :class:`Params`), or the optimizer handed to it
        (``optimizers=(opt, sched)``). A trainer handed a ``peft_config`` wraps the model in
        adapters peft keeps in float32: what it trains is unknown here."""
        given = kwargs.get("args") or (args[1] if len(args) > 1 else None)
        settings = given.fact.train if given is not None else None
        scaler = settings.scaler if isinstance(settings, TrainingArguments) else None
        model = kwargs.get("model") or (args[0] if args else None)
        optimizer: Optimizer | None = None
        handed = kwargs.get("optimizers")
        if handed is not None:
            first = handed.fact.items[0] if handed.fact.items else None
            if first is not None and isinstance(first.train, Optimizer):
                optimizer = first.train
        elif model is not None and model.fact.kind is Kind.MODULE and "peft_config" not in kwargs:
            path = dotted(model.node)
            params = self.parameters("parameters", model.fact, path, frame.scope.flags)
            if params is not None and params.elem is not None:
                text = f"of `{self.code(node)}`"
                optimizer = Optimizer(node, text, (), (params.elem,), None, None, None)
        return Fact(Kind.OTHER, train=Trainer(node, scaler, optimizer))

    def parameters(self, method: str, module: Fact, path: str | None, flags: Flags) -> Fact | None:
        """``model.parameters()``: tensors in the model's dtype, linked back to ``model`` as
        it is on the paths where ``flags`` hold."""
        if method not in ("parameters", "named_parameters"):
            return None
        link = Params(((path, module, flags),))
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
                if string_value(el.key) == "params":
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
        for path, module, flags in base.train.sources:
            state = with_trainable(state, linked_module(frame.env, path, module, flags), value)
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
        self.cast_modules(models, value, frame)

    def peft_model(
        self, node: cst.Call, model: Operand, kwargs: dict[str, Operand], frame: Frame
    ) -> Fact:
        """``get_peft_model(model, config)``: peft keeps half models' adapters in float32."""
        module = model.fact
        flag = kwargs.get("autocast_adapter_dtype")
        if module.kind is Kind.MODULE and module.prec is Prec.HALF:
            if flag is None or bool_value(flag.node) is True:
                text = f"adapter weights kept in float32 by `{self.code(node)}`"
                adapters = tensor_of_dtype("float32", node, Cause.UPCAST, text)
                self.cast_modules(module, adapters, frame)
                # (the model it returns carries them: trained in another method, or joined
                # with a plain model's path, each path keeps its own trainable parameters)
                return replace(module, train=Trainable(adapters))
        return module

    def kbit_prepared(self, node: cst.Call, model: Operand) -> Fact:
        """``prepare_model_for_kbit_training(model)``: the same model, every parameter
        frozen and the float16/bfloat16 ones not quantized cast to float32: nothing it holds
        brings float16 gradients to a scaler until adapters are added."""
        if model.fact.kind is not Kind.MODULE:
            return model.fact
        text = f"upcast to float32 and frozen by `{self.code(node)}`"
        origin = Origin(node, Cause.UPCAST, text)
        return replace(model.fact, prec=Prec.FULL, dtype="float32", origin=origin, maybe=False)

    def cast_modules(self, models: Fact, value: Fact, frame: Frame) -> None:
        modules = [models] if models.kind is Kind.MODULE else []
        if models.kind is Kind.SEQ:
            items = (
                models.items if models.items is not None else (models.elem,) if models.elem else ()
            )
            modules = [m for m in items if m is not None and m.kind is Kind.MODULE]
        state = self.state(frame)
        for module in modules:
            state = with_trainable(state, module, value)
        self.set_state(frame, state)

    def round_trip(self, path: str, module: Fact, cast: Fact, frame: Frame) -> None:
        """A script casts the module at ``path`` (``module`` before the cast) to ``cast``'s
        dtype in place. To half: remembered; back to float32 (or float64) after such a cast:
        the round trip rounded the master weights to the half grid, and a later step of an
        optimizer training that module goes on from them (``model.half()`` for evaluation,
        ``model.float()`` after it). Only between steps: a module no step has trained yet
        (a cast at setup, before the optimizer) holds no master weights to lose, and a model
        cast to half and trained so is no round trip."""
        state = self.state(frame)
        value = replace(cast, kind=Kind.TENSOR, train=None)
        if cast.prec is Prec.HALF and cast.origin is not None and module in state.stepped:
            halved = (*(h for h in state.halved if h[0] != path), (path, module, value))
            self.set_state(frame, replace(state, halved=halved))
        elif cast.prec is Prec.FULL and any(h[0] == path for h in state.halved):
            undo = f"; back by `{self.code(cast.origin.node)}`" if cast.origin else ""
            back = tuple(
                (m, replace(v, origin=replace(v.origin, text=v.origin.text + undo)))
                for p, m, v in state.halved
                if p == path and v.origin is not None
            )
            halved = tuple(h for h in state.halved if h[0] != path)
            recasts = unique(state.recasts + back)
            self.set_state(frame, replace(state, halved=halved, recasts=recasts))

    def enter_region(self, frame: Frame, region: Autocast, block: cst.With | None = None) -> None:
        if region.active:
            state = self.state(frame)
            if not any(r.node is region.node for r in state.regions):
                state = replace(state, regions=state.regions + (region,))
            if block is not None and not any(b is block for _, b in state.blocks):
                state = replace(state, blocks=state.blocks + ((region, block),))
            self.set_state(frame, state)

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
        if isinstance(info, ArgumentParser):
            if method not in api.HF_PARSE_METHODS or not any(info.arguments):
                return None
            parsed = [
                Fact(Kind.OTHER, train=TrainingArguments(info.node, info.text, None, None))
                if fills
                else UNKNOWN
                for fills in info.arguments
            ]
            return seq_of(parsed)  # (a tuple, one object per class, even of one class)
        if isinstance(info, Trainer):
            if method == "train" and info.scaler is not None and info.optimizer is not None:
                self.step(node, info.scaler, info.optimizer, frame, via="transformers")
            return UNKNOWN
        if isinstance(info, Scaled) and method == "backward":
            if info.scaler.enabled is False and info.scaler.via == "torch":
                # (``GradScaler(enabled=False)``: ``scale`` returns the loss as it is)
                self.plain_backward(node, receiver.node, recv, frame, disabled=info.scaler)
            self.backward(node, info.scaler, recv, frame)
            return UNKNOWN
        if method == "backward" and info is None and not args and recv.kind is not Kind.MODULE:
            self.plain_backward(node, receiver.node, recv, frame)
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
        """``accelerator.prepare(model, optimizer, ...)``: the same objects, marked prepared."""
        state = self.state(frame)
        region = acc.forward_region(self.analysis.target_torch)
        out = []
        for op in args:
            fact = op.fact
            if fact.kind is Kind.OPTIMIZER and isinstance(fact.train, Optimizer):
                optimizer = replace(fact.train, accelerator=acc)
                fact = replace(fact, train=optimizer)
                state = replace(state, prepared=unique(state.prepared + ((acc.node, optimizer),)))
            elif fact.kind is Kind.MODULE and fact.origin is not None and region is not None:
                models = ((fact.origin.node, region), *state.autocast_models)
                state = replace(state, autocast_models=models)
            out.append(fact)
        self.set_state(frame, state)
        return out[0] if len(out) == 1 else seq_of(out)

    def prepared(self, acc: Accelerator, frame: Frame) -> tuple[Optimizer, ...]:
        found = [o for n, o in self.state(frame).prepared if n is acc.node]
        return tuple({id(o.node): o for o in found}.values())

    # -- the loop's steps -------------------------------------------------------------------
    def use(
        self,
        optimizer: Optimizer,
        frame: Frame,
        unscaled: bool | None,
        scaler: Scaler | None = None,
    ) -> OptimizerUse:
        """The optimizer's parameters as a step of ``scaler`` sees them. Where the scaler was
        told to take float16 gradients under one flag, only the runs without that flag can
        raise: the modules are taken as they are there; and a module whose ``requires_grad_``
        follows a flag has gradients only where that flag holds."""
        state = self.state(frame)
        patch = state.patch_of(scaler)
        unpatched: Flags = tuple((f, not v) for f, v in patch) if patch else ()
        found: list[Fact] = []
        recast: list[Fact] = []
        trained: list[Fact] = []
        for param in optimizer.params:
            link = param.train
            if not isinstance(link, Params):
                found.append(param)
                continue
            for path, built, flags in link.sources:
                more = (*unpatched, *trained_flags(frame.env, path)) if path else ()
                module = linked_module(frame.env, path, built, (*flags, *more))
                trained += [module, built]
                found.append(state.trainable_of(module))
                recast += [cast for m, cast in state.recasts if m in (module, built)]
        params = tuple(dict.fromkeys(found))
        self.set_state(frame, replace(state, stepped=unique(state.stepped + tuple(trained))))
        return OptimizerUse(optimizer, params, unscaled, tuple(dict.fromkeys(recast)))

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
        if scaler is not None and self.state(frame).patch_of(scaler) == ():
            scaler = replace(scaler, allow_fp16=True)  # told to take float16 on every run
        site = TrainingSite(
            node, action, frame.scope, scaler, optimizers, scaled, unscaled, via, loss, regions
        )
        site = replace(site, backward=backward)
        clip = self.state(frame).clip_before(scaler) if action is Action.STEP and scaler else None
        if clip is None:
            return site
        return held(replace(site, clip=clip), self.analysis.classes)

    def backward(
        self, node: cst.Call, scaler: Scaler, loss: Fact, frame: Frame, via: str = "torch"
    ) -> None:
        state = self.state(frame)
        current = state.scaler_state(scaler)
        self.emit(self.site(node, Action.BACKWARD, frame, scaler, via=via, loss=loss))
        self.set_state(frame, state.with_scaler(replace(current, scaled=True, backward=node)))

    def plain_backward(
        self,
        node: cst.Call,
        receiver: cst.BaseExpression,
        loss: Fact,
        frame: Frame,
        disabled: Scaler | None = None,
    ) -> None:
        """``loss.backward()`` of a loss no scaler scaled (a positional argument would be a
        gradient, or another object's ``backward(loss)``: DeepSpeed's engine, fairseq's
        optimizer, which scale themselves), or ``scaler.scale(loss).backward()`` of a scaler
        made ``enabled=False`` (``disabled``), whose ``scale`` is the identity: a site with
        the enabled autocast regions its forward ran in, when it ran in any."""
        if not self.analysis.reporting.takes("training"):
            return
        state = self.state(frame)
        others = [
            s for s in state.scalers if disabled is None or s.scaler.node is not disabled.node
        ]
        if any(not s.absent for s in others):
            return  # a scaler exists on this path: its backward is another call
        scope = frame.scope.function or self.analysis.module
        inside = frame.scope.autocast
        made = loss_regions(receiver, scope, state.blocks, inside)
        if not made:
            return
        site = self.site(node, Action.PLAIN_BACKWARD, frame, disabled, loss=loss)
        scaling = disabled is None and self.scaling_in_file()
        self.emit(replace(site, regions=made, scaling_in_file=scaling))

    def scaling_in_file(self) -> bool:
        """Whether the file scales a loss anywhere: a GradScaler made, named or handed in
        (``scaler``, ``self.grad_scaler``), apex's ``amp.scale_loss`` or a loss-scale value
        of its own (``loss_scale``). Read once per file, and only for a plain backward."""
        if self._scaling is None:
            self._scaling = _names_scaling(self.analysis.module)
        return self._scaling

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
        uses = tuple(
            self.use(o, frame, current.maybe_unscaled_of(o.node), scaler) for o in optimizers
        )
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
            uses = tuple(
                self.use(o, frame, current.maybe_unscaled_of(o.node), scaler) for o in optimizers
            )
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
        if not pending:  # scaled elsewhere, if a scaler steps next (``State.clip_before``)
            absent = tuple(s.scaler.node for s in state.scalers if s.absent)
            self.set_state(frame, replace(state, clip=(node, absent)))
            self.emit(self.site(node, Action.CLIP, frame, None, via=via))
            return
        first = pending[0]
        self.emit(self.site(node, Action.CLIP, frame, first.scaler, current=first, via=via))

    def step(
        self, node: cst.Call, scaler: Scaler, optimizer: Optimizer, frame: Frame, via: str
    ) -> None:
        state = self.state(frame)
        current = state.scaler_state(scaler)
        use = self.use(optimizer, frame, current.maybe_unscaled_of(optimizer.node), scaler)
        site = self.site(
            node, Action.STEP, frame, scaler, optimizers=(use,), current=current, via=via
        )
        self.emit(site)
        state = self.state(frame)  # ``use`` noted the modules stepped
        self.set_state(frame, replace(state, clip=None).with_scaler(ScalerState(current.scaler)))

    def optimizer_step(self, node: cst.Call, optimizer: Optimizer, frame: Frame) -> None:
        if optimizer.accelerator is not None:  # AcceleratedOptimizer.step goes through the scaler
            self.step(node, optimizer.accelerator.scaler, optimizer, frame, via="accelerate")
            return
        use = self.use(optimizer, frame, None)
        self.emit(self.site(node, Action.STEP, frame, None, optimizers=(use,)))
        if (state := self.state(frame)).clip is not None:  # the clip was for this step
            self.set_state(frame, replace(state, clip=None))

    # -- helper functions -------------------------------------------------------------------
    def patch_scaler(
        self,
        positions: tuple[int, ...],
        params: Sequence[str],
        args: tuple[Operand, ...],
        kwargs: Mapping[str, Operand],
        frame: Frame,
    ) -> None:
        """A call of a function that tells the scaler (or the accelerator's) handed at
        ``positions`` to take float16 gradients (``mpcheck.engine.scaler_patch``): from here
        on, on the runs where the flags known at this call hold."""
        state = self.state(frame)
        for i in positions:
            op = args[i] if i < len(args) else kwargs.get(params[i]) if i < len(params) else None
            info = op.fact.train if op is not None else None
            if isinstance(info, (Accelerator, Scaler)):
                entry = (info.node, frame.scope.flags)
                state = replace(state, patched=unique((*state.patched, entry)))
        self.set_state(frame, state)

    def returned(
        self,
        node: cst.Call,
        name: str,
        value: Value,
        result: Fact,
        args: tuple[Operand, ...],
        kwargs: Mapping[str, Operand],
    ) -> Fact:
        """What a function of another file returns, as a training object: the accelerator
        it builds (its summary keeps the mixed precision), or an optimizer, which trains the
        model parameters the call hands it (``get_optimizer(args, trainable_params=params)``:
        nothing else reaches a helper's optimizer from here)."""
        kind = Kind(value.kind)
        if kind is Kind.SEQ and value.items is not None and result.items is not None:
            items = tuple(
                self.returned(node, name, v, f, args, kwargs)
                for v, f in zip(value.items, result.items, strict=False)
            )
            return replace(result, items=items) if items != result.items else result
        text = f"`{self.code(node)}` (made in `{name}`)"
        if kind is Kind.ACCELERATOR and value.mode is not None:
            mode, _, plugin = value.mode.partition("+")
            own = False if mode == "deepspeed" else None if plugin else True
            mp = None if mode in ("launch", "deepspeed") else mode
            return Fact(Kind.ACCELERATOR, train=Accelerator(node, text, mp, own))
        if kind is Kind.OPTIMIZER:
            params = tuple(
                dict.fromkeys(
                    p
                    for op in (*args, *kwargs.values())
                    for p in flatten(op.fact)
                    if isinstance(p.train, Params)
                )
            )
            if params:
                return Fact(Kind.OPTIMIZER, train=Optimizer(node, text, (), params))
        return result

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

        The function's own walk (its summary) sees its parameters as unknown inputs. When a
        call hands it a scaler, an optimizer, an accelerator or a model, its body is walked
        again with those facts and the caller's loop state, so the steps it takes are seen
        in order with the caller's; the loop state it leaves flows back. Only training sites
        are reported from that walk (its own walk reported the function's call sites)."""
        analysis = self.analysis
        if b"_unscale_grads_" in analysis.source:  # (the file's bytes: a cheap test first)
            positions = fp16_unscale_params(fn)
            if positions:
                names = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
                self.patch_scaler(positions, names, args, kwargs, frame)
        if fn.name.value in api.TRAINABLE_CAST_NAMES:  # a copy of diffusers' helper
            self.cast_trainable(node, args, kwargs, frame)
            return generic
        facts = [o.fact for o in args] + [o.fact for o in kwargs.values()]
        if (
            not any(worth(f, frame.scope.in_module) for f in facts)
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
        sub = analysis.function_frame(fn, None, outer)
        sub.env.update(passed(fn, args, kwargs, skip_self=False))
        sub.env.update(none_arguments(fn, args, kwargs))
        if STATE in frame.env:
            sub.env[STATE] = frame.env[STATE]
        self.budget -= 1
        self.depth += 1
        self.active.add(fn)
        try:
            with analysis.reporting.calls_reported_elsewhere():
                analysis.block(fn.body.body, sub)
        finally:
            self.depth -= 1
            self.active.discard(fn)
        if STATE in sub.env:
            frame.env[STATE] = sub.env[STATE]
        cast_by_callee(fn, args, kwargs, sub, frame)
        return pick(generic, settled(sub.returns) if sub.returns is not None else None)


def own_scaler(kwargs: Mapping[str, Operand]) -> bool | None:
    """Whether an ``Accelerator(...)`` runs its own GradScaler and autocast: not under
    DeepSpeed (``deepspeed_plugin=DeepSpeedPlugin(...)``); a plugin that may be None (a
    helper's result, ``prepare_deepspeed_plugin(args)``) leaves them to the runs without it."""
    plugin = kwargs.get("deepspeed_plugin")
    if plugin is None or _is_none(plugin.node):
        return True
    return False if plugin.fact.layer == api.DEEPSPEED_PLUGINS[0] else None


def _is_none(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _names_scaling(module: cst.Module) -> bool:
    """A name or attribute that says loss scaling: ``GradScaler``, ``scaler``, ``scale_loss``,
    ``loss_scale``, ``loss_scaler`` (any spelling that holds ``scaler`` or ``loss_scal``)."""
    for node in descendants(module):
        if isinstance(node, cst.Name):
            word = node.value.lower()
            if "scaler" in word or "loss_scal" in word or word == "scale_loss":
                return True
    return False
