"""The summaries a check reaches, made on first use and looked up by import.

Only a module something is looked up in is summarised (walked), and then each file once;
its own lookups summarise what it needs in turn. Import cycles are common in real packages
(``modeling.py`` imports ``utils.py``, which imports ``modeling.py`` for a type), so the
import graph's strongly connected components are found first (from the cheap import lists
alone) and a module sees its cycle partners as unknown, whichever file the run reached
first. That keeps every summary independent of the order files are read.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from mpcheck.project.index import ModuleIndex
from mpcheck.project.summary import (
    ClassSummary,
    Exports,
    External,
    Function,
    ModuleSummary,
    Pool,
    Value,
)

__all__ = ["CYCLE", "Cached", "Lookup", "Summaries", "Summariser", "Symbol", "Walker"]

Symbol = Function | Value | ClassSummary | ModuleSummary | External | Exports
Lookup = Callable[[Path, str, int], Symbol | None]
# What a module's summary (or a check) consulted: each project file whose summary it used,
# directly or through other summaries, with the digest it saw (CYCLE: seen as unknown
# because it was an import-cycle partner; that cannot be judged by digest).
Dependencies = dict[Path, str | None]
CYCLE = "cycle"
# A summary kept from an earlier run, when it is still valid: the summary and what it consulted.
Cached = Callable[[Path], tuple[ModuleSummary | None, Dependencies] | None]
# A walk that also checks the module it summarises (its findings are kept for when the file's
# own check comes): given the path and the lookup to walk with, the summary and what to call
# once the walk is over, with its dependencies and whether it saw the project as the module's
# own check would have (see ``Summaries.walker``). None: declined, summarise it.
Walker = Callable[[Path, Lookup], tuple[ModuleSummary, Callable[[Dependencies, bool], None]] | None]
REEXPORT_HOPS = 8  # ``__init__`` re-exporting a re-export ...: enough for real packages


class Summariser(Protocol):
    """What the engine provides: a file's imports, and its summary given a lookup."""

    def imports(self, path: Path) -> Iterable[tuple[str, int]]:
        """``(dotted, level)`` of every import in the file (``from ..a import b``: ``a.b``, 2)."""
        ...

    def summarise(self, path: Path, lookup: Lookup) -> ModuleSummary | None:
        """The file's summary; ``lookup(importer, dotted, level)`` answers its imports."""
        ...


