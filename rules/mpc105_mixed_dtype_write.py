"""MPC105: a float32 tensor written into a half tensor by an op that does not cast."""

from __future__ import annotations

import libcst as cst

from mpcheck.facts import Cause, Fact, Prec
from mpcheck.names import dotted
from mpcheck.rule import NodeEdit, NodeFix, Rule
from mpcheck.sites import CallSite, Operand, SetItemSite
from mpcheck.torch_api import DTYPE_STRICT_WRITES


class MixedDtypeWrite(Rule):
    code = "MPC105"
    name = "mixed-dtype-write"
    summary = (
        "A float32 tensor is written into a half-precision tensor through an advanced index, "
        "`index_put_`, `index_add_`, `index_copy_`, `scatter_`, `masked_scatter_` or `lerp_`, "
        "which require matching dtypes."
    )
    why = """
        Most writes into a tensor cast the source to the destination's dtype: `t += src`,
        `t.add_(src)`, `t.copy_(src)` and slice assignment `t[0:2] = src` all do. Writes that
        go through an index or a fused kernel do not: `t[idx] = src` with a tensor, list or
        boolean-mask index runs `index_put_`, and `index_add_`, `index_copy_`, `scatter_`,
        `scatter_add_`, `masked_scatter_` and `lerp_` check that `src` has `t`'s dtype. When the
        model runs in float16/bfloat16, a source forced to float32 (`.float()`, a factory such
        as `torch.zeros(n)` without `dtype=`) no longer matches. Autocast does not help: it
        never touches in-place ops, so this raises with or without it, on every device.
        """
    symptom = """
        `RuntimeError: Index put requires the source and destination dtypes match, got Half for
        the destination and Float for the source.` (also `index_add_(): self (Half) and source
        (Float) must have the same scalar type`, `scatter(): Expected self.dtype to be equal to
        src.dtype`, `masked_scatter: expected self and source to have same dtypes but gotHalf
        and Float`, ``expected dtype c10::Half for `end` but got dtype float``).
        """
    how_to_fix = """
        Cast the source to the destination's dtype where it is written: `src.to(t.dtype)`.
        mpcheck's fix does exactly that (a safe fix: the write stores the values in `t`'s
        dtype anyway, as a slice assignment would, and where the code ran before -- `t`
        float32 -- the cast changes nothing).
        """
    bad = """
        class KVCache(nn.Module):
            def update(self, k, positions):
                self.keys[:, positions] = k.float()     # keys are half in a half model
        """
    good = """
        class KVCache(nn.Module):
            def update(self, k, positions):
                self.keys[:, positions] = k.to(self.keys.dtype)
        """
    fixable = True

    def check_setitem(self, site: SetItemSite) -> None:
        if site.advanced is None or site.augmented:
            return  # basic indexing copies with a cast; ``t[i] += v`` updates in place
        if not _half(site.target.fact) or not _forced_fp32(site.value.fact):
            return
        how = (
            f"assigning through the advanced index `{self.ctx.code(site.advanced.node)}` "
            "runs `index_put_`, which does not cast"
        )
        self._report(site.node, site.target, site.value, how)

    def check_call(self, call: CallSite) -> None:
        op = call.tensor_op()
        if op is None or op.name not in DTYPE_STRICT_WRITES or not _half(op.tensor.fact):
            return
        auto = call.scope.autocast
        if not op.name.endswith("_") and auto is not None and auto.recasts(op.name):
            return  # out-of-place index_copy/index_put/scatter_add: autocast promotes them
        for index, keyword in DTYPE_STRICT_WRITES[op.name]:
            source = op.arg(index, keyword)
            if source is not None and _forced_fp32(source.fact):
                how = f"`{op.name}` requires matching dtypes and does not cast, even under autocast"
                self._report(call.node, op.tensor, source, how)
                return

    def _report(self, node: cst.CSTNode, dest: Operand, source: Operand, how: str) -> None:
        what = self.ctx.code(source.node)
        target = self.ctx.code(dest.node)
        if dest.fact.prec is Prec.HALF and dest.fact.dtype:
            kind = f"is {dest.fact.dtype}"
        else:
            kind = "has the model's dtype, half when the model runs in half precision"
        origin = source.fact.origin
        inline = origin is None or origin.node is source.node  # ``k.float()`` says it all
        where = "" if inline else f" ({self.where(source.fact)})"
        message = (
            f"`{what}` is {source.fact.dtype or 'float32'}{where} but `{target}` {kind}: "
            f"{how}; cast it to `{target}.dtype`"
        )
        related = [] if inline else self.related_for(what, source.fact)
        if dest.fact.origin is not None and dest.fact.cause in _EXPLAINING:
            related.append((dest.fact.origin.node, f"`{target}` {dest.fact.origin.text}"))
        fix = None
        if dotted(dest.node) is not None:
            dtype = f"{self.ctx.module.code_for_node(dest.node)}.dtype"
            fix = NodeFix(
                f"Cast `{what}` to `{dtype}`",
                (NodeEdit(source.node, f"{self._uncast(source.node)}.to({dtype})"),),
            )
        self.report(node, message, related=related, fix=fix)

    def _uncast(self, node: cst.BaseExpression) -> str:
        """``k`` for ``k.float()``/``k.double()`` (the cast is replaced), else ``node`` itself."""
        if (
            isinstance(node, cst.Call)
            and not node.args
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in ("float", "double")
        ):
            return self.ctx.atom(node.func.value)
        return self.ctx.atom(node)


_EXPLAINING = (Cause.CAST, Cause.MODEL_CAST, Cause.AUTOCAST)


def _half(fact: Fact) -> bool:
    return fact.is_tensor and fact.prec in (Prec.MODEL, Prec.HALF)


def _forced_fp32(fact: Fact) -> bool:
    """float32/float64 whatever the model runs in; 0-dim tensors are cast like scalars."""
    return fact.is_tensor and fact.prec is Prec.FULL and not fact.zero_dim
