"""MPC404: the deprecated ``torch.cuda.amp`` / ``torch.cpu.amp`` spellings of the AMP API."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from mpcheck.api import (
    CANONICAL,
    CallSite,
    Edit,
    Fix,
    FunctionSite,
    Rule,
    RuleContext,
    Severity,
    descendants,
    dotted,
)


@dataclass(frozen=True)
class _Old:
    """A deprecated AMP name and what replaces it."""

    new: str  # the torch.amp name that replaces it
    device: str
    kind: str  # "autocast" | "scaler" | "custom"
    since: tuple[int, int]  # the first torch that has ``new``


# ``torch.amp.autocast`` is in torch 2.0 (``torch.autocast`` since 1.10), ``torch.amp.GradScaler``
# came in 2.3 and ``torch.amp.custom_fwd``/``custom_bwd`` in 2.4, when the old spellings
# started to warn.
DEPRECATED_IN = (2, 4)
_AUTOCAST_ALIAS = ("torch.autocast", (1, 10))  # for projects that support torch 1.10 to 1.13


def _table() -> dict[str, _Old]:
    table: dict[str, _Old] = {}
    for device in ("cuda", "cpu"):
        for mod in (f"torch.{device}.amp", f"torch.{device}.amp.autocast_mode"):
            table[f"{mod}.autocast"] = _Old("torch.amp.autocast", device, "autocast", (2, 0))
        for mod in (f"torch.{device}.amp", f"torch.{device}.amp.grad_scaler"):
            table[f"{mod}.GradScaler"] = _Old("torch.amp.GradScaler", device, "scaler", (2, 3))
    for mod in ("torch.cuda.amp", "torch.cuda.amp.autocast_mode"):
        for name in ("custom_fwd", "custom_bwd"):
            table[f"{mod}.{name}"] = _Old(f"torch.amp.{name}", "cuda", "custom", (2, 4))
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

        Code that still supports an old torch is left alone: the old and the `torch.amp`
        spelling of the same API (or its import) in a `try` and its `except` for a missing
        name (`AttributeError`, `ImportError`, `TypeError`, `Exception`), either way round,
        or in the two branches of an `if`/`else` (or an `if ...: return` and the code after
        it) that tests the torch version: `hasattr(torch, "amp")`, a comparison of
        `torch.__version__`, a check or flag named for it (`is_torch_version(...)`,
        `is_torch_greater_or_equal(...)`, `TORCH_2_4`, `_TORCH_GREATER_EQUAL_2_4`) or a name
        bound to one of these. An `if` on anything else (`if device_type == "cuda":`) is no
        fallback: its old-spelling branch runs, and warns, on a current torch.

        The advice follows the oldest torch the project supports (`target-torch-version`,
        by default the lowest version its `torch` requirement allows): `torch.amp.autocast`
        exists from torch 2.0 (`torch.autocast` from 1.10, used for older targets),
        `torch.amp.GradScaler` from 2.3 and `torch.amp.custom_fwd`/`custom_bwd` from 2.4. An
        old spelling whose replacement the target lacks is not reported: it is the only
        spelling that torch has (guard it on the torch version to drop it on newer ones).
        """
    symptom = """
        torch 2.13 warns, once per call site (a decorator once, when the function is defined):
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
        `custom_bwd`). The replacements need torch >= 2.4 (`torch.amp.custom_fwd`), 2.3
        (`torch.amp.GradScaler`) or 2.0 (`torch.amp.autocast`): with a `target-torch-version`
        below 2.0 the fix writes `torch.autocast("cuda", ...)` (torch 1.10), and below 2.3 or
        2.4 it leaves `GradScaler` or `custom_fwd`/`custom_bwd` alone.

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

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        self.fallbacks: _Fallbacks | None = None  # found when the first old spelling is

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
                self.check(deco.call, deco.call.func, old, qual, decorator=True)
            elif old.kind == "custom":  # ``@torch.cuda.amp.custom_fwd``, without a call
                node = deco.node.decorator
                self.check(node, node, old, qual, decorator=True)

    def check(
        self,
        node: cst.BaseExpression,
        func: cst.BaseExpression,
        old: _Old,
        qual: str,
        *,
        decorator: bool = False,
    ) -> None:
        old = self.for_target(old)
        if not self.ctx.torch_has(old.since):
            return  # the oldest torch the project supports has no replacement: keep it
        if self.fallbacks is None:
            self.fallbacks = _Fallbacks.of(self.ctx)
        if self.fallbacks.covers(node, func, old):
            return  # only reached on a torch too old for the new spelling
        old_text = f"`{self.ctx.code(func)}`"
        if qual != self.ctx.code(func):
            old_text += f" (`{qual}`)"
        new_name = self.spell(func, old.new)
        shown = _shown(new_name or old.new, old)
        # A decorator runs once, when the function is defined; a call warns each time it runs.
        when = "once, when the function is defined" if decorator else "on every call"
        message = (
            f"{old_text} is deprecated since torch {_version(DEPRECATED_IN)} and warns {when} "
            f"(FutureWarning); use `{shown}`"
        )
        target = self.ctx.target_torch
        if target is not None and target < DEPRECATED_IN:  # it does not warn on the target
            since, oldest = _version(old.since), _version(target)
            message += f" (in torch {since} and later: the target is {oldest})"
        fix = None
        if new_name is not None:
            edits = self.rewrite(node, func, new_name, old)
            if edits is not None:
                fix = Fix(f"Use `{shown}`", edits)
        self.report(node, message, fix=fix)

    def for_target(self, old: _Old) -> _Old:
        """``torch.autocast`` instead of ``torch.amp.autocast`` for a target before 2.0."""
        if old.kind == "autocast" and not self.ctx.torch_has(old.since):
            new, since = _AUTOCAST_ALIAS
            return _Old(new, old.device, old.kind, since)
        return old

    def spell(self, func: cst.BaseExpression, new: str) -> str | None:
        """``new`` written with the user's own ``torch`` name, else any import of it."""
        text = dotted(func) or ""
        head = text.split(".", 1)[0]
        if "." in text and self.ctx.imports.aliases.get(head) == "torch":
            return head + new[len("torch") :]
        return self.ctx.imports.spell(new)

    def rewrite(
        self, node: cst.BaseExpression, func: cst.BaseExpression, new_name: str, old: _Old
    ) -> tuple[Edit, ...] | None:
        """Edits of the name and of single arguments, so a multi-line call keeps its layout.

        Regenerating the whole call would lose the indentation of its continuation lines:
        libcst prints a detached node as if it were at the top of the module.
        """
        device = f'"{old.device}"'
        first = f"device_type={device}" if old.kind == "custom" else device
        if not isinstance(node, cst.Call):  # a bare ``@torch.cuda.amp.custom_fwd``
            return (Edit(node, f"{new_name}({first})"),)
        args = node.args
        if not args:
            return (Edit(node, f"{new_name}({first})"),)
        # What each argument becomes; the device goes in front of one of them (or after the last).
        texts = {i: self._arg(arg) for i, arg in enumerate(args)}
        if old.kind == "autocast":
            if any(a.star == "*" for a in args):
                return None  # what the positional arguments mean is not known
            positional = [i for i, a in enumerate(args) if a.keyword is None and not a.star]
            if len(positional) > len(_AUTOCAST_POSITIONAL):
                return None
            for i, name in zip(positional, _AUTOCAST_POSITIONAL, strict=False):
                texts[i] = f"{name}={texts[i]}"
            at, before = 0, f"{device}, "
        elif old.kind == "scaler":
            at, before = 0, f"{device}, "  # the new first parameter; the rest shift with it
        else:
            if any(a.keyword is not None and a.keyword.value == "device_type" for a in args):
                return None
            named = [i for i, a in enumerate(args) if a.keyword is not None or a.star]
            at, before = (named[0], f"device_type={device}, ") if named else (len(args) - 1, "")
            if not named:  # only positional arguments: append after the last one
                texts[at] += f", device_type={device}"
        texts[at] = before + texts[at]
        edits = [Edit(func, new_name)]
        edits += [Edit(args[i], t) for i, t in texts.items() if t != self._arg(args[i])]
        return tuple(edits)

    def _arg(self, arg: cst.Arg) -> str:
        """The source of one argument, without the comma and whitespace that follow it."""
        bare = arg.with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=_NO_SPACE)
        return self.ctx.module.code_for_node(bare)