class Summaries:
    """Summaries of project files keyed by resolved path, computed lazily and cycle-safely."""

    def __init__(
        self,
        index: ModuleIndex,
        summariser: Summariser,
        cached: Cached | None = None,
        *,
        partner: Callable[[Path], ModuleSummary | None] | None = None,
    ) -> None:
        self._index = index
        self._engine = summariser
        self._cached = cached
        # What a cycle partner may know of a module: what its text alone decides (no lookup)
        self._partner = partner
        self._partners: dict[Path, ModuleSummary | None] = {}
        self._done: dict[Path, ModuleSummary | None] = {}
        self._pool = Pool()  # what the kept summaries share
        self._deps: dict[Path, Dependencies] = {}  # what each summary consulted, transitively
        self._component: dict[Path, int] = {}  # each module's strongly connected component
        self._importers: Counter[Path] = Counter()  # how many modules seen import each one
        self._imports: dict[Path, list[Path]] = {}  # each mapped module's edges (``_edges``)
        self._open: set[int] = set()  # components with a member being summarised
        self._collecting: list[Dependencies] = []  # one per walk under way, innermost last
        # Beside each: the summaries whose dependencies it holds already (:meth:`_consulted`)
        self._merged: list[set[Path]] = []
        self._validating: set[Path] = set()
        self._digests: dict[Path, str | None] = {}
        # The walks under way, innermost last: each one's component, and whether it met the
        # open component of a walk it is nested in (its own check would not have: tainted).
        self._walks: list[list[int | bool]] = []
        # Set by a run that checks files through the cache: summarising a module the run will
        # check anyway checks it at once, so the file is read, parsed and walked only once.
        self.walker: Walker | None = None

    def of(self, path: Path) -> ModuleSummary | None:
        """The summary of ``path`` (None when it cannot be summarised, or when a module of its
        import cycle is being summarised: cycle partners see each other as unknown)."""
        path = self._index.resolved(path)
        if path not in self._component:
            self._components_from(path)
        component = self._component[path]
        if component in self._open:
            self._taint(component)
            self._consulted(path, CYCLE)
            return None
        if path not in self._done:
            self._summarise(path, component)
        self._consulted(path, self.digest(path))
        return self._done[path]

    def digest(self, path: Path) -> str | None:
        """The digest of the current summary of ``path`` (None: it has none; CYCLE: it is
        being summarised, so it cannot be judged now)."""
        path = self._index.resolved(path)
        if path in self._digests:
            return self._digests[path]
        if path not in self._done:
            self.of(path)
            if path not in self._done:
                return CYCLE
        summary = self._done[path]
        self._digests[path] = None if summary is None else summary.digest
        return self._digests[path]

    def dependencies(self, path: Path) -> Dependencies:
        """What the summary (or check) of ``path`` consulted, transitively."""
        return self._deps.get(self._index.resolved(path), {})

    def _summarise(self, path: Path, component: int) -> None:
        if self._cached is not None and path not in self._validating:
            self._validating.add(path)
            self._collecting.append({})  # what validation consults is not a dependency
            self._merged.append(set())
            try:
                kept = self._cached(path)  # may consult (and summarise) changed dependencies
            finally:
                self._validating.discard(path)
                self._collecting.pop()
                self._merged.pop()
            if path in self._done:  # validating it needed it: it was walked meanwhile
                return
            if kept is not None:
                self._keep(path, *kept)
                return
        self._open.add(component)
        self._collecting.append({})
        self._merged.append(set())
        self._walks.append([component, False])
        finish = None
        try:
            walked = None if self.walker is None else self.walker(path, self.lookup)
            if walked is None:
                summary = self._engine.summarise(path, self.lookup)
            else:
                summary, finish = walked
        finally:
            self._open.discard(component)
            deps = self._collecting.pop()
            self._merged.pop()
            tainted = self._walks.pop()[1]
        self._keep(path, summary, deps)
        if finish is not None:
            finish(deps, not tainted)

    def _taint(self, component: int) -> None:
        """The innermost walk looked up a module of the open ``component``: unless it is the
        walk that opened it (its own cycle), it saw that module as unknown, which its own
        check would not have. The walks around it are not tainted by that: they see only the
        summary it makes, which the store keeps, so their own checks would see the same."""
        if self._walks and self._walks[-1][0] != component:
            self._walks[-1][1] = True

    def _consulted(self, path: Path, digest: str | None) -> None:
        """The innermost walk used the summary of ``path`` (``CYCLE``: saw it as unknown, a
        partner of an open import cycle), and so what that summary consulted. A cycle
        partner stays one; one of ``path``'s own partners is not passed on: ``path``'s
        digest answers for it. The dependencies of a summary are merged once per walk (a
        walk looks the same module up again and again; they are fixed once it is made, and
        the digests merged are the run's own, so a second merge would write what is there)."""
        if self._collecting:
            seen = self._collecting[-1]
            merged = self._merged[-1]
            if path not in merged:
                for dep, dep_digest in self._deps.get(path, {}).items():
                    if dep_digest != CYCLE and seen.get(dep) != CYCLE:
                        seen[dep] = dep_digest
                if digest != CYCLE and path in self._done:
                    merged.add(path)
            if seen.get(path) != CYCLE:
                seen[path] = digest

    def map_imports(self, paths: Iterable[Path]) -> None:
        """Find the import cycles of ``paths`` now (reading their import lists), and count
        their importers (:meth:`importer_count`), before a run forks its workers."""
        for path in paths:
            path = self._index.resolved(path)
            if path not in self._component:
                self._components_from(path)

    def importer_count(self, path: Path) -> int:
        """How many of the modules :meth:`map_imports` (or a lookup) read import ``path``."""
        return self._importers[self._index.resolved(path)]

    def dependency_order(self, paths: Iterable[Path], weight: Callable[[Path], int]) -> list[Path]:
        """``paths`` (mapped by :meth:`map_imports`), each after those it reaches through
        module-level imports (cycle partners in any order), and among those free to go the
        one with the heaviest chain of ``paths`` waiting on it first: two processes checking
        them in this order, each waiting for what it imports, keep each other busy."""
        chosen = {self._index.resolved(p): p for p in paths}
        self.map_imports(chosen)
        needs: dict[Path, set[Path]] = {path: set() for path in chosen}
        for path in chosen:
            seen, stack = {path}, list(self._imports.get(path, ()))
            while stack:
                node = stack.pop()
                if node in seen:
                    continue
                seen.add(node)
                if node in chosen and self._component[node] != self._component[path]:
                    needs[path].add(node)
                stack += self._imports.get(node, ())
        waiting: dict[Path, list[Path]] = {path: [] for path in chosen}
        for path, before in needs.items():
            for need in before:
                waiting[need].append(path)
        chain: dict[Path, int] = {}
        for path in sorted(chosen, key=lambda p: self._component[p], reverse=True):
            # (dependents complete later in Tarjan's order: theirs are known by now)
            chain[path] = weight(chosen[path]) + max((chain[w] for w in waiting[path]), default=0)
        order: list[Path] = []
        ready = [(-chain[p], str(p), p) for p, before in needs.items() if not before]
        heapq.heapify(ready)
        while ready:
            path = heapq.heappop(ready)[2]
            order.append(chosen[path])
            for later in waiting[path]:
                needs[later].discard(path)
                if not needs[later]:
                    heapq.heappush(ready, (-chain[later], str(later), later))
        return order

    def begin(self, path: Path) -> None:
        """``path`` is being checked: its walk is its summary walk, so its cycle partners
        are unknown to it, as they would be to its summary."""
        path = self._index.resolved(path)
        if path not in self._component:
            self._components_from(path)
        self._open.add(self._component[path])
        self._collecting.append({})
        self._merged.append(set())
        self._walks.append([self._component[path], False])

    def end(self, path: Path, summary: ModuleSummary | None) -> Dependencies:
        """The check of ``path`` is over; its walk gave ``summary`` (kept unless one exists).
        Returns what the check consulted."""
        path = self._index.resolved(path)
        self._open.discard(self._component[path])
        deps = self._collecting.pop()
        self._merged.pop()
        self._walks.pop()
        if summary is not None and path not in self._done:
            self._keep(path, summary, deps)
        return deps

    def _keep(self, path: Path, summary: ModuleSummary | None, deps: Dependencies) -> None:
        self._done[path] = None if summary is None else self._pool.summary(summary)
        self._deps[path] = deps

    def lookup(self, importer: Path, dotted: str, level: int = 0) -> Symbol | None:
        """What ``dotted`` (``level`` dots) names when imported from ``importer``."""
        return self._lookup(importer, dotted, level, REEXPORT_HOPS)

    def _lookup(self, importer: Path, dotted: str, level: int, hops: int) -> Symbol | None:
        target = self._index.resolve(importer, dotted, level)
        if target is None:
            return None
        if target.attr == "*":  # ``from module import *``: what it binds
            return Exports(tuple(sorted(self._exports(target.path, hops, set()).items())))
        summary = self.of(target.path)
        if summary is None and self._partner is not None and self._in_open_cycle(target.path):
            # only for a class the view holds: any other name stays unknown, as it was
            view = self._partner_view(target.path)
            if view is not None and target.attr.partition(".")[0] in view.classes:
                summary = view
        if summary is None or not target.attr:
            return summary
        return self._member(target.path, summary, target.attr, hops)

    def _member(
        self,
        path: Path,
        summary: ModuleSummary,
        attr: str,
        hops: int,
        seen: set[Path] | None = None,
    ) -> Symbol | None:
        """What ``attr`` (``name`` or ``Class.method``) of the module at ``path`` is. ``seen``:
        the modules a search through star imports looked in already (each is looked in once,
        however many paths of star imports lead to it)."""
        head, _, rest = attr.partition(".")
        if head in summary.reexports:
            if hops == 0:
                return None
            module, up, name = summary.reexports[head]
            onward = ".".join(p for p in (module, name, rest) if p)
            if not up and self._index.resolve(path, onward) is None:
                return External(onward)  # ``from torch.nn import BatchNorm2d``: it leaves here
            return self._lookup(path, onward, up, hops - 1)
        if head in summary.classes:
            cls = summary.classes[head]
            return cls if not rest else cls.methods.get(rest)
        if head in summary.functions or head in summary.constants:
            return None if rest else summary.functions.get(head) or summary.constants.get(head)
        if head in summary.names or head.startswith("_"):
            return None  # bound here, unknown (or private: no star import brings it)
        seen = {self._index.resolved(path)} if seen is None else seen
        for module, up in reversed(summary.stars):  # (the last star import binding it wins)
            target = self._index.resolve(path, f"{module}.*" if module else "*", up)
            if hops == 0 or target is None or target.attr != "*":
                continue
            if self._index.resolved(target.path) in seen:
                continue
            seen.add(self._index.resolved(target.path))
            there = self.of(target.path)
            if there is None or (there.public is not None and head not in there.public):
                continue
            found = self._member(target.path, there, attr, hops - 1, seen)
            if found is not None or head in there.names:
                return found
        return None

    def _exports(self, path: Path, hops: int, seen: set[Path]) -> dict[str, str | None]:
        """The names ``from <module at path> import *`` binds, each with the library name it
        stands for (None: a project name). Its literal ``__all__``, else its public names and
        those of the modules it star-imports in turn (each module once: a cycle of star
        imports, or two ways to one module, reads it once)."""
        path = self._index.resolved(path)
        summary = self.of(path)
        if summary is None or path in seen or hops == 0:
            return {}
        seen.add(path)
        found: dict[str, str | None] = {}
        if summary.public is None:
            for module, up in summary.stars:
                target = self._index.resolve(path, f"{module}.*" if module else "*", up)
                if target is not None and target.attr == "*":
                    found.update(self._exports(target.path, hops - 1, seen))
        for name in summary.public if summary.public is not None else summary.names:
            if name in summary.reexports or name not in summary.names:
                symbol = self._member(path, summary, name, hops - 1)
                found[name] = symbol.qualname if isinstance(symbol, External) else None
            else:
                found[name] = None
        return found

    def _in_open_cycle(self, path: Path) -> bool:
        return self._component.get(self._index.resolved(path)) in self._open

    def _partner_view(self, path: Path) -> ModuleSummary | None:
        """A cycle partner's view of ``path`` (recorded as ``CYCLE`` by :meth:`of`, so a
        change to the file invalidates what used it): the same whoever asks first."""
        path = self._index.resolved(path)
        if path not in self._partners and self._partner is not None:
            found = self._partner(path)
            self._partners[path] = None if found is None else self._pool.summary(found)
        return self._partners[path]

    def _edges(self, path: Path) -> list[Path]:
        """The modules ``path`` imports that can be in an import cycle with it: those of its
        own island (the project, or one installed library; no import leads back from a
        library to the project or between libraries in a cycle worth finding)."""
        imports = self._engine.imports(path)
        found = (self._index.resolve(path, dotted, level) for dotted, level in imports)
        island = self._index.library(path)
        paths = {self._index.resolved(t.path) for t in found if t is not None}
        return sorted(p for p in paths if self._index.library(p) == island)

    def _components_from(self, start: Path) -> None:
        """Tarjan's algorithm, iteratively (import chains can be long), over the modules
        reachable from ``start`` that have no component yet."""
        order: dict[Path, int] = {}
        low: dict[Path, int] = {}
        stack: list[Path] = []
        on_stack: set[Path] = set()
        work: list[tuple[Path, list[Path]]] = []

        def enter(node: Path) -> None:
            order[node] = low[node] = len(order)
            stack.append(node)
            on_stack.add(node)
            edges = self._edges(node)
            self._importers.update(edges)
            self._imports[node] = list(edges)
            work.append((node, edges))

        enter(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt in self._component:
                    continue
                if nxt not in order:
                    enter(nxt)
                elif nxt in on_stack:
                    low[node] = min(low[node], order[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == order[node]:
                component = len(self._component) + 1
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    self._component[member] = component
                    if member == node:
                        break
