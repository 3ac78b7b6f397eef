"""Classes and functions defined in the file: summaries, frames, parameters.

A function is walked once for its own sites and summarised by what it returns;
``substitute`` puts a call's arguments in place of the parameters in a summary.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cached_property, partial

import libcst as cst

from mpcheck.engine.autocast import Regions
from mpcheck.engine.base import Walk
from mpcheck.engine.binding import (
    bind_arguments,
    by_default,
    fixed_default,
    float32_default,
    joined_default,
    parameters,
)
from mpcheck.engine.body_uses import BodyUses, body_uses
from mpcheck.engine.device_reading import DeviceReadings
from mpcheck.engine.evidence import PREMISE
from mpcheck.engine.facts import (
    SCALAR,
    UNKNOWN,
    UNKNOWN_TENSOR,
    Cause,
    Fact,
    Kind,
    Origin,
    Prec,
    cast_to_working_dtype,
    casts_nothing_known,
    join,
    joined_with_arguments,
    none_literal,
    one_path_factory,
    promote,
    replace,
    settled,
    tensor_of_dtype,
)
from mpcheck.engine.frames import Call, ClassInfo, Env, Frame
from mpcheck.engine.frozen import frozen_dtypes
from mpcheck.engine.imported import class_bases, inherit
from mpcheck.engine.keep_fp32 import wholly_fp32
from mpcheck.engine.loads import DEFAULT_MARK, load_dtype, loaded_in
from mpcheck.engine.partial_cast import casts_to_half, converted_parts
from mpcheck.engine.records import factories_first, fields
from mpcheck.engine.sites import Autocast, ClassSite, Decorator, FunctionSite, Operand, Scope
from mpcheck.knowledge import torch_api as T
from mpcheck.project.arguments import FULL, INT, NUMBER
from mpcheck.project.names import dotted
from mpcheck.project.summary import ClassSummary, Function

NON_TENSOR_PARAMS = frozenset(
    "self cls args kwargs config cfg opt hparams accelerator device dtype".split()
)


class Definitions:
    """The part that walks a file's own classes and functions."""

    def __init__(self, file: Walk, regions: Regions) -> None:
        self.file = file
        self.regions = regions
        self.helpers: frozenset[str] = frozenset()  # methods called as ``self.name(...)``
        # methods called only as ``self.<part>.name(...)`` (:mod:`mpcheck.project.part_methods`):
        # walked from their first call, with what it hands; those no walk reaches, at the end
        self.part_helpers: frozenset[str] = frozenset()
        self.deferred: list[tuple[cst.FunctionDef, ClassInfo]] = []
        self.summaries: dict[cst.FunctionDef, Fact] = {}  # what each function returns
        self.in_progress: set[cst.FunctionDef] = set()  # being walked: not again inside
        # The names each function uses as tensors and its local function aliases: they
        # depend on the function alone, and a frame is made each time a function is walked
        # (nested functions, re-walks).
        self._uses: dict[cst.FunctionDef, BodyUses] = {}
        self._assigned: dict[str, bool] = {}  # (see :meth:`may_alias`)
        # What each name an annotation writes stands for in the project (None: nothing):
        # asked once per parameter, answered once per file (see :meth:`_project_symbol`)
        self._symbols: dict[str, object] = {}
        self.uses_torch_modules = False
        self._unconverted: dict[str, Env] = {}  # (see :meth:`unconverted_parts`)
        self.device_readings = DeviceReadings(file, regions)

    def uses(self, fn: cst.FunctionDef) -> BodyUses:
        """What one walk of ``fn``'s body tells (:mod:`body_uses`), walked once per file."""
        found = self._uses.get(fn)
        if found is None:
            found = self._uses[fn] = body_uses(fn)
        return found

    def may_alias(self, name: str) -> bool:
        """Whether a function of this file may bind ``name`` to functions (``attn_fn = a if
        split else b``, :mod:`aliases`): its source writes ``name`` before an ``=``. Most
        bare calls (``len(x)``, a helper) name nothing so bound, and then no body is walked
        for them. (True when the source is not at hand, or the name is not ASCII.)"""
        found = self._assigned.get(name)
        if found is None:
            found = self._assigned[name] = _written_before_equals(self.file.source, name)
        return found

    def register_class(self, node: cst.ClassDef) -> ClassInfo:
        bases, elsewhere = class_bases(node, self.file.imports, self.file.project)
        is_module = any(self._module_base(b) for b in bases) or any(
            e[3].is_module for e in elsewhere
        )
        methods = {s.name.value: s for s in node.body.body if isinstance(s, cst.FunctionDef)}
        info = ClassInfo(node, is_module, {}, methods, bases, elsewhere=elsewhere)
        info.kept_fp32 = any(e[3].keep_fp32 for e in elsewhere) or wholly_fp32(node)
        info.is_pipeline = not is_module and any(self._pipeline_base(b) for b in bases)
        names = (node.name.value, *(b.rsplit(".", 1)[-1] for b in bases))
        info.is_sampler = not is_module and any(n.endswith(T.SAMPLER_SUFFIXES) for n in names)
        others = tuple(dotted(e[0]) or "" for e in elsewhere)
        info.pretrained = is_module and self._pretrained(bases, others)
        info.lightning = any(_lightning(b) or self._local_lightning(b) for b in bases)
        info.quantized = is_module and any(_quantized(b) for b in bases)
        self.file.classes.setdefault(node.name.value, info)
        if is_module:
            self.uses_torch_modules = True
        return info

    def local_method(
        self, info: ClassInfo | None, name: str, depth: int = 0
    ) -> tuple[ClassInfo, cst.FunctionDef] | None:
        """``self.name`` of ``info``: its own method, else the one a base class of this file
        defines (a LoHa ``Linear`` calling its ``LoHaLayer``'s ``get_delta_weight``), with
        the class that defines it (whose ``__init__`` set up the attributes it reads)."""
        if info is None or depth > 8:
            return None
        if name in info.methods:
            return info, info.methods[name]
        for base in info.bases:
            parent = self.file.classes.get(base)
            found = None if parent is info else self.local_method(parent, name, depth + 1)
            if found is not None:
                return found
        return None

    def class_call(
        self,
        node: cst.Call,
        name: str,
        method: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
    ) -> Fact | None:
        """``Cls.method(...)`` of a class of this file: what its summary returns for these
        arguments. A custom autograd Function's ``apply`` runs its ``forward`` with ``ctx``
        first, so ``HadaWeight.apply(w1, w2)`` returns what that ``forward`` makes of them
        (LoHa's delta weight is as float32 as its factors)."""
        cls = self.file.classes.get(name)
        if cls is None:
            return None
        if method in cls.methods:
            fn = cls.methods[method]
        elif method == "apply" and "forward" in cls.methods and self._autograd_function(cls):
            fn = cls.methods["forward"]
            args = (Operand(node, UNKNOWN), *args)  # ``ctx``: input 0 of the static forward
        else:
            return None
        return self.substitute(self.summary(fn, cls), fn, args, kwargs, skip_self=False)

    def _autograd_function(self, cls: ClassInfo, depth: int = 0) -> bool:
        """A subclass of ``torch.autograd.Function``, directly or through a class here."""
        for base in cls.bases:
            if base in T.AUTOGRAD_FUNCTIONS:
                return True
            parent = self.file.classes.get(base)
            if parent is not None and parent is not cls and depth < 8:
                if self._autograd_function(parent, depth + 1):
                    return True
        return False

    def _local_lightning(self, base: str) -> bool:
        local = self.file.classes.get(base)
        return local is not None and local.lightning

    def built_apart(self, frame: Frame) -> str | None:
        """Why a module built here without ``dtype=`` is float32 beside a half model: in a
        bitsandbytes layer's subclass, or in a method run after a wrapped model was built."""
        owner = self.file.classes.get(frame.scope.class_name or "")
        if owner is None or not frame.scope.in_module:
            return None
        if owner.quantized:
            return "built in float32 (the default) beside a bitsandbytes quantized base layer"
        fn = frame.scope.function
        # (``__init__`` builds most parts and is never late: the walk behind that is skipped)
        if fn is not None and fn.name.value != "__init__" and fn.name.value in owner.late_methods:
            return (
                f"built in float32 (the default) by `{fn.name.value}`, after the model "
                "it wraps was built or loaded"
            )
        return None

    def _pipeline_base(self, base: str) -> bool:
        local = self.file.classes.get(base)
        if local is not None:
            return local.is_pipeline
        return base.rsplit(".", 1)[-1].endswith("Pipeline")

    def _pretrained(self, bases: tuple[str, ...], others: tuple[str, ...]) -> bool:
        """A model class that ``from_pretrained`` loads (``class Net(ModelMixin)``)."""
        leaves = [n.rsplit(".", 1)[-1] for n in (*bases, *others)]
        if any(leaf.endswith(T.PRETRAINED_SUFFIXES) for leaf in leaves):
            return True
        return any(self.file.classes[b].pretrained for b in bases if b in self.file.classes)

    def _module_base(self, base: str) -> bool:
        if torch_module(base) or _quantized(base):
            return True
        local = self.file.classes.get(base)
        if local is not None:
            return local.is_module
        return base.rsplit(".", 1)[-1].endswith(T.MODULE_BASE_SUFFIXES)

    def analyse_class(self, info: ClassInfo) -> None:
        if info.analysed:
            return
        info.analysed = True
        # Also reached on demand (a submodule's layer, a split call): report it normally.
        with self.file.reporting.live():
            if self.file.reporting.takes("classes"):
                self.file.reporting.listener.deliver(
                    "classes", ClassSite(info.node, info.bases, info.is_module)
                )
            for base in info.bases:  # attributes a local base class set up in its __init__
                parent = self.file.classes.get(base)
                if parent is not None and parent is not info:
                    self.analyse_class(parent)
                    for key, fact in parent.attrs.items():
                        info.attrs.setdefault(key, fact)
            for outside in info.elsewhere:  # the same, from a base in another project file
                inherit(self.file, info, *outside)
            init = info.methods.get("__init__")
            # Helpers called as ``self.helper(...)`` come last: most are walked from their
            # first call site first, with the arguments it passes (see ``summary``).
            ordered = ([init] if init else []) + sorted(
                (m for n, m in info.methods.items() if n != "__init__"),
                key=lambda m: m.name.value in self.helpers,
            )
            if fields(info.node, self.file.imports.resolve) is not None:
                ordered = factories_first(ordered)  # a dataclass's fields come from them
            for method in ordered:
                if method.name.value in self.part_helpers:
                    self.deferred.append((method, info))
                    continue
                self.summary(method, info)

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
        try:
            with self.file.reporting.live():
                result = self._walk_function(fn, cls, call)
        finally:
            self.in_progress.discard(fn)
        self.summaries[fn] = result
        return result

    def _walk_function(self, fn: cst.FunctionDef, cls: ClassInfo | None, call: Call | None) -> Fact:
        body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else []
        frame = self.function_frame(fn, cls, None)
        seeded = call is not None and self._seed_params(fn, frame, call)
        self.function_site(fn, frame)
        self.walk_body(fn, body, frame, None)
        if cls is not None:
            for key, fact in frame.env.items():
                if cls.is_pipeline and key[len("self.") :] in T.PIPELINE_MODELS:
                    continue  # ``self.upcast_vae()`` in one method says nothing of another
                if key.startswith("self.") and key.count(".") == 1:
                    built, model = cls.registered.get(key, (None, fact))
                    if fact is built:  # a buffer as built: the model's dtype after ``__init__``
                        fact = model
                    if fact.kind is Kind.SCALAR and fact.value is not None:
                        if not self.file.constants.attribute_set_once(key[len("self.") :]):
                            fact = replace(fact, value=None)  # set again elsewhere
                    old = cls.attrs.get(key)
                    cls.attrs[key] = (
                        fact if old is None or fn.name.value == "__init__" else join(old, fact)
                    )
        if not seeded:
            return settled(frame.returns)
        with self.file.reporting.muted():
            plain = self.function_frame(fn, cls, None)
            self.file.block(body, plain)
        return settled(plain.returns)

    def walk_body(
        self,
        fn: cst.FunctionDef,
        body: Sequence[cst.BaseStatement],
        frame: Frame,
        outer: Autocast | None,
    ) -> None:
        """Walk ``fn``'s ``body`` in ``frame``; a region only CUDA runs that a decorator of
        ``fn`` opens (``outer``: the one around it) is read again as off
        (:mod:`mpcheck.engine.device_reading`)."""
        region = frame.scope.autocast
        opened = region is not None and region.off_elsewhere and region is not outer
        opened = opened and self.file.reporting.reads_again
        entry = Frame(dict(frame.env), frame.scope) if opened else None
        self.file.block(body, frame)
        if entry is not None:
            walk = partial(self.file.block, body)
            self.device_readings.read(region, entry, walk)

    def function_site(self, fn: cst.FunctionDef, frame: Frame) -> None:
        if not self.file.reporting.takes("functions"):
            return
        decorators = []
        for deco in fn.decorators:
            expr = deco.decorator
            call = expr if isinstance(expr, cst.Call) else None
            target = call.func if call is not None else expr
            qual = self.file.imports.resolve(target) or dotted(target)
            decorators.append(Decorator(deco, qual, call))
        self.file.reporting.listener.deliver(
            "functions", FunctionSite(fn, tuple(decorators), frame.scope)
        )

    def function_frame(
        self, fn: cst.FunctionDef, cls: ClassInfo | None, outer: Frame | None
    ) -> Frame:
        in_module = bool(cls and cls.is_module and not cls.kept_fp32 and self.file.half_capable)
        if outer is not None and cls is None:
            in_module = outer.scope.in_module
        autocast = outer.scope.autocast if outer else None
        for deco in fn.decorators:
            region = self.regions.autocast_region(deco.decorator, outer)
            if region is not None:
                autocast = region
        env: Env = dict(outer.env) if outer else self._module_globals()
        if cls is not None:
            env.update(cls.attrs)
            if in_module and fn.name.value != "__init__":
                env.update(self.frozen_attrs(cls))
                env.update(self.unconverted_parts(cls))
            env["self"] = Fact(Kind.MODULE, Prec.MODEL if in_module else Prec.UNKNOWN)
        sampler = bool(cls and cls.is_sampler) or bool(outer and outer.scope.sampler)
        step = cls.lightning_steps.get(fn.name.value) if cls is not None else None
        if outer is not None and cls is None:
            step = outer.scope.lightning_step
        name = cls.node.name.value if cls else None
        tensor_params = (in_module and not self._called_by_base(fn, cls)) or (
            cls is None and self.file.half_capable and outer is None
        )
        if in_module and cls is not None and self.unconverted_parts(cls):
            tensor_params = False  # a partially converted model's inputs are its caller's
        evidence = outer.scope.evidence if outer is not None else None
        if in_module or (tensor_params and outer is None):
            owner = cls if in_module else None
            evidence = self.file.half_evidence(owner, name or fn.name.value, fn)
        elif outer is None and name is not None and fn.name.value == "__init__":
            made = self.file.half_evidence(None, name, fn)  # (any class: built, not run)
            evidence = made if made.float32 else None
        elif outer is None and cls is not None and cls.is_sampler and name is not None:
            evidence = self.file.sampler_evidence(name)
        if outer is None and cls is not None:  # (a method nothing calls never runs)
            evidence = self.file.uncalled(cls.node.name.value, fn.name.value) or evidence
        module_code = outer.scope.module_code if outer is not None else False
        handed = False  # (only scripts, datasets and plain classes call it: see ``_handed``)
        full: dict[str, str] = {}  # (every call hands them no half value: what it hands)
        names: tuple[str, ...] = ()
        if cls is None and outer is None:
            module_code = self.file.called_from_modules(fn.name.value)
            handed = not module_code and self.file.called_outside_modules(fn.name.value)
            names = tuple(p.name.value for p in (*fn.params.posonly_params, *fn.params.params))
            names += tuple(p.name.value for p in fn.params.kwonly_params)
            full = self.file.full_inputs(fn.name.value, names)
        scope = Scope(
            fn,
            name,
            in_module,
            autocast,
            sampler,
            lightning_step=step,
            evidence=evidence,
            module_code=module_code,
            no_autocast=not self.file.may_autocast,
            input_cast=self.file.input_cast,
        )
        params = list(fn.params.posonly_params) + list(fn.params.params)
        params += list(fn.params.kwonly_params)
        # The parameters a walk of the body must prove tensors: unannotated ones, less a
        # method's ``self`` and the parameters of ``__init__`` (built, never ``unproven``).
        # Most functions have none left, and then their body is not walked for it.
        own = 1 if cls is not None and params and params[0].name.value in ("self", "cls") else 0
        bare = (
            frozenset(p.name.value for p in params[own:] if p.annotation is None)
            if fn.name.value != "__init__"
            else frozenset()
        )
        # (the body is walked for its tensor uses only where an answer depends on them)
        tensors = self.uses(fn).tensors & bare if bare and full else frozenset()
        # every input the body uses as a tensor is full precision at every call: the others
        # (numbers, objects) cannot bring a model's activation in either
        all_full = bool(full) and bool(tensors) and tensors <= full.keys()
        index = 0
        for param in params:
            name = param.name.value
            if cls is not None and index == 0 and name in ("self", "cls"):
                continue
            if fn.name.value == "__init__":
                built = self.annotated_default(param) or self.annotated_instance(param, index)
                built = built or self._default_number(fn, param, index, cls)
                env[name] = built or Fact(Kind.OTHER, params=frozenset({index}))
            else:
                sample = sampler and name in T.SAMPLE_PARAMS
                env[name] = self._default_number(fn, param, index, cls) or self._param_fact(
                    param, index, tensor_params or sample
                )
                if handed:
                    env[name] = _handed(env[name], param)
                if name in full:
                    env[name] = _full_everywhere(env[name], param, index, full[name])
                elif names and env[name].is_tensor and env[name].from_input:
                    # (the call that may hand it half, where the others hand none: the
                    # evidence a finding on it rests on, a related location at the input)
                    place = self.file.half_call(fn.name.value, names, name)
                    if place is not None:
                        self.file.elsewhere[param] = place
                elif all_full and name in bare and name not in tensors:
                    env[name] = _full_everywhere(env[name], param, index, FULL, used=False)
                # (the body is walked only for an input ``unproven`` would change)
                if name in bare and _provable(env[name]) and name not in self.uses(fn).tensors:
                    env[name] = unproven(env[name])
                if sampler and name in T.INT_PARAM_NAMES:
                    env[name] = Fact(Kind.OTHER, params=frozenset({index}))  # continuous t
                if env[name].is_tensor and env[name].zeros is None:  # the caller's zero rows
                    env[name] = replace(env[name], zeros=Origin(param, Cause.ACTIVATION, name))
            index += 1
        # ``@autocast(enabled=False)`` on this function: its inputs come from autocast
        if (
            autocast is not None
            and autocast.enabled is False
            and autocast is not (outer.scope.autocast if outer else None)
        ):
            for key, fact in env.items():
                if fact.from_input:
                    env[key] = self.regions.disabled_input(fact)
        return Frame(env, scope)

    def frozen_attrs(self, cls: ClassInfo) -> Env:
        """``self.dtype`` that ``__init__`` fixed in float32 and casts leave stale: float32 in
        the methods of a model cast to half, while its weights follow the cast."""
        if cls.frozen is None:
            found = frozen_dtypes(
                cls.node,
                cls.methods,
                self.file.imports.resolve,
                self.file.code,
                pretrained=cls.pretrained,
            )
            cls.frozen = {
                key: Fact(Kind.DTYPE, Prec.FULL, "float32", Origin(f.node, Cause.FROZEN, f.text))
                for key, f in found.items()
            }
        return cls.frozen

    def unconverted_parts(self, cls: ClassInfo) -> Env:
        """The parts a partial half conversion of the class leaves float32
        (:mod:`partial_cast`): when nothing casts the class whole (only the premise), the
        parts and parameters its own converting method does not name. Its methods' inputs
        are then what its callers hand, not the converted parts' dtype."""
        name = cls.node.name.value
        if name in self._unconverted:
            return self._unconverted[name]
        init = cls.methods.get("__init__")
        if init is not None and init not in self.summaries:
            return {}  # (its parts are known once ``__init__`` is walked)
        self._unconverted[name] = {}
        found = converted_parts(cls.methods, self._halves)
        if found is None or self.file.half_evidence(cls, name).kind != PREMISE:
            return {}
        method, parts = found
        named = ", ".join(f"`{p}`" for p in parts[:3]) + (", ..." if parts[3:] else "")
        text = f"left float32 by `{name}.{method}`, which casts only {named} to half"
        where = cls.methods[method]
        kept: Env = {}
        for key, fact in cls.attrs.items():
            attr = key[len("self.") :]
            if not key.startswith("self.") or "." in attr or attr in parts:
                continue
            part = fact.kind is Kind.MODULE or fact.cause is Cause.PARAMETER
            if part and fact.prec is Prec.MODEL and not fact.maybe:
                origin = Origin(where.name, Cause.MODEL_CAST, text)
                kept[key] = replace(fact, prec=Prec.FULL, dtype="float32", origin=origin)
        self._unconverted[name] = kept
        return kept

    def _halves(self, expr: cst.BaseExpression) -> bool:
        """Whether the function ``expr`` names casts its argument to half in place."""
        if isinstance(expr, cst.Name) and expr.value in self.file.functions:
            return casts_to_half(self.file.functions[expr.value])
        located = self.file.imports.locate(expr) if self.file.project is not None else None
        if located is None or self.file.project is None:
            return False
        function = self.file.project(*located)
        return isinstance(function, Function) and function.halves

    def constructor_dtype(self, node: cst.Call, layer: str | None) -> Operand | None:
        """``KVCache(n, d)`` of a class whose ``__init__`` takes ``dtype=torch.float32`` (or
        ``torch.half``) and builds its parts with it: that default, as if passed (the class
        here or elsewhere), unless the call passes it or an argument choosing another path."""
        info = self.file.classes.get(layer or "")
        if info is not None and info.is_module:
            found = fixed_default(info.methods.get("__init__"), self.file.imports.resolve)
            if found is None or not found.taken_by(node):
                return None
            at, dtype, code = found.default, found.dtype, self.file.code(found.default)
            place = None
        else:
            imported = self.file.imported.get(layer or "")
            kept = imported.dtype_default if imported is not None else None
            if kept is None or not by_default(node, kept[0], kept[3]):
                return None
            at, dtype, code = node, kept[2], kept[1].text
            place = replace(kept[1], text=f"`dtype` defaults to `{code}` here")
            self.file.elsewhere[node] = place
        text = f"built in {dtype} by the default `dtype={code}` of `{layer}`"
        prec = Prec.FULL if dtype == "float32" else Prec.HALF
        origin = Origin(at, Cause.LITERAL, text, place=place)
        return Operand(at, Fact(Kind.DTYPE, prec, dtype, origin))

    def annotated_default(self, param: cst.Param) -> Fact | None:
        """``kv_cache: Optional[KVCache]`` of a class whose ``__init__`` defaults
        ``dtype=torch.float32``: built elsewhere, float32 unless built with ``dtype=``.

        torchtune's attention takes its cache this way; the model builder made it without
        ``dtype`` (under a bfloat16 default dtype), so its buffers stayed float32.
        """
        if param.annotation is None:
            return None
        for layer in _annotation_names(param.annotation.annotation):
            info = self.file.classes.get(layer)
            place = None
            if info is not None and info.is_module:
                found = float32_default(info.methods.get("__init__"), self.file.imports.resolve)
                text = f"`dtype={self.file.code(found[1])}`" if found is not None else ""
            else:
                imported = self._project_class(layer)
                kept = imported.dtype_default if imported is not None else None
                kept = kept if kept is not None and kept[2] == "float32" else None
                if kept is not None:
                    place = replace(kept[1], text=f"`dtype` defaults to `{kept[1].text}` here")
                    self.file.elsewhere[param] = place
                text = f"`dtype={kept[1].text}`" if kept is not None else ""
            if text:
                what = f"a `{layer}`: float32 unless built with `dtype=`, its default is {text}"
                origin = Origin(param, Cause.MODEL_CAST, what, place=place)
                return Fact(Kind.MODULE, Prec.FULL, "float32", origin, layer=layer)
        return None

    def plain_class(self, name: str | None) -> ClassInfo | None:
        """A class of this file that is no module (a cache, a helper object), walked: its
        instances' attributes are what its methods set on ``self``."""
        info = self.file.classes.get(name or "")
        if info is None or info.is_module or info.is_pipeline or info.is_sampler:
            return None
        self.analyse_class(info)
        return info

    def annotated_instance(self, param: cst.Param, index: int) -> Fact | None:
        """``cache: KVCache | None``: an instance of a plain class of this file."""
        if param.annotation is None:
            return None
        for name in _annotation_names(param.annotation.annotation):
            if name in self.file.classes and self.plain_class(name) is not None:
                return Fact(Kind.OTHER, layer=name, params=frozenset({index}))
        for name in _annotation_names(param.annotation.annotation):
            if name not in self.file.classes and self._project_plain_class(name) is not None:
                return Fact(Kind.OTHER, layer=name, params=frozenset({index}))
        return None

    def annotated_module(self, param: cst.Param, index: int, prec: Prec) -> Fact | None:
        """``norm: RMSNorm``: an instance of a module class of the project handed in; calling
        it runs that class's ``forward``, as calling a part the model built does."""
        if param.annotation is None:
            return None
        for name in _annotation_names(param.annotation.annotation):
            info = self.file.classes.get(name)
            if (info is not None and info.is_module) or (
                info is None and self._project_class(name) is not None
            ):
                what = f"`{param.name.value}`, a `{name}` handed to the function"
                origin = Origin(param, Cause.ACTIVATION, what)
                return Fact(Kind.MODULE, prec, None, origin, frozenset({index}), layer=name)
        return None

    def _project_plain_class(self, name: str) -> ClassSummary | None:
        """The summary of a plain class (no module: a cache entry, a state object) of
        another project file, named by an annotation (``entry: Optional[CacheEntry]``): its
        methods' summaries answer calls on the instance."""
        known = self.file.imported.get(name)
        if known is not None or self.file.project is None or not name.isidentifier():
            return known if known is not None and not known.is_module else None
        found = self._project_symbol(name)
        if not isinstance(found, ClassSummary) or found.is_module or not found.methods:
            return None
        self.file.imported[name] = found
        return found

    def instance_method(
        self,
        instance: Fact,
        method: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
    ) -> Fact | None:
        """``cache.get_kv(k, v)`` on an instance of a plain class: what that method returns
        for these arguments (its summary), None when it is no such call."""
        info = self.plain_class(instance.layer) if instance.kind is Kind.OTHER else None
        fn = info.methods.get(method) if info is not None else None
        if info is None or fn is None or fn in self.in_progress:
            return None
        return self.substitute(self.summary(fn, info), fn, args, kwargs, skip_self=True)

    def _project_class(self, name: str) -> ClassSummary | None:
        """The summary of module class ``name`` imported from another project file."""
        if name in self.file.imported or self.file.project is None or not name.isidentifier():
            return self.file.imported.get(name)  # (``Literal["sde-dpmsolver++"]`` names no class)
        found = self._project_symbol(name)
        if not isinstance(found, ClassSummary) or not found.is_module:
            return None
        self.file.imported[name] = found  # its methods answer calls on the instance
        return found

    def _project_symbol(self, name: str) -> object:
        """What the bare ``name`` stands for in the project, through this file's imports
        (None: nothing). Asked for every name of every parameter's annotation, most of which
        (``Optional``, ``torch``, a config class) find no class: one lookup per name and
        file. (The answer cannot change during the file's walk: the project's summaries and
        the import cycles open around it are the same at each of its lookups.)"""
        if name in self._symbols:
            return self._symbols[name]
        assert self.file.project is not None
        located = self.file.imports.locate(cst.Name(name))
        found = self.file.project(*located) if located is not None else None
        self._symbols[name] = found
        return found

    def _called_by_base(self, fn: cst.FunctionDef, cls: ClassInfo | None) -> bool:
        """``_norm`` overridden in a subclass of another model class and called nowhere in
        this file: the base's ``forward`` calls it (Llama's ``self._norm(x.float())``), with
        arguments we do not see, so its parameters are not known to be activations."""
        name = fn.name.value
        if cls is None or not name.startswith("_") or name.startswith("__"):
            return False
        if name in self.helpers:
            return False  # called here: walked with what its callers pass
        return any(not torch_module(b) for b in cls.bases)

    def _seed_params(self, fn: cst.FunctionDef, frame: Frame, call: Call) -> bool:
        """Walk with what ``call`` passes when it passes float32 (or half, to a function
        only scripts call); whether it did.

        Then every tensor parameter takes the call's fact, not only the float32 ones: a
        model-dtype default beside a real float32 argument would invent a mix. Parameters
        the walk does not take for tensors (a ``dtype``, an ``image: PipelineImageInput``)
        take only a float32 tensor or dtype passed to them.
        """
        args, kwargs, skip_self = call
        bound = bind_arguments(fn, args, kwargs, skip_self=skip_self)
        seeds: dict[str, Fact] = {}
        for param, actual in zip(parameters(fn, skip_self=skip_self), bound, strict=True):
            name = param.name.value
            default = frame.env.get(name)
            if default is None or actual is None:
                continue
            if not default.is_tensor:
                # ``self.prepare_latents(image, ..., torch.float32)``: a picture or a dtype the
                # helper's signature does not call a tensor, passed in float32
                if actual.prec is Prec.FULL and actual.kind in (Kind.TENSOR, Kind.DTYPE):
                    seeds[name] = replace(actual, params=default.params)
                continue
            if not actual.is_tensor:
                actual = UNKNOWN_TENSOR  # a value we know nothing about
            seeds[name] = replace(actual, params=default.params)
        # A function only scripts and data code call takes a half value a call hands it (a
        # ``wav.half()``): its inputs are otherwise of no known dtype (see ``_handed``).
        handed = frame.scope.class_name is None and not frame.scope.module_code
        handed = handed and self.file.called_outside_modules(fn.name.value)
        if not any(
            f.prec is Prec.FULL or one_path_factory(f) or (handed and f.prec is Prec.HALF)
            for f in seeds.values()
        ):
            return False  # (float32 on one path counts: ``k`` from a cache on the cache's path)
        frame.env.update(seeds)
        return True

    def _module_globals(self) -> Env:
        """Modules bound at the top level (``criterion = nn.BCELoss()``): functions use them."""
        if self.file.script is None:
            return {}
        return {
            k: f for k, f in self.file.script.env.items() if f.kind is Kind.MODULE and "." not in k
        }

    def _default_number(
        self, fn: cst.FunctionDef, param: cst.Param, index: int, cls: ClassInfo | None
    ) -> Fact | None:
        """A parameter's numeric default, when no call of the file passes it
        (:mod:`mpcheck.engine.constants`): ``eps=1e-8`` is 1e-8 in the function's walk."""
        if param.default is None or param.name.value.endswith("dtype"):
            return None
        owner = cls.node.name.value if cls is not None else None
        known = self.file.constants.default(fn, param, index, owner)
        return None if known is None else replace(known, params=frozenset({index}))

    def _param_fact(self, param: cst.Param, index: int, tensor_params: bool) -> Fact:
        name = param.name.value
        origin = Origin(param, Cause.ACTIVATION, f"`{name}`, an input of the function")
        marks = frozenset({index})
        ann = param.annotation.annotation if param.annotation else None
        ann_names = _annotation_names(ann) if ann is not None else []
        # ``KVCache = Tuple[torch.Tensor, torch.Tensor]`` at module level: ``Optional[KVCache]``
        ann_text = " ".join(m for n in ann_names for m in self.tensor_aliases.get(n, (n,)))
        default = param.default
        trainer = self.file.training.param_fact(param, name, ann_text)
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
        instance = self.annotated_instance(param, index)
        if instance is not None:
            return instance
        module = self.annotated_module(param, index, Prec.MODEL if tensor_params else Prec.UNKNOWN)
        if module is not None:
            return module
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

    @cached_property
    def tensor_aliases(self) -> dict[str, tuple[str, ...]]:
        """Module-level type aliases that name tensors: ``KVCache = Tuple[Tensor, Tensor]``."""
        found: dict[str, tuple[str, ...]] = {}
        for stmt in self.file.module.body:
            small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
            if not isinstance(small, cst.Assign) or len(small.targets) != 1:
                continue
            target, value = small.targets[0].target, small.value
            if isinstance(target, cst.Name) and isinstance(value, (cst.Subscript, cst.Attribute)):
                names = tuple(_annotation_names(value))
                if "Tensor" in names:
                    found[target.value] = names
        return found

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
        bound = bind_arguments(fn, args, kwargs, skip_self=skip_self)
        nones = {k: _none_marked(v) for k, v in kwargs.items()}
        handed = bind_arguments(fn, tuple(map(_none_marked, args)), nones, skip_self=skip_self)

        def sub(fact: Fact) -> Fact:
            if fact.kind is Kind.MODULE and fact.params and fact.cause is Cause.MODEL_CAST:
                if fact.prec is Prec.UNKNOWN:  # (a load in a parameter's dtype)
                    return _loaded_in(fact, fn, handed, kwargs)
            if fact.kind is Kind.SEQ:
                items = tuple(sub(f) for f in fact.items) if fact.items is not None else None
                return replace(fact, items=items, elem=sub(fact.elem) if fact.elem else None)
            if fact.params and cast_to_working_dtype(fact):
                # a model cast to the dtype a parameter holds: the argument decides
                given = next((handed[i] for i in sorted(fact.params) if i < len(handed)), None)
                if given is not None and casts_nothing_known(given):
                    return Fact(Kind.MODULE, layer=fact.layer)  # ``dtype=None`` casts nothing
                return replace(fact, params=given.params if given is not None else frozenset())
            # ``def pack_one(t, pattern)``: ``t`` is an int by its name only (a timestep), and
            # a floating tensor passed to it says what it really is
            guessed = fact.prec is Prec.INT and fact.cause is Cause.ACTIVATION
            if not fact.params or (fact.prec not in (Prec.MODEL, Prec.UNKNOWN) and not guessed):
                return replace(fact, params=frozenset())
            passed = (bound[i] for i in sorted(fact.params) if i < len(bound))
            actual = [f for f in passed if f is not None]
            if guessed and not (actual and all(f.is_tensor and f.floating for f in actual)):
                return replace(fact, params=frozenset())
            if not actual:
                return replace(fact, params=frozenset())
            if fact.kind is Kind.DTYPE:
                base = actual[0]
                base = replace(base, kind=Kind.DTYPE) if base.kind is Kind.TENSOR else base
                # (``return weight_dtype`` under a flag, ``return None`` else: on some paths)
                return replace(base, maybe=True) if fact.maybe else base
            if fact.kind is not Kind.TENSOR:
                return actual[0]
            if len(actual) == 1 and actual[0].kind is Kind.MODULE and fact.from_input:
                return actual[0]  # ``apply_wd(nn.Linear(...))`` returns the module it was given
            made = _made_in(actual, fn)
            if made is not None:
                return made
            given = promote(actual)
            if len(actual) == 1 and one_path_factory(actual[0]):
                # ``self.apply_rotary(k)`` of a ``k`` a factory made on one path: what follows
                # ``k`` is still float32 on that path
                given = actual[0]
            if joined_with_arguments(fact) and given.prec in (Prec.MODEL, Prec.HALF):
                return joined_default(fact, given, fn)
            return given

        return _handed_zeros(sub(result), result, parameters(fn, skip_self=skip_self), bound)


