"""Expressions: the fact each expression evaluates to, and the calls inside it."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from mpcheck.engine.autocast import Regions, named_autocast
from mpcheck.engine.averages import COPIED, keeper, kept_average
from mpcheck.engine.base import CallRecord, Walk
from mpcheck.engine.casts import Casts
from mpcheck.engine.constants import number_of
from mpcheck.engine.dtype_arithmetic import promoted
from mpcheck.engine.facts import (
    SCALAR,
    UNKNOWN,
    UNKNOWN_TENSOR,
    Cause,
    Fact,
    Kind,
    Origin,
    Prec,
    carried,
    defaulted,
    dtype_object,
    element,
    int_to_float,
    join,
    none_tested,
    or_value,
    promote,
    replace,
    seq_of,
    tensor_or_none,
)
from mpcheck.engine.families import computed_attribute
from mpcheck.engine.frames import Frame, lineage
from mpcheck.engine.functions import Definitions
from mpcheck.engine.guards import run_split, runs_take
from mpcheck.engine.handed import hand_over
from mpcheck.engine.imported import call_result
from mpcheck.engine.modules import FP32_LAYER, Modules
from mpcheck.engine.promotion import (
    FINFO_MAX,
    FINFO_MIN,
    builtin,
    fold,
    iterate,
    one_dim_factory,
    op_result,
)
from mpcheck.engine.reachability import eager_only, export_only
from mpcheck.engine.records import fields, record_construction
from mpcheck.engine.replacements import replacement
from mpcheck.engine.sites import Operand
from mpcheck.engine.switches import parts, switched
from mpcheck.engine.tensors import Tensors
from mpcheck.knowledge import data_api, training_api
from mpcheck.knowledge import torch_api as T
from mpcheck.project.names import dotted, literal_setattr
from mpcheck.project.summary import ClassSummary, Function


class Expressions:
    """The part that evaluates expressions and dispatches calls."""

    def __init__(
        self,
        file: Walk,
        regions: Regions,
        definitions: Definitions,
        modules: Modules,
        casts: Casts,
        tensors: Tensors,
    ) -> None:
        self.file = file
        self.regions = regions
        self.definitions = definitions
        self.modules = modules
        self.casts = casts
        self.tensors = tensors

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
        known = self.file.constants.name(node.value)  # ``EPS = 1e-8`` at the top of the file
        return known if known is not None else self.global_name(node)

    def global_name(self, node: cst.BaseExpression) -> Fact:
        qual = self.file.imports.resolve(node)
        if self.file.project is not None and not (qual or "").startswith("torch"):
            made = self.modules.project_value(node)  # ``DTYPE`` of another project file
            if made is not None:
                return made
        if qual is None:
            return UNKNOWN
        if qual.startswith("torch.") and qual.count(".") == 1:
            attr = qual[6:]
            if attr in T.DTYPE_NAMES:
                return dtype_object(attr, node)
        return self.file.training.global_value(qual) or Fact(Kind.OTHER)

    def attribute(self, node: cst.Attribute, frame: Frame) -> Fact:
        key = dotted(node)
        own = self.own_state(node, key, frame)
        if own is not None:
            return own
        if key is not None and key in frame.env:
            return carried(frame.env[key], node, Cause.BUFFER)
        if (
            self.file.imports.resolve(node) is not None
            or dotted(node.value) in self.file.imports.relative
        ):
            return self.global_name(node)
        attr = node.attr.value
        component = self.pipeline_component(node, frame)
        if component is not None:
            return component
        holder = dotted(node.value)
        if attr in T.SCHEDULER_TABLES and T.is_scheduler(holder):
            return _table(node, f"{holder}.{attr}")
        base = self.expr(node.value, frame)
        if base.kind is Kind.BATCH:
            return data_api.item(base, attr, node)
        if base.kind is Kind.TENSOR:
            if attr == "dtype":
                return replace(base, kind=Kind.DTYPE, items=None, elem=None)
            if attr in T.NON_TENSOR_ATTRS:
                return UNKNOWN
            return base
        if base.kind is Kind.MODULE:
            if dotted(node.value) == "self" and self.file.keep.param_kept(
                frame.scope.class_name, attr
            ):
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
            layer, library = self.modules.member_layer(base, attr)
            return replace(base, layer=layer, library=library)
        if base.kind is Kind.OTHER and attr in ("min", "max", "eps", "tiny") and base.layer:
            return self.finfo_value(base, attr)
        plain = self.definitions.plain_class(base.layer) if base.kind is Kind.OTHER else None
        if plain is not None:  # ``cache.k``: what its class set as ``self.k``
            return plain.attrs.get(f"self.{attr}", UNKNOWN)
        return UNKNOWN

    def own_state(self, node: cst.Attribute, key: str | None, frame: Frame) -> Fact | None:
        """A sampler's own state: ``self.sigmas`` & co. are its float32 tables unless the walk
        knows their dtype (cast to the sample's, built by a factory), and
        ``self.model_outputs`` holds the model's past outputs, in the model's dtype."""
        if not frame.scope.sampler or key is None or not key.startswith("self."):
            return None
        attr = key[len("self.") :]
        if attr in T.SAMPLER_HISTORY:
            text = f"`{key}`, the model's past outputs kept by the sampler"
            origin = Origin(node, Cause.ACTIVATION, text)
            return Fact(Kind.SEQ, elem=Fact(Kind.TENSOR, Prec.MODEL, None, origin))
        known = frame.env.get(key)
        if attr in T.SCHEDULER_TABLES and (known is None or known.prec is Prec.UNKNOWN):
            return _table(node, key)
        return None

    def pipeline_component(self, node: cst.Attribute, frame: Frame) -> Fact | None:
        """``self.vae`` in a pipeline class, ``pipe.unet`` or ``self.pipeline.vae`` outside
        ``nn.Module`` code: a model, half when the pipeline is loaded so."""
        attr = node.attr.value
        if attr not in T.PIPELINE_MODELS:
            return None
        holder = dotted(node.value)
        if holder == "self":
            if not self._in_pipeline(frame):
                return None
        elif frame.scope.in_module or holder is None or not T.holds_models(holder, attr):
            return None
        text = f"the pipeline's `{attr}`, half when the pipeline is loaded in float16"
        # Diffusers' users load its pipelines in half: in a library that contract is evidence;
        # an application is the user, and shows no such load here (a premise).
        cause = Cause.CONTRACT if self.file.application else Cause.MODEL_CAST
        origin = Origin(node, cause, text)
        return Fact(Kind.MODULE, Prec.HALF, None, origin, maybe=True)

    def _in_pipeline(self, frame: Frame) -> bool:
        cls = self.file.classes.get(frame.scope.class_name or "")
        return cls is not None and cls.is_pipeline

    def finfo_value(self, finfo: Fact, attr: str) -> Fact:
        table = FINFO_MIN if attr == "min" else FINFO_MAX if attr == "max" else {}
        value = table.get(finfo.dtype or "")
        origin = finfo.origin
        return Fact(Kind.SCALAR, value=value, origin=origin, dtype=finfo.dtype, prec=finfo.prec)

    def literal(self, node: cst.BaseExpression, frame: Frame) -> Fact:
        number = number_of(node)
        return UNKNOWN if number is None else Fact(Kind.SCALAR, value=number)

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
                result = op_result(left, right)
            region = frame.scope.autocast
            if region is not None and region.recasts("matmul"):
                result = self.regions.autocast_result(node, "matmul", region, result)
            return self.file.emit(
                CallRecord(
                    node, result, args, qual="torch.matmul", op=T.OpKind.MATMUL, aten="matmul"
                ),
                frame,
            )
        if left.kind is Kind.SCALAR and right.kind is Kind.SCALAR:
            return fold(node.operator, left, right)
        if left.kind is Kind.SEQ and isinstance(node.operator, cst.Multiply):
            return Fact(Kind.SEQ, elem=element(left))  # ``torch.cat([latents] * 2)``
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
            region = frame.scope.autocast
            if region is not None and region.recasts(arith):  # ``x ** 2``: float32 on CUDA
                result = self.regions.autocast_result(node, arith, region, result)
            elif region is None:  # (its callers' autocast: :meth:`Regions.caller_result`)
                result = self.regions.caller_result(node, arith, frame, result)
            return self.file.emit(
                CallRecord(node, result, args, qual=f"torch.{arith}", aten=arith), frame
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
        left, right = self.expr(node.left, frame), self.expr(node.right, frame)
        if isinstance(node.operator, cst.Or):
            # ``torch_dtype or torch.float16``: the right side wherever the left is falsy
            return defaulted(or_value(left, right))
        return join(left, right)

    def ifexp(self, node: cst.IfExp, frame: Frame) -> Fact:
        resolve = self.file.imports.resolve
        if export_only(node.test, resolve):  # ``a if torch.jit.is_tracing() else b``: ``b``
            return self.expr(node.orelse, frame)
        switch = self.file.options.value(node.test)  # ``a if args.flag else b``, a constant
        if switch is not None:
            return self.expr(node.body if switch else node.orelse, frame)
        if eager_only(node.test, resolve):
            return self.expr(node.body, frame)
        self.expr(node.test, frame)
        body, orelse = self.expr(node.body, frame), self.expr(node.orelse, frame)
        # ``-1e9 if x.dtype == torch.float32 else -1e4``: what a half-precision run gets
        taken, fp16 = runs_take(node.test, lambda side: self.expr(side, frame))
        if taken is not None:
            return body if taken else orelse
        runs = (body, orelse) if fp16 else (orelse, body)
        split = run_split(*runs, node.test) if fp16 is not None else None
        if split is not None:
            return split
        tested = none_tested(node.test)
        if tested is not None:  # ``x if x is not None else torch.ones(...)``
            if dotted(node.body) == tested:
                body = tensor_or_none(body, orelse, state=frame.in_init)
            elif dotted(node.orelse) == tested:
                orelse = tensor_or_none(orelse, body, state=frame.in_init)
            return defaulted(join(body, orelse))
        return join(body, orelse)

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
        # One index that is no tensor with dimensions of its own: a number, or what a caller
        # passes (``alphas_cumprod[timestep]``: the loop's ``t`` is 0-dim).
        scalar_index = False
        for el in node.slice:
            if isinstance(el.slice, cst.Index):
                fact = self.expr(el.slice.value, frame)
                scalar_index = len(node.slice) == 1 and self.scalar(el.slice.value, fact, frame)
                if fact.kind is Kind.SCALAR and fact.value is not None and fact.value.is_integer():
                    index = int(fact.value)
        if base.kind is Kind.BATCH:
            key = data_api.item_key(node)
            if key is not None and key in frame.env:
                return frame.env[key]  # an item the code replaced (cast) after loading
            return data_api.item(base, data_api.item_name(node), node)
        if base.kind is Kind.OTHER and base.layer and len(node.slice) == 1:
            index_node = node.slice[0].slice
            if isinstance(index_node, cst.Index):  # ``dataset[i]``: what its ``__getitem__``
                # returns (float32 data until cast, when it loads it so), for a class of this file
                given = (Operand(index_node.value, self.expr(index_node.value, frame)),)
                item = self.definitions.instance_method(base, "__getitem__", given, {})
                if item is not None:
                    return item
        if base.kind is Kind.SEQ:
            if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice):
                return Fact(Kind.SEQ, elem=element(base))
            return element(base, index)
        if base.kind in (Kind.TENSOR, Kind.MODULE):
            if base.kind is Kind.MODULE:
                return base
            one_dim = one_dim_factory(base) or base.cause is Cause.TABLE
            # a sampler's own float tensors are its 1-D tables (``self.sigmas[self.step_index]``)
            one_dim = one_dim or (frame.scope.sampler and base.prec is Prec.FULL)
            if scalar_index and one_dim:
                # ``torch.linspace(...)[i]``, ``scheduler.sigmas[i]``: one number, 0-dim
                return replace(base, zero_dim=True)
            return replace(base, zero_dim=False)
        return UNKNOWN

    def scalar(self, index: cst.BaseExpression, fact: Fact, frame: Frame) -> bool:
        """An index with no dimensions of its own: no tensor, a 0-dim one (``argmin`` of a
        whole tensor), what a caller passes, or that plus or minus a number (``sigmas[i + 1]``,
        the next step's sigma)."""
        if (
            not fact.is_tensor
            or fact.zero_dim
            or (fact.origin is not None and isinstance(fact.origin.node, cst.Param))
        ):
            return True
        if not isinstance(index, cst.BinaryOperation):
            return False
        if not isinstance(index.operator, (cst.Add, cst.Subtract)):
            return False
        sides = [index.left, index.right]
        if sum(isinstance(side, cst.Integer) for side in sides) != 1:
            return False
        other = next(side for side in sides if not isinstance(side, cst.Integer))
        if dotted(other) is None:
            return False  # (only names are looked at again: no call is walked twice)
        return self.scalar(other, self.expr(other, frame), frame)

    def comprehension(self, node: cst.BaseComp, frame: Frame) -> Fact:
        sub = Frame(dict(frame.env), frame.scope)
        for_in: cst.CompFor | None = node.for_in
        first = True
        while for_in is not None:
            items = self.expr(for_in.iter, sub)
            if first and (mapped := self.mapped(node, items, frame)) is not None:
                return mapped
            first = False
            self.file.bind(for_in.target, iterate(items), sub)
            for cond in for_in.ifs:
                self.expr(cond.test, sub)
            for_in = for_in.inner_for_in
        if isinstance(node, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return Fact(Kind.SEQ, elem=self.expr(node.elt, sub))
        return UNKNOWN

    def mapped(self, node: cst.BaseComp, items: Fact, frame: Frame) -> Fact | None:
        """``[m.module if ddp else m for m in models if m is not None]`` over a list of known
        length (``items``): Python runs the element once per item, so item ``i`` of the
        result is the element with the target bound to item ``i`` (a join of the items
        would lose a half model beside an unknown one). Only where the length is kept: one
        ``for`` with a plain name target, and no condition but ``target is not None`` on
        items that are models or tensors (never None)."""
        for_in = node.for_in
        if (
            not isinstance(node, cst.ListComp)
            or for_in.inner_for_in is not None
            or not isinstance(for_in.target, cst.Name)
            or for_in.asynchronous is not None
        ):
            return None
        name = for_in.target.value
        if items.kind is not Kind.SEQ and len(items.params) == 1 and _keeps_item(node.elt, name):
            # a function's own walk: its parameter's list, item for item (a summary says so)
            if all(_not_none_test(cond.test, name) for cond in for_in.ifs):
                return Fact(Kind.SEQ, params=items.params)
            return None
        if (
            items.kind is not Kind.SEQ
            or items.items is None
            or not 0 < len(items.items) <= _MAPPED_ITEMS
        ):
            return None
        if for_in.ifs and (
            any(not _not_none_test(cond.test, name) for cond in for_in.ifs)
            or any(i.kind not in (Kind.MODULE, Kind.TENSOR) for i in items.items)
        ):
            return None
        out = []
        for item in items.items:
            sub = Frame({**frame.env, name: item}, frame.scope)
            out.append(self.expr(node.elt, sub))
        return Fact(Kind.SEQ, items=tuple(out))

    def map_call(self, args: tuple[Operand, ...], frame: Frame) -> Fact | None:
        """``q, k, v = map(lambda t: rearrange(t, ...), (q, k, v))``: Python's ``map`` calls
        the function once per item, so it is ``[body for t in items]`` (:meth:`mapped`):
        item ``i`` of the result is the lambda's body with its parameter bound to item ``i``
        (over a tensor, ``qkv.chunk(3)`` or a list of unknown length: to any one item).
        Only a one-parameter lambda over one iterable; None otherwise (or ``map`` rebound)."""
        if len(args) != 2 or "map" in self.file.functions or "map" in frame.env:
            return None
        fn = args[0].node
        if not isinstance(fn, cst.Lambda):
            return None
        params = fn.params
        if (
            len(params.params) != 1
            or params.posonly_params
            or params.kwonly_params
            or not isinstance(params.star_arg, cst.MaybeSentinel)
            or params.star_kwarg is not None
            or params.params[0].default is not None
        ):
            return None
        name = params.params[0].name.value
        items = args[1].fact
        if items.kind is Kind.SEQ and items.items is not None:
            if not 0 < len(items.items) <= _MAPPED_ITEMS:
                return None
            out = []
            for item in items.items:
                out.append(self.expr(fn.body, Frame({**frame.env, name: item}, frame.scope)))
            return Fact(Kind.SEQ, items=tuple(out))
        one = iterate(items)
        if one.kind is Kind.OTHER:
            return None
        return Fact(Kind.SEQ, elem=self.expr(fn.body, Frame({**frame.env, name: one}, frame.scope)))

    def dict_display(self, node: cst.Dict, frame: Frame) -> Fact:
        return self.file.training.dict_display(
            node, frame
        )  # an optimizer's param group, or unknown

    def named(self, node: cst.NamedExpr, frame: Frame) -> Fact:
        value = self.expr(node.value, frame)
        self.file.bind(node.target, value, frame)
        return value

    def call(self, node: cst.Call, frame: Frame) -> Fact:
        func = node.func
        qual = self.file.imports.resolve(func)
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
        if qual is None and isinstance(func, cst.Name) and func.value == "map" and not kwargs:
            made = self.map_call(args, frame)
            if made is not None:
                return made
        hand_over(func, qual, args, kwargs, frame)  # ``quantize_(proj)``: may cast ``proj``
        keeps = self.keeps_average(func, qual)
        if not keeps:
            return self.dispatch(node, func, qual, args, kwargs, frame)
        # an EMA keeper: the record of this call (whichever part of the walk makes it) carries
        # the average it holds; the call is read as it always is
        self.file.averages[node] = self.kept_average(node, args, kwargs, frame, keeps)
        result = self.dispatch(node, func, qual, args, kwargs, frame)
        left = self.file.averages.pop(node, None)
        if left is not None:  # (no record was made of it)
            return self.file.emit(CallRecord(node, result, args, kwargs, average=left), frame)
        return result

    def dispatch(
        self,
        node: cst.Call,
        func: cst.BaseExpression,
        qual: str | None,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact:
        """A call's fact, by what is called (its operands already read)."""
        dtype = promoted(node, qual, args, self.file.imports.resolve)
        if dtype is not None:  # ``reduce(torch.promote_types, (x.dtype, torch.float32))``
            return dtype
        if args and args[0].fact.kind is Kind.MODULE and _checkpointing(func, qual):
            # ``checkpoint(block, h, temb)`` is ``block(h, temb)``, reported at this call
            inner = {k: v for k, v in kwargs.items() if k not in T.CHECKPOINT_KEYWORDS}
            block = args[0]
            path = dotted(block.node)
            return self.modules.module_call(
                node, block.fact, path, args[1:], inner, frame, callee=block.node
            )
        if data_api.processor_output(node):  # ``feature_extractor(images, return_tensors="pt")``
            return data_api.batch_of(node, f"returned by `{self.file.code(func)}`")
        library = qual if qual is not None else self.file.imports.relative.get(dotted(func) or "")
        if library is not None and (
            not library.startswith("torch.") or library.startswith("torch.ops.")
        ):
            made = self.library_call(node, library, args, kwargs, frame)
            if made is not None:
                return made
        if self.file.project is not None and not (qual or "").startswith("torch"):
            made = self.project_call(node, args, kwargs, frame)
            if made is not None:
                return made
        if qual is not None:
            return self.tensors.torch_call(node, qual, args, kwargs, frame)
        if isinstance(func, cst.Attribute):
            chosen = self.switched_call(node, dotted(func) or "", args, kwargs, frame)
            if chosen is not None:
                return chosen
            known = frame.env.get(dotted(func) or "") or self.pipeline_component(func, frame)
            if known is not None and known.layer == data_api.TRANSFORM:  # ``self.to_tensor(img)``
                return data_api.transformed(node, self.file.code(func))
            if known is not None and known.kind is Kind.MODULE:
                return self.modules.module_call(node, known, dotted(func), args, kwargs, frame)
            path = dotted(func.value)
            receiver = self.expr(func.value, frame)
            data = data_api.picture_method(receiver, func.attr.value)
            if func.attr.value == "astype":  # ``arr.astype(np.float32)``: numpy's cast
                data = data_api.astype(node, receiver, self.file.imports.resolve)
            if data is not None:
                return data
            returned = self.definitions.instance_method(receiver, func.attr.value, args, kwargs)
            if returned is not None:  # ``self.cache.get_kv(k, v)``: a method of a plain class
                return returned
            returned = self.imported_method(node, receiver, func.attr.value, args, kwargs, frame)
            if returned is not None:  # ``entry.append(k, v)``: a plain class of another file
                return returned
            return self.tensors.method_call(
                node, func.attr.value, receiver, path, args, kwargs, frame
            )
        callee = self.expr(func, frame)
        if callee.layer == data_api.TRANSFORM:  # ``to_tensor = transforms.ToTensor()``
            return data_api.transformed(node, self.file.code(func))
        if callee.kind is Kind.MODULE:
            return self.modules.module_call(node, callee, dotted(func), args, kwargs, frame)
        if callee.train is not None:  # ``optimizer_cls(params, lr=...)``
            made = self.file.training.call_value(node, callee, args, kwargs)
            if made is not None:
                return self.file.emit(CallRecord(node, made, args, kwargs), frame)
        if isinstance(func, cst.Name):
            aliased = self.aliased_call(node, func.value, args, kwargs, frame)
            if aliased is not None:
                return aliased
            return self.local_call(node, func.value, args, kwargs, frame)
        return UNKNOWN

    def aliased_call(
        self,
        node: cst.Call,
        name: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact | None:
        """``attn_fn(x, w)`` after ``attn_fn = a if cfg.split else b`` (:mod:`aliases`): the
        join of what the functions of this file or of the project return for these
        arguments; None when the name is no such alias."""
        function = frame.scope.function
        if function is None or name in self.file.functions or name in self.file.classes:
            return None
        if not self.definitions.may_alias(name):
            return None  # (no function here binds it: no walk of the body for aliases)
        targets = self.definitions.uses(function).aliases.get(name, ())
        made: list[Fact] = []
        with self.file.reporting.muted():
            for target in targets:
                held = self.file.classes.get(target.value)
                if target.value in self.file.functions or (held is not None and not held.is_module):
                    # (a plain class of this file, ``Trainer = A if tdmse else B``: built as
                    # it is; modules' candidates are followed by ``project.models``)
                    made.append(self.local_call(node, target.value, args, kwargs, frame))
                    continue
                located = self.file.imports.locate(target) if self.file.project else None
                found = self.file.project(*located) if self.file.project and located else None
                if not isinstance(found, Function):
                    return None
                made.append(call_result(node, target.value, found, args, kwargs))
        if not made:
            return None
        result = made[0]
        for other in made[1:]:
            result = join(result, other)
        return self.file.emit(CallRecord(node, result, args, kwargs), frame)

    def switched_call(
        self,
        node: cst.Call,
        path: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact | None:
        """``self.part(x)`` of a part built as one of several modules by config (see
        :mod:`mpcheck.engine.switches`): the part of the path where ``x`` is float32, or the
        part that returns float32 on its path; None to call the joined part as usual."""
        choices = parts(frame.env, path)
        if not choices:
            return None
        for i, op in enumerate(args):
            found = switched(frame.env, dotted(op.node) or "", op.fact)
            part = next((p for s, p in choices if found and s == found[0]), None)
            if found is not None and part is not None:
                given = (*args[:i], Operand(op.node, found[1]), *args[i + 1 :])
                return self.modules.module_call(node, part, path, given, kwargs, frame)
        known = frame.env.get(path)
        if known is None or known.kind is not Kind.MODULE:
            return None
        pointed = self.file.elsewhere.get(node)  # (a muted call may point the node elsewhere)
        with self.file.reporting.muted():
            made = [
                self.modules.module_call(node, p, path, args, kwargs, frame) for _, p in choices
            ]
        if pointed is None:
            self.file.elsewhere.pop(node, None)
        else:
            self.file.elsewhere[node] = pointed
        wide = [_float32(f) for f in made]
        if not any(wide):
            # Each class runs in some configuration: the calls of the parts the joined one
            # is not (an ``AFF`` whose convs take ``x`` where the first choice, ``DAF``, only
            # adds it) are sites too; the joined part's call stays the value.
            for _, part in choices:
                if part.layer != known.layer:
                    self.modules.module_call(node, part, path, args, kwargs, frame)
            return None
        if all(wide) or _float32(made[0]) and choices[0][1] == known:
            return None
        switch, part = choices[wide.index(True)]
        result = self.modules.module_call(node, part, path, args, kwargs, frame)
        if not _float32(result) or result.origin is None:
            return result
        built = f'when `{switch[0]} == "{switch[1]}"`' if switch else "in some configurations"
        text = f"{result.origin.text.rstrip(',')}, as built {built}"
        return replace(result, origin=replace(result.origin, text=text), maybe=True)

    def imported_method(
        self,
        node: cst.Call,
        instance: Fact,
        method: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact | None:
        """``entry.append(k, v)`` on an instance of a plain class of another project file:
        what the method's summary returns for these arguments (None: no such call)."""
        summary = self.file.imported.get(instance.layer or "")
        if instance.kind is not Kind.OTHER or summary is None or summary.is_module:
            return None
        function = summary.methods.get(method)
        if function is None:
            return None
        result = call_result(node, f"{instance.layer}.{method}", function, args, kwargs)
        place = function.returns.origin
        if place is not None and result.origin is not None and result.origin.node is node:
            self.file.elsewhere[node] = place  # a finding pointing here points there too
        return self.file.emit(CallRecord(node, result, args, kwargs), frame)

    def keeps_average(self, func: cst.BaseExpression, qual: str | None) -> str:
        """What an EMA keeper called here keeps (:func:`mpcheck.engine.averages.keeper`): a
        library's (``EMA_KEEPERS``), a plain class of this file or of another project file
        (``ClassSummary.averages``); "" for any other callee."""
        if qual in training_api.EMA_KEEPERS:
            return COPIED
        if (qual or "").startswith("torch"):
            return ""  # (torch's other callees: no project class, no lookup)
        if isinstance(func, cst.Name):
            cls = self.file.classes.get(func.value)
            if cls is not None:
                return "" if cls.is_module else keeper(cls.node)
        project = self.file.project
        located = self.file.imports.locate(func) if project is not None else None
        if project is None or located is None:
            return ""
        found = project(*located)
        if isinstance(found, ClassSummary) and not found.is_module:
            return found.averages
        return ""

    def kept_average(
        self,
        node: cst.Call,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
        keeps: str,
    ) -> Fact:
        """An EMA keeper built here (:func:`mpcheck.engine.averages.kept_average`), with its
        ``dtype=`` read as a cast of the model is (``dtype=None`` casts nothing)."""
        given = kwargs.get("dtype")
        cast = None
        if given is not None and not (
            isinstance(given.node, cst.Name) and given.node.value == "None"
        ):
            script = frame.scope.script
            cast = self.modules.module_cast(node, "to", (), {"dtype": given}, script=script)
        return kept_average(args, kwargs, cast, keeps)

    def project_call(
        self,
        node: cst.Call,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact | None:
        """A function of another file of the project (``from .rope import apply_rope``):
        what its summary says it returns for these arguments, or None when unknown."""
        located = self.file.imports.locate(node.func) if self.file.project is not None else None
        if located is None or self.file.project is None:
            return None
        function = self.file.project(*located)
        name = dotted(node.func) or located[0]
        if isinstance(function, ClassSummary) and function.is_module:
            return self.modules.construct_imported(node, name, function, frame, kwargs)
        if isinstance(function, ClassSummary):  # ``class SFTTrainer(Trainer)`` elsewhere
            derived = self.file.training.derived_call(node, function.bases, args, kwargs, frame)
            if derived is not None:
                return self.file.emit(CallRecord(node, derived, args, kwargs), frame)
        if not isinstance(function, Function):
            return None
        result = call_result(node, name, function, args, kwargs)
        if function.casts:  # ``_load_state_dict(unet, sd, device, dtype)``: casts ``unet``
            self.modules.cast_handed(node, function, args, kwargs, frame)
        if function.fp16_unscale:  # ``patch_accelerator_for_fp16_training(accelerator)``
            self.file.training.patch_scaler(
                function.fp16_unscale, function.params, args, kwargs, frame
            )
        if function.returns.kind in _TRAINING_RETURNS:  # ``prepare_accelerator(args)``
            result = self.file.training.returned(node, name, function.returns, result, args, kwargs)
        place = function.returns.origin
        if place is not None and result.origin is not None and result.origin.node is node:
            self.file.elsewhere[node] = place  # a finding pointing here points there too
        hazard = None
        if located[0].endswith(".from_pretrained"):  # the project's own loader, a library's too
            loaded = self.modules.loaded_model(node, name, kwargs)
            hazard = self.tensors.kept_residual(node, kwargs, loaded)
        return self.file.emit(CallRecord(node, result, args, kwargs, kept_residual=hazard), frame)

    def library_call(
        self,
        node: cst.Call,
        name: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact | None:
        """Library code we know (diffusers' ``Timesteps`` returns float32, ``torchaudio.load``
        loads float32 data in [-1, 1]), or None."""
        if name in T.TENSOR_SETTERS:
            self.modules.set_tensors(node, T.TENSOR_SETTERS[name], args, kwargs, frame)
            return UNKNOWN
        if name in T.DTYPE_KEEPING_COPIES and len(args) == 1 and not kwargs:
            copied = self.copied(node, args[0].fact)
            return self.file.emit(CallRecord(node, copied, args, kwargs, qual=name), frame)
        if name.startswith("torch.ops."):  # a custom op (a kernel, an extension's): its
            # result has no argument's dtype unless the op table says so
            return self.file.emit(CallRecord(node, UNKNOWN_TENSOR, args, kwargs), frame)
        facts = tuple(a.fact for a in args)
        keywords = {k: v.node for k, v in kwargs.items()}
        made = data_api.loaded(name, node, facts, keywords, self.file.imports.resolve)
        made = made or data_api.transform(name, facts)
        if made is not None:
            return self.file.emit(CallRecord(node, made, args, kwargs, qual=name), frame)
        if name.endswith("torch_utils.randn_tensor"):  # diffusers' ``torch.randn`` with generators
            dtype = kwargs.get("dtype") or (args[3] if len(args) > 3 else None)
            made = self.casts.dtype_arg(dtype, node, UNKNOWN_TENSOR) if dtype else None
            return self.file.emit(CallRecord(node, made or UNKNOWN_TENSOR, args, kwargs), frame)
        module = T.library_fp32(name, T.FP32_OUTPUT_MODULES)
        if module is not None:
            return Fact(
                Kind.MODULE, Prec.MODEL, layer=FP32_LAYER, origin=Origin(node, Cause.UPCAST, module)
            )
        layer = T.library_fp32(name, T.LIBRARY_LAYERS)
        if layer is not None:
            return self.modules.construct_module(node, layer, frame, kwargs, library=True)
        function = T.library_fp32(name, T.FP32_OUTPUT_FUNCTIONS)
        if function is None:
            return None
        origin = Origin(node, Cause.UPCAST, f"returned in float32 by {function}")
        result = Fact(Kind.TENSOR, Prec.FULL, "float32", origin)
        return self.file.emit(CallRecord(node, result, args, kwargs, qual=name), frame)

    def copied(self, node: cst.Call, source: Fact) -> Fact:
        """``copy.deepcopy(model)``: a new object in the dtype the code gave its source (a
        cast, a load), said to be a copy; of no known dtype where the code gave it none. A
        copy is another object: an optimizer of the source does not train it, and a pipeline
        built around it holds no trained module (facts of modules are told apart by their
        origin)."""
        origin = source.origin
        if origin is None or source.kind not in (Kind.MODULE, Kind.TENSOR, Kind.SEQ):
            return UNKNOWN
        text = f"{origin.text}, copied by `{self.file.code(node)}`"
        return replace(source, origin=replace(origin, node=node, text=text), train=None)

    def set_literal(self, node: cst.Call, args: tuple[Operand, ...], frame: Frame) -> None:
        """``setattr(self, "proj", v)`` under a literal name is ``self.proj = v``: bound like
        that assignment (a part of the class, a buffer stored by name), its fact as given."""
        found = literal_setattr(node)
        holder = dotted(found[0]) if found is not None else None
        if found is None or holder is None or len(args) != 3:
            return
        value = self.modules.stored(found[0], found[1], node, args[2].fact, frame)
        self.file.bind(node, value, frame, f"{holder}.{found[1]}")

    def handed_call(
        self,
        node: cst.Call,
        name: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> None:
        """``fn(text)`` of a parameter ``fn``: a call of the lambdas the project hands it, in
        this function's context and its callers'. One that runs a module whose input
        embeddings are cast apart, with no autocast here, is reported at this call
        (:mod:`mpcheck.project.callables`)."""
        fn, region = frame.scope.function, frame.scope.autocast
        if fn is None or (region is not None and region.enabled is not False):
            return
        params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
        if frame.scope.class_name is not None and params[:1] in (["self"], ["cls"]):
            params = params[1:]
        if name in params:
            slots = {str(params.index(name)), name}
        elif name in (p.name.value for p in fn.params.kwonly_params):
            slots = {name}
        else:
            return
        found = self.file.handed_split(fn.name.value, slots)
        if found is None or named_autocast(fn, node, self.file.code):
            return
        self.file.emit(CallRecord(node, UNKNOWN, args, kwargs, handed_split=found), frame)

    def local_call(
        self,
        node: cst.Call,
        name: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact:
        own = self.file.classes.get(frame.scope.class_name or "")
        if own is not None and not own.is_module and name in ("cls", own.node.name.value):
            names = fields(own.node, self.file.imports.resolve)  # a dataclass's own factory
            if names is not None:
                record_construction(own, names, args, kwargs)
                return Fact(Kind.OTHER, layer=own.node.name.value)
        cls = self.file.classes.get(name)
        if cls is not None:
            if cls.is_module:  # (a project class: its parts may have their own dtype)
                return replace(
                    self.modules.construct_module(node, name, frame, kwargs), project=True
                )
            bases = [base for c in lineage(self.file.classes, cls) for base in c.bases]
            derived = self.file.training.derived_call(node, bases, args, kwargs, frame)
            if derived is not None:  # ``class MyTrainer(Trainer)``: built as its base is
                return derived
            plain = self.definitions.plain_class(
                name
            )  # ``KVCache(...)``: its methods answer calls on it
            return UNKNOWN if plain is None else Fact(Kind.OTHER, layer=name)
        fn = self.file.functions.get(name)
        if fn is None:
            if self.file.training.named_call(
                node, name, frame
            ):  # a relatively imported clip helper
                return UNKNOWN
            if name in ("setattr", "getattr"):  # ``getattr(self, f"scaler{i}")``: families.py
                member = computed_attribute(self.file, name, args, frame)
                if member is not None:
                    return member
            if name == "setattr":  # a model's child replaced (mpcheck.engine.replacements)
                self.set_literal(node, args, frame)  # (``setattr(self, "proj", v)``)
                fn, built = frame.scope.function, self.definitions.constructor_dtype
                found = replacement(node, args, fn, self.file.module, built)
                if found is not None:
                    self.file.emit(
                        CallRecord(node, UNKNOWN, args, kwargs, replacement=found), frame
                    )
            listed = builtin(name, [a.fact for a in args])  # list(...), zip(...), next(...)
            if listed is not None:
                return listed
            if name == "float" and args and isinstance(args[0].node, cst.SimpleString):
                text = args[0].node.evaluated_value
                try:
                    return replace(SCALAR, value=float(text) if isinstance(text, str) else None)
                except ValueError:
                    return SCALAR
            self.handed_call(node, name, args, kwargs, frame)
            return UNKNOWN
        summary = self.definitions.summary(fn, call=(args, kwargs, False))
        result = self.definitions.substitute(summary, fn, args, kwargs, skip_self=False)
        return self.file.training.after_call(node, fn, args, kwargs, frame, result)


_EXPR: dict[type, Callable[[Expressions, cst.BaseExpression, Frame], Fact]] = {
    cst.Name: Expressions.name,  # type: ignore[dict-item]
    cst.Attribute: Expressions.attribute,  # type: ignore[dict-item]
    cst.Call: Expressions.call,  # type: ignore[dict-item]
    cst.BinaryOperation: Expressions.binary,  # type: ignore[dict-item]
    cst.UnaryOperation: Expressions.unary,  # type: ignore[dict-item]
    cst.Comparison: Expressions.compare,  # type: ignore[dict-item]
    cst.BooleanOperation: Expressions.boolean,  # type: ignore[dict-item]
    cst.IfExp: Expressions.ifexp,  # type: ignore[dict-item]
    cst.Tuple: Expressions.sequence,  # type: ignore[dict-item]
    cst.List: Expressions.sequence,  # type: ignore[dict-item]
    cst.Subscript: Expressions.subscript,  # type: ignore[dict-item]
    cst.Integer: Expressions.literal,
    cst.Float: Expressions.literal,
    cst.ListComp: Expressions.comprehension,  # type: ignore[dict-item]
    cst.GeneratorExp: Expressions.comprehension,  # type: ignore[dict-item]
    cst.SetComp: Expressions.comprehension,  # type: ignore[dict-item]
    cst.DictComp: Expressions.comprehension,  # type: ignore[dict-item]
    cst.NamedExpr: Expressions.named,  # type: ignore[dict-item]
    cst.Dict: Expressions.dict_display,  # type: ignore[dict-item]
}


def _float32(fact: Fact) -> bool:
    return fact.is_tensor and fact.prec is Prec.FULL and not fact.maybe and not fact.zero_dim


def _checkpointing(func: cst.BaseExpression, qual: str | None) -> bool:
    """``torch.utils.checkpoint.checkpoint`` or ``self._gradient_checkpointing_func``."""
    if qual is not None:
        return qual in T.CHECKPOINT_FUNCTIONS
    return isinstance(func, cst.Attribute) and func.attr.value in T.CHECKPOINT_METHODS


def _table(node: cst.Attribute, name: str) -> Fact:
    """A diffusers-style scheduler's noise table: 1-D float32 whatever the model runs in."""
    text = f"made float32 by `{name}` (a scheduler's float32 table)"
    return Fact(Kind.TENSOR, Prec.FULL, "float32", Origin(node, Cause.TABLE, text))


# What a function of another file may return as a training object (or a tuple holding one).
_TRAINING_RETURNS = frozenset({"accelerator", "optimizer", "seq"})

# A comprehension over a list display of at most this many items is walked once per item.
_MAPPED_ITEMS = 8


def _not_none_test(test: cst.BaseExpression, name: str) -> bool:
    """``name is not None``: true of every model or tensor."""
    return (
        isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and test.left.value == name
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.IsNot)
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None"
    )


def _keeps_item(elt: cst.BaseExpression, name: str) -> bool:
    """``m``, ``m.module`` (the model a DDP/FSDP/DeepSpeed wrapper holds, in its own dtype),
    or a choice between them: the element is the item's model."""
    if isinstance(elt, cst.IfExp):
        return _keeps_item(elt.body, name) and _keeps_item(elt.orelse, name)
    if isinstance(elt, cst.Attribute) and elt.attr.value == "module":
        elt = elt.value
    return isinstance(elt, cst.Name) and elt.value == name
