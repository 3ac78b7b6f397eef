"""What the walk carries -- environments, frames, classes -- and its public interface.

:class:`WalkApi` is what clients of the walk (the training-loop tracker) may use;
the modules that walk code import this one, and it imports none of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol, cast

import libcst as cst

from mpcheck.engine.facts import Fact
from mpcheck.engine.reporting import Reporting
from mpcheck.engine.sites import Operand, Scope
from mpcheck.project.names import children, descendants, dotted
from mpcheck.project.summary import ClassSummary

Env = dict[str, Fact]
_CASTS = frozenset({"to", "type", "type_as", "half", "float", "bfloat16", "double"})
# A call's positional and keyword arguments, and whether the callee's first parameter is
# ``self`` (which the call does not pass).
Call = tuple[tuple[Operand, ...], dict[str, Operand], bool]


@dataclass
class ClassInfo:
    """A class of the file as the walk knows it: its attributes and methods."""

    node: cst.ClassDef
    is_module: bool
    attrs: Env
    methods: dict[str, cst.FunctionDef]
    bases: tuple[str, ...]
    kept_fp32: bool = False  # instantiated under a name in ``_keep_in_fp32_modules``
    is_pipeline: bool = False  # a diffusers-style pipeline: ``self.vae`` & co. are models
    is_sampler: bool = False  # a noise scheduler or sampler: it steps the model's sample
    pretrained: bool = False  # loaded by ``from_pretrained`` (see ``T.PRETRAINED_SUFFIXES``)
    lightning: bool = False  # a ``LightningModule``: its steps run under the Trainer's precision
    # a bitsandbytes quantized layer's subclass: built into a loaded model, so its own new
    # parts are float32 (see ``T.QUANTIZED_LAYERS``)
    quantized: bool = False
    analysed: bool = False  # its methods were walked (each class is walked once)
    # bases defined in other project files: the base expression, its module, its summary
    elsewhere: tuple[tuple[cst.BaseExpression, str, int, ClassSummary], ...] = ()
    # ``self.dtype`` & co. fixed at construction, stale once the module is cast (``frozen.py``);
    # None until a method of the class is walked
    frozen: Env | None = None
    # ``forward`` hands its first input, as it came, to one of its own layers (a conv, a
    # Linear, a norm): a float32 input then meets half weights (what another file is told)
    feeds_weights: bool = False
    # the positions of every input ``forward`` hands so (``self.local_att(x + residual)``)
    fed_inputs: frozenset[int] = frozenset()
    # (method, input positions) -> the calls of a Linear, conv or RNN of its own that take
    # those inputs of that method as they came, in order, each with "" or, for a module of
    # a class of this file, that class (its ``forward`` decides): ``ClassSummary.feeds``
    feeds: dict[tuple[str, tuple[int, ...]], list[tuple[cst.Call, str]]] = field(
        default_factory=dict
    )
    # ``self.name`` that ``__init__`` registered as a buffer with a spelled dtype: (the value
    # ``__init__`` reads back, the model's-dtype fact the other methods see) (``buffers.py``)
    registered: dict[str, tuple[Fact, Fact]] = field(default_factory=dict)

    @cached_property
    def casts_input(self) -> bool:
        """Whether ``forward`` casts its input (or a value made of it, ``wav.clamp(-1, 1)
        .float()``) or opens an autocast region itself: then the input's dtype is not what
        its layers see (read once per class: every call of a half model in a script asks)."""
        fn = self.methods.get("forward")
        if fn is None:
            return True  # called some other way: nothing to say about its input
        params = [p.name.value for p in fn.params.params[1:2]]
        stack: list[cst.CSTNode] = [fn.body]
        # (by identity: ``Call`` and ``Attribute`` have no subclass, and libcst's node classes
        # are ABCs, whose ``isinstance`` was most of this walk; a name holds no call)
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is cst.Name:
                continue
            if kind is cst.Call:
                func = cast(cst.Call, node).func
                if type(func) is cst.Attribute:
                    receiver, attr = _root(func.value), func.attr.value
                    if attr == "autocast" or (receiver in params and attr in _CASTS):
                        return True  # (``wav.clamp(-1, 1).float()``: a value made of it, cast)
            stack.extend(children(node))
        return False

    @cached_property
    def late_methods(self) -> frozenset[str]:
        """Methods that run after a wrapped model was built: the class is handed a model
        (``self.pretrained_model = pretrained_model`` in ``__init__``, called elsewhere) and
        ``__init__`` does not call them. What they build without ``dtype=`` is float32 while
        the wrapped model may well be half (trl's reward adapter's ``self.score``)."""
        init = self.methods.get("__init__")
        if init is None:
            return frozenset()
        params = {p.name.value for p in init.params.params[1:]}
        given: set[str] = set()
        called: set[str] = set()
        for node in descendants(init.body):
            if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name):
                target = dotted(node.targets[0].target) or ""
                if node.value.value in params and target.startswith("self."):
                    given.add(target[5:])
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                if dotted(node.func.value) == "self":
                    called.add(node.func.attr.value)
        if not given:
            return frozenset()
        wanted = {f"self.{attr}" for attr in given}
        wrapped = any(
            type(node) is cst.Call and dotted(node.func) in wanted
            for name, fn in self.methods.items()
            if name != "__init__"
            for node in descendants(fn.body)
        )
        if not wrapped:
            return frozenset()
        return frozenset(n for n in self.methods if n != "__init__" and n not in called)

    @cached_property
    def lightning_steps(self) -> dict[str, cst.FunctionDef]:
        """Each method a Lightning step runs (the step itself, ``forward`` through
        ``self(...)``, helpers through ``self.helper(...)``) -> that step. With
        ``Trainer(precision="16-mixed")`` Lightning runs the steps under CUDA autocast."""
        if not self.lightning:
            return {}
        found: dict[str, cst.FunctionDef] = {}
        for name in LIGHTNING_STEPS:
            step = self.methods.get(name)
            todo = [name] if step is not None else []
            while step is not None and todo:
                method = todo.pop()
                if method in found or method not in self.methods:
                    continue
                found[method] = step
                stack: list[cst.CSTNode] = [self.methods[method].body]
                while stack:
                    node = stack.pop()
                    callee = dotted(node.func) or "" if isinstance(node, cst.Call) else ""
                    if callee == "self" or callee.startswith("self."):
                        todo.append(callee[5:] or "forward")
                    stack.extend(children(node))
        return found


LIGHTNING_STEPS = ("training_step", "validation_step", "test_step", "predict_step")


def lineage(classes: dict[str, ClassInfo], info: ClassInfo) -> Iterator[ClassInfo]:
    """``info`` and its bases defined in this file (``classes``), each once."""
    seen: set[str] = set()
    todo = [info]
    while todo:
        cls = todo.pop()
        if cls.node.name.value not in seen:
            seen.add(cls.node.name.value)
            yield cls
            todo.extend(classes[b] for b in cls.bases if b in classes)


@dataclass
class Frame:
    """Per-function walking state."""

    env: Env
    scope: Scope
    returns: Fact | None = None
    # a ``return``, ``raise``, ``continue`` or ``break`` ended this path (``exits.py``); the
    # values at each ``continue``/``break`` (for the loop) and ``return`` (for the function)
    dead: bool = False
    jumps: list[Env] = field(default_factory=list)
    exits: list[Env] = field(default_factory=list)

    @property
    def in_init(self) -> bool:
        """Walking an ``__init__``: what it binds on ``self`` is the object's state."""
        fn = self.scope.function
        return fn is not None and fn.name.value == "__init__"

    def rebind(self, path: str, new: Fact) -> None:
        """``path`` is now ``new`` (a model cast in place): what was known of its attributes
        (``path.weight``) no longer holds."""
        self.env[path] = new
        prefix = path + "."
        for key in [k for k in self.env if k.startswith(prefix)]:
            del self.env[key]


