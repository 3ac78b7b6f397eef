"""Where the project's models are made half: the casts and library bases that reach a class.

A module's ``forward`` runs in half only when something makes it so: a script's
``model.half()`` (or ``.to(torch.bfloat16)``, ``torch_dtype=torch.float16``, a ``dtype=`` at
construction, a ``weight_dtype`` variable), or a library contract (diffusers ``ModelMixin``,
transformers ``PreTrainedModel``, timm and peft models are run in half by their users). That
evidence is usually in another file than the class it reaches (the script casts ``Model``,
``Model`` builds ``Block`` in a third file), and runs against the import direction the
summaries follow, so it is gathered project-wide here, from the bytes (regular expressions
and indentation, no parse: the scan must cost little next to the check itself).

Classes are matched by their name across the project (a cast of ``Model`` reaches every
project class named ``Model``): a coarse but order-free approximation of import resolution.
"""

from __future__ import annotations

import ast
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mpcheck.files.hashing import hex_digest
from mpcheck.project.summary import Place

__all__ = ["ModelUses", "Reach", "forget_uses", "uses_for", "uses_of_sources"]

# A file that may cast a model to half or load one in half.
_CASTS = re.compile(rb"\.half\(|float16|bfloat16|dtype")
_CLASS = re.compile(rb"^[ \t]*class[ \t]+(\w+)[ \t]*(?:\(([^)]*)\))?", re.MULTILINE)
# Library base classes whose users run them (and every part they build) in half.
LIBRARY_SUFFIXES = ("ModelMixin", "PreTrainedModel", "PretrainedModel", "PeftModel", "TunerLayer")
_LIBRARY_ROOTS = ("timm.", "peft.")
_HALF_DTYPES = frozenset({"float16", "half", "bfloat16"})
# A project that mentions none of these never runs anything in half: what it builds is float32.
_HALF_WORDS = re.compile(
    rb"half|float16|bfloat16|fp16|bf16|torch_dtype|deepspeed|precision|set_default_dtype"
)
CAST, LIBRARY, AUTOCAST, FLOAT32 = "cast", "library", "autocast", "float32"
_SKIP_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "build", "dist", "__pycache__"})


@dataclass(frozen=True, slots=True)
class Reach:
    """Why a class may run in half: ``kind`` is ``cast`` or ``library``; ``place`` is the
    cast or the library class's definition; ``via`` the chain of classes that build it."""

    kind: str
    place: Place
    via: tuple[str, ...] = ()


class ModelUses:
    """The project's half evidence, by class name (see the module docstring)."""

    def __init__(self, reach: Mapping[str, Reach]) -> None:
        self._reach = dict(reach)

    def of(self, name: str) -> Reach | None:
        return self._reach.get(name)

    def __len__(self) -> int:
        return len(self._reach)

    @property
    def digest(self) -> str:
        """Changes when any class's evidence does (a cache entry keyed on it is then stale)."""
        text = repr(sorted(self._reach.items()))
        return hex_digest(text.encode())


