"""Resolve dotted names through a module's own import table.

libcst's QualifiedNameProvider needs a full scope analysis, which costs several
times the parse. The rules only care about a few hundred public names
(``torch.*``, ``flash_attn``, ``xformers``, ``accelerate``), so one pass over the
import statements is enough: ``F.linear`` -> ``torch.nn.functional.linear``.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import libcst as cst

# Public spellings that are the same object under another module path.
CANONICAL: dict[str, str] = {
    "torch.nn.modules.linear.Linear": "torch.nn.Linear",
    "torch.cuda.amp.autocast_mode.autocast": "torch.cuda.amp.autocast",
    "torch.amp.autocast_mode.autocast": "torch.autocast",
    "torch.amp.autocast": "torch.autocast",
    "torch.amp.grad_scaler.GradScaler": "torch.amp.GradScaler",
    "torch.autograd.function.Function": "torch.autograd.Function",
    "torch.nn.functional.softmax": "torch.softmax",
    "torch.nn.functional.log_softmax": "torch.log_softmax",
}
# ``torch.functional`` defines these and ``torch`` re-exports each as the same object
# (``torch.functional.einsum is torch.einsum``, every name of its ``__all__`` on torch 2.13).
_TORCH_FUNCTIONAL = frozenset(
    ("atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "broadcast_tensors")
    + ("cartesian_prod", "block_diag", "cdist", "chain_matmul", "einsum", "istft", "lu", "norm")
    + ("meshgrid", "pca_lowrank", "split", "stft", "svd_lowrank", "tensordot", "unique")
    + ("unique_consecutive", "unravel_index")
)
# ``torch.nn`` re-exports the public classes its files define, so ``from torch.nn.parameter
# import Parameter`` (common in vocoders' Snake activations) and ``from torch.nn.modules.conv
# import Conv1d`` name ``torch.nn.Parameter`` and ``torch.nn.Conv1d``; these few it does not.
_NN_HOMES = ("torch.nn.modules.", "torch.nn.parameter.")
_NOT_IN_NN = frozenset(
    {"NonDynamicallyQuantizableLinear", "LazyModuleMixin", "UninitializedTensorMixin"}
)


def canonical(qual: str) -> str:
    """The public spelling of ``qual`` (``torch.nn.modules.conv.Conv1d`` -> ``torch.nn.Conv1d``)."""
    known = CANONICAL.get(qual)
    if known is not None:
        return known
    if qual.startswith("torch.functional."):
        leaf = qual[len("torch.functional.") :]
        return "torch." + leaf if leaf in _TORCH_FUNCTIONAL else qual
    if qual.startswith(_NN_HOMES):
        module, _, leaf = qual.rpartition(".")
        private = any(part.startswith("_") for part in module.split("."))
        if leaf[:1].isupper() and leaf not in _NOT_IN_NN and not private:
            return "torch.nn." + leaf
    return qual


def dotted(expr: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    if type(expr) is cst.Name:  # (most expressions asked: no list to build and join)
        return expr.value
    parts: list[str] = []
    while type(expr) is cst.Attribute:  # exact type checks: libcst's ABC isinstance is slow
        parts.append(expr.attr.value)
        expr = expr.value
    if type(expr) is not cst.Name:
        return None
    parts.append(expr.value)
    return ".".join(reversed(parts))


def literal_setattr(node: cst.CSTNode) -> tuple[cst.BaseExpression, str, cst.BaseExpression] | None:
    """``setattr(obj, "name", value)`` with a literal identifier for its name: ``(obj, "name",
    value)``. Python runs it as ``obj.name = value`` (``Module.__setattr__`` registers the same
    child, parameter or buffer), so it binds as that assignment does; None for anything else
    (a computed name is a family: ``engine/families.py``)."""
    if type(node) is not cst.Call or dotted(node.func) != "setattr" or len(node.args) != 3:
        return None
    obj, name, value = node.args
    if obj.star or name.star or value.star or obj.keyword or name.keyword or value.keyword:
        return None
    text = name.value.evaluated_value if type(name.value) is cst.SimpleString else None
    if not isinstance(text, str) or not text.isidentifier():
        return None
    return obj.value, text, value.value


_FIELDS: dict[type, tuple[str, ...]] = {}
_IS_CODE: dict[type, bool] = {}  # libcst's node classes are ABCs: isinstance on them is slow

# What no walk for code looks into: whitespace, comments, punctuation and operator tokens
# are most of a tree's nodes (three in five in a modeling file). A rule that needs one
# reads it from the node that holds it (``BinaryOperation.operator``).
_TRIVIA: tuple[type[cst.CSTNode], ...] = (
    cst.BaseParenthesizableWhitespace,
    cst.EmptyLine,
    cst.Newline,
    cst.TrailingWhitespace,
    cst.Comment,
    cst.Comma,
    cst.Dot,
    cst.Colon,
    cst.Semicolon,
    cst.AssignEqual,
    cst.LeftParen,
    cst.RightParen,
    cst.LeftSquareBracket,
    cst.RightSquareBracket,
    cst.LeftCurlyBrace,
    cst.RightCurlyBrace,
    cst.BaseBinaryOp,
    cst.BaseBooleanOp,
    cst.BaseCompOp,
    cst.BaseUnaryOp,
    cst.BaseAugOp,
    cst.ImportStar,
    cst.Asynchronous,
)
# Code whose fields hold only trivia (a name, a literal, ``pass``): nothing to read.
_LEAVES: tuple[type[cst.CSTNode], ...] = (cst.Name, cst.Integer, cst.Float, cst.Imaginary)
_LEAVES += (cst.SimpleString, cst.Ellipsis, cst.Pass, cst.Break, cst.Continue)


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The code nodes right below ``node``, in no particular order: its children less the
    syntax trivia (whitespace, comments, punctuation, operators), which no walk for code
    needs and which are most of the nodes.

    libcst computes ``children`` by running a visitor over the node, which made it the
    largest single cost of a cold run; the nodes are dataclasses, so their fields say it
    (only the fields whose declared type may hold code: :func:`_code_fields`).
    """
    kind = type(node)
    names = _FIELDS.get(kind)
    if names is None:
        names = _FIELDS[kind] = _code_fields(kind)
    out: list[cst.CSTNode] = []
    is_code = _IS_CODE
    for name in names:
        value = getattr(node, name)
        held = type(value)
        if held is tuple or held is list:
            for item in value:
                found = is_code.get(type(item))
                if found if found is not None else _code(type(item)):
                    out.append(item)
        else:
            found = is_code.get(held)
            if found if found is not None else _code(held):
                out.append(value)
    return out