class WalkApi(Protocol):
    """What the tracker may use of a file's walk."""

    module: cst.Module
    classes: dict[str, ClassInfo]
    reporting: Reporting
    target_torch: tuple[int, int] | None
    source: bytes

    @property
    def in_progress(self) -> set[cst.FunctionDef]: ...

    def expr(self, node: cst.BaseExpression | None, frame: Frame) -> Fact: ...

    def block(
        self, body: Sequence[cst.BaseStatement | cst.BaseSmallStatement], frame: Frame
    ) -> None: ...

    def function_frame(
        self, fn: cst.FunctionDef, cls: ClassInfo | None, outer: Frame | None
    ) -> Frame: ...


def _root(node: cst.BaseExpression) -> str | None:
    """The name a chain of dtype-keeping methods and subscripts starts from (``wav`` of
    ``wav.clamp(-1, 1)``; None: no name, or a new tensor such as ``x.new_zeros(n)``)."""
    while True:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if node.func.attr.value not in _KEEPS:
                return None
            node = node.func.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Name):
            return node.value
        else:
            return None


# Methods whose result is the tensor's values in its dtype (shape, range, copies).
_KEEPS = frozenset(
    """clamp clip clamp_ clip_ unsqueeze squeeze view reshape permute transpose contiguous
    clone detach flatten abs""".split()
)
