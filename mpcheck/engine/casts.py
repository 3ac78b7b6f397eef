"""Casts: what ``x.float()``, ``x.to(...)``, ``x.type_as(y)`` and ``dtype=`` make.

A cast changes a tensor's dtype and nothing else: a 0-dim tensor stays 0-dim
(``1 / torch.tensor(r).float().sqrt()`` still does not promote a half tensor).
"""

from __future__ import annotations

import libcst as cst

from mpcheck.engine.base import Walk
from mpcheck.engine.facts import (
    UNKNOWN,
    UNKNOWN_TENSOR,
    Cause,
    Fact,
    Kind,
    Origin,
    Prec,
    replace,
    tensor_of_dtype,
)
from mpcheck.engine.promotion import cast_method, legacy_type
from mpcheck.engine.sites import Operand
from mpcheck.knowledge import torch_api as T
from mpcheck.project.names import dotted


class Casts:
    """The part that knows what a cast of a tensor makes."""

    def __init__(self, file: Walk) -> None:
        self.file = file

    def cast_call(
        self,
        node: cst.Call,
        method: str,
        recv: Fact,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        *,
        script: bool = False,
    ) -> Fact | None:
        """``x.float()``, ``x.to(...)``, ``x.type(...)``, ``x.type_as(y)`` of a tensor ``x``;
        None for any other method. ``script``: outside a module (see :meth:`to_call`)."""
        if method in T.CAST_METHODS:
            cast = cast_method(method, node, recv.prec)
        elif method in ("to", "type"):
            cast = self.to_call(node, method, recv, args, kwargs, script=script)
        elif method == "type_as" and args:
            cast = self.same_as(args[0].fact, node, f"`.type_as({self.file.code(args[0].node)})`")
        else:
            return None
        return replace(cast, zero_dim=recv.zero_dim) if cast.is_tensor else cast

    def to_call(
        self,
        node: cst.Call,
        method: str,
        recv: Fact,
        args: tuple[Operand, ...],
        kwargs: dict[str, Operand],
        *,
        script: bool = False,
    ) -> Fact:
        """``x.to(...)`` / ``x.type(...)``: dtype, other tensor, or only a device.

        Outside a module (``script``: a script, trainer or sampler), a cast to a dtype it does
        not spell (``.to(dtype=self.model.train_dtype.torch_dtype())``, ``.to(weight_dtype)``)
        is a cast to the run's working dtype: half on the runs that train in half, as a model
        cast to it is (:meth:`Modules.module_cast`). In a module such a name may be any
        part's own dtype, so nothing is assumed there."""
        cand = [kwargs["dtype"]] if "dtype" in kwargs else list(args)
        for op in cand:
            f = op.fact
            if f.kind is Kind.DTYPE:
                return self.dtype_arg(op, node, recv, verb=f".{method}")
            if f.kind is Kind.TENSOR and method == "to":
                return self.same_as(f, node, f"`.to({self.file.code(op.node)})`")
            if isinstance(op.node, cst.SimpleString):
                legacy = op.node.evaluated_value
                if isinstance(legacy, str) and legacy.endswith("Tensor"):
                    return legacy_type(legacy, node)
            if method == "type" and f.kind is Kind.OTHER:
                name = dotted(op.node) or ""
                if name.endswith("Tensor"):
                    return legacy_type(name, node)
            if _names_a_dtype(op.node):
                if script and recv.is_tensor:
                    return _working_dtype(node, self.file.code(op.node))
                return UNKNOWN_TENSOR  # a dtype we cannot see: assume nothing
        if method == "type" and not cand:
            # ``q.type()`` names q's dtype (``'torch.cuda.HalfTensor'``): ``.type(q.type())``
            # casts to it as ``.to(q.dtype)`` does
            return (
                replace(recv, kind=Kind.DTYPE, items=None, elem=None) if recv.is_tensor else UNKNOWN
            )
        if recv.cause is Cause.DATA and any(not _device_like(op) for op in cand):
            return UNKNOWN_TENSOR  # ``embeds.to(hidden_states)``: may well take its dtype
        return recv

    def dtype_arg(self, op: Operand, node: cst.CSTNode, recv: Fact, verb: str = "dtype=") -> Fact:
        f = op.fact
        code = self.file.code(op.node)
        if f.prec is Prec.FULL:  # ``via``: where a dtype held elsewhere (``self.dtype``) was set
            how = f"upcast to {f.dtype} by `{verb}({code})`"
            how = how if verb != "dtype=" else f"made {f.dtype} by `dtype={code}`"
            made = tensor_of_dtype(f.dtype or "float32", node, Cause.UPCAST, how)
            via = self.file.dtype_source(op)
            if via is None or made.origin is None:
                return made
            return replace(made, origin=replace(made.origin, via=via))
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


def _device_like(op: Operand) -> bool:
    """``.to(device)``, ``.to("cuda")``, ``.to(accelerator.device, non_blocking=True)``."""
    if isinstance(op.node, cst.SimpleString) or op.fact.kind is Kind.SCALAR:
        return True
    name = (dotted(op.node) or "").lower()
    return "device" in name or name.rsplit(".", 1)[-1] in ("dev", "cuda", "cpu", "rank")


def _working_dtype(node: cst.CSTNode, code: str) -> Fact:
    """A tensor cast to the run's working dtype: the model's dtype, half on half runs."""
    text = f"cast to the working dtype `{code}` (half when that is float16 or bfloat16)"
    return Fact(Kind.TENSOR, Prec.MODEL, None, Origin(node, Cause.CAST, text))


def _names_a_dtype(node: cst.CSTNode) -> bool:
    """``compute_dtype``, ``self.dtype``, ``cfg.weight_dtype``: a dtype we cannot resolve.

    Also a call of such a name: ``get_parameter_dtype(self.proj_in)``, ``self._get_dtype()``.
    """
    if isinstance(node, cst.Call):
        node = node.func
    name = dotted(node) if isinstance(node, cst.BaseExpression) else None
    return name is not None and name.lower().endswith("dtype")