def _loaded_in(
    fact: Fact, fn: cst.FunctionDef, handed: Sequence[Fact | None], kwargs: Mapping[str, Operand]
) -> Fact:
    """A model the function loads in the dtype a parameter holds (``from_pretrained(p,
    torch_dtype=torch_dtype)``, or ``**kwargs``: the slot past the named parameters, where a
    keyword no named parameter takes lands): at this call, in the dtype the call hands."""
    slot = min(fact.params)
    named = {p.name.value for p in parameters(fn, skip_self=False)}
    extra = {k: _none_marked(v).fact for k, v in kwargs.items() if k not in named}
    given = handed[slot] if slot < len(handed) else load_dtype(extra)
    who = f"`{fn.name.value}`"
    return loaded_in(fact.origin, who, given, fact.layer, fact.dtype == DEFAULT_MARK)


def _made_in(actual: Sequence[Fact], fn: cst.FunctionDef) -> Fact | None:
    """A tensor a function makes in, or casts to, a dtype parameter (``randn_tensor(shape,
    dtype=dtype)``, ``x.to(dtype)``) is at each call a tensor of the dtype the call hands it
    (``prepare_latents(..., torch.float32)``): float32 there as if written down. None unless
    every argument it follows is one dtype, known and given on every path."""
    first = actual[0]
    if any(f.kind is not Kind.DTYPE or f.dtype != first.dtype or f.maybe for f in actual):
        return None
    if first.prec not in (Prec.FULL, Prec.HALF) or first.dtype is None or first.origin is None:
        return None
    cause = Cause.UPCAST if first.prec is Prec.FULL else Cause.CAST
    how = f"made {first.dtype} by `{fn.name.value}`, handed `{first.origin.text}`"
    return tensor_of_dtype(first.dtype, first.origin.node, cause, how)


