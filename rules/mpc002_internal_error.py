"""MPC002: mpcheck could not analyse a file that parsed."""

from __future__ import annotations

from mpcheck.api import INTERNAL_ERROR, Rule


class InternalError(Rule):
    code = INTERNAL_ERROR.code
    name = INTERNAL_ERROR.name
    summary = "mpcheck could not analyse this valid file (too deep, too large, or a bug)."
    why = """
        Some valid files cannot be analysed: an expression that chains thousands of operators,
        signs, attribute accesses or adjacent strings (libcst's native parser would crash the
        whole process on it, so such files are measured first and skipped), a file above
        `max-file-size` (libcst needs about 0.8 GB of memory per MB of source), a file libcst
        rejects although CPython compiles it, or an unexpected failure inside mpcheck. Each is
        reported as a finding on that file rather than a crash, so the rest of the run still
        completes and CI shows what was skipped.
        """
    how_to_fix = """
        Split the generated expression or file, raise `max-file-size` (or `--max-file-size`),
        or exclude the file. If the message names an mpcheck exception, please report it with
        the file that triggers it.
        """