def _code_fields(kind: type[cst.CSTNode]) -> tuple[str, ...]:
    """The fields of ``kind`` whose declared type may hold a code node (a leaf's: none);
    a field only ever holding trivia, strings or sentinels (``lpar``, ``whitespace_after``,
    ``comma``, ``operator``) is never read. A type this cannot read is kept."""
    if issubclass(kind, _LEAVES):
        return ()
    return tuple(f.name for f in dataclasses.fields(kind) if _may_hold_code(f.type))


def _may_hold_code(hint: object) -> bool:
    if typing.get_origin(hint) is typing.Literal:
        return False
    args = typing.get_args(hint)
    if args:  # ``Sequence[Arg]``, ``Union[Comma, MaybeSentinel]``, ``Optional[Annotation]``
        return any(_may_hold_code(a) for a in args)
    if not isinstance(hint, type):
        return True  # (a forward reference, a bare generic: cannot tell)
    if issubclass(hint, cst.CSTNode):
        return not issubclass(hint, _TRIVIA)
    return not issubclass(hint, _NO_CODE)


def _code(kind: type) -> bool:
    found = _IS_CODE.get(kind)
    if found is None:
        found = _IS_CODE[kind] = issubclass(kind, cst.CSTNode) and not issubclass(kind, _TRIVIA)
    return found


# Field types that are no node and hold none.
_NO_CODE = (str, bytes, int, float, bool, type(None), enum.Enum)


def descendants(root: cst.CSTNode) -> list[cst.CSTNode]:
    """Every code node under ``root``, ``root`` included, in no particular order (an
    iterative walk: no recursion limit; trivia left out as by :func:`children`)."""
    out: list[cst.CSTNode] = []
    stack = [root]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(children(node))
    return out


def _module_name(node: cst.BaseExpression) -> str | None:
    return dotted(node)


