"""The walk's state and the interface its parts share.

:class:`Walk` holds what one file's walk knows (classes, function summaries, the
reporting policy) and declares the entry points the parts recurse through:
:meth:`Walk.expr`, :meth:`Walk.block`, :meth:`Walk.bind`, :meth:`Walk.function_frame` and
:meth:`Walk.emit`. Each part (:mod:`autocast` ... :mod:`ambient`) holds it as ``file`` and
asks the parts built before it directly; :class:`~mpcheck.engine.analysis.FileAnalysis`
implements it by composing the parts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace

import libcst as cst

from mpcheck.engine.constants import Constants
from mpcheck.engine.evidence import HalfEvidence
from mpcheck.engine.facts import Cause, Fact, Kind, Origin
from mpcheck.engine.frames import ClassInfo, Frame
from mpcheck.engine.keep_fp32 import KeepFp32
from mpcheck.engine.options import Options
from mpcheck.engine.reporting import Listener, Readings, Reporting
from mpcheck.engine.sites import (
    FedElsewhere,
    InnerCall,
    KeptResidualLoad,
    Operand,
    Owner,
    Replacement,
)
from mpcheck.engine.training_loop import Tracker
from mpcheck.knowledge import torch_api as T
from mpcheck.project.callables import SplitRun
from mpcheck.project.names import ImportTable
from mpcheck.project.summary import ClassSummary, Place, ProjectLookup


@dataclass(frozen=True)
class CallRecord:
    """What the walk knows of one call (or operator standing for one) when it reports it."""

    node: cst.Call | cst.BinaryOperation | cst.AugAssign
    result: Fact
    args: tuple[Operand, ...] = ()
    kwargs: dict[str, Operand] = field(default_factory=dict)
    qual: str | None = None  # ``torch.matmul``: the resolved function
    method: str | None = None  # ``x.float()``: the method called on ``receiver``
    receiver: Operand | None = None
    op: T.OpKind | None = None
    aten: str = ""  # the op's name in autocast's tables
    path: str | None = None  # ``self.proj``: the called module's path
    owner: Owner | None = None
    inner: tuple[InnerCall, ...] = ()
    through: tuple[InnerCall, ...] = ()
    fed_half: tuple[InnerCall, ...] = ()  # see ``CallSite.fed_half``
    fed_elsewhere: FedElsewhere | None = None  # see ``CallSite.fed_elsewhere``
    replacement: Replacement | None = None
    kept_residual: KeptResidualLoad | None = None
    fed: tuple[Operand, ...] = ()  # see ``CallSite.fed``
    handed_split: SplitRun | None = None  # see ``CallSite.handed_split``
    average: Fact | None = None  # see ``CallSite.average``

    def operand(self, index: int, keyword: str) -> Operand | None:
        """The ``index``-th operand of a function, counting a method's receiver first, or the
        one passed as ``keyword`` (``F.pad(x, p, "constant", 0)`` or ``value=0``)."""
        operands = [self.receiver, *self.args] if self.method and self.receiver else list(self.args)
        if index < len(operands):
            return operands[index]
        return self.kwargs.get(keyword)


class Walk(ABC):
    """One file's walk: its state and its recursion points (the parts answer them)."""

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
        readings: Readings | None = None,
    ) -> None:
        self.module = module
        # ``target-torch-version``: autocast regions answer with that torch's lists.
        self.target_torch = target_torch
        self.project = project  # what the other files of the project export
        # Calls to another file's function whose result's dtype was decided over there:
        # the place, so a finding's related locations can name that file.
        self.elsewhere: dict[cst.CSTNode, Place] = {}
        # An EMA keeper's construction: the average it holds, for the record of that call
        # (:meth:`mpcheck.engine.expressions.Expressions.call`)
        self.averages: dict[cst.CSTNode, Fact] = {}
        # The facts the rules were shown, in order: the origins among them whose dtype was
        # decided in another file are looked up for reported findings only (``decided_at``).
        # At the first finding they are indexed instead (``_places``: each origin node with
        # a place -> the first), and so are the facts shown after it.
        self._shown: list[Iterable[Fact]] | None = []
        self._places: dict[cst.CSTNode, Place] = {}
        # The module calls shown to the rules so far (``CallSite.module_calls``).
        self.module_calls: set[cst.CSTNode] = set()
        self.source = source
        self.imports = imports
        self.constants = Constants(module, source)  # the numbers names stand for
        self.options = Options(module, source)  # command-line switches no run can turn
        self.reporting = Reporting(listener, readings)
        self.half_capable = module_half_capable
        # whether anything may run this code under autocast (False: the project never
        # turns it on, and is no package its users run as they like)
        self.may_autocast = True
        # an FSDP policy of the project that casts its models' floating forward inputs to
        # half: where it is, quoted (None: none; :class:`mpcheck.project.models.ModelUses`)
        self.input_cast: str | None = None
        # an application (no package its users install) that shows where it builds its
        # models: a library's contract about its users is only a premise here
        self.application = False
        self.classes: dict[str, ClassInfo] = {}
        self.functions: dict[str, cst.FunctionDef] = {}
        # (model, dtype) parameter positions of each function that casts the model handed
        # to it in place (``set_module_tensor_to_device(model, k, ..., dtype=dtype)``)
        self.param_casts: dict[cst.FunctionDef, set[tuple[int, int]]] = {}
        self.keep = KeepFp32()
        # Module classes of other project files built here, by the name they are built as
        # (their layer): calls of their instances go by the class's summary.
        self.imported: dict[str, ClassSummary] = {}
        self.training = Tracker(self)  # the training loop: scalers, optimizers
        self.script: Frame | None = None  # the module's top level, as walked so far

    @property
    @abstractmethod
    def in_progress(self) -> set[cst.FunctionDef]:
        """The functions being walked: a call met inside one does not walk it again."""

    @abstractmethod
    def half_evidence(
        self, cls: ClassInfo | None, name: str, fn: cst.FunctionDef | None = None
    ) -> HalfEvidence:
        """Why the code of ``cls`` (or the function ``name``) may run in half; ``fn``: the
        function walked (construction code is evidence of float32)."""

    @abstractmethod
    def imported_evidence(self, name: str, cls: ClassSummary) -> HalfEvidence | None:
        """Why the class of another project file that ``name`` stands for here (imported,
        ``cls`` its summary) may run in half, as :meth:`half_evidence` answers for this
        file's; None: the project does not say which class it is."""

    @abstractmethod
    def flag_unset(self, owner: str, name: str) -> bool:
        """Whether nothing sets the constructor flag ``name`` of this file's class ``owner``
        (:mod:`mpcheck.project.flags`)."""

    @abstractmethod
    def uncalled(self, owner: str, name: str) -> HalfEvidence | None:
        """Why nothing runs the method ``name`` of this file's class ``owner`` (nothing in the
        project calls it), or None."""

    @abstractmethod
    def sampler_evidence(self, name: str) -> HalfEvidence | None:
        """Why a sampler or scheduler ``name`` steps half model outputs: None where a
        library's users run it in half (no premise to state), else the premise."""

    @abstractmethod
    def called_from_modules(self, name: str) -> bool:
        """Whether the project calls this file's function ``name`` (outside a class) from a
        module's code (:mod:`mpcheck.project.callers`)."""

    @abstractmethod
    def called_outside_modules(self, name: str) -> bool:
        """Whether the project calls this file's function ``name`` (outside a class), and
        never from a module's code: only scripts, datasets and plain classes hand it data."""

    @abstractmethod
    def half_call(self, name: str, params: tuple[str, ...], param: str) -> Place | None:
        """Where this file's function ``name`` (outside a class) is handed, as ``param``, a
        value that may be half while its other calls hand it none: the call a finding on
        that parameter rests on (None: no such call, or users may call it)."""

    @abstractmethod
    def full_inputs(self, name: str, params: tuple[str, ...]) -> dict[str, str]:
        """The parameters (of ``params``) of this file's function ``name`` (outside a
        class) that every call in the project hands no half value, with what it hands
        (``arguments.NUMBER``, ``INT`` or ``FULL``), where no user of the project may call it
        otherwise (:mod:`mpcheck.project.arguments`)."""

    @abstractmethod
    def handed_split(self, function: str, slots: Collection[str]) -> SplitRun | None:
        """A lambda the project hands to this file's ``function`` (its name) in one of
        ``slots`` that runs a module split by its input embeddings
        (:mod:`mpcheck.project.callables`)."""

    @abstractmethod
    def buffers_kept(self, name: str) -> str | None:
        """The FSDP wrapper (quoted) that is the only cast reaching this file's class
        ``name`` and leaves its buffers as built (:mod:`mpcheck.engine.buffers`), or None."""

    @abstractmethod
    def before_cast(self, fn: cst.FunctionDef | None) -> bool:
        """Whether ``fn`` runs only while a model is built, before any cast of it
        (:meth:`mpcheck.engine.construction.Construction.before_cast`)."""

    @abstractmethod
    def built_by_dtype(self, cls: ClassInfo, name: str) -> bool:
        """Whether this file's class ``name`` is made half by its ``dtype=`` build only
        (:mod:`mpcheck.engine.factory_kwargs`): no cast once built, no half default dtype."""

    @abstractmethod
    def cast_once_built(self, cls: ClassInfo, name: str) -> bool:
        """Whether every half path to this file's class ``name`` casts it once built
        (``model.half()``), so a part it builds with a literal float dtype is cast too: no
        load or build under a half dtype, no half default dtype."""

    @abstractmethod
    def loaded_under_dtype(self, name: str) -> bool:
        """Whether a load of this file's class ``name`` may build it under a half default
        dtype (``from_pretrained(torch_dtype=...)``), which leaves a non-persistent buffer
        as built (:mod:`mpcheck.engine.buffers`)."""

    @abstractmethod
    def expr(self, node: cst.BaseExpression | None, frame: Frame) -> Fact:
        """The fact ``node`` evaluates to; reports the calls inside it."""

    @abstractmethod
    def block(
        self, body: Sequence[cst.BaseStatement | cst.BaseSmallStatement], frame: Frame
    ) -> None:
        """Walk statements in order, updating ``frame``."""

    @abstractmethod
    def function_frame(
        self, fn: cst.FunctionDef, cls: ClassInfo | None, outer: Frame | None
    ) -> Frame:
        """A frame for walking ``fn``: its parameters bound, in ``outer`` if nested."""

    @abstractmethod
    def bind(
        self, target: cst.BaseExpression, value: Fact, frame: Frame, key: str | None = None
    ) -> None:
        """Assign ``value`` to a name, ``self.<attr>`` path or tuple of them (or to ``key``,
        a family of attributes ``setattr`` stores under computed names: ``families.py``)."""

    @abstractmethod
    def emit(self, call: CallRecord, frame: Frame) -> Fact:
        """Report a call to the rules (if the policy says so); returns its result."""

    def shown(self, facts: Iterable[Fact]) -> None:
        """Facts a site hands the rules (an iterable read again at report time), kept for
        :meth:`decided_at`: facts are immutable, so their origins can wait to be walked
        until a finding asks, and a file without findings walks none. After the first
        finding (:meth:`found`) they are indexed at once, and not kept."""
        if self._shown is None:
            _index_places(facts, self._places)
        else:
            self._shown.append(facts)

    def found(self) -> None:
        """A rule reported a finding: :meth:`decided_at` will walk every shown fact's origins,
        so walk those shown so far now and keep only what they place, not the facts (and the
        call records holding them) for the rest of the file's walk."""
        if self._shown is not None:
            for facts in self._shown:
                _index_places(facts, self._places)
            self._shown = None

    def decided_at(self, nodes: Iterable[cst.CSTNode]) -> dict[cst.CSTNode, Place]:
        """Of ``nodes`` (the findings' nodes and related nodes), those that are the origin of
        a shown fact (of its items', of a dtype variable's) whose dtype was decided in
        another file, with that place: the first shown, as the findings' related locations."""
        wanted = set(nodes)
        if wanted:
            self.found()
        return {node: place for node, place in self._places.items() if node in wanted}

    def code(self, node: cst.CSTNode) -> str:
        """``node``'s source, cut to fit in a message."""
        return shorten(self.module.code_for_node(node))

    def dtype_source(self, op: Operand) -> Origin | None:
        """Where a dtype variable (``.to(weight_dtype)``) got its value, if elsewhere."""
        origin = op.fact.origin
        if origin is None or origin.node is op.node or op.fact.kind is not Kind.DTYPE:
            return None
        if origin.cause is Cause.FROZEN:  # ``self.dtype``: what casting the model leaves stale
            return replace(origin, text=f"`{self.code(op.node)}` is {origin.text} here")
        value = self.code(origin.node)
        return replace(origin, text=f"`{self.code(op.node)}` is `{value}` here")


def _index_places(facts: Iterable[Fact], places: dict[cst.CSTNode, Place]) -> None:
    """Each origin of ``facts`` (of their items', of a dtype variable's) that has a place
    (its dtype was decided in another file) -> that place, the first one kept."""
    for fact in facts:
        for part in (fact, *(fact.items or ()), *((fact.elem,) if fact.elem else ())):
            origin = part.origin
            while origin is not None:
                if origin.place is not None:
                    places.setdefault(origin.node, origin.place)
                origin = origin.via


def shorten(text: str) -> str:
    """Source text cut to fit in a message."""
    return text if len(text) <= 60 else text[:57] + "..."
