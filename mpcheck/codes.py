"""The engine's own codes, declared once: every other place names them from here."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ENGINE_CODES", "INTERNAL_ERROR", "INVALID_SYNTAX", "UNUSED_NOQA", "EngineCode"]


class EngineCode(NamedTuple):
    code: str
    name: str


INVALID_SYNTAX = EngineCode("MPC001", "invalid-syntax")  # the file cannot be read or parsed
INTERNAL_ERROR = EngineCode("MPC002", "internal-error")  # a valid file mpcheck cannot analyse
UNUSED_NOQA = EngineCode("MPC100", "unused-noqa")  # a ``noqa`` that suppresses nothing
# Reported whatever the selection: a file that was not analysed must never look clean.
ENGINE_CODES = frozenset({INVALID_SYNTAX.code, INTERNAL_ERROR.code})
