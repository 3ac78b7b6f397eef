"""Where the project's models are made half: the casts and library bases that reach a class.

A module's ``forward`` runs in half only when something makes it so: a script's
``model.half()`` (or ``.to(torch.bfloat16)``, ``torch_dtype=torch.float16``, a ``dtype=`` at
construction, a ``weight_dtype`` variable), or a library contract (diffusers ``ModelMixin``,
transformers ``PreTrainedModel``, timm and peft models are run in half by their users). That
evidence is usually in another file than the class it reaches (the script casts ``Model``,
``Model`` builds ``Block`` in a third file), and runs against the import direction the
summaries follow, so it is gathered project-wide here, cheaply: a byte prefilter, then
CPython's parser only for files that cast or define a class a cast or library base reaches.

Classes are matched by their name across the project (a cast of ``Model`` reaches every
project class named ``Model``): a coarse but order-free approximation of import resolution.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Iterable, Mapping
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
                roots[name] = Reach(LIBRARY, Place(path, line, 1, f"{text} ({path}:{line})"))
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
    for path in sorted(sources):
        data = sources[path]
        wanted = _CASTS.search(data) or b"autocast" in data or not any_half
        parsed = tree(path) if wanted else None
        if parsed is None:
            continue
        models = _models(parsed, defined)
        for name, place in _casts(parsed, path, defined, models, alone):
            casts.setdefault(name, Reach(CAST, place))
        if b"autocast" in data:
            for name, region in _calls(parsed, path, models, alone):
                if region is None:
                    uncovered.add(name)
                else:
                    covered.setdefault(name, Reach(AUTOCAST, region))
        if not any_half:
            for name, place in _builds(parsed, path, defined, alone):
                built.setdefault(name, Reach(FLOAT32, place))
    reach: dict[str, Reach] = {}
    autocast = {k: v for k, v in covered.items() if k not in uncovered}
    for kind_roots in (casts, roots, autocast, built):  # the strongest evidence first
        _spread(kind_roots, reach, defined, tree)
    return ModelUses(reach)


def _spread(
    roots: Mapping[str, Reach],
    reach: dict[str, Reach],
    defined: Mapping[str, list[tuple[str, int]]],
    tree: Callable[[str], ast.Module | None],
) -> None:
    """Give each root's evidence to the classes it builds, transitively, unless they have
    stronger evidence already."""
    todo = [name for name in sorted(roots) if name not in reach]
    for name in todo:
        reach[name] = roots[name]
    while todo:
        name = todo.pop()
        for path, _ in defined.get(name, ()):
            parsed = tree(path)
            node = _class_node(parsed, name) if parsed is not None else None
            if node is None:
                continue
            for part in sorted(_built(node, defined)):
                if part == name or part in reach:
                    continue
                found = reach[name]
                reach[part] = Reach(found.kind, found.place, (*found.via, name))
                todo.append(part)


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


def _class_node(tree: ast.Module, name: str) -> ast.ClassDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def _callee(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        if func.attr in ("from_pretrained", "from_config", "from_single_file"):
            return _callee(func.value)
        return func.attr
    return None


def _built(cls: ast.ClassDef, defined: Mapping[str, object]) -> set[str]:
    """The project classes ``cls`` builds (its submodules, whatever the container)."""
    out = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Call):
            name = _callee(node.func)
            if name is not None and name in defined:
                out.add(name)
    return out


def _is_half(node: ast.expr, bound: Mapping[str, bool]) -> bool:
    """A half dtype: ``torch.float16``, ``torch.bfloat16``, a name bound to one, or a
    ``weight_dtype``-like variable (the dtype a mixed-precision setting maps to, or one a
    caller passes): any dtype not written down as float32 may be half."""
    if isinstance(node, ast.Attribute):
        if node.attr in _HALF_DTYPES:
            return True
        return node.attr.endswith("dtype")  # ``args.weight_dtype``, ``self.dtype``: may be
    if isinstance(node, ast.Name):
        if node.id in bound:
            return bound[node.id]
        return node.id.endswith("dtype")
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in ("float16", "bfloat16", "fp16", "bf16", "half")
    return False


def _models(tree: ast.Module, defined: Mapping[str, object]) -> dict[str, str]:
    """Variable (``model``, ``self.unet``) -> the project class built or loaded into it."""
    models: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            key = _key(node.targets[0])
            if key is not None and isinstance(node.value, ast.Call):
                built = _model_of(node.value, defined)
                if built is not None:
                    models[key] = built
    return models


def _calls(
    tree: ast.Module, path: str, models: Mapping[str, str], alone: bool
) -> Iterable[tuple[str, Place | None]]:
    """Each call of a model variable (``model(x)``, ``self.transformer(...)``): the class,
    with the enabled autocast region around it (None outside one)."""

    def visit(node: ast.AST, region: ast.expr | None) -> Iterable[tuple[str, Place | None]]:
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if _autocast(item.context_expr):
                    region = item.context_expr
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            region = _autocast_decorator(node) or region
        if isinstance(node, ast.Call):
            key = _key(node.func)
            if key is not None and key in models:
                name = models[key]
                if region is None:
                    yield name, None
                else:
                    text = f"every call of `{name}` runs under `{_code(region)}`"
                    yield name, _place(path, region, text, alone)
        for child in ast.iter_child_nodes(node):
            yield from visit(child, region)

    yield from visit(tree, None)


def _autocast(node: ast.expr) -> bool:
    """An enabled autocast region: ``torch.autocast(...)``, ``accelerator.autocast()``."""
    if not isinstance(node, ast.Call):
        return False
    name = _callee(node.func)
    if name is None or not name.endswith("autocast"):
        return False
    for kw in node.keywords:
        if kw.arg == "enabled" and isinstance(kw.value, ast.Constant) and not kw.value.value:
            return False
    return True


def _autocast_decorator(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.expr | None:
    return next((d for d in fn.decorator_list if _autocast(d)), None)


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


def _casts(
    tree: ast.Module,
    path: str,
    defined: Mapping[str, object],
    models: Mapping[str, str],
    alone: bool,
) -> Iterable[tuple[str, Place]]:
    """(class name, place) for each project class this file builds or loads in half, or
    builds and then casts to half."""
    bound: dict[str, bool] = {}  # dtype variables: half or not
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            var, value = node.targets[0], node.value
            if isinstance(var, ast.Name) and (
                "dtype" in var.id
                or isinstance(value, ast.Attribute)
                and value.attr in _HALF_DTYPES | {"float32", "float"}
            ):
                bound[var.id] = _is_half(value, bound)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _model_of(node, defined)
        if name is not None:
            for kw in node.keywords:
                if kw.arg in ("torch_dtype", "dtype") and _is_half(kw.value, bound):
                    what = f"`{name}` is built in half by `{_code(node)}`"
                    yield name, _place(path, node, what, alone)
        func = node.func
        if not isinstance(func, ast.Attribute):
            continue
        half = func.attr in ("half", "bfloat16") or (
            func.attr == "to"
            and any(_is_half(a, bound) for a in [*node.args, *(k.value for k in node.keywords)])
        )
        if not half:
            continue
        receiver = func.value
        held = _key(receiver)
        target = models.get(held) if held is not None else None
        if target is None and isinstance(receiver, ast.Call):
            target = _model_of(receiver, defined)
        if target is not None:
            yield (
                target,
                _place(path, node, f"`{target}` is cast to half by `{_code(node)}`", alone),
            )


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
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if b"torch" in data or b"class " in data:
                yield path.relative_to(root).as_posix(), data
