"""Which functions outside a class run as part of a module's code: decided from call sites.

A script, trainer or sampler that casts a tensor to a dtype it does not spell
(``mask.to(weight_dtype)``) casts it to the run's working dtype, half on half runs
(:mod:`mpcheck.engine.casts`). A function defined outside any class is such code when the
project calls it only from scripts, trainers and samplers, or when nothing calls it (it is an
entry: ``main``). A function that a module's method calls (``rms_norm(x, self.scale)`` in
``RMSNorm.forward``, ``make_table(n, dtype)`` in ``__init__``), directly or through other
functions a module calls, runs with the module's own values: a dtype it does not spell there
(``x.to(dtype)`` of a ``dtype`` it computed) may be any part's own dtype, as in the module's
methods, and is no working dtype.

Each file's part comes from one cheap pass over its blanked code (strings and comments
emptied, :func:`mpcheck.project.records.blank`), kept in its record: ``defined`` (its
top-level functions), ``methods`` (a function a method of one of its classes calls: callee,
qualified class) and ``functions`` (callee, calling top-level function), every callee named
by its qualified name (resolved through the file's imports: ``from .ops import rms_norm``,
``ops.rms_norm(x)``). :class:`ModuleCode` joins them over the project; a class is a module
when a base is ``torch.nn``'s or looks like a model's (:data:`MODULE_BASE_SUFFIXES`), or is
such a project class. A function the project calls only from other code (scripts, datasets,
plain classes; no pipeline or sampler, which run models) is in :attr:`ModuleCode.outside`:
what it is handed is data, not a model's activation (:func:`mpcheck.engine.functions._handed`).
"""

from __future__ import annotations

import builtins
import keyword
import re
from bisect import bisect_left
from collections.abc import Callable, Mapping

from mpcheck.knowledge import torch_api as T
from mpcheck.project import lines
from mpcheck.project.arguments import (
    FULL,
    HALF,
    INT,
    NUMBER,
    UNKNOWN,
    Handed,
    arguments_of,
    keyed,
)
from mpcheck.project.brackets import enclosing
from mpcheck.project.construction import body_end
from mpcheck.project.lines import line_matches

__all__ = ["CallersPass", "ModuleCode", "callers_of"]

# One file's pass: (top-level functions), ((callee, class), ...), ((callee, function), ...),
# ((callee, what each call hands it, (line, column) of its first such call), ...)
# (:mod:`mpcheck.project.arguments`; ``("!",)``: the function's name is written without a
# call, so it may be called with anything)
Spot = tuple[int, int]
CallersPass = tuple[
    tuple[str, ...],
    tuple[tuple[str, str], ...],
    tuple[tuple[str, str], ...],
    tuple[tuple[str, Handed, Spot], ...],
]
EMPTY: CallersPass = ((), (), (), ())
ESCAPED: Handed = ("!",)

_SKIP = frozenset(w.encode() for w in (*keyword.kwlist, *dir(builtins), "self", "cls", "super"))
# Libraries a file imports functions from: nobody's helper in the project (kept out of records).
_LIBRARIES = frozenset(
    """torch numpy math einops scipy random os re sys json logging functools itertools typing
    collections transformers diffusers accelerate safetensors PIL cv2 tqdm warnings inspect
    copy time pathlib dataclasses contextlib""".split()
)
# A call of a lowercase name: ``f(``, ``mod.f(`` (a longer chain is a method of an object).
# (The look-behind after the first letter: only letters are tried, not every offset.)
_CALL = re.compile(rb"([a-z_](?<![\w.][a-z_])\w*)(?:\.([a-z_]\w*))?[ \t]*\(")