def _handed_zeros(
    fact: Fact, summary: Fact, params: Sequence[cst.Param], bound: Sequence[Fact | None]
) -> Fact:
    """What a function returns (``fact``, its ``summary`` substituted) holds the zero rows its
    body made, or those of the input its summary marks (``Fact.zeros``): the argument's."""
    if fact.kind is Kind.SEQ and fact.items is not None:
        if summary.kind is not Kind.SEQ or summary.items is None:
            return fact
        if len(summary.items) != len(fact.items):
            return fact
        items = tuple(
            _handed_zeros(f, g, params, bound)
            for f, g in zip(fact.items, summary.items, strict=True)
        )
        return replace(fact, items=items) if items != fact.items else fact
    if not fact.is_tensor:
        return fact
    mark = summary.zeros if summary.is_tensor else None
    zeros = mark
    if mark is not None and isinstance(mark.node, cst.Param):
        index = next((i for i, p in enumerate(params) if p is mark.node), None)
        given = bound[index] if index is not None and index < len(bound) else None
        zeros = given.zeros if given is not None and given.is_tensor else None
    return replace(fact, zeros=zeros) if zeros != fact.zeros else fact


def _none_marked(op: Operand) -> Operand:
    """``None`` passed: a fact that says so (:func:`~mpcheck.engine.facts.is_none`)."""
    node = op.node
    return (
        Operand(node, none_literal(node))
        if isinstance(node, cst.Name) and node.value == "None"
        else op
    )


