"""Where the few nodes a file reports are, without placing every node of the file.

libcst's ``PositionProvider`` regenerates the module's code and tracks the line and column
of every token and every node: on a 500-line model file that costs twice its parse, and a
file with one finding paid it in full. The places here are the same (libcst's own
bookkeeping runs, unchanged, inside each wanted node), but outside those nodes the code is
only generated, and a line and column are counted from the generated text when one is
needed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange

from mpcheck.files.source import split_lines

__all__ = ["positions"]

_NEWLINE = re.compile(r"\r\n?|\n")  # (libcst's own, for the same counts)


def positions(
    module: cst.Module, nodes: Iterable[cst.CSTNode], source: str | None = None
) -> dict[cst.CSTNode, CodeRange]:
    """The range libcst's ``PositionProvider`` gives each of ``nodes`` (and their
    descendants) in ``module``; a node not in the module has none.

    With ``source`` (the text ``module`` was parsed from), the ranges are in that text:
    libcst drops a form feed at the start of a statement's line, so its columns there are
    short by one, and a fix would land one character early."""
    wanted = set(nodes)
    state = _placing(module, wanted, stop=True)
    try:
        module._codegen(state)
    except _AllPlaced:  # (the rest of the file places nothing)
        if source is None or ("\f" not in source and source.startswith("".join(state.tokens))):
            return state.placed  # (a dropped form feed moves a column: see ``_realigned``)
        state = _placing(module, wanted, stop=False)  # (realigned from the whole text)
        module._codegen(state)
    if source is not None:
        generated = "".join(state.tokens)
        if generated != source:
            return _realigned(state.placed, generated, source)
    return state.placed


def _placing(module: cst.Module, wanted: set[cst.CSTNode], *, stop: bool) -> _PlacingState:
    return _PlacingState(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        wanted=wanted,
        left=set(wanted) if stop else None,
    )


class _AllPlaced(Exception):
    """Every wanted node is placed: generating the code after them would place nothing
    (a file's findings are on average halfway down it)."""


def _realigned(
    placed: dict[cst.CSTNode, CodeRange], generated: str, source: str
) -> dict[cst.CSTNode, CodeRange]:
    """``placed`` (in ``generated``) moved into ``source``, which holds the same lines with
    some characters more (the form feeds libcst dropped); unchanged where they disagree
    otherwise."""
    ours, theirs = split_lines(generated), split_lines(source)
    if len(ours) != len(theirs):
        return placed
    maps: dict[int, list[int]] = {}
    for row, (mine, original) in enumerate(zip(ours, theirs, strict=True), start=1):
        if mine != original:
            columns = _column_map(mine, original)
            if columns is None:
                return placed
            maps[row] = columns

    def moved(pos: CodePosition) -> CodePosition:
        columns = maps.get(pos.line)
        if columns is None or pos.column >= len(columns):
            return pos
        return CodePosition(pos.line, columns[pos.column])

    return {node: CodeRange(moved(r.start), moved(r.end)) for node, r in placed.items()}


def _column_map(mine: str, original: str) -> list[int] | None:
    """For each column of ``mine`` (and its end), the column of the same character in
    ``original``, which has only extra characters; None if it does not."""
    columns, j = [], 0
    for char in mine:
        while j < len(original) and original[j] != char:
            j += 1
        if j == len(original):
            return None
        columns.append(j)
        j += 1
    columns.append(len(original) if j == len(original) else j)
    return columns


@dataclass
class _PlacingState(CodegenState):
    """Code generation that places the wanted nodes and everything inside them.

    Inside a wanted node it does what libcst's ``PositionProvidingCodegenState`` does: a
    node's range is where its code starts and ends, unless the node records a narrower
    syntactic range (without leading lines and whitespace), possibly ending where one of
    its children ends."""

    wanted: set[cst.CSTNode] = field(default_factory=set)
    # the wanted nodes not placed yet (None: generate the whole module)
    left: set[cst.CSTNode] | None = None
    placed: dict[cst.CSTNode, CodeRange] = field(default_factory=dict)
    _inside: int = 0  # how many wanted nodes enclose the current one
    _starts: list[CodePosition] = field(default_factory=list)
    _counted: int = 0  # tokens already counted into the line and column below
    _line: int = 1
    _column: int = 0

    def _now(self) -> CodePosition:
        tokens = self.tokens
        if self._counted < len(tokens):
            text = "".join(tokens[self._counted :])
            if "\r" in text:  # per token, as libcst counts them
                for token in tokens[self._counted :]:
                    self._advance(token)
            else:
                self._advance(text)
            self._counted = len(tokens)
        return CodePosition(self._line, self._column)

    def _advance(self, text: str) -> None:
        segments = _NEWLINE.split(text)
        if len(segments) == 1:
            self._column += len(text)
        else:
            self._line += len(segments) - 1
            self._column = len(segments[-1])

    def before_codegen(self, node: cst.CSTNode) -> None:
        if self._inside or node in self.wanted:
            self._inside += 1
            self._starts.append(self._now())

    def after_codegen(self, node: cst.CSTNode) -> None:
        if self._inside:
            self._inside -= 1
            start = self._starts.pop()
            if node not in self.placed:  # a syntactic range recorded inside wins
                self.placed[node] = CodeRange(start, self._now())
            if self.left is not None:
                self.left.discard(node)
                if not self.left and not self._inside:
                    raise _AllPlaced

    @contextmanager
    def record_syntactic_position(
        self,
        node: cst.CSTNode,
        *,
        start_node: cst.CSTNode | None = None,
        end_node: cst.CSTNode | None = None,
    ) -> Iterator[None]:
        if not self._inside:
            yield
            return
        start = self._now()
        try:
            yield
        finally:
            end = self._now()
            if start_node is not None:
                start = self.placed[start_node].start
            if end_node is not None:
                end = self.placed[end_node].end
            self.placed[node] = CodeRange(start, end)