def callers_of(
    code: bytes,
    module: str,
    imports: Mapping[str, str],
    stars: bool,
    headers_read: list[re.Match[bytes]] | None = None,
    raw: bytes | None = None,
) -> CallersPass:
    """The call sites in ``code`` (blanked) of functions, by caller: see the module docstring.

    ``module``: the file's dotted path; ``imports``: what each name its imports bind stands
    for (``ops`` -> ``pkg.ops``); ``stars``: it star-imports (a bare name may come from any);
    ``headers_read``: its headers (:func:`~mpcheck.project.lines.headers`), when read;
    ``raw``: the code before blanking (the string keys of subscripts are read from it)."""
    headers = []  # (start, end of body, indent, kind, name)
    names_at = set()  # (where a header's name stands: no call)
    for match in lines.headers(code) if headers_read is None else headers_read:
        indent = len(match.group(1).expandtabs())
        end = body_end(code, match.end(), indent)
        headers.append((match.start(), end, indent, match.group(2), match.group(3).decode()))
        names_at.add(match.start(3))
    top = {name for _, _, indent, kind, name in headers if indent == 0 and kind == b"def"}
    # Only names that may be the project's functions are looked for: its own top-level
    # functions, and what its imports bind outside the libraries (not classes: CapWords).
    heads = {
        name
        for name, target in imports.items()
        if not name[:1].isupper() and target.partition(".")[0] not in _LIBRARIES
    }
    heads.update(top)
    if not heads and not stars:
        return tuple(sorted(_qualify(module, n) for n in top)), (), (), ()
    wanted = {h.encode() for h in heads}
    memo: dict[tuple[bytes, bytes | None], str | None] = {}

    def qualified(head: bytes, attr: bytes | None) -> str | None:
        if head in _SKIP:
            return None
        name = head.decode()
        if attr is not None:
            found = imports.get(name)
            return None if found is None else f"{found}.{attr.decode()}"
        if name in top:
            return _qualify(module, name)
        found = imports.get(name)
        if found is not None:
            return found
        return _qualify(module, name) if stars else None  # (through the stars)

    # The spans of top-level functions and of the methods of top-level classes, with who
    # calls from there: ("class", qualified class) or ("function", qualified function).
    spans: list[tuple[int, int, str, str]] = []
    stack: list[tuple[int, bytes, str]] = []  # the open headers: (end, kind, qualified name)
    for start, end, indent, kind, name in headers:
        while stack and stack[-1][0] <= start:
            stack.pop()
        full = _qualify(module, name)
        if not stack and kind == b"def" and indent == 0:
            spans.append((start, end, "function", full))
        elif len(stack) == 1 and stack[0][1] == b"class" and kind == b"def":
            spans.append((start, end, "class", stack[0][2]))  # (a nested helper: its method's)
        stack.append((end, kind, full))
    methods: set[tuple[str, str]] = set()
    functions: set[tuple[str, str]] = set()
    for start, end, kind, owner in spans:
        if not stars and not any(code.find(w, start, end) >= 0 for w in wanted):
            continue  # (no project function's name written there: no call of one)
        for call in _CALL.finditer(code, start, end):
            key = (call.group(1), call.group(2))
            if (key[0] not in wanted and not stars) or call.start() in names_at:
                continue  # (no project function, or a header: no call)
            if key not in memo:
                memo[key] = qualified(*key)
            callee = memo[key]
            if callee is None or callee == owner:
                continue
            (methods if kind == "class" else functions).add((callee, owner))
    defined = (_qualify(module, name) for name in top)
    handed = _handed(code, wanted, names_at, spans, imports, qualified, raw)
    return tuple(sorted(defined)), tuple(sorted(methods)), tuple(sorted(functions)), handed


def _handed(
    code: bytes,
    wanted: set[bytes],
    names_at: set[int],
    spans: list[tuple[int, int, str, str]],
    imports: Mapping[str, str],
    qualified: Callable[[bytes, bytes | None], str | None],
    raw: bytes | None,
) -> tuple[tuple[str, Handed, Spot], ...]:
    """Each call of a project function in ``code`` (module level too) with what it hands,
    and each name of one written without a call (:data:`ESCAPED`), with where the first of
    them is (line, column; 1-based)."""
    found: dict[tuple[str, Handed], int] = {}  # -> the offset of the first
    values = code if raw is None else keyed(code, raw)  # (what the arguments are read from)
    starts = sorted((start, end) for start, end, _, _ in spans)
    froms = _from_brackets(code)
    for word in wanted:
        at = code.find(word)
        while at >= 0:
            end = at + len(word)
            here, at = at, code.find(word, end)
            before = code[here - 1] if here else 0x0A
            if before in _WORD or before == 0x2E or end < len(code) and code[end] in _WORD:
                continue  # (part of another name, or an attribute: ``x.f``)
            if here in names_at or _in_import(code, here, froms):
                continue
            attr = _ATTR.match(code, end)
            after = attr.end() if attr is not None else end
            callee = qualified(word, attr.group(1) if attr is not None else None)
            if callee is None:
                continue
            opened = _OPEN.match(code, after)
            if opened is None:
                found[callee, ESCAPED] = min(here, found.get((callee, ESCAPED), here))
                continue
            start = next((s for s, e in reversed(starts) if s <= here < e), 0)
            args, _ = arguments_of(values, opened.end() - 1, start, imports)
            found[callee, args] = min(here, found.get((callee, args), here))
    return tuple(sorted((callee, args, _spot(code, at)) for (callee, args), at in found.items()))


