"""The engine's side of the project phase: a file's summary, made by walking it.

A file is parsed and walked once, silently (no rule listens), with the summaries of what
it imports; what each top-level function returns becomes plain data
(:mod:`mpcheck.project.summary`) for the files that import it.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path

import libcst as cst

from mpcheck.engine.analysis import FileAnalysis
from mpcheck.engine.averages import keeper
from mpcheck.engine.binding import fixed_default
from mpcheck.engine.facts import Kind, Prec
from mpcheck.engine.frames import ClassInfo
from mpcheck.engine.functions import torch_module
from mpcheck.engine.imported import value_of
from mpcheck.engine.keep_fp32 import keep_patterns
from mpcheck.engine.kept_residual import kept_residuals
from mpcheck.engine.partial_cast import casts_to_half
from mpcheck.engine.scaler_patch import fp16_unscale_params
from mpcheck.files.parsing import Unparsable, parse, parseable
from mpcheck.files.source import SourceError, SourceFile
from mpcheck.knowledge import torch_api as T
from mpcheck.knowledge import training_api
from mpcheck.project.exports import exported, exported_of_source
from mpcheck.project.index import ModuleIndex, site_roots
from mpcheck.project.models import forget_uses
from mpcheck.project.names import ImportTable, children, dotted
from mpcheck.project.store import Cached, Dependencies, Lookup, Summaries, Symbol
from mpcheck.project.summary import ClassSummary, Function, ModuleSummary, Place, Value
from mpcheck.ruleset.hooks import Site, SiteKind

__all__ = ["FileSummariser", "ProjectSession", "forget", "summaries_for"]

Placer = Callable[[cst.CSTNode], tuple[int, int]]  # a node's line and column, for messages


class _Silent:
    """A listener that wants nothing: summarising reports no findings."""

    def wants(self, kind: SiteKind) -> bool:
        return False

    def deliver(self, kind: SiteKind, site: Site) -> None:
        """Never called: :meth:`wants` says no to every kind."""


class FileSummariser:
    """Reads a file's imports cheaply (CPython's parser), and walks it when summarised."""

    def __init__(
        self,
        root: Path,
        *,
        module_half_capable: bool = True,
        target_torch: tuple[int, int] | None = None,
        read: Callable[[Path], bytes] = Path.read_bytes,
    ) -> None:
        self._root = root
        self._half = module_half_capable
        self._target = target_torch  # whose autocast lists the walks use
        self._read = read  # (the language server reads an open editor buffer instead)

    def imports(self, path: Path) -> Iterable[tuple[str, int]]:
        """The module-level imports: the edges that order summaries (one found only inside
        a function is summarised when first asked for, which is as correct, if later)."""
        try:
            data = self._read(path)
        except OSError:
            return []
        found: list[tuple[str, int]] = []
        for statement in _import_statements(data):
            try:
                tree = ast.parse(statement)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue  # a line of a string that only looks like an import
            for node in tree.body:
                if isinstance(node, ast.Import):
                    found += [(alias.name, 0) for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    found += [
                        (f"{base}.{a.name}" if base else a.name, node.level) for a in node.names
                    ]
        return found

    def summarise(self, path: Path, lookup: Lookup) -> ModuleSummary | None:
        try:
            data = self._read(path)
        except OSError:
            return None
        tree = None
        if not _worth_walking(data):  # nothing to walk, but it may re-export what others define
            tree = _cpython_tree(data)  # (libcst's parse is many times the cost of CPython's)
            cheap = ImportTable.of_source(data, tree) if tree is not None else None
            if tree is not None and cheap is not None:
                names, public, stars = exported_of_source(tree)
                shown = _shown_path(path, self._root)
                reexports = _reexports(cheap)
                return ModuleSummary(
                    "",
                    shown,
                    classes=_trainer_classes(tree, cheap),
                    constants=_numbers(tree, shown),
                    reexports=reexports,
                    names=names,
                    public=public,
                    stars=stars,
                )
        module = parse(data)
        if isinstance(module, Unparsable):
            return None
        table = ImportTable.of(module)
        if not _worth_walking(data):
            names, public, stars = exported(module)
            shown = _shown_path(path, self._root)
            reexports = _reexports(table)
            classes = _trainer_classes(tree, table) if tree is not None else {}  # (parsed above)
            return ModuleSummary(
                "",
                shown,
                classes=classes,
                reexports=reexports,
                names=names,
                public=public,
                stars=stars,
            )
        walk = FileAnalysis(
            module,
            table,
            _Silent(),
            module_half_capable=self._half,
            source=data,
            target_torch=self._target,
            project=lambda dotted, level: lookup(path, dotted, level),
        )
        try:
            walk.run()
            return self.summary_of(walk, path)
        except (RecursionError, ValueError, KeyError, AttributeError, TypeError):
            return None  # the file's own check reports what went wrong with it
        finally:
            walk.release()

    def partner(self, path: Path) -> ModuleSummary | None:
        """What an import-cycle partner may know of ``path``: only what its text alone decides
        (its imports are never looked up), so no summary depends on the order files are read.
        That is its re-exports and its module classes built in a fixed half-precision
        default (``__init__(..., dtype=torch.half)``, see :mod:`mpcheck.engine.replacements`)."""
        try:
            data = self._read(path)
        except OSError:
            return None
        if b"dtype" not in data or not parseable(data):
            return None
        shown = _shown_path(path, self._root)
        if b"half" not in data and b"float16" not in data:  # no half default: imports only
            cheap = ImportTable.of_source(data)  # (libcst's parse is many times the cost)
            if cheap is not None:
                return ModuleSummary("", shown, reexports=_reexports(cheap))
        module = parse(data)
        if isinstance(module, Unparsable):
            return None
        table = ImportTable.of(module)
        text = data.decode("utf-8", "replace")
        classes = {}
        for stmt in module.body:
            if not isinstance(stmt, cst.ClassDef):
                continue
            bases = tuple(table.resolve(a.value) or "" for a in stmt.bases if not a.keyword)
            init = next((f for f in _methods(stmt) if f.name.value == "__init__"), None)
            found = fixed_default(init, table.resolve)
            if found is None or found.dtype == "float32" or not any(map(torch_module, bases)):
                continue
            line, column = _placer(module, text, _init_at(text, stmt.name.value))(found.default)
            at = Place(shown, line, column, module.code_for_node(found.default))
            default = (found.position, at, found.dtype, found.guards)
            classes[stmt.name.value] = ClassSummary(bases, True, False, dtype_default=default)
        reexports = _reexports(table)
        return ModuleSummary("", shown, classes=classes, reexports=reexports)

    def summary_of(self, walk: FileAnalysis, path: Path) -> ModuleSummary:
        """The summary a finished walk of ``path`` gives (a check's walk gives the same)."""
        module, table = walk.module, walk.imports
        shown = _shown_path(path, self._root)
        try:
            text = SourceFile.decode(walk.source).text  # not ``module.code``: a full codegen
        except SourceError:
            text = ""
        functions = {}
        patches = "_unscale_grads_" in text  # (only such a file can patch a scaler)
        for name, fn in walk.functions.items():
            fact = walk.summaries.get(fn)
            if fact is None:
                continue
            place = _placer(module, text, text.find(f"def {name}("))
            casts = tuple(sorted(walk.param_casts.get(fn, ())))
            unscale = fp16_unscale_params(fn) if patches else ()
            functions[name] = Function(
                _params(fn, method=False),
                value_of(fact, place, shown),
                casts,
                unscale,
                casts_to_half(fn),
            )
        classes = {}
        residual = _kept_residuals(walk, text, shown)
        for stmt in module.body:
            info = walk.classes.get(stmt.name.value) if isinstance(stmt, cst.ClassDef) else None
            if info is not None and info.node is stmt:
                start = text.find(f"class {stmt.name.value}")
                place = _placer(module, text, start)
                summary = _class_summary(walk, info, place, shown, text)
                if stmt.name.value in residual:
                    summary = replace(summary, kept_residual=residual[stmt.name.value])
                classes[stmt.name.value] = summary
        names, public, stars = exported(module)
        return ModuleSummary(
            "",
            shown,
            functions=functions,
            classes=classes,
            constants=_constants(walk, _placer(module, text, 0), shown),
            reexports=_reexports(table) | _aliases(module, table),
            names=names,
            public=public,
            stars=stars,
        )


def _trainer_classes(tree: ast.Module, table: ImportTable) -> dict[str, ClassSummary]:
    """The file's classes deriving transformers' ``Trainer`` or ``TrainingArguments``: a
    file that never names torch defines them too, and a file building one needs to know
    what ``train()`` steps (:meth:`mpcheck.engine.training_loop.Tracker.derived_call`)."""
    found: dict[str, ClassSummary] = {}
    for stmt in tree.body:
        if not isinstance(stmt, ast.ClassDef):
            continue
        written = (ast.unparse(b) for b in stmt.bases)
        bases = tuple(table.resolve_name(b) or "" for b in written)
        if any(
            b in training_api.HF_TRAINERS or b in training_api.HF_TRAINING_ARGUMENTS for b in bases
        ):
            found[stmt.name] = ClassSummary(bases, False, False)
    return found


def _kept_residuals(
    walk: FileAnalysis, text: str, shown: str
) -> dict[str, tuple[str, str, tuple[Place, ...]]]:
    """Each class's kept-float32 part joining a residual stream ahead of a fused norm, as
    places (see :mod:`mpcheck.engine.kept_residual`); only files that keep parts float32."""
    if "_keep_in_fp32_modules" not in text:
        return {}
    module = walk.module

    def at(owner: str, node: cst.CSTNode, words: str) -> Place:
        line, column = _placer(module, text, text.find(f"class {owner}"))(node)
        return Place(shown, line, column, words)

    out = {}
    for name, found in kept_residuals(module, walk.imports.resolve).items():
        places = [
            at(*found.keep, f"`_keep_in_fp32_modules` keeps `{found.kept}` float32"),
            at(*found.join, f"`{found.kept}`'s float32 output joins the residual stream here"),
            at(*found.norm, "the next layer's norm, half, is given that float32 stream"),
        ]
        if found.substituted is not None:
            text_of = module.code_for_node(found.substituted).strip()
            places.append(at("", found.substituted, f"`{text_of}` when apex is importable"))
        out[name] = (found.strict, found.kept, tuple(places))
    return out


def _methods(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return [f for f in body if isinstance(f, cst.FunctionDef)]


def _placer(module: cst.Module, text: str, start: int) -> Placer:
    """Where a node is, found by its text after ``start`` (its function's ``def``, its class's
    ``class``): cheap, unlike a position pass over the whole file, and only for messages."""

    def place(node: cst.CSTNode) -> tuple[int, int]:
        code = module.code_for_node(node)
        offset = text.find(code, max(start, 0))
        if offset < 0:  # decided in a helper defined above (``get_timestep_embedding``)
            offset = text.find(code)
        if offset < 0 and "\n" in code:  # libcst re-indents the lines after the first
            head = code.split("\n", 1)[0]
            offset = text.find(head, max(start, 0))
        if offset < 0:
            return 0, 0
        line_start = text.rfind("\n", 0, offset) + 1
        return text.count("\n", 0, offset) + 1, offset - line_start + 1

    return place


def _params(fn: cst.FunctionDef, *, method: bool) -> tuple[str, ...]:
    params = [*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params]
    names = tuple(p.name.value for p in params)
    return names[1:] if method and names[:1] in (("self",), ("cls",)) else names


def _init_at(text: str, name: str) -> int:
    """Where class ``name``'s ``__init__`` starts in ``text``: its defaults are found from
    there, not from the class's docstring, which often quotes them (``default is
    torch.float32``)."""
    start = text.find(f"class {name}")
    found = text.find("def __init__(", max(start, 0))
    return found if found >= 0 else start


def _class_summary(
    walk: FileAnalysis, info: ClassInfo, place: Placer, shown: str, text: str
) -> ClassSummary:
    """What another file needs of a class: its bases, parts, kept-float32 parts and public
    methods (``forward`` among them; a private helper is no other file's business)."""
    name = info.node.name.value
    methods = {}
    for method, fn in info.methods.items():
        fact = walk.summaries.get(fn)
        if fact is not None and (not method.startswith("_") or method == "__call__"):
            methods[method] = Function(_params(fn, method=True), value_of(fact, place, shown))
    attrs: dict[str, Value] = {}
    submodules: dict[str, str] = {}
    kept: set[str] = set(walk.keep.kept_params.get(name, ()))
    patterns = sorted(p for p in keep_patterns(info.node) if "." not in p)
    for key, fact in info.attrs.items():
        attr = key[len("self.") :]
        if fact.kind not in (Kind.MODULE, Kind.TENSOR) or fact.maybe or "{" in attr:
            continue  # (``self.scaler{}``, a family under computed names, stays in its file)
        attrs[attr] = value_of(fact, place, shown)
        if fact.kind is Kind.MODULE:
            submodules[attr] = _kind(walk, fact.layer)
            if fact.prec is Prec.FULL or attr in walk.keep.names:
                kept.add(attr)
    # a norm whose every weight is float32 (``torch.ones(d, dtype=torch.float32)``) and whose
    # ``forward`` computes in them (not a rotary table cast to its input's dtype)
    forward = methods.get("forward")
    weights = [v for v in attrs.values() if v.kind == Kind.TENSOR.value]
    all_fp32 = (
        bool(weights)
        and all(v.prec == Prec.FULL.value for v in attrs.values())
        and forward is not None
        and forward.returns.prec == Prec.FULL.value
    )
    default = fixed_default(info.methods.get("__init__"), walk.imports.resolve)
    fixed = None
    if default is not None and info.is_module:
        init = _placer(walk.module, text, _init_at(text, name))
        line, column = init(default.default)
        at = Place(shown, line, column, walk.module.code_for_node(default.default))
        fixed = (default.position, at, default.dtype, default.guards)
    return ClassSummary(
        bases=info.bases,
        is_module=info.is_module,
        keep_fp32=info.kept_fp32 or (info.is_module and all_fp32),
        keep_fp32_attrs=tuple(sorted(kept)),
        submodules=submodules,
        methods=methods,
        attrs=attrs,
        keep_patterns=tuple(patterns),
        dtype_default=fixed,
        feeds_weights=info.feeds_weights,
        casts_input=info.is_module and "forward" in info.methods and info.casts_input,
        fed_inputs=tuple(sorted(info.fed_inputs)),
        adapter_casts=_sorted(walk.keep.casts.get(name)),
        feeds=_feeds(walk, info, methods, shown, text),
        averages="" if info.is_module else keeper(info.node),
    )


def _feeds(
    walk: FileAnalysis, info: ClassInfo, methods: Mapping[str, Function], shown: str, text: str
) -> tuple[tuple[str, tuple[int, ...], Place], ...]:
    """Each public method's first Linear, conv or RNN call taking its inputs as they came
    (:func:`mpcheck.engine.inputs.refusing_inputs`), placed, with the layer as written."""
    if not info.is_module:
        return ()
    out = []
    for (method, at), calls in info.feeds.items():
        found = next(
            (f for n, via in calls if (f := _fed_layer(walk, info, method, n, via, 3))), None
        )
        if method not in methods or found is None:
            continue
        owner, name, node = found
        start = text.find(f"class {owner.node.name.value}")
        line, column = _placer(walk.module, text, text.find(f"def {name}(", max(start, 0)))(node)
        out.append((method, at, Place(shown, line, column, walk.module.code_for_node(node.func))))
    return tuple(sorted(out, key=lambda f: (f[0], f[1])))


def _fed_layer(
    walk: FileAnalysis, owner: ClassInfo, method: str, node: cst.Call, via: str, depth: int
) -> tuple[ClassInfo, str, cst.Call] | None:
    """The Linear, conv or RNN call that gets a method's input as it came: ``node`` itself
    ("" ``via``: a layer, or a module whose summary says so), or, for a module of this
    file's class ``via`` (``self.decoder(z)``), the one its ``forward`` hands its first
    input to (``self.conv_in(z)``); with the class and method it is in. None: none does."""
    if not via:
        return owner, method, node
    info = walk.classes.get(via)
    calls = info.feeds.get(("forward", (0,)), []) if info is not None and depth > 0 else []
    for inner, further in calls:
        assert info is not None
        found = _fed_layer(walk, info, "forward", inner, further, depth - 1)
        if found is not None:
            return found
    return None


def _sorted(names: frozenset[str] | None) -> tuple[str, ...] | None:
    return None if names is None else tuple(sorted(names))


def _kind(walk: FileAnalysis, layer: str | None) -> str:
    """``norm``, ``attention``, ``layer`` (other weights), its class, or ``module``."""
    info = walk.classes.get(layer or "")
    if info is not None:
        return "keep-fp32" if info.kept_fp32 else layer or "module"
    op, _ = T.LAYERS.get(layer or "", (None, ""))
    if op is T.OpKind.NORM:
        return "norm"
    if op is T.OpKind.ATTENTION:
        return "attention"
    return "layer" if op is not None else layer or "module"


def _constants(walk: FileAnalysis, place: Placer, shown: str) -> dict[str, Value]:
    """Module-level dtypes (``DTYPE = torch.float16``), models cast at the top level, and
    Python numbers (``NEAR_INF = 1e20``: whether a fill value fits float16 is known only
    with its value, wherever it is imported)."""
    env = walk.script.env if walk.script is not None else {}
    found = {}
    for name, fact in env.items():
        if "." in name or fact.maybe:
            continue
        if fact.kind is Kind.SCALAR and fact.value is not None:
            found[name] = value_of(fact, place, shown)
        elif fact.kind in (Kind.DTYPE, Kind.MODULE) and fact.prec in (Prec.FULL, Prec.HALF):
            found[name] = value_of(fact, place, shown)
    return found


def _reexports(table: ImportTable) -> dict[str, tuple[str, int, str]]:
    """Each imported name's origin, so lookups through this module reach it."""
    reexports = {name: (target, 0, "") for name, target in table.aliases.items()}
    reexports |= {n: (t, table.levels[n], "") for n, t in table.relative.items()}
    return reexports


def _aliases(module: cst.Module, table: ImportTable) -> dict[str, tuple[str, int, str]]:
    """Module-level names bound once, to an imported name (``BatchNorm2d =
    torch.nn.BatchNorm2d``): re-exported like imports, so lookups reach what they name."""
    found: dict[str, tuple[str, int, str]] = {}
    for stmt in module.body:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
        if not isinstance(small, cst.Assign) or len(small.targets) != 1:
            continue
        target, value = small.targets[0].target, small.value
        qual = table.resolve(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
        if isinstance(target, cst.Name) and qual is not None:
            found[target.value] = (qual, 0, "")
    if not found:
        return found
    bound = _module_bindings(module)
    return {name: origin for name, origin in found.items() if bound[name] == 1}


def _module_bindings(module: cst.Module) -> Counter[str]:
    """How often each module-level name is bound by an assignment, an import, a ``def`` or a
    ``class``, in ``if``/``try``/``with`` blocks at module level too (not inside functions or
    classes)."""
    bound: Counter[str] = Counter()
    stack: list[cst.CSTNode] = list(module.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.ClassDef, cst.FunctionDef)):
            bound[node.name.value] += 1
        elif isinstance(node, cst.Assign):
            bound.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
        elif isinstance(node, (cst.Import, cst.ImportFrom)):
            if not isinstance(node.names, cst.ImportStar):
                bound.update(_bound_name(alias) for alias in node.names)
        else:
            stack.extend(children(node))
    return bound


def _bound_name(alias: cst.ImportAlias) -> str:
    """The name an import binds: ``np`` for ``import numpy as np``, ``os`` for ``os.path``."""
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return (dotted(alias.name) or "").partition(".")[0]


def _shown_path(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


_Key = tuple[str, bool, bool, tuple[int, int] | None, tuple[str, ...]]
_STORES: dict[_Key, tuple[Summaries, FileSummariser]] = {}


def summaries_for(
    root: str,
    module_half_capable: bool,
    cached: Cached | None = None,
    *,
    site: bool = False,
    target_torch: tuple[int, int] | None = None,
    roots: tuple[str, ...] = (),
) -> tuple[Summaries, FileSummariser]:
    """The process's summaries of the project at ``root`` (made on first use; ``cached``
    serves summaries kept from earlier runs and must be given by that first use). ``site``:
    imports of installed libraries are followed too (``follow-imports = "site"``); ``roots``:
    more directories to import from (``src``)."""
    key = (root, module_half_capable, site, target_torch, roots)
    if key not in _STORES:
        summariser = FileSummariser(
            Path(root), module_half_capable=module_half_capable, target_torch=target_torch
        )
        index = ModuleIndex((Path(root), *map(Path, roots)), site_roots() if site else ())
        store = Summaries(index, summariser, cached, partner=summariser.partner)
        _STORES[key] = (store, summariser)
    return _STORES[key]


def forget() -> None:
    """Drop every summary: a new run must see the files as they are now."""
    _STORES.clear()
    forget_uses()


class ProjectSession:
    """One file's check against the project: the lookups its walk makes, and afterwards
    its walk's summary, kept so that files importing it need not walk it again."""

    def __init__(
        self,
        root: str,
        filename: str,
        module_half_capable: bool,
        *,
        site: bool = False,
        target_torch: tuple[int, int] | None = None,
        roots: tuple[str, ...] = (),
    ) -> None:
        self._summaries, self._summariser = summaries_for(
            root, module_half_capable, site=site, target_torch=target_torch, roots=roots
        )
        self._path = Path(filename)
        self._summaries.begin(self._path)

    def lookup(self, dotted: str, level: int) -> Symbol | None:
        return self._summaries.lookup(self._path, dotted, level)

    def end(self, walk: FileAnalysis | None) -> tuple[ModuleSummary | None, Dependencies]:
        """Close the check; its summary and what it consulted."""
        summary = None if walk is None else self._summariser.summary_of(walk, self._path)
        return summary, self._summaries.end(self._path, summary)


# An import at column 0: at the file's start, or after a newline (a literal first byte lets
# the regex engine skip ahead at C speed, where ``^`` with MULTILINE tries every position).
_FIRST_IMPORT = re.compile(rb"(?:from|import)[ \t\\(]")
_NEXT_IMPORT = re.compile(rb"\n(?:from|import)[ \t\\(]")


def _import_statements(data: bytes) -> Iterator[bytes]:
    """The source of each import statement that starts a line at column 0: the module-level
    imports, without parsing the whole file (CPython's parser costs about 10 CPU seconds per
    worker on transformers, for edges that only order the summaries). A line of a string
    that looks like one is dropped by the caller when it does not parse."""
    starts = [0] if _FIRST_IMPORT.match(data) else []
    starts += [match.start() + 1 for match in _NEXT_IMPORT.finditer(data)]
    for start in starts:
        newline = data.find(b"\n", start)
        line = data[start:] if newline < 0 else data[start:newline]
        if b"(" in line or b"\\" in line:  # (most imports are one line: no scan needed)
            line = data[start : _statement_end(data, start)]
        yield line


def _statement_end(data: bytes, start: int) -> int:
    """Where the logical line from ``start`` ends: at a newline outside brackets that no
    backslash continues; comments are skipped (their brackets do not count)."""
    depth, i, n = 0, start, len(data)
    while i < n:
        c = data[i]
        if c in b"([{":
            depth += 1
        elif c in b")]}":
            depth -= 1
        elif c == 0x23:  # ``#``: to the end of the line
            newline = data.find(b"\n", i)
            i = n if newline < 0 else newline
            continue
        elif c == 0x5C:  # ``\``: the next character (a newline) is continued
            i += 2
            continue
        elif c == 0x0A and depth <= 0:
            return i
        i += 1
    return n


def _numbers(tree: ast.Module, shown: str) -> dict[str, Value]:
    """Python numbers bound once at the top of a file without torch (``NEAR_INF = 1e20`` in a
    utils module): an importing file needs the value to tell whether it fits float16."""
    found: dict[str, Value] = {}
    bound: Counter[str] = Counter()
    for stmt in tree.body:
        if not isinstance(stmt, ast.Assign):
            continue
        names = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
        bound.update(names)
        number = _number(stmt.value)
        if number is not None and len(names) == len(stmt.targets) == 1:
            text = f"`{names[0]} = {ast.unparse(stmt.value)}`"
            at = Place(shown, stmt.lineno, stmt.value.col_offset + 1, text)
            found[names[0]] = Value("scalar", origin=at, cause="literal", number=number)
    return {name: value for name, value in found.items() if bound[name] == 1}


def _number(node: ast.expr) -> float | None:
    negated = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
    inner = node.operand if isinstance(node, ast.UnaryOp) and negated else node
    if not isinstance(inner, ast.Constant) or isinstance(inner.value, bool):
        return None
    if not isinstance(inner.value, (int, float)):
        return None
    return -float(inner.value) if negated else float(inner.value)


def _cpython_tree(data: bytes) -> ast.Module | None:
    """CPython's tree of a file that is not walked, parsed once for its imports and exports;
    None when CPython cannot parse it (libcst then decides)."""
    if not parseable(data):
        return None
    try:
        return ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _worth_walking(data: bytes) -> bool:
    """Whether a file's functions may return something dtype-bearing: it names torch, or it
    loads a model forwarding keywords (``from_pretrained(path, **kwargs)``), which hands on
    the ``torch_dtype`` its callers pass without naming torch itself."""
    return b"torch" in data or (b"from_pretrained" in data and b"**" in data)