_NO_SPACE = cst.SimpleWhitespace("")


class _Fallbacks(cst.CSTVisitor):
    """Old spellings kept for torch < 2.3/2.4, which are not reached on a current torch.

    ``try: torch.amp.GradScaler(device=d) except AttributeError: torch.cuda.amp.GradScaler()``
    (timm), ``try: from torch.amp import custom_fwd except ImportError: from torch.cuda.amp
    import custom_fwd``, and an ``if``/``else`` on the torch version whose other branch uses
    the same API's ``torch.amp`` spelling. Rewriting those would break the old torch they are
    there for. An ``if``/``else`` on something else (the device) is no fallback: both
    branches run on a current torch.
    """

    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx
        # node id / local name in a fallback branch -> new names its other branch uses
        self.nodes: dict[int, frozenset[str]] = {}
        self.names: dict[str, frozenset[str]] = {}
        self.flags: frozenset[str] = frozenset()  # names bound to a torch version test

    @classmethod
    def of(cls, ctx: RuleContext) -> _Fallbacks:
        found = cls(ctx)
        found.flags = _version_flags(ctx)
        ctx.module.visit(found)
        return found

    def covers(self, node: cst.CSTNode, func: cst.BaseExpression, old: _Old) -> bool:
        new = _canonical(old.new)
        head = (dotted(func) or "").split(".", 1)[0]
        return new in self.nodes.get(id(node), ()) or new in self.names.get(head, ())

    def visit_Try(self, node: cst.Try) -> None:
        for handler in node.handlers:
            if _catches_missing_api(handler):
                self._pair((node.body,), (handler.body,))
                self._pair((handler.body,), (node.body,))

    def visit_If(self, node: cst.If) -> None:
        if node.orelse is not None and self._on_version(node.test):
            self._pair((node.body,), (node.orelse,))
            self._pair((node.orelse,), (node.body,))

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if self._on_version(node.test):
            self._pair((node.body,), (node.orelse,))
            self._pair((node.orelse,), (node.body,))

    def visit_Module(self, node: cst.Module) -> None:
        self._early_exits(node.body)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._early_exits(node.body)

    def _early_exits(self, body: Sequence[cst.BaseStatement]) -> None:
        """``if new_torch: return torch.amp.autocast(...)`` and the old spelling after it."""
        for i, stmt in enumerate(body):
            if (
                isinstance(stmt, cst.If)
                and stmt.orelse is None
                and _exits(stmt.body)
                and self._on_version(stmt.test)
            ):
                rest = body[i + 1 :]
                self._pair((stmt.body,), rest)
                self._pair(rest, (stmt.body,))

    def _on_version(self, test: cst.BaseExpression) -> bool:
        return _VersionTest.of(test, self.ctx, self.flags)

    def _pair(self, preferred: Sequence[cst.CSTNode], fallback: Sequence[cst.CSTNode]) -> None:
        """``fallback`` is taken where ``preferred``'s ``torch.amp`` names do not exist."""
        new = frozenset().union(*(_Collect.of(p).new_names(self.ctx) for p in preferred))
        if not new:
            return
        for part in fallback:
            found = _Collect.of(part)
            for key in found.ids:
                self.nodes[key] = self.nodes.get(key, frozenset()) | new
            for name in found.bound_from_old:
                self.names[name] = self.names.get(name, frozenset()) | new


