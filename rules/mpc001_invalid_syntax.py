"""MPC001: the file could not be parsed, so nothing in it was checked."""

from __future__ import annotations

from mpcheck.api import INVALID_SYNTAX, Rule


class InvalidSyntax(Rule):
    code = INVALID_SYNTAX.code
    name = INVALID_SYNTAX.name
    summary = "The file could not be parsed (a syntax error or undecodable bytes)."
    why = """
        mpcheck reads each file once with libcst. A file that does not parse, or whose bytes
        are not valid in its declared encoding, cannot be analysed: this finding says so at
        the parser's position instead of silently skipping the file. The other files of the
        run are still checked.
        """
    symptom = "`SyntaxError: parser error: error at 2:9: expected ':'`"
    how_to_fix = "Fix the syntax error, or exclude the file (`extend-exclude`)."
