"""What rules see: places in the code with the dtype facts the engine inferred.

The analysis builds these while it walks a function in statement order, so a
rule reads facts as they hold *at that point* of the program.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import libcst as cst

from mpcheck import autocast_ops
from mpcheck.facts import Fact, Kind
from mpcheck.torch_api import OpKind


@dataclass(frozen=True)
class Autocast:
    """An autocast region (``with`` block or decorator)."""

    node: cst.CSTNode
    device: str | None  # "cuda", "cpu", ...; None when not known statically
    dtype: str | None  # "float16" / "bfloat16"; None = the device's default
    enabled: bool | None  # None when ``enabled=`` is an expression

    @property
    def active(self) -> bool:
        return self.enabled is not False

    @property
    def low_dtype(self) -> str | None:
        if self.dtype is not None:
            return self.dtype
        return {"cuda": "float16", "cpu": "bfloat16"}.get(self.device or "")

    def recasts(self, aten: str) -> bool:
        """Whether autocast in this region changes the dtypes ``aten`` computes in."""
        if not self.active or not aten:
            return False
        devices = [self.device] if self.device in ("cuda", "cpu") else ["cuda", "cpu"]
        return any(autocast_ops.policy(aten, d) not in (None, "banned") for d in devices)


@dataclass(frozen=True)
class Scope:
    """Where a piece of code runs."""

    function: cst.FunctionDef | None
    class_name: str | None
    in_module: bool  # a method of an nn.Module subclass: may run in half precision
    autocast: Autocast | None  # innermost autocast region, enabled or not


@dataclass(frozen=True)
class Operand:
    node: cst.BaseExpression
    fact: Fact


@dataclass(frozen=True)
class CallSite:
    """A call (or ``a @ b``) with the facts of its callee and arguments."""

    node: cst.Call | cst.BinaryOperation
    qualname: str | None  # resolved through imports: "torch.nn.functional.linear"
    method: str | None  # "masked_fill" for ``x.masked_fill(...)`` on a non-import receiver
    receiver: Operand | None  # ``x`` in ``x.method(...)``, or the module being called
    args: tuple[Operand, ...]
    kwargs: Mapping[str, Operand]
    op: OpKind | None  # family of ops whose operands must share a dtype
    aten: str  # the op autocast dispatches on ("" when none)
    scope: Scope
    result: Fact
    module_path: str | None = None  # "self.proj" / "model.block" for module calls
    extra: Mapping[str, object] = field(default_factory=dict)

    @property
    def is_module_call(self) -> bool:
        return self.receiver is not None and self.method is None and self.qualname is None

    def arg(self, index: int | None, keyword: str | None = None) -> Operand | None:
        """Positional ``index`` or keyword ``keyword``, whichever the call used."""
        if keyword is not None and keyword in self.kwargs:
            return self.kwargs[keyword]
        if index is not None and index < len(self.args):
            return self.args[index]
        return None

    def operands(self) -> tuple[Operand | None, tuple[Operand, ...]]:
        """``(input, parameters)`` of an op whose operands must share a dtype.

        For a layer call the parameters are the layer itself (its weights'
        dtype); for ``F.linear``/``F.conv*``/norms they are the weight and bias
        arguments; for matmuls every tensor operand after the first.
        """
        if self.op is None or self.aten == "rms_norm":
            return None, ()  # rms_norm: fp32 input with low weight runs (returns float32)
        if self.is_module_call:
            module = self.receiver
            assert module is not None
            weights = Operand(module.node, replace(module.fact, kind=Kind.TENSOR, layer=None))
            return self.arg(0, "input"), (weights,)
        if self.op is OpKind.NORM:
            slots = {"batch_norm": (3, 4)}.get(self.aten, (2, 3))
            params = [self.arg(slots[0], "weight"), self.arg(slots[1], "bias")]
            if self.aten == "batch_norm":
                params += [self.arg(1, "running_mean"), self.arg(2, "running_var")]
            return self.arg(0, "input"), tuple(p for p in params if p and p.fact.is_tensor)
        tensors = [r for r in (self.receiver,) if self.method and r and r.fact.is_tensor]
        tensors += [a for a in self.args if a.fact.is_tensor]
        tensors += [o for k, o in self.kwargs.items() if o.fact.is_tensor and k != "out"]
        if not tensors:
            return None, ()
        return tensors[0], tuple(tensors[1:])

    @property
    def recast_by_autocast(self) -> bool:
        auto = self.scope.autocast
        return auto is not None and auto.recasts(self.aten)


@dataclass(frozen=True)
class SetItemSite:
    """``target[index] = value`` (also ``target[index] += value``)."""

    node: cst.CSTNode
    target: Operand
    index: cst.BaseSlice | None
    value: Operand
    scope: Scope


@dataclass(frozen=True)
class ClassSite:
    node: cst.ClassDef
    bases: tuple[str, ...]  # qualified (or bare) base names
    is_module: bool