def uses_of_sources(sources: Mapping[str, bytes], *, alone: bool = False) -> ModelUses:
    """The evidence in ``sources`` (shown path -> bytes); ``alone``: one file checked by
    itself, whose messages say "line 12" rather than a path."""
    roots: dict[str, Reach] = {}
    defined: dict[str, list[tuple[str, int]]] = {}  # class -> (path, offset of its ``class``)
    for path, data in sources.items():
        for match in _CLASS.finditer(data):
            name = match.group(1).decode()
            defined.setdefault(name, []).append((path, match.start()))
            bases = (match.group(2) or b"").decode(errors="replace")
            lib = _library_base(bases)
            if lib is not None and name not in roots:
                line = data.count(b"\n", 0, match.start()) + 1
                text = f"`{name}` is a `{lib}`, which its users run in half"
                where = f"line {line}" if alone else f"{path}:{line}"
                roots[name] = Reach(LIBRARY, Place(path, line, 1, f"{text} ({where})"))
    trees: dict[str, ast.Module | None] = {}

    def tree(path: str) -> ast.Module | None:
        if path not in trees:
            trees[path] = _parse(sources[path])
        return trees[path]

    casts: dict[str, Reach] = {}
    covered: dict[str, Reach] = {}  # every call seen runs under an enabled autocast
    uncovered: set[str] = set()
    built: dict[str, Reach] = {}
    any_half = any(_HALF_WORDS.search(data) for data in sources.values())
    bodies: dict[str, set[str]] = {}  # class -> the project classes its body builds
    for path in sorted(sources):
        data = sources[path]
        _bodies(data, defined, bodies)
        models = _bound(data, defined)
        if _CASTS.search(data):  # (a cheap test first: most files cast nothing)
            for name, place in _casts(data, path, defined, models, alone):
                casts.setdefault(name, Reach(CAST, place))
        if b"autocast" in data and models:
            for name, region in _regions(data, path, models, alone):
                if region is None:
                    uncovered.add(name)
                else:
                    covered.setdefault(name, Reach(AUTOCAST, region))
        if not any_half:  # (CPython's parser: about 0.1 s a file, so only here)
            parsed = tree(path)
            if parsed is not None:
                for name, place in _builds(parsed, path, defined, alone):
                    built.setdefault(name, Reach(FLOAT32, place))
    reach: dict[str, Reach] = {}
    autocast = {k: v for k, v in covered.items() if k not in uncovered}
    for kind_roots in (casts, roots, autocast, built):  # the strongest evidence first
        _spread(kind_roots, reach, bodies)
    return ModelUses(reach)


def _spread(
    roots: Mapping[str, Reach], reach: dict[str, Reach], bodies: Mapping[str, set[str]]
) -> None:
    """Give each root's evidence to the classes it builds, transitively, unless they have
    stronger evidence already."""
    todo = [name for name in sorted(roots) if name not in reach]
    for name in todo:
        reach[name] = roots[name]
    while todo:
        name = todo.pop()
        for part in sorted(bodies.get(name, ())):
            if part == name or part in reach:
                continue
            found = reach[name]
            reach[part] = Reach(found.kind, found.place, (*found.via, name))
            todo.append(part)


_TOP = re.compile(rb"^[^\s#)\]}]", re.MULTILINE)  # a line at column 0: a class body ends
_CALLED = re.compile(rb"\b([A-Z]\w*)\s*(?:\.from_\w+)?\(")  # (classes are CapWords)


def _bodies(data: bytes, defined: Mapping[str, object], bodies: dict[str, set[str]]) -> None:
    """For each class of ``data``, the project classes its body calls (builds)."""
    for match in _CLASS.finditer(data):
        name = match.group(1).decode()
        end = _TOP.search(data, match.end())
        body = data[match.end() : end.start() if end else len(data)]
        found = {c.decode() for c in _CALLED.findall(body)}
        bodies.setdefault(name, set()).update(c for c in found if c in defined)


_BINDING = re.compile(
    rb"^[ \t]*([A-Za-z_][\w.]*)[ \t]*=[ \t]*([A-Za-z_]\w*)[ \t]*(?:\.from_\w+)?\(", re.MULTILINE
)


def _bound(data: bytes, defined: Mapping[str, object]) -> dict[str, str]:
    """Variable (``model``, ``self.unet``) -> the project class built or loaded into it."""
    out = {}
    for var, cls in _BINDING.findall(data):
        name = cls.decode()
        if name in defined:
            out[var.decode()] = name
    return out


def _library_base(bases: str) -> str | None:
    for base in bases.replace("\n", " ").split(","):
        base = base.strip()
        if "=" in base:
            continue
        leaf = base.rsplit(".", 1)[-1]
        if leaf.endswith(LIBRARY_SUFFIXES) or base.startswith(_LIBRARY_ROOTS):
            return leaf
    return None


