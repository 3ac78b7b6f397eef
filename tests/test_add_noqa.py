"""``--add-noqa``: every finding suppressed where it is, only those bytes changed."""

from __future__ import annotations

import io
import os
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from mpcheck.cli import app as cli
from mpcheck.output.add_noqa import with_noqa
from tests.support import check

BAD = "import torch\n\nx = torch.ones(3).half()\ny = x.masked_fill(x > 0, -1e9)\n"


def added(source: str) -> tuple[str, int]:
    data, count = with_noqa(source.encode(), check(source))
    return data.decode(), count


def test_a_directive_is_appended_and_silences_the_finding() -> None:
    new, count = added(BAD)
    assert count == 1
    assert new.splitlines()[3] == "y = x.masked_fill(x > 0, -1e9)  # noqa: MPC301"
    assert [d.code for d in check(new)] == []


def test_missing_codes_join_an_existing_directive_and_a_blanket_one_is_kept() -> None:
    listed = BAD.replace("-1e9)\n", "-1e9)  # noqa: MPC101 (reason)\n")
    new, count = added(listed)
    assert count == 1 and "# noqa: MPC101, MPC301 (reason)" in new
    blanket = BAD.replace("-1e9)\n", "-1e9)  # noqa\n")
    assert added(blanket) == (blanket, 0)


def test_a_multi_line_statement_gets_it_on_its_last_line_outside_strings() -> None:
    source = (
        "import torch\n\nx = torch.ones(3).half()\n"
        'y = """\n# text\n""" + str(x.masked_fill(x > 0,\n    -1e9))\n'
    )
    new, count = added(source)
    assert count == 1
    assert new.splitlines()[-1] == "    -1e9))  # noqa: MPC301"
    assert '"""\n# text\n"""' in new


def test_line_endings_encoding_and_other_bytes_are_kept() -> None:
    source = "# -*- coding: latin-1 -*-\r\nimport torch\r\n\r\nx = torch.ones(3).half()\r\n"
    source += "y = x.masked_fill(x > 0, -1e9)  \r\nz = 'caf\xe9'\r\n"
    data = source.encode("latin-1")
    new, count = with_noqa(data, check(source))
    assert count == 1
    assert new == data.replace(b"-1e9)  \r\n", b"-1e9)  # noqa: MPC301\r\n")


def test_idempotent() -> None:
    new, _ = added(BAD)
    assert added(new) == (new, 0)


def test_cli_writes_directives_and_exits_zero(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "clean.py").write_text("import torch\n")
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            status = cli.main(["check", "--no-cache", "--add-noqa", "."])
            again = cli.main(["check", "--no-cache", "."])
    finally:
        os.chdir(cwd)
    assert status == 0 and "Added 1 noqa directive." in err.getvalue()
    assert again == 0
    assert (tmp_path / "clean.py").read_text() == "import torch\n"
