"""MPC105: a float32 tensor written into a half tensor by an op that does not cast."""

from __future__ import annotations

import libcst as cst

from mpcheck.api import (
    DTYPE_STRICT_WRITES,
    EVIDENCE_AUTOCAST,
    CallSite,
    Cause,
    Edit,
    Fact,
    Fix,
    Operand,
    Prec,
    Rule,
    Scope,
    SetItemSite,
    Severity,
    autocast_policy,
    children,
    one_path_factory,
)


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
        as `torch.zeros(n)` without `dtype=`, a softmax with `dtype=torch.float32`) no longer
        matches. Autocast does not help: it never touches in-place ops (nor `t[idx] = src`),
        so these raise with or without it, on every device. Of the out-of-place forms,
        autocast promotes only `index_copy` (CPU), `index_put` and `scatter_add` (CUDA);
        mpcheck stays silent on those inside a region that promotes them.

        Mixed-precision training keeps the model float32 and runs `forward` under autocast,
        usually from another file: a module method holding one of these writes is also
        checked as if under that (CUDA) autocast, where a Linear's output is half and the
        model's weights, buffers, embeddings and what is made like them stay float32. A half
        projection written into such a cache (`cache.index_copy_(2, pos, k)`, litgpt's bug) is
        reported as a warning, since the training setup is not in view, and as an error when
        every call the project makes of the class runs under autocast (the premise, seen to
        hold); a project that only builds the class in float32 and names no half precision
        anywhere gets nothing. Its fix is the same cast of the source.

        A source float32 on one path only (a padding `torch.zeros(...)` concatenated on a
        branch, joined with the model's dtype on the other) is reported too: the write raises
        whenever that path runs.

        A one-element value written through a boolean mask (`t[mask] = torch.tensor(0.0)`)
        is a `masked_fill_`, and a 0-dim `weight` of `lerp` is used as a scalar: both cast.
        """
    symptom = """
        `RuntimeError: Index put requires the source and destination dtypes match, got Half for
        the destination and Float for the source.` (`t[idx] = src`, `index_put_`), and for the
        other ops: `index_add_(): self (Half) and source (Float) must have the same scalar
        type`, `index_copy_(): self and source expected to have the same dtype, but got (self)
        Half and (source) Float`, `scatter(): Expected self.dtype to be equal to src.dtype`,
        `masked_scatter: expected self and source to have same dtypes but gotHalf and Float`,
        ``expected dtype c10::Half for `end` but got dtype float`` (`lerp`/`lerp_`).
        """
    how_to_fix = """
        Cast the source to the destination's dtype where it is written: `src.to(t.dtype)`, as
        Hugging Face's MoE blocks do with `current_hidden_states.to(hidden_states.dtype)`.
        mpcheck's fix does exactly that (a safe fix: the write stores the values in `t`'s
        dtype anyway, as a slice assignment would, and where the code ran before -- both
        dtypes alike -- the cast changes nothing).
        """
    bad = """
        class KVCache(nn.Module):
            def __init__(self, shape):
                super().__init__()
                self.register_buffer("keys", torch.zeros(shape))  # half after model.half()

            def update(self, k, positions):
                self.keys[:, positions] = k.float()  # index_put_: raises in a half model
        """
    good = """
        class KVCache(nn.Module):
            def __init__(self, shape):
                super().__init__()
                self.register_buffer("keys", torch.zeros(shape))

            def update(self, k, positions):
                self.keys[:, positions] = k.to(self.keys.dtype)
        """
    fixable = True

    def check_setitem(self, site: SetItemSite) -> None:
        index = site.advanced
        if index is None or site.augmented:
            return  # basic indexing copies with a cast; ``t[i] += v`` updates in place
        value = site.value.fact
        if not _half(site.target.fact) or not (_forced_fp32(value) or one_path_factory(value)):
            return
        if value.zero_dim and not _integer_index(index):
            return  # one element through a bool mask: torch runs ``masked_fill_``, which casts
        how = (
            f"assigning through the advanced index `{self.ctx.code(index.node)}` runs "
            "`index_put_`, which does not cast the value, with or without autocast"
        )
        self._report(site.node, site.target, site.value, how, site.scope)

    def check_call(self, call: CallSite) -> None:
        op = call.tensor_op()
        if op is None or op.name not in DTYPE_STRICT_WRITES or not _half(op.tensor.fact):
            return
        auto = call.scope.autocast
        in_place = op.name.endswith("_")
        if not in_place and auto is not None and auto.recasts(op.name):
            return  # out-of-place index_copy/index_put/scatter_add: this autocast promotes them
        for index, keyword in DTYPE_STRICT_WRITES[op.name]:
            source = op.arg(index, keyword)
            if source is None or not (_forced_fp32(source.fact) or one_path_factory(source.fact)):
                continue
            if source.fact.zero_dim and keyword == "weight":
                continue  # ``lerp(end, weight=<0-dim tensor>)``: the weight is used as a scalar
            if in_place:
                autocast = "and autocast never touches in-place ops"
            elif any(autocast_policy(op.name, d, self.ctx.target_torch) for d in ("cuda", "cpu")):
                autocast = "outside an autocast region that promotes it"
            else:
                autocast = "even under autocast"
            how = f"`{op.name}` does not cast its `{keyword}` argument, {autocast}"
            self._report(call.node, op.tensor, source, how, call.scope)
            return

    def check_ambient(self, call: CallSite) -> None:
        """The same writes in a module method under a trainer's autocast, where the model's
        weights, buffers and what is built from them stay float32 and matmul outputs are half
        (``cache.index_copy_(2, pos, self.k_proj(x))`` into a cache made like the embeddings)."""
        op = call.tensor_op()
        region = call.scope.autocast
        if op is None or op.name not in DTYPE_STRICT_WRITES or region is None:
            return
        if not op.name.endswith("_") and region.recasts(op.name):
            return  # out-of-place index_put/scatter_add: CUDA autocast promotes them
        for index, keyword in DTYPE_STRICT_WRITES[op.name]:
            source = op.arg(index, keyword)
            if source is None or keyword == "weight":
                continue
            pair = (op.tensor.fact, source.fact)
            if pair[0].autocast_half and pair[1].float32_under_autocast:
                half, full = op.tensor, source
            elif pair[1].autocast_half and pair[0].float32_under_autocast:
                half, full = source, op.tensor
            else:
                continue
            evidence = call.scope.evidence
            if evidence is not None and evidence.float32 and evidence.kind != EVIDENCE_AUTOCAST:
                return  # the project builds it in float32 and names no half anywhere
            seen = evidence is not None and evidence.kind == EVIDENCE_AUTOCAST
            target, what = self.ctx.code(op.tensor.node), self.ctx.code(source.node)
            message = (
                f"{'under autocast' if seen else region.premise}, `{self.ctx.code(half.node)}` is "
                f"{half.fact.dtype or 'half'} ({self.where(half.fact)}) but "
                f"`{self.ctx.code(full.node)}` keeps the model's float32 "
                f"({self.where(full.fact)}): `{op.name}` does not cast its `{keyword}` "
                f"argument, and autocast leaves it alone; cast `{what}` to `{target}.dtype`"
            )
            related = self.related_for(self.ctx.code(half.node), half.fact)
            related += self.related_for(self.ctx.code(full.node), full.fact)
            fix = self._fix(op.tensor, source, what)
            severity = Severity.WARNING  # the premise: a trainer's autocast, not in view
            if seen and evidence is not None:
                message, severity = f"{message} ({evidence.text})", Severity.ERROR
            self.report(call.node, message, related=related, severity=severity, fix=fix)
            return

    def _report(
        self, node: cst.CSTNode, dest: Operand, source: Operand, how: str, scope: Scope
    ) -> None:
        what = self.ctx.code(source.node)
        target = self.ctx.code(dest.node)
        if dest.fact.prec is Prec.HALF and dest.fact.dtype:
            kind = f"is {dest.fact.dtype}"
        else:
            kind = "has the model's dtype, half when the model runs in half precision"
        origin = source.fact.origin
        inline = origin is None or origin.node is source.node  # ``k.float()`` says it all
        where = "" if inline else f" ({self.where(source.fact)})"
        if one_path_factory(source.fact) and origin is not None:
            where = f" on one path{where}"
        made = dest.fact.origin
        explained = made is not None and made.cause in _EXPLAINING and made.node is not dest.node
        dest_where = f" ({self.where(dest.fact)})" if explained else ""
        message = (
            f"`{what}` is {source.fact.dtype or 'float32'}{where} but `{target}`{dest_where} "
            f"{kind}: {how}; cast it to `{target}.dtype`"
        )
        related = [] if inline else self.related_for(what, source.fact)
        if explained and made is not None:
            verb = "is " if made.cause is Cause.PARAMETER else ""  # "is a buffer of the model"
            related.append((made.node, f"`{target}` {verb}{made.text}"))
        fix = self._fix(dest, source, what)
        self.report_evidenced(node, message, scope, dest.fact, related=related, fix=fix)

    def _fix(self, dest: Operand, source: Operand, what: str) -> Fix | None:
        """``src`` -> ``src.to(<dest>.dtype)`` when ``dest`` can be evaluated again safely."""
        if _contains_any(dest.node, (cst.Call, cst.Await, cst.NamedExpr, cst.Lambda)):
            return None
        dtype = f"{self.ctx.atom(dest.node)}.dtype"
        edit = Edit(source.node, f"{self._uncast(source.node)}.to({dtype})")
        return Fix(f"Cast `{what}` to `{dtype}`", (edit,))

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


# Where a destination's dtype comes from, worth naming: it is not just "an input".
_EXPLAINING = (Cause.PARAMETER, Cause.CAST, Cause.MODEL_CAST, Cause.CONTRACT, Cause.AUTOCAST)


def _half(fact: Fact) -> bool:
    return fact.is_tensor and fact.prec in (Prec.MODEL, Prec.HALF)


def _forced_fp32(fact: Fact) -> bool:
    """float32/float64 whatever the model runs in (0-dim too: these writes check it)."""
    return fact.is_tensor and fact.prec is Prec.FULL


def _integer_index(index: Operand) -> bool:
    """An index known to hold integers (``positions``, ``[0, 2]``), not a bool mask."""
    return index.fact.prec is Prec.INT or isinstance(index.node, cst.List)


def _contains_any(root: cst.CSTNode, kinds: tuple[type[cst.CSTNode], ...]) -> bool:
    """Whether ``root`` or a node below it is one of ``kinds`` (no ``libcst.matchers``: its
    import alone costs half a second of start-up)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, kinds):
            return True
        stack.extend(children(node))
    return False
