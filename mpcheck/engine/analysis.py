"""The dtype-provenance pass over one file: the driver of the walk.

Every expression gets a :class:`~mpcheck.engine.facts.Fact`; names, ``self.<attr>``
paths and module objects are bound in an environment that is copied at
branches and joined after them. Rules are called back with :mod:`mpcheck.engine.sites`
as the walk reaches calls, item assignments and classes, so they see the facts
that hold at that point. Functions defined in the file are summarised by the
fact of what they return, with ``params`` marking what is derived from which
argument, so a call site can substitute its own arguments.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import replace

import libcst as cst

from mpcheck.engine.ambient import Ambient
from mpcheck.engine.autocast import Regions
from mpcheck.engine.base import CallRecord, Walk
from mpcheck.engine.casts import Casts
from mpcheck.engine.construction import Construction, cast_once_built
from mpcheck.engine.emitter import SiteEmitter
from mpcheck.engine.evidence import Evidence, HalfEvidence
from mpcheck.engine.expressions import Expressions
from mpcheck.engine.factory_kwargs import built_by_dtype
from mpcheck.engine.facts import Fact
from mpcheck.engine.frames import ClassInfo, Frame
from mpcheck.engine.functions import Definitions
from mpcheck.engine.keep_fp32 import KeepFp32, adapter_casts
from mpcheck.engine.modules import Modules
from mpcheck.engine.ranges import ranged
from mpcheck.engine.reporting import Listener, Readings
from mpcheck.engine.sites import Scope
from mpcheck.engine.starred import bind_starred
from mpcheck.engine.statements import Statements
from mpcheck.engine.tensors import Tensors
from mpcheck.engine.zero_rows import zeroed
from mpcheck.project.callables import SplitRun
from mpcheck.project.exports import exported
from mpcheck.project.models import ModelUses
from mpcheck.project.names import ImportTable
from mpcheck.project.part_methods import part_called_names
from mpcheck.project.summary import ClassSummary, Place, ProjectLookup

_SELF_CALL = re.compile(rb"self\.([A-Za-z_]\w*)\s*\(")
_NAME_CALL = re.compile(rb"\b(?<!\.)([A-Za-z_]\w*)\s*\(")  # (``\b`` first: twice as fast)


class FileAnalysis(Walk):
    """Runs the pass over one module and reports sites to a listener.

    It holds the file's state (:class:`Walk`) and the parts of the walk, each given the
    parts it asks questions of; the recursion points (:meth:`expr`, :meth:`block`,
    :meth:`bind`, :meth:`function_frame`, :meth:`emit`) are how a part reaches one built
    after it, as mypy's ``ExpressionChecker`` reaches its ``TypeChecker``.
    """

    def __init__(
        self,
        module: cst.Module,
        imports: ImportTable,
        listener: Listener,
        *,
        module_half_capable: bool = True,
        source: bytes = b"",
        project: ProjectLookup | None = None,
        target_torch: tuple[int, int] | None = None,
        uses: ModelUses | None = None,
        half_setting: bool = False,
        open_world: bool = False,
        readings: Readings | None = None,
    ) -> None:
        super().__init__(
            module,
            imports,
            listener,
            module_half_capable=module_half_capable,
            source=source,
            project=project,
            target_torch=target_torch,
            readings=readings,
        )
        self.evidence = Evidence(self.elsewhere, uses, half_setting, open_world)
        self.construction = Construction(uses, half_setting)
        self.uses = uses
        # a project that never turns autocast on (nor lets its users): nothing runs under it
        self.may_autocast = uses is None or uses.autocasts or half_setting
        # an FSDP policy casting the models' floating forward inputs to half (its text)
        self.input_cast = None if uses is None else uses.input_cast
        self.application = uses is not None and uses.application and not half_setting
        self._half_setting = half_setting
        self._declared: frozenset[str] | None = None  # the file's literal ``__all__``
        # the evidence of other project files' classes, per module (:meth:`imported_evidence`)
        self._imported_evidence: dict[str, Evidence] = {}
        self.regions = Regions(self)
        self.definitions = Definitions(self, self.regions)
        self.modules = Modules(self, self.regions, self.definitions)
        self.casts = Casts(self)
        self.tensors = Tensors(self, self.regions, self.definitions, self.modules, self.casts)
        self.expressions = Expressions(
            self, self.regions, self.definitions, self.modules, self.casts, self.tensors
        )
        self.statements = Statements(self, self.regions, self.definitions, self.expressions)
        self.ambient = Ambient(self, self.definitions, self.statements)
        self.emitter = SiteEmitter(self)

    @property
    def summaries(self) -> dict[cst.FunctionDef, Fact]:
        """What each function of the file returns (:class:`Definitions` keeps them)."""
        return self.definitions.summaries

    @property
    def in_progress(self) -> set[cst.FunctionDef]:
        """The functions being walked, which a call inside them does not walk again."""
        return self.definitions.in_progress

    def half_evidence(
        self, cls: ClassInfo | None, name: str, fn: cst.FunctionDef | None = None
    ) -> HalfEvidence:
        if cls is None:
            found = self.evidence.of_function(name)
        else:
            others = [base for *_, summary in cls.elsewhere for base in summary.bases]
            node = cls.node
            found = self.evidence.of_class(
                node.name.value, node.name, (*cls.bases, *others), cls.pretrained
            )
        if fn is None:
            return found
        owner = cls.node.name.value if cls else name if fn.name.value == "__init__" else None
        return self.construction.evidence(fn, owner, found)

    def imported_evidence(self, name: str, cls: ClassSummary) -> HalfEvidence | None:
        qualified = self.uses.class_of(name) if self.uses is not None else None
        if self.uses is None or qualified is None:
            return None
        module, _, leaf = qualified.rpartition(".")
        evidence = self._imported_evidence.get(module)
        if evidence is None:  # (its related locations are the other file's, not shown here)
            evidence = Evidence(
                {}, self.uses.at(module), self._half_setting, self.evidence.open_world
            )
            self._imported_evidence[module] = evidence
        return evidence.of_class(leaf, cst.Name(leaf), self._bases_of(cls), False)

    def _bases_of(self, cls: ClassSummary) -> tuple[str, ...]:
        """A class's bases and, where they are the project's, theirs in turn (a library
        base two steps up, ``class Decoder(Base)`` of ``class Base(ModelMixin)``)."""
        found, todo, seen = [], list(cls.bases), set[str]()
        while todo and len(seen) < 16:
            base = todo.pop(0)
            if base in seen:
                continue
            seen.add(base)
            found.append(base)
            summary = self.project(base, 0) if self.project is not None else None
            if isinstance(summary, ClassSummary):
                todo.extend(summary.bases)
        return tuple(found)

    def uncalled(self, owner: str, name: str) -> HalfEvidence | None:
        return self.evidence.of_method(owner, name)

    def flag_unset(self, owner: str, name: str) -> bool:
        return self.evidence.flag_unset(owner, name)

    def sampler_evidence(self, name: str) -> HalfEvidence | None:
        return self.evidence.handed(name) if self.application else None

    def called_from_modules(self, name: str) -> bool:
        return self.uses is not None and self.uses.runs_in_modules(name)

    def called_outside_modules(self, name: str) -> bool:
        return self.uses is not None and self.uses.runs_outside_modules(name)

    def full_inputs(self, name: str, params: tuple[str, ...]) -> dict[str, str]:
        if self.uses is None or self._entry_point(name):
            return {}
        return self.uses.full_inputs(name, params)

    def half_call(self, name: str, params: tuple[str, ...], param: str) -> Place | None:
        if self.uses is None or self._entry_point(name):
            return None
        return self.uses.half_call(name, params, param)

    def _entry_point(self, name: str) -> bool:
        """Whether users of the project may call its function ``name`` with anything: a
        public function a package declares in ``__all__``, or
        any public one where the configuration says its users run its code in half. An
        application's functions have no other callers than its own."""
        if self.application or name.startswith("_"):
            return False
        if self._half_setting:
            return True
        if self._declared is None:
            self._declared = frozenset(exported(self.module)[1] or ())
        return name in self._declared

    def handed_split(self, function: str, slots: Collection[str]) -> SplitRun | None:
        if self.uses is None or self.uses.callables is None:
            return None
        return self.uses.callables.split_run(function, slots)

    def loaded_under_dtype(self, name: str) -> bool:
        return self.uses is None or self.uses.loaded_under_dtype(name)

    def cast_once_built(self, cls: ClassInfo, name: str) -> bool:
        index = self.uses.construction if self.uses is not None else None
        if self._half_setting or index is None or index.default_dtype:
            return False  # (a half default dtype may build it: its literal dtypes stay)
        if self.loaded_under_dtype(name):
            return False
        return cast_once_built(self.half_evidence(cls, name))

    def before_cast(self, fn: cst.FunctionDef | None) -> bool:
        return self.construction.before_cast(fn)

    def built_by_dtype(self, cls: ClassInfo, name: str) -> bool:
        index = self.uses.construction if self.uses is not None else None
        if self._half_setting or (index is not None and index.default_dtype):
            return False  # built under a half default dtype: its factories are half too
        return not cls.pretrained and built_by_dtype(self.half_evidence(cls, name))

    def buffers_kept(self, name: str) -> str | None:
        return None if self.uses is None else self.uses.buffers_kept(name)

    def expr(self, node: cst.BaseExpression | None, frame: Frame) -> Fact:
        return self.expressions.expr(node, frame)

    def block(
        self, body: Sequence[cst.BaseStatement | cst.BaseSmallStatement], frame: Frame
    ) -> None:
        self.statements.block(body, frame)

    def bind(
        self, target: cst.BaseExpression, value: Fact, frame: Frame, key: str | None = None
    ) -> None:
        self.statements.bind(target, value, frame, key)

    def function_frame(
        self, fn: cst.FunctionDef, cls: ClassInfo | None, outer: Frame | None
    ) -> Frame:
        return self.definitions.function_frame(fn, cls, outer)

    def emit(self, call: CallRecord, frame: Frame) -> Fact:
        call = zeroed(ranged(call))  # its value range and zero rows, before rules read them
        if self.averages and call.node in self.averages:  # an EMA keeper's construction
            call = replace(call, average=self.averages.pop(call.node))
        self.ambient.note(call, frame)
        return self.emitter.emit(call, frame)

    def run(self) -> None:
        if self.project is not None:
            bind_starred(self.imports, self.module, self.project)
        self.definitions.helpers = _self_called_names(self.source)
        self.definitions.part_helpers = frozenset(
            name
            for name in part_called_names(self.source)
            if self.uses is None or self.uses.called_in_file(name)
        )
        self._collect(self.module.body)
        self.keep = KeepFp32.of({n: c.node for n, c in self.classes.items()}, self._casts())
        for name in self.keep.kept_classes:
            self.classes[name].kept_fp32 = True
        script = self.script = Frame({}, Scope(None, None, False, None))
        self.block(self.module.body, script)
        for cls in list(self.classes.values()):
            self.definitions.analyse_class(cls)
        for method, info in self.definitions.deferred:  # (no call reached: as written)
            self.definitions.summary(method, info)
        functions = list(self.functions.values())
        if len(functions) > 1:  # (most model files define classes only: nothing to order)
            called = _called_names(self.source)
            functions.sort(key=lambda f: f.name.value in called)
        for fn in functions:
            self.definitions.summary(fn)
        # last: every helper it calls is summarised by then, with the file's own facts
        for cls in list(self.classes.values()):
            self.ambient.ambient_pass(cls)

    def release(self) -> None:
        """Drop what the finished walk holds. Its objects refer to each other (frames, class
        records, bound methods), so without this the file's tree lives on until the next
        full garbage collection, and a run holds several dead trees at a time."""
        parts = (self.regions, self.definitions, self.modules, self.casts, self.tensors)
        for part in (*parts, self.expressions, self.statements, self.ambient, self.emitter):
            part.__dict__.clear()
        self.__dict__.clear()

    def _casts(self) -> dict[str, frozenset[str]]:
        """Each class's dict classes that peft's ``cast_adapter_dtype`` upcasts, when the
        project's code says: read in this file, else through its bases (a LoHa layer's
        ``LycorisLayer`` of ``lycoris_utils.py``, whose ``BaseTunerLayer`` is in the file
        that defines the cast)."""
        here = adapter_casts(self.module) if b"cast_adapter_dtype" in self.source else None
        if here is not None:
            return dict.fromkeys(self.classes, here)
        found: dict[str, frozenset[str]] = {}

        def of(info: ClassInfo, depth: int = 0) -> frozenset[str] | None:
            name = info.node.name.value
            if name in found or depth > 8:
                return found.get(name)
            summaries = (s.adapter_casts for *_, s in info.elsewhere)
            casts = next((frozenset(c) for c in summaries if c is not None), None)
            for base in info.bases:
                parent = self.classes.get(base)
                if casts is None and parent is not None and parent is not info:
                    casts = of(parent, depth + 1)
            if casts is not None:
                found[name] = casts
            return casts

        for info in self.classes.values():
            of(info)
        return found

    def _collect(self, body: Sequence[cst.BaseStatement]) -> None:
        for stmt in body:
            if isinstance(stmt, cst.FunctionDef):
                self.functions[stmt.name.value] = stmt
            elif isinstance(stmt, cst.ClassDef):
                self.definitions.register_class(stmt)


def _self_called_names(source: bytes) -> frozenset[str]:
    """Methods called as ``self.name(...)`` somewhere in the file."""
    return frozenset(m.decode() for m in _SELF_CALL.findall(source))


def _called_names(source: bytes) -> frozenset[str]:
    """Names called somewhere besides their own ``def name(`` line."""
    counts = Counter(_NAME_CALL.findall(source))
    return frozenset(name.decode() for name, n in counts.items() if n > 1)