def _spot(code: bytes, at: int) -> Spot:
    """The line and column (1-based) of the offset ``at``."""
    line = code.rfind(b"\n", 0, at) + 1
    return code.count(b"\n", 0, at) + 1, at - line + 1


_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_ATTR = re.compile(rb"\.([a-z_]\w*)")
_OPEN = re.compile(rb"[ \t]*\(")


def _in_import(code: bytes, at: int, froms: list[int]) -> bool:
    """Whether the name at ``at`` stands in an import statement (its line, or the line of
    the bracket holding it, starts with ``from`` or ``import``). ``froms``: the offsets of
    the brackets on lines that start with ``from`` (:func:`_from_brackets`)."""
    line = code.rfind(b"\n", 0, at) + 1
    text = code[line:at].lstrip()
    if text.startswith((b"from ", b"import ")):
        return True
    # (the bracket :func:`enclosing` finds lies within its reach before ``at``: with no
    # bracket of a ``from`` line there, none holds the name; most names are far below them)
    near = bisect_left(froms, at - _REACH)
    if near == len(froms) or froms[near] >= at:
        return False
    opened = enclosing(code, at, _REACH)
    if opened < 0:
        return False
    line = code.rfind(b"\n", 0, opened) + 1
    return code[line:opened].lstrip().startswith(b"from ")


_REACH = 1999  # (how far back :func:`enclosing` looks for the bracket holding a name)
_FROM_LINE = re.compile(rb"[ \t\r\x0b\x0c]*from [^\n]*")
_FROM_WORD = re.compile(rb"from ")


def _from_brackets(code: bytes) -> list[int]:
    """The offsets, in order, of the ``(`` on each line whose text starts with ``from``
    (``from .outputs import (``): the only brackets :func:`_in_import` looks for."""
    found: list[int] = []
    for line in line_matches(_FROM_LINE, _FROM_WORD, code):
        at = code.find(b"(", line.start(), line.end())
        while at >= 0:
            found.append(at)
            at = code.find(b"(", at + 1, line.end())
    return found


def _qualify(module: str, name: str) -> str:
    return f"{module}.{name}" if module else name


