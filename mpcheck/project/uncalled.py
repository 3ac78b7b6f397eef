"""Methods nothing calls: their code never runs, so it gives no finding.

A method runs when something calls it, and every call of a method writes its name: after a
dot (``self.decode(z)``, ``vae.decode``, ``super().decode``, a callback ``hook=self.fn``), in
a string (``getattr(self, "decode")``, a registry, a configuration) or bare in its class's
body (``__call__ = decode``). A method whose name its own file writes only at its ``def``
(as an identifier: ``_m`` inside ``q_m`` is another name), no other file of the project
writes after a dot or in a string, and no configuration, script or notebook writes at all,
is called by nothing the project holds.

Its callers may lie outside the project, and then it runs. A library base calls the methods
it defines by name (``training_step``, ``_init_weights``, ``setUp``), so a class related by
inheritance to a base outside the project, other than ``torch.nn.Module`` and ``object``,
keeps every method; ``torch.nn.Module`` itself calls only its own (``extra_repr``,
``_load_from_state_dict``: :data:`~mpcheck.knowledge.torch_api.MODULE_METHODS`), and
``forward``, dunders and decorated methods (registered, wrapped) are never candidates. A
package's users may call any public method of it, and a test runner calls ``test*``.

Each file's part (:func:`methods_of`, :func:`attributes_of`) is read from its record;
:class:`Uncalled` joins them once per project.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from zlib import crc32

from mpcheck.knowledge.torch_api import MODULE_METHODS
from mpcheck.project.reach import is_test, side_words

__all__ = ["NAME_BITS", "Uncalled", "attributes_of", "methods_of", "may_name"]

NAME_BITS = 8192  # (a Bloom filter, two bits a name: a false hit only keeps a method called)
_ATTRIBUTE = re.compile(rb"\.[ \t]*([A-Za-z_]\w*)")
# Bases the analysis knows call nothing of a subclass but their own methods.
_PLAIN_BASES = frozenset(
    {"object", "torch.nn.Module", "torch.nn.modules.module.Module", "nn.Module"}
)


def attributes_of(code: bytes) -> int:
    """A Bloom filter of the names ``code`` (strings and comments blanked) writes after a
    dot: every attribute it reads or calls."""
    bits = 0
    for name in set(_ATTRIBUTE.findall(code)):
        h = crc32(name)
        bits |= (1 << (h % NAME_BITS)) | (1 << ((h >> 12) % NAME_BITS))
    return bits


def may_name(bits: int, name: str) -> bool:
    """Whether a filter of :func:`attributes_of` may hold ``name``."""
    h = crc32(name.encode())
    return bool(bits >> (h % NAME_BITS) & 1) and bool(bits >> ((h >> 12) % NAME_BITS) & 1)


def methods_of(data: bytes, code: bytes, found: Iterable[re.Match[bytes]]) -> tuple[str, ...]:
    """``Class.method`` for each undecorated method of a top-level class of the file (no
    dunder, no ``forward``) whose name the file writes only once, at its ``def``: ``data``
    the file's bytes, ``code`` the same blanked, ``found`` its headers
    (:func:`~mpcheck.project.lines.headers`: indent, kind, name)."""
    out: list[str] = []
    owner: bytes | None = None  # the top-level class being read
    body: bytes | None = None  # the indent of its methods
    for header in found:
        indent, kind, name = header.group(1), header.group(2), header.group(3)
        if not indent:
            owner, body = (name, None) if kind == b"class" else (None, None)
            continue
        if owner is None or kind != b"def":
            continue
        if body is None:
            body = indent
        if indent != body or name.startswith(b"__") or name == b"forward":
            continue
        if _written_once(data, name) and not _decorated(code, header.start()):
            out.append(f"{owner.decode()}.{name.decode()}")
    return tuple(out)


def _written_once(data: bytes, name: bytes) -> bool:
    """Whether ``data`` writes the identifier ``name`` once: ``_m`` inside ``q_m`` or
    ``_mask`` is another name, not a call of it. (A plain search finds a second one early.)"""
    at = data.find(name)
    count = 0
    while at >= 0:
        end = at + len(name)
        if not _identifier(data, at - 1) and not _identifier(data, end):
            count += 1
            if count > 1:
                return False
        at = data.find(name, at + 1)
    return True


def _identifier(data: bytes, at: int) -> bool:
    """Whether the byte at ``at`` (may be out of range) continues an identifier."""
    return 0 <= at < len(data) and (data[at : at + 1].isalnum() or data[at] == 0x5F)


def _decorated(code: bytes, at: int) -> bool:
    """Whether the line before offset ``at`` (a ``def`` line's start) is a decorator's."""
    start = code.rfind(b"\n", 0, max(0, at - 1)) + 1
    line = code[start:at].strip()
    if line.startswith(b"@"):
        return True
    return line.endswith(b")") and b"@" in code[max(0, at - 400) : at]  # (over lines)


class Uncalled:
    """The project's methods that nothing calls (see the module docstring).

    ``parts``: each file's shown path -> (its module, its candidate methods
    (:func:`methods_of`), its attribute filter (:func:`attributes_of`), the strings it
    writes); ``bases``: each project class (qualified) -> its bases, qualified where they
    resolve; ``resolve``: the project class a base names, or None; ``side``: the files
    besides sources whose words may name a method; ``package``: users may call its public
    methods."""

    def __init__(
        self,
        parts: Mapping[str, tuple[str, tuple[str, ...], int, tuple[str, ...]]],
        bases: Mapping[str, tuple[str, ...]],
        resolve: Callable[[str], str | None],
        side: Iterable[Path] = (),
        *,
        package: bool = False,
    ) -> None:
        written = {
            w for _, (_, _, _, strings) in parts.items() for s in strings for w in s.split(".")
        }
        candidates: dict[str, str] = {}  # ``module.Class.method`` -> the file defining it
        for path, (module, methods, _, _) in parts.items():
            if is_test(path):
                continue
            for method in methods:
                leaf = method.rpartition(".")[2]
                if leaf.startswith("test") or leaf in MODULE_METHODS or leaf in written:
                    continue
                if package and not leaf.startswith("_"):
                    continue
                candidates[f"{module}.{method}" if module else method] = path
        if candidates:
            attrs = [bits for _, (_, _, bits, _) in parts.items()]
            candidates = {
                name: path
                for name, path in candidates.items()
                if not any(may_name(bits, name.rpartition(".")[2]) for bits in attrs)
            }
        if candidates:
            tied = _tied(bases, resolve)
            candidates = {n: p for n, p in candidates.items() if n.rpartition(".")[0] not in tied}
        if candidates:
            leaves = {n.rpartition(".")[2] for n in candidates}
            named = side_words(list(side), leaves)
            candidates = {n: p for n, p in candidates.items() if n.rpartition(".")[2] not in named}
        self.dead = frozenset(candidates)

    def called(self, qualified: str) -> bool:
        """Whether anything may call the method ``qualified`` (``module.Class.method``)."""
        return qualified not in self.dead

    @property
    def digest(self) -> str:
        return repr(sorted(self.dead))


def _tied(bases: Mapping[str, tuple[str, ...]], resolve: Callable[[str], str | None]) -> set[str]:
    """The project classes related by inheritance (an ancestor or a descendant) to a class
    with a base outside the project other than the plain ones: that base may call their
    methods by name."""
    parents: dict[str, set[str]] = {}
    children: dict[str, set[str]] = {}
    todo: list[str] = []
    for name, written in bases.items():
        for base in written:
            found = resolve(base)
            if found is not None:
                parents.setdefault(name, set()).add(found)
                children.setdefault(found, set()).add(name)
            elif base not in _PLAIN_BASES:
                todo.append(name)
    tied: set[str] = set()
    for links in (parents, children):
        stack = list(todo)
        seen: set[str] = set()
        while stack:
            name = stack.pop()
            if name not in seen:
                seen.add(name)
                stack.extend(links.get(name, ()))
        tied |= seen
    return tied
