"""Constructor flags nothing sets: the branches they guard never run (issue 36, item 4).

``def __init__(self, dim, use_checkpoint=False)`` storing ``self.use_checkpoint =
use_checkpoint`` keeps its false default (``False``, ``None``, ``0``) in every instance no call
hands a true value, and ``if self.use_checkpoint:`` then never runs its body. A call hands it
one positionally, by keyword, or through a splat (``Block(*args)``, ``Block(**cfg)``); an
instance may be given one later (``block.use_checkpoint = True``, ``setattr``), and a class
may be built other than by a call of its name (a subclass, an alias, ``partial(Block, ...)``,
a registry or a configuration naming it, ``cls(...)`` in its own body). So a flag is unset
only when the project builds its class by plain calls of its name alone, none handing the
parameter anything but a false literal, no other file writes the attribute after a dot, its
own file assigns it once, and no string or configuration of the project names the parameter
or the class. A library base
may set a submodule's attribute by name (transformers' and diffusers'
``module.gradient_checkpointing = value``): such names are never candidates.

Each file's part (:func:`flags_of`) is read from its blanked code once, kept in its record:
its candidate flags, the calls it writes of capitalised names (how many positional
arguments, the keywords handed something other than a false literal, a splat), and a Bloom
filter of the capitalised names it writes other than in a call, an import or a ``class``
header. :class:`Unset` joins them once per project.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from mpcheck.project.brackets import closing, parts
from mpcheck.project.construction import body_end
from mpcheck.project.lines import line_matches
from mpcheck.project.patterns import compiled
from mpcheck.project.reach import side_words
from mpcheck.project.uncalled import attributes_of, may_name

__all__ = ["EMPTY_FLAGS", "FlagsPass", "Unset", "flags_of"]

# (candidates: (class, parameter, its position among the positional parameters after
# ``self``, -1 keyword-only), calls: (name, positional count or -1 for a ``*`` splat,
# keywords handed something true or unknown, ``**`` for a splat), a Bloom filter of the
# capitalised names written otherwise)
FlagsPass = tuple[
    tuple[tuple[str, str, int], ...], tuple[tuple[str, int, tuple[str, ...]], ...], int
]
EMPTY_FLAGS: FlagsPass = ((), (), 0)

# Attributes a library sets on every submodule that has one, by name.
_LIBRARY_SET = frozenset({"gradient_checkpointing", "training"})
_FALSE = frozenset({b"False", b"None", b"0"})
_CONSTANTS = frozenset({b"False", b"None", b"True"})
_INIT = re.compile(rb"^([ \t]+)def[ \t]+__init__[ \t]*\(", re.MULTILINE)
_CLASS = re.compile(rb"^class[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
# (look-behinds after the first letter: see ``_RETURN`` in returns.py)
# A capitalised name, called or not (the blanks and bracket after it read by sre, not
# Python; a name cannot end inside a word, so none matches shortened)
_CAPITAL_CALLED = re.compile(rb"([A-Z](?<!\w[A-Z])\w*)[ \t]*(?=\()")
_CAPITAL_NOT_CALLED = re.compile(rb"([A-Z](?<!\w[A-Z])\w*)(?!\w|[ \t]*\()")
_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t][^\n]*?)?import\b", re.MULTILINE)
_IMPORT_WORD = re.compile(rb"import\b")  # (what each line of ``_IMPORT`` holds: lines.py)
_SELF_BUILT = re.compile(rb"(?:c(?<![\w.]c)ls|type\(self\)|__class__)[ \t]*\(")
_PARAM = re.compile(rb"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?(?:=\s*(.*?))?\s*$", re.DOTALL)


def flags_of(code: bytes) -> FlagsPass:
    """The file's part (see :data:`FlagsPass`); ``code``: its bytes, strings and comments
    blanked."""
    return _candidates(code), _calls(code), _mentions(code)


def _candidates(code: bytes) -> tuple[tuple[str, str, int], ...]:
    if b"__dict__" in code or b"setattr" in code:
        return ()  # (attributes set by a name the code computes)
    out: list[tuple[str, str, int]] = []
    for header in _CLASS.finditer(code):
        end = body_end(code, header.end(), 0)
        init = _INIT.search(code, header.end(), end)
        first = re.compile(rb"\n([ \t]+)[^\s#]").search(code, header.end(), end)
        if init is None or first is None or first.group(1) != init.group(1):
            continue  # (none, or a nested class's)
        if _SELF_BUILT.search(code, header.end(), end):
            continue  # (``cls(...)``, ``type(self)(...)``: built other than by its name)
        close = closing(code, init.end())
        body_stop = body_end(code, close, len(init.group(1)))
        body = code[close:body_stop]
        position = 0
        for start, stop in parts(code, init.end(), close):
            text = code[start:stop]
            if text.strip().startswith(b"*"):
                position = -1  # (after ``*`` or ``*args``: keyword-only)
                if text.strip().startswith(b"**"):
                    break
                continue
            found = _PARAM.match(text)
            if found is None or found.group(1) == b"self":
                continue
            name, default = found.group(1), found.group(2)
            at = position
            if position >= 0:
                position += 1
            if default is None or default.strip() not in _FALSE:
                continue
            if name.decode() in _LIBRARY_SET or not _stored_once(code, body, name):
                continue
            out.append((header.group(1).decode(), name.decode(), at))
    return tuple(out)


def _stored_once(code: bytes, body: bytes, name: bytes) -> bool:
    """Whether ``__init__``'s ``body`` writes ``name`` only in ``self.name = name`` and the
    file assigns the attribute ``.name`` nowhere else."""
    store = compiled(rb"self\.%s[ \t]*(?::[^=\n]*)?=[ \t]*%s[ \t]*$" % (name, name), re.M)
    if len(store.findall(body)) != 1:
        return False
    bare = compiled(rb"(?<![\w.])%s(?!\w)" % name)
    if len(bare.findall(body)) != 1:  # (``flag = flag or ...``, ``super().__init__(flag)``)
        return False
    assigned = compiled(rb"\.%s[ \t]*(?::[^=\n]*)?(?:[-+*/|&^]|//|<<|>>)?=(?!=)" % name)
    return len(assigned.findall(code)) == 1


def _calls(code: bytes) -> tuple[tuple[str, int, tuple[str, ...]], ...]:
    """Per capitalised name the file calls: the most positional arguments a call hands
    (-1: a ``*`` splat), and the keywords some call hands other than a false literal."""
    most: dict[str, int] = {}
    handed: dict[str, set[str]] = {}
    for found in _CAPITAL_CALLED.finditer(code):
        at = found.end()  # (the bracket)
        if _header(code, found.start()):
            continue
        name = found.group(1).decode()
        close = closing(code, at + 1)
        count = 0
        keys = handed.setdefault(name, set())
        for start, stop in parts(code, at + 1, close):
            text = code[start:stop].strip()
            if not text:
                continue
            if text.startswith(b"**"):
                keys.add("**")
            elif text.startswith(b"*"):
                count = -1
            else:
                keyword = re.match(rb"([A-Za-z_]\w*)\s*=(?!=)\s*", text)
                if keyword is None:
                    count = count + 1 if count >= 0 else -1
                elif text[keyword.end() :].strip() not in _FALSE:
                    keys.add(keyword.group(1).decode())
        before = most.get(name, 0)
        most[name] = -1 if -1 in (before, count) else max(before, count)
    return tuple((n, most[n], tuple(sorted(handed[n]))) for n in sorted(most))


def _header(code: bytes, at: int) -> bool:
    """Whether the name at ``at`` is a ``class``/``def`` header's."""
    start = code.rfind(b"\n", 0, at) + 1
    return code[start:at].strip() in (b"class", b"def", b"async def")


