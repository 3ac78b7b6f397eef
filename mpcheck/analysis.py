"""The dtype-provenance pass: one walk per function, in statement order.

Every expression gets a :class:`~mpcheck.facts.Fact`; names, ``self.<attr>``
paths and module objects are bound in an environment that is copied at
branches and joined after them. Rules are called back with :mod:`sites` as
the walk reaches calls, item assignments and classes, so they see the facts
that hold at that point. Functions defined in the file are summarised by the
fact of what they return, with ``params`` marking what is derived from which
argument, so a call site can substitute its own arguments.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import libcst as cst

from mpcheck import torch_api as T
from mpcheck.attention import AttentionRoles
from mpcheck.facts import (
    SCALAR,
    UNKNOWN,
    UNKNOWN_TENSOR,
    Cause,
    Fact,
    Kind,
    Origin,
    Prec,
    as_tensor_of,
    dtype_object,
    element,
    int_to_float,
    join,
    promote,
    seq_of,
    tensor_of_dtype,
)
from mpcheck.keep_fp32 import KeepFp32
from mpcheck.names import ImportTable, dotted
from mpcheck.sites import (
    Autocast,
    CallSite,
    ClassSite,
    Decorator,
    FunctionSite,
    InnerCall,
    Operand,
    Owner,
    ReturnSite,
    Scope,
    SetItemSite,
    items,
)
from mpcheck.training import STATE, State, Tracker, TrainingSite

Env = dict[str, Fact]

AUTOCAST_NAMES = {
    "torch.autocast": None,
    "torch.cuda.amp.autocast": "cuda",
    "torch.cpu.amp.autocast": "cpu",
    "torch.cuda.amp.autocast_mode.autocast": "cuda",
}
MODULE_CASTS = {"half": "float16", "float": "float32", "double": "float64", "bfloat16": "bfloat16"}
NON_MODULE_HINTS = ("Tokenizer", "Processor", "Scheduler", "FeatureExtractor", "Config", "Pipeline")
MODULE_BASE_SUFFIXES = (
    "Module",
    "Model",
    "ModelMixin",
    "Layer",
    "Block",
    "Attention",
    "Encoder",
    "Decoder",
    "Embedding",
    "Embeddings",
    "MLP",
)
FP32_LAYER = "<float32 output>"  # the layer of a library module that returns float32
NON_TENSOR_PARAMS = frozenset(
    "self cls args kwargs config cfg opt hparams accelerator device dtype".split()
)
FINFO_MIN = {"float32": -3.4028234663852886e38, "float64": -1.7976931348623157e308}
FINFO_MAX = {"float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}
FINFO_MIN.update({"float16": -65504.0, "bfloat16": -3.3895313892515355e38})
FINFO_MAX.update({"float16": 65504.0, "bfloat16": 3.3895313892515355e38})


class Listener(Protocol):
    """Receives the sites of one file; the engine fans them out to rules."""

    @property
    def wants_calls(self) -> bool: ...

    @property
    def wants_setitems(self) -> bool: ...

    @property
    def wants_classes(self) -> bool: ...

    def on_call(self, site: CallSite) -> None: ...

    def on_setitem(self, site: SetItemSite) -> None: ...

    def on_class(self, site: ClassSite) -> None: ...

    @property
    def wants_functions(self) -> bool: ...

    def on_function(self, site: FunctionSite) -> None: ...

    @property
    def wants_training(self) -> bool: ...

    def on_training(self, site: TrainingSite) -> None: ...

    @property
    def wants_returns(self) -> bool: ...

    def on_return(self, site: ReturnSite) -> None: ...


@dataclass
class ClassInfo:
    node: cst.ClassDef
    is_module: bool
    attrs: Env
    methods: dict[str, cst.FunctionDef]
    bases: tuple[str, ...]
    kept_fp32: bool = False  # instantiated under a name in ``_keep_in_fp32_modules``


@dataclass
class Frame:
    """Per-function walking state."""

    env: Env
    scope: Scope
    returns: Fact | None = None


class FileAnalysis:
    """Runs the pass over one module and reports sites to a listener."""

    def __init__(
        self,
        module: cst.Module,
        imports: ImportTable,
        listener: Listener,
        *,
        module_half_capable: bool = True,
        source: bytes = b"",
    ) -> None:
        self.module = module
        self.source = source
        self.helpers: frozenset[str] = frozenset()  # methods called as ``self.name(...)``
        self.imports = imports
        self.listener = listener
        self.half_capable = module_half_capable
        self.classes: dict[str, ClassInfo] = {}
        self.functions: dict[str, cst.FunctionDef] = {}
        self.summaries: dict[cst.FunctionDef, Fact] = {}
        self.in_progress: set[cst.FunctionDef] = set()
        self.muted = 0
        # While a called module is re-walked with its submodules' dtypes (``split_call``),
        # the call sites go here instead of to the listener.
        self.recorder: list[CallSite] | None = None
        self.splitting = 0  # depth of nested ``split_call`` walks
        self.keep = KeepFp32()
        self.file_uses_torch_modules = False
        self.attention = AttentionRoles(module)
        self.training = Tracker(self)  # the training loop: scalers, optimizers (mpcheck.training)
        self.script: Frame | None = None  # the module's top level, as walked so far

    # -- driver ------------------------------------------------------------------
    def run(self) -> None:
        called = _called_names(self.source)
        self.helpers = _self_called_names(self.source)
        self._collect(self.module.body)
        self.keep = KeepFp32.of({n: c.node for n, c in self.classes.items()})
        for name in self.keep.kept_classes:
            self.classes[name].kept_fp32 = True
        script = self.script = Frame({}, Scope(None, None, False, None))
        self.block(self.module.body, script)
        for cls in list(self.classes.values()):
            self.analyse_class(cls)
        functions = list(self.functions.values())
        for fn in sorted(functions, key=lambda f: f.name.value in called):
            self.summary(fn)

    def _collect(self, body: Sequence[cst.BaseStatement]) -> None:
        for stmt in body:
            if isinstance(stmt, cst.FunctionDef):
                self.functions[stmt.name.value] = stmt
            elif isinstance(stmt, cst.ClassDef):
                self.register_class(stmt)

    def register_class(self, node: cst.ClassDef) -> ClassInfo:
        bases = tuple(
            self.imports.resolve(b.value) or dotted(b.value) or ""
            for b in node.bases
            if not b.keyword
        )
        is_module = any(self._module_base(b) for b in bases)
        methods = {s.name.value: s for s in node.body.body if isinstance(s, cst.FunctionDef)}
        info = ClassInfo(node, is_module, {}, methods, bases)
        self.classes.setdefault(node.name.value, info)
        if is_module:
            self.file_uses_torch_modules = True
        return info

    def _module_base(self, base: str) -> bool:
        if base in T.MODULE_BASES or base.startswith("torch.nn."):
            return True
        local = self.classes.get(base)
        if local is not None:
            return local.is_module
        return base.rsplit(".", 1)[-1].endswith(MODULE_BASE_SUFFIXES)

    def analyse_class(self, info: ClassInfo) -> None:
        if getattr(info, "_done", False):
            return
        info._done = True  # type: ignore[attr-defined]
        # Also reached on demand (a submodule's layer, a split call): report it normally.
        saved, self.muted = self.muted, 0
        recorder, self.recorder = self.recorder, None
        try:
            if self.listener.wants_classes:
                self.listener.on_class(ClassSite(info.node, info.bases, info.is_module))
            for base in info.bases:  # attributes a local base class set up in its __init__
                parent = self.classes.get(base)
                if parent is not None and parent is not info:
                    self.analyse_class(parent)
                    for key, fact in parent.attrs.items():
                        info.attrs.setdefault(key, fact)
            init = info.methods.get("__init__")
            # Helpers called as ``self.helper(...)`` come last: most are walked from their
            # first call site first, with the arguments it passes (see ``summary``).
            ordered = ([init] if init else []) + sorted(
                (m for n, m in info.methods.items() if n != "__init__"),
                key=lambda m: m.name.value in self.helpers,
            )
            for method in ordered:
                self.summary(method, info)
        finally:
            self.muted, self.recorder = saved, recorder

    # -- functions -------------------------------------------------------------------
    def summary(
        self, fn: cst.FunctionDef, cls: ClassInfo | None = None, call: Call | None = None
    ) -> Fact:
        """The fact a function returns, analysing it (once) if needed.

        A helper first reached from a call is walked with the float32 arguments that call
        passes (``self._delta(name, factor_fp32)``): its parameters are not the model's
        activations then, and assuming they were would cry wolf on deliberate fp32 math.
        What it returns must hold for every caller, though, so that is taken from a second,
        quiet walk with plain parameters.
        """
        if fn in self.summaries:
            return self.summaries[fn]
        if fn in self.in_progress:
            return UNKNOWN
        self.in_progress.add(fn)
        saved, self.muted = self.muted, 0
        recorder, self.recorder = self.recorder, None
        try:
            body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else []
            frame = self._function_frame(fn, cls, None)
            seeded = call is not None and self._seed_params(fn, frame, call)
            self._function_site(fn, frame)
            self.block(body, frame)
            if cls is not None:
                for key, fact in frame.env.items():
                    if key.startswith("self.") and key.count(".") == 1:
                        old = cls.attrs.get(key)
                        cls.attrs[key] = (
                            fact if old is None or fn.name.value == "__init__" else join(old, fact)
                        )
            result = frame.returns or UNKNOWN
            if seeded:
                self.muted = 1
                plain = self._function_frame(fn, cls, None)
                self.block(body, plain)
                result = plain.returns or UNKNOWN
        finally:
            self.muted, self.recorder = saved, recorder
            self.in_progress.discard(fn)
        self.summaries[fn] = result
        return result

    def _function_site(self, fn: cst.FunctionDef, frame: Frame) -> None:
        if not self.listener.wants_functions or self.recorder is not None:
            return
        decorators = []
        for deco in fn.decorators:
            expr = deco.decorator
            call = expr if isinstance(expr, cst.Call) else None
            target = call.func if call is not None else expr
            qual = self.imports.resolve(target) or dotted(target)
            decorators.append(Decorator(deco, qual, call))
        self.listener.on_function(FunctionSite(fn, tuple(decorators), frame.scope))

    def _function_frame(
        self, fn: cst.FunctionDef, cls: ClassInfo | None, outer: Frame | None
    ) -> Frame:
        in_module = bool(cls and cls.is_module and not cls.kept_fp32 and self.half_capable)
        if outer is not None and cls is None:
            in_module = outer.scope.in_module
        autocast = outer.scope.autocast if outer else None
        for deco in fn.decorators:
            region = self.autocast_region(deco.decorator, outer)
            if region is not None:
                autocast = region
        env: Env = dict(outer.env) if outer else self._module_globals()
        if cls is not None:
            env.update(cls.attrs)
            env["self"] = Fact(Kind.MODULE, Prec.MODEL if in_module else Prec.UNKNOWN)
        scope = Scope(fn, cls.node.name.value if cls else None, in_module, autocast)
        tensor_params = in_module or (cls is None and self.half_capable and outer is None)
        params = list(fn.params.posonly_params) + list(fn.params.params)
        params += list(fn.params.kwonly_params)
        index = 0
        for param in params:
            name = param.name.value
            if cls is not None and index == 0 and name in ("self", "cls"):
                continue
            if fn.name.value == "__init__":
                env[name] = Fact(Kind.OTHER, params=frozenset({index}))
            else:
                env[name] = self._param_fact(param, index, tensor_params)
            index += 1
        return Frame(env, scope)

    def _seed_params(self, fn: cst.FunctionDef, frame: Frame, call: Call) -> bool:
        """Walk with what ``call`` passes when it passes float32; whether it did.

        Then every tensor parameter takes the call's fact, not only the float32 ones: a
        model-dtype default beside a real float32 argument would invent a mix.
        """
        arg_fact = _arguments(fn, *call)
        seeds: dict[str, Fact] = {}
        for i, param in enumerate(_params(fn, skip_self=call[2])):
            name = param.name.value
            default, actual = frame.env.get(name), arg_fact(i)
            if default is None or not default.is_tensor or actual is None:
                continue
            if not actual.is_tensor:
                actual = UNKNOWN_TENSOR  # a value we know nothing about
            seeds[name] = replace(actual, params=default.params)
        if not any(f.prec is Prec.FULL for f in seeds.values()):
            return False
        frame.env.update(seeds)
        return True

    def _module_globals(self) -> Env:
        """Modules bound at the top level (``criterion = nn.BCELoss()``): functions use them."""
        if self.script is None:
            return {}
        return {k: f for k, f in self.script.env.items() if f.kind is Kind.MODULE and "." not in k}

    def _param_fact(self, param: cst.Param, index: int, tensor_params: bool) -> Fact:
        name = param.name.value
        origin = Origin(param, Cause.ACTIVATION, f"`{name}`, an input of the function")
        marks = frozenset({index})
        ann = param.annotation.annotation if param.annotation else None
        ann_text = " ".join(_annotation_names(ann)) if ann is not None else ""
        default = param.default
        trainer = self.training.param_fact(param, name, ann_text)
        if trainer is not None:
            return replace(trainer, params=marks)
        if name.endswith("dtype"):
            return Fact(Kind.DTYPE, params=marks)
        if ann is None and (name in T.MODEL_PARAM_NAMES or name.endswith(T.MODEL_PARAM_SUFFIXES)):
            # a model handed to a training or inference helper: it runs in the model's dtype
            prec = Prec.MODEL if tensor_params else Prec.UNKNOWN
            return Fact(
                Kind.MODULE,
                prec,
                None,
                Origin(param, Cause.ACTIVATION, f"`{name}`, a model handed to the function"),
                marks,
            )
        if name in NON_TENSOR_PARAMS:
            return Fact(Kind.OTHER, params=marks)
        if ann is not None and "Tensor" not in ann_text and "tensor" not in ann_text:
            if ann_text in ("int", "float", "bool"):
                return replace(SCALAR, params=marks)
            return Fact(Kind.OTHER, params=marks)
        if isinstance(default, (cst.Integer, cst.Float, cst.SimpleString, cst.Tuple)) or (
            isinstance(default, cst.Name) and default.value in ("True", "False")
        ):
            return replace(SCALAR, params=marks)
        if name in T.INT_PARAM_NAMES or name.endswith("_ids"):
            return Fact(Kind.TENSOR, Prec.INT, "int64", origin, marks)
        if any(h in name for h in T.MASK_PARAM_HINTS):
            return Fact(Kind.TENSOR, Prec.UNKNOWN, None, origin, marks)
        names = set(ann_text.split())
        if names & {"LongTensor", "IntTensor", "BoolTensor"} and not names & T.FLOAT_TENSOR_TYPES:
            # ``lengths: torch.LongTensor``: an integer tensor, not an activation
            return Fact(Kind.TENSOR, Prec.INT, None, None, marks)
        prec = Prec.MODEL if tensor_params else Prec.UNKNOWN
        return Fact(Kind.TENSOR, prec, None, origin, marks)

    # -- statements ------------------------------------------------------------------
    def block(
        self, body: Sequence[cst.BaseStatement | cst.BaseSmallStatement], frame: Frame
    ) -> None:
        for stmt in body:
            if isinstance(stmt, cst.BaseSmallStatement):
                self.small(stmt, frame)
            else:
                self.statement(stmt, frame)

    def statement(self, stmt: cst.BaseStatement, frame: Frame) -> None:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                self.small(small, frame)
        elif isinstance(stmt, cst.If):
            self.expr(stmt.test, frame)
            # each branch knows which way the test went (``if scaler is not None:``)
            then = self.branch(stmt.body, frame, (stmt.test, True))
            other = (
                self.branch(stmt.orelse, frame, (stmt.test, False))
                if stmt.orelse
                else self.training.assume(stmt.test, False, Frame(frame.env, frame.scope))
            )
            self.merge(frame, then, other)
        elif isinstance(stmt, (cst.For, cst.While)):
            self.loop(stmt, frame)
        elif isinstance(stmt, cst.With):
            self.with_stmt(stmt, frame)
        elif isinstance(stmt, cst.Try):
            self.block(stmt.body.body, frame)
            branches = [self.branch(h.body, frame) for h in stmt.handlers]
            for b in branches:
                self.merge(frame, Frame(frame.env, frame.scope), b)
            if stmt.orelse:
                self.block(stmt.orelse.body.body, frame)
            if stmt.finalbody:
                self.block(stmt.finalbody.body.body, frame)
        elif isinstance(stmt, cst.FunctionDef):
            if frame.scope.function is not None:
                self.nested_function(stmt, frame)
            # a module-level def is summarised on its own, with its params as inputs
        elif isinstance(stmt, cst.ClassDef):
            info = self.classes.get(stmt.name.value)
            if info is None or info.node is not stmt:
                info = self.register_class(stmt)
            self.analyse_class(info)
        elif isinstance(stmt, cst.Match):
            for case in stmt.cases:
                self.merge(frame, Frame(frame.env, frame.scope), self.branch(case.body, frame))
        else:
            body = getattr(stmt, "body", None)
            if isinstance(body, cst.IndentedBlock):
                self.block(body.body, frame)

    def branch(
        self, node: cst.CSTNode, frame: Frame, guard: tuple[cst.BaseExpression, bool] | None = None
    ) -> Frame:
        """Walk ``node`` on a copy of ``frame``; ``guard``: the test and the way it went."""
        sub = Frame(dict(frame.env), frame.scope)
        if guard is not None:
            sub = self.training.assume(*guard, sub)
        if isinstance(node, cst.If):
            self.statement(node, sub)
        elif isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            for s in node.body:
                if isinstance(s, cst.BaseSmallStatement):
                    self.small(s, sub)
                else:
                    self.statement(s, sub)
        else:
            inner = getattr(node, "body", None)
            if isinstance(inner, cst.CSTNode):
                return self.branch(inner, frame, guard)
        return sub

    def merge(self, frame: Frame, a: Frame, b: Frame) -> None:
        env = dict(a.env)
        for key, fb in b.env.items():
            fa = env.get(key)
            if fa is not fb:
                env[key] = fb if fa is None else join(fa, fb)
        if (STATE in a.env) != (STATE in b.env):
            # The training loop's state begun on one path only: the other path is the empty
            # state (``if amp: scaler.scale(loss).backward()``: scaled on some paths).
            empty = Fact(Kind.OTHER, train=State())
            env[STATE] = join(a.env.get(STATE, empty), b.env.get(STATE, empty))
        frame.env = env
        for r in (a.returns, b.returns):
            if r is not None:
                frame.returns = r if frame.returns is None else join(frame.returns, r)

    def loop(self, stmt: cst.For | cst.While, frame: Frame) -> None:
        if isinstance(stmt, cst.For):
            items = self.expr(stmt.iter, frame)
            self.bind(stmt.target, self.iterate(items), frame)
        else:
            self.expr(stmt.test, frame)
        self.muted += 1
        first = self.branch(stmt.body, frame)
        self.muted -= 1
        self.merge(frame, Frame(frame.env, frame.scope), first)
        body = self.branch(stmt.body, frame)
        self.merge(frame, Frame(frame.env, frame.scope), body)
        if stmt.orelse:
            self.block(stmt.orelse.body.body, frame)

    def iterate(self, items: Fact) -> Fact:
        if items.kind is Kind.SEQ:
            return element(items)
        if items.kind in (Kind.TENSOR, Kind.MODULE):
            return replace(items, zero_dim=True) if _one_dim_factory(items) else items
        return UNKNOWN

    def with_stmt(self, stmt: cst.With, frame: Frame) -> None:
        region = None
        for item in stmt.items:
            found = self.autocast_region(item.item, frame)
            if found is not None:
                region = found
                self.expr(item.item, frame)  # the autocast call itself is a call site too
            else:
                value = self.expr(item.item, frame)
                if item.asname is not None:
                    self.bind(item.asname.name, value, frame)
        if region is None:
            self.block(stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else [], frame)
            return
        saved = frame.scope
        frame.scope = replace(saved, autocast=region)
        self.training.enter_region(frame, region)
        try:
            if isinstance(stmt.body, cst.IndentedBlock):
                self.block(stmt.body.body, frame)
        finally:
            frame.scope = saved

    def nested_function(self, fn: cst.FunctionDef, frame: Frame) -> None:
        sub = self._function_frame(fn, None, frame)
        if not self.muted:
            self._function_site(fn, sub)
        saved, self.muted = self.muted, 0
        try:
            if isinstance(fn.body, cst.IndentedBlock):
                self.block(fn.body.body, sub)
        finally:
            self.muted = saved
        self.summaries[fn] = sub.returns or UNKNOWN
        frame.env[fn.name.value] = Fact(Kind.OTHER)
        self.functions.setdefault(fn.name.value, fn)

    def small(self, stmt: cst.BaseSmallStatement, frame: Frame) -> None:
        if isinstance(stmt, cst.Assign):
            value = self.expr(stmt.value, frame)
            for target in stmt.targets:
                self.store(target.target, value, stmt.value, frame, stmt)
        elif isinstance(stmt, cst.AnnAssign):
            if stmt.value is not None:
                self.store(stmt.target, self.expr(stmt.value, frame), stmt.value, frame, stmt)
        elif isinstance(stmt, cst.AugAssign):
            value = self.expr(stmt.value, frame)
            if isinstance(stmt.target, cst.Subscript):
                self.store(stmt.target, value, stmt.value, frame, stmt)
                return
            current = self.expr(stmt.target, frame)
            if current.kind is Kind.TENSOR:  # in-place: the tensor keeps its dtype
                method = T.INPLACE_OPERATORS.get(type(stmt.operator).__name__)
                if method is not None:
                    tensor = Operand(stmt.target, current)
                    args = (Operand(stmt.value, value),)
                    self.emit(stmt, None, method, tensor, args, {}, None, "", current, frame)
                return
            self.bind(stmt.target, promote([current, value], stmt), frame)
        elif isinstance(stmt, cst.Expr):
            self.expr(stmt.value, frame)
        elif isinstance(stmt, cst.Return):
            fact = self.expr(stmt.value, frame) if stmt.value is not None else UNKNOWN
            frame.returns = fact if frame.returns is None else join(frame.returns, fact)
            if (
                stmt.value is not None
                and self.listener.wants_returns
                and not self.muted
                and self.recorder is None
            ):
                self.listener.on_return(ReturnSite(stmt, Operand(stmt.value, fact), frame.scope))
        elif isinstance(stmt, (cst.Assert, cst.Raise)):
            pass

    def store(
        self,
        target: cst.BaseAssignTargetExpression,
        value: Fact,
        value_node: cst.BaseExpression,
        frame: Frame,
        stmt: cst.CSTNode,
    ) -> None:
        if isinstance(target, cst.Subscript):
            base = self.expr(target.value, frame)
            advanced = self.advanced_index(target, frame)
            if self.listener.wants_setitems and not self.muted and self.recorder is None:
                index = target.slice[0].slice if len(target.slice) == 1 else None
                site = SetItemSite(
                    stmt,
                    Operand(target.value, base),
                    index,
                    Operand(value_node, value),
                    frame.scope,
                    advanced=advanced,
                )
                self.listener.on_setitem(site)
            return
        if isinstance(target, cst.Attribute) and target.attr.value == "data":
            self.training.store_data(target, value, frame)  # ``p.data = p.data.float()``
        self.bind(target, value, frame)

    def advanced_index(self, target: cst.Subscript, frame: Frame) -> Operand | None:
        """Evaluate ``target``'s indices; the first that makes it advanced indexing, if any."""
        found: Operand | None = None
        for el in target.slice:
            part = el.slice
            if isinstance(part, cst.Index):
                fact = self.expr(part.value, frame)
                if found is None and _is_advanced_index(part.value, fact):
                    found = Operand(part.value, fact)
            elif isinstance(part, cst.Slice):
                for bound in (part.lower, part.upper, part.step):
                    if bound is not None:
                        self.expr(bound, frame)
        return found

    def bind(self, target: cst.BaseExpression, value: Fact, frame: Frame) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            starred = any(isinstance(e, cst.StarredElement) for e in elements)
            for i, el in enumerate(elements):
                if isinstance(el, cst.StarredElement):
                    self.bind(el.value, Fact(Kind.SEQ, elem=element(value)), frame)
                else:
                    self.bind(el.value, element(value, None if starred else i), frame)
            return
        key = dotted(target)
        if key is None:
            return
        attr = key.rsplit(".", 1)[-1]
        if (
            value.kind in (Kind.MODULE, Kind.TENSOR)
            and key.startswith("self.")
            and (attr in self.keep.names or self.keep.param_kept(frame.scope.class_name, attr))
        ):
            text = "kept in float32 by `_keep_in_fp32_modules`"
            value = replace(
                value,
                prec=Prec.FULL,
                dtype="float32",
                origin=Origin(target, Cause.MODEL_CAST, text),
            )
        if (
            value.kind is Kind.MODULE
            and value.cause is Cause.LITERAL
            and frame.scope.in_module
            and key.startswith("self.")
        ):
            # ``self.stem = conv_bn(...)``, ``self.text_model = AutoModel.from_config(...)``:
            # built in the default dtype by a helper, but a part of this model all the same.
            value = replace(value, prec=Prec.MODEL, dtype=None, origin=None)
        old = frame.env.get(key)
        frame.env[key] = value
        if old is not None and old.kind is Kind.MODULE:  # children of a rebound module
            prefix = key + "."
            for k in [k for k in frame.env if k.startswith(prefix)]:
                del frame.env[k]

    # -- expressions -------------------------------------------------------------------
    def expr(self, node: cst.BaseExpression | None, frame: Frame) -> Fact:
        if node is None:
            return UNKNOWN
        try:
            handler = _EXPR[type(node)]
        except KeyError:
            return UNKNOWN
        return handler(self, node, frame)

    def name(self, node: cst.Name, frame: Frame) -> Fact:
        fact = frame.env.get(node.value)
        if fact is not None:
            return fact
        if node.value in ("True", "False"):
            return Fact(Kind.SCALAR, value=float(node.value == "True"))
        return self.global_name(node)

    def global_name(self, node: cst.BaseExpression) -> Fact:
        qual = self.imports.resolve(node)
        if qual is None:
            return UNKNOWN
        if qual.startswith("torch.") and qual.count(".") == 1:
            attr = qual[6:]
            if attr in T.DTYPE_NAMES:
                return dtype_object(attr, node)
        return self.training.global_value(qual) or Fact(Kind.OTHER)

    def attribute(self, node: cst.Attribute, frame: Frame) -> Fact:
        key = dotted(node)
        if key is not None and key in frame.env:
            return frame.env[key]
        if self.imports.resolve(node) is not None:
            return self.global_name(node)
        base = self.expr(node.value, frame)
        attr = node.attr.value
        if base.kind is Kind.TENSOR:
            if attr == "dtype":
                return replace(base, kind=Kind.DTYPE, items=None, elem=None)
            if attr in T.NON_TENSOR_ATTRS:
                return UNKNOWN
            return base
        if base.kind is Kind.MODULE:
            if dotted(node.value) == "self" and self.keep.param_kept(frame.scope.class_name, attr):
                return Fact(
                    Kind.TENSOR,
                    Prec.FULL,
                    "float32",
                    Origin(node, Cause.MODEL_CAST, "kept in float32 by `_keep_in_fp32_modules`"),
                )
            if attr in ("weight", "bias"):
                return Fact(Kind.TENSOR, base.prec, base.dtype, base.origin)
            if attr == "dtype":
                return Fact(Kind.DTYPE, base.prec, base.dtype, base.origin)
            if attr.endswith("dtype"):
                return Fact(Kind.DTYPE)
            if attr in ("config", "device", "training"):
                return UNKNOWN
            return replace(base, layer=self.member_layer(base.layer, attr))
        if base.kind is Kind.OTHER and attr in ("min", "max", "eps", "tiny") and base.layer:
            return self.finfo_value(base, attr)
        return UNKNOWN

    def member_layer(self, layer: str | None, attr: str) -> str | None:
        """The layer of ``model.<attr>`` when ``model``'s class is defined in this file.

        ``model = Net(); model.head`` is the ``nn.Linear`` that ``Net.__init__`` built as
        ``self.head``; it has the model's dtype until something casts it on its own.
        """
        info = self.classes.get(layer or "")
        if info is None or not info.is_module:
            return None
        self.analyse_class(info)
        fact = info.attrs.get("self." + attr)
        return fact.layer if fact is not None and fact.kind is Kind.MODULE else None

    def member_module(
        self, module: Fact, method: str, args: tuple[Operand, ...], kwargs: dict[str, Operand]
    ) -> Fact | None:
        """What ``model.<method>(...)`` returns when that method of ``model``'s local class
        returns one of its modules (``get_decoder``, ``fuse``): the module, in ``model``'s dtype.
        """
        info = self.classes.get(module.layer or "")
        fn = info.methods.get(method) if info is not None and info.is_module else None
        if info is None or fn is None or method == "forward" or fn in self.in_progress:
            return None
        self.analyse_class(info)
        made = self.substitute(self.summary(fn, info), fn, args, kwargs, skip_self=True)
        if made.kind is not Kind.MODULE:
            return None
        if made.prec is Prec.MODEL:
            return replace(made, prec=module.prec, dtype=module.dtype, origin=module.origin)
        return made

    def finfo_value(self, finfo: Fact, attr: str) -> Fact:
        table = FINFO_MIN if attr == "min" else FINFO_MAX if attr == "max" else {}
        value = table.get(finfo.dtype or "")
        origin = finfo.origin
        return Fact(Kind.SCALAR, value=value, origin=origin, dtype=finfo.dtype, prec=finfo.prec)

    def literal(self, node: cst.BaseExpression, frame: Frame) -> Fact:
        if isinstance(node, cst.Integer):
            return Fact(Kind.SCALAR, value=float(int(node.value.replace("_", ""), 0)))
        if isinstance(node, cst.Float):
            return Fact(Kind.SCALAR, value=float(node.value.replace("_", "")))
        return UNKNOWN

    def unary(self, node: cst.UnaryOperation, frame: Frame) -> Fact:
        inner = self.expr(node.expression, frame)
        if isinstance(node.operator, cst.Not):
            return UNKNOWN
        if inner.kind is Kind.SCALAR and inner.value is not None:
            if isinstance(node.operator, cst.Minus):
                return replace(inner, value=-inner.value)
            if isinstance(node.operator, cst.BitInvert):
                return replace(inner, value=None)
        return inner

    def binary(self, node: cst.BinaryOperation, frame: Frame) -> Fact:
        left = self.expr(node.left, frame)
        right = self.expr(node.right, frame)
        if isinstance(node.operator, cst.MatrixMultiply):
            args = (Operand(node.left, left), Operand(node.right, right))
            result = promote([left, right], node)
            if left.floating and right.floating:
                result = _op_result(left, right)
            region = frame.scope.autocast
            if region is not None and region.recasts("matmul"):
                result = self.autocast_result(node, "matmul", region, result)
            return self.emit(
                node, "torch.matmul", None, None, args, {}, T.OpKind.MATMUL, "matmul", result, frame
            )
        if left.kind is Kind.SCALAR and right.kind is Kind.SCALAR:
            return _fold(node.operator, left, right)
        if left.kind is Kind.SEQ and isinstance(node.operator, cst.Add):
            if right.kind is Kind.SEQ:  # ``list(a.parameters()) + list(b.parameters())``
                return Fact(Kind.SEQ, elem=join(element(left), element(right)))
            return Fact(Kind.SEQ, elem=element(left))
        result = promote([left, right], node)
        if isinstance(node.operator, cst.Divide) and result.is_tensor and result.prec is Prec.INT:
            result = int_to_float(result, node, "true division")
        arith = T.ARITHMETIC_OPERATORS.get(type(node.operator).__name__)
        if arith is not None and (left.is_tensor or right.is_tensor):
            # ``a + b`` is ``torch.add(a, b)``: rules see it as a call with both operands.
            args = (Operand(node.left, left), Operand(node.right, right))
            return self.emit(
                node, f"torch.{arith}", None, None, args, {}, None, arith, result, frame
            )
        return result

    def compare(self, node: cst.Comparison, frame: Frame) -> Fact:
        facts = [self.expr(node.left, frame)] + [
            self.expr(c.comparator, frame) for c in node.comparisons
        ]
        if any(f.kind is Kind.TENSOR for f in facts):
            return Fact(Kind.TENSOR, Prec.BOOL, "bool")
        return UNKNOWN

    def boolean(self, node: cst.BooleanOperation, frame: Frame) -> Fact:
        return join(self.expr(node.left, frame), self.expr(node.right, frame))

    def ifexp(self, node: cst.IfExp, frame: Frame) -> Fact:
        self.expr(node.test, frame)
        return join(self.expr(node.body, frame), self.expr(node.orelse, frame))

    def sequence(self, node: cst.Tuple | cst.List, frame: Frame) -> Fact:
        facts = []
        starred = False
        for el in node.elements:
            fact = self.expr(el.value, frame)
            if isinstance(el, cst.StarredElement):
                starred = True
                fact = element(fact)
            facts.append(fact)
        if starred:
            elem = facts[0] if facts else UNKNOWN
            for f in facts[1:]:
                elem = join(elem, f)
            return Fact(Kind.SEQ, elem=elem)
        return seq_of(facts)

    def subscript(self, node: cst.Subscript, frame: Frame) -> Fact:
        base = self.expr(node.value, frame)
        index: int | None = None
        scalar_index = False
        for el in node.slice:
            if isinstance(el.slice, cst.Index):
                fact = self.expr(el.slice.value, frame)
                scalar_index = fact.kind is Kind.SCALAR and len(node.slice) == 1
                if fact.kind is Kind.SCALAR and fact.value is not None and fact.value.is_integer():
                    index = int(fact.value)
        if base.kind is Kind.SEQ:
            if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice):
                return Fact(Kind.SEQ, elem=element(base))
            return element(base, index)
        if base.kind in (Kind.TENSOR, Kind.MODULE):
            if base.kind is Kind.MODULE:
                return base
            if scalar_index and _one_dim_factory(base):
                # ``torch.linspace(...)[i]``: an integer index of a 1-D tensor is 0-dim
                return replace(base, zero_dim=True)
            return replace(base, zero_dim=False)
        return UNKNOWN

    def comprehension(self, node: cst.BaseComp, frame: Frame) -> Fact:
        sub = Frame(dict(frame.env), frame.scope)
        for_in: cst.CompFor | None = node.for_in
        while for_in is not None:
            self.bind(for_in.target, self.iterate(self.expr(for_in.iter, sub)), sub)
            for cond in for_in.ifs:
                self.expr(cond.test, sub)
            for_in = for_in.inner_for_in
        if isinstance(node, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return Fact(Kind.SEQ, elem=self.expr(node.elt, sub))
        return UNKNOWN

    def dict_display(self, node: cst.Dict, frame: Frame) -> Fact:
        return self.training.dict_display(node, frame)  # an optimizer's param group, or unknown

    def named(self, node: cst.NamedExpr, frame: Frame) -> Fact:
        value = self.expr(node.value, frame)
        self.bind(node.target, value, frame)
        return value

    # -- calls --------------------------------------------------------------------------
    def call(self, node: cst.Call, frame: Frame) -> Fact:
        func = node.func
        qual = self.imports.resolve(func)
        args = tuple(
            Operand(a.value, self.expr(a.value, frame)) for a in node.args if not a.keyword
        )
        kwargs = {
            a.keyword.value: Operand(a.value, self.expr(a.value, frame))
            for a in node.args
            if a.keyword is not None
        }
        if any(a.star for a in node.args):
            args = tuple(
                a
                for a, raw in zip(args, [x for x in node.args if not x.keyword], strict=False)
                if not raw.star
            )
        library = qual if qual is not None else self.imports.relative.get(dotted(func) or "")
        if library is not None and not library.startswith("torch."):
            made = self.library_call(node, library, args, kwargs, frame)
            if made is not None:
                return made
        if qual is not None:
            return self.torch_call(node, qual, args, kwargs, frame)
        if isinstance(func, cst.Attribute):
            known = frame.env.get(dotted(func) or "")
            if known is not None and known.kind is Kind.MODULE:
                return self.module_call(node, known, dotted(func), args, kwargs, frame)
            path = dotted(func.value)
            receiver = self.expr(func.value, frame)
            return self.method_call(node, func.attr.value, receiver, path, args, kwargs, frame)
        callee = self.expr(func, frame)
        if callee.kind is Kind.MODULE:
            return self.module_call(node, callee, dotted(func), args, kwargs, frame)
        if callee.train is not None:  # ``optimizer_cls(params, lr=...)``
            made = self.training.call_value(node, callee, args, kwargs)
            if made is not None:
                return self.emit(node, None, None, None, args, kwargs, None, "", made, frame)
        if isinstance(func, cst.Name):
            return self.local_call(node, func.value, args, kwargs, frame)
        return UNKNOWN

    def library_call(
        self,
        node: cst.Call,
        name: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact | None:
        """Library code we know (diffusers' ``Timesteps`` returns float32), or None."""
        module = T.library_fp32(name, T.FP32_OUTPUT_MODULES)
        if module is not None:
            return Fact(
                Kind.MODULE, Prec.MODEL, layer=FP32_LAYER, origin=Origin(node, Cause.UPCAST, module)
            )
        layer = T.library_fp32(name, T.LIBRARY_LAYERS)
        if layer is not None:
            return self.construct_module(node, layer, frame, kwargs)
        function = T.library_fp32(name, T.FP32_OUTPUT_FUNCTIONS)
        if function is None:
            return None
        origin = Origin(node, Cause.UPCAST, f"returned in float32 by {function}")
        result = Fact(Kind.TENSOR, Prec.FULL, "float32", origin)
        return self.emit(node, name, None, None, args, kwargs, None, "", result, frame)

    def local_call(
        self,
        node: cst.Call,
        name: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact:
        cls = self.classes.get(name)
        if cls is not None:
            if cls.is_module:
                return self.construct_module(node, name, frame, kwargs)
            return UNKNOWN
        fn = self.functions.get(name)
        if fn is None:
            if self.training.named_call(node, name, frame):  # a relatively imported clip helper
                return UNKNOWN
            listed = self.training.builtin(name, args)  # list(...), filter(f, ...), next(...)
            if listed is not None:
                return listed
            if name == "float" and args and isinstance(args[0].node, cst.SimpleString):
                text = args[0].node.evaluated_value
                try:
                    return replace(SCALAR, value=float(text) if isinstance(text, str) else None)
                except ValueError:
                    return SCALAR
            return UNKNOWN
        summary = self.summary(fn, call=(args, kwargs, False))
        result = self.substitute(summary, fn, args, kwargs, skip_self=False)
        return self.training.after_call(node, fn, args, kwargs, frame, result)

    def substitute(
        self,
        result: Fact,
        fn: cst.FunctionDef,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        *,
        skip_self: bool,
    ) -> Fact:
        """Replace a summary's parameter-derived parts by the call's argument facts."""
        arg_fact = _arguments(fn, args, kwargs, skip_self)

        def sub(fact: Fact) -> Fact:
            if fact.kind is Kind.SEQ:
                items = tuple(sub(f) for f in fact.items) if fact.items is not None else None
                return replace(fact, items=items, elem=sub(fact.elem) if fact.elem else None)
            if not fact.params or fact.prec not in (Prec.MODEL, Prec.UNKNOWN):
                return replace(fact, params=frozenset())
            actual = [f for f in (arg_fact(i) for i in sorted(fact.params)) if f is not None]
            if not actual:
                return replace(fact, params=frozenset())
            if fact.kind is Kind.DTYPE:
                base = actual[0]
                return replace(base, kind=Kind.DTYPE) if base.kind is Kind.TENSOR else base
            return promote(actual) if fact.kind is Kind.TENSOR else actual[0]

        return sub(result)

    def construct_module(
        self, node: cst.Call, layer: str | None, frame: Frame, kwargs: dict[str, Operand]
    ) -> Fact:
        """A freshly built nn.Module: in a model's __init__ it follows the model's dtype.

        Unless it is built with a literal dtype (``nn.LayerNorm(d, dtype=torch.float32)``):
        a model made half at construction (``from_pretrained(torch_dtype=torch.float16)``
        sets the default dtype while ``__init__`` runs) keeps that part in its own dtype.
        """
        dtype = kwargs.get("dtype")
        if frame.scope.in_module:
            f = dtype.fact if dtype is not None else None
            if (
                dtype is None
                or f is None
                or f.kind is not Kind.DTYPE
                or f.prec not in (Prec.FULL, Prec.HALF)
                or f.maybe
                or f.params
                or f.origin is None
                or f.origin.node is not dtype.node
            ):
                return Fact(Kind.MODULE, Prec.MODEL, None, None, layer=layer)
        if dtype is not None and dtype.fact.kind is Kind.DTYPE:
            f = dtype.fact
            text = f"built with dtype={_code(self, dtype.node)}"
            origin = Origin(node, Cause.MODEL_CAST, text, _dtype_source(self, dtype))
            return Fact(Kind.MODULE, f.prec, f.dtype, origin, layer=layer, maybe=f.maybe)
        origin = Origin(node, Cause.LITERAL, "built in float32 (the default)")
        return Fact(Kind.MODULE, Prec.FULL, "float32", origin, layer=layer)

    def module_call(
        self,
        node: cst.Call,
        module: Fact,
        path: str | None,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
        *,
        split: tuple[tuple[InnerCall, ...], Fact | None] | None = None,
    ) -> Fact:
        layer = module.layer
        first = args[0].fact if args else UNKNOWN
        if layer in T.PASS_THROUGH_LAYERS:
            return first
        if layer == FP32_LAYER and module.origin is not None:
            made = module.origin.text  # ``self.time_proj(t)``: sinusoids computed in float32
            text = f"returned in float32 by `{path or 'module'}`, {made},"
            result = Fact(Kind.TENSOR, Prec.FULL, "float32", Origin(node, Cause.UPCAST, text))
            receiver = Operand(node.func, module)
            return self.emit(
                node, None, None, receiver, args, kwargs, None, "", result, frame, path
            )
        op, aten = T.LAYERS.get(layer or "", (None, ""))
        if layer in T.LOSS_LAYERS:  # no weights of its own: the loss follows its inputs
            aten = T.LOSS_LAYERS[layer]
            tensors = [a.fact for a in args if a.fact.is_tensor]
            result = promote(tensors, node) if tensors else UNKNOWN_TENSOR
            result = replace(result, zero_dim=True)  # reduction="mean" (the default): 0-dim
        elif module.prec is Prec.UNKNOWN:
            result = UNKNOWN_TENSOR if layer is None else replace(first, params=frozenset())
        elif layer in self.classes and "forward" in self.classes[layer].methods:
            result = self.class_forward(self.classes[layer], args, kwargs)
        elif layer is None and first.prec is Prec.FULL and module.prec is Prec.MODEL:
            result = UNKNOWN_TENSOR  # a custom module fed float32 may well compute in float32
        elif (
            op is T.OpKind.NORM
            and first.floating
            and (
                (module.prec is Prec.FULL and first.prec is not Prec.FULL)
                # autocast made it half, so the model (and this norm) is float32, or half too
                or (first.prec is Prec.HALF and first.cause is Cause.AUTOCAST)
            )
        ):
            # Measured: a float32 LayerNorm/GroupNorm/BatchNorm/RMSNorm returns a half
            # input's dtype.
            what = f"the output of `{path or 'module'}`"
            origin = Origin(node, Cause.ACTIVATION, what)
            if first.origin is not None and first.cause is Cause.AUTOCAST:
                text = f"{what} on an input {first.origin.text}"  # it keeps that dtype
                origin = Origin(node, Cause.AUTOCAST, text)
            result = Fact(
                Kind.TENSOR, first.prec, first.dtype, origin, first.params, maybe=first.maybe
            )
        else:
            what = f"the output of `{path or 'module'}`"
            origin = Origin(node, Cause.ACTIVATION, what)
            result = Fact(Kind.TENSOR, module.prec, module.dtype, origin, maybe=module.maybe)
        if split is None:
            split = self.split_call(module, path, "forward", args, kwargs, frame)
        inner, returned = split
        through: tuple[InnerCall, ...] = ()
        if not inner and returned is None:
            through, returned = self.follow_float32(module, args, kwargs, frame)
        if returned is not None and returned.floating:
            result = returned
        if (
            frame.scope.autocast
            and frame.scope.autocast.active
            and frame.scope.autocast.recasts(aten)
        ):
            result = self.autocast_result(node, aten, frame.scope.autocast, result)
        elif frame.scope.autocast and frame.scope.autocast.active and not aten and result.is_tensor:
            # A model or block whose ops we do not see: under autocast it computes in the
            # autocast dtype (its matmuls/convs are recast), whatever its weights are.
            what = f"the output of `{path or 'module'}` under autocast"
            result = Fact(Kind.TENSOR, Prec.MODEL, None, Origin(node, Cause.AUTOCAST, what))
        receiver = Operand(node.func, module)
        owner = _owner(path, frame.env)
        return self.emit(
            node,
            None,
            None,
            receiver,
            args,
            kwargs,
            op,
            aten,
            result,
            frame,
            path,
            owner=owner,
            inner=inner,
            through=through,
        )

    def follow_float32(
        self,
        module: Fact,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> tuple[tuple[InnerCall, ...], Fact | None]:
        """``self.output(context.float(), x)``: where the float32 arguments go inside.

        A module's ``forward`` is summarised once, with its inputs in the model's dtype, so an
        upcast argument that meets a half layer inside would go unseen. When the class is in
        this file, its ``forward`` is walked again with the call's facts and once with plain
        inputs; the calls that differ are returned, with what it returns for these inputs.
        """
        if not any(
            o.fact.is_tensor and o.fact.prec is Prec.FULL for o in (*args, *kwargs.values())
        ):
            return (), None
        info = self.classes.get(module.layer or "")
        fn = info.methods.get("forward") if info is not None and info.is_module else None
        if (
            info is None
            or fn is None
            or fn in self.in_progress
            or self.splitting >= 6
            or self.recorder is not None
            or not self.listener.wants_calls
        ):
            return (), None
        self.analyse_class(info)
        with_args, returned = self._walk_as(fn, info, module, {}, args, kwargs, frame)
        plain, _ = self._walk_as(fn, info, module, {}, (), {}, frame)
        return _changed(with_args, plain), returned

    def split_call(
        self,
        module: Fact,
        path: str | None,
        method: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> tuple[tuple[InnerCall, ...], Fact | None]:
        """Calling ``path``'s ``method`` after parts of it were cast apart from it.

        ``model.half(); model.head.float(); model(x)``: when ``model``'s class is in this
        file, its method is walked again with the caller's facts -- ``self`` and its parts
        in ``model``'s dtype, ``self.head`` as ``model.head`` is bound here, the call's
        arguments -- and once more with no part cast apart. The calls whose facts differ
        between the two walks are what the split changed. Returns them and what the
        method returns with the split (None when there is no split to follow).
        """
        info = self.classes.get(module.layer or "")
        fn = info.methods.get(method) if info is not None and info.is_module else None
        if (
            info is None
            or fn is None
            or path is None
            or module.prec not in (Prec.FULL, Prec.HALF, Prec.MODEL)
            or fn in self.in_progress
            or self.splitting >= 6
            or not (self.listener.wants_calls or self.recorder is not None)
        ):
            return (), None
        prefix = path + "."
        parts = {
            "self." + key[len(prefix) :]: fact
            for key, fact in frame.env.items()
            if key.startswith(prefix) and fact.kind is Kind.MODULE
        }
        self.analyse_class(info)
        if self.recorder is not None:
            # Already re-walking a split module: walk this part of it in line.
            sites, returned = self._walk_as(fn, info, module, parts, args, kwargs, frame)
            self.recorder.extend(sites)
            return (), returned
        full = module.prec is Prec.FULL
        if not any(
            f.prec in (Prec.FULL, Prec.HALF, Prec.MODEL) and (f.prec is Prec.FULL) != full
            for f in parts.values()
        ):
            return (), None
        split_sites, returned = self._walk_as(fn, info, module, parts, args, kwargs, frame)
        plain_sites, _ = self._walk_as(fn, info, module, {}, args, kwargs, frame)
        return _changed(split_sites, plain_sites), returned

    def _walk_as(
        self,
        fn: cst.FunctionDef,
        info: ClassInfo,
        module: Fact,
        parts: Env,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        outer: Frame,
    ) -> tuple[list[CallSite], Fact | None]:
        """Walk ``fn`` as a method of ``module`` called with ``args``; record its calls."""
        frame = self._function_frame(fn, info, None)
        for key, fact in list(frame.env.items()):
            if (key == "self" or key.startswith("self.")) and fact.prec is Prec.MODEL:
                if fact.kind is Kind.MODULE:
                    frame.env[key] = replace(module, layer=fact.layer)
                elif fact.kind is Kind.TENSOR:
                    frame.env[key] = replace(
                        fact, prec=module.prec, dtype=module.dtype, maybe=module.maybe
                    )
        frame.env["self"] = module
        frame.env.update(parts)
        params = list(fn.params.posonly_params) + list(fn.params.params)
        params = params[1:] + list(fn.params.kwonly_params)
        for i, param in enumerate(params):
            name = param.name.value
            if name in kwargs:
                frame.env[name] = kwargs[name].fact
            elif i < len(args) and i < len(params) - len(fn.params.kwonly_params):
                frame.env[name] = args[i].fact
        if frame.scope.autocast is None and outer.scope.autocast is not None:
            frame.scope = replace(frame.scope, autocast=outer.scope.autocast)
        recorded: list[CallSite] = []
        saved = self.recorder, self.muted
        self.recorder, self.muted = recorded, 0
        self.splitting += 1
        self.in_progress.add(fn)
        try:
            self.block(fn.body.body if isinstance(fn.body, cst.IndentedBlock) else [], frame)
        finally:
            self.recorder, self.muted = saved
            self.splitting -= 1
            self.in_progress.discard(fn)
        return recorded, frame.returns

    def class_forward(
        self, info: ClassInfo, args: tuple[Operand, ...], kwargs: dict[str, Operand]
    ) -> Fact:
        """Calling an instance of a class defined in this file: its ``forward``'s summary."""
        fn = info.methods["forward"]
        result = self.substitute(self.summary(fn, info), fn, args, kwargs, skip_self=True)
        return result if result.kind in (Kind.TENSOR, Kind.SEQ) else UNKNOWN_TENSOR

    def method_call(
        self,
        node: cst.Call,
        method: str,
        recv: Fact,
        path: str | None,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact:
        receiver = Operand(node.func.value, recv)  # type: ignore[attr-defined]
        if recv.kind is Kind.MODULE:
            return self.module_method(node, method, recv, path, args, kwargs, frame)
        trained = self.training.method(node, method, receiver, args, kwargs, frame)
        if trained is not None:  # scaler.step(opt), accelerator.backward(loss), ...
            return self.emit(node, None, method, receiver, args, kwargs, None, "", trained, frame)
        if method in ("from_pretrained", "from_single_file", "from_config"):
            return self.loaded_model(node, path or "", kwargs)
        if isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name):
            cls = self.classes.get(node.func.value.value)
            if cls is not None and method in cls.methods:
                return self.substitute(
                    self.summary(cls.methods[method], cls),
                    cls.methods[method],
                    args,
                    kwargs,
                    skip_self=False,
                )
        result = self.tensor_method(node, method, recv, args, kwargs, frame)
        if result.is_tensor and _full_reduction(method, args, kwargs):
            result = replace(result, zero_dim=True)  # ``loss.mean()``: does not promote
        op = T.OpKind.MATMUL if method in T.MATMUL_METHODS else None
        aten = method if op else ""
        region = frame.scope.autocast
        if op is not None and region is not None and region.recasts(aten):
            result = self.autocast_result(node, aten, region, result)
        return self.emit(node, None, method, receiver, args, kwargs, op, aten, result, frame)

    def loaded_model(self, node: cst.Call, path: str, kwargs: dict[str, Operand]) -> Fact:
        if any(h in path for h in NON_MODULE_HINTS):
            return UNKNOWN
        dtype = kwargs.get("torch_dtype") or kwargs.get("dtype")
        if dtype is not None and dtype.fact.kind is Kind.DTYPE:
            f = dtype.fact
            text = f"loaded with {_code(self, dtype.node)}"
            origin = Origin(node, Cause.MODEL_CAST, text, _dtype_source(self, dtype))
            return Fact(Kind.MODULE, f.prec, f.dtype, origin, maybe=f.maybe)
        origin = Origin(node, Cause.LITERAL, "loaded in float32 (the default)")
        return Fact(Kind.MODULE, Prec.FULL, "float32", origin)

    def module_method(
        self,
        node: cst.Call,
        method: str,
        module: Fact,
        path: str | None,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact:
        """``model.half()``, ``model.to(dtype)``, ``self.helper(x)``, ``vae.encode(x)``."""
        cast = self.module_cast(node, method, args, kwargs)
        if cast is not None:
            new = replace(
                module, prec=cast.prec, dtype=cast.dtype, origin=cast.origin, maybe=cast.maybe
            )
            if path is not None:
                self._rebind(path, new, frame)
            return new
        if method in ("register_buffer", "register_parameter") and path is not None:
            self.register_tensor(node, method, path, args, kwargs, frame)
            return UNKNOWN
        params = self.training.parameters(method, module, path)
        if params is not None:  # linked back to the module, for the optimizers built from them
            return params
        if method in ("parameters", "named_parameters", "buffers", "modules", "children"):
            return Fact(Kind.SEQ, elem=Fact(Kind.TENSOR, module.prec, module.dtype, module.origin))
        if method in ("eval", "train", "requires_grad_", "cuda", "cpu", "apply", "zero_grad", "to"):
            return module  # ``.to(device)``: a dtype cast was handled above
        if isinstance(node.func, cst.Attribute) and dotted(node.func.value) == "self":
            info = self._class_of_frame(frame)
            if info is not None and method in info.methods:
                fn = info.methods[method]
                if self.recorder is not None and fn not in self.in_progress and self.splitting < 6:
                    # Re-walking a module cast apart (``split_call``): follow it into its helpers.
                    parts = {k: v for k, v in frame.env.items() if k.startswith("self.")}
                    me = frame.env.get("self", module)
                    sites, returned = self._walk_as(fn, info, me, parts, args, kwargs, frame)
                    self.recorder.extend(sites)
                    return returned or UNKNOWN
                summary = self.summary(fn, info, (args, kwargs, True))
                return self.substitute(summary, fn, args, kwargs, skip_self=True)
        part = self.member_module(module, method, args, kwargs)
        if part is not None:  # ``self.model.get_decoder()``: a submodule, not an output
            return part
        sub = self.member_layer(module.layer, method)
        if sub is not None and path is not None:  # ``model.head(x)``: a submodule, not a method
            return self.module_call(
                node, replace(module, layer=sub), f"{path}.{method}", args, kwargs, frame
            )
        if any(o.fact.kind is Kind.DTYPE for o in (*args, *kwargs.values())):
            # ``self._cast_input_dtype(x, torch.float32)``: a helper we cannot see, handed a
            # dtype, may well cast to it
            return UNKNOWN_TENSOR
        if (
            method in ("forward", "__call__", "encode", "decode", "sample")
            or module.prec is not Prec.UNKNOWN
        ):
            split = self.split_call(module, path, method, args, kwargs, frame)
            return self.module_call(
                node,
                replace(module, layer=None),
                f"{path}.{method}" if path else method,
                args,
                kwargs,
                frame,
                split=split,
            )
        return UNKNOWN

    def register_tensor(
        self,
        node: cst.Call,
        method: str,
        path: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> None:
        """``self.register_buffer("name", t)``: bind ``self.name``, a tensor cast with the model.

        ``model.half()``/``.to(dtype)`` casts every floating buffer (persistent or not),
        so a float buffer has the model's dtype whatever it was built with; an integer
        or bool buffer keeps its dtype.
        """
        name = args[0] if args else kwargs.get("name")
        if name is None or not isinstance(name.node, cst.SimpleString):
            return
        attr = name.node.evaluated_value
        if not isinstance(attr, str) or not attr.isidentifier():
            return
        tensor = args[1] if len(args) > 1 else kwargs.get("tensor", kwargs.get("param"))
        if tensor is None or not tensor.fact.is_tensor:
            return  # ``None`` or unknown: leave ``self.name`` as it was
        value = tensor.fact
        if value.floating and frame.scope.in_module:
            kind = "buffer" if method == "register_buffer" else "parameter"
            origin = Origin(node, Cause.PARAMETER, f"a {kind} of the model")
            value = Fact(Kind.TENSOR, Prec.MODEL, None, origin)
        frame.env[f"{path}.{attr}"] = value

    def _rebind(self, path: str, new: Fact, frame: Frame) -> None:
        frame.env[path] = new
        prefix = path + "."
        for k in [k for k in frame.env if k.startswith(prefix)]:
            del frame.env[k]

    def _class_of_frame(self, frame: Frame) -> ClassInfo | None:
        name = frame.scope.class_name
        return self.classes.get(name) if name else None

    def module_cast(
        self, node: cst.Call, method: str, args: tuple[Operand, ...], kwargs: dict[str, Operand]
    ) -> Fact | None:
        if method in MODULE_CASTS:
            dt = MODULE_CASTS[method]
            cause = Cause.MODEL_CAST
            return tensor_of_dtype(dt, node, cause, f"cast to {dt} by `.{method}()`")
        if method in ("to", "type"):
            cand = [kwargs["dtype"]] if "dtype" in kwargs else list(args)
            for op in cand:
                if op.fact.kind is Kind.DTYPE and op.fact.prec is not Prec.UNKNOWN:
                    text = f"cast by `.{method}({_code(self, op.node)})`"
                    f = op.fact
                    origin = Origin(node, Cause.MODEL_CAST, text, _dtype_source(self, op))
                    return Fact(Kind.MODULE, f.prec, f.dtype, origin, maybe=f.maybe)
        return None

    def tensor_method(
        self,
        node: cst.Call,
        method: str,
        recv: Fact,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact:
        if recv.kind is not Kind.TENSOR:
            return UNKNOWN
        if method in T.CAST_METHODS:
            dt = T.CAST_METHODS[method]
            cause = Cause.UPCAST if dt in ("float32", "float64") else Cause.CAST
            verb = "upcast" if cause is Cause.UPCAST else "cast"
            if recv.prec in (Prec.INT, Prec.BOOL):  # ``t.float()`` on integer timesteps
                verb = "converted"
            return tensor_of_dtype(dt, node, cause, f"{verb} to {dt} by `.{method}()`")
        if method in ("to", "type"):
            return self.to_call(node, method, recv, args, kwargs)
        if method == "type_as" and args:
            return self.same_as(args[0].fact, node, f"`.type_as({_code(self, args[0].node)})`")
        if method in T.NEW_METHODS:
            if "dtype" in kwargs:
                return as_tensor_of(kwargs["dtype"].fact, node, Cause.CAST, "explicit dtype=")
            return replace(recv, zero_dim=False)
        if method in ("softmax", "log_softmax") and "dtype" in kwargs:
            return self.dtype_arg(kwargs["dtype"], node, recv)
        if method in T.SPLIT_METHODS:
            return Fact(Kind.SEQ, elem=replace(recv, zero_dim=False))
        if (
            method in T.VALUES_INDICES_METHODS
            and (args or "dim" in kwargs)
            and method not in ("max", "min")
            or (
                method in ("max", "min")
                and (("dim" in kwargs) or (args and args[0].fact.kind is Kind.SCALAR))
            )
        ):
            return seq_of([recv, Fact(Kind.TENSOR, Prec.INT, "int64")])
        if method in T.INT_METHODS:
            return Fact(Kind.TENSOR, Prec.INT, "int64")
        if method in T.BOOL_METHODS:
            return Fact(Kind.TENSOR, Prec.BOOL, "bool")
        if method in T.NON_TENSOR_METHODS:
            return UNKNOWN
        if method in ("sum", "cumsum", "prod") and recv.prec in (Prec.INT, Prec.BOOL):
            return Fact(Kind.TENSOR, Prec.INT, "int64")
        if method in T.FLOAT_VALUED and recv.prec is Prec.INT:
            return int_to_float(recv, node, f"`.{method}()`")
        if method in T.PROMOTING_METHODS:
            return promote([recv] + [a.fact for a in args if a.fact.kind is not Kind.SEQ], node)
        if method in T.MATMUL_METHODS:
            facts = [recv] + [a.fact for a in args]
            return _op_result(*facts)
        return recv

    def to_call(
        self,
        node: cst.Call,
        method: str,
        recv: Fact,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
    ) -> Fact:
        """``x.to(...)`` / ``x.type(...)``: dtype, other tensor, or only a device."""
        cand = [kwargs["dtype"]] if "dtype" in kwargs else list(args)
        for op in cand:
            f = op.fact
            if f.kind is Kind.DTYPE:
                return self.dtype_arg(op, node, recv, verb=f".{method}")
            if f.kind is Kind.TENSOR and method == "to":
                return self.same_as(f, node, f"`.to({_code(self, op.node)})`")
            if isinstance(op.node, cst.SimpleString):
                legacy = op.node.evaluated_value
                if isinstance(legacy, str) and legacy.endswith("Tensor"):
                    return self.legacy_type(legacy, node)
            if method == "type" and f.kind is Kind.OTHER:
                name = dotted(op.node) or ""
                if name.endswith("Tensor"):
                    return self.legacy_type(name, node)
            if _names_a_dtype(op.node):
                return UNKNOWN_TENSOR  # a dtype we cannot see: assume nothing
        if method == "type" and not cand:
            return UNKNOWN
        return recv

    def legacy_type(self, name: str, node: cst.Call) -> Fact:
        short = name.rsplit(".", 1)[-1]
        table = {
            "HalfTensor": "float16",
            "BFloat16Tensor": "bfloat16",
            "FloatTensor": "float32",
            "DoubleTensor": "float64",
            "LongTensor": "int64",
            "IntTensor": "int32",
            "BoolTensor": "bool",
        }
        dt = table.get(short)
        if dt is None:
            return UNKNOWN_TENSOR
        cause = Cause.UPCAST if dt in ("float32", "float64") else Cause.CAST
        return tensor_of_dtype(dt, node, cause, f"cast to {dt} by `.type({name})`")

    def dtype_arg(self, op: Operand, node: cst.CSTNode, recv: Fact, verb: str = "dtype=") -> Fact:
        f = op.fact
        code = _code(self, op.node)
        if f.prec is Prec.FULL:
            return tensor_of_dtype(
                f.dtype or "float32",
                node,
                Cause.UPCAST,
                f"upcast to {f.dtype} by `{verb}({code})`"
                if verb != "dtype="
                else f"made {f.dtype} by `dtype={code}`",
            )
        if f.prec is Prec.HALF and not f.maybe:
            return tensor_of_dtype(
                f.dtype or "float16", node, Cause.CAST, f"cast to {f.dtype} by `{code}`"
            )
        if f.prec is Prec.UNKNOWN and not f.params:
            return UNKNOWN_TENSOR
        return self.same_as(replace(f, kind=Kind.TENSOR), node, f"`{code}`")

    def same_as(self, other: Fact, node: cst.CSTNode, how: str) -> Fact:
        """A value cast to another's dtype: it now shares that fact, not its own past."""
        if other.kind not in (Kind.TENSOR, Kind.DTYPE):
            return UNKNOWN_TENSOR
        if other.prec is Prec.UNKNOWN and not other.params:
            return UNKNOWN_TENSOR
        origin = other.origin
        if other.prec is Prec.MODEL:
            origin = Origin(node, Cause.SAME_AS, f"cast back by {how}")
        return Fact(Kind.TENSOR, other.prec, other.dtype, origin, other.params, maybe=other.maybe)

    def torch_call(
        self,
        node: cst.Call,
        qual: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact:
        leaf = qual.rsplit(".", 1)[-1]
        op = T.OPS.get(qual)
        aten = T.op_name(qual) if op else leaf
        result = self.torch_result(node, qual, leaf, args, kwargs, frame)
        if op is T.OpKind.MATMUL and "out_dtype" in kwargs:
            # ``torch.addmm(bias.float(), a, b, out_dtype=torch.float32)``: mixed by design
            op = None
            result = self.dtype_arg(kwargs["out_dtype"], node, result, "out_dtype=")
        spec = args[0].node if qual == "torch.einsum" and args else None
        if isinstance(spec, cst.SimpleString) and isinstance(spec.evaluated_value, str):
            if not T.einsum_contracts(spec.evaluated_value):
                op = None  # a broadcast product promotes, like ``*``
                tensors = [f for a in args[1:] for f in (a.fact, *(o.fact for o in items(a)))]
                result = promote([f for f in tensors if f.is_tensor], node)
        if result.is_tensor and (
            (qual in T.SHAPE_FACTORIES and _empty_shape(args))
            or (qual == f"torch.{leaf}" and _full_reduction(leaf, args[1:], kwargs))
            or (qual in T.LOSS_FUNCTIONS and _reduces(kwargs))
        ):
            result = replace(result, zero_dim=True)  # ``torch.full((), 1e4)``, ``torch.sum(x)``
        trained = self.training.torch_call(node, qual, args, kwargs, frame)
        if trained is not None:  # GradScaler(...), torch.optim.AdamW(...), clip_grad_norm_(...)
            result = trained
        if op is not None and frame.scope.autocast and frame.scope.autocast.recasts(aten):
            result = self.autocast_result(node, aten, frame.scope.autocast, result)
        return self.emit(node, qual, None, None, args, kwargs, op, aten, result, frame)

    def torch_result(
        self,
        node: cst.Call,
        qual: str,
        leaf: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact:

        def code() -> str:
            return _code(self, node.func)

        if qual.startswith("torch.nn.") and qual.count(".") == 2:
            name = qual.rsplit(".", 1)[-1]
            if name[:1].isupper():
                if name in T.CONTAINER_LAYERS and args:
                    first = args[0].fact
                    layer = first.layer if first.kind is Kind.MODULE else None
                    return replace(self.construct_module(node, layer, frame, kwargs), layer=layer)
                if name in ("Parameter", "Buffer", "ParameterList", "ParameterDict"):
                    inner = args[0].fact if args else UNKNOWN_TENSOR
                    if frame.scope.in_module:
                        inner = Fact(
                            Kind.TENSOR,
                            Prec.MODEL,
                            None,
                            Origin(node, Cause.PARAMETER, "a parameter of the model"),
                        )
                    elif name.startswith("Parameter") and inner.kind is not Kind.TENSOR:
                        inner = element(inner) if inner.kind is Kind.SEQ else UNKNOWN_TENSOR
                    if name.startswith("Parameter") and name != "Parameter":
                        return Fact(Kind.SEQ, elem=inner)  # ``self.lora_A[name]``: a parameter
                    return inner
                if _parameter_free_norm(name, kwargs):
                    name = "ParameterFreeNorm"
                return self.construct_module(node, name, frame, kwargs)
        if "dtype" in kwargs and (
            leaf
            in (
                "ones",
                "zeros",
                "empty",
                "full",
                "rand",
                "randn",
                "arange",
                "linspace",
                "logspace",
                "eye",
                "tensor",
                "as_tensor",
            )
            or leaf.endswith("_like")
        ):
            return self.dtype_arg(kwargs["dtype"], node, UNKNOWN_TENSOR)
        if qual in T.FACTORIES and any(a.star == "**" for a in node.args):
            return UNKNOWN_TENSOR  # ``**factory_kwargs`` may carry the dtype
        if qual in T.FLOAT_FACTORIES:
            return Fact(
                Kind.TENSOR,
                Prec.FULL,
                "float32",
                Origin(
                    node,
                    Cause.FACTORY,
                    f"made float32 (the default dtype) by `{code()}` without `dtype=`",
                ),
            )
        if qual == "torch.full":
            fill = (
                args[1].fact
                if len(args) > 1
                else kwargs["fill_value"].fact
                if "fill_value" in kwargs
                else UNKNOWN
            )
            if fill.kind is Kind.SCALAR and fill.value is not None:
                if isinstance(args[1].node if len(args) > 1 else None, cst.Name):
                    return Fact(Kind.TENSOR, Prec.BOOL, "bool")
                if fill.value.is_integer() and not _is_float_literal(
                    args[1].node if len(args) > 1 else kwargs["fill_value"].node
                ):
                    return Fact(Kind.TENSOR, Prec.INT, "int64")
            return Fact(
                Kind.TENSOR,
                Prec.FULL,
                "float32",
                Origin(
                    node,
                    Cause.FACTORY,
                    f"made float32 (the default dtype) by `{code()}` without `dtype=`",
                ),
            )
        if qual == "torch.arange":
            if any(_is_float_literal(a.node) for a in args):
                return Fact(
                    Kind.TENSOR,
                    Prec.FULL,
                    "float32",
                    Origin(node, Cause.FACTORY, f"made float32 by `{code()}` with float bounds"),
                )
            return Fact(
                Kind.TENSOR,
                Prec.INT,
                "int64",
                Origin(node, Cause.FACTORY, f"an int64 tensor from `{code()}`"),
            )
        if qual in ("torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor"):
            return self.tensor_literal(node, args, code())
        if qual in T.INT_FACTORIES or qual in T.INT_FUNCTIONS:
            return Fact(Kind.TENSOR, Prec.INT, "int64")
        if qual in T.BOOL_FUNCTIONS:
            return Fact(Kind.TENSOR, Prec.BOOL, "bool")
        if qual in ("torch.finfo", "torch.iinfo"):
            arg = args[0].fact if args else UNKNOWN
            if arg.kind is Kind.DTYPE or arg.kind is Kind.TENSOR:
                return Fact(
                    Kind.OTHER,
                    arg.prec,
                    arg.dtype,
                    Origin(node, Cause.LITERAL, _code(self, node)),
                    layer="finfo",
                )
            return Fact(Kind.OTHER, layer="finfo")
        if qual in T.EXTERNAL_LAYERS:  # apex.normalization.FusedRMSNorm(...)
            return self.construct_module(node, T.EXTERNAL_LAYERS[qual], frame, kwargs)
        if qual in T.NON_TENSOR_FUNCTIONS or not qual.startswith("torch"):
            if leaf == "from_pretrained":
                return self.loaded_model(node, qual, kwargs)
            return UNKNOWN
        if leaf.endswith("_like") and args:
            return (
                self.same_as(args[0].fact, node, f"`{code()}`")
                if args[0].fact.kind is Kind.TENSOR
                else UNKNOWN_TENSOR
            )
        if qual in T.CONCAT:
            seq = args[0].fact if args else kwargs.get("tensors", Operand(node, UNKNOWN)).fact
            if seq.kind is Kind.SEQ and seq.items is not None:
                return promote(seq.items, node)
            return element(seq)
        if qual == "torch.where":
            if len(args) >= 3:
                result = promote([args[1].fact, args[2].fact], node)
                if result.kind is Kind.SCALAR and args[0].fact.is_tensor:
                    # ``torch.where(mask > 0, 0.0, -1e10)``: two Python numbers make a tensor
                    # of the default dtype (float32), or int64 from two int literals.
                    branches = [a.node for a in args[1:3]]
                    if any(_is_float_literal(b) for b in branches):
                        text = f"made float32 (the default dtype) by `{code()}` from Python floats"
                        origin = Origin(node, Cause.FACTORY, text)
                        return Fact(Kind.TENSOR, Prec.FULL, "float32", origin)
                    if all(isinstance(_unsigned(b), cst.Integer) for b in branches):
                        return Fact(Kind.TENSOR, Prec.INT, "int64")
                    return UNKNOWN_TENSOR
                return result
            return Fact(Kind.SEQ, elem=Fact(Kind.TENSOR, Prec.INT, "int64"))
        if qual in T.SPLIT_FUNCTIONS and args:
            return Fact(Kind.SEQ, elem=args[0].fact)
        if leaf in ("softmax", "log_softmax") and "dtype" in kwargs:
            return self.dtype_arg(kwargs["dtype"], node, args[0].fact if args else UNKNOWN)
        if qual == f"torch.{leaf}" and leaf in T.VALUES_INDICES_METHODS and args:
            rest, first = args[1:], args[0].fact
            by_dim = "dim" in kwargs or bool(rest and rest[0].fact.kind is Kind.SCALAR)
            if first.is_tensor and (by_dim if leaf in ("max", "min") else rest or kwargs):
                return seq_of([first, Fact(Kind.TENSOR, Prec.INT, "int64")])  # (values, indices)
        if leaf in T.DTYPE_STRICT_WRITES and qual == f"torch.{leaf}" and args:
            region = frame.scope.autocast
            if args[0].fact.is_tensor and not (region and region.recasts(leaf)):
                return args[0].fact  # ``torch.index_add(x, ...)`` raises unless it keeps x's dtype
        if qual in T.INPUT_DTYPE_FUNCTIONS and args and args[0].fact.is_tensor:
            return args[0].fact  # ``F.grid_sample(x, grid)`` has ``x``'s dtype, not a promotion
        op = T.OPS.get(qual)
        tensors = [a.fact for a in args if a.fact.kind is Kind.TENSOR]
        tensors += [
            o.fact
            for k, o in kwargs.items()
            if o.fact.kind is Kind.TENSOR and k not in ("attn_mask", "out")
        ]
        if op is T.OpKind.NORM or op is T.OpKind.EMBEDDING:
            if op is T.OpKind.EMBEDDING and len(args) > 1:
                return args[1].fact
            return args[0].fact if args else UNKNOWN_TENSOR
        if op is not None:
            return _op_result(*tensors) if tensors else UNKNOWN_TENSOR
        if not tensors:
            seqs = [a.fact for a in args if a.fact.kind is Kind.SEQ]
            return element(seqs[0]) if seqs else UNKNOWN_TENSOR
        result = promote(tensors, node)
        if leaf in T.FLOAT_VALUED and result.is_tensor and result.prec is Prec.INT:
            return int_to_float(result, node, f"`{code()}`")
        return result

    def tensor_literal(self, node: cst.Call, args: tuple[Operand, ...], code: str) -> Fact:
        data = args[0] if args else None
        if data is None:
            return UNKNOWN_TENSOR
        if data.fact.kind is Kind.TENSOR:
            return data.fact
        literal = data.node
        zero_dim = data.fact.kind is Kind.SCALAR
        leaves = list(_literal_leaves(literal))
        if not leaves or any(leaf is None for leaf in leaves):
            return replace(UNKNOWN_TENSOR, zero_dim=zero_dim)
        if any(isinstance(leaf, cst.Float) for leaf in leaves):
            origin = Origin(
                node,
                Cause.FACTORY,
                f"made float32 (the default dtype) by `{code}` from Python floats",
            )
            return Fact(Kind.TENSOR, Prec.FULL, "float32", origin, zero_dim=zero_dim)
        if all(isinstance(leaf, cst.Name) for leaf in leaves):
            return Fact(Kind.TENSOR, Prec.BOOL, "bool", zero_dim=zero_dim)
        return Fact(Kind.TENSOR, Prec.INT, "int64", zero_dim=zero_dim)

    def autocast_result(self, node: cst.CSTNode, aten: str, region: Autocast, result: Fact) -> Fact:
        from mpcheck import autocast_ops

        # An unknown device (``accelerator.autocast()``, ``device_type=x.device.type``):
        # the result is known when every device's policy agrees.
        devices = [region.device] if region.device in ("cuda", "cpu") else ["cuda", "cpu"]
        policies = {autocast_ops.policy(aten, d) for d in devices}
        if policies == {"lower_precision"}:
            low = region.low_dtype
            text = f"computed in {low or 'half precision'} by autocast"
            return Fact(Kind.TENSOR, Prec.HALF, low, Origin(node, Cause.AUTOCAST, text))
        if policies == {"fp32"}:
            text = "computed in float32 by autocast"
            return Fact(Kind.TENSOR, Prec.FULL, "float32", Origin(node, Cause.AUTOCAST, text))
        return (
            replace(result, prec=Prec.UNKNOWN, origin=None)
            if result.kind is Kind.TENSOR
            else result
        )

    def autocast_region(
        self, node: cst.BaseExpression, frame: Frame | None = None
    ) -> Autocast | None:
        """The region ``node`` opens; ``frame`` resolves ``dtype=amp_dtype`` (a variable)."""
        call = node if isinstance(node, cst.Call) else None
        func = call.func if call else node
        qual = self.imports.resolve(func)
        device: str | None
        if qual in AUTOCAST_NAMES:
            device = AUTOCAST_NAMES[qual]
        elif isinstance(func, cst.Attribute) and func.attr.value == "autocast" and qual is None:
            device = None  # accelerator.autocast()
        else:
            return None
        dtype: str | None = None
        dtype_known = True
        enabled: bool | None = True
        args = call.args if call else ()
        for i, arg in enumerate(args):
            key = (
                arg.keyword.value
                if arg.keyword
                else ("device_type" if i == 0 and qual == "torch.autocast" else None)
            )
            if key == "device_type":
                if isinstance(arg.value, cst.SimpleString) and isinstance(
                    arg.value.evaluated_value, str
                ):
                    device = arg.value.evaluated_value.split(":")[0]
            elif key == "dtype":
                name = dotted(arg.value) or ""
                leaf = name.rsplit(".", 1)[-1]
                dtype = {"float16": "float16", "half": "float16", "bfloat16": "bfloat16"}.get(leaf)
                if dtype is None:
                    dtype = self._region_dtype(arg.value, frame)
                    dtype_known = dtype is not None
            elif key == "enabled" or (
                key is None and i == 0 and device is not None and qual != "torch.autocast"
            ):
                if isinstance(arg.value, cst.Name) and arg.value.value in ("True", "False"):
                    enabled = arg.value.value == "True"
                else:
                    enabled = None
        return Autocast(node, device, dtype, enabled, dtype_known)

    def _region_dtype(self, node: cst.BaseExpression, frame: Frame | None) -> str | None:
        """``dtype=amp_dtype``: the half dtype the variable holds on every path, if one."""
        if frame is None or not isinstance(node, (cst.Name, cst.Attribute)):
            return None
        fact = self.expr(node, frame)
        if fact.kind is Kind.DTYPE and fact.prec is Prec.HALF and not fact.maybe:
            return fact.dtype if fact.dtype in ("float16", "bfloat16") else None
        return None

    # -- dispatch ------------------------------------------------------------------------
    def emit(
        self,
        node: cst.Call | cst.BinaryOperation | cst.AugAssign,
        qual: str | None,
        method: str | None,
        receiver: Operand | None,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        op: T.OpKind | None,
        aten: str,
        result: Fact,
        frame: Frame,
        path: str | None = None,
        *,
        owner: Owner | None = None,
        inner: tuple[InnerCall, ...] = (),
        through: tuple[InnerCall, ...] = (),
    ) -> Fact:
        if (self.listener.wants_calls or self.recorder is not None) and not self.muted:
            role = None
            if op is T.OpKind.MATMUL:
                name = method or (qual or "").rsplit(".", 1)[-1]
                recv = receiver.node if method and receiver else None
                nodes = [a.node for a in args]
                role = self.attention.site_role(node, name, recv, nodes, frame.scope.function)
            site = CallSite(
                node,
                qual,
                method,
                receiver,
                args,
                kwargs,
                op,
                aten,
                frame.scope,
                result,
                path,
                attention=role,
                owner=owner,
                inner=inner,
                through=through,
            )
            if self.recorder is not None:
                self.recorder.append(site)
            else:
                self.listener.on_call(site)
        return result


# A call's positional and keyword arguments, and whether the callee's first parameter is
# ``self`` (which the call does not pass).
Call = tuple[tuple[Operand, ...], dict[str, Operand], bool]
_SELF_CALL = re.compile(rb"self\.([A-Za-z_]\w*)\s*\(")
_NAME_CALL = re.compile(rb"(?<![\w.])([A-Za-z_]\w*)\s*\(")


def _self_called_names(source: bytes) -> frozenset[str]:
    """Methods called as ``self.name(...)`` somewhere in the file."""
    return frozenset(m.decode() for m in _SELF_CALL.findall(source))


def _called_names(source: bytes) -> frozenset[str]:
    """Names called somewhere besides their own ``def name(`` line."""
    counts = Counter(_NAME_CALL.findall(source))
    return frozenset(name.decode() for name, n in counts.items() if n > 1)


def _params(fn: cst.FunctionDef, *, skip_self: bool) -> list[cst.Param]:
    params = list(fn.params.posonly_params) + list(fn.params.params)
    params += list(fn.params.kwonly_params)
    return params[1:] if skip_self and params else params


def _arguments(
    fn: cst.FunctionDef, args: tuple[Operand, ...], kwargs: dict[str, Operand], skip_self: bool
) -> Callable[[int], Fact | None]:
    """The fact a call passes for ``fn``'s parameter ``i`` (not counting ``self``)."""
    params = _params(fn, skip_self=skip_self)

    def arg_fact(i: int) -> Fact | None:
        if i >= len(params):
            return None
        name = params[i].name.value
        if name in kwargs:
            return kwargs[name].fact
        if i < len(args) and params[i] not in fn.params.kwonly_params:
            return args[i].fact
        return None

    return arg_fact


def _owner(path: str | None, env: Env) -> Owner | None:
    """The nearest module bound above ``path`` (``model`` for ``model.block.proj``)."""
    parts = path.split(".") if path else []
    for end in range(len(parts) - 1, 0, -1):
        key = ".".join(parts[:end])
        fact = env.get(key)
        if fact is not None and fact.kind is Kind.MODULE:
            return Owner(key, fact)
    return None


def _changed(walked: list[CallSite], plain: list[CallSite]) -> tuple[InnerCall, ...]:
    """The calls of ``walked`` whose dtypes differ from the same call in ``plain``.

    Both walks take the same calls in the same order: the k-th visit of a node pairs up.
    """
    before_of: dict[tuple[int, int], CallSite] = {}
    seen: dict[int, int] = {}
    for site in plain:
        seen[id(site.node)] = k = seen.get(id(site.node), 0) + 1
        before_of[id(site.node), k] = site
    seen.clear()
    changed = []
    for site in walked:
        seen[id(site.node)] = k = seen.get(id(site.node), 0) + 1
        before = before_of.get((id(site.node), k))
        if before is None or _site_precs(site) != _site_precs(before):
            changed.append(InnerCall(site, before))
    return tuple(changed)


def _site_precs(site: CallSite) -> tuple[tuple[Prec, str | None], ...]:
    """The dtypes a call sees: its receiver's and its arguments'."""
    operands = [site.receiver] if site.receiver is not None else []
    operands += list(site.args) + [site.kwargs[k] for k in sorted(site.kwargs)]
    return tuple((o.fact.prec, o.fact.dtype) for o in operands)


def _op_result(*facts: Fact) -> Fact:
    """The dtype a matmul-family op computes in: its operands', or the model's when they clash."""
    floats = [f for f in facts if f.floating]
    if not floats:
        return UNKNOWN_TENSOR
    precs = {f.prec for f in floats}
    if len(precs) == 1:
        return floats[0]
    for f in floats:
        if f.prec is Prec.MODEL or f.prec is Prec.HALF:
            return f
    return floats[0]


def _fold(op: cst.BaseBinaryOp, a: Fact, b: Fact) -> Fact:
    if a.value is None or b.value is None:
        return SCALAR
    try:
        if isinstance(op, cst.Multiply):
            return replace(SCALAR, value=a.value * b.value)
        if isinstance(op, cst.Add):
            return replace(SCALAR, value=a.value + b.value)
        if isinstance(op, cst.Subtract):
            return replace(SCALAR, value=a.value - b.value)
        if isinstance(op, cst.Divide) and b.value:
            return replace(SCALAR, value=a.value / b.value)
        if isinstance(op, cst.Power) and abs(b.value) < 64:
            return replace(SCALAR, value=math.pow(a.value, b.value))
    except (OverflowError, ValueError):
        pass
    return SCALAR


def _parameter_free_norm(layer: str, kwargs: dict[str, Operand]) -> bool:
    """``nn.LayerNorm(d, elementwise_affine=False)`` has no weights to clash with."""
    for key in ("elementwise_affine", "affine"):
        flag = kwargs.get(key)
        if flag is not None and isinstance(flag.node, cst.Name) and flag.node.value == "False":
            return "Norm" in layer
    return False


def _annotation_names(node: cst.CSTNode) -> list[str]:
    """The identifiers in an annotation (``Optional[torch.Tensor]`` -> Optional torch Tensor)."""
    out: list[str] = []
    stack: list[cst.CSTNode] = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Name):
            out.append(cur.value)
        elif isinstance(cur, cst.SimpleString):
            out.append(cur.value.strip("'\""))
        elif isinstance(cur, cst.Attribute):
            stack += [cur.value, cur.attr]
        elif isinstance(cur, cst.Subscript):
            stack.append(cur.value)
            stack += [e.slice.value for e in cur.slice if isinstance(e.slice, cst.Index)]
        elif isinstance(cur, cst.BinaryOperation):
            stack += [cur.left, cur.right]
    return out


def _names_a_dtype(node: cst.CSTNode) -> bool:
    """``compute_dtype``, ``self.dtype``, ``cfg.weight_dtype``: a dtype we cannot resolve.

    Also a call of such a name: ``get_parameter_dtype(self.proj_in)``, ``self._get_dtype()``.
    """
    if isinstance(node, cst.Call):
        node = node.func
    name = dotted(node) if isinstance(node, cst.BaseExpression) else None
    return name is not None and name.lower().endswith("dtype")


def _is_advanced_index(node: cst.CSTNode, fact: Fact) -> bool:
    """Whether indexing with ``node`` is advanced (``index_put_``) rather than basic (a view).

    A list literal, an int/bool tensor (a mask, ``idx``) or a sequence holding one is
    advanced; ints, slices, ``...``, ``None`` and 0-dim tensors are basic. A float-typed
    "tensor" cannot index: it is a parameter guessed to be an activation, so it is a
    Python int here. Unknown objects are not claimed to be advanced.
    """
    if isinstance(node, cst.List):
        return True
    if isinstance(node, cst.Tuple):
        items = fact.items if fact.kind is Kind.SEQ and fact.items is not None else ()
        if len(items) != len(node.elements):
            return False
        return any(
            _is_advanced_index(el.value, f) for el, f in zip(node.elements, items, strict=False)
        )
    if fact.kind is Kind.SEQ:
        inner = fact.items if fact.items is not None else (fact.elem,) if fact.elem else ()
        return any(_is_advanced_index(cst.Name("_"), f) for f in inner)
    return (
        fact.kind is Kind.TENSOR
        and not fact.zero_dim
        and fact.prec in (Prec.INT, Prec.BOOL, Prec.UNKNOWN)
    )


def _one_dim_factory(fact: Fact) -> bool:
    """Made by a factory that returns a 1-D tensor (``torch.linspace``, ``torch.arange``).

    The fact survives reshapes unchanged, so this is a best guess; it only ever makes a
    value 0-dim (which does not promote), so a wrong guess hides a finding, never adds one.
    """
    origin = fact.origin
    if origin is None or origin.cause is not Cause.FACTORY or not isinstance(origin.node, cst.Call):
        return False
    func = origin.node.func
    leaf = func.attr.value if isinstance(func, cst.Attribute) else dotted(func)
    return leaf in ("linspace", "logspace", "arange")


def _empty_shape(args: tuple[Operand, ...]) -> bool:
    """``torch.full((), v)`` / ``torch.zeros([])``: the shape is empty, the tensor 0-dim."""
    shape = args[0].node if args else None
    return isinstance(shape, (cst.Tuple, cst.List)) and not shape.elements


def _full_reduction(name: str, args: tuple[Operand, ...], kwargs: dict[str, Operand]) -> bool:
    """``x.sum()`` / ``x.mean()`` over every dim: a 0-dim result, which never promotes."""
    return name in T.FULL_REDUCTIONS and not args and not kwargs.keys() & {"dim", "axis"}


def _reduces(kwargs: dict[str, Operand]) -> bool:
    """A loss called with ``reduction="mean"``/``"sum"`` (or the default): a 0-dim result."""
    reduction = kwargs.get("reduction")
    if reduction is None:
        return True
    node = reduction.node
    return isinstance(node, cst.SimpleString) and node.evaluated_value in ("mean", "sum")


def _is_float_literal(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.UnaryOperation):
        return _is_float_literal(node.expression)
    return isinstance(node, cst.Float)


def _unsigned(node: cst.CSTNode) -> cst.CSTNode:
    """``-1`` -> ``1``: the literal under any unary signs."""
    while isinstance(node, cst.UnaryOperation):
        node = node.expression
    return node


def _literal_leaves(node: cst.BaseExpression) -> Iterator[cst.CSTNode | None]:
    if isinstance(node, (cst.List, cst.Tuple)):
        for el in node.elements:
            yield from _literal_leaves(el.value)
    elif isinstance(node, cst.UnaryOperation):
        yield from _literal_leaves(node.expression)
    elif isinstance(node, (cst.Integer, cst.Float)):
        yield node
    elif isinstance(node, cst.Name) and node.value in ("True", "False"):
        yield node
    else:
        yield None


def _dtype_source(analysis: FileAnalysis, op: Operand) -> Origin | None:
    """Where a dtype passed as a variable (``.to(weight_dtype)``) got its value, if elsewhere."""
    origin = op.fact.origin
    if origin is None or origin.node is op.node or op.fact.kind is not Kind.DTYPE:
        return None
    value = _code(analysis, origin.node)
    return replace(origin, text=f"`{_code(analysis, op.node)}` is `{value}` here")


def _code(analysis: FileAnalysis, node: cst.CSTNode) -> str:
    text = analysis.module.code_for_node(node)
    return text if len(text) <= 60 else text[:57] + "..."


_EXPR: dict[type, Callable[[FileAnalysis, cst.BaseExpression, Frame], Fact]] = {
    cst.Name: FileAnalysis.name,  # type: ignore[dict-item]
    cst.Attribute: FileAnalysis.attribute,  # type: ignore[dict-item]
    cst.Call: FileAnalysis.call,  # type: ignore[dict-item]
    cst.BinaryOperation: FileAnalysis.binary,  # type: ignore[dict-item]
    cst.UnaryOperation: FileAnalysis.unary,  # type: ignore[dict-item]
    cst.Comparison: FileAnalysis.compare,  # type: ignore[dict-item]
    cst.BooleanOperation: FileAnalysis.boolean,  # type: ignore[dict-item]
    cst.IfExp: FileAnalysis.ifexp,  # type: ignore[dict-item]
    cst.Tuple: FileAnalysis.sequence,  # type: ignore[dict-item]
    cst.List: FileAnalysis.sequence,  # type: ignore[dict-item]
    cst.Subscript: FileAnalysis.subscript,  # type: ignore[dict-item]
    cst.Integer: FileAnalysis.literal,
    cst.Float: FileAnalysis.literal,
    cst.ListComp: FileAnalysis.comprehension,  # type: ignore[dict-item]
    cst.GeneratorExp: FileAnalysis.comprehension,  # type: ignore[dict-item]
    cst.SetComp: FileAnalysis.comprehension,  # type: ignore[dict-item]
    cst.DictComp: FileAnalysis.comprehension,  # type: ignore[dict-item]
    cst.NamedExpr: FileAnalysis.named,  # type: ignore[dict-item]
    cst.Dict: FileAnalysis.dict_display,  # type: ignore[dict-item]
}
