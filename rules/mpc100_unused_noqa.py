"""MPC100: a ``# noqa: MPC...`` code that suppressed nothing."""

from __future__ import annotations

from mpcheck.api import UNUSED_NOQA, Rule, Severity


class UnusedNoqa(Rule):
    code = UNUSED_NOQA.code
    name = UNUSED_NOQA.name
    severity = Severity.WARNING
    summary = "A `# noqa` comment names an mpcheck code that suppressed nothing on its line."
    why = """
        Suppressions outlive the code they were written for. A stale `# noqa: MPC101` hides
        the next real finding on that line, so mpcheck reports codes that matched nothing.
        Codes of other tools (`E501`, `F401`) are left alone.
        """
    bad = """
        out = self.proj(h)  # noqa: MPC101
        """
    good = """
        out = self.proj(h)
        """
    how_to_fix = "Delete the code from the comment (or the whole comment if it is empty)."