class ImportTable:
    """Local name -> fully qualified name, from every import in the file.

    Imports inside functions are included: the table is file-wide because
    code that shadows ``torch`` or ``F`` with something else is rare enough
    not to pay for scopes.
    """

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        # ``from ..embeddings import Timesteps`` inside a package: local name -> the dotted
        # tail ``embeddings.Timesteps`` (the package itself is unknown without the path)
        self.relative: dict[str, str] = {}
        self.levels: dict[str, int] = {}  # its number of leading dots: 2 for ``from ..x``
        # ``from pkg.utils import *``: ``(dotted module, level)`` of each, in source order;
        # what they bind is known from the project (:meth:`add_starred`)
        self.stars: list[tuple[str, int]] = []

    @classmethod
    def of(cls, module: cst.Module) -> ImportTable:
        table = cls()
        table._collect(module)
        return table

    @classmethod
    def of_source(cls, data: bytes, tree: ast.Module | None = None) -> ImportTable | None:
        """The table :meth:`of` gives for the file, from CPython's parser (many times
        cheaper than libcst's; ``tree`` when the caller parsed ``data`` already), for a file
        that is not walked; None when only libcst's tree can tell (a one-line suite
        ``if x: import y``, which :meth:`of` does not enter, a ``match``, or a file CPython
        rejects)."""
        try:
            data.decode("utf-8")  # (column offsets are in UTF-8 bytes)
            tree = ast.parse(data) if tree is None else tree
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        lines = data.splitlines()
        table = cls()
        typing_only = {
            id(line)
            for stmt in tree.body
            if isinstance(stmt, ast.If) and ast.unparse(stmt.test) in TYPE_CHECKING_TESTS
            for line in stmt.body
            if isinstance(line, ast.ImportFrom) and any(a.name == "*" for a in line.names)
        }
        stack: list[ast.stmt] = list(reversed(tree.body))
        while stack:
            node = stack.pop()
            if id(node) in typing_only:
                continue  # ``if TYPE_CHECKING: from .x import *``: never runs
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname is not None:
                        table.aliases[alias.asname] = alias.name
                    else:
                        head = alias.name.split(".", 1)[0]
                        table.aliases[head] = head
            elif isinstance(node, ast.ImportFrom):
                table._collect_from(node)
            elif isinstance(node, ast.Match):
                return None
            else:
                suites = _suites(node)
                if any(not _indented(suite[0], lines) for suite in suites):
                    return None
                stack.extend(reversed([s for suite in suites for s in suite]))
        return table

    def _collect_from(self, node: ast.ImportFrom) -> None:
        if any(a.name == "*" for a in node.names):
            self.stars.append((node.module or "", node.level))
        names = [(a.asname or a.name, a.name) for a in node.names if a.name != "*"]
        if node.level or node.module is None:
            for local, name in names:
                self.relative[local] = f"{node.module}.{name}" if node.module else name
                self.levels[local] = node.level
        else:
            for local, name in names:
                self.aliases[local] = f"{node.module}.{name}"

    def _collect(self, module: cst.Module) -> None:
        typing_only = _typing_only_stars(module)
        for node in _import_nodes(module):
            if node in typing_only:
                continue  # (its other names are none: a star import binds nothing else)
            if isinstance(node, cst.Import):
                for alias in node.names:
                    name = _module_name(alias.name)
                    if name is None:
                        continue
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        self.aliases[alias.asname.name.value] = name
                    else:
                        head = name.split(".", 1)[0]
                        self.aliases[head] = head
            elif node.relative or node.module is None:
                self._collect_relative(node)
            else:
                base = _module_name(node.module)
                if base is not None and isinstance(node.names, cst.ImportStar):
                    self.stars.append((base, 0))
                if base is not None:
                    for local, name in _imported_names(node):
                        self.aliases[local] = f"{base}.{name}"

    def _collect_relative(self, node: cst.ImportFrom) -> None:
        base = _module_name(node.module) if node.module is not None else None
        if isinstance(node.names, cst.ImportStar):
            self.stars.append((base or "", len(node.relative)))
        for local, name in _imported_names(node):
            self.relative[local] = f"{base}.{name}" if base else name
            self.levels[local] = len(node.relative)

    def add_starred(
        self, module: str, level: int, names: Iterable[tuple[str, str | None]], keep: set[str]
    ) -> None:
        """Bind what ``from module import *`` (``level`` dots) brings: each name with the
        library name it stands for (``torch``), or None for a name of that project module.
        The file's own imports and the names in ``keep`` (bound by the file itself) win:
        the table ignores order, as it ignores scopes."""
        for name, library in names:
            if name in keep or name in self.aliases or name in self.relative:
                continue
            if library is not None:
                self.aliases[name] = library
            elif level == 0:
                self.aliases[name] = f"{module}.{name}"
            else:
                self.relative[name] = f"{module}.{name}" if module else name
                self.levels[name] = level

    def resolve(self, expr: cst.BaseExpression) -> str | None:
        """The qualified name an expression refers to, if it starts at an import."""
        name = dotted(expr)
        return None if name is None else self.resolve_name(name)

    def resolve_name(self, name: str) -> str | None:
        """:meth:`resolve` of a dotted name as written (``nn.Linear``)."""
        head, _, rest = name.partition(".")
        target = self.aliases.get(head)
        if target is None:
            return None
        full = f"{target}.{rest}" if rest else target
        return canonical(full)

    def locate(self, expr: cst.BaseExpression) -> tuple[str, int] | None:
        """``(dotted name, import level)`` of what an expression refers to, for finding it in
        another file of the project: ``("pkg.rope.apply_rope", 0)`` after ``from pkg import
        rope``, ``("rope.apply_rope", 1)`` after ``from . import rope``; None when the
        expression does not start at an import."""
        name = dotted(expr)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head in self.aliases:
            target = self.aliases[head]
            return (f"{target}.{rest}" if rest else target), 0
        if head in self.relative:
            target = self.relative[head]
            return (f"{target}.{rest}" if rest else target), self.levels[head]
        return None

    def spell(self, qualname: str) -> str | None:
        """How this file can write ``qualname`` with the names it imports, or None.

        ``torch.amp.autocast`` is ``th.amp.autocast`` after ``import torch as th`` and
        ``amp.autocast`` after ``from torch import amp``; the most specific import wins.
        """
        best: tuple[int, int, str] | None = None
        for local, target in self.aliases.items():
            if qualname == target or qualname.startswith(target + "."):
                text = local + qualname[len(target) :]
                key = (-len(target), len(text), text)
                best = key if best is None or key < best else best
        return best[2] if best else None