# (``x = ``, ``(x) =``, ``x \\\n=``, ``f(x  # note\n= 1)``). A comment runs to its line's end:
# matched as any prefix of itself (``#[^\n]*`` alone), a banner of ``#`` could be cut into
# comments in 2**n ways before the match failed, which hung the walk of a file holding one.
_ASSIGNS = re.compile(rb"(?:[\s)\\]|#[^\n]*\n)*=(?!=)")
_IDENT = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _written_before_equals(source: bytes, name: str) -> bool:
    """Whether ``source`` writes the name ``name`` followed by ``=`` (an assignment's
    target, or a keyword: more than the assignments, never fewer)."""
    if not source or not name.isascii():
        return True
    key = name.encode()
    at = source.find(key)
    while at >= 0:
        end = at + len(key)
        if (at == 0 or source[at - 1] not in _IDENT) and _ASSIGNS.match(source, end):
            return True
        at = source.find(key, end)
    return False


def _handed(fact: Fact, param: cst.Param) -> Fact:
    """A tensor input of a function the project calls only from scripts, datasets and plain
    classes, never from a module's, a pipeline's or a sampler's code: what it is handed is
    data (a loaded waveform, a batch) whose dtype the caller decides, not an activation of a
    model. With no cast in sight it has no dtype the engine knows (a model handed in keeps
    the model's dtype: it runs in it wherever it is called)."""
    if fact.kind is not Kind.TENSOR or fact.prec is not Prec.MODEL or not fact.from_input:
        return fact
    what = f"`{param.name.value}`, handed to the function by scripts and data code only"
    assert fact.origin is not None  # (``from_input``)
    return replace(fact, prec=Prec.UNKNOWN, origin=replace(fact.origin, text=what))