def _mentions(code: bytes) -> int:
    """A Bloom filter of the capitalised names written other than called, imported or
    named by a ``class`` header: a base, an alias, a value handed on, a type."""
    kept = bytearray(code)
    for found in line_matches(_IMPORT, _IMPORT_WORD, code):
        end = code.find(b"\n", found.end())
        paren = code.find(b"(", found.end(), end if end >= 0 else len(code))
        end = closing(code, paren + 1) if paren >= 0 else end
        end = len(code) if end < 0 else end
        kept[found.start() : end] = b" " * (end - found.start())
    text = bytes(kept)
    # (the filter holds each name once: a name already kept is not tested again where it
    # is written again, which a class name used throughout its file was)
    names: set[bytes] = set()
    for m in _CAPITAL_NOT_CALLED.finditer(text):
        name = m.group(1)
        if name in names or name in _CONSTANTS:
            continue
        if not _header(text, m.start()):
            names.add(name)
    return attributes_of(b" ".join(b"." + name for name in names))


class Unset:
    """The project's flags nothing sets (see the module docstring): ``parts``: each file's
    shown path -> (its module, its :data:`FlagsPass`, its attribute filter
    (:func:`~mpcheck.project.uncalled.attributes_of`), the strings it writes); ``side``: the
    files besides sources whose words may name one."""

    def __init__(
        self,
        parts: Mapping[str, tuple[str, FlagsPass, int, tuple[str, ...]]],
        side: Iterable[Path] = (),
    ) -> None:
        written = {
            w for _, (_, _, _, strings) in parts.items() for s in strings for w in s.split(".")
        }
        candidates: dict[tuple[str, str], tuple[str, int, str]] = {}
        for path, (module, (found, _, _), _, _) in parts.items():
            for cls, param, position in found:
                if cls not in written and param not in written:
                    key = (f"{module}.{cls}" if module else cls, param)
                    candidates[key] = (cls, position, path)
        if candidates:
            calls: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
            for _, (_, (_, made, _), _, _) in parts.items():
                for name, count, keys in made:
                    calls.setdefault(name, []).append((count, keys))
            kept: dict[tuple[str, str], tuple[str, int, str]] = {}
            for key, (cls, position, path) in candidates.items():
                param = key[1]
                if any(may_name(p[1][2], cls) for p in parts.values()):
                    continue  # (a base, an alias, a value handed on)
                if any(may_name(p[2], param) for q, p in parts.items() if q != path):
                    continue  # (another file writes the attribute)
                if any(_hands(count, keys, param, position) for count, keys in calls.get(cls, ())):
                    continue
                kept[key] = (cls, position, path)
            candidates = kept
        if candidates:
            named = side_words(
                list(side), {w for key, (cls, _, _) in candidates.items() for w in (cls, key[1])}
            )
            candidates = {
                k: v for k, v in candidates.items() if v[0] not in named and k[1] not in named
            }
        self.unset = frozenset(candidates)

    def never_set(self, qualified: str, param: str) -> bool:
        """Whether the flag ``param`` of the class ``qualified`` keeps its false default."""
        return (qualified, param) in self.unset

    @property
    def digest(self) -> str:
        return repr(sorted(self.unset))


def _hands(count: int, keys: tuple[str, ...], param: str, position: int) -> bool:
    """Whether a call handing ``count`` positional arguments and ``keys`` may set ``param``."""
    return count < 0 or "**" in keys or param in keys or 0 <= position < count