def _imported_names(node: cst.ImportFrom) -> Iterator[tuple[str, str]]:
    """``(local name, imported name)`` for each ``name [as local]`` of a from-import."""
    if isinstance(node.names, cst.ImportStar):
        return
    for alias in node.names:
        if not isinstance(alias.name, cst.Name):
            continue
        local = alias.name.value
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            local = alias.asname.name.value
        yield local, alias.name.value


def _import_nodes(module: cst.Module) -> list[cst.Import | cst.ImportFrom]:
    """Every import statement, at any depth, without a visitor's overhead."""
    found: list[cst.Import | cst.ImportFrom] = []
    stack: list[cst.CSTNode] = list(module.body)
    while stack:
        node = stack.pop()
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    found.append(small)
        elif isinstance(node, cst.BaseCompoundStatement):
            stack.extend(_child_statements(node))
    found.reverse()
    return found


def _typing_only_stars(module: cst.Module) -> set[cst.ImportFrom]:
    """``from x import *`` in a top-level ``if TYPE_CHECKING:``: it never runs (transformers'
    package ``__init__`` files star-import every submodule so, and bind them lazily)."""
    found: set[cst.ImportFrom] = set()
    for stmt in module.body:
        if not (isinstance(stmt, cst.If) and dotted(stmt.test) in TYPE_CHECKING_TESTS):
            continue
        for line in stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else ():
            for small in line.body if isinstance(line, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar):
                    found.add(small)
    return found


# Tests that are false when the code runs: what their body imports is never bound.
TYPE_CHECKING_TESTS = frozenset({"TYPE_CHECKING", "typing.TYPE_CHECKING"})


def _suites(node: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists of a compound statement, in source order (none for a simple one)."""
    suites = [getattr(node, "body", None), getattr(node, "orelse", None)]
    suites += [getattr(node, "finalbody", None)]
    suites += [h.body for h in getattr(node, "handlers", ())]  # (last, as :meth:`of` has them)
    return [suite for suite in suites if isinstance(suite, list) and suite]


def _indented(first: ast.stmt, lines: list[bytes]) -> bool:
    """Whether a suite starting with ``first`` is an indented block: nothing but indentation
    before it on its line (``if x: import y`` is a one-line suite)."""
    line = lines[first.lineno - 1] if first.lineno <= len(lines) else b""
    return not line[: first.col_offset].strip()


def _child_statements(node: cst.BaseCompoundStatement) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    if isinstance(node, cst.Match):
        for case in node.cases:
            if isinstance(case.body, cst.IndentedBlock):
                out.extend(case.body.body)
        return out
    body = node.body
    if isinstance(body, cst.IndentedBlock):
        out.extend(body.body)
    for attr in ("orelse", "finalbody"):
        extra = getattr(node, attr, None)
        if isinstance(extra, cst.If):
            out.append(extra)
        elif extra is not None and isinstance(extra.body, cst.IndentedBlock):
            out.extend(extra.body.body)
    for handler in getattr(node, "handlers", ()):
        if isinstance(handler.body, cst.IndentedBlock):
            out.extend(handler.body.body)
    return out


def lineage_of(
    cls: str, bases: Mapping[str, Sequence[str]], resolve: Callable[[str], str | None]
) -> list[str]:
    """``cls`` and its project bases, nearest first: ``bases`` holds each class's bases as
    written, ``resolve`` names the project class each stands for (None: no project class)."""
    out: list[str] = []
    todo = [cls]
    while todo and len(out) < 32:
        name = todo.pop(0)
        if name in out:
            continue
        out.append(name)
        todo.extend(b for b in map(resolve, bases.get(name, ())) if b)
    return out
