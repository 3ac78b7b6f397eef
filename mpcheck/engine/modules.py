"""``nn.Module`` objects: construction, calls, casts, submodules, and modules cast apart.

A module fact carries its dtype and layer; calling it yields its output's fact. When a
part is cast apart from its model (``model.half(); model.head.float()``) the class is
walked again with the caller's facts to find the calls the split changed.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from mpcheck.engine.autocast import Regions
from mpcheck.engine.base import CallRecord, Walk
from mpcheck.engine.binding import passed
from mpcheck.engine.buffers import as_built, buffer_names, held, read_back, registered
from mpcheck.engine.factory_kwargs import unhanded
from mpcheck.engine.facts import (
    UNKNOWN,
    UNKNOWN_TENSOR,
    Cause,
    Fact,
    Kind,
    Origin,
    Prec,
    placed,
    promote,
    tensor_of_dtype,
)
from mpcheck.engine.frames import ClassInfo, Env, Frame, lineage
from mpcheck.engine.functions import Definitions
from mpcheck.engine.guards import trains_if
from mpcheck.engine.handed import cast_by_imported, cast_module, param_cast
from mpcheck.engine.imported import call_result, fact_of
from mpcheck.engine.loads import load_dtype, mark_default, unhanded_is_default
from mpcheck.engine.own_parts import inherited_method, own_part
from mpcheck.engine.pipelines import shares
from mpcheck.engine.placeholders import placeholder
from mpcheck.engine.scripts import (
    fed_arguments,
    feeds_its_weights,
    half_meets_float32,
    model_of,
    takes_half_input,
)
from mpcheck.engine.sites import CallSite, FedElsewhere, InnerCall, Operand, Owner, Scope
from mpcheck.engine.splits import changed_calls
from mpcheck.engine.zero_rows import bias_free, made
from mpcheck.knowledge import torch_api as T
from mpcheck.project.names import dotted
from mpcheck.project.summary import ClassSummary, Function, Value

MODULE_CASTS = {"half": "float16", "float": "float32", "double": "float64", "bfloat16": "bfloat16"}
NON_MODULE_HINTS = ("Tokenizer", "Processor", "Scheduler", "FeatureExtractor", "Config", "Pipeline")
FP32_LAYER = "<float32 output>"  # the layer of a library module that returns float32


class Modules:
    """The part that tracks modules: what they are built as, cast to and return."""

    def __init__(self, file: Walk, regions: Regions, definitions: Definitions) -> None:
        self.file = file
        self.regions = regions
        self.definitions = definitions
        self._buffers: dict[cst.ClassDef, dict[str, bool]] = {}  # (``_buffer_names``)

    def construct_module(
        self,
        node: cst.Call,
        layer: str | None,
        frame: Frame,
        kwargs: dict[str, Operand],
        *,
        library: bool = False,
    ) -> Fact:
        """A freshly built nn.Module, and whether it keeps zero rows (:func:`bias_free`);
        ``library``: of torch's or a library's class, whatever the project names its own."""
        built = self._construct_module(node, layer, frame, kwargs, library)
        return bias_free(replace(built, library=True) if library else built, node, kwargs)

    def own_class(self, module: Fact) -> ClassInfo | None:
        """The class of this file ``module`` is an instance of; None for torch's or a
        library's class of the same name (``nn.Embedding`` beside a project ``Embedding``)."""
        return None if module.library else self.file.classes.get(module.layer or "")

    def imported_class(self, module: Fact) -> ClassSummary | None:
        """The class of another project file ``module`` is an instance of, as
        :meth:`own_class` for this file's."""
        return None if module.library else self.file.imported.get(module.layer or "")

    def _construct_module(
        self,
        node: cst.Call,
        layer: str | None,
        frame: Frame,
        kwargs: dict[str, Operand],
        library: bool = False,
    ) -> Fact:
        """A freshly built nn.Module: in a model's __init__ it follows the model's dtype.

        Unless it is built with a literal dtype (``nn.LayerNorm(d, dtype=torch.float32)``):
        a model made half at construction (``from_pretrained(torch_dtype=torch.float16)``
        sets the default dtype while ``__init__`` runs) keeps that part in its own dtype.
        """
        dtype = kwargs.get("dtype")
        if dtype is None and not library:  # (a class's own default ``dtype=``)
            dtype = self.definitions.constructor_dtype(node, layer)
        apart = self.definitions.built_apart(frame) if dtype is None else None
        if apart is not None:
            origin = Origin(node, Cause.MODEL_CAST, apart)
            return Fact(Kind.MODULE, Prec.FULL, "float32", origin, layer=layer)
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
            if f.prec is Prec.FULL and not f.maybe and self._cast_with_model(frame):
                return Fact(Kind.MODULE, Prec.MODEL, None, None, layer=layer)
            text = f"built with dtype={self.file.code(dtype.node)}"
            if dtype is not kwargs.get("dtype") and f.origin is not None:
                text = f.origin.text  # the class's own default: ``dtype=torch.float32``
            origin = Origin(
                node, Cause.MODEL_CAST, text, self.file.dtype_source(dtype), place=placed(f)
            )
            return Fact(Kind.MODULE, f.prec, f.dtype, origin, layer=layer, maybe=f.maybe)
        origin = Origin(node, Cause.LITERAL, "built in float32 (the default)")
        return Fact(Kind.MODULE, Prec.FULL, "float32", origin, layer=layer)

    def _cast_with_model(self, frame: Frame) -> bool:
        """Whether a part built in ``__init__`` with a literal float dtype is cast with its
        model: every half path to the class casts it once built (``model.half()`` walks
        every floating parameter), none builds it under a half default dtype
        (``from_pretrained(torch_dtype=...)`` leaves an explicit ``dtype=`` alone)."""
        info = self._class_of_frame(frame)
        if info is None or not frame.in_init:
            return False
        return self.file.cast_once_built(info, info.node.name.value)

    def loaded_model(
        self, node: cst.Call, path: str, kwargs: dict[str, Operand], function: Scope | None = None
    ) -> Fact:
        """``Model.from_pretrained(...)``: in its ``torch_dtype=``; ``function``: the scope of
        the load, whose parameter's dtype it may be (:mod:`mpcheck.engine.loads`)."""
        if any(h in path for h in NON_MODULE_HINTS):
            # ``Pipeline.from_pretrained(..., unet=unet)`` holds ``unet`` itself (not recast)
            shared = shares(kwargs) if "Pipeline" in path else None
            return UNKNOWN if shared is None else Fact(Kind.OTHER, train=shared)
        dtype = load_dtype(kwargs)
        if dtype is not None and dtype.fact.kind is Kind.DTYPE:
            f = dtype.fact
            text = f"loaded with {self.file.code(dtype.node)}"
            origin = Origin(node, Cause.MODEL_CAST, text, self.file.dtype_source(dtype))
            # (a parameter's dtype, ``torch_dtype=torch_dtype`` or through ``**kwargs``: each
            # call of the function loads in the dtype it hands, see ``Definitions.substitute``)
            params = f.params if f.prec is Prec.UNKNOWN else frozenset()
            loaded = Fact(Kind.MODULE, f.prec, f.dtype, origin, params, maybe=f.maybe)
            fn = function.function if function is not None else None
            if params and fn is not None:
                method = function is not None and function.class_name is not None
                loaded = mark_default(loaded, unhanded_is_default(fn, min(params), method))
            return loaded
        if dtype is not None and _auto(dtype.node):
            # the checkpoint's stored dtype (its config's ``torch_dtype``): half if it is
            # stored so, which the code does not show (a premise)
            keyword = "torch_dtype" if "torch_dtype" in kwargs else "dtype"
            code = f"{keyword}={self.file.code(dtype.node)}"
            text = f"loaded with `{code}`: half if its checkpoint is stored in half"
            origin = Origin(node, Cause.CONTRACT, text)
            return Fact(Kind.MODULE, Prec.HALF, None, origin, maybe=True)
        origin = Origin(node, Cause.LITERAL, "loaded in float32 (the default)")
        return Fact(Kind.MODULE, Prec.FULL, "float32", origin)

    def member_layer(self, module: Fact, attr: str) -> tuple[str | None, bool]:
        """The layer of ``model.<attr>`` when ``model``'s class is defined in this file, and
        whether it is torch's or a library's class (:attr:`Fact.library`).

        ``model = Net(); model.head`` is the ``nn.Linear`` that ``Net.__init__`` built as
        ``self.head``; it has the model's dtype until something casts it on its own.
        """
        info = self.own_class(module)
        imported = self.imported_class(module)
        if info is None and imported is not None:  # a class of another project file
            part = imported.attrs.get(attr)
            kept = part is not None and part.kind == Kind.MODULE.value
            return (part.layer if part is not None and kept else None), False
        if info is None or not info.is_module:
            return None, False
        self.definitions.analyse_class(info)
        fact = info.attrs.get("self." + attr)
        if fact is None or fact.kind is not Kind.MODULE:
            return None, False
        return fact.layer, fact.library

    def member_module(
        self, module: Fact, method: str, args: tuple[Operand, ...], kwargs: dict[str, Operand]
    ) -> Fact | None:
        """What ``model.<method>(...)`` returns when that method of ``model``'s local class
        returns one of its modules (``get_decoder``, ``fuse``): the module, in ``model``'s dtype.
        """
        info = self.own_class(module)
        fn = info.methods.get(method) if info is not None and info.is_module else None
        if info is None or fn is None or method == "forward" or fn in self.definitions.in_progress:
            return None
        self.definitions.analyse_class(info)
        # (a method only its owners call: walked with what the first call hands it)
        call = (args, kwargs, True) if method in self.definitions.part_helpers else None
        made = self.definitions.substitute(
            self.definitions.summary(fn, info, call), fn, args, kwargs, skip_self=True
        )
        if made.kind is not Kind.MODULE:
            return None
        if made.prec is Prec.MODEL:
            return replace(made, prec=module.prec, dtype=module.dtype, origin=module.origin)
        return made

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
        callee: cst.BaseExpression | None = None,
        runs: tuple[Fact, str] | None = None,
    ) -> Fact:
        """``self.proj(x)``; ``callee`` names the module when it is not ``node.func``
        (``checkpoint(block, x)``); ``runs``: the model and its method that the call runs
        when that is not ``forward`` (``vae.decode(z)``)."""
        layer = module.layer
        first = args[0].fact if args else UNKNOWN
        if frame.scope.autocast is None:  # a model ``accelerator.prepare`` wrapped in autocast
            region = self.file.training.state(frame).forward_region(module)
            if region is not None:
                frame = Frame(frame.env, replace(frame.scope, autocast=region), frame.returns)
        if layer in T.PASS_THROUGH_LAYERS:
            return first
        held = callee or node.func  # ``self.lora_dropout[name](x)``: a dropout, as named
        held = held.value if isinstance(held, cst.Subscript) else held
        if layer is None and first.is_tensor and T.dropout_named(dotted(held)):
            return first
        if layer == FP32_LAYER and module.origin is not None:
            made = module.origin.text  # ``self.time_proj(t)``: sinusoids computed in float32
            text = f"returned in float32 by `{path or 'module'}`, {made},"
            origin = Origin(node, Cause.UPCAST, text, place=module.origin.place)
            result = Fact(Kind.TENSOR, Prec.FULL, "float32", origin)
            receiver = Operand(callee or node.func, module)
            return self.file.emit(
                CallRecord(node, result, args, kwargs, receiver=receiver, path=path), frame
            )
        op, aten = T.LAYERS.get(layer or "", (None, ""))
        own, imported = self.own_class(module), self.imported_class(module)
        if op is None and takes_half_input(module, path, own, frame, imported):
            op = T.OpKind.MODEL
        elif op is None and feeds_its_weights(module, imported, frame):
            op = T.OpKind.MODEL  # ``self.x_embedder(x)``: a patch embedding of another file
        fed: tuple[Operand, ...] = ()
        if op is T.OpKind.MODEL:  # ``self.fusion_model(x, residual)``: ``residual`` too
            fed = fed_arguments(module, imported, frame, args, kwargs)
        if layer in T.LOSS_LAYERS:  # no weights of its own: the loss follows its inputs
            aten = T.LOSS_LAYERS[layer]
            tensors = [a.fact for a in args if a.fact.is_tensor]
            result = promote(tensors, node) if tensors else UNKNOWN_TENSOR
            result = replace(result, zero_dim=True)  # reduction="mean" (the default): 0-dim
        elif module.prec is Prec.UNKNOWN:
            result = UNKNOWN_TENSOR if layer is None else replace(first, params=frozenset())
        elif own is not None and "forward" in own.methods:
            result = self._instance_output(
                node, module, path, self.class_forward(own, args, kwargs), frame
            )
        elif layer and imported is not None and "forward" in imported.methods:
            result = self._instance_output(
                node, module, path, self.imported_forward(node, layer, args, kwargs), frame
            )
        elif layer is None and first.prec is Prec.FULL and module.prec is Prec.MODEL:
            result = UNKNOWN_TENSOR  # a custom module fed float32 may well compute in float32
        elif layer is None and first.floating and first.cause is Cause.AUTOCAST:
            result = UNKNOWN_TENSOR  # and one fed autocast's half may well keep it (a ReLU)
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
            what, place = f"the output of `{path or 'module'}`", None
            if module.origin is not None and isinstance(module.origin.node, cst.Param):
                what += f" ({module.origin.text})"  # a module handed in: say what it is
                place = module.origin.place
            origin = Origin(node, Cause.ACTIVATION, what, place=place)
            result = Fact(Kind.TENSOR, module.prec, module.dtype, origin, maybe=module.maybe)
        if split is None:
            split = self.split_call(module, path, "forward", args, kwargs, frame)
        inner, returned = split
        through: tuple[InnerCall, ...] = ()
        if not inner and returned is None:
            through, returned = self.follow_float32(module, args, kwargs, frame)
        if not inner and not through:
            through = self.follow_zero_rows(module, args, kwargs, frame)
        fed_half: tuple[InnerCall, ...] = ()
        fed_elsewhere = None
        model, method = runs or (module, "forward")
        if not inner and not through:
            fed_half = self.follow_half(model, method, args, kwargs, frame)
        if not inner and not through and not fed_half:
            fed_elsewhere = self.half_elsewhere(node, model, method, args, kwargs, frame)
        if returned is not None and returned.floating:
            result = returned
        if (
            frame.scope.autocast
            and frame.scope.autocast.active
            and frame.scope.autocast.recasts(aten)
        ):
            result = self.regions.autocast_result(node, aten, frame.scope.autocast, result)
        elif frame.scope.autocast and frame.scope.autocast.active and not aten and result.is_tensor:
            # A model or block whose ops we do not see: under autocast it computes in the
            # autocast dtype (its matmuls/convs are recast), whatever its weights are.
            what = f"the output of `{path or 'module'}` under autocast"
            result = Fact(Kind.TENSOR, Prec.MODEL, None, Origin(node, Cause.AUTOCAST, what))
        elif frame.scope.autocast is None and aten:  # (``nn.LayerNorm`` under its callers')
            result = self.regions.caller_result(node, aten, frame, result)
        receiver = Operand(callee or node.func, module)
        owner = _owner(path, frame.env)
        return self.file.emit(
            CallRecord(
                node,
                result,
                args,
                kwargs,
                receiver=receiver,
                op=op,
                aten=aten,
                path=path,
                owner=owner,
                inner=inner,
                through=through,
                fed=fed,
                fed_half=fed_half,
                fed_elsewhere=fed_elsewhere,
            ),
            frame,
        )

    def _instance_output(
        self, node: cst.Call, module: Fact, path: str | None, result: Fact, frame: Frame
    ) -> Fact:
        """What a project model's ``forward`` returns in the model's dtype, outside a
        model's code: this instance's dtype (``h = unet(x)`` of a ``unet`` cast to half is
        half), whether its class is in this file or another."""
        if result.prec is not Prec.MODEL or not result.is_tensor or frame.scope.in_module:
            return result
        result = replace(result, prec=module.prec, dtype=module.dtype, maybe=module.maybe)
        if path is not None:
            origin = Origin(node, Cause.ACTIVATION, f"the output of `{path}`")
            result = replace(result, origin=origin)
        return result

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
        reporting = self.file.reporting
        found = self._forward_of(module)
        if found is None or reporting.recording or not reporting.listener.wants("calls"):
            return (), None
        info, fn = found
        self.definitions.analyse_class(info)
        with_args, returned = self._walk_as(fn, info, module, {}, args, kwargs, frame)
        plain, _ = self._walk_as(fn, info, module, {}, (), {}, frame)
        return changed_calls(with_args, plain), returned

    def follow_half(
        self,
        module: Fact,
        method: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> tuple[InnerCall, ...]:
        """``vae(latents)`` in a script: half activations handed to a model kept float32.

        torch never casts a layer's input to its weights: a float32 Linear, conv or RNN
        refuses a half input ("mat1 and mat2 must have the same dtype", "Input type
        (c10::Half) and bias type (float) should be the same"); a norm takes it. Only where
        both sides rest on evidence: the model's class is in this file and the project
        only ever builds it in float32 (no cast, load or world-opening path reaches it),
        this value of it was built or loaded in float32, an argument is half by a cast the
        code makes, and no autocast covers the call. The ``method`` run (``forward``, or
        ``vae.decode``) is walked again with the call's facts; the weight calls that get a
        half input are returned."""
        if not _half_meets_float32(module, (*args, *kwargs.values()), frame):
            return ()
        reporting = self.file.reporting
        found = self._forward_of(module, method)
        if found is None or reporting.recording or not reporting.listener.wants("calls"):
            return ()
        info, fn = found
        if not self.file.half_evidence(info, info.node.name.value).float32:
            return ()
        self.definitions.analyse_class(info)
        walked, _ = self._walk_as(fn, info, module, {}, args, kwargs, frame)
        return tuple(InnerCall(site, None) for site in walked if half_meets_float32(site))

    def half_elsewhere(
        self,
        node: cst.Call,
        module: Fact,
        method: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> FedElsewhere | None:
        """:meth:`follow_half` for a model whose class is in another project file: the
        class's summary says which layer of the ``method`` run gets which of its inputs as
        they came (``ClassSummary.feeds``), and the project's evidence for that class (by
        its qualified name, through this file's imports) says it is only built in float32.
        The call's anchor (``node.func``) points at that layer in the other file."""
        summary = self.imported_class(module)
        if summary is None or not summary.feeds or self.own_class(module) is not None:
            return None
        if any(a.star for a in node.args):  # (``*inputs``: positions not known)
            return None
        if not _half_meets_float32(module, (*args, *kwargs.values()), frame):
            return None
        function = summary.methods.get(method)
        if function is None or not self.file.reporting.listener.wants("calls"):
            return None
        for name, at, place in summary.feeds:
            if name != method:
                continue
            given = [
                args[i] if i < len(args) else kwargs.get(function.params[i])
                for i in at
                if i < len(function.params)
            ]
            if len(given) != len(at) or not all(o is not None and _half(o.fact) for o in given):
                continue
            found = self.file.imported_evidence(module.layer or "", summary)
            if found is None or not found.float32:
                return None
            operand = given[0]
            assert operand is not None
            what = self.file.code(operand.node)
            text = f"`{place.text}` gets `{what}` in half precision here"
            self.file.elsewhere.setdefault(node.func, replace(place, text=text))
            return FedElsewhere(operand, place.text, place)
        return None

    def _forward_of(
        self, module: Fact, method: str = "forward"
    ) -> tuple[ClassInfo, cst.FunctionDef] | None:
        """The ``forward`` (or ``method``) of ``module``'s class when it is in this file and
        may be walked again here (not already being walked, within the re-walk depth)."""
        info = self.own_class(module)
        fn = info.methods.get(method) if info is not None and info.is_module else None
        if info is None or fn is None or fn in self.definitions.in_progress:
            return None
        return (info, fn) if self.file.reporting.may_rewalk else None

    def follow_zero_rows(
        self,
        module: Fact,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> tuple[InnerCall, ...]:
        """``self.attention(windows)`` of zero-padded windows: where the zero rows go inside.

        A ``forward`` is summarised with its inputs as they may be, so a guard that fails only
        on an exact-zero row (``F.normalize``) cannot tell the rows it is handed. When the class
        is in this file and an argument holds rows the code made exactly 0
        (:mod:`mpcheck.engine.zero_rows`), its ``forward`` is walked again with the call's facts
        (nested calls too, within the re-walk depth); the calls whose operands hold such rows
        are returned.
        """
        if not any(o.fact.is_tensor and made(o.fact.zeros) for o in (*args, *kwargs.values())):
            return ()
        reporting = self.file.reporting
        found = self._forward_of(module)
        if found is None or not (reporting.listener.wants("calls") or reporting.recording):
            return ()
        info, fn = found
        self.definitions.analyse_class(info)
        walked, _ = self._walk_as(fn, info, module, {}, args, kwargs, frame)
        return tuple(InnerCall(site, None) for site in walked if _holds_zero_rows(site))

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
        info = self.own_class(module)
        fn = info.methods.get(method) if info is not None and info.is_module else None
        if (
            info is None
            or fn is None
            or path is None
            or module.prec not in (Prec.FULL, Prec.HALF, Prec.MODEL)
            or fn in self.definitions.in_progress
            or not self.file.reporting.may_rewalk
            or not (self.file.reporting.listener.wants("calls") or self.file.reporting.recording)
        ):
            return (), None
        prefix = path + "."
        parts = {
            "self." + key[len(prefix) :]: fact
            for key, fact in frame.env.items()
            if key.startswith(prefix) and fact.kind is Kind.MODULE
        }
        self.definitions.analyse_class(info)
        if self.file.reporting.recording:
            # Already re-walking a split module: walk this part of it in line.
            sites, returned = self._walk_as(fn, info, module, parts, args, kwargs, frame)
            self.file.reporting.record(sites)
            return (), returned
        full = module.prec is Prec.FULL
        if not any(
            f.prec in (Prec.FULL, Prec.HALF, Prec.MODEL) and (f.prec is Prec.FULL) != full
            for f in parts.values()
        ):
            return (), None
        split_sites, returned = self._walk_as(fn, info, module, parts, args, kwargs, frame)
        plain_sites, _ = self._walk_as(fn, info, module, {}, args, kwargs, frame)
        return changed_calls(split_sites, plain_sites), returned

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
        frame = self.definitions.function_frame(fn, info, None)
        for key, fact in list(frame.env.items()):
            if (key == "self" or key.startswith("self.")) and fact.prec is Prec.MODEL:
                if fact.kind is Kind.MODULE:
                    frame.env[key] = replace(module, layer=fact.layer, zeros=fact.zeros)
                elif fact.kind is Kind.TENSOR:
                    frame.env[key] = replace(
                        fact, prec=module.prec, dtype=module.dtype, maybe=module.maybe
                    )
        frame.env["self"] = module
        frame.env.update(parts)
        frame.env.update(passed(fn, args, kwargs, skip_self=True))
        if frame.scope.autocast is None and outer.scope.autocast is not None:
            frame.scope = replace(frame.scope, autocast=outer.scope.autocast)
        recorded: list[CallSite] = []
        self.definitions.in_progress.add(fn)
        try:
            with self.file.reporting.recording_into(recorded):
                self.file.block(
                    fn.body.body if isinstance(fn.body, cst.IndentedBlock) else [], frame
                )
        finally:
            self.definitions.in_progress.discard(fn)
        return recorded, frame.returns

    def construct_imported(
        self,
        node: cst.Call,
        name: str,
        cls: ClassSummary,
        frame: Frame,
        kwargs: dict[str, Operand],
    ) -> Fact:
        """An instance of a module class of another project file (``RMSNormFp32(dim)``): built
        like one of this file's; its calls go by the class's summary."""
        self.file.imported[name] = cls
        return replace(self.construct_module(node, name, frame, kwargs), project=True)

    def project_value(self, node: cst.BaseExpression) -> Fact | None:
        """A module-level value of another project file (``DTYPE = torch.float16``, a model
        cast at its top level), or None when the project knows none."""
        located = self.file.imports.locate(node) if self.file.project is not None else None
        leaf = located[0].rpartition(".")[2] if located is not None else ""
        if leaf[:1].isupper() and not leaf.isupper():
            return None  # ``norm_layer=LayerNorm``: a class, never a value worth a summary
        value = self.file.project(*located) if located is not None and self.file.project else None
        if located is None or not isinstance(value, Value):
            return None
        fact = fact_of(value, node, self.file.code(node))
        if value.origin is not None:
            self.file.elsewhere[node] = value.origin  # a finding pointing here points there too
        if fact.kind is Kind.MODULE and fact.layer and fact.layer not in self.file.classes:
            module = located[0].rpartition(".")[0]
            made = (
                self.file.project(f"{module}.{fact.layer}", located[1])
                if self.file.project
                else None
            )
            if isinstance(made, ClassSummary) and made.is_module:
                self.file.imported.setdefault(fact.layer, made)
        return fact

    def imported_forward(
        self, node: cst.Call, layer: str, args: tuple[Operand, ...], kwargs: dict[str, Operand]
    ) -> Fact:
        """Calling an instance of a class of another project file: its ``forward``'s summary."""
        forward = self.file.imported[layer].methods["forward"]
        result = call_result(node, f"{layer}.forward", forward, args, kwargs)
        place = forward.returns.origin
        decided = result.prec in (Prec.FULL, Prec.HALF)  # not "the model's", which is no news
        if (
            place is not None
            and decided
            and result.origin is not None
            and result.origin.node is node
        ):
            self.file.elsewhere[node] = place  # a finding pointing here points there too
        return result if result.kind in (Kind.TENSOR, Kind.SEQ) else UNKNOWN_TENSOR

    def class_forward(
        self, info: ClassInfo, args: tuple[Operand, ...], kwargs: dict[str, Operand]
    ) -> Fact:
        """Calling an instance of a class defined in this file: its ``forward``'s summary."""
        fn = info.methods["forward"]
        result = self.definitions.substitute(
            self.definitions.summary(fn, info), fn, args, kwargs, skip_self=True
        )
        return result if result.kind in (Kind.TENSOR, Kind.SEQ) else UNKNOWN_TENSOR

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
        cast = self.module_cast(node, method, args, kwargs, script=frame.scope.script)
        if cast is not None and frame.scope.bf16_mode is not None and cast.origin is not None:
            if cast.prec is Prec.HALF and (cast.dtype is None or cast.maybe):  # the working
                # dtype (half on some runs), where only bfloat16 runs go (``elif
                # args.mixed_precision == "bf16":``): no float16 there; bfloat16 at most
                text = f"{cast.origin.text}, bfloat16 where only bfloat16 runs go"
                cast = replace(cast, dtype="bfloat16", origin=replace(cast.origin, text=text))
        if cast is not None:
            new = cast_module(module, cast)
            if path is not None:
                if not frame.scope.in_module:
                    self.file.training.round_trip(path, module, cast, frame)
                frame.rebind(path, new)
            return new
        if method == "upcast_vae" and path is not None:  # diffusers: the VAE runs in float32
            text = f"upcast to float32 by `{self.file.code(node)}`"
            upcast = tensor_of_dtype("float32", node, Cause.UPCAST, text)
            frame.env[f"{path}.vae"] = replace(upcast, kind=Kind.MODULE)
            return UNKNOWN
        if method in ("register_buffer", "register_parameter") and path is not None:
            self.register_tensor(node, method, path, args, kwargs, frame)
            return UNKNOWN
        params = self.file.training.parameters(method, module, path, frame.scope.flags)
        if params is not None:  # linked back to the module, for the optimizers built from them
            return params
        if method in ("parameters", "named_parameters", "buffers", "modules", "children"):
            return Fact(Kind.SEQ, elem=Fact(Kind.TENSOR, module.prec, module.dtype, module.origin))
        if method == "to" and "dtype" in kwargs and module.prec is Prec.FULL:
            return replace(module, prec=Prec.UNKNOWN, dtype=None, origin=None)  # to a dtype we
            # do not know (``.to(dtype=self.pretrained_model.dtype)``): no longer float32
        if method == "requires_grad_" and path is not None and not frame.scope.in_module:
            given = args[0] if args else kwargs.get("requires_grad")
            trains_if(frame.env, path, given.node if given is not None else cst.Name("True"))
        if method in ("eval", "train", "requires_grad_", "cuda", "cpu", "apply", "zero_grad", "to"):
            return module  # ``.to(device)``: a dtype cast was handled above
        if isinstance(node.func, cst.Attribute) and dotted(node.func.value) == "self":
            found = self.definitions.local_method(self._class_of_frame(frame), method)
            if found is not None:
                info, fn = found
                rewalk = self.file.reporting.recording and self.file.reporting.may_rewalk
                if rewalk and fn not in self.definitions.in_progress:
                    # Re-walking a module cast apart (``split_call``): follow it into its helpers.
                    parts = {k: v for k, v in frame.env.items() if k.startswith("self.")}
                    me = frame.env.get("self", module)
                    sites, returned = self._walk_as(fn, info, me, parts, args, kwargs, frame)
                    self.file.reporting.record(sites)
                    return returned or UNKNOWN
                summary = self.definitions.summary(fn, info, (args, kwargs, True))
                return own_part(
                    self.definitions.substitute(summary, fn, args, kwargs, skip_self=True), module
                )
            inherited = inherited_method(self._class_of_frame(frame), method, self.file.classes)
            if inherited is not None:  # ``self.get_base_layer()`` of a base in another file
                returned = call_result(node, f"self.{method}", inherited, args, kwargs)
                if returned.kind is Kind.MODULE:
                    return own_part(returned, module)
        part = self.member_module(module, method, args, kwargs)
        if part is not None:  # ``self.model.get_decoder()``: a submodule, not an output
            return part
        sub, library = self.member_layer(module, method)
        if sub is not None and path is not None:  # ``model.head(x)``: a submodule, not a method
            part = replace(module, layer=sub, library=library)
            return self.module_call(node, part, f"{path}.{method}", args, kwargs, frame)
        if any(o.fact.kind is Kind.DTYPE for o in (*args, *kwargs.values())):
            # ``self._cast_input_dtype(x, torch.float32)``: a helper we cannot see, handed a
            # dtype, may well cast to it
            return UNKNOWN_TENSOR
        if method in ("forward", "__call__", "encode", "decode", "sample") or (
            module.prec is not Prec.UNKNOWN and not T.helper_method(method)
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
                callee=model_of(node, method),
                runs=(module, "forward" if method == "__call__" else method),
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
        """``self.register_buffer("name", t)``: bind ``self.name`` (see :mod:`buffers`)."""
        info = self._class_of_frame(frame)
        pretrained = info is not None and info.pretrained
        if info is not None and pretrained:
            pretrained = self.file.loaded_under_dtype(info.node.name.value)
        kept = None if info is None else self.file.buffers_kept(info.node.name.value)
        in_module = frame.scope.in_module
        bound = registered(node, method, args, kwargs, in_module, pretrained, kept)
        if bound is None:
            return
        tensor = args[1] if len(args) > 1 else kwargs.get("tensor", kwargs.get("param"))
        if (
            info is not None
            and tensor is not None
            and frame.in_init
            and path == "self"
            and placeholder(info.node, bound[0], tensor.node, self.file.imports.resolve)
        ):  # ``register_buffer("pe", torch.zeros(0))`` rebuilt when too small: no dtype
            frame.env[f"self.{bound[0]}"] = UNKNOWN_TENSOR
            return
        if in_module and bound[1].prec is Prec.MODEL and tensor is not None:
            kept_built = unhanded(self.file, frame, tensor.fact)
            bound = bound if kept_built is None else (bound[0], kept_built)
        key = f"{path}.{bound[0]}"
        frame.env[key] = bound[1]
        built = as_built(bound[1], args, kwargs) if frame.in_init and path == "self" else None
        if built is not None and info is not None:
            # read back in ``__init__`` it is what was registered; the other methods get the
            # model's dtype (``_walk_function`` hands them ``info.registered``)
            frame.env[key] = built
            info.registered[key] = (built, bound[1])

    def stored(
        self, holder: cst.BaseExpression, attr: str, at: cst.CSTNode, value: Fact, frame: Frame
    ) -> Fact:
        """``self.pe = pe`` (``holder.attr = value``, spelled at ``at``; or ``setattr(self,
        "pe", pe)``) where ``pe`` is a buffer the class registers by name: the value is
        stored as that buffer (:func:`buffers.buffer_names`). Stored while the model is built
        (``__init__``, or a helper only construction calls), it is cast with the module like
        a buffer registered with it (:func:`buffers.held`); stored later (in ``forward``,
        after any cast), it keeps its own dtype. Read back in the method that stored it, it
        is what was stored when that was spelled float32 (:func:`buffers.read_back`)."""
        info = self._class_of_frame(frame)
        if info is None or not frame.scope.in_module or dotted(holder) != "self":
            return value
        if not value.is_tensor or not self.file.before_cast(frame.scope.function):
            return value
        transient = next(
            (
                names[attr]
                for cls in lineage(self.file.classes, info)
                if attr in (names := self._buffer_names(cls))
            ),
            None,
        )
        if transient is None:
            return value
        name = info.node.name.value
        pretrained = info.pretrained and self.file.loaded_under_dtype(name)
        kept = self.file.buffers_kept(name)
        model = held(at, value, "buffer", True, pretrained, kept, transient)
        if model.prec is Prec.MODEL:
            model = unhanded(self.file, frame, value) or model
        built = read_back(model, value)
        if built is None:
            return model
        info.registered[f"self.{attr}"] = (built, model)
        return built

    def _buffer_names(self, info: ClassInfo) -> dict[str, bool]:
        found = self._buffers.get(info.node)
        if found is None:
            found = self._buffers[info.node] = buffer_names(info.node)
        return found

    def set_tensors(
        self,
        node: cst.Call,
        position: int,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> None:
        """``set_module_tensor_to_device(model, name, device, value=v, dtype=dtype)`` with a
        computed ``name`` (a loop over a state dict's keys): the model is cast to ``dtype``
        in place. A literal name sets one tensor only, and no ``dtype`` keeps each dtype."""
        dtype = kwargs.get("dtype") or (args[position] if len(args) > position else None)
        named = kwargs.get("tensor_name") or (args[1] if len(args) > 1 else None)
        if not args or dtype is None or named is None or isinstance(named.node, cst.SimpleString):
            return
        if isinstance(dtype.node, cst.Name) and dtype.node.value == "None":
            return  # (each tensor keeps its dtype)
        fn = frame.scope.function
        found = param_cast(fn, args[0].node, dtype.node)
        if found is not None and fn is not None:  # what a call from another file does
            self.file.param_casts.setdefault(fn, set()).add(found)
        module, path = args[0].fact, dotted(args[0].node)
        if module.kind is Kind.MODULE and path is not None:
            self._cast_in_place(node, path, module, dtype, frame)

    def cast_handed(
        self,
        node: cst.Call,
        function: Function,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> None:
        """A function of another file that casts the model handed to it in place
        (:attr:`Function.casts`): the caller's variable is cast at this call."""
        for path, model, dtype in cast_by_imported(function.casts, function.params, args, kwargs):
            self._cast_in_place(node, path, model.fact, dtype, frame)

    def _cast_in_place(
        self, node: cst.Call, path: str, model: Fact, dtype: Operand, frame: Frame
    ) -> None:
        """``model.to(dtype=dtype)`` done by a call the model is handed to: ``path`` is cast."""
        cast = self.module_cast(node, "to", (), {"dtype": dtype}, script=frame.scope.script)
        if cast is not None:
            frame.rebind(path, cast_module(model, cast))

    def _class_of_frame(self, frame: Frame) -> ClassInfo | None:
        name = frame.scope.class_name
        return self.file.classes.get(name) if name else None

    def module_cast(
        self,
        node: cst.Call,
        method: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        *,
        script: bool = False,
    ) -> Fact | None:
        """The model's new dtype after ``.half()``/``.to(dtype)``; None if not a cast.

        In a script or trainer (``script``), a cast to a dtype that is not a float32 literal
        (``unet.to(dtype=weight_dtype)`` with a ``weight_dtype`` parameter) is a cast to the
        working dtype, which may be half: the model is half on some paths.
        """
        if method in MODULE_CASTS:
            dt = MODULE_CASTS[method]
            cause = Cause.MODEL_CAST
            return tensor_of_dtype(dt, node, cause, f"cast to {dt} by `.{method}()`")
        if method in ("to", "type"):
            cand = [kwargs["dtype"]] if "dtype" in kwargs else list(args)
            for op in cand:
                if op.fact.kind is Kind.DTYPE and op.fact.prec is not Prec.UNKNOWN:
                    text = f"cast by `.{method}({self.file.code(op.node)})`"
                    f = op.fact
                    origin = Origin(node, Cause.MODEL_CAST, text, self.file.dtype_source(op))
                    return Fact(Kind.MODULE, f.prec, f.dtype, origin, maybe=f.maybe)
                if script and self.working_dtype(op, "dtype" in kwargs):
                    code = self.file.code(op.node)
                    text = f"cast to the working dtype `{code}` (half when that is float16)"
                    origin = Origin(node, Cause.MODEL_CAST, text)
                    # (a parameter's dtype: the caller's argument decides, see ``fact_of``)
                    params = op.fact.params
                    return Fact(Kind.MODULE, Prec.HALF, None, origin, params, maybe=True)
        return None

    def working_dtype(self, op: Operand, keyword: bool) -> bool:
        """A dtype a script casts to that it does not spell: a parameter (``dtype``), or a
        value it cannot see (``weight_dtype = prepare_dtype(args)``, ``self.train_dtype``)
        passed as ``dtype=`` or under a name that says it is one. Half on some runs. Not
        one a helper returns on some runs only, None on the others (sd-scripts'
        ``match_mixed_precision``: the working dtype only under the flags that train the whole
        model in it): which runs those are is not known here, no evidence of half."""
        fact = op.fact
        if fact.kind is Kind.DTYPE:
            # (``.to(dtype=x.dtype)`` follows ``x``, not a setting)
            return bool(fact.params) and not fact.maybe
        if fact != UNKNOWN:
            return False
        return keyword or "dtype" in self.file.code(op.node).lower()


def _half(fact: Fact) -> bool:
    """A half tensor the code shows (a cast, a half model's output): not autocast's."""
    return (
        fact.is_tensor
        and fact.prec is Prec.HALF
        and not fact.maybe
        and fact.cause is not Cause.AUTOCAST
    )


def _half_meets_float32(module: Fact, operands: tuple[Operand, ...], frame: Frame) -> bool:
    """A model built or loaded in float32 called outside model code and outside any autocast
    with a half value: the case :meth:`Modules.follow_half` follows into the model."""
    if module.prec is not Prec.FULL or module.maybe or frame.scope.in_module:
        return False
    region = frame.scope.autocast
    if region is not None and region.active:
        return False
    return any(o.fact.is_tensor and o.fact.prec is Prec.HALF and not o.fact.maybe for o in operands)


def _owner(path: str | None, env: Env) -> Owner | None:
    """The nearest module bound above ``path`` (``model`` for ``model.block.proj``)."""
    parts = path.split(".") if path else []
    for end in range(len(parts) - 1, 0, -1):
        key = ".".join(parts[:end])
        fact = env.get(key)
        if fact is not None and fact.kind is Kind.MODULE:
            return Owner(key, fact)
    return None


def _holds_zero_rows(site: CallSite) -> bool:
    """A call one of whose operands holds rows the code made exactly 0, or that leads to one."""
    operands = [site.receiver] if site.receiver is not None else []
    operands += [*site.args, *site.kwargs.values()]
    return bool(site.through) or any(o.fact.is_tensor and made(o.fact.zeros) for o in operands)


def _auto(node: cst.CSTNode) -> bool:
    """``torch_dtype="auto"``: load the checkpoint in the dtype it is stored in."""
    return isinstance(node, cst.SimpleString) and node.evaluated_value == "auto"
