"""The rule API: a rule is a class that reads like its own specification.

A rule declares its code, kebab-case name, severity and documentation as
class attributes, and implements one or more ``check_*`` hooks that receive
:mod:`mpcheck.engine.sites` from the analysis. It never derives dtypes itself: when
it needs a fact the engine lacks, the engine learns it.
"""

from __future__ import annotations

import importlib
import pkgutil
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import ClassVar

import libcst as cst

from mpcheck.diagnostics import RuleInfo, Severity
from mpcheck.engine.evidence import AUTOCAST as AUTOCAST_ONLY
from mpcheck.engine.evidence import FLOAT32 as FLOAT32_ONLY
from mpcheck.engine.evidence import UNREACHED as NEVER_BUILT
from mpcheck.engine.facts import Cause, Fact, Origin, Prec
from mpcheck.engine.sites import (
    CallSite,
    ClassSite,
    FunctionSite,
    ReturnSite,
    Scope,
    SetItemSite,
    StoreSite,
)
from mpcheck.engine.training import TrainingSite
from mpcheck.knowledge import autocast_ops
from mpcheck.knowledge.torch_api import is_kernel
from mpcheck.project.names import ImportTable
from mpcheck.ruleset.hooks import HOOKS
from mpcheck.ruleset.plugins import load_all as load_plugins


@dataclass(frozen=True)
class NodeEdit:
    """Replace ``node``'s source with ``code``; positions are computed when reported."""

    node: cst.CSTNode
    code: str


@dataclass(frozen=True)
class NodeFix:
    """A fix in terms of nodes; positions are computed when it is reported."""

    message: str
    edits: tuple[NodeEdit, ...]
    applicability: str = "safe"


@dataclass(frozen=True)
class Report:
    """What a rule reported, before positions are known."""

    rule: type[Rule]
    node: cst.CSTNode
    message: str
    related: tuple[tuple[cst.CSTNode, str], ...] = ()
    fix: NodeFix | None = None
    severity: Severity | None = None  # None: the rule's default


@dataclass
class RuleContext:
    """What a rule may ask of the file being checked."""

    module: cst.Module
    path: str
    sink: Callable[[Report], None]
    line_refs: list[cst.CSTNode] = field(default_factory=list)
    imports: ImportTable = field(default_factory=ImportTable)  # to resolve or spell names
    # ``target-torch-version``: the oldest torch the project supports; None: the latest.
    target_torch: tuple[int, int] | None = None

    def torch_has(self, since: tuple[int, int]) -> bool:
        """Whether every torch the project supports has what appeared in torch ``since``."""
        return self.target_torch is None or self.target_torch >= since

    def code(self, node: cst.CSTNode, limit: int = 60) -> str:
        text = self.module.code_for_node(node).strip()
        text = " ".join(text.split())
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def exact(self, node: cst.CSTNode) -> str | None:
        """``node``'s source as written, for a fix to copy (``code`` abbreviates it for
        messages); None when it spans lines, where a copy could change its meaning."""
        text = self.module.code_for_node(node).strip()
        return None if "\n" in text else text

    def atom(self, node: cst.BaseExpression) -> str:
        """``node``'s full source, parenthesised unless it can take ``.method()`` as is."""
        text = self.module.code_for_node(node)
        simple = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)
        return text if isinstance(node, simple) or node.lpar else f"({text})"