class ModuleCode:
    """The project's functions that module code calls, joined from each file's pass.

    ``classes``: every project class (qualified) with its bases as its file resolves them;
    ``resolve_class``: the project class a base names (None when none); ``resolve``: a
    qualified name through the project's re-exports (None when unknown)."""

    def __init__(
        self,
        passes: Mapping[str, CallersPass],
        classes: Mapping[str, tuple[str, ...]],
        resolve_class: Callable[[str], str | None],
        resolve: Callable[[str], str | None],
        paths: Mapping[str, str] | None = None,
    ) -> None:
        self.classes = classes  # (``passes``: each file's, by its module; ``paths``: its file)
        self.resolve_class = resolve_class
        self._modules: dict[str, bool] = {}
        defined = {name for names, *_ in passes.values() for name in names}
        from_modules: set[str] = set()
        calls: dict[str, set[str]] = {}  # caller function -> its callees
        by_leaf: dict[str, list[str]] = {}
        for name in defined:
            by_leaf.setdefault(name.rpartition(".")[2], []).append(name)

        def target(callee: str) -> list[str]:
            if callee in defined:
                return [callee]
            again = resolve(callee)
            if again is not None and again in defined:
                return [again]
            if callee.rpartition(".")[0] not in passes:
                # ``module.mel_processing.f`` imported from a script's own directory, defined
                # as ``pkg.module.mel_processing.f``: the one project function it can be
                longer = [
                    n
                    for n in by_leaf.get(callee.rpartition(".")[2], ())
                    if n.endswith(f".{callee}")
                ]
                return longer if len(longer) == 1 else []  # (else a library's: ``np.mean``)
            # (re-exported or star-imported: any project function of that name may be meant)
            return by_leaf.get(callee.rpartition(".")[2], [])

        found = passes.values()
        # callee -> what each of its calls hands it (:mod:`mpcheck.project.arguments`)
        self._handed: dict[str, set[Handed]] = {}
        # (callee, what a call hands) -> where the first such call is: (path, line, column)
        self._where: dict[tuple[str, Handed], tuple[str, int, int]] = {}
        for module, (*_, handed) in passes.items():
            path = (paths or {}).get(module, module)
            for callee, args, (line, column) in handed:
                for name in target(callee):
                    self._handed.setdefault(name, set()).add(args)
                    where = (path, line, column)
                    self._where[name, args] = min(where, self._where.get((name, args), where))
        called: set[str] = set()  # (by anything: a module, a script, a plain class)
        from_runners: set[str] = set()  # (by a module, a pipeline or a sampler)
        owners: dict[str, set[str]] = {}  # function -> the classes whose methods call it
        for _, methods, functions, _ in found:
            for callee, owner in methods:
                targets = target(callee)
                called.update(targets)
                for name in targets:
                    owners.setdefault(name, set()).add(owner)
                if self.module_class(owner):
                    from_modules.update(targets)
                    from_runners.update(targets)
                elif self._runner(owner):
                    from_runners.update(targets)
            for callee, owner in functions:
                targets = target(callee)
                called.update(targets)
                calls.setdefault(owner, set()).update(targets)
        todo = list(from_modules)
        while todo:
            for callee in calls.get(todo.pop(), ()):
                if callee not in from_modules:
                    from_modules.add(callee)
                    todo.append(callee)
        self.called = frozenset(from_modules)
        # Called in the project, and never from a module's, a pipeline's or a sampler's code
        # (which hand it a model's outputs, the pipeline's CFG helper): its tensor inputs are
        # what scripts, datasets and plain classes hand it, data rather than activations.
        todo = list(from_runners)
        while todo:
            for callee in calls.get(todo.pop(), ()):
                if callee not in from_runners:
                    from_runners.add(callee)
                    todo.append(callee)
        self.outside = frozenset(called - from_runners)
        self.defined = frozenset(defined)
        # (a function's callers' classes reach what it calls: ``f`` -> ``g`` spreads them)
        todo = sorted(owners)
        while todo:
            caller = todo.pop()
            for callee in calls.get(caller, ()):
                more = owners.get(caller, set()) - owners.get(callee, set())
                if more:
                    owners.setdefault(callee, set()).update(more)
                    todo.append(callee)
        self.owners: Mapping[str, frozenset[str]] = {k: frozenset(v) for k, v in owners.items()}

    def _runner(self, name: str) -> bool:
        """A class whose code runs models or computes on their tensors (by its name or a
        base's): a pipeline, a sampler, a ``torch.autograd.Function`` (its ``forward`` runs
        inside a model's), an attention processor (diffusers calls it with the attention
        module's hidden states)."""
        names = (name, *self.classes.get(name, ()))
        return any(_runs_models(n) for n in names)

    def module_class(self, name: str, depth: int = 0) -> bool:
        """Whether the project class ``name`` is an ``nn.Module`` (through its bases)."""
        if name not in self._modules:
            self._modules[name] = False  # (a cycle of bases proves nothing)
            self._modules[name] = any(
                self._module_base(b, depth) for b in self.classes.get(name, ())
            )
        return self._modules[name]

    def _module_base(self, base: str, depth: int) -> bool:
        if base in T.MODULE_BASES or base.startswith("torch.nn."):
            return True
        project = self.resolve_class(base)
        if project is not None and project in self.classes and depth < 16:
            return self.module_class(project, depth + 1)
        return base.rsplit(".", 1)[-1].endswith(T.MODULE_BASE_SUFFIXES)

    def runs_with(self, function: str) -> frozenset[str] | None:
        """The module classes whose code runs the project function ``function`` (qualified),
        directly or through other functions; its values are theirs, since scripts, datasets
        and plain classes hand it data (:attr:`outside`). None when its values may come from
        elsewhere: a pipeline or sampler reaches it (they run models), a call hands it a half
        value, or its name is handed on without a call (anything may call it)."""
        if function not in self.defined:
            return None
        for args in self._handed.get(function, ()):
            if args == ESCAPED or any(v.rpartition("=")[2] == HALF for v in args):
                return None
        owners = self.owners.get(function, frozenset())
        if any(self._runner(c) for c in owners):
            return None
        return frozenset(c for c in owners if self.module_class(c))

    def full_inputs(self, function: str, params: tuple[str, ...]) -> dict[str, str]:
        """The parameters (of ``params``, in order) that every call of the project function
        ``function`` (qualified) hands no half value, with what they are handed: a number at
        every call (:data:`NUMBER`: no tensor), an integer or bool tensor at every call
        (:data:`INT`), else full precision, integers or numbers (:data:`FULL`: not half).
        None when nothing calls it or its name is handed on without a call (then anything
        may call it)."""
        calls = self._handed.get(function)
        if not calls or ESCAPED in calls:
            return {}
        kinds: dict[str, set[str]] = {name: set() for name in params}
        for args in calls:
            given: dict[str, str] = {}
            for index, value in enumerate(args):
                name, equals, kind = value.partition("=")
                if equals:
                    given[name] = kind
                elif value == "*":
                    return {}  # (``f(*args)``: which parameter gets what is unknown)
                elif index < len(params):
                    given[params[index]] = value
            for name in list(kinds):
                handed = given.get(name, UNKNOWN)
                if handed in _SAFE:
                    kinds[name].add(handed)
                else:
                    del kinds[name]
        return {name: _class_of(found) for name, found in kinds.items()}

    def half_call(
        self, function: str, params: tuple[str, ...], param: str
    ) -> tuple[str, int, int, bool] | None:
        """Where the project function ``function`` (qualified) is handed, for its parameter
        ``param`` (of ``params``, in order), a value that may be half, when its other calls
        hand that parameter no half value: the call that keeps it an activation (path, line,
        column, and whether the call writes a half cast). None when no call hands it a value
        known not to be half, or none may hand it half."""
        calls = self._handed.get(function)
        if not calls or ESCAPED in calls or param not in params:
            return None
        index = params.index(param)
        others: list[tuple[bool, tuple[str, int, int]]] = []
        safe = False
        for args in calls:
            if "*" in args:
                return None
            given = next((v.partition("=")[2] for v in args if v.startswith(f"{param}=")), None)
            if given is None and index < len(args) and "=" not in args[index]:
                given = args[index]
            if given in _SAFE:
                safe = True
            elif given is not None:
                others.append((given != HALF, self._where[function, args]))
        if not safe or not others:
            return None
        unknown, (path, line, column) = min(others)  # (a half cast first, then the first)
        return path, line, column, not unknown

    @property
    def digest(self) -> str:
        """The functions module code calls, and what the calls hand (a cache key part)."""
        handed = sorted((k, sorted(map(_reduced, v))) for k, v in self._handed.items())
        # (only the functions a call hands something full: an edit of other calls changes
        # no answer of :meth:`full_inputs`, and must not recheck the project)
        handed = [(k, v) for k, v in handed if all(c and c != ESCAPED and "*" not in c for c in v)]
        # (and where the calls :meth:`half_call` may name are: those beside such calls)
        kept = {k for k, _ in handed}
        where = sorted(
            (k, self._where[k, a])
            for k, calls in self._handed.items()
            if k in kept
            for a in calls
            if any((v.partition("=")[2] or v) not in _SAFE for v in a)
        )
        owners = sorted((k, sorted(v)) for k, v in self.owners.items())
        return repr((sorted(self.called), sorted(self.outside), handed, owners, where))


