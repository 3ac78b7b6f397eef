"""MPC301: a constant beyond float16's range is written into a half-precision tensor."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Literal

import libcst as cst

from mpcheck.api import (
    CAST_METHODS,
    CHECKED_FILL_FACTORIES,
    CHECKED_SCALAR_WRITES,
    UNCHECKED_SCALAR_OPS,
    CallSite,
    Edit,
    Fact,
    Fix,
    Kind,
    Operand,
    Prec,
    Rule,
    RuleContext,
    Scope,
    SetItemSite,
    Severity,
    dotted,
)

# Largest finite values (torch.finfo(...).max).
LIMITS = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38}
C10 = {"float16": "Half", "bfloat16": "BFloat16"}
SILENT = "and {inf} becomes NaN where it fills a softmax row or meets a zero (`0 * inf`)"
# ``clamp(max=1e5)``: the bound is the point of the call, so ``finfo(x.dtype).max`` is advice
# for half precision, not a rewrite (in float32 it would drop the clamp altogether).
BOUNDS = frozenset(name for name in CHECKED_SCALAR_WRITES if name.startswith(("clamp", "clip")))
# Calls that change a tensor's dtype: a float32 tensor holding -1e9 becomes -inf in float16.
CASTS = frozenset({*CAST_METHODS, "to", "type", "type_as"})
# Factories that build a tensor from a Python number: qualname -> slot of the number.
SCALAR_TENSORS = {"torch.tensor": (0, "data"), "torch.as_tensor": (0, "data")}

# How the constant reaches the half tensor:
#   raises  - the op converts the scalar with a range check (masked_fill, fill_, clamp, full)
#   inf     - unchecked: the result (or the stored value) is +-inf (add, where, setitem)
#   product - ``t * -1e9``: inf wherever ``t`` is not tiny (a mask's ones)
#   cast    - a float32 tensor holding the constant is cast to the half dtype
#   in-place - ``scores += bias`` where ``bias`` is a float32 tensor holding the constant
How = Literal["raises", "inf", "product", "cast", "in-place"]
# In-place arithmetic that casts a float32 operand into the half tensor it writes.
IN_PLACE_WRITES = frozenset({"add_", "sub_"})


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
        `fill_`, `index_fill_`, `scatter`, `clamp`/`clip`, `torch.full`/`full_like`/`new_full`,
        `F.pad` -- raise. Ops that do not -- `scores + (1 - mask) * -1e9`,
        `torch.where(mask, -1e9, x)`, `x[mask] = -1e9`, `torch.tensor(-1e9, dtype=x.dtype)`,
        casting a float32 tensor that holds `-1e9` with `.to(x.dtype)`, or adding it in place
        (`scores += bias`, `scores += -1e9`) -- silently produce
        `-inf`, and `-inf` becomes NaN as soon as a row is fully masked (softmax) or it meets
        a zero (`0 * inf`). The raising form is an error; the silent one is reported as a
        warning (silently wrong: it corrupts training without a trace, but only where a row
        is fully masked or the value meets a zero). `-1e9` fits bfloat16 (its range is
        float32's, up to 3.39e38), so it is reported only where the tensor can be float16:
        not in a class every half path of the project writes bfloat16 down for
        (`.to(torch.bfloat16)`, `.bfloat16()`, `torch_dtype=torch.bfloat16`) and every
        autocast region of which lowers to bfloat16 (`dtype=torch.bfloat16`, a name bound
        only to it, or the CPU's default; CUDA's default is float16), while a cast
        to a dtype variable whose values may include float16 (`.to(weight_dtype)`) keeps it,
        and is the evidence the message names. A dtype variable writes what it may hold,
        read off its assignments in the function that casts, or else in the module
        (`weight_dtype = torch.float32` then `if bf16: weight_dtype = torch.bfloat16`,
        `torch.bfloat16 if bf16 else torch.float32`, `DTYPES[key]` of a dict no code
        changes, `getattr(torch, "bfloat16")`): when its every half value is bfloat16 the
        cast writes bfloat16; a parameter, a call, an attribute, an import or a string from
        a configuration may be float16, and keeps it;
        `torch.finfo(torch.float32).min` overflows bfloat16 as well, and the message says so.
        Integer constants (`256 * 256 * color`) are reported only against a tensor known to
        be half: against one the engine merely assumes is in the model's dtype they are
        index arithmetic far more often than masks. A constant a dtype test keeps for float32
        runs (`-1e9 if x.dtype == torch.float32 else -1e4`, or written under
        `if x.dtype == torch.float32:`) is not reported: a half-precision run never gets it.
        A product with a factor whose values the engine bounds (`0.5 * torch.sigmoid(x) * 1e5`
        is at most 5e4) is not reported when the bound times the constant fits float16.
        The constant may be written elsewhere: a constant of the file or of another project
        file (`NEG_INF = -1e9`), a parameter's default that no call of the file replaces
        (`def forward(self, x, mask, fill=-1e9)`), or `self.fill` set once in `__init__` from
        one; a constant some code rebinds (`global NEG_INF`) is not known, nor reported.
        Arithmetic needs evidence that the operand is a tensor: an unannotated input that the
        function never indexes, calls a method on or multiplies with `@`
        (`budget * 0.9 * 1e9`) may be a Python number, and is not reported.
        Severity follows evidence: a raising form is an error only when the project makes the
        module half (a cast of it or of a model that builds it, in any file, or a library base
        whose users run it in half), and the message names that evidence; where only the
        premise that the module may run in half supports it, it is a warning that says so
        ("latent: if `Attention` runs in float16").
        """
    symptom = """
        `RuntimeError: value cannot be converted to type c10::Half without overflow` (or
        `c10::BFloat16` for `torch.finfo(torch.float32).min`); for the arithmetic, `where`,
        item-assignment and cast forms, no error: `-inf` in the scores and NaN losses later.
        """
    how_to_fix = """
        Use the most negative value of the tensor's own dtype, `torch.finfo(x.dtype).min`
        (`.max` for a positive bound), or a constant that fits float16 such as `-1e4`.
        mpcheck's fix writes `torch.finfo(x.dtype).min` when the dtype can be spelled from a
        plain name at that point (`x.dtype` for a tensor `x`, or the call's own `dtype=`).
        It is an unsafe fix: in float32 the constant becomes -3.4e38 instead of -1e9, so a
        mask that is later added to another such mask reaches `-inf` (NaN after softmax)
        where the old constant did not; check how the masked values are used before applying
        it. A `clamp`/`clip` bound gets no fix: in float32, `finfo.max` would remove the
        clamp, so pick a bound that fits float16 instead.
        """
    bad = """
        class Attention(nn.Module):
            def forward(self, q, k, v, causal):
                scores = q @ k.transpose(-1, -2)
                scores = scores.masked_fill(~causal, -1e9)  # raises in float16
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
    fix_applicability = "unsafe"  # it changes a precision: --unsafe-fixes

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        # float32 tensors made from an out-of-range number (``torch.where(m, 0.0, -1e10)``),
        # by call node: reported when a cast is chained onto that call (``.to(x.dtype)``).
        self.constants: dict[cst.CSTNode, Operand] = {}

    def check_call(self, call: CallSite) -> None:
        if isinstance(call.node, cst.BinaryOperation):
            if call.qualname in ("torch.add", "torch.sub", "torch.mul") and len(call.args) == 2:
                how: How = "product" if call.qualname == "torch.mul" else "inf"
                left, right = call.args
                self._pair(call, left, right, how)
                self._pair(call, right, left, how)
            return
        if call.qualname == "torch.where" and len(call.args) == 3:
            _, a, b = call.args
            if a.fact.is_tensor or b.fact.is_tensor:
                self._pair(call, a, b, "inf")
                self._pair(call, b, a, "inf")
            else:  # two Python numbers: a float32 tensor
                self._remember(call, a, b)
            return
        if call.qualname in SCALAR_TENSORS:
            self._scalar_tensor(call)
            return
        factory = CHECKED_FILL_FACTORIES.get(call.qualname or "")
        if factory is not None:
            value = call.arg(*factory)
            self._check(value, call.result, self._factory_dtype(call), call, "raises")
            if value is not None and call.result.prec is Prec.FULL:
                self._remember(call, value)
            return
        if call.method in CASTS and call.receiver is not None:
            held = self._held(call.receiver)
            if held is not None:
                self._check(held, call.result, self._cast_dtype(call), call, "cast")
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
            fixable = op.name not in BOUNDS
            for index, keyword in CHECKED_SCALAR_WRITES[op.name]:
                value = op.arg(index, keyword)
                self._check(value, target, dtype, call, "raises", fixable=fixable)
        elif op.name in UNCHECKED_SCALAR_OPS:
            how = "product" if op.name.startswith("mul") else "inf"
            for index, keyword in UNCHECKED_SCALAR_OPS[op.name]:
                value = op.arg(index, keyword)
                dtype = self._dtype_of(op.tensor.node)
                self._check(value, op.tensor.fact, dtype, call, how)
                held = self._held(value) if op.name in IN_PLACE_WRITES else None
                if held is not None:  # ``scores += bias_holding_minus_1e10``
                    # advice only: ``scores`` may not exist yet where the constant is written
                    self._check(held, op.tensor.fact, dtype, call, "in-place", offer_fix=False)

    def check_setitem(self, site: SetItemSite) -> None:
        dtype = self._dtype_of(site.target.node)
        self._check(site.value, site.target.fact, dtype, site, "inf")

    # -- helpers -------------------------------------------------------------------------
    def _pair(self, call: CallSite, value: Operand, tensor: Operand, how: How) -> None:
        """``tensor <op> value`` / ``where(mask, value, tensor)``: unchecked, gives inf."""
        if tensor.fact.is_tensor:
            self._check(value, tensor.fact, self._dtype_of(tensor.node), call, how)

    def _scalar_tensor(self, call: CallSite) -> None:
        """``torch.tensor(-1e9, dtype=x.dtype)`` stores -inf; without ``dtype=`` it is float32."""
        value = call.arg(*SCALAR_TENSORS[call.qualname or ""])
        if value is None:
            return
        if "dtype" in call.kwargs:
            dtype = self._dtype_expr(call.kwargs["dtype"].node)
            self._check(value, call.result, dtype, call, "inf")
        if call.result.prec is Prec.FULL:
            self._remember(call, value)

    def _held(self, operand: Operand | None) -> Operand | None:
        """The out-of-range number a float32 tensor holds, also after arithmetic on it.

        ``torch.where(m, 0.0, -1e10) + position_bias`` keeps the float32 side's origin
        (type promotion), so the constant is found through the sums that carry it.
        """
        if operand is None or not operand.fact.is_tensor:
            return None
        held = self.constants.get(operand.node)
        origin = operand.fact.origin
        # float32, or unknown after a branch where it was float32 (``maybe``)
        wide = operand.fact.prec is Prec.FULL or operand.fact.maybe
        if held is None and wide and origin is not None:
            held = self.constants.get(origin.node)
        return held

    def _remember(self, call: CallSite, *values: Operand | None) -> None:
        """Note a float32 tensor ``call`` made from a number beyond float16's range."""
        for value in values:
            number = value.number if value is not None else None
            if value is not None and number is not None and math.isfinite(number):
                if abs(number) > LIMITS["float16"]:
                    self.constants[call.node] = value
                    return

    def _check(
        self,
        value: Operand | None,
        target: Fact,
        dtype_code: str | None,
        site: CallSite | SetItemSite,
        how: How,
        *,
        fixable: bool = True,
        offer_fix: bool = True,
    ) -> None:
        number = value.number if value is not None else None
        if value is None or number is None or not math.isfinite(number):
            return
        if site.scope.full_precision is not None:
            return  # ``if x.dtype == torch.float32:``: a half-precision run never gets here
        if self.against_half(site.scope, target):
            return  # a class the project only builds in float32, or never builds
        unproven = target.origin is not None and target.origin.unproven
        if unproven and isinstance(site.node, cst.BinaryOperation):
            return  # ``capacity * 1e9`` of an input never used as a tensor: maybe a number
        # A tensor handed to a half-capable module's method (``attn_mask``) whose dtype we do
        # not know, written with a fill that raises (``masked_fill``): a float one is in the
        # model's dtype, but it may as well be bool or int, so this is a warning. (Arithmetic
        # on such arguments is often guarded by a test the engine does not read, such as
        # ``if mask.is_floating_point():``; ``mask.dtype == torch.float32`` it follows.)
        argument = (
            how == "raises"
            and target.is_tensor
            and target.prec is Prec.UNKNOWN
            and target.origin is not None
            and isinstance(target.origin.node, cst.Param)
            and site.scope.in_module
        )
        if argument:
            target = replace(target, prec=Prec.MODEL)
        if not target.is_tensor or target.prec not in (Prec.MODEL, Prec.HALF):
            return
        if target.prec is Prec.MODEL and _integer_only(value.node):
            return  # ``256 * 256 * color``: index arithmetic, not a mask
        over = self._overflows(target, abs(number), site.scope)
        if not over:
            return
        if how == "product" and target.bound is not None:
            # ``gate * 1e5`` of a gate the engine bounds: inf only where a product can pass
            # the range (mpcheck/engine/ranges.py), never for a factor below 65504 / 1e5
            over = [low for low in over if target.bound * abs(number) > LIMITS[low]]
            if not over:
                return
        text = self.ctx.code(value.node)
        shown = f"`{text}`" if value.spelled else f"`{text}` ({number:g})"
        bound = "min" if number < 0 else "max"
        use = f"`torch.finfo({dtype_code or '<tensor>.dtype'}).{bound}`"
        if not fixable:  # a clamp bound: advice, not a drop-in
            use = f"a bound that fits, e.g. {use}"
        effect = self._effect(number, target, over, site, how)
        message = f"{shown} is {self._beyond(target, over)}: {effect}; use {use}"
        related = []
        made = value.fact.origin
        if made is not None and isinstance(value.node, cst.Name):  # set on another line
            related.append((made.node, f"{number:g} comes from `{made.text}`"))
        if target.origin is not None and target.prec is Prec.HALF:
            related.append((target.origin.node, f"{over[0]} here: {target.origin.text}"))
        fix = None
        finfo = self.ctx.imports.spell("torch.finfo")
        if fixable and offer_fix and dtype_code is not None and finfo is not None:
            code = f"{finfo}({dtype_code}).{bound}"
            fix = Fix(
                f"Use `{code}`",
                (Edit(value.node, code),),
                applicability="unsafe",
            )
        # raising writes fail loudly at once; the silent ones are "silently wrong": warnings
        severity = None if how == "raises" and not argument else Severity.WARNING
        if argument and target.origin is not None:
            name = self.ctx.code(target.origin.node)
            message += f" (if `{name}` is a float tensor; it may be bool or int, then it is fine)"
        runs_in = over[0] if len(over) == 1 else "half"  # (``finfo(float32).min``: both)
        premise = f"if `{{subject}}` runs in {runs_in}"
        message, related, latent = self.with_evidence(message, site.scope, target, related, premise)
        if latent:  # an error needs evidence that half reaches it
            severity = Severity.WARNING
        self.report(value.node, message, related=related, fix=fix, severity=severity)

    def _effect(
        self,
        number: float,
        target: Fact,
        over: list[str],
        site: CallSite | SetItemSite,
        how: How,
    ) -> str:
        """What the write does: the exact error it raises, or where the inf comes from."""
        when = self._when(target, over)
        call = f"`{self.ctx.code(site.node, 50)}`"
        inf = "-inf" if number < 0 else "inf"
        if how == "raises":
            first = f"value cannot be converted to type c10::{C10[over[0]]} without overflow"
            others = "".join(f" (c10::{C10[low]} in {low})" for low in over[1:])
            return f'{call} raises "{first}" {when}{others}'
        if how == "in-place":
            into = "the model's dtype" if target.prec is Prec.MODEL else over[0]
            effect = f"{call} writes the float32 tensor holding it into a tensor in {into} "
            effect += f"in place, silently giving {inf}"
            if target.prec is Prec.MODEL:
                effect += f" {when}"
            return f"{effect}, {SILENT.format(inf=inf)}"
        if how == "cast":
            cast = f"`{self._cast_text(site)}`" if isinstance(site, CallSite) else call
            if target.prec is Prec.MODEL:
                effect = f"{cast} casts the float32 tensor holding it to the model's dtype, "
                effect += f"silently giving {inf} {when}"
            else:
                effect = f"{cast} casts the float32 tensor holding it to {over[0]}, "
                effect += f"silently giving {inf}"
            return f"{effect}, {SILENT.format(inf=inf)}"
        effect = f"{call} silently gives {inf} {when}"
        if how == "product":
            limit = min(LIMITS[low] for low in over) / abs(number)
            effect += f" wherever the other factor exceeds {limit:.2g} in magnitude"
        return f"{effect}, {SILENT.format(inf=inf)}"

    def _overflows(self, target: Fact, magnitude: float, scope: Scope) -> list[str]:
        """The half dtypes the tensor can have whose range ``magnitude`` exceeds: the
        model's dtype is bfloat16 alone where every half path reaching the class says so."""
        if target.prec is Prec.HALF and target.dtype in LIMITS:
            lows = [target.dtype]
        elif self.bfloat16_only(scope, target):
            lows = ["bfloat16"]
        else:  # the model's dtype, or "float16 or bfloat16"
            lows = ["float16", "bfloat16"]
        return [low for low in lows if magnitude > LIMITS[low]]

    def _beyond(self, target: Fact, over: list[str]) -> str:
        """``beyond float16's range (±65504), though within bfloat16's`` & co."""
        if len(over) == 2:
            return (
                f"beyond the range of float16 (±{LIMITS['float16']:g}) "
                f"and of bfloat16 (±{LIMITS['bfloat16']:g})"
            )
        low = over[0]
        text = f"beyond {low}'s range (±{LIMITS[low]:g})"
        if low == "float16" and (target.prec is Prec.MODEL or target.dtype not in LIMITS):
            text += ", though within bfloat16's"
        return text

    def _when(self, target: Fact, over: list[str]) -> str:
        """``when the model runs in float16`` / ``because the tensor is float16 (...)``."""
        if target.prec is Prec.MODEL:
            return f"when the model runs in {' or '.join(over)}"
        low = over[0]
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

    def _cast_text(self, call: CallSite) -> str:
        """``.to(h.dtype)`` for ``torch.where(m, 0.0, -1e10).to(h.dtype)``: the cast alone."""
        args = [self.ctx.code(a.node) for a in call.args]
        args += [f"{key}={self.ctx.code(o.node)}" for key, o in call.kwargs.items()]
        text = f".{call.method}({', '.join(args)})"
        return text if len(text) <= 50 else text[:47] + "..."

    def _cast_dtype(self, call: CallSite) -> str | None:
        """The dtype a cast names, when it can be repeated: ``.to(h.dtype)``, ``.half()``."""
        if call.method in CAST_METHODS:
            return self.ctx.imports.spell(f"torch.{CAST_METHODS[call.method]}")
        if call.method == "type_as" and call.args:
            return self._dtype_of(call.args[0].node)
        for operand in (*call.args, *call.kwargs.values()):
            if operand.fact.kind is Kind.DTYPE:
                return self._dtype_expr(operand.node)
        return None


def _integer_only(node: cst.BaseExpression) -> bool:
    """``65536``, ``256 * 256``, ``-10**9``: a constant built from integer literals alone."""
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, cst.UnaryOperation):
        return _integer_only(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return _integer_only(node.left) and _integer_only(node.right)
    return False
