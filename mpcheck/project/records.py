"""What one file says about the project's models: a small, serialisable :class:`ModelRecord`.

A module's ``forward`` runs in half only when something makes it so, and that something is
usually in another file (a script's ``model.half()``, a pipeline's ``with torch.autocast``).
Each file's record lists, with every class named by its qualified name (the file's module
path and the class, resolved through the file's own imports: ``from .models import Model``,
``import pkg.models as m; m.Model(...)``):

* the classes it defines, their bases, and the classes each class body builds (also through
  a project function whose value it binds to an attribute: ``self.audio = build_tower(cfg)``);
* the half casts and half loads of models built here (``Model(...).half()``,
  ``model.to(weight_dtype)`` of a ``model = Model(...)``, ``Model.from_pretrained(...,
  torch_dtype=torch.float16)``);
* each call of such a model variable, with the enabled autocast region around it
  (``with torch.autocast(...)``, ``@autocast``, ``accelerator.autocast()``, ...);
* the builds outside class bodies (what "only built in float32" rests on);
* the mixed-precision wrappers it builds (``Accelerator(mixed_precision=...)``, Lightning's
  ``Trainer(precision=...)``, ``TrainingArguments(fp16=True)``, ``deepspeed.initialize``) with
  their effect (:mod:`mpcheck.knowledge.wrappers`), and the models it hands them
  (``accelerator.prepare(model)``, ``trainer.fit(Model())``, ``Trainer(model=model)``), with
  each take that hands one a model of unknown class (:meth:`_Reader._takes`).

A variable a function binds is that function's own: a cast, a run, a take or an escaping use
of ``model`` there is of the models the function binds to ``model``, not of those another
function of the file binds to the same name (:meth:`_Reader._models_at`).
A variable that holds a class holds its candidates (``cls = A if c else B``, ``if``/``elif``
assignments of classes, ``{"a": A, "b": B}[name]``): ``model = cls(8)`` there is an ``A`` or a
``B`` (:mod:`mpcheck.project.choices`, :meth:`_Reader._chosen`).

Records come from one cheap pass over the file's code with its strings and comments blanked
(:func:`blank`), so docstrings, comments and strings never count; they are cached by
content (:func:`mpcheck.project.models.records_for`), which joins them.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from keyword import iskeyword
from typing import Any
from zlib import crc32

from mpcheck.knowledge import torch_api as T
from mpcheck.knowledge import wrappers as wrap
from mpcheck.project.brackets import closing, enclosing, innermost, opening, parts
from mpcheck.project.callables import NONE as NO_CALLABLES
from mpcheck.project.callables import CallablesPass, callables_of
from mpcheck.project.callers import EMPTY, CallersPass, callers_of
from mpcheck.project.choices import CHOICE_CALL, choices_in, choosers
from mpcheck.project.construction import SPACES, ConstructionPass, body_end, construction_of
from mpcheck.project.defaults import DEFAULT_SET, half_default_extents
from mpcheck.project.dtype_names import DtypeNames, written_dtype
from mpcheck.project.flags import EMPTY_FLAGS, FlagsPass, flags_of
from mpcheck.project.held_parts import PART, Part, parts_in
from mpcheck.project.lines import headers, line_matches, narrowed
from mpcheck.project.part_methods import part_called_names
from mpcheck.project.patterns import compiled
from mpcheck.project.reach import CONFIG_LOADERS, NONE, ReachPass, reach_of
from mpcheck.project.returns import (
    annotated_returns,
    params_of,
    returned_annotation,
    tensor_returns,
)
from mpcheck.project.setattrs import literal_setattrs
from mpcheck.project.uncalled import attributes_of, methods_of

__all__ = ["CALLED", "FORMAT", "PASSED", "ModelRecord", "Passed", "module_of", "record_of"]

FORMAT = 42
# How a cast record words a model built in half (``X.from_pretrained(..., torch_dtype=...)``,
# ``X(..., dtype=torch.bfloat16)``): what readers of the record text look for.
BUILT_IN_HALF = "is built in half by"
# A project that mentions none of these never runs anything in half (``half`` as a word:
# ``.half()``, ``torch.half``; not ``half_dim``). A wrapper's settings that autocast or keep
# full precision are no mention (:meth:`_Reader.read` blanks them first).
HALF_WORDS = re.compile(  # (``half`` checks its word boundary behind it: see ``_names_wrapper``)
    rb"half(?<!\whalf)(?!\w)|float16|bfloat16|fp16|bf16|torch_dtype|deepspeed|precision"
    rb"|set_default_dtype"
)
# What each of ``HALF_WORDS`` holds: most files hold none, and ``in`` finds that at memory
# speed, where the pattern (led by ``\b``) is tried at every offset.
_HALF_LITERALS = (
    b"half",
    b"float16",
    b"fp16",
    b"bf16",
    b"torch_dtype",
    b"deepspeed",
    b"precision",
    b"set_default_dtype",
)


def _has_any(code: bytearray | bytes, words: tuple[bytes, ...]) -> bool:
    return any(word in code for word in words)


# A spot: (line, column (1-based), the code a message quotes).
Spot = tuple[int, int, str]


@dataclass(frozen=True, slots=True)
class ClassRecord:
    """A class the file defines (``name``: qualified), its bases as written or resolved, and
    the project classes its body may build (qualified, resolved against the file's imports;
    ``pkg.f()#`` for a project function whose value it binds to an attribute: the project
    expands it to the classes ``f`` returns)."""

    name: str
    line: int
    bases: tuple[str, ...]
    builds: tuple[str, ...]
    named: bool = True  # decorated, or its name is written in its file outside its own body
    # its body builds a part in a dtype it computes itself (``dtype = _str_to_dtype(cfg.x)``
    # then ``nn.Embedding(n, d, dtype=dtype)``): whatever dtype the class is built in, its
    # parts, and the data they make, may be half
    computes_dtype: bool = False
    # (attribute, callees) of each ``self.<attr> = Call(...)`` its body writes: what a cast
    # of that part of one of its models casts (:mod:`mpcheck.project.held_parts`)
    parts: tuple[Part, ...] = ()


@dataclass(frozen=True, slots=True)
class ModelRecord:
    """The file's facts about models (see the module docstring). ``aliases``: the names its
    imports bind (``pkg.a.Model`` -> ``pkg.models.Model``), ``stars``: modules it star-imports;
    both let another file's name resolve through this one. ``casts``: (class, spot, what);
    ``calls``: (class, the autocast region around the call or None); ``builds``: (class,
    spot, whether the built value stays float32 here) outside class bodies; ``half``: the file
    mentions half precision at all; ``unsafe``: classes a value of which reaches a use that
    might cast it (:func:`_escapes`); ``default_dtype``: the file changes the default dtype;
    ``words``: which class names the file may write (code, strings or comments)."""

    module: str
    classes: tuple[ClassRecord, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()
    stars: tuple[str, ...] = ()
    casts: tuple[tuple[str, Spot, str, str], ...] = ()
    calls: tuple[tuple[str, Spot | None], ...] = ()
    builds: tuple[tuple[str, Spot, bool], ...] = ()
    half: bool = False
    unsafe: tuple[str, ...] = ()
    default_dtype: bool = False
    words: int = 0  # a Bloom filter of the CapWords written in the file (:func:`words_of`)
    # (wrapper, spot quoting its call, effect), and (class, spot, library) handed to one
    wrappers: tuple[tuple[str, Spot, str], ...] = ()
    wrapped: tuple[tuple[str, Spot, str], ...] = ()
    deepspeed: bool = False  # accelerate code that names DeepSpeed (it may run under it)
    construction: ConstructionPass = ((), (), 0)  # (:mod:`mpcheck.project.construction`)
    callers: CallersPass = EMPTY  # who calls its functions (:mod:`mpcheck.project.callers`)
    main: int = 0  # the line of its top-level ``if __name__ == "__main__":`` (0: none)
    # (class, the class whose constructor takes a model of it: ``Wrapper(vae, unet)``)
    held: tuple[tuple[str, str], ...] = ()
    reach: ReachPass = NONE  # what it runs, imports and names (:mod:`mpcheck.project.reach`)
    # lambdas it hands, input embeddings it casts, methods running own attributes
    # (:mod:`mpcheck.project.callables`)
    callables: CallablesPass = NO_CALLABLES
    # it may turn autocast on: an autocast region not spelled ``enabled=False``, or an import
    # of a library whose trainers run models under one (:func:`may_autocast`)
    autocasts: bool = True
    # (function, position in its returned tuple or -1 for the whole value, class or call):
    # the models a top-level function builds and returns; its callers' uses decide their fate
    factories: tuple[tuple[str, int, str], ...] = ()
    keepers: tuple[str, ...] = ()  # its top-level functions that cast nothing
    # its FSDP wrappers whose policy casts the forward's floating inputs to a half (or
    # unknown) ``param_dtype``: a float32 position or timestep handed to the model arrives so
    inputs: tuple[Spot, ...] = ()
    # (function, spot of the wrapper call): its top-level functions that hand a value to an
    # FSDP wrapper with a policy (``def apply_fsdp(model, ...)``); a model another file
    # hands one takes the wrapper's effect, it is not kept as it was
    wrapping: tuple[tuple[str, Spot], ...] = ()
    # (name, members): its module-level registries, a dict/list/tuple literal of project
    # functions or classes (``MODELS = {"b": build_b, "l": Large}``); ``MODELS[key](...)``
    # calls one of them, so its value is what any of them returns or builds
    registries: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # the methods of its top-level classes that cast something (``pkg.Class.method``); those
    # that cast nothing are among ``keepers``
    casters: tuple[str, ...] = ()
    # its half casts of a model whose class the file cannot name (``getattr(m, name)().half()``,
    # ``net.half()`` of a ``net`` it also calls ``.eval()`` on, built elsewhere): a half path
    # whose target is unknown, so any class of the project may be on it (the text: the
    # top-level function holding it, "" elsewhere)
    loose: tuple[Spot, ...] = ()
    # (class, spot): its half casts of ``self`` (``self.to(dtype=torch.bfloat16)``) in a method
    # of one of its classes that defines no method of the cast's name: ``self`` there is an
    # instance of that class or of a class deriving it, so the half path reaches those only
    owned: tuple[tuple[str, Spot], ...] = ()
    # the classes it runs outside every autocast region: a call of a model variable or of a
    # method that runs it (``model(x)``, ``model.generate(...)``; not ``.eval()``, ``.to()``)
    outside: tuple[str, ...] = ()
    # its top-level functions every ``return`` of which returns a tensor (no model: a cast of
    # their value is no half path of a model; :mod:`mpcheck.project.returns`)
    tensors: tuple[str, ...] = ()
    # (library, spot): its takes of a wrapper handing a model of unknown class (a parameter,
    # a call it cannot follow): a wrapper of that library that may cast opens the world (the
    # text: the top-level function holding it, "" elsewhere)
    takes: tuple[tuple[str, Spot], ...] = ()
    # those of ``loose`` that write bfloat16 down (``getattr(m, name)().bfloat16()``): a half
    # path of unknown target that brings no float16 (:meth:`ModelUses.bfloat16_only`)
    loose_bfloat16: tuple[Spot, ...] = ()
    # ``Class.method``: methods of its top-level classes it writes only at their ``def``, and
    # a Bloom filter of the names it writes after a dot (:mod:`mpcheck.project.uncalled`)
    methods: tuple[str, ...] = ()
    attributes: int = 0
    # methods it calls only through a part of ``self`` (:mod:`mpcheck.project.part_methods`)
    part_called: tuple[str, ...] = ()
    # an autocast region it may open may lower to float16: one not written to lower to
    # bfloat16, or a trainer's (:func:`may_autocast_float16`)
    autocast_float16: bool = True
    # its constructor flags, the calls it writes of capitalised names and the names it writes
    # otherwise (:mod:`mpcheck.project.flags`)
    flags: FlagsPass = EMPTY_FLAGS
    # the classes of ``calls`` it runs inside an autocast region written for the CPU
    # (``torch.autocast("cpu")``, ``torch.cpu.amp.autocast``): the CPU's lists apply there,
    # whose float32 list holds neither ``pow`` nor ``sum`` nor ``softmax`` (CUDA's does)
    on_cpu: tuple[str, ...] = ()
    # the classes it runs as a part of the class whose body runs them (``self.vae.decode(x)``)
    # outside every autocast region written in that body: where that class runs decides
    part_outside: tuple[str, ...] = ()
    # wrapper takes of a parameter of a top-level function whose every call in this file hands
    # it a model of a named class (those classes are among ``wrapped``): (library, the
    # function, spot of the take). A call from another file hands what this file cannot name.
    param_takes: tuple[tuple[str, str, Spot], ...] = ()

    def to_plain(self) -> list[Any]:
        """The record as JSON-able lists (:meth:`from_plain` reads them back)."""
        classes = [
            [c.name, c.line, c.bases, c.builds, c.named, c.computes_dtype, c.parts]
            for c in self.classes
        ]
        return [
            FORMAT,
            self.module,
            classes,
            self.aliases,
            self.stars,
            self.casts,
            self.calls,
            self.builds,
            self.half,
            self.unsafe,
            self.default_dtype,
            f"{self.words:x}",
            self.wrappers,
            self.wrapped,
            self.deepspeed,
            [*self.construction[:2], f"{self.construction[2]:x}"],
            self.callers,
            self.main,
            self.held,
            self.reach,
            self.callables,
            self.autocasts,
            self.factories,
            self.keepers,
            self.inputs,
            self.wrapping,
            self.registries,
            self.casters,
            self.loose,
            self.owned,
            self.outside,
            self.tensors,
            self.takes,
            self.loose_bfloat16,
            self.methods,
            f"{self.attributes:x}",
            self.part_called,
            self.autocast_float16,
            [*self.flags[:2], f"{self.flags[2]:x}"],
            self.on_cpu,
            self.part_outside,
            self.param_takes,
        ]

    @classmethod
    def from_plain(cls, data: Any) -> ModelRecord | None:
        """The record :meth:`to_plain` gave, or None for anything else (another format)."""
        try:
            fmt, module, classes, aliases, stars, casts, calls, builds, half, *more = data
            unsafe, dflt, words, wrappers, wrapped, deepspeed, made_pass, by, *rest = more
            main, held, ran, handed, autocasts, factories, keepers, inputs, *last = rest
            wrapping, registries, casters, loose, owned, outside, tensors, takes, *tail = last
            bf16, methods, attributes, part_called, float16, flags, on_cpu, *end = tail
            part_out, param_takes = end
            unset, made_calls, mentions = flags
            made, helpers, runs = made_pass
            if fmt != FORMAT:
                return None
            return cls(
                str(module),
                tuple(
                    ClassRecord(
                        str(n),
                        int(ln),
                        tuple(map(str, b)),
                        tuple(map(str, m)),
                        bool(k),
                        bool(d),
                        tuple((str(a), tuple(map(str, c))) for a, c in p),
                    )
                    for n, ln, b, m, k, d, p in classes
                ),
                tuple((str(a), str(b)) for a, b in aliases),
                tuple(map(str, stars)),
                tuple((str(c), _spot(s), str(w), str(d)) for c, s, w, d in casts),
                tuple((str(c), None if s is None else _spot(s)) for c, s in calls),
                tuple((str(c), _spot(s), bool(k)) for c, s, k in builds),
                bool(half),
                tuple(map(str, unsafe)),
                bool(dflt),
                int(words, 16),
                tuple((str(w), _spot(s), str(e)) for w, s, e in wrappers),
                tuple((str(c), _spot(s), str(lib)) for c, s, lib in wrapped),
                bool(deepspeed),
                (
                    tuple((str(n), str(c)) for n, c in made),
                    tuple((str(n), str(c)) for n, c in helpers),
                    int(runs, 16),
                ),
                (
                    tuple(map(str, by[0])),
                    tuple((str(n), str(c)) for n, c in by[1]),
                    tuple((str(n), str(c)) for n, c in by[2]),
                    tuple(
                        (str(n), tuple(map(str, a)), (int(w[0]), int(w[1]))) for n, a, w in by[3]
                    ),
                ),
                int(main),
                tuple((str(c), str(h)) for c, h in held),
                (
                    bool(ran[0]),
                    int(ran[1]),
                    tuple(map(str, ran[2])),
                    tuple(map(str, ran[3])),
                    tuple(map(str, ran[4])),
                ),
                (
                    tuple(
                        (str(c), str(s), tuple(map(str, b)), int(ln), bool(k), tuple(map(str, w)))
                        for c, s, b, ln, k, w in handed[0]
                    ),
                    tuple((str(n), int(ln), int(col), str(t)) for n, ln, col, t in handed[1]),
                    tuple((str(m), str(a)) for m, a in handed[2]),
                ),
                bool(autocasts),
                tuple((str(f), int(i), str(c)) for f, i, c in factories),
                tuple(map(str, keepers)),
                tuple(_spot(s) for s in inputs),
                tuple((str(f), _spot(s)) for f, s in wrapping),
                tuple((str(r), tuple(map(str, m))) for r, m in registries),
                tuple(map(str, casters)),
                tuple(_spot(s) for s in loose),
                tuple((str(c), _spot(s)) for c, s in owned),
                tuple(map(str, outside)),
                tuple(map(str, tensors)),
                tuple((str(lib), _spot(s)) for lib, s in takes),
                tuple(_spot(s) for s in bf16),
                tuple(map(str, methods)),
                int(attributes, 16),
                tuple(map(str, part_called)),
                bool(float16),
                (
                    tuple((str(c), str(p), int(i)) for c, p, i in unset),
                    tuple((str(n), int(k), tuple(map(str, w))) for n, k, w in made_calls),
                    int(mentions, 16),
                ),
                tuple(map(str, on_cpu)),
                tuple(map(str, part_out)),
                tuple((str(lib), str(f), _spot(s)) for lib, f, s in param_takes),
            )
        except (ValueError, KeyError, TypeError, IndexError):
            return None


def _spot(value: list[Any]) -> Spot:
    return int(value[0]), int(value[1]), str(value[2])


def module_of(path: str) -> str:
    """``pkg/models.py`` -> ``pkg.models``; ``pkg/__init__.py`` -> ``pkg``."""
    parts = path.replace("\\", "/").removesuffix(".py").split("/")
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(p for p in parts if p and p != ".")


def record_of(data: bytes, path: str) -> ModelRecord:
    """The record of the file at ``path`` (relative to the project's root) holding ``data``."""
    return _Reader(data, path).read()


# Strings and comments, which :func:`blank` empties (a cheap lexer: CPython's parser costs
# about 11 s over transformers, this a tenth of it).
# (Each body is a run of plain characters between the escapes and quotes it may hold: one
# alternation per escape, not per character, at half the cost.)
_LEX = re.compile(
    rb"#[^\n]*"
    rb'|"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*(?:"""|\Z)'
    rb"|'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*(?:'''|\Z)"
    rb'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"'
    rb"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'",
    re.DOTALL,
)


def blank(data: bytes) -> bytes:
    """``data`` with every comment and string literal's text replaced by spaces (newlines
    and offsets kept): what remains is code."""
    return _LEX.sub(_blanked, data)


def _blanked(match: re.Match[bytes]) -> bytes:
    return match.group().translate(SPACES)  # (one C call: a regex per match cost twice it)


_CLASS = re.compile(rb"^([ \t]*)class[ \t]+(\w+)[ \t]*(?:\(([^)]*)\))?", re.MULTILINE)
# A line at column 0: a class body ends. (Led by the newline before it: a pattern led by ``^``
# is tried at every offset; a header's end never follows a newline, so none is missed.)
_TOP = re.compile(rb"\n[^\s#)\]}]")
# (classes are CapWords; the look-behind after the first letter skips a capital inside a
# longer name, which :meth:`_Reader.calls` drops, without a look-behind tried at every offset)
_CALLED = re.compile(rb"[A-Z](?<!\w[A-Z])\w*\s*(?:\.from_\w+)?\(")
_IDENT = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
_DOTTED = re.compile(rb"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*")
_ASSIGNED = re.compile(rb"[ \t]*([A-Za-z_][\w.]*)[ \t]*(?::[^=\n]*)?=[ \t]*$")  # (PEP 526 too)
# a compound statement's header with its body on the same line (``else: model = Net()``)
_ONE_LINE_HEAD = re.compile(rb"[ \t]*(?:if|elif|else|while|for|with|try|finally|except)\b")
_IMPORT_WORD = re.compile(rb"import[ \t(\\]")
_FROM = re.compile(
    rb"^[ \t]*from[ \t]+(\.*)[ \t]*([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n\\]*(?:\\\n[^\n\\]*)*)",
    re.MULTILINE,
)
_IMPORT = re.compile(rb"^[ \t]*import[ \t]+([^\n\\;]*(?:\\\n[^\n\\;]*)*)", re.MULTILINE)
# (a file that may cast: ``torch.half`` is ``torch.float16``, ``.to(torch.half)`` a cast)
_CASTS = re.compile(rb"\.half\b|float16|bfloat16|dtype")
_CALLEE = re.compile(rb"([A-Za-z_][\w.]*)[ \t]*\(")
_NAME_ONLY = re.compile(rb"[A-Za-z_]\w*")
# ``cls(...)``, ``torch.nn.utils.skip_init(cls, ...)``: a classmethod building its class
_SELF_METHODS = b"|".join(m.encode() for m in sorted(T.MODULE_RETURNS_SELF))
# (``cls.from_config(...)``: an alternative constructor, a library base's too, returns a ``cls``)
_CLS_BUILT = re.compile(
    rb"(?:cls(?:\s*\.\s*from_\w+)?|(?:[\w.]*\.)?skip_init\s*\(\s*cls\b)\s*[(,)]"
)
_CAST_AT = re.compile(rb"\.(half|bfloat16)\(\s*\)|\.to\(")
_DTYPE_KW = re.compile(rb"\b((?:torch_)?dtype)\s*=\s*([\w.]+)")
_HALFISH_BYTES = re.compile(rb"float16|bfloat16|\bhalf\b|fp16|bf16|dtype$")
_WITH_AUTOCAST = re.compile(rb"^[ \t]*(?:with\b|@)[^\n]*autocast\(")
# A context bound to an autocast region once and entered by name (nanoGPT's ``ctx =
# nullcontext() if device_type == "cpu" else torch.amp.autocast(...)``, then ``with ctx:``):
# the calls inside run under that autocast, or in float32 where it is the null context.
_CONTEXT_BOUND = re.compile(rb"[ \t]*((?:self\.)?[A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)[ \t]*")
# (``functools.partial(torch.autocast, ...)``: a call of the name it is bound to opens one)
_AUTOCAST_CALL = re.compile(rb"\bautocast\s*\(|\bpartial\s*\(\s*(?:[\w.]*\.)?autocast\s*,")
# A region written for the CPU: ``torch.autocast("cpu", ...)``, ``device_type="cpu"``,
# ``torch.cpu.amp.autocast(...)``. (A device the code does not write is CUDA's: CPU autocast
# lowers to float16 only when a region written for it asks, and trainers autocast on CUDA.)
_CPU_REGION = re.compile(
    rb"""\bcpu\.amp\.autocast\b|autocast\(\s*(?:device_type\s*=\s*)?["']cpu["']"""
)
_WITH_NAME = re.compile(rb"[ \t]*with[ \t]+((?:self\.)?[A-Za-z_]\w*)[ \t]*(?:\([ \t]*\))?[ \t]*:")


class _Reader:
    """One pass over the file's code (see :func:`record_of`)."""

    def __init__(self, data: bytes, path: str) -> None:
        self.data = data
        self.path = path
        self.module = module_of(path)
        package = path.replace("\\", "/").endswith("__init__.py")
        self.package = self.module if package else self.module.rpartition(".")[0]
        self.code = blank(data)
        self._found = headers(self.code)  # every ``def`` and ``class`` header, read once
        self.imports: dict[str, str] = {}
        self.stars: list[str] = []
        self.plain: list[str] = []  # ``import a.b.c`` (its name binds only ``a``)
        self.local: set[str] = set()
        self._last = (0, 1)  # the last offset :meth:`spot` placed, and its line
        self._calls: list[tuple[int, int, str]] | None = None
        self._half_names: frozenset[bytes] | None = None  # (see :meth:`_holds_half`)
        self._casting: dict[str, bool] | None = None  # (see :meth:`_keeping_callee`)
        self._spans_found: list[tuple[re.Match[bytes], bool]] | None = None  # (:meth:`_spans`)
        self._objects: dict[str, set[str]] = {}  # variable -> classes (:meth:`_keeping_callee`)
        self._top_names: list[str] = []  # the names of the top-level classes, in order
        self._defs: dict[str, int] | None = None  # (see :meth:`_top_defs`)
        self._headers: list[re.Match[bytes]] | None = None  # (see :meth:`_def_headers`)
        self._bodies: list[tuple[int, int, int, str]] | None = None  # (:meth:`_factory_at`)
        self._policy_list: list[tuple[int, int, str, bool, bool]] | None = (
            None  # (:meth:`_policies`)
        )
        self._registry_map: dict[str, tuple[str, ...]] | None = None  # (:meth:`_registries`)
        self._registered_map: dict[str, tuple[str, ...]] | None = None  # (:meth:`_registered`)
        self._loose: list[Spot] = []  # (:meth:`_casts`: casts of a model of unknown class)
        self._cpu: set[int] = set()  # (:meth:`_regions`: rows of regions written for the CPU)
        self._loose_bfloat16: list[Spot] = []  # (those of them writing bfloat16 down)
        # (library, function, offset) of each take resolved by the function's calls here
        self._param_takes: list[tuple[str, str, int]] = []
        self._owned: list[tuple[str, Spot]] = []  # (:meth:`_casts`: casts of ``self``)
        self._dtypes: DtypeNames | None = None  # (:meth:`_dtype_names`)
        # (variable, function span) -> the classes the function binds it to
        self._scopes: dict[tuple[bytes, tuple[int, int]], frozenset[str] | None] = {}
        self._functions: dict[  # function span -> its assignments by name, its other names
            tuple[int, int], tuple[dict[bytes, list[re.Match[bytes]]], frozenset[bytes] | None]
        ] = {}
        self._class_matches: list[re.Match[bytes]] = []  # every class header, read once
        self._class_spans: list[tuple[int, int, int, str]] | None = None  # (:meth:`_owner`)
        self._unknown_modules: dict[bytes, bool] = {}  # (:meth:`_module_of_unknown_class`)
        # (variable, function span) -> the classes a class variable may hold (:meth:`_chosen`)
        self._choices: dict[tuple[bytes, tuple[int, int]], frozenset[str] | None] = {}
        self._chose: list[tuple[int, str, frozenset[str]]] = []  # (at, target, classes)
        self._direct: list[tuple[int, int, str]] = []  # ``return Model(...)``: (at, index, class)
        # name -> (offset, target) of each ``from ... import`` binding it: a function may
        # import ``Decoder`` from one module and another function from another
        self.rebound: dict[str, list[tuple[int, str]]] = {}

    # -- positions -------------------------------------------------------------------------
    def spot(self, at: int, text: str = "") -> Spot:
        """(line, column, text) of the offset ``at`` (offsets asked in any order)."""
        last, line = self._last
        if at < last:
            last, line = 0, 1
        line += self.data.count(b"\n", last, at)
        self._last = (at, line)
        return line, at - self.data.rfind(b"\n", 0, at), text

    # -- names -----------------------------------------------------------------------------
    def _absolute(self, module: str, level: int) -> str:
        if level == 0:
            return module
        base = self.package.split(".") if self.package else []
        base = base[: max(0, len(base) - (level - 1))]
        return ".".join([*base, *([module] if module else [])])

    def _read_imports(self) -> None:
        code = self.code
        seen = -1
        for word in _IMPORT_WORD.finditer(code):
            line = code.rfind(b"\n", 0, word.start()) + 1
            if line == seen:
                continue
            seen = line
            found = _FROM.match(code, line)
            if found is not None:
                self._from(found, line)
                continue
            plain = _IMPORT.match(code, line)
            if plain is not None:
                self._import(plain)

    def _from(self, match: re.Match[bytes], at: int = 0) -> None:
        source = self._absolute(match.group(2).decode(), len(match.group(1)))
        names = match.group(3).decode(errors="replace")
        for item in names.strip("()").replace("\\\n", " ").split(","):
            parts = item.split()
            if not parts:
                continue
            if parts[0] == "*":
                self.stars.append(source)
                continue
            local = parts[2] if len(parts) == 3 and parts[1] == "as" else parts[0]
            target = f"{source}.{parts[0]}" if source else parts[0]
            self.rebound.setdefault(local, []).append((at, target))
            self.imports[local] = target

    def _import(self, match: re.Match[bytes]) -> None:
        for item in match.group(1).decode(errors="replace").replace("\\\n", " ").split(","):
            parts = item.split()
            if not parts:
                continue
            if len(parts) == 3 and parts[1] == "as":
                self.imports[parts[2]] = parts[0]
            else:
                head = parts[0].split(".", 1)[0]
                self.imports.setdefault(head, head)
                self.plain.append(parts[0])

    def resolve(self, text: str) -> str | None:
        """The qualified name ``text`` (``Model``, ``m.Model``) stands for in this file; None
        for a name it neither defines nor imports (a builtin, a local variable)."""
        head, _, rest = text.partition(".")
        if head in self.local:
            found = f"{self.module}.{head}" if self.module else head
        elif head in self.imports:
            found = self.imports[head]
        elif self.stars and not rest:
            found = f"{self.module}.{head}" if self.module else head  # through the stars
        else:
            return None
        return f"{found}.{rest}" if rest else found

    def _class_named(self, text: str, at: int | None = None) -> str | None:
        """The qualified class a call's callee text names (``Model``, ``m.Model``,
        ``Model.from_pretrained``): CapWords, resolved through the imports (at ``at``: the
        last import of the name before it, when the file imports it more than once)."""
        text = text.split(".from_", 1)[0]
        if not text.rpartition(".")[2][:1].isupper():
            return None
        bindings = self.rebound.get(text, ())
        if at is not None and len(bindings) > 1 and text not in self.local:
            before = [target for offset, target in bindings if offset <= at]
            return before[-1] if before else bindings[0][1]
        return self.resolve(text)

    def calls(self) -> list[tuple[int, int, str]]:
        """Every call of a CapWords name in the code: (start, end of ``(``, dotted callee)."""
        if self._calls is None:
            code, out = self.code, []
            for call in _CALLED.finditer(code):
                at = call.start()
                if at > 0 and code[at - 1] in _IDENT:
                    continue  # (inside a longer name)
                name = code[at : call.end()].split(b"(", 1)[0].split(b".from_", 1)[0].strip()
                if at > 0 and code[at - 1] == 0x2E:  # ``m.Model(``: the dotted prefix
                    window = code[max(0, at - 200) : at]
                    head = window[len(window.rstrip(_IDENT + b".")) :]
                    if not _DOTTED.fullmatch(head + name):
                        continue
                    at, name = at - len(head), head + name
                out.append((at, call.end(), name.decode()))
            self._calls = out
        return self._calls

    # -- the pass --------------------------------------------------------------------------
    def read(self) -> ModelRecord:
        data, code = self.data, self.code
        self._read_imports()
        aliased = self._wrapper_aliases()
        wrappers = self._wrappers(aliased) if aliased or _names_wrapper(code) else []
        masked = bytearray(code)
        for _, start, end, effect in wrappers:
            if effect.removesuffix(_INPUTS) in (wrap.AUTOCAST, wrap.FULL):
                masked[start:end] = b" " * (end - start)
        if b"MixedPrecision" in code:  # a policy computing in float32 makes nothing half
            for start, end, kind, _, _ in self._policies():
                if kind == wrap.FULL:
                    masked[start:end] = b" " * (end - start)
        half = _has_any(masked, _HALF_LITERALS) and HALF_WORDS.search(masked) is not None
        found = narrowed(_CLASS, self._found, code)
        self._class_matches = found  # (:meth:`_owner` spans them only when ``self`` is cast)
        self.local = {m.group(2).decode() for m in found if not m.group(1)}
        classes, bodies = self._classes(found)
        tops = [m for m in found if not m.group(1)]
        self._top_names = [m.group(2).decode() for m in tops]
        plain = [b for m, b in zip(tops, bodies, strict=True) if _plain(m.group(3))]
        models = self._bound()
        made = self._made(models, bodies)
        self._copies(models)
        self._objects = models
        casts = self._casts(models) if _CASTS.search(code) else []
        defaults = self._defaults(casts) if DEFAULT_SET.search(code) else False
        held = self._held(plain)
        found_uses = _escapes(
            code, models, self._taker, held, self._keeping_callee, self._classes_in_scope
        )
        unsafe, keys, taken, parts, returned = found_uses
        autocast = b"autocast" in code
        owners = [b for m, b in zip(tops, bodies, strict=True) if not _plain(m.group(3))]
        runs = self._regions(models, autocast, owners) if models else []
        calls = [(cls, region) for cls, region, method, _ in runs if autocast and not method]
        on_cpu = {cls for cls, region in calls if region is not None and region[0] in self._cpu}
        factories = self._factories(returned, keys, unsafe)
        builds = self._builds(bodies, keys, plain, unsafe)
        factories.update(self._returned_builds())
        factories.update(self._annotated())
        for name, at, target in made:
            text = f"{callee(name).rpartition('.')[2]}(...)"
            builds.append((name, self.spot(at, text), target in keys))
        builds.extend(self._chosen_builds(bodies, plain, keys, unsafe))
        main = _MAIN.search(code) if b"__name__" in code else None
        wrapping: dict[str, Spot] = {}
        for (name, spot), start, _, effect in wrappers:
            if name in wrap.FSDP_WRAPPERS and effect.removesuffix(_INPUTS) != wrap.FULL:
                function = self._factory_at(start)
                if function is not None:
                    wrapping.setdefault(function, spot)
        named, takes = self._takes(models) if wrappers or self._takers() else ([], [])
        wrapped = [
            (cls, self.spot(at), lib)
            for key, at, lib in taken
            for cls in sorted(self._models_at(key, at, models))
        ]
        wrapped.extend((name, self.spot(at), lib) for name, at, lib in named)
        aliases = tuple(
            (f"{self.module}.{name}" if self.module else name, target)
            for name, target in sorted(self.imports.items())
            if name != target
        )
        del data
        keepers, casters = self._keepers(bodies)
        return ModelRecord(
            self.module,
            tuple(classes),
            aliases,
            tuple(self.stars),
            tuple(casts),
            tuple(calls),
            tuple(builds),
            half,
            tuple(sorted(unsafe)),
            defaults,
            words_of(self.data),
            tuple(
                (name, spot, effect.removesuffix(_INPUTS))
                for (name, spot), _, _, effect in wrappers
            ),
            tuple(dict.fromkeys(wrapped)),
            self._accelerate_deepspeed(code),
            construction_of(code, self.module, self._found),
            callers_of(code, self.module, self.imports, bool(self.stars), self._found, self.data),
            self.spot(main.start())[0] if main else 0,
            tuple(sorted(parts)),
            reach_of(self.data, code, self.imports, self.plain, self._found),
            callables_of(self.data, code),
            may_autocast(code, self.imports.values()),
            tuple(sorted(factories)),
            tuple(k for k in keepers if k not in wrapping),
            tuple(spot for (_, spot), _, _, effect in wrappers if effect.endswith(_INPUTS)),
            tuple(sorted(wrapping.items())),
            tuple(
                sorted(_joined(self._registries(), self._registered(), self._forwarders()).items())
            ),
            casters,
            tuple(self._loose),
            tuple(self._owned),
            tuple(sorted({cls for cls, region, _, part in runs if region is None and not part})),
            tensor_returns(code, self._def_headers(), self.module, self.imports, _NOT_PROJECT),
            tuple(dict.fromkeys((lib, self.spot(at, self._home(at))) for lib, at in takes)),
            tuple(self._loose_bfloat16),
            methods_of(self.data, code, self._found),
            attributes_of(code),
            tuple(sorted(part_called_names(self.data))),
            may_autocast_float16(self.data, code, self.imports.values()),
            flags_of(code),
            tuple(sorted(on_cpu)),
            tuple(sorted({cls for cls, region, _, part in runs if region is None and part})),
            tuple((lib, function, self.spot(at)) for lib, function, at in self._param_takes),
        )

    def _wrapper_aliases(self) -> re.Pattern[bytes] | None:
        """The names this file binds a wrapper to under another name (``from
        torch.distributed.fsdp import FullyShardedDataParallel as FSDP``), as a pattern of
        their calls; None when it binds none."""
        names = [
            name.encode()
            for name, target in self.imports.items()
            if target in wrap.WRAPPERS and name != target.rpartition(".")[2] and "." not in name
        ]
        if not names:
            return None
        return re.compile(rb"(?<![\w.])(" + b"|".join(map(re.escape, names)) + rb")\s*\(")

    def _wrappers(
        self, aliased: re.Pattern[bytes] | None = None
    ) -> list[tuple[tuple[str, Spot], int, int, str]]:
        """Each mixed-precision wrapper this file builds or calls (a line of
        :data:`mpcheck.knowledge.wrappers.WRAPPERS`): (its text and spot), the span of its
        call, and its effect, read from its arguments as written (an FSDP wrapper's whose
        policy casts the forward's inputs ends with ``_INPUTS``)."""
        code, data, out = self.code, self.data, []
        matches = list(_WRAPPER_NAMES.finditer(code))
        if aliased is not None:
            matches = sorted([*matches, *aliased.finditer(code)], key=lambda m: m.start())
        for match in matches:
            window = code[max(0, match.start() - 200) : match.start()]
            head = window[len(window.rstrip(_IDENT + b".")) :]
            start = match.start() - len(head)
            name = self.resolve((head + match.group(1)).decode())
            settings = wrap.WRAPPERS.get(name or "")
            if settings is None:
                continue
            close = closing(code, match.end()) + 1
            found = _arguments(code, data, match.end(), close - 1)
            effects = []
            for setting in settings:
                value = found.get(setting.keyword)
                if value is None and setting.position is not None:
                    value = found.get(setting.position)
                if value is None:
                    effects.append(setting.absent)
                    continue
                literal = value.strip("'\"") if value[:1] in "'\"" or value.isdigit() else value
                if literal in setting.values or not setting.values:
                    effects.append(setting.values.get(literal, setting.other))
                    continue
                effects.append(self._setting_from(value, setting))
            keywords = {s.keyword for s in settings}
            for key in found:
                if isinstance(key, str) and key not in keywords and HALF_WORDS.search(key.encode()):
                    effects.append(wrap.UNKNOWN)  # (``deepspeed_plugin=``: not in the table)
            if name == "deepspeed.initialize":
                effects = [_deepspeed_effect(code, data)]
            suffix = ""
            if name in wrap.FSDP_WRAPPERS:
                given = found.get(settings[0].keyword)
                starred = b"**" in code[match.end() : close]
                kind, inputs, buffers = self._fsdp_policy(given, starred, match.end(), close)
                effects, suffix = [kind], _INPUTS if inputs else ""
                if kind == wrap.CAST and buffers:
                    suffix = wrap.BUFFERS + suffix
            text = " ".join(data[start:close].decode(errors="replace").split())
            text = text.replace("( ", "(").replace(", )", ")").replace(",)", ")")
            if len(text) > 60:
                text = f"{text[:56]}...)"
            effect = wrap.effect(effects) + suffix
            out.append(((str(name), self.spot(start, f"`{text}`")), start, close, effect))
        return out

    def _setting_from(self, value: str, setting: wrap.Setting) -> str:
        """A setting given as a value read elsewhere (``args.precision``, ``cfg["train"]
        ["precision"]``): the effect of every value its option can take when this file's
        ``add_argument("--precision", default=..., choices=...)`` says (its choices, else
        its default), else deferred to the project's configuration files under that key
        (``unknown:precision``: :func:`mpcheck.project.models.uses_of_records` reads them)."""
        key = _SETTING_KEY.search(value.encode())
        if key is None:
            return setting.other
        name = key.group(1)
        spelled = re.escape(name).replace(b"_", b"[-_]")
        option = re.search(rb"add_argument\(\s*['\"]--%s['\"]" % spelled, self.data)
        if option is not None:
            end = closing(self.code, option.end())
            found = _arguments(self.code, self.data, option.end(), end)
            choices = found.get("choices", "")
            written = _LITERALS.findall(choices) if choices[:1] in "[(" else []
            if not written and "default" in found:
                written = [found["default"]]
            values = [w.strip("'\"") for w in written]
            if values and all(v in setting.values for v in values):
                return wrap.effect([setting.values[v] for v in values])
            return setting.other
        if setting.other != wrap.UNKNOWN:
            return setting.other
        return f"{wrap.UNKNOWN}{wrap.KEYED}{setting.keyword}{wrap.KEYED}{name.decode()}"

    def _fsdp_policy(
        self, given: str | None, starred: bool, start: int, end: int
    ) -> tuple[str, bool, bool]:
        """An FSDP wrapper's effect and whether its policy casts the forward's floating
        inputs, and the buffers: the policy built in its call, or else those its file builds
        (a ``policy`` variable, ``**fsdp_config``); no policy keeps the model float32
        (unknown when the call takes keywords from elsewhere and its file builds none)."""
        if given is None and not starred:
            return wrap.FULL, False, False
        policies = self._policies()
        own = [p for p in policies if start <= p[0] < end]
        chosen = own or policies
        if not chosen:
            if given in ("None",):
                return wrap.FULL, False, False
            return wrap.UNKNOWN, True, True
        kinds = [kind for _, _, kind, _, _ in chosen]
        inputs = any(k != wrap.FULL and casts for _, _, k, casts, _ in chosen)
        return wrap.effect(kinds), inputs, any(buffers for *_, buffers in chosen)

    def _policies(self) -> list[tuple[int, int, str, bool, bool]]:
        """Each FSDP mixed-precision policy this file builds (``MixedPrecisionPolicy(...)``):
        (its span, its effect, whether it casts inputs, whether it casts buffers). The effect
        is ``param_dtype``'s as written; FSDP1's ``buffer_dtype`` in half casts the buffers
        (unknown at least when the parameters stay float32)."""
        if self._policy_list is not None:
            return self._policy_list
        code, data, out = self.code, self.data, []
        for match in _POLICY_CALL.finditer(code):
            window = code[max(0, match.start() - 200) : match.start()]
            head = window[len(window.rstrip(_IDENT + b".")) :]
            name = self.resolve((head + match.group(1)).decode()) or ""
            policy = wrap.FSDP_POLICIES.get(name)
            if policy is None:
                continue
            close = closing(code, match.end())
            found = _arguments(code, data, match.end(), close)
            kind = wrap.policy_effect(found.get("param_dtype", found.get(0)))
            buffers = policy.buffers and wrap.policy_effect(found.get("buffer_dtype")) != wrap.FULL
            if kind == wrap.FULL and buffers:
                kind = wrap.UNKNOWN
            casts = any(found.get(key, str(default)) != "False" for key, default in policy.inputs)
            out.append((match.start() - len(head), close + 1, kind, casts, buffers))
        self._policy_list = out
        return out

    def _accelerate_deepspeed(self, code: bytes) -> bool:
        """A file using accelerate that names DeepSpeed (``DeepSpeedPlugin``,
        ``DistributedType.DEEPSPEED``): its ``prepare`` may hand the model to DeepSpeed,
        which casts it. accelerate's placing utilities (``dispatch_model``, hooks) build no
        Accelerator: a file importing only those hands nothing to DeepSpeed."""
        uses = any(
            wrap.library_of(t) == "accelerate" and not wrap.placing(t)
            for t in self.imports.values()
        )
        return uses and _DEEPSPEED_WORD.search(code) is not None

    def _taker(self, callee: bytes) -> str | None:
        """The library whose wrapper ``callee`` hands a model to (``accelerator.prepare``,
        ``trainer.fit``, ``Trainer``, ``deepspeed.initialize``), or None."""
        text = callee.decode(errors="replace")
        name = self.resolve(text)
        if name is not None and name in wrap.TAKING_CALLS:
            return wrap.TAKING_CALLS[name]
        if "." not in text:
            return None
        method = text.rpartition(".")[2]
        roots = {wrap.library_of(target) for target in self.imports.values()}
        for lib, methods in wrap.TAKING_METHODS.items():
            if method in methods and wrap.library_of(lib) in roots:
                return wrap.library_of(lib)
        return None

    def _takes(
        self, models: dict[str, set[str]]
    ) -> tuple[list[tuple[str, int, str]], list[tuple[str, int]]]:
        """Each model a wrapper's take is handed (:data:`~mpcheck.knowledge.wrappers.HANDING`
        says which arguments): (class or factory product, offset, library) when its class is
        named here (a variable bound to one, a build in the call: ``FSDP(Net())``), and
        (library, offset) of each take handing a model of unknown class (a parameter, a value
        made by a call the file cannot follow, ``*models``). A wrapper casts only what it is
        handed: the project's world stays closed to it when every take names its models. A
        take by a method of a value named for a library's wrapper object in a file that does
        not import the library (``accelerator.prepare(model)``, the accelerator handed in) is
        unknown: its library is only guessed."""
        code = self.code
        aliases = [
            name.encode()
            for name, target in self.imports.items()
            if target in wrap.HANDING and "." not in name and name.encode() not in _TAKE_WORDS
        ]
        if not aliases and not _has_any(code, _TAKE_WORDS):
            return [], []
        pattern = _TAKE_CALL if not aliases else _take_call((*_TAKE_WORDS, *aliases))
        named: list[tuple[str, int, str]] = []
        unknown: list[tuple[str, int]] = []
        for match in pattern.finditer(code):
            window = code[max(0, match.start() - 200) : match.start()]
            head = window[len(window.rstrip(_IDENT + b".")) :]
            at = match.start() - len(head)
            callee = head + match.group(1)
            lib = self._taker(callee)
            if lib is None:
                guessed = _guessed_taker(callee)
                if guessed is not None:
                    unknown.append((guessed, at))
                continue
            qualified = self.resolve(callee.decode()) or ""
            method = match.group(1).decode()
            key = qualified if qualified in wrap.TAKING_CALLS else f"{lib}.{method}"
            keywords, position = wrap.HANDING.get(key, ((), -1))
            if not keywords and position == -1:
                continue
            for index, keyword, begin, end in _handed_arguments(
                code, match.end(), closing(code, match.end())
            ):
                if keyword is None and index == -1:  # (``*args``, ``**kwargs``: unknown)
                    unknown.append((lib, begin))
                    continue
                if keyword is not None and keyword not in keywords:
                    continue
                if keyword is None and position is not None and index != position:
                    continue
                through = self._through_parameter(code[begin:end], begin, models)
                if through is None:
                    found = self._handed(code[begin:end], begin, models)
                else:  # (a parameter: what the function's callers hand, or unknown)
                    function, found = through
                    if found is not None:
                        self._param_takes.append((lib, function, begin))
                if found is None:
                    unknown.append((lib, begin))
                named.extend((name, begin, lib) for name in found or ())
        return named, unknown

    def _through_parameter(
        self, text: bytes, at: int, models: dict[str, set[str]]
    ) -> tuple[str, list[str] | None] | None:
        """A wrapper's take of a parameter of the top-level function holding it (``def
        setup_fsdp(model, args): return FSDP(model, ...)``): the function and the classes
        every call of it in this file hands that parameter (``setup_fsdp(model, args)`` with
        ``model = GPT(...)``), by position or keyword; the function and None when nothing
        here calls it or a call hands a model this file cannot name. None when ``text`` is
        no such parameter (a parameter holds what callers hand, never the file's other
        bindings of its name)."""
        if not _NAME_ONLY.fullmatch(text):
            return None
        function, held = self._factory_at(at), self._def_holding(at)
        if function is None or held is None:
            return None
        opened = self.code.find(b"(", held[0] - 1)
        if opened < 0:
            return None
        names = [
            re.split(rb"[:=]", self.code[b:e].strip(), maxsplit=1)[0].strip()
            for b, e in parts(self.code, opened + 1, closing(self.code, opened + 1))
        ]
        names = [n for n in names if n != b"/"]  # (positional-only: still positions)
        if text not in names:
            return None
        if any(n.startswith(b"*") for n in names[: names.index(text)]):
            return function, None
        index, leaf = names.index(text), function.rpartition(".")[2].encode()
        own = f"{function}{CALLED}"  # (what it returns is not what it is handed)
        classes: set[str] = set()
        calls = 0
        written = re.compile(rb"(?<![\w.])" + re.escape(leaf) + rb"\b(\s*\()?")
        if any(m.group(1) is None for m in written.finditer(self.code)):
            return function, None  # (handed on by name: ``map(f, ...)``, ``g = f``)
        for call in re.finditer(rb"(?<![\w.])" + re.escape(leaf) + rb"\s*\(", self.code):
            if self.code[max(0, call.start() - 4) : call.start()] == b"def ":
                continue
            end = closing(self.code, call.end())
            handed = [
                (b, e)
                for i, k, b, e in _handed_arguments(self.code, call.end(), end)
                if (k is None and i == index) or k == text.decode()
            ]
            if len(handed) != 1:
                return function, None
            found = self._handed(self.code[handed[0][0] : handed[0][1]], handed[0][0], models)
            # (its own product, or a wrapper a binding of the name in it holds, is not
            # what a call hands it; when nothing else is named, the value is unknown)
            kept = [c for c in found or () if c != own and not c.startswith(_TORCH_PREFIX)]
            if found is None or (found and not kept):
                return function, None
            classes.update(kept)
            calls += 1
        return (function, sorted(classes)) if calls else (function, None)

    def _takers(self) -> bool:
        """Whether the file may take a model into a wrapper: it imports a library that
        takes models, or names a wrapper object (``accelerator``) another file hands it."""
        roots = {wrap.library_of(lib) for lib in (*wrap.TAKING_METHODS, *wrap.TAKING_CALLS)}
        if any(wrap.library_of(t) in roots for t in self.imports.values()):
            return True
        return _WRAPPER_OBJECT_WORDS.search(self.code) is not None

    def _handed(self, text: bytes, at: int, models: dict[str, set[str]]) -> list[str] | None:
        """What the argument ``text`` (at offset ``at``) hands a wrapper: the classes (or
        factory products) it is a model of, [] for no model of the project's to name (an
        optimizer, a data loader, a scheduler, a literal), None for a model of unknown class."""
        if text[:1] in b"'\"0123456789" or text in (b"None", b"True", b"False"):
            return []
        if _NAME.fullmatch(text):
            name = text.decode()
            if name in models:
                return sorted(models[name])
            binds = [m.group(1) for m in _binding(text).finditer(self.code)]
            if binds and all(_not_model(b) for b in binds):
                return []
            return None
        call = _HEAD_CALL.match(text)
        if call is None:
            return None
        close = closing(text, call.end())
        rest = text[close + 1 :].strip()
        if rest and not _KEPT_CHAIN.match(rest):
            return None
        callee = call.group(1).decode()
        cls = self._class_named(callee, at)
        if cls is not None:
            return [cls]
        made = self._built(callee, at + call.end(1))
        if made is not None:
            return [f"{made}{CALLED}"]
        return [] if _not_model(call.group(1)) else None

    def _classes(self, found: list[re.Match[bytes]]) -> tuple[list[ClassRecord], list[range]]:
        code = self.code
        out, bodies = [], []
        for match in found:
            name = match.group(2).decode()
            bases = []
            for base in (match.group(3) or b"").decode(errors="replace").split(","):
                base = " ".join(base.split())
                if base and "=" not in base and "*" not in base:
                    bases.append(self.resolve(base) or base)
            end = _TOP.search(code, match.end())
            stop = end.start() + 1 if end else len(code)
            built = set()
            calls = self.calls()
            i = bisect_right(calls, (match.end(),))
            while i < len(calls) and calls[i][0] < stop:
                cls = self.resolve(calls[i][2])
                if cls is not None:
                    built.add(cls)
                i += 1
            built.update(self._factory_parts(match.end(), stop))
            if not match.group(1):
                bodies.append(range(match.start(), stop))
            qualified = f"{self.module}.{name}" if self.module else name
            line = self.spot(match.start())[0]
            word = name.encode()
            named = self.data.count(word) > self.data.count(word, match.start(), stop)
            named = named or _decorated(code, match.start())
            built_by = tuple(sorted(built))
            computes = _computes_dtype(code[match.end() : stop])
            held = parts_in(code, match.end(), stop, calls, self.resolve, self.data)
            out.append(ClassRecord(qualified, line, tuple(bases), built_by, named, computes, held))
        return out, bodies

    def _factory_parts(self, start: int, stop: int) -> set[str]:
        """The parts a class body binds from a project function's call (``self.audio =
        build_tower(cfg)``), spelled ``pkg.f()#``: an attribute of a module holding a module
        registers it as a submodule, so it takes the owner's casts, whatever function built
        it (the project says which classes the function returns)."""
        out = set()
        for found in _SELF_BOUND_CALL.finditer(self.code, start, stop):
            made = self._function_named(found.group(1).decode())
            if made is not None:
                out.add(f"{made}{CALLED}")
        return out

    def _bound(self) -> dict[str, set[str]]:
        """Variable (``model``, ``self.unet``) -> the project classes built or loaded into it
        (``model = Model(...)``, ``self.unet = UNet.from_pretrained(...)``, ``setattr(self,
        "unet", UNet(...))``)."""
        code = self.code
        out: dict[str, set[str]] = {}
        set_ = {
            at: target.decode() for target, at in literal_setattrs(self.data, code, 0, len(code))
        }
        for at, _, name in self.calls():
            line = code.rfind(b"\n", 0, at) + 1
            assigned = _assignment(code, line, at)
            target = assigned.group(1).decode() if assigned is not None else set_.get(at)
            if target is None:
                continue
            cls = self._class_named(name)
            if cls is not None:
                out.setdefault(target, set()).add(cls)
        names = choosers(code)
        if names:  # ``model = cls(8)`` of a ``cls = A if c else B``
            for call in CHOICE_CALL.finditer(code):
                if call.group(2) not in names:
                    continue
                chosen = self._chosen(call.group(2), call.start(2))
                if chosen:
                    target = call.group(1).decode()
                    out.setdefault(target, set()).update(chosen)
                    self._chose.append((call.start(2), target, chosen))
        if out:
            self._held_on(out)
        return out

    def _held_on(self, out: dict[str, set[str]]) -> None:
        """Add to ``out`` (variable -> classes) the attributes and names bound to a model
        variable, or to a chain of module methods that return the module itself (``self.unet
        = unet.half()``, ``self.model = model.to(device).eval()``): ``nn.Module``'s casts and
        mode switches return ``self``, so the new name holds the same model and its runs are
        that model's runs."""
        names = b"|".join(re.escape(v.encode()) for v in sorted(out, key=len, reverse=True))
        alias = re.compile(
            rb"^[ \t]*([A-Za-z_][\w.]*)[ \t]*=[ \t]*(" + names + rb")"
            rb"((?:\s*\.\s*(?:" + _SELF_METHODS + rb"|half|bfloat16)\s*\([^()\n]*\))*)"
            rb"[ \t]*(?:#[^\n]*)?$",
            re.M,
        )
        for found in alias.finditer(self.code):
            target, source = found.group(1).decode(), found.group(2).decode()
            if target != source and target not in out:
                out[target] = set(out[source])

    def _chosen(self, name: bytes, at: int) -> frozenset[str] | None:
        """The classes the variable ``name``, called at ``at``, may hold: those its plain
        assignments in the function holding ``at`` name (:mod:`mpcheck.project.choices`,
        ``cls = A if c else B``). None when it is a parameter there, is bound otherwise
        too (a loop, a tuple target, ``global``), or a candidate is no class the file names."""
        held = self._def_holding(at)
        if held is None:
            return None
        if (name, held) not in self._choices:  # (once per variable and function)
            self._choices[(name, held)] = self._chosen_in(name, held)
        return self._choices[(name, held)]

    def _chosen_in(self, name: bytes, held: tuple[int, int]) -> frozenset[str] | None:
        """(:meth:`_chosen` in the function whose body spans ``held``.)"""
        code = self.code
        params = params_of(code, held[0])
        if params is None or name in params:
            return None
        unplain = _unplain(code, *held)
        if unplain is None or name in unplain:
            return None
        texts = choices_in(code, held[0], held[1], name)
        out = set()
        for text in texts or ():
            cls = self._class_named(text.decode())
            if cls is None:
                return None
            out.add(cls)
        return frozenset(out) or None

    def _copies(self, models: dict[str, set[str]]) -> None:
        """Bind each deep copy of a model variable (``ema = deepcopy(model)``, ``ema =
        copy.deepcopy(model).to(device)``) to its source's classes: a deep copy is a model of
        the same class, with its source's dtypes, whose own casts and calls count."""
        if b"deepcopy" not in self.code:
            return
        found = [
            (m.group(1).decode(), m.group(3).decode())
            for m in _COPY.finditer(self.code)
            if self.resolve(m.group(2).decode()) == "copy.deepcopy"
        ]
        for _ in range(len(found)):  # (a copy of a copy)
            grown = False
            for target, source in found:
                classes = models.get(source, set())
                if not classes <= models.get(target, set()):
                    models.setdefault(target, set()).update(classes)
                    grown = True
            if not grown:
                break

    def _casts(self, models: dict[str, set[str]]) -> list[tuple[str, Spot, str, str]]:
        """Each project class this file builds or loads in half, or builds and then casts to
        half: ``Model(...).half()``, ``model.to(weight_dtype)`` of a ``model = Model(...)``,
        ``Model.from_pretrained(..., torch_dtype=torch.float16)``; with the one half dtype
        the cast writes down (:mod:`mpcheck.project.dtype_names`)."""
        data, code = self.data, self.code
        out = []

        def targets(receiver: bytes, at: int) -> list[str]:
            text = receiver.decode(errors="replace")
            if text in models:
                found = models[text]
                called = {n for n in found if CALLED in n}
                here = self._models_at(text, at, models)
                if here != found:  # (the function's own variable: the models it binds there)
                    return sorted(here)
                if called and _NAME_ONLY.fullmatch(receiver):  # (a class: of any binding)
                    found = (found - called) | self._in_scope(receiver, at, called)
                return sorted(found)
            if "(" not in text:
                # (``model.encoder.half()``, ``model.blocks[0].half()``: of the part only; an
                # item of the model itself, ``model[0]``, is not followed)
                chain = _INDEX.sub(b"", receiver).decode(errors="replace").split(".")
                for i in range(1, len(chain)):
                    holder, attrs = ".".join(chain[:i]), PART.join(chain[i:])
                    if text.startswith(f"{holder}.") and holder in models:
                        if all(a.isidentifier() for a in chain[i:]):
                            return [f"{cls}{PART}{attrs}" for cls in targets(holder.encode(), at)]
                alias = self._part_alias(chain[0].encode(), at, models)
                if alias is not None:
                    holder, path = alias  # (``layers = model.blocks[:4]``: ``layers.half()``)
                    attrs = PART.join((*path, *chain[1:]))
                    return [f"{cls}{PART}{attrs}" for cls in targets(holder.encode(), at)]
                return []
            item = _ITEM_CALLEE.match(text)
            if item is not None:  # ``MODELS[name](...).half()``: what its values return
                registry = self._registry_named(item.group(1))
                return [] if registry is None else [f"{registry}{CALLED}"]
            cls = self._class_named(text.split("(", 1)[0])
            head = receiver.split(b"(", 1)[0].strip()
            chosen = self._chosen(head, at) if cls is None and _NAME_ONLY.fullmatch(head) else None
            if chosen:  # ``cls(8).half()`` of a ``cls = A if c else B``: one of them
                return sorted(chosen)
            if cls is None:  # ``build_model(cfg).half()``: what the factory returns is cast
                callee = text.split("(", 1)[0]
                made = self._built(callee, at + len(callee), receiver)
                return [] if made is None else [f"{made}{CALLED}"]
            return [cls]

        for match in _CAST_AT.finditer(code):
            end = match.end() if match.group(1) else closing(code, match.end()) + 1
            if match.group(1) is None and not _halfish_args(code[match.end() : end - 1]):
                continue
            start, receiver = _receiver(code, _module_chain(code, match.start()))
            if not receiver:  # (an item of a model's part: ``model.blocks[0].half()``)
                start, receiver = _indexed_receiver(code, _module_chain(code, match.start()))
                if receiver and not all(PART in c for c in targets(receiver, start) or ("",)):
                    start, receiver = 0, b""
            if match.group(1):
                dtype = written_dtype(match.group(1))
            elif self._dtype_names().argument_full(match.end(), end - 1):
                continue  # (``.to(dtype)`` of a ``dtype`` that only holds float32: no half)
            else:  # ``.to(weight_dtype)``: what the variable may hold (:mod:`.dtype_names`)
                dtype = self._dtype_names().argument_half(match.end(), end - 1)
            if not receiver:
                at = _getattr_call(code, match.start())
                if at >= 0:  # ``getattr(m, name)(...).half()``: a class picked by name
                    self._loose_cast(self.spot(at, self._home(at)), dtype)
                continue
            classes = targets(receiver, start)
            if not classes:
                built_by_cls = self._built_by_cls(receiver, start)
                if built_by_cls or self._module_of_unknown_class(receiver):
                    own = receiver == b"self" or built_by_cls
                    owner = self._owner(start, match) if own else None
                    if owner is not None:
                        self._owned.append((owner, self.spot(start)))
                    else:
                        self._loose_cast(self.spot(start, self._home(start)), dtype)
                continue
            for cls in classes:
                owner, part, attrs = cls.partition(PART)
                leaf = owner.rpartition(".")[2] + (f".{attrs.replace(PART, '.')}" if part else "")
                text = " ".join(data[start:end].decode(errors="replace").split())
                if len(text) > 60:
                    tail = match.group(0).decode() + ("...)" if not match.group(1) else "")
                    text = f"{leaf}(...){tail}"
                what = f"`{leaf}` is cast to half by `{text}`"
                out.append((cls, self.spot(start), what, dtype))
        for kw in _DTYPE_KW.finditer(code):
            if not _HALFISH_BYTES.search(kw.group(2)):
                continue
            if self._dtype_names().full_only(kw.start(2), kw.end(2)):
                continue  # (``torch_dtype=dtype`` of a ``dtype`` that only holds float32)
            opening = enclosing(code, kw.start())
            if opening <= 0:
                continue
            window = code[max(0, opening - 200) : opening]
            head = window[len(window.rstrip(_IDENT + b".")) :]
            if not head:
                continue
            named = self._class_named(head.decode())
            if named is not None:
                leaf = named.rpartition(".")[2]
                written = f"{kw.group(1).decode()}={kw.group(2).decode()}"
                what = f"`{leaf}` {BUILT_IN_HALF} `{leaf}(..., {written})`"
                dtype = self._keyword_half(opening, kw)
                out.append((named, self.spot(opening - len(head)), what, dtype))
        return out

    def _part_alias(
        self, name: bytes, at: int, models: dict[str, set[str]]
    ) -> tuple[str, tuple[str, ...]] | None:
        """``layers = model.blocks[:4]``, ``enc = model.encoder``: the model variable and the
        attributes its part read off it when the last binding of ``name`` before ``at`` in
        the function holding ``at`` (at module level: the module's) is such a read, or None.
        Only a bare name aliases a model; a read of a part (an index or a slice of it too)
        stands for that part, whose cast casts what the part holds. A loop over a part
        (``for blk in model.blocks:``, ``enumerate(...)``, ``.children()``, ``.modules()``,
        ``.values()``, ``.named_children()``) binds each module the part holds, one of its
        classes (a ``ModuleList``, ``Sequential`` or ``ModuleDict``'s values are its
        modules), so a cast of the loop's name casts at most those classes too."""
        if not models or name.decode(errors="replace") in models:
            return None  # (no model variable in the file: no part of one to alias, no scan)
        if not _NAME_ONLY.fullmatch(name):
            return None
        held = self._def_holding(at)
        begin = 0 if held is None else held[0]
        quoted = re.escape(name)
        binding = compiled(
            rb"(?m)^([ \t]*)" + quoted + rb"[ \t]*(?::[^=\n]*)?=(?!=)[ \t]*([^\n#]*)"
        )
        looped = compiled(
            rb"(?m)^([ \t]*)for[ \t]+(?:\w+[ \t]*,[ \t]*)?" + quoted + rb"[ \t]+in[ \t]+"
            rb"(?:enumerate\()?([\w.]+(?:\[[^\]\n]*\])?)" + _MEMBERS + rb"\)?[ \t]*:"
        )
        last = None
        for pattern in (binding, looped):
            for found in pattern.finditer(self.code, begin, at):
                if (held is not None or not found.group(1)) and (
                    last is None or found.start() > last.start()
                ):
                    last = found
        value = b"" if last is None else last.group(2).strip()
        if not _PART_READ.fullmatch(value):
            return None
        chain = _INDEX.sub(b"", value).decode(errors="replace").split(".")
        for i in range(1, len(chain)):
            holder = ".".join(chain[:i])
            if value.startswith(f"{holder}.".encode()) and holder in models:
                return holder, tuple(chain[i:])
        return None

    def _dtype_names(self) -> DtypeNames:
        if self._dtypes is None:
            self._dtypes = DtypeNames(self.code, self.data)
        return self._dtypes

    def _keyword_half(self, opening: int, keyword: re.Match[bytes]) -> str:
        """The one half dtype the ``dtype=``/``torch_dtype=`` argument ``keyword`` of the
        call opened at ``opening`` writes ("" when it may write either, or is unknown)."""
        code = self.code
        for begin, stop in parts(code, opening + 1, closing(code, opening + 1)):
            if begin <= keyword.start() < stop:
                return self._dtype_names().half_of(keyword.start(2), stop)
        return self._dtype_names().half_of(keyword.start(2), keyword.end(2))

    def _loose_cast(self, spot: Spot, dtype: str) -> None:
        """A half cast of a model of unknown class at ``spot``, writing ``dtype`` down."""
        self._loose.append(spot)
        if dtype == "bfloat16":
            self._loose_bfloat16.append(spot)

    def _defaults(self, casts: list[tuple[str, Spot, str, str]]) -> bool:
        """Whether this file may leave a half default dtype for whatever is built after it
        (:mod:`mpcheck.project.defaults`); each class built inside a known extent is built
        in half (added to ``casts``; ``cls(...)`` in a method: its class and those deriving
        it)."""
        spans = []
        for match in self._def_headers():  # (the headers the record pass found once)
            indent = len(match.group(1))
            spans.append(
                (match.start(), body_end(self.code, match.end(), indent), indent, match.group(2))
            )
        extents = half_default_extents(self.code, spans)
        if extents is None:
            return True
        for start, end in extents:
            self._built_under_default(start, end, casts)
        return False

    def _built_under_default(
        self, start: int, end: int, casts: list[tuple[str, Spot, str, str]]
    ) -> None:
        """Each class built between ``start`` and ``end`` (a half default dtype's extent) is
        built in half; ``cls(...)`` in a method builds its class or one deriving it."""
        calls = self.calls()
        line = self.spot(start)[0]
        i = bisect_right(calls, (start,))
        while i < len(calls) and calls[i][0] < end:
            at, _, callee = calls[i]
            i += 1
            named = self._class_named(callee, at)
            if named is None:
                continue
            leaf = named.rpartition(".")[2]
            under = f"under a half default dtype (set at line {line})"
            what = f"`{leaf}` {BUILT_IN_HALF} `{leaf}(...)` {under}"
            casts.append((named, self.spot(at), what, ""))
        for match in _CLS_CALL.finditer(self.code, start, end):
            owner = self._owner(match.start(), match)
            if owner is not None:
                self._owned.append((owner, self.spot(match.start())))

    def _owner(self, at: int, cast: re.Match[bytes]) -> str | None:
        """The qualified class whose method holds the offset ``at`` (the innermost class
        body around it), None outside a class body or when that class defines a method of
        the cast's name (``def to(self, ...)``: its own method runs, casting what it says)."""
        if self._class_spans is None:
            spans = []
            for match in self._class_matches:  # (the headers the record pass read)
                indent = len(match.group(1))
                end = body_end(self.code, match.end(), indent)
                name = match.group(2).decode()
                spans.append((match.start(), end, indent, name))
            self._class_spans = spans
        inner = None
        for start, end, indent, name in self._class_spans:
            if start < at < end and (inner is None or indent > inner[2]):
                inner = (start, end, indent, name)
        if inner is None:
            return None
        method = re.escape(cast.group(0).lstrip(b". \t").split(b"(")[0].strip())
        own = compiled(rb"^[ \t]+(?:async[ \t]+)?def[ \t]+" + method + rb"[ \t]*\(", re.M)
        if own.search(self.code, inner[0], inner[1]) is not None:
            return None
        name = inner[3]
        return f"{self.module}.{name}" if self.module else name

    def _def_holding(self, at: int) -> tuple[int, int] | None:
        """(the end of its header's name, its end) of the innermost ``def`` holding ``at``."""
        self._factory_at(at)  # (finds every ``def``'s span once)
        inner = None
        for start, end, indent, _ in self._bodies or ():
            if start <= at < end and (inner is None or indent >= inner[0]):
                inner = (indent, start, end)
        if inner is None:
            return None
        header = _DEF.match(self.code, inner[1])
        return None if header is None else (header.end(), inner[2])

    def _in_scope(self, name: bytes, at: int, products: set[str]) -> set[str]:
        """What of ``products`` (the project functions' values the file binds ``name`` to,
        ``pkg.f()#``) the variable ``name`` may hold at ``at``: a name a function binds is its
        own variable, so a binding in another function holds nothing here. Its last binding
        in the function holding ``at`` says (through those rebinding it to a module method
        returning the module, ``x = x.to(device)``); with none, a parameter holds what callers
        hand: the file's bindings stand for them only where the file uses the name as a module
        (a model handed around under one name). Anything less plain keeps them all."""
        held = self._def_holding(at)
        if held is None:
            return products
        code, (begin, _) = self.code, held
        word = re.escape(name)
        loose = compiled(
            rb"(?<![\w.])" + word + rb"\b(?:[ \t]*[,)\]][^=\n]*=(?!=)|[ \t]*:=)"
            rb"|\bas[ \t]+" + word + rb"\b|\bfor\b[^\n]*(?<![\w.])" + word + rb"\b[^\n]*\bin\b"
            rb"|\bglobal\b|\bnonlocal\b"
        )
        if loose.search(code, begin, at):  # (a tuple target, a loop, ``with ... as``)
            return products
        bound = compiled(rb"^[ \t]+" + word + rb"[ \t]*(?::[^=\n]*)?=(?!=)[ \t]*(\S)", re.M)
        same = compiled(word + rb"\s*\.\s*(" + _SELF_METHODS + rb")\s*\(")
        for found in reversed(list(bound.finditer(code, begin, at))):
            if same.match(code, found.start(1)):
                continue
            call = _CALLEE.match(code, found.start(1))
            function = None if call is None else self._built(call.group(1).decode(), call.end(1))
            if function is None:
                return set()  # (a value of something else: no project function's)
            return {p for p in products if p.partition(CALLED)[0] == function}
        params = params_of(code, begin)
        if params is None or name not in params or self._module_of_unknown_class(name):
            return products  # (a model handed around under one name: as the file binds it)
        return set()

    def _models_at(self, name: str, at: int, models: dict[str, set[str]]) -> set[str]:
        """What the variable ``name`` holds at ``at``: the models the function holding it
        binds the name to (:meth:`_classes_in_scope`), else every model the file binds it to."""
        found = models[name]
        here = self._classes_in_scope(name.encode(), at) if len(found) > 1 else None
        return set(here) if here is not None and here <= found else found

    def _classes_in_scope(self, name: bytes, at: int) -> frozenset[str] | None:
        """The project classes the function holding ``at`` binds the variable ``name`` to
        (``model = Net(...)``; a rebinding to a module method returning the module itself,
        ``model = model.to(device)`` or ``model.half()``, keeps them): a name a function
        binds is its own variable, so a use of it there is a use of those models only,
        whatever other functions of the file bind to the same name. None: not every binding
        there builds a project class (a parameter, a global, a tuple target, a loop, ``with
        ... as``, a value of something else), and every binding of the file stands for it."""
        if not _NAME_ONLY.fullmatch(name):
            return None
        held = self._def_holding(at)
        if held is None:
            return None
        if (name, held) not in self._scopes:  # (once per variable and function)
            self._scopes[(name, held)] = self._bound_in_function(name, held)
        return self._scopes[(name, held)]

    def _bound_in_function(self, name: bytes, held: tuple[int, int]) -> frozenset[str] | None:
        """(:meth:`_classes_in_scope` in the function whose body spans ``held``.)"""
        code = self.code
        if held not in self._functions:  # (its plain assignments, by name; the other names)
            assigned: dict[bytes, list[re.Match[bytes]]] = {}
            for found in _ASSIGNMENT.finditer(code, *held):
                assigned.setdefault(found.group(1), []).append(found)
            self._functions[held] = (assigned, _unplain(code, *held))
        assigned, unplain = self._functions[held]
        bindings = assigned.get(name)
        if not bindings or unplain is None or name in unplain:
            return None
        params = params_of(code, held[0])
        if params is None or name in params:  # (a parameter holds what callers hand first)
            return None
        out: set[str] = set()
        for found in bindings:
            value = found.start(2)
            if code.startswith(name, value) and _SAME_MODULE.match(code, value + len(name)):
                continue
            call = _CALLEE.match(code, value)
            if call is None:
                return None
            close = closing(code, call.end())
            stop = code.find(b"\n", close)
            rest = code[close + 1 : stop if stop >= 0 else len(code)].strip()
            if rest and (rest[:1] != b"." or _BRANCHING.search(rest)):
                return None  # (``A() if c else B()``, ``A() + x``: not the call's value alone)
            named = self._class_named(call.group(1).decode(), value)
            if named is not None:
                out.add(named)
                continue
            chosen = self._chosen(call.group(1), value) if b"." not in call.group(1) else None
            if chosen is not None:
                out.update(chosen)  # (``model = cls(8)``: one of the classes ``cls`` holds)
                continue
            made = self._built(call.group(1).decode(), call.end(1))
            if made is None:
                return None
            out.add(f"{made}{CALLED}")  # (``model = load_model(p)``: what the factory returns)
        return frozenset(out) if out else None

    def _built_by_cls(self, receiver: bytes, at: int) -> bool:
        """Whether ``receiver`` is a name the function holding ``at`` last binds, before
        ``at``, to ``cls(...)``, ``cls.from_config(...)`` or ``skip_init(cls, ...)`` (which
        build a ``cls``): in a classmethod ``cls`` is the class it is called on, this class or
        one deriving it."""
        if not _NAME_ONLY.fullmatch(receiver) or b"cls" not in self.code:
            return False
        name = re.escape(receiver)
        bound = compiled(rb"^[ \t]+" + name + rb"[ \t]*=(?!=)[ \t]*(\S)", re.M)
        code = self.code
        if not any(_CLS_BUILT.match(code, m.start(1)) for m in bound.finditer(code, 0, at)):
            return False
        header = None  # (the innermost ``def`` holding ``at``: the nearest one before it)
        for match in reversed(self._def_headers()):
            if match.start() >= at or not match.group(1):
                continue
            if body_end(self.code, match.end(), len(match.group(1))) > at:
                header = match
                break
        if header is None:
            return False
        # the last binding, through those that rebind the name to a module method returning
        # the module itself (``model = model.requires_grad_(False)``, ``model.to(dtype)``: the
        # same model, of the same class)
        same = compiled(name + rb"\s*\.\s*(" + _SELF_METHODS + rb")\s*\(")
        for found in reversed(list(bound.finditer(code, header.end(), at))):
            if same.match(code, found.start(1)) is None:
                return _CLS_BUILT.match(code, found.start(1)) is not None
        return False

    def _home(self, at: int) -> str:
        """The qualified top-level function holding the offset ``at`` ("" elsewhere): a
        cast there runs only if something runs that function."""
        return self._factory_at(at) or ""  # (qualified already)

    def _module_of_unknown_class(self, receiver: bytes) -> bool:
        """Whether a cast's receiver the file cannot name a project class for is a module
        (a tensor's ``.half()`` changes no weights): a ``getattr(...)(...)`` value, or a
        variable the file uses as a module only is (``.eval()``, ``.parameters()``,
        ``.load_state_dict(...)``: no tensor has them) and does not bind to a library's
        model (``pipe = StableDiffusionPipeline.from_pretrained(...)``: no project class)."""
        if b"(" in receiver:
            return receiver.startswith(b"getattr(")
        known = self._unknown_modules.get(receiver)
        if known is None:
            known = self._unknown_modules[receiver] = self._module_only(receiver)
        return known

    def _module_only(self, receiver: bytes) -> bool:
        """(:meth:`_module_of_unknown_class` for a variable; the name leads each pattern and
        its look-behind follows it: a leading look-behind is tried at every offset.)"""
        name = re.escape(receiver)
        after = rb"(?<![\w.]" + name + rb")"
        used = compiled(name + after + rb"\s*\.\s*(?:" + _MODULE_ONLY + rb")\s*\(")
        if used.search(self.code) is None:
            return False
        bound = compiled(name + after + rb"[ \t]*(?::[^=\n]*)?=\s*([A-Za-z_][\w.]*)\s*[(.]")
        roots = {
            self.imports.get(m.group(1).split(b".")[0].decode(), "").partition(".")[0]
            for m in bound.finditer(self.code)
        }
        return not roots or not roots <= _NOT_PROJECT

    def _regions(
        self, models: dict[str, set[str]], autocast: bool, owners: list[range]
    ) -> list[tuple[str, Spot | None, bool, bool]]:
        """Each run of a model variable -- a call (``model(x)``, ``self.transformer(...)``)
        or a method that runs it (``model.generate(...)``; not one of
        :data:`~mpcheck.knowledge.torch_api.MODULE_NOT_RUNNING`) -- as its class (those the
        function holding it binds the name to: :meth:`_models_at`), the enabled autocast
        region around it (None outside one), whether a method runs it, and whether
        it is a part its owner runs (``self.block(x)`` in the body of a class that binds
        ``self.block``: it runs wherever that class runs). Regions are found by indentation:
        a ``with ...autocast(...):`` (or an ``@autocast(...)`` decorator) covers the lines
        indented deeper than it. A file that never writes ``autocast`` runs each outside one."""
        names = b"|".join(re.escape(v.encode()) for v in sorted(models, key=len, reverse=True))
        # (led by the names, the character before checked in Python: a leading look-behind
        # would be tried at every offset of the file)
        called = re.compile(rb"(" + names + rb")((?:\s*\.\s*\w+)*)\s*\(")
        # (a model variable as a call's argument, positional or by keyword: ``f(model)``,
        # ``f(x, model=unet,``; the bracket and the callee are checked by the caller)
        handed = re.compile(rb"(?:[(,]|^|\b\w+\s*=)\s*(" + names + rb")\s*(?=[,)]|$)", re.M)

        code, data = self.code, self.data
        bound: dict[int, frozenset[bytes]] = {}  # owner body (its start) -> the self.X it binds

        def runs(
            match: re.Match[bytes], region: Spot | None, at: int
        ) -> Iterable[tuple[str, Spot | None, bool, bool]]:
            if at > 0 and code[at - 1 : at] in _IDENT_OR_DOT:
                return ()
            method = match.group(2).rpartition(b".")[2].strip()  # (of a part: ``m.enc.encode``)
            if method and method.decode() in T.MODULE_NOT_RUNNING:
                return ()
            variable = match.group(1)
            part = variable.startswith(b"self.") and any(
                at in body and variable in _bound_in(code, data, body, bound) for body in owners
            )
            classes = sorted(self._models_at(variable.decode(), at, models))
            return ((cls, region, bool(method), part) for cls in classes)

        def hands(
            match: re.Match[bytes], region: Spot | None, begin: int
        ) -> Iterable[tuple[str, Spot | None, bool, bool]]:
            at = begin + match.start(1)
            if not self._runs_what_it_is_handed(at):
                return ()
            variable = match.group(1)
            part = variable.startswith(b"self.") and any(
                at in body and variable in _bound_in(code, data, body, bound) for body in owners
            )
            classes = sorted(self._models_at(variable.decode(), at, models))
            return ((cls, region, False, part) for cls in classes)

        if not autocast:
            found = [run for m in called.finditer(code) for run in runs(m, None, m.start())]
            return found + [run for m in handed.finditer(code) for run in hands(m, None, 0)]
        contexts, cpu = _autocast_contexts(self.code, self.data)
        stack: list[tuple[int, Spot]] = []
        out: list[tuple[str, Spot | None, bool, bool]] = []
        lines = self.data.split(b"\n")
        start = 0
        for row, line in enumerate(code.split(b"\n"), 1):
            begin, start = start, start + len(line) + 1
            text = line.lstrip()
            if not text:
                continue
            indent = len(line) - len(text)
            while stack and stack[-1][0] >= indent:
                stack.pop()
            context = _WITH_NAME.match(line) if contexts else None
            if context is not None and context.group(1) not in contexts:
                context = None
            if (context or _WITH_AUTOCAST.match(line)) and not _disabled(line):
                held = context is not None and context.group(1) in cpu
                if held or (context is None and _CPU_REGION.search(lines[row - 1])):
                    self._cpu.add(row)  # (a region written for the CPU: its lists apply)
                shown = lines[row - 1].decode(errors="replace").strip()
                quoted = " ".join(shown.rstrip(":").split())
                what = f"every call runs under `{quoted[:60]}`"
                stack.append((indent, (row, indent + 1, what)))
                continue
            for match in called.finditer(line):
                out.extend(runs(match, stack[-1][1] if stack else None, begin + match.start()))
            for match in handed.finditer(line):
                out.extend(hands(match, stack[-1][1] if stack else None, begin))
        return out

    def _runs_what_it_is_handed(self, at: int) -> bool:
        """Whether the model variable at ``at`` is handed as an argument to a call that may
        run it there (``diffusion.sample(model=self.unet, ...)``, ``evaluate(model, data)``):
        autocast's state is the thread's, so the callee runs it under the region around the
        call, or outside every region, as a call written there would. Not a constructor's
        argument (``Pipeline(unet=unet)``, a capitalised callee: held for later, it runs
        where its holder does), a keyword's parenthesis (``in (model, x)``), nor a callee
        known to take a model without running it (:data:`~mpcheck.knowledge.torch_api.
        NOT_RUNNING_TAKERS`: builtins, copies, wrapping, saving, an EMA's update)."""
        if at > 0 and self.code[at - 1 : at] in _IDENT_OR_DOT:
            return False
        paren = enclosing(self.code, at)
        if paren < 0:
            return False
        callee = _CALLEE_BEFORE.search(self.code, max(0, paren - 200), paren)
        if callee is None or callee.end() != paren:
            return False
        leaf = callee.group(0).rstrip().rpartition(b".")[2].decode()
        return bool(leaf) and not (
            leaf[:1].isupper() or iskeyword(leaf) or leaf in T.NOT_RUNNING_TAKERS
        )

    def _held(self, plain: list[range]) -> set[str]:
        """The ``self.<attr>`` variables a plain class (no base: no ``.half()`` of its own
        reaches its attributes) binds a model to in its body."""
        code, out = self.code, set()
        for at, _, _ in self.calls() if plain else ():
            if any(at in body for body in plain):
                line = code.rfind(b"\n", 0, at) + 1
                assigned = _ASSIGNED.match(code, line, at)
                if assigned is not None and assigned.group(1).startswith(b"self."):
                    out.add(assigned.group(1).decode())
        return out

    def _keeping_callee(self, callee: bytes) -> bool | str | Passed | _Copied:
        """Whether handing a model to ``callee`` keeps its dtype: a function of this file
        (``f``, ``self.f``) none of whose definitions casts anything, or an export/trace
        (``torch.onnx.export``, ``torch.jit.trace``), which runs the model as it is; a class
        (its qualified name): the model becomes its part, and follows it; a function of
        another project file, or a method of an object of a project class (``diffusion.
        training_losses(model, ...)``) (:class:`Passed`): the project decides whether it
        casts; ``copy.deepcopy`` (:data:`COPIED`): the copy's uses decide."""
        text = callee.decode(errors="replace")
        resolved = self.resolve(text) or text
        if resolved in _KEEPING_EXPORTS or resolved in _NUMBER_TAKERS:
            return True
        if resolved == "copy.deepcopy":
            return COPIED
        holder = self._class_named(text)
        if holder is not None and ".from_" not in text:
            return holder
        head, _, name = text.rpartition(".")
        receiver = self._objects.get(head) if head else None
        if receiver:  # a method of an object this file builds: its class's method decides
            return Passed(tuple(f"{cls}{METHOD}{name}" for cls in sorted(receiver)))
        if self._casting is None:
            self._casting = _casting_functions(self._spans())
        if head in ("self", "cls") or (not head and name in self._casting):
            return self._casting.get(name) is False
        function = self._function_named(text)
        return False if function is None else Passed((function,))

    def _keepers(self, bodies: Sequence[range] = ()) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """This file's top-level functions none of whose definitions casts anything, and the
        methods of its top-level classes (``pkg.Class.method``) that cast nothing: a model
        another file hands one keeps its dtype there. Second, the methods that do cast
        (a subclass's keeping method may run its base's by ``super()``)."""
        if self._casting is None:
            self._casting = _casting_functions(self._spans())
        prefix = f"{self.module}." if self.module else ""
        found = [f"{prefix}{n}" for n in self._top_defs() if self._casting.get(n) is False]
        casting: set[str] = set()
        if bodies:
            starts = [b.start for b in bodies]
            names = {b.start: n for b, n in zip(bodies, self._top_names, strict=True)}
            indents: dict[int, int] = {}  # class body -> the indent of its methods
            methods: dict[str, bool] = {}
            for match, casts in self._spans():
                indent = len(match.group(1))
                i = bisect_right(starts, match.start()) - 1
                if not indent or i < 0 or match.start() not in bodies[i]:
                    continue
                own = indents.setdefault(starts[i], indent)
                name = match.group(2).decode()
                if indent != own or (name.startswith("__") and name != "__call__"):
                    continue
                method = f"{prefix}{names[starts[i]]}.{name}"
                methods[method] = methods.get(method, False) or casts
            found.extend(m for m, casts in methods.items() if not casts)
            casting.update(m for m, casts in methods.items() if casts)
        return tuple(sorted(found)), tuple(sorted(casting))

    def _builds(
        self,
        bodies: list[range],
        keys: set[str],
        plain: Sequence[range] = (),
        unsafe: Collection[str] = (),
    ) -> list[tuple[str, Spot, bool]]:
        """Project classes built outside any class body (a script's or a helper's model) or
        in a plain class's body (held in its attribute), and whether the value stays float32
        in this file: bound to a variable whose every use keeps its dtype (``keys``; and of
        a class none of whose values escapes, ``unsafe``: a function's own variable may
        escape where another function's of the same name does not), or called at once
        (``Model(...)(x)``)."""
        code = self.code
        out = []
        starts = [b.start for b in bodies]
        for at, end, name in self.calls():
            i = bisect_right(starts, at) - 1
            if i >= 0 and at in bodies[i] and bodies[i] not in plain:
                continue
            cls = self._class_named(name, at)
            if cls is None:
                continue
            close = closing(code, end) + 1
            text = " ".join(self.data[at:close].decode(errors="replace").split())
            if len(text) > 60:
                text = f"{name.rpartition('.')[2]}(...)"
            line = code.rfind(b"\n", 0, at) + 1
            assigned = _ASSIGNED.match(code, line, at)
            kept = assigned is not None and assigned.group(1).decode() in keys
            kept = kept and cls not in unsafe  # (a function's own variable may escape)
            called = code[close : close + 8].lstrip().startswith(b"(")
            held = self._holds_half(code[end:close])
            index = _return_index(code, at, close)
            if index is not None and self._factory_at(at) is not None:
                self._direct.append((at, index, cls))  # ``return Model(...)``: callers decide
                kept = True
            out.append((cls, self.spot(at, text), (kept or called) and not held))
        return out

    def _chosen_builds(
        self,
        bodies: list[range],
        plain: Sequence[range],
        keys: set[str],
        unsafe: Collection[str],
    ) -> list[tuple[str, Spot, bool]]:
        """The builds of ``model = cls(...)`` (a class variable's call, :meth:`_chosen`)
        outside class bodies: one of the candidates is built there, each as :meth:`_builds`
        records a build (float32 here when the variable's every use keeps its dtype)."""
        out = []
        starts = [b.start for b in bodies]
        for at, target, chosen in self._chose:
            i = bisect_right(starts, at) - 1
            if i >= 0 and at in bodies[i] and bodies[i] not in plain:
                continue
            name = self.code[at : self.code.find(b"(", at)].decode().strip()
            spot = self.spot(at, f"{name}(...)")
            for cls in sorted(chosen):
                out.append((cls, spot, target in keys and cls not in unsafe))
        return out

    # -- factories: functions that build a model and return it ------------------------------
    def _function_named(self, text: str) -> str | None:
        """The qualified project function a call's callee text may name (``build_model``,
        ``models.get_model``): a top-level function of this file, or an imported name that
        is no well-known library's; None otherwise."""
        head, _, rest = text.partition(".")
        if not head or head in _SKIP_NAMES or any(p[:1].isupper() for p in text.split(".")):
            return None  # (``Model.from_config(...)``: a class's, not a function of the file)
        if head in self._top_defs() and not rest:
            return f"{self.module}.{head}" if self.module else head
        if head not in self.imports:
            return None
        found = self.imports[head]
        if found.partition(".")[0] in _NOT_PROJECT:
            return None
        return f"{found}.{rest}" if rest else found

    def _loader_named(self, text: str) -> str | None:
        """The configuration loader a call's callee text names, a library's too (hydra's
        ``instantiate``: :data:`~mpcheck.project.reach.CONFIG_LOADERS`); None otherwise. Its
        value is a class a configuration names: a model whose class is unknown here."""
        found = self.resolve(text)
        return found if found and found.rpartition(".")[2] in CONFIG_LOADERS else None

    def _spans(self) -> list[tuple[re.Match[bytes], bool]]:
        """Each ``def`` of the file with whether its body casts (:func:`_casting_spans`)."""
        if self._spans_found is None:
            self._spans_found = _casting_spans(self.code, self._def_headers())
        return self._spans_found

    def _def_headers(self) -> list[re.Match[bytes]]:
        """Every ``def`` header of the file (:data:`_DEF`), found once for all who ask."""
        if self._headers is None:
            self._headers = narrowed(_DEF, self._found, self.code)
        return self._headers

    def _top_defs(self) -> dict[str, int]:
        """Each top-level function of the file: name -> the offset of its ``def``."""
        if self._defs is None:
            found = self._def_headers()
            self._defs = {m.group(2).decode(): m.start() for m in found if not m.group(1)}
        return self._defs

    def _factory_at(self, at: int) -> str | None:
        """The top-level function whose own body holds the offset ``at`` (a ``return`` there
        hands its value to that function's callers); None inside a method or nested function,
        whose callers this file cannot name."""
        if self._bodies is None:
            spans = []
            for match in self._def_headers():
                indent = len(match.group(1).expandtabs())
                end = body_end(self.code, match.end(), indent)
                spans.append((match.start(), end, indent, match.group(2).decode()))
            self._bodies = spans
        inner = None
        for start, end, indent, name in self._bodies:
            if start <= at < end and (inner is None or indent >= inner[0]):
                inner = (indent, name)
        if inner is None or inner[0] != 0:
            return None
        return f"{self.module}.{inner[1]}" if self.module else inner[1]

    def _made(self, models: dict[str, set[str]], bodies: list[range]) -> list[tuple[str, int, str]]:
        """The calls of the project's functions bound to variables outside class bodies
        (``vae = load_vae(cfg)``, ``model, cfg = build(args)``): each variable is bound to
        what the function returns (a ``pkg.f()#i`` name the project joins to the classes
        ``pkg.f`` returns at position ``i`` of its tuple, ``#`` alone the whole value).
        Returns (that name, the call's offset, the variable) for each."""
        out = []
        starts = [b.start for b in bodies]
        code = self.code
        items: dict[bytes, str] = {}  # ``build = MODELS[key]``: the name -> the registry
        found = list(line_matches(_MADE, _MADE_CALL, code))
        if b"](" in code or b")(" in code or found:
            for item in line_matches(_ITEM, _ITEM_LEAD, code):
                registry = self._registry_named(item.group(2).decode())
                if registry is None:
                    continue
                if item.group(3) is None:
                    items[item.group(1)] = registry
                else:
                    found.append(item)
            found.sort(key=lambda m: m.start())
        for match in found:
            i = bisect_right(starts, match.start()) - 1
            if i >= 0 and match.start() in bodies[i]:
                continue  # (a module's part follows the class that builds it)
            if match.re is _ITEM:  # ``model = MODELS[key](...)``: one of its values called
                made = self._registry_named(match.group(2).decode())
            else:
                callee = match.group(2).decode()
                made = self._built(callee, match.end(2))
                if made is None and match.group(2) in items:
                    made = items[match.group(2)]  # (``build = MODELS[key]; m = build(...)``)
            if made is None:
                continue
            targets = [t.strip() for t in match.group(1).decode().split(",") if t.strip()]
            for index, target in enumerate(targets):
                name = f"{made}{CALLED}{index if len(targets) > 1 else ''}"
                models.setdefault(target, set()).add(name)
                out.append((name, match.start(2), target))
        return out

    def _registries(self) -> dict[str, tuple[str, ...]]:
        """This file's registries: qualified name -> members, for each module-level literal
        (dict, list or tuple) every value of which is a bare name of a top-level function or
        class of the file or an imported name of no well-known library (``MODELS = {"b":
        build_b, "l": Large}``). Calling one of its values (``MODELS[key](...)``) runs one
        of them."""
        if self._registry_map is None:
            out: dict[str, tuple[str, ...]] = {}
            code = self.code
            for match in _REGISTRY.finditer(code):
                body = match.group(3)
                if b"lambda" in body:
                    continue
                members: list[str] = []
                for item in body.split(b","):
                    value = item.rpartition(b":")[2] if match.group(2) == b"{" else item
                    value = value.strip()
                    if not value and not item.strip():
                        continue  # (a trailing comma)
                    member = self._member(value.decode()) if _NAME.fullmatch(value) else None
                    if member is None:
                        members = []
                        break
                    members.append(member)
                if members:
                    name = match.group(1).decode()
                    out[f"{self.module}.{name}" if self.module else name] = tuple(members)
            self._registry_map = out
        return self._registry_map

    def _registered(self) -> dict[str, tuple[str, ...]]:
        """The project classes and functions this file registers with a registry object
        (mmengine's, mmcv's, or a project's own ``Registry``): ``@MODELS.register_module()``
        over a top-level ``class``/``def``, ``MODELS.register_module(module=Net)``. Qualified
        registry -> members; the project joins each registry's members over its files."""
        if self._registered_map is None:
            out: dict[str, list[str]] = {}
            code = self.code
            if b"register_module" in code:
                for match in _REGISTERED.finditer(code):
                    registry = self._registry_of(match.group(1).decode())
                    defined = _DEFINED.search(code, match.end())
                    if registry is None or defined is None:
                        continue
                    member = self._member(defined.group(1).decode())
                    if member is not None:
                        out.setdefault(registry, []).append(member)
                for match in _REGISTERS.finditer(code):
                    registry = self._registry_of(match.group(1).decode())
                    end = closing(code, match.end())
                    given = _MODULE_KW.search(code, match.end(), end)
                    member = self._member(given.group(1).decode()) if given else None
                    if registry is not None and member is not None:
                        out.setdefault(registry, []).append(member)
            # (``~`` among the members: a registry object, whose build is one of them)
            self._registered_map = {r: tuple(sorted({HANDED, *m})) for r, m in out.items()}
        return self._registered_map

    def _registry_of(self, text: str) -> str | None:
        """The qualified registry object ``text`` names: imported from the project, or a
        module-level name of this file; None for a library's (its members are not here)."""
        head, _, rest = text.partition(".")
        if head in self.imports:
            found = self.imports[head]
            if found.partition(".")[0] in _NOT_PROJECT or found.startswith(_LIBRARY_REGISTRIES):
                return None
            return f"{found}.{rest}" if rest else found
        if rest or not re.search(rb"^" + re.escape(head.encode()) + rb"[ \t]*=", self.code, re.M):
            return None  # (``self.register_module(...)``: torch's, a part of a module)
        return f"{self.module}.{text}" if self.module else text

    def _built(self, callee: str, after: int, receiver: bytes = b"") -> str | None:
        """What a call's value is made by (the ``pkg.f`` of a ``pkg.f()#`` name): a project
        function, a configuration loader, or a registry's build. A registry's build returns
        an instance of one of the classes registered with the registry the call names:
        ``MODELS.build(cfg)``, ``build_from_cfg(cfg, MODELS)``, or a project function handed
        the registry (``build_module(cfg.model, MODELS)``), spelled ``f~i~MODELS`` for the
        project to check that ``f`` builds from its ``i``-th parameter."""
        head, dot, method = callee.rpartition(".")
        if dot and method == "build" and not receiver.startswith(b"self"):
            registry = self._registry_named(head) or self._own_registry(head)
            if registry is not None:
                return registry
        qualified = self.resolve(callee) or ""
        library = qualified.startswith(_LIBRARY_REGISTRIES)  # (mmengine's ``build_from_cfg``)
        made = None if library else self._function_named(callee) or self._loader_named(callee)
        if made is None and not (library and qualified.endswith(".build_from_cfg")):
            return made
        code = self.code
        start = code.find(b"(", after)
        if start < 0 or code[after:start].strip():
            return made
        for index, (begin, stop) in enumerate(parts(code, start + 1, closing(code, start + 1))):
            text = code[begin:stop].strip()
            if not _NAME.fullmatch(text) or index > 3:
                continue
            name = text.decode()
            registry = self._registry_named(name) or self._own_registry(name)
            if registry is None:
                continue
            if made is None:  # (the library's ``build_from_cfg(cfg, registry)``)
                return registry if index == 1 else None
            return f"{made}{HANDED}{index}{HANDED}{registry}"
        return made

    def _own_registry(self, text: str) -> str | None:
        """``text`` as a registry this file registers with (``MODELS`` defined here)."""
        found = f"{self.module}.{text}" if self.module else text
        return found if found in self._registered() else None

    def _forwarders(self) -> dict[str, tuple[str, ...]]:
        """The top-level functions returning the build of a registry they are handed
        (``def build_module(module, builder): ... return builder.build(cfg)``): function ->
        ``(#i,)`` for its ``i``-th parameter; what a call returns is what that registry
        builds (:meth:`_built`)."""
        out: dict[str, tuple[str, ...]] = {}
        code = self.code
        if b".build" not in code and b"build_from_cfg" not in code:
            return out
        for match in _RETURNS_BUILD.finditer(code):
            name = (match.group(1) or match.group(2)).decode()
            function = self._factory_at(match.start())
            if function is None:
                continue
            header = self._top_defs().get(function.rpartition(".")[2])
            if header is None:
                continue
            named = code.find(b"(", header)
            params = [
                re.split(rb"[:=]", code[b:e].strip().lstrip(b"*"), maxsplit=1)[0].strip()
                for b, e in parts(code, named + 1, closing(code, named + 1))
            ]
            if name.encode() in params:
                out[function] = (f"{HANDED}{params.index(name.encode())}",)
        return out

    def _member(self, text: str) -> str | None:
        """The qualified project function or class a registry's value names, or None."""
        head = text.partition(".")[0]
        if head in self.local or head in self._top_defs():
            return f"{self.module}.{text}" if self.module else text
        found = self.imports.get(head)
        if found is None or found.partition(".")[0] in _NOT_PROJECT:
            return None
        return self.resolve(text)

    def _registry_named(self, text: str) -> str | None:
        """The qualified registry a callee's text names: this file's own, or an imported
        name (the project joins it to the registry it stands for, if any)."""
        head, _, rest = text.partition(".")
        if head in self.local or head in self._top_defs() or head in _SKIP_NAMES:
            return None
        if head in self.imports:
            found = self.imports[head]
            if found.partition(".")[0] in _NOT_PROJECT:
                return None
            return f"{found}.{rest}" if rest else found
        found = f"{self.module}.{text}" if self.module else text
        return found if found in self._registries() else None

    def _factories(
        self, returned: list[tuple[str, int, int, str]], keys: set[str], unsafe: set[str]
    ) -> set[tuple[str, int, str]]:
        """(function, position, class) of each model a top-level function returns; a value
        returned elsewhere (a method, a nested function) escapes as before."""
        out = set()
        for key, at, index, cls in returned:
            function = self._factory_at(at)
            if function is None:
                unsafe.add(cls)
                keys.discard(key)
                continue
            out.add((function, index, cls))
        return out

    def _returned_builds(self) -> set[tuple[str, int, str]]:
        """(function, position, class) of each ``return Model(...)`` of a top-level
        function (found by :meth:`_builds`)."""
        out = set()
        for at, index, cls in self._direct:
            function = self._factory_at(at)
            if function is not None:
                out.add((function, index, cls))
        return out

    def _annotated(self) -> set[tuple[str, int, str]]:
        """(function, position, class) of each class a top-level function's return
        annotation names (``def load_vae(...) -> AutoencoderKL``, ``-> tuple[Tokenizer,
        TextModel]``): what it returns (PEP 484), whatever its body builds it from (a loader
        filling a class picked by name, ``skip_init(cls, ...)``)."""
        out = set()
        for header in self._def_headers():
            if header.group(1):
                continue
            annotation = returned_annotation(self.code, header.end())
            if annotation is None:
                continue
            name = header.group(2).decode()
            function = f"{self.module}.{name}" if self.module else name
            for index, text in annotated_returns(annotation):
                cls = self._class_named(text.decode())
                if cls is not None and cls.partition(".")[0] not in _NOT_PROJECT:
                    out.add((function, index, cls))
        return out

    def _holds_half(self, arguments: bytes) -> bool:
        """A model built from a half part (``LoraLinear(base)`` after ``base = nn.Linear(...)
        .to(torch.bfloat16)``) holds it: its arguments name half, or a variable this file binds
        to something that does. The class is then no float32-only model."""
        if _HALF_TEXT.search(_OFF.sub(b"", arguments)):
            return True
        if self._half_names is None:
            self._half_names = _half_bound(self.code)
        return any(m.group(1) in self._half_names for m in _ARG_NAME.finditer(arguments))


_HALF_TEXT = re.compile(rb"half|float16|bfloat16|bf16|fp16|dtype")
# What a function casting something writes: ``.half()`` or ``torch.half``, a half dtype, a
# ``dtype``; not a variable named ``half`` (``half = x[: len(x) // 2]``, ``half_dim``).
_CASTING_TEXT = re.compile(rb"\.half\b|float16|bfloat16|bf16|fp16|dtype")
# A half setting turned off (``use_fp16=False``) holds no half.
_OFF = re.compile(rb"\b\w*(?:half|fp16|bf16)\w*\s*=\s*(?:False|None)\b")
_ARG_NAME = re.compile(rb"(?<![\w.])([A-Za-z_]\w*)(?![\w(]|\s*=(?!=))")  # (a value, not a keyword)
_BOUND = re.compile(rb"^[ \t]*([A-Za-z_]\w*)[ \t]*=(?!=)([^\n]*)", re.MULTILINE)


def _half_bound(code: bytes) -> frozenset[bytes]:
    """The names some assignment of the file binds to something naming half (one pass over
    the file's assignments, shared by all its builds)."""
    return frozenset(m.group(1) for m in _BOUND.finditer(code) if _HALF_TEXT.search(m.group(2)))


# What may be done with a model without changing its dtype (issue 36: "a model the project
# only builds in float32"); anything else it reaches might cast it.
_KEEPING_METHODS = frozenset(
    {
        "to", "cuda", "cpu", "eval", "train", "parameters", "named_parameters", "modules",
        "named_modules", "children", "zero_grad", "requires_grad_", "forward", "state_dict",
        "load_state_dict", "float", "apply", "register_forward_hook", "num_parameters",
    }
)  # fmt: skip
_KEEPING_WRAPPERS = frozenset(
    {"compile", "DistributedDataParallel", "DDP", "DataParallel", "print", "len", "id"}
)


def _unplain(code: bytes, begin: int, end: int) -> frozenset[bytes] | None:
    """The names the code between ``begin`` and ``end`` binds other than by a plain
    assignment (a tuple target, a walrus, ``with ... as``, a loop): their bindings there do
    not say what they hold. None: it declares a name ``global`` or ``nonlocal``."""
    out: set[bytes] = set()
    for found in _OTHER_BINDING.finditer(code, begin, end):
        target, alias, loop, declared = found.groups()
        if declared:
            return None
        out.update(n for n in (target, alias) if n)
        if loop is not None:
            out.update(_LOOP_NAME.findall(loop))
    return frozenset(out)


def _escapes(
    code: bytes,
    models: dict[str, set[str]],
    taker: Callable[[bytes], str | None] = lambda callee: None,
    held: Collection[str] = (),
    keeping: Callable[[bytes], bool | str | Passed | _Copied] = lambda callee: False,
    scope: Callable[[bytes, int], frozenset[str] | None] = lambda name, at: None,
) -> tuple[
    set[str],
    set[str],
    list[tuple[str, int, str]],
    set[tuple[str, str]],
    list[tuple[str, int, int, str]],
]:
    """The classes some variable of which reaches a use that might cast it, the variables
    all of whose uses keep the dtype: calling it or a method of it whose name and arguments
    say nothing of half (``.to(device)``, ``.eval()``, ``.generate(x)``), ``torch.compile``,
    DDP wrapping, an export (:meth:`_Reader._keeping_callee`) or a function of the file that
    casts nothing; a rebinding (a tuple target too); an alias (``m = model``, ``a, b =
    model, vae``), whose uses must keep it too. Anything else (an argument to another call,
    a return, a container) might cast it (a conservative answer: the value escapes): the
    models the function holding that use binds the name to (``scope``: a name a function
    binds is its own variable), else every model the file binds the name to. A model
    handed to a mixed-precision wrapper (``taker`` names its library) is kept here and
    listed: (variable, offset, library); the wrapper's effect is the project's
    (:mod:`mpcheck.project.models`). ``self.<attr>`` variables count only in ``held`` (a
    plain class's attributes; a module's parts follow the class that builds them). Last,
    (class, holder) for each model handed to a class's constructor: it follows that class
    if the project defines it, else it escapes (:mod:`mpcheck.project.models`). And
    (variable, offset, position, class) for each model returned (``return model``, ``return
    model, cfg``): the function's callers decide (:meth:`_Reader._factories`)."""
    models = {k: v for k, v in models.items() if not k.startswith("self.") or k in held}
    if not models:
        return set(), set(), [], set(), []
    holders: list[tuple[str, str]] = []
    bad: set[str] = set()
    escaped: set[str] = set()  # the models of a variable one function's use may cast
    scoped: dict[int, frozenset[str] | None] = {}  # holder -> the models handed there
    taken: list[tuple[str, int, str]] = []
    returns: list[tuple[str, int, int]] = []  # (variable, offset, position returned)
    aliases: dict[str, set[str]] = {}  # alias -> the variables it may stand for
    # (variable, method): a method of it handed on (``sample(model.forward_with_cfg)``)
    bound: list[tuple[str, str]] = []  # (the method, or else the functions: ``m|pkg.f``)
    methods: dict[str, set[tuple[str, str]]] = {}  # ``fn = model.m``: fn -> (model, m)
    todo = sorted(models)
    seen = set(todo)
    while todo:
        pattern = _names_pattern(todo)
        todo = []
        for match in pattern.finditer(code):
            key = match.group(1).decode()
            lib = _taken(code, match.start(), taker)
            if lib is not None:
                taken.append((key, match.start(), lib))
                continue
            kept = _keeps(code, match.start(), match.end(), keeping)
            if kept is True:
                continue
            if isinstance(
                kept, _PartCast
            ):  # (the model's own variable: its part's cast is recorded)
                if key not in models:
                    bad.add(key)
                continue
            if isinstance(kept, _Returned):
                returns.append((key, match.start(), kept.index))
                continue
            if isinstance(kept, Passed) and key in methods and key not in models:
                if key not in aliases:  # (an attribute bound to a name, handed on: ``layers =
                    # model.blocks[:2]``, then ``freeze(layers)``; a bound forward runs as is)
                    bound.extend(
                        (v, OR.join((m, *kept.functions)))
                        for v, m in methods[key]
                        if not _forward(m)
                    )
                    continue
            if isinstance(kept, Passed):
                here = scope(match.group(1), match.start()) if key in models else None
                for function in kept.functions:
                    holders.append((key, f"{function}{PASSED}"))
                    scoped[len(holders) - 1] = here  # (the function's own variable)
                continue
            if isinstance(kept, _Bound) and not kept.targets:
                bound.append((key, OR.join((kept.name, *kept.also))))
                continue
            if isinstance(kept, _Bound):
                for target in kept.targets:
                    methods.setdefault(target, set()).add((key, kept.name))
                    if target not in seen:
                        seen.add(target)
                        todo.append(target)
                continue
            if kept is False and key in methods and key not in aliases and key not in models:
                bound.extend((v, m) for v, m in methods[key] if m != "forward")
                continue  # (a bound method's use: a call of the model at most)
            if kept is False:
                here = scope(match.group(1), match.start()) if key in models else None
                if here is not None and here <= models[key]:
                    escaped.update(here)  # (the function's own variable: its models only)
                    continue
                bad.add(key)
                continue
            if isinstance(kept, str):
                holders.append((key, kept))
                if key in models:  # (the function's own variable: its models only)
                    scoped[len(holders) - 1] = scope(match.group(1), match.start())
                continue
            for alias in kept:
                aliases.setdefault(alias, set()).add(key)
                if alias not in seen:
                    seen.add(alias)
                    todo.append(alias)
    spread = True
    while spread:  # an alias that escapes takes what it stands for along
        spread = False
        for alias, sources in aliases.items():
            if alias in bad and not sources <= bad:
                bad |= sources
                spread = True
    unsafe = {cls for key in bad & set(models) for cls in models[key]} | escaped
    parts: set[tuple[str, str]] = set()
    for i, (key, holder) in enumerate(holders):
        sources = {key} if key in models else aliases.get(key, set())
        here = scoped.get(i)
        if key not in bad and here is not None and here <= models[key]:
            parts.update((cls, holder) for cls in here)
        elif key not in bad:
            parts.update((cls, holder) for s in sources if s in models for cls in models[s])
    for key, method in bound:
        sources = {key} if key in models else aliases.get(key, set())
        if key not in bad:
            parts.update(
                (cls, f"{cls}{METHOD}{method}{PASSED}")
                for s in sources
                if s in models and s not in bad
                for cls in models[s]
            )
    handed = [
        (source, at, lib)
        for key, at, lib in taken
        if key not in bad
        for source in sorted({key} if key in models else aliases.get(key, set()))
        if source in models and source not in bad
    ]
    returned = [
        (key, at, index, cls)
        for key, at, index in returns
        if key not in bad
        for source in sorted({key} if key in models else aliases.get(key, set()))
        if source in models and source not in bad
        for cls in sorted(models[source])
    ]
    return unsafe, set(models) - bad, handed, parts, returned


def _names_pattern(names: Iterable[str]) -> re.Pattern[bytes]:
    """Each use of one of ``names`` (not part of a longer name or an attribute), longest
    first. Each name checks what stands before it after it: a leading look-behind is tried
    at every offset of the file, a name only where its first letter stands. (Two names of
    one length never both match at one offset: their order among themselves is free, and
    the pattern of a set is compiled once: the same variables recur over a project.)"""
    return _uses_pattern(frozenset(names))


@lru_cache(maxsize=1024)
def _uses_pattern(names: frozenset[str]) -> re.Pattern[bytes]:
    return re.compile(
        rb"("
        + b"|".join(
            re.escape(v.encode()) + rb"(?<![\w.]" + re.escape(v.encode()) + rb")"
            for v in sorted(names, key=lambda v: (-len(v), v))
        )
        + rb")(?![\w])"
    )


_KEYWORD_BEFORE = re.compile(rb"[A-Za-z_]\w*\s*=\s*$")
# ``ema = deepcopy(model)`` / ``copy.deepcopy(model)`` (a chain after it: the copy still)
_COPY = re.compile(
    rb"^[ \t]*([A-Za-z_][\w.]*)[ \t]*=[ \t]*((?:copy\.)?deepcopy)"
    rb"[ \t]*\([ \t]*([A-Za-z_][\w.]*)[ \t]*\)",
    re.MULTILINE,
)
_TARGETS_BEFORE = re.compile(rb"[ \t]*(?:[\w.]+[ \t]*,[ \t]*)*")
_TARGETS_AFTER = re.compile(rb"(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*,?[ \t]*=(?!=)")
_CHAIN = re.compile(rb"(?:\s*\.\s*[A-Za-z_]\w*(?:\[[^\]\n]*\])?)*")
# (attributes, each maybe indexed once, with no space: a cast's receiver as :func:`_receiver`
# and :func:`_indexed_receiver` read it)
_PLAIN_CHAIN = re.compile(rb"(?:\.[A-Za-z_]\w*(?:\[[^\]\n]*\])?)+")
_INDEX = re.compile(rb"\[[^\]\n]*\]")
# ``model.blocks[:4]``, ``self.net.encoder``: attributes read off a name, each maybe indexed
_PART_READ = re.compile(rb"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*(?:\[[^\]\n]*\])?)+")
# ``.children()``, ``.values()``: what a loop over a part reads the part's modules through
_MEMBERS = rb"(?:\.(?:children|modules|values|named_children|items)\(\))?"
# ``model: Net = ...`` after the name: an annotated binding (not ``==``)
_ANNOTATED = re.compile(rb":[^=\n]*=(?!=)")
# ``p is model.emb.weight``, ``x == model.scale``: a comparison before the use
_COMPARED_BEFORE = re.compile(rb"(?:\bis(?:[ \t]+not)?|[=!]=)[ \t]*$")
# A method call's arguments that may set its dtype (a ``.to(x.dtype)`` of an input does not).
_HALF_ARGUMENT = re.compile(rb"half|float16|bfloat16|bf16|fp16|\b(?:torch_)?dtype\s*=(?!=)")
_ALIAS_LINE = re.compile(rb"[ \t]*((?:[A-Za-z_][\w.]*[ \t]*,[ \t]*)*[A-Za-z_][\w.]*)[ \t]*=(?!=)")
_ALIAS_END = re.compile(rb"[ \t]*(?:,|if\b|else\b|$)", re.MULTILINE)
_WITH_AS = re.compile(rb"\)\s*as\s+([A-Za-z_]\w*)")
_CASTING_METHOD = re.compile(rb"half|bfloat16|float16|fp16|bf16|double|dtype|precision|^type$")
_COMPARED = re.compile(rb"(?:is\b|==|!=|:\s*$)", re.MULTILINE)
# (``from diffusion import ...``: a module's name, not a variable's)
_BINDING_BEFORE = re.compile(rb"\b(?:as|for|del|from|import)[ \t]+$")
_DEF_BEFORE = re.compile(rb"(?:\bdef\s+\w+\s*|\blambda\b[^:\n]*)$")


@dataclass(frozen=True, slots=True)
class Passed:
    """A model handed to ``functions``, a function of another project file (``load_weights(
    pipeline, path)``), or a method of an object of a project class (``diffusion.
    training_losses(model, ...)``: ``pkg.SpacedDiffusion:training_losses``, one per class
    the object may be): it keeps its dtype if no definition of them casts."""

    functions: tuple[str, ...]


# ``(class, "pkg.f()>")`` among a record's ``held``: a model handed to the function ``pkg.f``;
# ``(class, "pkg.C:m()>")``: to the method ``m`` of an object of class ``pkg.C`` (or, for a
# bound method ``model.m`` handed on, the method ``m`` of the model's own class ``pkg.C``);
# ``(class, "pkg.C:m|pkg.f()>")``: that method, or else the function ``pkg.f`` keeping.
PASSED = "()>"
METHOD = ":"
OR = "|"


@dataclass(frozen=True, slots=True)
class _Copied:
    """``copy.deepcopy``: the copy has its source's class and dtypes, and its own uses."""


COPIED = _Copied()


@dataclass(frozen=True, slots=True)
class _Bound:
    """A use reading the attribute ``name`` of a model (``model.forward_with_cfg``) that
    would escape as a value: a bound method handed on is a call of the model by whatever
    takes it, so the model keeps its dtype if ``name`` is a method of its class that casts
    nothing; ``targets``: the names the attribute is bound to (``fn = model.forward``).
    Any other attribute (``encoder``, or a chain: ``emb.weight``) is a part or a tensor of
    the model, and what may cast it reaches that part at most, never the model: no part
    holds the module holding it (:meth:`mpcheck.project.models._Factories.attribute_read`)."""

    name: str
    targets: tuple[str, ...] = ()
    # the functions it is handed to (:class:`Passed`): if they cast nothing, a part read
    # and handed to them (``load(model.encoder)``) keeps its dtype too
    also: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _PartCast:
    """A cast of one part of a model (``model.encoder.half()``): ``nn.Module.half()`` walks
    its receiver's submodules only, so the model keeps its dtype and the part's class is
    cast (:mod:`mpcheck.project.held_parts`)."""


PART_CAST = _PartCast()


@dataclass(frozen=True, slots=True)
class _Returned:
    """A model variable returned by its function: at ``index`` of the returned tuple, or
    the whole value (-1)."""

    index: int


# A call's value: ``pkg.f()#1`` is what ``pkg.f`` returns at position 1, ``pkg.f()#`` all of it.
CALLED = "()#"
# ``f~i~R``: a project function ``f`` handed the registry ``R`` as its ``i``-th argument
# (:meth:`_Reader._built`); a registry's members ``~i`` say ``f`` returns that argument's build
HANDED = "~"


def callee(name: str) -> str:
    """The function a call's value names (``pkg.f`` of ``pkg.f()#1`` and of a registry
    helper's ``pkg.f~1~pkg.MODELS()#``)."""
    return name.partition(CALLED)[0].partition(HANDED)[0]


# ``@MODELS.register_module(...)`` at column 0, over a class or a function; the definition it
# decorates is the next top-level ``class``/``def``
_REGISTERED = re.compile(rb"^@[ \t]*([A-Za-z_][\w.]*)\.register_module\b", re.MULTILINE)
_DEFINED = re.compile(rb"^(?:async[ \t]+)?(?:class|def)[ \t]+(\w+)", re.MULTILINE)
# ``MODELS.register_module(name=..., module=Net)`` as a statement
_REGISTERS = re.compile(rb"^[ \t]*([A-Za-z_][\w.]*)\.register_module[ \t]*\(", re.MULTILINE)
_MODULE_KW = re.compile(rb"\bmodule[ \t]*=[ \t]*([A-Za-z_][\w.]*)")
# ``return builder.build(cfg)`` / ``return build_from_cfg(cfg, builder)``: a handed registry's
_RETURNS_BUILD = re.compile(
    rb"\breturn[ \t]+(?:([A-Za-z_]\w*)\.build[ \t]*\(|build_from_cfg[ \t]*\([^,()]*,[ \t]*"
    rb"([A-Za-z_]\w*)[ \t]*[,)])"
)
# The libraries' own registries (mmengine's ``MODELS``): their members are the library's, and
# the project's registries that name one as ``parent`` hold the project's
_LIBRARY_REGISTRIES = ("mmengine.", "mmcv.", "mmdet.", "mmseg.", "mmpretrain.")


def _joined(*maps: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """Registries' members from several readings of one file, each member once."""
    out: dict[str, tuple[str, ...]] = {}
    for found in maps:
        for name, members in found.items():
            out[name] = tuple(dict.fromkeys((*out.get(name, ()), *members)))
    return out


_DECLARED = re.compile(rb"[ \t]*(?:global|nonlocal)\b")
_RETURN_HEAD = re.compile(rb"[ \t]*return[ \t]+")
_ELEMENT_END = re.compile(rb"[ \t\r]*(,|\)|\n|$)")
# ``model = build(cfg)`` / ``model, cfg = build(cfg)``: a lowercase function's value bound
# (or ``model: Net = build(cfg)``: an annotated binding binds as a plain one)
_MADE = re.compile(
    rb"^[ \t]*((?:[A-Za-z_][\w.]*[ \t]*,[ \t]*)*[A-Za-z_][\w.]*)"
    rb"(?:[ \t]*,?|(?<!\belse)(?<!\btry)(?<!\bfinally)(?<!\bexcept)[ \t]*:[^=\n]*)[ \t]*=[ \t]*"
    rb"([A-Za-z_][\w.]*)[ \t]*\(",
    re.MULTILINE,
)
_MADE_CALL = re.compile(rb"=[ \t]*[A-Za-z_][\w.]*[ \t]*\(")  # (each match of ``_MADE`` holds one)
# ``NAME = {...}`` / ``[...]`` / ``(...)`` at column 0 holding no bracket, ``=`` or ``*``
# (a value that is no bare name): a module-level literal, maybe a registry
_REGISTRY = re.compile(
    rb"^([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=[ \t]*([\[{(])([^\[\]{}()=*]*)[\]})]", re.MULTILINE
)
_NAME = re.compile(rb"[A-Za-z_][\w.]*")
_TORCH_PREFIX = "torch."  # (torch's own classes: a wrapper or a layer, no project model)
# ``x = MODELS[key](`` / ``x = MODELS.get(key)(`` (group 2: the call), or ``build =
# MODELS[key]`` (a name bound to one of its values, called later)
_ITEM = re.compile(
    rb"^[ \t]*((?:[A-Za-z_][\w.]*[ \t]*,[ \t]*)*[A-Za-z_][\w.]*)[ \t]*,?[ \t]*=[ \t]*"
    rb"([A-Za-z_][\w.]*)[ \t]*(?:\[[^\]\n]*\]|\.get[ \t]*\([^()\n]*\))[ \t]*(?:(\()|$)",
    re.MULTILINE,
)
_ITEM_CALLEE = re.compile(r"([A-Za-z_][\w.]*)\s*(?:\[[^\]\n]*\]|\.get\s*\([^()\n]*\))\s*\(")
_ITEM_LEAD = re.compile(
    rb"=[ \t]*[A-Za-z_][\w.]*[ \t]*(?:\[[^\]\n]*\]|\.get[ \t]*\([^()\n]*\))[ \t]*(?:\(|$)",
    re.MULTILINE,
)
# Imported roots that are libraries, never the project's own functions (a cheap filter: a
# name that is no project function is dropped when the project joins the records anyway).
_NOT_PROJECT = frozenset(
    "torch numpy math os sys re json random logging time copy functools itertools collections "
    "typing pathlib argparse transformers diffusers accelerate einops safetensors huggingface_hub "
    "torchaudio torchvision librosa scipy PIL cv2 tqdm yaml omegaconf hydra gradio datasets "
    "lightning pytorch_lightning peft timm deepspeed soundfile pandas".split()
) | frozenset(
    # libraries of tensor kernels and tensor ops: their functions take and return tensors,
    # and they build no project class (unlike a registry or a wrapper returning the model it
    # is handed, ``torchao.autoquant(model)``), so a value of theirs is no model of the project
    "triton flash_attn flash_attn_interface xformers sageattention bitsandbytes kornia torch_npu "
    "fla".split()
)
# Methods of ``nn.Module`` that no tensor has: a value they are called on is a module.
_MODULE_ONLY = (
    rb"eval|parameters|named_parameters|state_dict|load_state_dict|modules|named_modules|children"
)
_SKIP_NAMES = frozenset({"self", "cls", "super", "print", "len", "isinstance", "getattr"})


def _return_index(code: bytes, start: int, end: int) -> int | None:
    """Where the expression at ``start:end`` sits in a ``return`` statement that returns it
    whole or as an element of a plain tuple (``return model``, ``return model, cfg``,
    ``return (\n Model(),\n vae,\n)``): its position, or -1 for the whole value; None when it
    is no such element (``return model.half()``, ``return f(model)``)."""
    after = _ELEMENT_END.match(code, end)
    if after is None:
        return None
    opening = enclosing(code, start)
    first = code.rfind(b"\n", 0, opening) + 1 if opening > 0 else 0
    if opening > 0 and code[first:opening].strip() == b"return":
        begin = opening + 1  # ``return (a, b)`` over one line or several
    else:
        line = code.rfind(b"\n", 0, start) + 1
        head = _RETURN_HEAD.match(code, line, start)
        if head is None:
            return None
        begin = head.end()
    commas = _element(code, begin, start)
    if commas is None:
        return None
    if commas or after.group(1) == b",":
        return commas
    return -1


def _element(code: bytes, begin: int, start: int) -> int | None:
    """How many elements of a tuple precede ``start`` (commas outside brackets between
    ``begin`` and it), or None when ``start`` does not begin an element."""
    depth, commas, last = 0, 0, begin
    for i in range(begin, start):
        c = code[i]
        if c in b"([{":
            depth += 1
        elif c in b")]}":
            depth -= 1
            if depth < 0:
                return None
        elif c == 0x2C and depth == 0:
            commas, last = commas + 1, i + 1
    if depth or code[last:start].strip(b" \t\r\n\\"):
        return None
    return commas


# The names a take is called by (:data:`~mpcheck.knowledge.wrappers.HANDING`): a method of
# a wrapper object or a call, led by its receiver or module (an alias is found by its import).
_TAKE_NAMES = sorted({k.rpartition(".")[2] for k in wrap.HANDING}, key=lambda n: (-len(n), n))
_TAKE_WORDS = tuple(n.encode() for n in _TAKE_NAMES)


def _take_call(words: Iterable[bytes]) -> re.Pattern[bytes]:
    """The calls of the names ``words`` (a take's method or function, led by no letter)."""
    words = tuple(words)
    # (``\b`` before a word's first letter is "led by no letter", and sre finds it faster;
    # a word led by a byte no ``\w`` is, a non-ASCII name, keeps the look-behind)
    led = b"\\b" if all(_IDENT_START.match(w) for w in words) else rb"(?<![\w])"
    return re.compile(led + b"(" + b"|".join(re.escape(w) for w in words) + rb")\s*\(")


_IDENT_START = re.compile(rb"[A-Za-z_]")


_TAKE_CALL = _take_call(_TAKE_WORDS)
_HEAD_CALL = re.compile(rb"([A-Za-z_][\w.]*)\s*\(")
# ``self.name = f(`` in a class body: the callee of a call whose value becomes an attribute
_SELF_BOUND_CALL = re.compile(rb"\bself\.\w+[ \t]*(?::[^=\n]+)?=[ \t]*([A-Za-z_][\w.]*)[ \t]*\(")
# A plain assignment in a function (the name in group 1, the value's first character in 2), a
# module method returning the module itself after a name (``.to(...)``, ``.half()``), and
# what binds a name otherwise (a tuple target or walrus, ``with ... as``, a loop's names):
# :meth:`_Reader._classes_in_scope`, compiled once rather than once per name
_ASSIGNMENT = re.compile(rb"^[ \t]+([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)[ \t]*(\S)", re.M)
_SAME_MODULE = re.compile(rb"\s*\.\s*(?:" + _SELF_METHODS + rb"|half|bfloat16)\s*\(")
_OTHER_BINDING = re.compile(
    rb"(?<![\w.])([A-Za-z_]\w*)(?=[ \t]*[,)\]][^=\n]*=(?!=)|[ \t]*:=)"
    rb"|\bas[ \t]+([A-Za-z_]\w*)\b|\bfor\b([^\n]*)\bin\b|\b(global|nonlocal)\b"
)
# (a name a loop binds: any identifier; ``_WORD`` below, CapWords, is the Bloom filter's)
_LOOP_NAME = re.compile(rb"(?<![\w.])[A-Za-z_]\w*")
# A line binding a call's value (or a method chain of it: ``Net(...).to(device)``) to a name
# binds something else too when it goes on with one of these (``A() if c else B()``)
_BRANCHING = re.compile(rb"\b(?:if|else|or|and)\b")
_KEPT_CHAIN = re.compile(rb"\.(?:to|cuda|cpu|eval|train|float)\s*\(")
# The receiver names of a library's wrapper object, when its file does not import the library
_WRAPPER_OBJECTS = (
    ("accelerator", "accelerate"),
    ("trainer", "lightning"),
    ("fabric", "lightning"),
)
_WRAPPER_OBJECT_WORDS = re.compile(rb"(?i)accelerator|trainer|fabric")


def _guessed_taker(callee: bytes) -> str | None:
    """The library a take ``x.method`` of a value named for its wrapper object belongs to
    (``self.accelerator.prepare``), for a file that does not import it; None for any other."""
    receiver, dot, method = callee.decode(errors="replace").rpartition(".")
    if not dot:
        return None
    tail = receiver.rpartition(".")[2].lower()
    for word, lib in _WRAPPER_OBJECTS:
        if word in tail and wrap.HANDING.get(f"{lib}.{method}", ((), -1))[1] != -1:
            return lib
    return None


def _handed_arguments(code: bytes, start: int, end: int) -> list[tuple[int, str | None, int, int]]:
    """A call's arguments from ``start`` to its ``)`` at ``end``: (position, keyword, begin,
    end) of each, stripped; a starred one (``*models``, ``**kwargs``) has position -1 and
    no keyword."""
    out: list[tuple[int, str | None, int, int]] = []
    position = 0
    for begin, stop in parts(code, start, end):
        text = code[begin:stop]
        lead = len(text) - len(text.lstrip())
        begin, stop = begin + lead, begin + len(text.rstrip())
        if begin >= stop:
            continue
        if code[begin] == 0x2A:  # ``*``
            out.append((-1, None, begin, stop))
            continue
        keyword = _ARGUMENT.match(code, begin, stop)
        if keyword is not None and keyword.group(1):
            value = (
                keyword.end()
                + len(code[keyword.end() : stop])
                - len(code[keyword.end() : stop].lstrip())
            )
            out.append((-1, keyword.group(1).decode(), value, stop))
            continue
        out.append((position, None, begin, stop))
        position += 1
    return out


def _binding(name: bytes) -> re.Pattern[bytes]:
    """The assignments of ``name`` to a call's value, the callee in group 1."""
    return compiled(
        rb"(?m)^[ \t]*" + re.escape(name) + rb"[ \t]*(?::[^=\n]*)?=[ \t]*([A-Za-z_][\w.]*)\s*\("
    )


def _not_model(callee: bytes) -> bool:
    """Whether a callee's last name says it builds no model (an optimizer, a scheduler, a data
    loader: :data:`~mpcheck.knowledge.wrappers.NOT_MODELS`)."""
    leaf = callee.rpartition(b".")[2].decode(errors="replace").lower()
    return any(word in leaf for word in wrap.NOT_MODELS)


def _taken(code: bytes, start: int, taker: Callable[[bytes], str | None]) -> str | None:
    """The library of the wrapper the value at ``start`` is an argument of (``prepare(model,
    opt)``, ``Trainer(model=model)``), or None."""
    before = code[max(0, start - 60) : start]
    keyword = _KEYWORD_BEFORE.search(before)
    if keyword is not None:
        before = before[: keyword.start()]
    before = before.rstrip(b" \t\n")
    if not before.endswith((b"(", b",")):
        return None
    opening = enclosing(code, start)
    if opening <= 0:
        return None
    window = code[max(0, opening - 200) : opening]
    return taker(window[len(window.rstrip(_IDENT + b".")) :])


def _keeps(
    code: bytes,
    start: int,
    end: int,
    keeping: Callable[[bytes], bool | str | Passed | _Copied] = lambda c: False,
) -> bool | list[str] | str | _Returned | Passed | _Bound | _PartCast:
    """Whether the use of a model variable at ``start:end`` keeps its dtype (True), might
    cast it (False), binds it to other names whose uses decide (their list), hands it to
    a class's constructor (its name), or returns it (:class:`_Returned`); reads a method
    of it that is handed on or bound (:class:`_Bound`), or casts one part of it
    (:data:`PART_CAST`: ``model.encoder.half()``). A deep copy of it (``deepcopy(
    model)``) is used as the copy is: the copy is a model of its class."""
    after = code[end : end + 60].lstrip(b" \t")
    if after.startswith(b"=") and not after.startswith(b"=="):
        return True  # bound again
    # (the attributes the use reads off the model, dotted, indexes dropped: ``emb.weight``
    # of ``model.emb.weight``, ``blocks`` of ``model.blocks[:4]``)
    attribute = ""
    line = code.rfind(b"\n", 0, start) + 1
    if after.startswith(b":") and _ANNOTATED.match(after) and not code[line:start].strip():
        return True  # ``model: Net = ...``: an annotated binding, bound again
    if _DECLARED.match(code, line):
        return True  # ``global model``: a declaration of the name, no use of the value
    index = _return_index(code, start, end)
    if index is not None:
        return _Returned(index)
    if _TARGETS_BEFORE.fullmatch(code, line, start) and _TARGETS_AFTER.match(code, end):
        previous = code[max(0, line - 200) : line].rstrip()  # (not an argument's own line)
        if previous[-1:] not in (b"(", b"[", b"{", b",", b"\\"):
            return True  # bound again, in a tuple (``model, opt = accelerator.prepare(...)``)
    if after.startswith(b"("):
        return True  # called
    chain = _CHAIN.match(code, end)
    if chain is not None and chain.end() > end:
        rest = code[chain.end() : chain.end() + 60].lstrip(b" \t")
        # (a method of a part is the part's: ``model.encoder.double()`` reaches the part,
        # never the model, which no part holds; :class:`_Bound` names the part)
        names = _attributes(chain.group())
        indexed = chain.group().endswith(b"]")  # (``model.blocks[0](x)``: an item of ``blocks``)
        held = names if indexed else names.rpartition(".")[0]
        method = b"" if indexed else names.rpartition(".")[2].encode()
        if rest.startswith(b"("):  # a method of it (or of a part of it) called
            # (``model.encoder.half()``, ``model.blocks[0].half()``: a cast of one part,
            # which :meth:`_Reader._casts` records as that part's; the model keeps its dtype)
            part = bool(held) and _PLAIN_CHAIN.fullmatch(chain.group())
            if part and method in (b"half", b"bfloat16"):
                return PART_CAST
            if _CASTING_METHOD.search(method):
                return _Bound(held) if held else False
            close = closing(code, chain.end() + code[chain.end() :].index(b"(") + 1)
            if method == b"to":  # (its own half ``.to(...)`` is a cast: :meth:`_Reader._casts`)
                if not held or not _halfish_args(code[chain.end() : close].strip(b" \t()")):
                    return True
                return PART_CAST if part else _Bound(held)
            if _HALF_ARGUMENT.search(code[chain.end() : close]):
                return _Bound(held) if held else False
            return True
        if rest.startswith(b"=") and not rest.startswith(b"=="):  # an attribute set
            if not _HALF_TEXT.search(rest[: rest.find(b"\n") % 60 + 1]):
                return True
            if names.rpartition(".")[2] in T.TENSOR_ONLY_ATTRIBUTES:
                return True  # ``p.data = p.data.bfloat16()``: that one tensor, no module
            return _Bound(held) if held else False  # (what holds the attribute set)
        end = chain.end()  # an attribute read: what it is handed to decides
        attribute = names
    rest = code[end : end + 60].lstrip(b" \t")
    if _COMPARED.match(rest) or _BINDING_BEFORE.search(code, max(0, start - 60), start):
        return True  # compared (``is None``), tested, or a name ``as``/``for`` binds
    if _COMPARED_BEFORE.search(code, max(0, start - 30), start):
        return True  # compared (``p is model.emb.weight``): no value handed on
    before = code[max(0, start - 60) : start]
    keyword = _KEYWORD_BEFORE.search(before)
    if keyword is not None:
        before = before[: keyword.start()]
    before = before.rstrip(b" \t\n")
    if _DEF_BEFORE.search(code, max(0, start - 200), start) or _DEF_BEFORE.search(before[:-1]):
        return True  # a parameter of ``def``/``lambda`` of the same name: no use
    opening = enclosing(code, start) if before.endswith((b"(", b",")) else -1
    if opening > 0:
        window = code[max(0, opening - 200) : opening]
        callee = window[len(window.rstrip(_IDENT + b".")) :]
        if _DEF_BEFORE.search(window[: len(window) - len(callee)] + callee):
            return True
        if callee.rpartition(b".")[2].decode() in _KEEPING_WRAPPERS:
            return True
        verdict = keeping(callee)
        if verdict is COPIED:  # ``deepcopy(model)``: the copy's use decides
            close = closing(code, opening + 1)
            if attribute:  # (a copy of a part: what may cast it reaches that part at most)
                return _bound(attribute)
            if not before.endswith(b"(") or code[end:close].strip():
                return False
            return _keeps(code, opening - len(callee), close + 1, keeping)
        if isinstance(verdict, Passed) and attribute and not _forward(attribute):
            return _Bound(attribute, also=verdict.functions)
        if isinstance(verdict, (str, Passed)):
            return verdict
        if verdict:
            found = _WITH_AS.match(code, closing(code, opening + 1))
            return [found.group(1).decode()] if found else True
        return _bound(attribute)
    assigned = _ALIAS_LINE.match(code, line, start)
    if assigned is not None and assigned.end() <= start and _ALIAS_END.match(code, end):
        between = code[assigned.end() : start]
        if between.count(b"(") == between.count(b")") and between.count(b"[") == between.count(
            b"]"
        ):
            targets = [t.strip() for t in assigned.group(1).decode().split(",")]
            if attribute:  # ``fn = model.forward_with_cfg``: a bound method (or a part)
                return _Bound(attribute, tuple(t for t in targets if t))
            return [t for t in targets if t]
    return _bound(attribute)


def _assignment(code: bytes, line: int, at: int) -> re.Match[bytes] | None:
    """The plain assignment whose value starts at ``at`` on the line starting at ``line``
    (its target is group 1), or None. A compound statement's body may share its header's
    line (``if big: model = Large()``, ``else: model = Net()``): the target then follows one
    of the header's colons, never the keyword before it."""
    if _ONE_LINE_HEAD.match(code, line, at) is None:
        return _ASSIGNED.match(code, line, at)
    colon = code.find(b":", line, at)
    while colon >= 0:
        found = _ASSIGNED.match(code, colon + 1, at)
        if found is not None:
            return found
        colon = code.find(b":", colon + 1, at)
    return None


def _bound(attribute: str) -> bool | _Bound:
    """A use that would escape: False, unless it reads an attribute of the model: a method
    (``forward`` of any module or part, which runs it as it is; another name: the project
    decides), a part or a tensor (``model.emb.weight`` in an optimizer's parameter group),
    which may at most be cast itself (the project says what it holds: a tensor holds none)."""
    if not attribute:
        return False
    if attribute.rpartition(".")[2] in T.MODEL_VALUE_ATTRIBUTES:
        return True  # ``latents.to(model.dtype)``: a dtype handed on, not the model
    return _forward(attribute) or _Bound(attribute)


def _forward(attribute: str) -> bool:
    return attribute.rpartition(".")[2] == "forward"


def _attributes(chain: bytes) -> str:
    """The attributes a chain read off a variable names, dotted, indexes and spaces dropped
    (``.blocks[:4]`` -> ``blocks``; ``.emb . weight`` -> ``emb.weight``): an item of a part
    is held by that part, as its class says (:mod:`mpcheck.project.held_parts`)."""
    return ".".join(n.strip().decode() for n in _INDEX.sub(b"", chain).split(b".")[1:] if n.strip())


def _casting_functions(spans: Iterable[tuple[re.Match[bytes], bool]]) -> dict[str, bool]:
    """Each function name this file defines -> whether some definition of it casts anything
    (``.half()``, a half dtype, a ``dtype`` value): a model handed to one that does not
    keeps its dtype there. ``spans``: :func:`_casting_spans`."""
    out: dict[str, bool] = {}
    for match, casts in spans:
        name = match.group(2).decode()
        out[name] = out.get(name, False) or casts
    return out


def _casting_spans(
    code: bytes, headers: Iterable[re.Match[bytes]]
) -> list[tuple[re.Match[bytes], bool]]:
    """Each ``def`` header (:data:`_DEF`) with whether its body casts anything."""
    out: list[tuple[re.Match[bytes], bool]] = []
    for match in headers:
        # the body ends at the next line holding code indented no deeper than the ``def``
        # (each leading whitespace byte counts one, as ``bytes.lstrip`` strips them)
        indent = len(match.group(1))
        pattern = _DEDENTS.get(indent)
        if pattern is None:
            pattern = _DEDENTS[indent] = re.compile(rb"\n[ \t\r\v\f]{0,%d}[^ \t\r\v\f\n]" % indent)
        found = pattern.search(code, match.end())
        stop = found.start() + 1 if found is not None else len(code)
        out.append((match, _CASTING_TEXT.search(code, match.end(), stop) is not None))
    return out


_DEF = re.compile(rb"^([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE)
_DEDENTS: dict[int, re.Pattern[bytes]] = {}
_MAIN = re.compile(rb"^if[ \t(]+__name__[ \t]*==", re.MULTILINE)
_KEEPING_EXPORTS = frozenset(
    {"torch.onnx.export", "torch.jit.trace", "torch.jit.script", "torch.export.export"}
)
# Calls that take sizes, values or a test of the object, never a module to change: what a
# model hands them (``torch.randn(n, model.in_channels)``, ``len(model.blocks)``,
# ``isinstance(model, nn.Module)``) leaves the model as it is.
_NUMBER_TAKERS = frozenset(
    {*T.FLOAT_FACTORIES, *T.INT_FACTORIES, *T.FACTORIES, *T.SHAPE_FACTORIES}
    | {"int", "float", "bool", "str", "range", "len", "round", "isinstance", "hasattr"}
)


# The callee written before a call's ``(``: ``diffusion.sample``, ``self.sampler.run``.
_CALLEE_BEFORE = re.compile(rb"[A-Za-z_][\w.]*\s*$")
_IDENT_OR_DOT = frozenset(
    bytes([c]) for c in b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_."
)
_SELF_BOUND = re.compile(rb"(self(?:\.[A-Za-z_]\w*)+)\s*(?::[^=\n]*)?=(?!=)")


def _bound_in(
    code: bytes, data: bytes, body: range, memo: dict[int, frozenset[bytes]]
) -> frozenset[bytes]:
    """The ``self.X`` names the class body ``body`` of ``code`` (blanked ``data``) assigns
    (``self.block = ...``, ``self.mid.block_1 = ...``, ``setattr(self, "block", ...)``), found
    once per body (``memo``: by the body's start)."""
    if body.start not in memo:
        found = _SELF_BOUND.finditer(code, body.start, body.stop)
        set_ = literal_setattrs(data, code, body.start, body.stop)
        memo[body.start] = frozenset(m.group(1) for m in found) | {t for t, _ in set_}
    return memo[body.start]


# ``dtype=compute_dtype`` (``torch_dtype=``) handing a call a bare name, and an assignment of a
# name from a call (``compute_dtype = _str_to_dtype(config.training.dtype)``)
_DTYPE_KEYWORD = re.compile(rb"[(,]\s*(?:torch_)?dtype\s*=\s*([A-Za-z_]\w*)\s*[,)]")
_ASSIGNED_FROM_CALL = rb"^[ \t]+%s[ \t]*(?::[^=\n]*)?=[ \t]*[\w.]+\("


def _computes_dtype(body: bytes) -> bool:
    """Whether a class body hands a call a dtype it computes itself: ``dtype=name`` of a
    name the body assigns from a call (a helper reading a configuration). A parameter of
    ``__init__`` (the factory kwargs' case) or a written dtype is none: the build that
    hands the parameter, or the dtype written, decides those. (Each name is looked up once:
    a body hands the same ``dtype=dtype`` to many of its parts.)"""
    names = dict.fromkeys(m.group(1) for m in _DTYPE_KEYWORD.finditer(body))
    return any(
        re.search(_ASSIGNED_FROM_CALL % re.escape(name), body, re.MULTILINE) for name in names
    )


def _decorated(code: bytes, at: int) -> bool:
    """Whether the last line holding code before the offset ``at`` starts with ``@`` (read
    from a window that grows until it holds that whole line: a copy of all the code before
    each class made the pass quadratic in a file's classes)."""
    size = 256
    while True:
        start = max(0, at - size)
        before = code[start:at].rstrip()
        if start == 0 or b"\n" in before:
            return before[before.rfind(b"\n") + 1 :].lstrip().startswith(b"@")
        size *= 4


def _plain(bases: bytes | None) -> bool:
    """A class without a base but ``object``: nothing casting it casts what it holds."""
    return not (bases or b"").replace(b"object", b"").strip(b" \t\n,")


_WORD = re.compile(rb"[A-Z]\w+")
WORD_BITS = 4096


def words_of(data: bytes) -> int:
    """A Bloom filter (two bits a word) of the CapWords ``data`` writes anywhere: a class
    whose name no other file writes is named nowhere else (a false positive only keeps a
    class reachable)."""
    bits = 0
    for word in set(_WORD.findall(data)):
        h = crc32(word)
        bits |= (1 << (h % WORD_BITS)) | (1 << ((h >> 12) % WORD_BITS))
    return bits


def may_write(words: int, name: str) -> bool:
    h = crc32(name.encode())
    return bool(words >> (h % WORD_BITS) & 1) and bool(words >> ((h >> 12) % WORD_BITS) & 1)


_AUTOCAST_WORD = re.compile(rb"\b(?:set_)?autocast(?:_enabled)?\b")  # (``set_autocast_enabled``)
_IMPORT_LINE = re.compile(rb"^[ \t]*(?:from\b|import\b)", re.MULTILINE)


def may_autocast(code: bytes, imports: Iterable[str]) -> bool:
    """Whether the file may turn autocast on: it names ``autocast`` other than in an import
    or a region spelled ``enabled=False`` (``torch.autocast(...)``, ``accelerator.autocast()``,
    ``ctx = torch.amp.autocast``), or imports a library whose trainers run models under one
    (:data:`mpcheck.knowledge.wrappers.AUTOCASTING`). ``code``: blanked (:func:`blank`)."""
    if any(wrap.autocasting(target) for target in imports):
        return True
    if b"autocast" not in code:
        return False
    for word in _AUTOCAST_WORD.finditer(code):
        line = code.rfind(b"\n", 0, word.start()) + 1
        if _IMPORT_LINE.match(code, line):
            continue  # (``from torch.amp import autocast``: a name, not a region)
        after = code[word.end() : word.end() + 80]
        rest = after.lstrip()
        if rest.startswith(b"("):
            opening = word.end() + len(after) - len(rest)
            if _disabled(code[opening : closing(code, opening + 1)]):
                continue  # ``autocast(..., enabled=False)``: turns it off
        return True
    return False


def may_autocast_float16(data: bytes, code: bytes, imports: Iterable[str]) -> bool:
    """Whether an autocast region the file may open may lower to float16: a trainer's (its
    precision is a setting), one entered by a name it does not call here (``set_autocast_
    enabled``, a stored ``torch.autocast``), or a call not written to lower to bfloat16
    (``dtype=torch.bfloat16``, a name the file binds to it only, or no dtype on the CPU,
    whose autocast defaults to bfloat16 where CUDA's defaults to float16). ``code``: blanked;
    ``data``: the same bytes unblanked (the device string)."""
    if any(wrap.autocasting(target) for target in imports):
        return True
    if b"autocast" not in code:
        return False
    for word in _AUTOCAST_WORD.finditer(code):
        line = code.rfind(b"\n", 0, word.start()) + 1
        if _IMPORT_LINE.match(code, line):
            continue
        after = code[word.end() : word.end() + 80]
        rest = after.lstrip()
        bound = _PARTIAL_OF.search(code, max(line, word.start() - 80), word.start())
        if bound is not None and rest.startswith(b","):
            rest = b"(" + rest[1:]  # (``partial(torch.autocast, "cuda", ...)``: its arguments)
        if word.group() != b"autocast" or not rest.startswith(b"("):
            return True
        start = word.end() + len(after) - len(rest) + 1
        end = closing(code, start)
        if _disabled(code[start:end]):
            continue
        cpu = code[line : word.start()].endswith(b"cpu.amp.")
        if _region_lowers_to(data, code, start, end, cpu) != "bfloat16":
            return True
    return False


_PARTIAL_OF = re.compile(rb"\bpartial\s*\(\s*(?:[\w.]*\.)?\Z")
_DTYPE_ARG = re.compile(rb"\bdtype\s*=\s*((?:self\.)?\w+)\s*(?:[,)]|$)")
_DEVICE_ARG = re.compile(rb"^\s*(?:device_type\s*=\s*)?[rbu]?[\"']([a-z]+)")


def _region_lowers_to(data: bytes, code: bytes, start: int, end: int, cpu: bool) -> str:
    """The half dtype the autocast call whose arguments span ``start:end`` lowers to, as
    written ("" when a variable not bound to one dtype, or a choice, decides it)."""
    written = written_dtype(code[start:end])
    if written:
        return written
    named = _DTYPE_ARG.search(code, start, end)
    if named is not None:  # (``self.amp_dtype``: what the file assigns it, as ever)
        return DtypeNames(code, data, attributes=True).half_of(*named.span(1))
    if named is None and b"dtype" in code[start:end]:
        return ""
    device = next(
        (m.group(1) for a, b in parts(data, start, end) if (m := _DEVICE_ARG.match(data[a:b]))),
        b"cpu" if cpu else b"",
    )
    return "bfloat16" if device == b"cpu" else "float16"


def _autocast_contexts(code: bytes, data: bytes) -> tuple[set[bytes], set[bytes]]:
    """The names (``ctx``, ``self._ctx``) the file binds to an enabled autocast region, on
    the line of the assignment or in the brackets it opens (``ctx = (nullcontext() if
    cpu else torch.amp.autocast(...))``, ``ctx = {"bf16": torch.autocast(...), "fp32":
    nullcontext()}[precision]``: the one its key picks); second, those of them one of whose
    regions is written for the CPU (``data``: the file's bytes, where strings are kept)."""
    out: set[bytes] = set()
    off: set[bytes] = set()
    cpu: set[bytes] = set()
    for call in _AUTOCAST_CALL.finditer(code):
        at = call.start()
        end = closing(code, call.end())
        disabled = _disabled(code[at:end])
        opening = innermost(code, at)
        start = opening if opening >= 0 and code[:opening].rstrip().endswith(b"=") else at
        line = code.rfind(b"\n", 0, start) + 1
        bound = _CONTEXT_BOUND.match(code, line)
        if bound is not None and bound.end() <= at and b"\n" not in code[bound.end() : start]:
            (off if disabled else out).add(bound.group(1))
            if _CPU_REGION.search(data, line, max(end, at) + 1):
                cpu.add(bound.group(1))
    # (a name that may hold a region turning autocast off covers nothing)
    return out - off, cpu & (out - off)


def _disabled(line: bytes) -> bool:
    return re.search(rb"enabled\s*=\s*False", line) is not None


def _halfish_args(text: bytes) -> bool:
    """A half dtype, or a dtype variable (``weight_dtype``, ``args.dtype``): the dtype a
    mixed-precision setting maps to, or one a caller passes. Only float32 written down is not."""
    return any(_HALFISH_BYTES.search(part.strip()) for part in text.split(b","))


def _getattr_call(data: bytes, end: int) -> int:
    """Where ``getattr(...)(...)`` ending at ``end`` starts (a value of a class picked by
    name), or -1."""
    if end <= 0 or data[end - 1 : end] != b")":
        return -1
    start = opening(data, end - 1)
    if start <= 0 or data[start - 1 : start] != b")":
        return -1
    inner = opening(data, start - 1)
    if inner < 7 or data[inner - 7 : inner] != b"getattr":
        return -1
    return inner - 7


# ``nn.Module`` methods that return the module itself: a cast at the end of a chain of them
# (``self.gpt.eval().half()``, ``Net().to(device).requires_grad_(False).half()``) casts the
# chain's receiver. ``.to(...)`` only when it names no dtype (a device, a memory format).
_RETURNS_SELF = re.compile(
    rb"\.\s*(" + b"|".join(m.encode() for m in sorted(T.MODULE_RETURNS_SELF)) + rb")\s*$"
)


def _module_chain(data: bytes, end: int) -> int:
    """Where the receiver of a cast at ``end`` ends once the calls of module methods that
    return the module (:data:`_RETURNS_SELF`) are peeled off it."""
    while end > 0 and data[end - 1 : end] == b")":
        inner = opening(data, end - 1)
        if inner <= 0:
            break
        found = _RETURNS_SELF.search(data, max(0, inner - 40), inner)
        if found is None or found.end() != inner:
            break
        if found.group(1) == b"to" and _halfish_args(data[inner + 1 : end - 1]):
            break
        end = found.start()
    return end


def _indexed_receiver(data: bytes, end: int) -> tuple[int, bytes]:
    """A receiver ending at ``end`` in an index (``model.blocks[0]``, ``layers[-1]``): its
    start and text, or ``(end, b"")``."""
    start = end
    while start > 0 and data[start - 1] == 0x5D:  # ``]``
        inner = opening(data, start - 1)
        if inner <= 0:
            return end, b""
        window = data[max(0, inner - 200) : inner]
        head = window[len(window.rstrip(_IDENT + b".")) :]
        if not head:
            return end, b""
        start = inner - len(head)
    if start == end or not _IDENT_START.match(data, start):
        return end, b""
    return start, data[start:end]


def _receiver(data: bytes, end: int) -> tuple[int, bytes]:
    """The receiver ending at ``end``: ``model``, ``self.unet``, ``Model(8)`` (its start)."""
    start = end
    if end > 0 and data[end - 1 : end] == b")":
        start = opening(data, end - 1)
        if start < 0:
            return end, b""
        if data[start - 1 : start] in (b"]", b")"):  # ``MODELS[key]()``, ``MODELS.get(k)()``
            inner = opening(data, start - 1)
            if inner > 0 and (data[inner] == 0x5B or data[max(0, inner - 4) : inner] == b".get"):
                start = inner - (4 if data[inner] == 0x28 else 0)
    window = data[max(0, start - 200) : start]
    head = window[len(window.rstrip(_IDENT + b".")) :]
    if not head or not (head[:1].isalpha() or head[:1] == b"_"):
        return end, b""
    return start - len(head), data[start - len(head) : end]


_WRAPPER_NAMES = re.compile(
    rb"(?<![\w])("
    + b"|".join(sorted({re.escape(n.rpartition(".")[2].encode()) for n in wrap.WRAPPERS}))
    + rb")\s*\("
)
_WRAPPER_LEAVES = tuple(sorted({n.rpartition(".")[2].encode() for n in wrap.WRAPPERS}))
# Each name a wrapper of :data:`~mpcheck.knowledge.wrappers.WRAPPERS` has, called: a pattern
# per name, led by the name and checking the word boundary behind it (a leading look-behind
# is tried at every offset of the file; a file holding none of the names needs no search).
_WRAPPER_CALLS = tuple(
    (leaf, re.compile(re.escape(leaf) + rb"(?<!\w" + re.escape(leaf) + rb")\s*\("))
    for leaf in _WRAPPER_LEAVES
)


def _names_wrapper(code: bytes) -> bool:
    """Whether ``code`` calls a name a wrapper of :data:`~mpcheck.knowledge.wrappers.WRAPPERS`
    has (what ``_WRAPPER_NAMES`` finds), looking for the bare names first."""
    return any(leaf in code and pattern.search(code) for leaf, pattern in _WRAPPER_CALLS)


# The suffix of an FSDP wrapper's effect when its policy casts the forward's inputs.
_INPUTS = "+inputs"
_POLICY_CALL = re.compile(
    rb"(?<![\w])("
    + b"|".join(sorted({re.escape(n.rpartition(".")[2].encode()) for n in wrap.FSDP_POLICIES}))
    + rb")\s*\("
)

_DEEPSPEED_HALF = re.compile(
    rb"[\"'](?:"
    + b"|".join(k.encode() for k in wrap.DEEPSPEED_HALF_KEYS)
    + rb")[\"']\s*:\s*\{[^{}]*[\"']enabled[\"']\s*:\s*(?:True|true)"
)


def _deepspeed_effect(code: bytes, data: bytes) -> str:
    """What ``deepspeed.initialize`` does to the model in this file: a cast when the file
    writes a configuration enabling half in code (``"bf16": {"enabled": True}``: its ``:``
    and ``{`` are code, not a comment's or a docstring's text); unknown when it writes a half
    block otherwise (``"fp16": {"enabled": args.fp16}``); else the configuration comes from
    outside the file, and the checkout's shipped configurations decide."""
    if _in_code(_DEEPSPEED_HALF, code, data):
        return wrap.CAST
    if _in_code(_DEEPSPEED_BLOCK, code, data):
        return wrap.UNKNOWN  # (a half block written in code, enabled by a value)
    return wrap.SHIPPED_DEEPSPEED


def _in_code(pattern: re.Pattern[bytes], code: bytes, data: bytes) -> bool:
    """Whether a match of ``pattern`` in ``data`` has its ``:`` and ``{`` in code."""
    for match in pattern.finditer(data):
        text = match.group()
        colon, brace = text.index(b":"), text.index(b"{")
        at = match.start()
        if code[at + colon] == 0x3A and code[at + brace] == 0x7B:
            return True
    return False


# A half block of a configuration (its ``enabled`` whatever it is)
_DEEPSPEED_BLOCK = re.compile(
    rb"[\"'](?:" + b"|".join(k.encode() for k in wrap.DEEPSPEED_HALF_KEYS) + rb")[\"']\s*:\s*\{"
)
_DEEPSPEED_WORD = re.compile(rb"(?i)deepspeed")
# The key a setting's value is read under: ``args.precision``, ``cfg["train"]["precision"]``.
_SETTING_KEY = re.compile(rb"(?:\.|\[\s*['\"])(\w+)['\"]?\s*\]?\s*$")
_LITERALS = re.compile(r"'[^']*'|\"[^\"]*\"|\b\d+\b")
_CLS_CALL = re.compile(rb"c(?<![\w.]c)ls\s*\(")  # (see ``_RETURN`` in returns.py)


_ARGUMENT = re.compile(rb"\s*(?:([A-Za-z_]\w*)\s*=(?!=))?")


def _arguments(code: bytes, data: bytes, start: int, end: int) -> dict[str | int, str]:
    """The arguments of the call whose text runs from ``start`` to ``end`` (its ``)``):
    keyword -> value as written, position -> value; split at the top level of ``code``
    (strings blanked), values read from ``data``."""
    out: dict[str | int, str] = {}
    depth, i, begin, position = 0, start, start, 0
    while i <= end:
        c = code[i] if i < end else 0x2C
        if c in b"([{":
            depth += 1
        elif c in b")]}":
            depth -= 1
        elif c == 0x2C and depth == 0:
            found = _ARGUMENT.match(code, begin, i)
            value = data[found.end() if found else begin : i].decode(errors="replace").strip()
            if found is not None and found.group(1):
                out[found.group(1).decode()] = value
            elif value and not value.startswith("*"):
                out[position] = value
                position += 1
            begin = i + 1
        i += 1
    return out