def _parse(data: bytes) -> ast.Module | None:
    try:
        return ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _callee(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        if func.attr in ("from_pretrained", "from_config", "from_single_file"):
            return _callee(func.value)
        return func.attr
    return None


_WITH_AUTOCAST = re.compile(rb"^[ \t]*(?:with\b|@)[^\n]*autocast\(")


def _regions(
    data: bytes, path: str, models: Mapping[str, str], alone: bool
) -> Iterable[tuple[str, Place | None]]:
    """Each call of a model variable (``model(x)``, ``self.transformer(...)``): the class,
    with the enabled autocast region around it (None outside one), found by indentation: a
    ``with ...autocast(...):`` (or an ``@autocast`` decorator) covers the lines indented
    deeper than it."""
    names = b"|".join(re.escape(v.encode()) for v in sorted(models, key=len, reverse=True))
    called = re.compile(rb"(?<![\w.])(" + names + rb")\s*\(")
    stack: list[tuple[int, Place]] = []
    for row, line in enumerate(data.split(b"\n"), 1):
        text = line.lstrip()
        if not text or text.startswith(b"#"):
            continue
        indent = len(line) - len(text)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if _WITH_AUTOCAST.match(line) and b"enabled=False" not in line:
            code = " ".join(text.decode(errors="replace").rstrip(":").split())
            where = f"line {row}" if alone else f"{path}:{row}"
            what = f"every call runs under `{code[:60]}` at {where}"
            stack.append((indent, Place(path, row, indent + 1, what)))
            continue
        for match in called.finditer(line):
            yield models[match.group(1).decode()], stack[-1][1] if stack else None


def _builds(
    tree: ast.Module, path: str, defined: Mapping[str, object], alone: bool
) -> Iterable[tuple[str, Place]]:
    """Project classes built outside any class body (a script's or a helper's model)."""

    def visit(node: ast.AST) -> Iterable[tuple[str, Place]]:
        if isinstance(node, ast.ClassDef):
            return
        if isinstance(node, ast.Call):
            name = _model_of(node, defined)
            if name is not None:
                text = f"`{name}` is only built in float32 (`{_code(node)}`)"
                yield name, _place(path, node, text, alone)
        for child in ast.iter_child_nodes(node):
            yield from visit(child)

    yield from visit(tree)


_CAST_AT = re.compile(rb"\.(half|bfloat16)\(\s*\)|\.to\(")
_DTYPE_KW = re.compile(rb"\b(?:torch_)?dtype\s*=\s*([\w.]+)")
_HALFISH = re.compile(rb"float16|bfloat16|\bhalf\b|fp16|bf16|dtype$")
_NAME_TAIL = re.compile(rb"[A-Za-z_][\w.]*$")


def _halfish(text: bytes) -> bool:
    """A half dtype, or a dtype variable (``weight_dtype``, ``args.dtype``): the dtype a
    mixed-precision setting maps to, or one a caller passes. Only float32 written down is not."""
    return any(_HALFISH.search(part.strip()) for part in text.split(b","))


def _receiver(data: bytes, end: int) -> tuple[int, bytes]:
    """The receiver ending at ``end``: ``model``, ``self.unet``, ``Model(8)`` (its start)."""
    start = end
    if end > 0 and data[end - 1 : end] == b")":
        start = _opening(data, end - 1)
        if start < 0:
            return end, b""
    name = _NAME_TAIL.search(data, max(0, start - 200), start)
    if name is None:
        return end, b""
    return name.start(), data[name.start() : end]


def _opening(data: bytes, close: int) -> int:
    """The ``(`` that the ``)`` at ``close`` closes (-1: none within 2000 bytes)."""
    depth, i, stop = 0, close, max(-1, close - 2000)
    while i > stop:
        c = data[i]
        if c in b")]}":
            depth += 1
        elif c in b"([{":
            depth -= 1
            if depth == 0:
                return i
        i -= 1
    return -1


def _casts(
    data: bytes,
    path: str,
    defined: Mapping[str, object],
    models: Mapping[str, str],
    alone: bool,
) -> Iterable[tuple[str, Place]]:
    """(class name, place) for each project class this file builds or loads in half, or
    builds and then casts to half: ``Model(...).half()``, ``model.to(weight_dtype)`` of a
    ``model = Model(...)``, ``Model.from_pretrained(..., torch_dtype=torch.float16)``."""

    def target(receiver: bytes) -> str | None:
        text = receiver.decode(errors="replace")
        if text in models:
            return models[text]
        head = text.split("(", 1)[0].split(".from_", 1)[0]
        return head if "(" in text and head in defined else None

    def place(at: int, what: str) -> Place:
        line = data.count(b"\n", 0, at) + 1
        column = at - data.rfind(b"\n", 0, at)
        where = f"line {line}" if alone else f"{path}:{line}"
        return Place(path, line, column, f"{what} at {where}")

    for match in _CAST_AT.finditer(data):
        start, receiver = _receiver(data, match.start())
        name = target(receiver) if receiver else None
        if name is None:
            continue
        end = match.end() if match.group(1) else _closing(data, match.end()) + 1
        if match.group(1) is None and not _halfish(data[match.end() : end - 1]):
            continue
        code = " ".join(data[start:end].decode(errors="replace").split())
        if len(code) > 60:
            code = f"{name}(...)" + match.group(0).decode() + ("...)" if not match.group(1) else "")
        yield name, place(start, f"`{name}` is cast to half by `{code}`")
    for kw in _DTYPE_KW.finditer(data):
        if not _halfish(kw.group(1)):
            continue
        opening = _enclosing(data, kw.start())
        head = _NAME_TAIL.search(data, max(0, opening - 200), opening) if opening > 0 else None
        if head is None:
            continue
        name = head.group(0).decode().split(".from_", 1)[0]
        if name in defined:
            what = f"`{name}` is built in half by `{name}(..., {kw.group(0).decode()})`"
            yield name, place(head.start(), what)


def _enclosing(data: bytes, at: int) -> int:
    """The ``(`` of the call whose arguments hold ``at`` (-1: none within 2000 bytes)."""
    depth, i, stop = 0, at - 1, max(-1, at - 2000)
    while i > stop:
        c = data[i]
        if c in b")]}":
            depth += 1
        elif c in b"([{":
            if depth == 0:
                return i if c == 0x28 else -1
            depth -= 1
        i -= 1
    return -1


def _closing(data: bytes, start: int) -> int:
    """Where the call whose arguments start at ``start`` closes (at most 2000 bytes on)."""
    depth, i, end = 1, start, min(len(data), start + 2000)
    while i < end:
        c = data[i]
        if c in b"([{":
            depth += 1
        elif c in b")]}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return end


def _key(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _model_of(call: ast.Call, defined: Mapping[str, object]) -> str | None:
    """The project class ``call`` builds or loads (``Model(...)``, ``Model.from_pretrained``),
    through a chained cast (``Model(...).to(device)``)."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ("to", "cuda", "eval", "train"):
        inner = func.value
        return _model_of(inner, defined) if isinstance(inner, ast.Call) else None
    name = _callee(func)
    return name if name is not None and name in defined else None


def _place(path: str, node: ast.AST, text: str, alone: bool) -> Place:
    line = getattr(node, "lineno", 1)
    where = f"line {line}" if alone else f"{path}:{line}"
    return Place(path, line, getattr(node, "col_offset", 0) + 1, f"{text} at {where}")


def _code(node: ast.expr) -> str:
    """The call as a message quotes it: its text, arguments elided when long."""
    text = ast.unparse(node)
    return text if len(text) <= 60 else _short(node)


def _short(node: ast.expr) -> str:
    """``Model(...).to(...)``: the chain of calls, every argument list elided."""
    if isinstance(node, ast.Call):
        return f"{_short(node.func)}({'...' if node.args or node.keywords else ''})"
    if isinstance(node, ast.Attribute):
        return f"{_short(node.value)}.{node.attr}"
    return ast.unparse(node)


_USES: dict[str, ModelUses] = {}
_MAX_SOURCE = 16 * 1024 * 1024  # bytes: larger files are not project sources


def uses_for(root: str) -> ModelUses:
    """The evidence of the project at ``root``, gathered once per process (``forget_uses``
    drops it for a run that must see the files as they are now)."""
    if root not in _USES:
        _USES[root] = uses_of_sources(dict(_project_sources(Path(root))))
    return _USES[root]


def forget_uses() -> None:
    _USES.clear()


def _project_sources(root: Path) -> Iterable[tuple[str, bytes]]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = Path(folder) / name
            try:  # a FIFO would block, a device never end: regular files only, and not huge
                info = path.lstat()
                if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_SOURCE:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            if b"torch" in data or b"class " in data:
                yield path.relative_to(root).as_posix(), data