class Rule:
    """Base class of every rule. Subclasses fill in the class attributes below."""

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity] = Severity.ERROR
    summary: ClassVar[str]
    why: ClassVar[str] = ""  # why it is a problem
    symptom: ClassVar[str] = ""  # what the user sees when it goes wrong
    how_to_fix: ClassVar[str] = ""
    bad: ClassVar[str] = ""  # example that triggers the rule
    good: ClassVar[str] = ""  # the corrected example
    fixable: ClassVar[bool] = False
    # "unsafe": its fixes may change behaviour and need ``--unsafe-fixes`` (said in its docs)
    fix_applicability: ClassVar[str] = "safe"

    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx

    # -- hooks (override the ones you need) ----------------------------------------
    def check_call(self, call: CallSite) -> None:
        """A call or ``a @ b``."""

    def check_setitem(self, site: SetItemSite) -> None:
        """``t[index] = value``."""

    def check_store(self, site: StoreSite) -> None:
        """``p.data = value`` or ``m.weight = nn.Parameter(value)``: a tensor's storage
        replaced (``site.widened``: made float32 by type promotion, see the site)."""

    def check_class(self, site: ClassSite) -> None:
        """A class definition."""

    def check_function(self, site: FunctionSite) -> None:
        """A function or method definition, with its decorators resolved."""

    def check_training(self, site: TrainingSite) -> None:
        """A step of a training loop (backward, unscale, clip, optimizer step), in order."""

    def check_return(self, site: ReturnSite) -> None:
        """``return value``, with the fact of what the function returns there."""

    def check_ambient(self, call: CallSite) -> None:
        """An op autocast does not recast, in a module method walked as if under autocast
        (``call.scope.autocast.implicit``): see ``mpcheck.engine.ambient``."""

    def finish(self) -> None:
        """Called once after the whole file was walked: for verdicts that need all of it."""

    # -- helpers ---------------------------------------------------------------------
    def report(
        self,
        node: cst.CSTNode,
        message: str,
        *,
        related: Iterable[tuple[cst.CSTNode, str]] = (),
        fix: NodeFix | None = None,
        severity: Severity | None = None,
    ) -> None:
        """One finding; ``severity`` overrides the rule's default for this one (a rule whose
        findings both raise and silently corrupt reports the silent ones as warnings)."""
        self.ctx.sink(Report(type(self), node, message, tuple(related), fix, severity))

    def report_evidenced(
        self,
        node: cst.CSTNode,
        message: str,
        scope: Scope,
        half: Fact | None,
        *,
        related: Iterable[tuple[cst.CSTNode, str]] = (),
        fix: NodeFix | None = None,
        severity: Severity | None = None,
        op: CallSite | None = None,
    ) -> None:
        """A dtype-flow finding whose half side is ``half``: an error when the project gives
        evidence that half reaches ``scope`` (``scope.evidence``, named in the message and
        as related locations: the class and the cast or library base that makes it half); a
        warning stating the premise when the only belief is that a module may run in half.
        A ``half`` the code makes half itself is its own evidence. ``op``: the call where the
        dtypes clash, silent when every cast model reaching ``scope`` runs under autocast
        and autocast recasts that op."""
        evidence = scope.evidence
        if self.never_runs(scope):
            return  # code nothing runs: no finding at all
        if evidence is not None and (evidence.float32 or evidence.unseen) and _follows_model(half):
            return  # (float32, or only a half path the records cannot follow: no premise)
        if op is not None and self._recast(scope, op) and _follows_model(half):
            return  # (every cast model reaching it runs under autocast, which recasts here)
        message, more, latent = self.with_evidence(message, scope, half, related)
        if latent:
            severity = Severity.WARNING
        self.report(node, message, related=more, fix=fix, severity=severity)

    def _recast(self, scope: Scope, op: CallSite) -> bool:
        """Whether the caller's autocast recasts ``op`` in ``scope``: every cast model
        reaching the class runs under autocast (``HalfEvidence.autocast``), the code opens no
        region of its own that turns it off, and ``op`` is on autocast's lists (not a compiled
        kernel, nor a call with ``out=``, which autocast never sees)."""
        evidence = scope.evidence
        if evidence is None or evidence.autocast is None:
            return False
        if scope.autocast is not None and not scope.autocast.active:
            return False
        if is_kernel(op.qualname) or "out" in op.kwargs or not op.aten:
            return False
        return autocast_ops.policy(op.aten, "cuda", self.ctx.target_torch) not in (None, "banned")

    def with_evidence(
        self,
        message: str,
        scope: Scope,
        half: Fact | None,
        related: Iterable[tuple[cst.CSTNode, str]] = (),
        premise: str | None = None,
    ) -> tuple[str, list[tuple[cst.CSTNode, str]], bool]:
        """``message`` saying why its half side, which follows the model's dtype, is half
        here (``half: <evidence>``, the class and the cast added to ``related``), or the
        premise alone, and whether only the premise holds it (a finding resting on it is a
        warning). ``premise``: the hazard's own wording of it (``if `X` runs in float16``)
        where "raises ... without autocast" would be wrong (a silent numeric hazard).
        Unchanged when the code itself makes the value half, or outside a module's code."""
        more = list(related)
        evidence = scope.evidence
        if half is not None and half.cause is Cause.CONTRACT and half.origin is not None:
            return f"{message} (latent: {half.origin.text})", more, True
        if evidence is None or not _follows_model(half) or evidence.float32:
            return message, more, False
        if evidence.latent:
            if evidence.node is not None and evidence.place is not None:
                more.append((evidence.node, ""))  # (the premise's support, in its file)
            if premise is None or evidence.subject is None:
                return f"{message} ({evidence.text})", more, True
            why = f"; {evidence.why}" if evidence.why else ""
            latent = premise.format(subject=evidence.subject)
            return f"{message} (latent: {latent}{why})", more, True
        if evidence.node is not None:  # the class, and the cast in its file (by module)
            more.append((evidence.node, evidence.text if evidence.note is None else evidence.note))
        return f"{message} (half: {evidence.text})", more, False

    def never_runs(self, scope: Scope) -> bool:
        """Whether nothing in the project runs the code of ``scope``: nothing builds, imports,
        exports or calls it (:mod:`mpcheck.project.reach`, :mod:`mpcheck.project.uncalled`).
        What it would compute is no hazard of the program, error or warning, even where the
        code makes its values half itself (``x.half()`` in a helper nothing calls)."""
        evidence = scope.evidence
        return evidence is not None and evidence.kind == NEVER_BUILT

    def against_half(self, scope: Scope, value: Fact | None) -> bool:
        """Whether nothing says ``value`` runs in half here: it follows the model's dtype (a
        premise), and the class it is in is only built in float32, or never built, or only a
        half path the records cannot follow may reach it (``HalfEvidence.unseen``). A value
        the code itself makes half needs no premise and is not excused; nor is one under
        autocast, which does not upcast every op."""
        evidence = scope.evidence
        if evidence is not None and evidence.unseen:
            return value is None or value.prec is not Prec.HALF
        if evidence is None or evidence.kind not in (FLOAT32_ONLY, NEVER_BUILT):
            return False
        return evidence.kind == NEVER_BUILT or value is None or value.prec is not Prec.HALF

    def bfloat16_only(self, scope: Scope, value: Fact | None) -> bool:
        """Whether ``value``, which follows the model's dtype, is bfloat16 whenever it is
        half: every half path reaching the class ``scope`` is in writes bfloat16 down
        (``HalfEvidence.float16``). bfloat16's range is float32's, so an overflow of
        float16's range (65504) needs float16 shown."""
        evidence = scope.evidence
        return evidence is not None and not evidence.float16 and _follows_model(value)

    def autocast_only(self, scope: Scope) -> bool:
        """Whether the project runs the class ``scope`` is in only under autocast and never
        casts it (a trainer's mixed precision, every call inside a region): its weights and
        buffers stay float32, and only what autocast's lists lower is half."""
        evidence = scope.evidence
        return evidence is not None and evidence.kind == AUTOCAST_ONLY

    def line(self, node: cst.CSTNode) -> str:
        """A placeholder for "line N" of ``node``, filled in once positions are known."""
        self.ctx.line_refs.append(node)
        return f"\x00{len(self.ctx.line_refs) - 1}\x00"

    def where(self, fact: Fact) -> str:
        """``upcast to float32 by `.float()` at line 12``: where a fact came from."""
        origin: Origin | None = fact.origin
        if origin is None:
            return ""
        return f"{origin.text} at {self.line(origin.node)}"

    def decided(self, via: Origin | None) -> tuple[str, list[tuple[cst.CSTNode, str]]]:
        """Where a dtype variable was decided (``.to(weight_dtype)`` uses it): a clause to add
        to the message (``; weight_dtype is float16 ... at line 31``) and a related location.
        """
        if via is None:
            return "", []
        return f"; {via.text.removesuffix(' here')} at {self.line(via.node)}", [
            (via.node, via.text)
        ]

    def related_for(self, name: str, fact: Fact) -> list[tuple[cst.CSTNode, str]]:
        if fact.origin is None:
            return []
        return [(fact.origin.node, f"`{name}` {fact.origin.text}")]

    # -- documentation ---------------------------------------------------------------
    @classmethod
    def info(cls) -> RuleInfo:
        return RuleInfo(cls.code, cls.name, cls.severity, cls.summary, cls.docs())

    @classmethod
    def docs(cls) -> str:
        """The rule's documentation as Markdown, built from its attributes."""
        parts = [f"# {cls.code} `{cls.name}`", ""]
        fix = "no automatic fix"
        if cls.fixable:
            fix = "a fix is available (`--fix`)"
            if cls.fix_applicability == "unsafe":
                fix = "an unsafe fix is available (`--fix --unsafe-fixes`)"
        parts += [f"**Severity:** {cls.severity.value} · {fix}", "", cls.summary, ""]
        for title, body in (
            ("Why is this a problem?", cls.why),
            ("What you see", cls.symptom),
            ("How to fix", cls.how_to_fix),
        ):
            if body:
                parts += [f"## {title}", "", _dedent(body), ""]
        for title, body in (("Example", cls.bad), ("Use instead", cls.good)):
            if body:
                parts += [f"## {title}", "", "```python", _dedent(body).rstrip(), "```", ""]
        return "\n".join(parts).rstrip() + "\n"

    @classmethod
    def hooks(cls) -> frozenset[str]:
        """The ``check_*`` hooks this rule overrides, so the engine calls only those."""
        return frozenset(
            hook.method
            for hook in HOOKS
            if getattr(cls, hook.method) is not getattr(Rule, hook.method)
        )