_SAFE = frozenset({FULL, NUMBER, INT})


def _class_of(kinds: set[str]) -> str:
    """What a parameter handed values of ``kinds`` (each no half) is: numbers only, integer
    tensors only, else full precision (not half: float32, or integers beside it)."""
    if kinds == {NUMBER}:
        return NUMBER
    return INT if kinds == {INT} else FULL


def _reduced(args: Handed) -> Handed:
    """What :meth:`ModuleCode.full_inputs` reads of a call: the slots (position or keyword)
    handed full precision, an integer or a number, with their kind; a splat or an escape as
    it is."""
    if args == ESCAPED or "*" in args:
        return args
    slots = []
    for index, value in enumerate(args):
        name, equals, kind = value.partition("=")
        if (kind if equals else value) in _SAFE:
            slots.append(value if equals else f"{index}:{value}")
    return tuple(slots)


def _runs_models(name: str) -> bool:
    """Whether the class (or base) ``name`` is one of :meth:`ModuleCode._runner`'s kinds."""
    leaf = name.rpartition(".")[2]
    if leaf.endswith(("Pipeline", *T.SAMPLER_SUFFIXES)) or name.endswith("autograd.Function"):
        return True
    return leaf.endswith("Processor") and ("Attn" in leaf or "Attention" in leaf)
