"""Which Python number a name stands for where the code reads it.

A guard or fill value is seldom written where it is used: ``EPS = 1e-8`` at the top of the
file, ``def encode(self, boxes, eps=1e-8)``, ``self.eps = eps`` in ``__init__``. Python's own
rules give the value, and the engine follows them only where they leave one value:

- a module-level name bound once, to a number, and never declared ``global`` by a function
  of the file, is that number in every function that does not bind it itself (Python looks
  a name up in the function, then in the module);
- a parameter with a numeric default holds the default in a call that does not pass it; in
  the function's own walk it is the default unless a call of the file passes it (any value,
  or ``*args``/``**kwargs``, or the function is handed on as a value: ``partial(f, eps=..)``),
  when it is unknown. Calls in other files are not seen: the default is the value the author
  chose for callers that do not pass one, and a rule states it as the default;
- ``self.eps = eps`` in ``__init__`` keeps that number for the other methods, unless the
  file sets an attribute of that name anywhere else (then unknown).

Everything here is cheap: the top level's statements once, and one search of the file's
code for a function's name when one of its parameters has a numeric default.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cached_property, lru_cache

import libcst as cst

from mpcheck.engine.facts import Cause, Fact, Kind, Origin
from mpcheck.project.brackets import closing
from mpcheck.project.records import blank

__all__ = ["Constants", "number_of"]

# ``= v``, ``+= v`` (never ``==``), after an attribute's name
_SETS = rb"\s*(?:[-+*/%@&|^]|//|\*\*|<<|>>)?=(?!=)"
# (the keyword first, its word boundary behind it: a leading ``\b`` is tried at every offset)
_GLOBAL = re.compile(rb"global(?<!\wglobal)\s+([\w\s,]+)")
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def number_of(node: cst.BaseExpression | None) -> float | None:
    """The number a literal (``1e-8``, ``-1e9``, ``(1e-8)``) writes, else None."""
    negate = False
    while isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        negate ^= isinstance(node.operator, cst.Minus)
        node = node.expression
    if isinstance(node, cst.Integer):
        value = float(int(node.value.replace("_", ""), 0))
    elif isinstance(node, cst.Float):
        value = float(node.value.replace("_", ""))
    else:
        return None
    return -value if negate else value


def _occurrences(code: bytes, word: bytes) -> Iterator[tuple[int, int]]:
    r"""Where the name ``word`` occurs in ``code`` not followed by a word byte: its start and
    end offsets, as ``re.finditer(word + rb"(?!\w)")`` finds them, without compiling a
    pattern for each name a file's walk asks of (``re``'s cache holds 512)."""
    start = code.find(word) if word else -1
    while start >= 0:
        end = start + len(word)
        if end < len(code) and code[end] in _WORD:
            start = code.find(word, start + 1)
            continue
        yield start, end
        start = code.find(word, end)


class Constants:
    """The numbers names and parameters stand for in one file (see the module docstring)."""

    def __init__(self, module: cst.Module, source: bytes) -> None:
        self.module = module
        self._source = source
        self._passed: dict[str, tuple[frozenset[str], int, bool]] = {}
        self._named: dict[str, tuple[frozenset[str], int, bool]] = {}
        self._set_once: dict[str, bool] = {}

    @cached_property
    def text(self) -> bytes:
        """The file's bytes (printed from the tree once when the walk was given none)."""
        return self._source or self.module.code.encode()

    @cached_property
    def code(self) -> bytes:
        """The file's code with strings and comments blanked (offsets kept)."""
        return blank(self.text)

    @cached_property
    def globals_declared(self) -> frozenset[str]:
        """Names a function of the file rebinds at module level (``global EPS``)."""
        found: set[str] = set()
        if b"global" not in self.text:
            return frozenset()  # (blanking only empties: the code holds none either)
        for match in _GLOBAL.finditer(self.code):
            line = match.group(1).split(b"\n", 1)[0]
            found.update(n.strip().decode() for n in line.split(b",") if n.strip())
        return frozenset(found)

    @cached_property
    def module_numbers(self) -> dict[str, Fact]:
        """Module-level names bound once, to a number: ``EPS = 1e-8``."""
        counts: dict[str, int] = {}
        found: dict[str, Fact] = {}

        def bind(target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
            if isinstance(target, cst.Name):
                counts[target.value] = counts.get(target.value, 0) + 1
                number = number_of(value)
                if number is not None:
                    text = f"{target.value} = {self.module.code_for_node(value)}"  # type: ignore[arg-type]
                    origin = Origin(value, Cause.LITERAL, text)  # type: ignore[arg-type]
                    found[target.value] = Fact(Kind.SCALAR, value=number, origin=origin)
            elif isinstance(target, (cst.Tuple, cst.List)):
                for element in target.elements:
                    bind(element.value, None)
            elif isinstance(target, cst.StarredElement):
                bind(target.value, None)

        def statements(body: object) -> None:
            for stmt in body if isinstance(body, (list, tuple)) else ():
                if isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        if isinstance(small, cst.Assign):
                            for target in small.targets:
                                bind(target.target, small.value)
                        elif isinstance(small, cst.AnnAssign):
                            bind(small.target, small.value)
                        elif isinstance(small, cst.AugAssign):
                            bind(small.target, None)
                        elif isinstance(small, (cst.Import, cst.ImportFrom)):
                            names = small.names
                            for alias in names if isinstance(names, (list, tuple)) else ():
                                bound = alias.asname.name if alias.asname else alias.name
                                if isinstance(bound, cst.Name):
                                    bind(bound, None)
                elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                    bind(stmt.name, None)
                elif isinstance(stmt, cst.BaseCompoundStatement):
                    if isinstance(stmt, cst.For):
                        bind(stmt.target, None)
                    inner = stmt.body
                    statements(getattr(inner, "body", ()))
                    for part in ("orelse", "finalbody"):
                        other = getattr(stmt, part, None)
                        statements(getattr(getattr(other, "body", None), "body", ()))
                    for handler in getattr(stmt, "handlers", ()):
                        statements(getattr(handler.body, "body", ()))

        statements(self.module.body)
        rebound = self.globals_declared
        return {n: f for n, f in found.items() if counts.get(n) == 1 and n not in rebound}

    def name(self, name: str) -> Fact | None:
        """The number a module-level ``name`` is, read in a function (None: not one)."""
        return self.module_numbers.get(name)

    def default(
        self, fn: cst.FunctionDef, param: cst.Param, index: int, owner: str | None
    ) -> Fact | None:
        """The number ``param`` of ``fn`` holds in its walk: its default when no call of the
        file passes it (``owner``: the class of a method; ``__init__`` is called as it)."""
        default = param.default
        number = number_of(default)
        origin_node: cst.BaseExpression | None = default
        if number is None and isinstance(default, cst.Name):
            known = self.name(default.value)
            number = known.value if known is not None else None
        if number is None or default is None or origin_node is None:
            return None
        name = param.name.value
        callee = owner if fn.name.value == "__init__" and owner else fn.name.value
        keywords, positional, opaque = self._calls(callee)
        if opaque or name in keywords:
            return None
        if param not in fn.params.kwonly_params and index < positional:
            return None  # passed by position (``index``: among what a call passes)
        text = f"{name}={self.module.code_for_node(default)}"  # (the code: a message quotes it)
        return Fact(Kind.SCALAR, value=number, origin=Origin(default, Cause.LITERAL, text))

    def _calls(self, callee: str) -> tuple[frozenset[str], int, bool]:
        """What calls of ``callee`` in the file pass: the keywords, the most positional
        arguments (``Base.__init__(self, ...)`` counts ``self``: one too many, on the safe
        side), and whether one is opaque (``*args``, ``**kw``, unreadable) or the function is
        handed on as a value. A class's ``__init__`` is also called through
        ``super().__init__(...)`` and ``Base.__init__(self, ...)``."""
        if callee in self._passed:
            return self._passed[callee]
        found = self._calls_named(callee)
        if callee[:1].isupper():
            inits = self._calls_named("__init__")
            found = (found[0] | inits[0], max(found[1], inits[1]), found[2] or inits[2])
        self._passed[callee] = found
        return found

    def _calls_named(self, name: str) -> tuple[frozenset[str], int, bool]:
        """:meth:`_calls` of the one name ``name`` written in the file (each class asks of
        ``__init__``: its calls are read once per file, not once per class)."""
        if name in self._named:
            return self._named[name]
        keywords: set[str] = set()
        positional, opaque = 0, False
        code = self.code
        word = name.encode()
        for start, after in _occurrences(code, word):
            if start > 0 and code[start - 1] in _WORD:
                continue  # (inside a longer name)
            if code[max(0, start - 4) : start] == b"def " or code[max(0, start - 6) : start] == (
                b"class "
            ):
                continue  # the definition itself
            while after < len(code) and code[after] in b" \t":
                after += 1
            if after >= len(code) or code[after] != 0x28:
                # a function handed on as a value (a class named in an annotation is not)
                opaque = opaque or not name[:1].isupper()
                continue
            end = closing(code, after + 1, 20000)
            text = self._source_text(after, end + 1)
            try:
                call = ast.parse("f" + text, mode="eval").body
            except (SyntaxError, ValueError, RecursionError):
                opaque = True
                continue
            if not isinstance(call, ast.Call):
                opaque = True
                continue
            if any(isinstance(a, ast.Starred) for a in call.args):
                opaque = True
            if any(k.arg is None for k in call.keywords):
                opaque = True
            keywords.update(k.arg for k in call.keywords if k.arg is not None)
            positional = max(positional, len(call.args))
        found = (frozenset(keywords), positional, opaque)
        self._named[name] = found
        return found

    def _source_text(self, start: int, end: int) -> str:
        return self.text[start:end].decode("utf-8", "replace")

    def attribute_set_once(self, attr: str) -> bool:
        """Whether the file sets an attribute ``attr`` in one place only (``self.eps = eps``)."""
        if attr not in self._set_once:
            once = len(_sets(attr).findall(self.code)) <= 1 and b"setattr" not in self.code
            self._set_once[attr] = once
        return self._set_once[attr]


@lru_cache(maxsize=1024)
def _sets(attr: str) -> re.Pattern[bytes]:
    """A store to attribute ``attr`` (``.eps =``, ``.eps +=``): compiled once per run, the
    same attribute names recur over a project (``re``'s own cache holds 512 patterns)."""
    return re.compile(rb"\.\s*" + re.escape(attr.encode()) + _SETS)