def _dedent(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


@cache
def all_rules() -> tuple[type[Rule], ...]:
    """Built-in rules from ``mpcheck.rules`` plus third-party ``mpcheck.rules`` entry points."""
    found: dict[str, type[Rule]] = {}
    package = importlib.import_module("mpcheck.rules")
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for rule in _rules_in(vars(module).values()):
            found.setdefault(rule.code, rule)
    for loaded in load_plugins():
        candidates = (
            vars(loaded).values()
            if hasattr(loaded, "__path__") or hasattr(loaded, "__file__")
            else [loaded]
        )
        for rule in _rules_in(candidates):
            found.setdefault(rule.code, rule)
    return tuple(sorted(found.values(), key=lambda r: r.code))


def _rules_in(objects: Iterable[object]) -> Sequence[type[Rule]]:
    return [
        obj
        for obj in objects
        if isinstance(obj, type)
        and issubclass(obj, Rule)
        and obj is not Rule
        and "code" in vars(obj)
    ]


def rules_by_code() -> dict[str, type[Rule]]:
    return {r.code: r for r in all_rules()}


def _follows_model(half: Fact | None) -> bool:
    """Whether a finding's half side is half only when the model is (no fact: the scope's
    premise alone): a value the code itself makes half is its own evidence."""
    return half is None or half.prec is Prec.MODEL