def _full_everywhere(
    fact: Fact, param: cst.Param, index: int, handed: str, *, used: bool = True
) -> Fact:
    """A tensor input that every call of the project hands no half value (loaded data, a
    numpy array, a factory without ``dtype=``, an upcast, an integer tensor: see
    :mod:`mpcheck.project.arguments`): no model's activation, so no premise that it is half
    holds. Its exact dtype may be float32 or float64, so it is known only as not half. One
    that every call hands an integer or bool tensor (``handed`` is ``INT``: token ids,
    ``argmax`` indices, a comparison's mask) is an integer tensor: no cast of a model
    changes it. One that every call hands a Python number (``NUMBER``) is no tensor at all;
    one the body never uses as a tensor, beside such inputs (not ``used``), brings no
    activation either."""
    if fact.kind is not Kind.TENSOR or fact.prec is not Prec.MODEL or not fact.from_input:
        return fact
    if handed == NUMBER:
        return Fact(Kind.OTHER, params=frozenset({index}))
    assert fact.origin is not None  # (``from_input``)
    if handed == INT and used:
        what = f"`{param.name.value}`, handed integer tensors by every call in the project"
        return replace(fact, prec=Prec.INT, dtype=None, origin=replace(fact.origin, text=what))
    what = f"`{param.name.value}`, handed full-precision values by every call in the project"
    if not used:
        what = f"`{param.name.value}`, never used as a tensor beside full-precision inputs"
    return replace(fact, prec=Prec.UNKNOWN, origin=replace(fact.origin, text=what))


def unproven(fact: Fact) -> Fact:
    """An input the function never uses as a tensor: taken for one, but maybe a number."""
    origin = fact.origin
    if not _provable(fact) or origin is None:
        return fact
    return replace(fact, origin=replace(origin, unproven=True))


def _provable(fact: Fact) -> bool:
    """Whether :func:`unproven` changes ``fact``: a tensor taken for one from somewhere."""
    return fact.kind is Kind.TENSOR and fact.origin is not None


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


def torch_module(base: str) -> bool:
    """``nn.Module`` and torch's own module classes, as a class's base resolves."""
    return base in T.MODULE_BASES or base.startswith("torch.nn.")


def _lightning(base: str) -> bool:
    """``L.LightningModule``, ``pl.LightningModule``, ``lightning.pytorch.LightningModule``."""
    root = base.partition(".")[0]
    return base.endswith("LightningModule") and root in ("lightning", "pytorch_lightning")


def _quantized(base: str) -> bool:
    """``bnb.nn.Linear8bitLt``: a bitsandbytes quantized layer."""
    return base.startswith("bitsandbytes.") and base.rsplit(".", 1)[-1] in T.QUANTIZED_LAYERS
