"""Torch API semantics: what each torch function and tensor method returns."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from mpcheck.engine.autocast import Regions
from mpcheck.engine.base import CallRecord, Walk
from mpcheck.engine.casts import Casts
from mpcheck.engine.factory_kwargs import unhanded
from mpcheck.engine.facts import (
    UNKNOWN,
    UNKNOWN_TENSOR,
    Cause,
    Fact,
    Kind,
    Origin,
    Prec,
    as_tensor_of,
    carried,
    element,
    int_to_float,
    join,
    promote,
    replace,
    seq_of,
)
from mpcheck.engine.frames import Frame
from mpcheck.engine.functions import Definitions
from mpcheck.engine.kept_residual import load_hazard
from mpcheck.engine.modules import Modules
from mpcheck.engine.pipelines import pipeline_cast, recasts
from mpcheck.engine.promotion import (
    dimensioning,
    op_result,
    tensor_of_numbers,
)
from mpcheck.engine.sites import KeptResidualLoad, Operand, items
from mpcheck.knowledge import data_api
from mpcheck.knowledge import torch_api as T
from mpcheck.project.summary import ClassSummary


class Tensors:
    """The part that knows what torch calls and tensor methods return."""

    def __init__(
        self, file: Walk, regions: Regions, definitions: Definitions, modules: Modules, casts: Casts
    ) -> None:
        self.file = file
        self.regions = regions
        self.definitions = definitions
        self.modules = modules
        self.casts = casts

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
        if method in T.SCHEDULER_SAMPLES and T.is_scheduler(path):
            index, name = T.SCHEDULER_SAMPLES[method]  # ``scheduler.step(...).prev_sample``
            sample = kwargs.get(name) or (args[index] if len(args) > index else None)
            if sample is None or not sample.fact.is_tensor:
                return UNKNOWN
            if method == "add_noise":  # ``a * original_samples + b * noise``: both promote
                noise = kwargs.get("noise") or (args[1] if len(args) > 1 else None)
                if noise is not None and noise.fact.is_tensor:
                    return promote([sample.fact, noise.fact], node)
            return sample.fact
        if recv.kind is Kind.MODULE:
            return self.modules.module_method(node, method, recv, path, args, kwargs, frame)
        if method == "pop" and len(args) == 2 and args[1].fact.is_tensor:
            return args[1].fact  # ``callback_outputs.pop("latents", latents)``: a step callback
        if recv.kind is Kind.BATCH:  # ``batch.to(device)`` moves it; nothing else is known
            if method == "to" and (args or kwargs):  # ``.to(device, torch.float16)`` casts
                probe = Fact(Kind.TENSOR, Prec.FULL, "float32", recv.origin)
                items = self.casts.to_call(node, method, probe, args, kwargs)
                return recv if items is probe else replace(recv, elem=items)
            return recv if method in ("to", "cuda", "pin_memory") else UNKNOWN
        if recv.kind is Kind.SEQ and path is not None and method in ("append", "extend"):
            # ``models = [unet]; models.append(text_encoder)``: the list grows in place
            added: tuple[Fact, ...] | None = (
                (args[0].fact,) if method == "append" and args else None
            )
            if method == "extend" and args and args[0].fact.items is not None:
                added = args[0].fact.items
            if recv.items is not None and added is not None:
                grown = replace(recv, items=(*recv.items, *added))
            else:
                new = args[0].fact if method == "append" else element(args[0].fact)
                grown = Fact(Kind.SEQ, elem=join(element(recv), new) if args else element(recv))
            frame.env[path] = grown
            return UNKNOWN
        if recasts(recv, method):
            cast = self.modules.module_cast(node, method, args, kwargs, script=frame.scope.script)
            return pipeline_cast(self.file.training, recv, cast, frame)
        trained = self.file.training.method(node, method, receiver, args, kwargs, frame)
        if trained is not None:  # scaler.step(opt), accelerator.backward(loss), ...
            return self.file.emit(
                CallRecord(node, trained, args, kwargs, method=method, receiver=receiver), frame
            )
        if method in ("from_pretrained", "from_single_file", "from_config"):
            return self._load(node, path or "", args, kwargs, frame)
        if isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name):
            called = self.definitions.class_call(node, node.func.value.value, method, args, kwargs)
            if called is not None and method == "apply":  # a call the rules see too (MPC402)
                record = CallRecord(node, called, args, kwargs, method=method, receiver=receiver)
                return self.file.emit(record, frame)
            if called is not None:  # ``Helper.build(x)``
                return called
        dtype = kwargs.get("dtype") or next((a for a in args if a.fact.kind is Kind.DTYPE), None)
        if recv == UNKNOWN and method in T.CAST_METHODS and _compared(node.func):
            # ``(mask > 0.5).float()``: a comparison with a cast method is a bool tensor
            # (a Python bool has no ``.float()``), whatever the compared values were
            recv = Fact(Kind.TENSOR, Prec.BOOL, "bool")
        if recv == UNKNOWN and method == "to" and dtype and data_api.picture_cast(node.func):
            recv = UNKNOWN_TENSOR  # ``image = processor(image); image.to(dtype=torch.float32)``
        result = carried(self.tensor_method(node, method, recv, args, kwargs, frame), node)
        if result.is_tensor and _full_reduction(method, args, kwargs):
            result = replace(result, zero_dim=True)  # ``loss.mean()``: does not promote
        op = T.OpKind.MATMUL if method in T.MATMUL_METHODS else None
        aten = method if op else ""
        region = frame.scope.autocast
        # ``x.pow(2)`` in a CUDA autocast region computes in float32, ``x.bmm(y)`` in half
        if region is not None and region.recasts(method):
            result = self.regions.autocast_result(node, method, region, result)
        elif region is None:  # (``x.pow(2)`` in a class its callers run only under autocast)
            result = self.regions.caller_result(node, method, frame, result)
        return self.file.emit(
            CallRecord(
                node, result, args, kwargs, method=method, receiver=receiver, op=op, aten=aten
            ),
            frame,
        )

    def _load(
        self,
        node: cst.Call,
        path: str,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        frame: Frame,
    ) -> Fact:
        """``Model.from_pretrained(...)``: the loaded model; reported to the rules when its
        class keeps a part float32 ahead of a fused norm (a half load's latent hazard)."""
        forwarded = forwarded_dtype(node, kwargs, frame)
        if forwarded is not None:
            kwargs = {**kwargs, "torch_dtype": forwarded}
        loaded = self.modules.loaded_model(node, path, kwargs, frame.scope)
        hazard = self.kept_residual(node, kwargs, loaded)
        if hazard is None:
            return loaded
        record = CallRecord(node, loaded, args, kwargs, method="from_pretrained")
        return self.file.emit(replace(record, kept_residual=hazard), frame)

    def kept_residual(
        self, node: cst.Call, kwargs: dict[str, Operand], loaded: Fact
    ) -> KeptResidualLoad | None:
        """A half load of a class keeping a part float32 ahead of a fused norm."""

        def summary_of(name: str) -> ClassSummary | None:
            located = self.file.imports.locate(cst.parse_expression(name))
            project = self.file.project
            found = project(*located) if project is not None and located is not None else None
            return found if isinstance(found, ClassSummary) else None

        file = self.file
        return load_hazard(
            node, kwargs, loaded, file.module, file.imports.resolve, summary_of, file.elsewhere
        )

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
        cast = self.casts.cast_call(node, method, recv, args, kwargs, script=frame.scope.script)
        if cast is not None:
            return cast
        if method in T.NEW_METHODS:
            if "dtype" in kwargs:
                return as_tensor_of(kwargs["dtype"].fact, node, Cause.CAST, "explicit dtype=")
            return replace(recv, zero_dim=False)
        if method in ("softmax", "log_softmax") and "dtype" in kwargs:
            return self.casts.dtype_arg(kwargs["dtype"], node, recv)
        if recv.zero_dim and dimensioning(method, args):
            return replace(recv, zero_dim=False)  # ``sigma.flatten()``: promotes from now on
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
            return op_result(*facts)
        return recv

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
        default = "dtype" in kwargs and self._default_dtype(kwargs["dtype"].node)
        if default:  # ``torch.empty(shape, dtype=torch.get_default_dtype())``: as without it
            kwargs = {k: v for k, v in kwargs.items() if k != "dtype"}
        result = carried(self.torch_result(node, qual, leaf, args, kwargs, frame), node)
        if default and result.origin is not None and result.origin.node is node:
            said = "`dtype=torch.get_default_dtype()`"
            text = result.origin.text.replace("without `dtype=`", f"with {said}")
            result = replace(result, origin=replace(result.origin, text=text))
        if op is T.OpKind.MATMUL and "out_dtype" in kwargs:
            # ``torch.addmm(bias.float(), a, b, out_dtype=torch.float32)``: mixed by design
            op = None
            result = self.casts.dtype_arg(kwargs["out_dtype"], node, result, "out_dtype=")
        named = qual == "einops.einsum"  # ``einsum(x, y, "b i d, b j d -> b i j")``
        spec = (args[-1] if named else args[0]).node if qual.endswith(".einsum") and args else None
        if isinstance(spec, cst.SimpleString) and isinstance(spec.evaluated_value, str):
            equation = spec.evaluated_value
            if named:
                equation = T.einops_equation(equation) or ""
            if equation and not T.einsum_contracts(equation):
                op = None  # a broadcast product promotes, like ``*``
                operands = args[:-1] if named else args[1:]
                tensors = [f for a in operands for f in (a.fact, *(o.fact for o in items(a)))]
                result = promote([f for f in tensors if f.is_tensor], node)
        if result.is_tensor and (
            (qual in T.SHAPE_FACTORIES and _empty_shape(args, kwargs))
            or (qual == f"torch.{leaf}" and _full_reduction(leaf, args[1:], kwargs))
            or (qual in T.LOSS_FUNCTIONS and _reduces(kwargs))
        ):
            result = replace(result, zero_dim=True)  # ``torch.full((), 1e4)``, ``torch.sum(x)``
        trained = self.file.training.torch_call(node, qual, args, kwargs, frame)
        if trained is not None:  # GradScaler(...), torch.optim.AdamW(...), clip_grad_norm_(...)
            result = trained
        result = self.regions.torch_in_region(
            node, qual, aten if op is not None else None, frame, result
        )
        return self.file.emit(
            CallRecord(node, result, args, kwargs, qual=qual, op=op, aten=aten), frame
        )

    def _default_dtype(self, node: cst.BaseExpression) -> bool:
        """``torch.get_default_dtype()``: the dtype a factory takes when given none."""
        return (
            isinstance(node, cst.Call)
            and not node.args
            and self.file.imports.resolve(node.func) == "torch.get_default_dtype"
        )

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
            return self.file.code(node.func)

        if qual in T.SAME_DTYPE_FUNCTIONS and args and args[0].fact.is_tensor:
            first = args[0].fact  # ``rearrange(qkv, "b n (t h d) -> t b h n d", t=3)``
            if first.zero_dim and qual in T.DIMENSIONING_FUNCTIONS:
                return replace(first, zero_dim=False)  # ``torch.broadcast_to(s, (4,))``
            return first
        if qual in T.EACH_OWN_FUNCTIONS:
            return _each_own(node, args)
        if qual in T.MODULE_WRAPPERS and args and args[0].fact.kind is Kind.MODULE:
            # ``weight_norm(nn.Conv1d(...))`` is that Conv1d. Its ``.weight`` is recomputed
            # only by the next forward (a cast leaves it stale), so, as for a container, its
            # dtype is spelled from its parameters (``next(m.parameters()).dtype``).
            return replace(args[0].fact, container=True)

        if qual.startswith("torch.nn.") and qual.count(".") == 2:
            name = qual.rsplit(".", 1)[-1]
            if name[:1].isupper():
                if name in T.CONTAINER_LAYERS and args:
                    first = args[0].fact
                    layer = first.layer if first.kind is Kind.MODULE else None
                    built = self.modules.construct_module(node, layer, frame, kwargs)
                    library = first.library if first.kind is Kind.MODULE else False
                    return replace(built, layer=layer, container=True, library=library)
                if name in ("Parameter", "Buffer", "ParameterList", "ParameterDict"):
                    inner = args[0].fact if args else UNKNOWN_TENSOR
                    if frame.scope.in_module:
                        inner = unhanded(self.file, frame, inner) or Fact(
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
                return self.modules.construct_module(node, name, frame, kwargs, library=True)
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
            made = self.casts.dtype_arg(kwargs["dtype"], node, UNKNOWN_TENSOR)
            if leaf in ("tensor", "as_tensor") and args and _scalar_data(args[0]):
                # ``torch.tensor(d_k, dtype=torch.float32)`` is 0-dim: it does not promote
                # a dimensioned tensor of its category, so ``scores / sqrt(it)`` stays half.
                made = replace(made, zero_dim=True)
            return made
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
            if fill.kind is not Kind.SCALAR or fill.value is None:
                return UNKNOWN_TENSOR  # ``torch.full(shape, n)``: int64 when ``n`` is an int
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
                    Origin(node, Cause.LITERAL, self.file.code(node)),
                    layer="finfo",
                )
            return Fact(Kind.OTHER, layer="finfo")
        if qual in T.EXTERNAL_LAYERS:  # apex.normalization.FusedRMSNorm(...)
            layer = T.EXTERNAL_LAYERS[qual]
            return self.modules.construct_module(node, layer, frame, kwargs, library=True)
        if qual == "einops.pack" and args:  # (the tensors concatenated, their shapes)
            seq = args[0].fact
            items = seq.items if seq.kind is Kind.SEQ else None
            packed = promote(items, node) if items is not None else element(seq)
            return seq_of([packed, Fact(Kind.OTHER)])
        if qual == "einops.unpack" and args:  # the pieces of one tensor
            return Fact(Kind.SEQ, elem=args[0].fact)
        if qual in T.NON_TENSOR_FUNCTIONS or not (qual == "torch" or qual.startswith("torch.")):
            # (``torchaudio.load``, ``torchvision.ops.nms``: another library's function gives
            # its result no argument's dtype unless a table says so)
            if leaf == "from_pretrained":
                return self._load(node, qual, args, kwargs, frame)
            return UNKNOWN
        if leaf.endswith("_like") and args:
            return (
                self.casts.same_as(args[0].fact, node, f"`{code()}`")
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
        if qual in T.STATISTIC_MEAN_FUNCTIONS and args and args[0].fact.is_tensor:
            # each item what the call of one tensor gives (its range: engine.ranges)
            one = carried(promote([args[0].fact], node), node)
            return seq_of([one, one])
        if leaf in ("softmax", "log_softmax") and "dtype" in kwargs:
            return self.casts.dtype_arg(kwargs["dtype"], node, args[0].fact if args else UNKNOWN)
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
        if op in (T.OpKind.LINEAR, T.OpKind.CONV) and len(tensors) > 1 and tensors[1].kept_float32:
            # ``F.linear(x, self.lora_A[name])``: a weight kept float32 apart from the model
            # computes in float32 (or refuses ``x``), as a float32 part called as a module does
            what = Origin(node, Cause.ACTIVATION, f"the output of `{code()}`")
            return Fact(Kind.TENSOR, Prec.FULL, tensors[1].dtype, what)
        if op is not None:
            result = op_result(*tensors) if tensors else UNKNOWN_TENSOR
            params = frozenset().union(*(f.params for f in tensors))
            # ``torch.einsum(spec, t1, w1)`` of a function's inputs follows them, as ``@`` does
            return replace(result, params=params) if result is UNKNOWN_TENSOR else result
        if not tensors:
            seqs = [a.fact for a in args if a.fact.kind is Kind.SEQ]
            return element(seqs[0]) if seqs else UNKNOWN_TENSOR
        result = promote(tensors, node)
        if T.is_linalg(qual) and result.prec is Prec.FULL and not result.zero_dim:
            text = f"computed in float32 by `{code()}` (linear algebra has no half kernels)"
            return replace(result, origin=Origin(node, Cause.FACTORY, text), mixed=None)
        if leaf in T.FLOAT_VALUED and result.is_tensor and result.prec is Prec.INT:
            return int_to_float(result, node, f"`{code()}`")
        return result

    def tensor_literal(self, node: cst.Call, args: tuple[Operand, ...], code: str) -> Fact:
        data = args[0] if args else None
        if data is None:
            return UNKNOWN_TENSOR
        if data.fact.kind is Kind.TENSOR:
            return data.fact
        if data.fact.kind is Kind.SEQ and not isinstance(data.node, (cst.List, cst.Tuple)):
            return tensor_of_numbers(data.fact, node, code)
        literal = data.node
        zero_dim = _scalar_data(data)
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


def _scalar_data(data: Operand) -> bool:
    """Whether ``torch.tensor(data)`` makes a 0-dim tensor: a number, or a value that is
    neither a sequence nor a tensor (``torch.tensor(self.head_dim)``, ``torch.tensor(d ** 0.5)``).
    """
    if isinstance(data.node, (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp)):
        return False
    return data.fact.kind in (Kind.SCALAR, Kind.OTHER)


def _each_own(node: cst.Call, args: tuple[Operand, ...]) -> Fact:
    """``h, s = torch.broadcast_tensors(x, scale)``: each tensor in its own dtype, none
    promoted; a 0-dim one broadcast with a dimensioned one has dims (and promotes) after."""
    if any(a.star for a in node.args):
        return Fact(Kind.SEQ)  # ``broadcast_tensors(*tensors)``: which ones is not known
    facts = [a.fact for a in args]
    dimensioned = any(f.is_tensor and not f.zero_dim for f in facts)
    return seq_of(replace(f, zero_dim=False) if dimensioned and f.zero_dim else f for f in facts)


def _parameter_free_norm(layer: str, kwargs: dict[str, Operand]) -> bool:
    """``nn.LayerNorm(d, elementwise_affine=False)`` has no weights to clash with."""
    for key in ("elementwise_affine", "affine"):
        flag = kwargs.get(key)
        if flag is not None and isinstance(flag.node, cst.Name) and flag.node.value == "False":
            return "Norm" in layer
    return False


def _empty_shape(args: tuple[Operand, ...], kwargs: dict[str, Operand]) -> bool:
    """``torch.full((), v)``, ``torch.zeros([])``, ``zeros(size=())``: an empty shape, 0-dim."""
    given = args[0] if args else kwargs.get("size")
    shape = given.node if given is not None else None
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


def _compared(func: cst.BaseExpression) -> bool:
    """``(a > b).float()``: the method is called on a comparison."""
    return isinstance(func, cst.Attribute) and isinstance(func.value, cst.Comparison)


def forwarded_dtype(node: cst.Call, kwargs: dict[str, Operand], frame: Frame) -> Operand | None:
    """``from_pretrained(path, **kwargs)`` where ``kwargs`` is the function's own ``**``
    parameter: a ``torch_dtype=`` its caller passes reaches the load as a keyword. The dtype
    is that of the caller's keyword, a parameter of the function one past its named ones
    (``Definitions.substitute`` reads it off each call); None when the load names its dtype
    or forwards no such parameter."""
    fn = frame.scope.function
    if fn is None or "torch_dtype" in kwargs or "dtype" in kwargs:
        return None
    star = fn.params.star_kwarg
    if not isinstance(star, cst.Param):
        return None
    name = star.name.value
    spread = next(
        (
            a
            for a in node.args
            if a.star == "**" and isinstance(a.value, cst.Name) and a.value.value == name
        ),
        None,
    )
    if spread is None or name in frame.env:  # (rebound: no longer what the caller passed)
        return None
    named = [*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params]
    slot = len(named) - (
        1 if frame.scope.class_name and named[:1] and named[0].name.value in ("self", "cls") else 0
    )
    return Operand(spread.value, Fact(Kind.DTYPE, params=frozenset({slot})))
