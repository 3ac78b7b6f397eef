"""MPC404: the deprecated ``torch.cuda.amp`` / ``torch.cpu.amp`` spellings of the AMP API."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from mpcheck.diagnostics import Severity
from mpcheck.names import dotted
from mpcheck.rule import NodeEdit, NodeFix, Rule
from mpcheck.sites import CallSite, FunctionSite


@dataclass(frozen=True)
class _Old:
    new: str  # the torch.amp name that replaces it
    device: str
    kind: str  # "autocast" | "scaler" | "custom"


def _table() -> dict[str, _Old]:
    table: dict[str, _Old] = {}
    for device in ("cuda", "cpu"):
        for mod in (f"torch.{device}.amp", f"torch.{device}.amp.autocast_mode"):
            table[f"{mod}.autocast"] = _Old("torch.amp.autocast", device, "autocast")
        for mod in (f"torch.{device}.amp", f"torch.{device}.amp.grad_scaler"):
            table[f"{mod}.GradScaler"] = _Old("torch.amp.GradScaler", device, "scaler")
    for mod in ("torch.cuda.amp", "torch.cuda.amp.autocast_mode"):
        for name in ("custom_fwd", "custom_bwd"):
            table[f"{mod}.{name}"] = _Old(f"torch.amp.{name}", "cuda", "custom")
    return table


DEPRECATED = _table()
# ``torch.cuda.amp.autocast(enabled, dtype, cache_enabled)``: what its positional args mean,
# since ``torch.amp.autocast(device_type, dtype, enabled, cache_enabled)`` orders them otherwise.
_AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")


class DeprecatedAmpApi(Rule):
    code = "MPC404"
    name = "deprecated-amp-api"
    severity = Severity.WARNING
    summary = (
        "`torch.cuda.amp.autocast`, `torch.cuda.amp.GradScaler`, `torch.cpu.amp.*` and "
        "`torch.cuda.amp.custom_fwd`/`custom_bwd` are deprecated: use the `torch.amp` "
        "spellings with an explicit device."
    )
    why = """
        Since torch 2.4 the device-specific AMP entry points are thin deprecated wrappers
        around `torch.amp`, and every call emits a `FutureWarning`. Under
        `-W error::FutureWarning` or pytest's `filterwarnings = error` the first training
        step fails, and the wrappers will be removed in a future release. The replacements
        take the device explicitly, which also makes the code's target visible (a
        `torch.cuda.amp.autocast()` on a CPU-only machine silently does nothing).
        """
    symptom = """
        torch 2.13 warns, once per call site:
        `FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated. Please use
        `torch.amp.autocast('cuda', args...)` instead.` (likewise
        `torch.cuda.amp.GradScaler(args...)` -> `torch.amp.GradScaler('cuda', args...)`,
        `torch.cpu.amp.autocast(args...)` -> `torch.amp.autocast('cpu', args...)`, and
        `torch.cuda.amp.custom_fwd(args...)` -> `torch.amp.custom_fwd(args...,
        device_type='cuda')`).
        """
    how_to_fix = """
        `torch.cuda.amp.autocast(...)` -> `torch.amp.autocast("cuda", ...)`,
        `torch.cuda.amp.GradScaler(...)` -> `torch.amp.GradScaler("cuda", ...)`,
        `torch.cpu.amp.autocast(...)` / `GradScaler(...)` -> the same with `"cpu"`,
        `@torch.cuda.amp.custom_fwd` -> `@torch.amp.custom_fwd(device_type="cuda")` (and
        `custom_bwd`). The replacements need torch >= 2.4 (`torch.amp.custom_fwd`) or 2.3
        (`torch.amp.GradScaler`).

        mpcheck's fix rewrites the call or decorator in place and is safe: the old
        functions only forward to the new ones. Positional arguments of the old `autocast`
        (`enabled`, `dtype`, `cache_enabled`) become keywords, because `torch.amp.autocast`
        orders its parameters differently (the FutureWarning's `torch.amp.autocast('cuda',
        args...)` would pass `enabled` as the dtype). The new name is written with the `torch`
        the file already uses (`torch.`, `th.`, or `amp.` after `from torch import amp`); the
        fix does not rewrite imports, so a file that only has `from torch.cuda.amp import
        autocast` gets no fix (editing the shared import from one call's fix would change the
        meaning of the other calls), and the import left unused after the fix is for your
        linter to remove. The old wrappers pin `dtype=torch.float16` (`bfloat16` on CPU) and
        `cache_enabled=True`, which are also the defaults of the new API unless the program
        changes them with `torch.set_autocast_dtype`/`torch.set_autocast_cache_enabled`.
        """
    bad = """
        scaler = torch.cuda.amp.GradScaler()
        with torch.cuda.amp.autocast(dtype=torch.bfloat16):
            loss = model(batch)
        """
    good = """
        scaler = torch.amp.GradScaler("cuda")
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            loss = model(batch)
        """
    fixable = True

    def check_call(self, call: CallSite) -> None:
        old = DEPRECATED.get(call.qualname or "")
        if old is not None and isinstance(call.node, cst.Call):
            self.check(call.node, call.node.func, old, call.qualname or "")

    def check_function(self, site: FunctionSite) -> None:
        for deco in site.decorators:
            old = DEPRECATED.get(deco.qualname or "")
            if old is None:
                continue
            qual = deco.qualname or ""
            if deco.call is not None:
                self.check(deco.call, deco.call.func, old, qual)
            elif old.kind == "custom":  # ``@torch.cuda.amp.custom_fwd``, without a call
                self.check(deco.node.decorator, deco.node.decorator, old, qual)

    def check(
        self, node: cst.BaseExpression, func: cst.BaseExpression, old: _Old, qual: str
    ) -> None:
        old_text = f"`{self.ctx.code(func)}`"
        if qual != self.ctx.code(func):
            old_text += f" (`{qual}`)"
        new_name = self.spell(func, old.new)
        shown = _shown(new_name or old.new, old)
        message = (
            f"{old_text} is deprecated since torch 2.4 and warns on every call "
            f"(FutureWarning); use `{shown}`"
        )
        fix = None
        if new_name is not None:
            code = self.rewrite(node, new_name, old)
            if code is not None:
                fix = NodeFix(f"Use `{shown}`", (NodeEdit(node, code),))
        self.report(node, message, fix=fix)

    def spell(self, func: cst.BaseExpression, new: str) -> str | None:
        """``new`` written with the user's own ``torch`` name, else any import of it."""
        text = dotted(func) or ""
        head = text.split(".", 1)[0]
        if "." in text and self.ctx.imports.aliases.get(head) == "torch":
            return head + new[len("torch") :]
        return self.ctx.imports.spell(new)

    def rewrite(self, node: cst.BaseExpression, new_name: str, old: _Old) -> str | None:
        new_func = cst.parse_expression(new_name)
        device = cst.SimpleString(f'"{old.device}"')
        if not isinstance(node, cst.Call):  # a bare ``@torch.cuda.amp.custom_fwd``
            return f'{new_name}(device_type="{old.device}")'
        args = list(node.args)
        if old.kind == "autocast":
            if any(a.star == "*" for a in args):
                return None  # what the positional arguments mean is not known
            converted, slot = [], 0
            for arg in args:
                if arg.keyword is None and not arg.star:
                    if slot == len(_AUTOCAST_POSITIONAL):
                        return None
                    arg, slot = _keyword(arg, _AUTOCAST_POSITIONAL[slot]), slot + 1
                converted.append(arg)
            args = [cst.Arg(device), *converted]
        elif old.kind == "scaler":
            args.insert(0, cst.Arg(device))  # the new first parameter; the rest shift with it
        else:
            if any(a.keyword is not None and a.keyword.value == "device_type" for a in args):
                return None
            where = sum(1 for a in args if a.keyword is None and not a.star)
            args.insert(where, _keyword(cst.Arg(device), "device_type"))
        new = node.with_changes(func=new_func, args=_normalise_commas(args))
        return self.ctx.module.code_for_node(new)


def _keyword(arg: cst.Arg, name: str) -> cst.Arg:
    equal = cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
    )
    return arg.with_changes(keyword=cst.Name(name), equal=equal)


def _normalise_commas(args: list[cst.Arg]) -> list[cst.Arg]:
    """Every argument but the last needs a comma; the last keeps whatever it had."""
    out = []
    for i, arg in enumerate(args):
        if i < len(args) - 1 and not isinstance(arg.comma, cst.Comma):
            arg = arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        out.append(arg)
    return out


def _shown(new_name: str, old: _Old) -> str:
    if old.kind == "custom":
        return f'{new_name}(..., device_type="{old.device}")'
    return f'{new_name}("{old.device}", ...)'
