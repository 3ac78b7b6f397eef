"""MPC002: mpcheck could not analyse a file that parsed."""

from __future__ import annotations

from mpcheck.rule import Rule


class InternalError(Rule):
    code = "MPC002"
    name = "internal-error"
    summary = "mpcheck could not analyse this file (nested too deeply, or a bug in mpcheck)."
    why = """
        A file so deeply nested that the analysis would exhaust Python's recursion limit, or
        an unexpected failure inside mpcheck, is reported as a finding on that file rather than
        a crash, so the rest of the run still completes and CI shows what was skipped.
        """
    how_to_fix = """
        Simplify the nesting, or exclude the file. If the message names an mpcheck exception,
        please report it with the file that triggers it.
        """
