"""MPC301: a constant beyond float16's range is written into a half-precision tensor."""

from __future__ import annotations

import math

import libcst as cst

from mpcheck.facts import Fact, Kind, Prec
from mpcheck.names import dotted
from mpcheck.rule import NodeEdit, NodeFix, Rule
from mpcheck.sites import CallSite, Operand, SetItemSite
from mpcheck.torch_api import CHECKED_FILL_FACTORIES, CHECKED_SCALAR_WRITES, UNCHECKED_SCALAR_OPS

# Largest finite values (torch.finfo(...).max).
LIMITS = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38}
SILENT = "and {inf} turns into NaN downstream (a fully masked softmax row, `0 * inf`)"


class Fp16OverflowConstant(Rule):
    code = "MPC301"
    name = "fp16-overflow-constant"
    summary = (
        "A constant beyond float16's range (`-1e9`, `1e5`, `torch.finfo(torch.float32).min`) "
        "is written into a tensor that is float16 when the model runs in half precision."
    )
    why = """
        float16's largest finite value is 65504. Attention code often masks scores with a
        "very negative" constant such as `-1e9` or `torch.finfo(torch.float32).min`; in a model
        that runs in float16 (`model.half()`, `torch_dtype=torch.float16`, or fp16 autocast,
        whose matmuls produce float16 scores even in code written for float32) that constant
        does not fit. Ops that convert the scalar with a range check -- `masked_fill`,
        `fill_`, `index_fill_`, `clamp`, `torch.full`/`full_like`/`new_full`, `F.pad` --
        raise. Ops that do not -- `scores + (1 - mask) * -1e9`, `torch.where(mask, -1e9, x)`,
        `x[mask] = -1e9` -- silently produce `-inf`, and `-inf` becomes NaN as soon as a row
        is fully masked (softmax) or it meets a zero (`0 * inf`). Both forms are reported as
        errors: the silent one corrupts training without a trace. `-1e9` fits bfloat16
        (its range is float32's), so it is reported only where the tensor can be float16;
        `torch.finfo(torch.float32).min` overflows bfloat16 as well.
        """
    symptom = """
        `RuntimeError: value cannot be converted to type c10::Half without overflow` (or
        `c10::BFloat16` for `torch.finfo(torch.float32).min`); for the arithmetic, `where` and
        item-assignment forms, no error: `-inf` in the scores and NaN losses later.
        """
    how_to_fix = """
        Use the most negative value of the tensor's own dtype, `torch.finfo(x.dtype).min`
        (`.max` for a positive bound), or a constant that fits float16 such as `-1e4`.
        mpcheck's fix writes `torch.finfo(x.dtype).min` when the tensor is a plain name. It
        is an unsafe fix: in float32 the constant becomes -3.4e38 instead of -1e9, so a mask
        that is later added to another such mask reaches `-inf` (NaN after softmax) where
        the old constant did not; check how the masked values are used before applying it.
        """
    bad = """
        class Attention(nn.Module):
            def forward(self, q, k, v, causal):
                scores = q @ k.transpose(-1, -2)
                scores = scores.masked_fill(~causal, -1e9)   # raises in float16
                return scores.softmax(-1) @ v
        """
    good = """
        class Attention(nn.Module):
            def forward(self, q, k, v, causal):
                scores = q @ k.transpose(-1, -2)
                scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)
                return scores.softmax(-1) @ v
        """
    fixable = True

    def check_call(self, call: CallSite) -> None:
        if isinstance(call.node, cst.BinaryOperation):
            if call.qualname in ("torch.add", "torch.sub", "torch.mul") and len(call.args) == 2:
                left, right = call.args
                self._pair(call, left, right)
                self._pair(call, right, left)
            return
        if call.qualname == "torch.where" and len(call.args) == 3:
            self._pair(call, call.args[1], call.args[2])
            self._pair(call, call.args[2], call.args[1])
            return
        factory = CHECKED_FILL_FACTORIES.get(call.qualname or "")
        if factory is not None:
            value = call.arg(*factory)
            self._check(value, call.result, self._factory_dtype(call), call, raises=True)
            return
        op = call.tensor_op()
        if op is None:
            return
        if op.name in CHECKED_SCALAR_WRITES:
            # ``x.new_full(size, v, dtype=...)`` writes into the tensor it creates
            target = call.result if op.name == "new_full" else op.tensor.fact
            dtype = self._dtype_of(op.tensor.node)
            if op.name == "new_full" and "dtype" in op.kwargs:
                dtype = self._dtype_expr(op.kwargs["dtype"].node)
            for index, keyword in CHECKED_SCALAR_WRITES[op.name]:
                self._check(op.arg(index, keyword), target, dtype, call, raises=True)
        elif op.name in UNCHECKED_SCALAR_OPS:
            for index, keyword in UNCHECKED_SCALAR_OPS[op.name]:
                value = op.arg(index, keyword)
                self._check(
                    value, op.tensor.fact, self._dtype_of(op.tensor.node), call, raises=False
                )

    def check_setitem(self, site: SetItemSite) -> None:
        dtype = self._dtype_of(site.target.node)
        self._check(site.value, site.target.fact, dtype, site, raises=False)

    # -- helpers -------------------------------------------------------------------------
    def _pair(self, call: CallSite, value: Operand, tensor: Operand) -> None:
        """``tensor <op> value`` / ``where(mask, value, tensor)``: unchecked, gives inf."""
        if tensor.fact.is_tensor:
            self._check(value, tensor.fact, self._dtype_of(tensor.node), call, raises=False)

    def _check(
        self,
        value: Operand | None,
        target: Fact,
        dtype_code: str | None,
        site: CallSite | SetItemSite,
        *,
        raises: bool,
    ) -> None:
        if value is None or value.fact.kind is not Kind.SCALAR or value.fact.value is None:
            return
        number = value.fact.value
        if not target.is_tensor or target.prec not in (Prec.MODEL, Prec.HALF):
            return
        low = target.dtype if target.prec is Prec.HALF and target.dtype in LIMITS else "float16"
        if not math.isfinite(number) or abs(number) <= LIMITS[low]:
            return
        text = self.ctx.code(value.node)
        shown = f"`{text}`" if _is_literal(value.node) else f"`{text}` ({number:g})"
        bound = "min" if number < 0 else "max"
        use = f"torch.finfo({dtype_code or '<tensor>.dtype'}).{bound}"
        when = self._when(target, low)
        call = f"`{self.ctx.code(site.node, 50)}`"
        if raises:
            c10 = "Half" if low == "float16" else "BFloat16"
            error = f"value cannot be converted to type c10::{c10} without overflow"
            effect = f'{call} raises "{error}" {when}'
        else:
            inf = "-inf" if number < 0 else "inf"
            effect = f"{call} silently gives {inf} {when}, {SILENT.format(inf=inf)}"
        message = f"{shown} is beyond {low}'s range (±{LIMITS[low]:g}): {effect}; use `{use}`"
        related = []
        if target.origin is not None and target.prec is Prec.HALF:
            related.append((target.origin.node, f"{low} here: {target.origin.text}"))
        fix = None
        finfo = self.ctx.imports.spell("torch.finfo")
        if dtype_code is not None and finfo is not None:
            code = f"{finfo}({dtype_code}).{bound}"
            fix = NodeFix(
                f"Use `{code}`",
                (NodeEdit(value.node, code),),
                applicability="unsafe",
            )
        self.report(value.node, message, related=related, fix=fix)

    def _when(self, target: Fact, low: str) -> str:
        """``when the model runs in float16`` / ``because the tensor is float16 (...)``."""
        if target.prec is Prec.MODEL:
            return f"when the model runs in {low}"
        if target.origin is not None:
            return f"because the tensor is {low} ({self.where(target)})"
        return f"because the tensor is {low}"

    def _dtype_of(self, node: cst.BaseExpression) -> str | None:
        """``x.dtype`` for a tensor written as a plain name, else None (no fix)."""
        if isinstance(node, cst.Name):
            return f"{node.value}.dtype"
        return None

    def _dtype_expr(self, node: cst.BaseExpression) -> str | None:
        """A ``dtype=`` argument simple enough to repeat: ``x.dtype``, ``dtype``, ``self.dtype``."""
        return dotted(node)

    def _factory_dtype(self, call: CallSite) -> str | None:
        if "dtype" in call.kwargs:
            return self._dtype_expr(call.kwargs["dtype"].node)
        if call.qualname != "torch.full" and call.args:  # full_like(x, v), F.pad(x, ...)
            return self._dtype_of(call.args[0].node)
        return None


def _is_literal(node: cst.BaseExpression) -> bool:
    """``-1e9``, ``1e5``, ``-100000.0``: the number itself, nothing to explain."""
    if isinstance(node, cst.UnaryOperation):
        return _is_literal(node.expression)
    return isinstance(node, (cst.Float, cst.Integer))