class _Collect(cst.CSTVisitor):
    """Every node of a subtree, its names and what its imports bring in."""

    def __init__(self) -> None:
        self.ids: set[int] = set()
        self.exprs: list[cst.BaseExpression] = []
        self.imported: set[str] = set()  # qualified names imported: "torch.amp.custom_fwd"
        self.bound_from_old: set[str] = set()  # local names imported from the old API

    @classmethod
    def of(cls, node: cst.CSTNode) -> _Collect:
        found = cls()
        node.visit(found)
        return found

    def new_names(self, ctx: RuleContext) -> frozenset[str]:
        quals = [ctx.imports.resolve(e) or "" for e in self.exprs] + list(self.imported)
        canon = {_canonical(q) for q in quals}
        return frozenset(q for q in canon if q == "torch.autocast" or q.startswith("torch.amp."))

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.ids.add(id(node))
        if isinstance(node, (cst.Name, cst.Attribute)):
            self.exprs.append(node)
        return super().on_visit(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = dotted(node.module) if node.module is not None else None
        if module is None or node.relative or isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            if not isinstance(alias.name, cst.Name):
                continue
            qual = f"{module}.{alias.name.value}"
            self.imported.add(qual)
            bound = alias.asname.name if alias.asname is not None else alias.name
            if (module in _OLD_MODULES or qual in _OLD_MODULES) and isinstance(bound, cst.Name):
                self.bound_from_old.add(bound.value)


_OLD_MODULES = frozenset(qual.rsplit(".", 1)[0] for qual in DEPRECATED)

# What a missing name (``AttributeError``, ``ImportError``) or a changed signature
# (``TypeError``) raises, and the catch-alls: a handler for one of these is a fallback.
_FALLBACK_ERRORS = frozenset(
    {
        "AttributeError",
        "ImportError",
        "ModuleNotFoundError",
        "TypeError",
        "Exception",
        "BaseException",
    }
)
# Version checks and flags named for torch: ``is_torch_version``, ``TORCH_2_4``,
# ``_TORCH_GREATER_EQUAL_2_4``, ``is_torch_greater_or_equal``, ``TORCH_VERSION``.
_VERSION_NAME = re.compile(r"torch\w*?(version|greater|less|newer|older|\d)", re.IGNORECASE)
_TORCH_VERSIONS = frozenset({"torch.__version__", "torch.version.__version__"})
_VERSION_PARSERS = frozenset(
    {
        "packaging.version.parse",
        "packaging.version.Version",
        "pkg_resources.parse_version",
        "distutils.version.LooseVersion",
        "looseversion.LooseVersion",
    }
)


def _catches_missing_api(handler: cst.ExceptHandler) -> bool:
    """``except:``, ``except AttributeError:``, ``except (AttributeError, TypeError) as e:``."""
    if handler.type is None:
        return True
    types = handler.type.elements if isinstance(handler.type, cst.Tuple) else None
    exprs = [e.value for e in types] if types is not None else [handler.type]
    return any((dotted(e) or "").rsplit(".", 1)[-1] in _FALLBACK_ERRORS for e in exprs)


class _VersionTest(cst.CSTVisitor):
    """Whether an ``if``'s test looks at the torch version (or at what torch has)."""

    def __init__(self, ctx: RuleContext, flags: frozenset[str]) -> None:
        self.ctx = ctx
        self.flags = flags
        self.found = False

    @classmethod
    def of(cls, test: cst.BaseExpression, ctx: RuleContext, flags: frozenset[str]) -> bool:
        found = cls(ctx, flags)
        test.visit(found)
        return found.found

    def on_visit(self, node: cst.CSTNode) -> bool:
        return not self.found and super().on_visit(node)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.flags or _VERSION_NAME.search(node.value):
            self.found = True
        elif node.value == "__version__":  # ``from torch import __version__``
            self.found = self.ctx.imports.resolve(node) in _TORCH_VERSIONS

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "__version__" and self.ctx.imports.resolve(node) in _TORCH_VERSIONS:
            self.found = True

    def visit_Call(self, node: cst.Call) -> None:
        """``hasattr(torch.amp, "GradScaler")``, ``version.parse(...)``."""
        func = dotted(node.func)
        if func in ("hasattr", "getattr") and node.args:
            owner = self.ctx.imports.resolve(node.args[0].value) or ""
            self.found = owner.split(".", 1)[0] == "torch"
        elif self.ctx.imports.resolve(node.func) in _VERSION_PARSERS:
            self.found = True


def _version_flags(ctx: RuleContext) -> frozenset[str]:
    """Names bound to a version test: ``NEW_AMP = hasattr(torch, "amp")``, a parameter's
    default ``new_api=hasattr(torch.amp, "autocast")``, and names bound to those."""
    bindings: list[tuple[str, cst.BaseExpression]] = []
    for node in descendants(ctx.module):
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            target = node.targets[0].target
            if isinstance(target, cst.Name):
                bindings.append((target.value, node.value))
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            if isinstance(node.target, cst.Name):
                bindings.append((node.target.value, node.value))
        elif isinstance(node, cst.Param) and node.default is not None:
            bindings.append((node.name.value, node.default))
    flags: frozenset[str] = frozenset()
    for _ in range(3):  # a flag bound to a flag bound to a test
        more = frozenset(
            n for n, v in bindings if n not in flags and _VersionTest.of(v, ctx, flags)
        )
        if not more:
            break
        flags |= more
    return flags


def _exits(body: cst.BaseSuite) -> bool:
    """Whether a block ends in ``return`` or ``raise``."""
    last: cst.CSTNode | None = body.body[-1] if body.body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    return isinstance(last, (cst.Return, cst.Raise))


def _version(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def _canonical(qual: str) -> str:
    return CANONICAL.get(qual, qual)


def _shown(new_name: str, old: _Old) -> str:
    if old.kind == "custom":
        return f'{new_name}(..., device_type="{old.device}")'
    return f'{new_name}("{old.device}", ...)'
