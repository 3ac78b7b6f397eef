"""MPC103: attention whose query, key and value (or mask) reach it with different dtypes."""

from __future__ import annotations

import libcst as cst

from mpcheck.api import DEFAULT_FLOAT32, CallSite, Edit, Fact, Fix, Operand, OpKind, Prec, Rule

# Reshapes that do not change which tensor an attention operand is: `k.transpose(-2, -1)` is `k`.
_SAME_TENSOR = frozenset("transpose permute contiguous swapaxes swapdims view reshape".split())


class AttentionDtypeMismatch(Rule):
    code = "MPC103"
    name = "attention-dtype-mismatch"
    summary = (
        "The query, key and value of an attention call (fused or written by hand) carry "
        "different dtypes: one was upcast, made by a float32 factory or cached in float32 "
        "while the others stay in the model's half dtype."
    )
    why = """
        `F.scaled_dot_product_attention`, `flash_attn_func` and
        `xformers.ops.memory_efficient_attention` need `q`, `k` and `v` in one dtype, and so do
        the two matmuls of hand-written attention (`q @ k.transpose(-2, -1)` and
        `probs @ v`). Attention code often leaves the model's dtype on purpose: rotary
        embeddings computed on `q.float()`, a softmax taken in float32, a KV cache allocated
        with `torch.zeros(...)` (float32 by default). If only some of the inputs come back to
        the model's dtype, the call raises as soon as the model runs in float16/bfloat16. An
        additive `attn_mask` in half precision with a float32 query raises too (a float32 mask
        with a half query is accepted).

        Under `torch.autocast`, SDPA and the matmuls recast their inputs, so mpcheck stays quiet
        there; flash-attn and xformers kernels are not recast. CPU autocast recasts SDPA only
        since torch 2.2: with `target-torch-version = "2.1"` it is reported in a CPU region.
        A float32 factory tensor that a `torch.cat` already mixed into `k`/`v` is reported
        once, by MPC102, at the factory. A cache kept by a plain class of the file (not a
        module) whose buffers default to `torch.zeros(...)` without `dtype=`, and whose method
        concatenates them with the keys it is handed, is reported here, at the attention
        that takes what the method returns: on the path where the cache is used, whatever
        the branches around it test, unless they test a precision or a device.
        """
    symptom = """
        `RuntimeError: Expected query, key, and value to have the same dtype, but got
        query.dtype: float key.dtype: c10::Half and value.dtype: c10::Half instead.`;
        `Expected attn_mask dtype to be bool or float or to match query dtype`; for the
        hand-written form `expected scalar type Float but found Half` or `expected m1 and m2
        to have the same dtype`.
        """
    how_to_fix = """
        Cast back to one dtype before attention: do the float32 work (rotary, softmax) and
        finish it with `.type_as(q)` / `.to(q.dtype)` on every tensor that left the model's
        dtype, allocate caches with `dtype=k.dtype` (or `torch.zeros_like`), and cast an
        additive mask with `mask.to(q.dtype)`. mpcheck's fix casts the odd operand to the
        others' dtype at the call (an unsafe fix: it changes the precision of the attention).
        """
    bad = """
        class Attention(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.qkv = nn.Linear(dim, 3 * dim)

            def forward(self, x, cos, sin):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                q = q.float() * cos + q.float().flip(-1) * sin  # rotary in float32
                return F.scaled_dot_product_attention(q, k, v)  # q float32, k/v half
        """
    good = """
        class Attention(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.qkv = nn.Linear(dim, 3 * dim)

            def forward(self, x, cos, sin):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                q = (q.float() * cos + q.float().flip(-1) * sin).type_as(k)
                return F.scaled_dot_product_attention(q, k, v)
        """
    fixable = True
    fix_applicability = "unsafe"  # it changes a precision: --unsafe-fixes

    def check_call(self, call: CallSite) -> None:
        if call.recast_by_autocast:
            return
        if call.op is OpKind.ATTENTION:
            q = call.arg(0, "query") or call.arg(None, "q")
            k = call.arg(1, "key") or call.arg(None, "k")
            v = call.arg(2, "value") or call.arg(None, "v")
            mask = call.arg(3, "attn_mask") or call.arg(None, "attn_bias")
            operands = [o for o in (q, k, v) if o is not None]
            if not self.check_operands(call, operands) and q is not None and mask is not None:
                self.check_mask(call, q, mask)
        elif call.attention is not None and call.op is OpKind.MATMUL:
            first, params = call.operands()
            if first is not None:
                self.check_operands(call, [first, *params])

    def check_operands(self, call: CallSite, operands: list[Operand]) -> bool:
        """Report when some attention inputs are float32 and others in the model's dtype."""
        full = [o for o in operands if _full(o.fact)]
        low = [o for o in operands if _low(o.fact)]
        if not full or not low or all(_reported_by_mpc102(o.fact) for o in full):
            return False
        names = [self._name(o.node) for o in full]
        parts = [
            f"`{n}` is {_dtype(o.fact)}{self._from(o.fact)}"
            for n, o in zip(names, full, strict=True)
        ]
        low_names = [self._name(o.node) for o in low]
        if all(o.fact.prec is Prec.MODEL for o in low):
            verb = "has" if len(low) == 1 else "have"
            low_part = f"{_join(low_names)} {verb} the model's dtype"
        else:
            low_part = " and ".join(
                f"`{n}` is {_dtype(o.fact)}{self._from(o.fact)}"
                for n, o in zip(low_names, low, strict=True)
            )
        message = (
            f"{' and '.join(parts)} but {low_part}; {self._what(call)} needs one dtype for "
            "all of them and raises when the model runs in half precision"
        )
        region = call.scope.autocast
        if region is not None and region.active and call.aten:
            message += f" ({region.cited} does not recast its inputs)"
        related: list[tuple[cst.CSTNode, str]] = []
        for name, operand in zip(names + low_names, full + low, strict=True):
            if operand.fact.prec is not Prec.MODEL:  # the model's own dtype needs no pointer
                related += self.related_for(name, operand.fact)
        half = next((o.fact for o in low if o.fact.prec is not Prec.MODEL), low[0].fact)
        fix = self._fix(full, low[0])
        self.report_evidenced(
            call.node, message, call.scope, half, related=_unique(related), fix=fix, op=call
        )
        return True

    def check_mask(self, call: CallSite, q: Operand, mask: Operand) -> None:
        """A half additive mask with a float32 query."""
        if not _full(q.fact) or not _low(mask.fact):
            return
        q_name, mask_name = self._name(q.node), self._name(mask.node)
        message = (
            f"`{mask_name}` is {_dtype(mask.fact)}{self._from(mask.fact)} but the query `{q_name}` "
            f"is {_dtype(q.fact)}{self._from(q.fact)}; an additive attention mask must be bool, "
            "float32 or the query's dtype"
        )
        related = self.related_for(mask_name, mask.fact) + self.related_for(q_name, q.fact)
        fix = self._fix([mask], q)
        self.report_evidenced(
            call.node, message, call.scope, mask.fact, related=_unique(related), fix=fix, op=call
        )

    # -- helpers -------------------------------------------------------------------------
    def _name(self, node: cst.CSTNode) -> str:
        """``k`` for ``k.transpose(-2, -1)``: the tensor an operand is a view of."""
        while True:
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                if node.func.attr.value in _SAME_TENSOR:
                    base = node.func.value
                    function_form = isinstance(base, cst.Name) and base.value == "torch"
                    node = node.args[0].value if function_form and node.args else base
                    continue
            if isinstance(node, cst.Attribute) and node.attr.value in ("mT", "T"):
                node = node.value
                continue
            return self.ctx.code(node)

    def _from(self, fact: Fact) -> str:
        where = self.where(fact)
        return f" ({where})" if where else ""

    def _what(self, call: CallSite) -> str:
        if call.op is OpKind.ATTENTION:
            func = call.node.func if isinstance(call.node, cst.Call) else call.node
            return f"`{self.ctx.code(func)}`"
        return f"the attention matmul `{self.ctx.code(call.node)}`"

    def _fix(self, odd: list[Operand], target: Operand) -> Fix | None:
        """Cast the odd operands to ``target``'s dtype, when ``target`` names a tensor."""
        ref = self._name(target.node)
        if not all(part.isidentifier() for part in ref.split(".")):
            return None
        edits = []
        for operand in odd:
            code = self.ctx.module.code_for_node(operand.node)
            if "\n" in code:
                return None
            if not isinstance(operand.node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
                code = f"({code})"
            edits.append(Edit(operand.node, f"{code}.to({ref}.dtype)"))
        names = _join([self._name(o.node) for o in odd])
        return Fix(f"Cast {names} to `{ref}.dtype`", tuple(edits), applicability="unsafe")


def _full(fact: Fact) -> bool:
    return fact.is_tensor and fact.prec is Prec.FULL and not fact.zero_dim


def _low(fact: Fact) -> bool:
    return fact.is_tensor and fact.prec in (Prec.MODEL, Prec.HALF) and not fact.zero_dim


def _reported_by_mpc102(fact: Fact) -> bool:
    """A float32 factory that ``torch.cat`` / ``+`` already mixed into the activations.

    MPC102 reports it once, at the factory, where the fix belongs.
    """
    return fact.cause in DEFAULT_FLOAT32 and fact.mixed is not None


def _dtype(fact: Fact) -> str:
    return fact.dtype or ("float32" if fact.prec is Prec.FULL else "half precision")


def _join(names: list[str]) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _unique(related: list[tuple[cst.CSTNode, str]]) -> list[tuple[cst.CSTNode, str]]:
    seen: set[int] = set()
    out = []
    for node, text in related:
        if id(node) not in seen:
            seen.add(id(node))
            out.append((node, text))
    return out
