"""Notebooks safely and everywhere (issues 34 and 38): malformed files, tokenizer line
breaks, byte-exact write-back, edits between check and fix, stdin, cell magics, --add-noqa,
the order and messages of findings. Driven through the CLI, notebooks written by nbformat."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mpcheck.cli.app import main
from mpcheck.cli.fixes import fix_files

nbformat = pytest.importorskip("nbformat")

LEGACY = "scaler = torch.cuda.amp.GradScaler()\n"
FIXED_JSON = 'torch.amp.GradScaler(\\"cuda\\")'  # the fix as it reads inside a JSON string


def _nb(*cells: str | tuple[str, str], **metadata: object) -> Any:
    """A notebook of code cells (a ``("markdown", text)`` pair for another kind)."""
    nb = nbformat.v4.new_notebook(metadata=metadata)
    for cell in cells:
        kind, text = cell if isinstance(cell, tuple) else ("code", cell)
        new = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
        nb.cells.append(new(text))
    for number, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{number}"  # stable ids: byte comparisons need fixed input
    return nb


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _findings(path: Path) -> list[tuple[int, int, int, str]]:
    code, out, err = _run("check", "--output-format", "json", "--no-cache", str(path))
    assert code in (0, 1), err
    return [
        (f["cell"], f["location"]["row"], f["location"]["column"], f["code"])
        for f in json.loads(out)
    ]


# -- 34.9: a malformed notebook is its own MPC001, the rest of the run goes on --------------

MALFORMED = {
    "not JSON": b'{"cells": [',
    "a JSON list": b"[1, 2]",
    "cells not a list": b'{"cells": 3, "nbformat": 4}',
    "a cell not an object": b'{"cells": [1], "nbformat": 4}',
    "source a number": b'{"cells": [{"cell_type": "code", "source": 5}], "nbformat": 4}',
    "source list holds a number": b'{"cells": [{"cell_type": "code", "source": ["x = 1\\n", 2]}]}',
    "source null": b'{"cells": [{"cell_type": "code", "source": null}], "nbformat": 4}',
    "nbformat 3": b'{"nbformat": 3, "cells": [], "worksheets": []}',
    "nbformat a string": b'{"nbformat": "4", "cells": []}',
    "lone surrogate": b'{"cells": [{"cell_type": "code", "source": "x = \\"\\ud800\\"\\n"}]}',
    "nested too deeply": b'{"cells": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}",
    "not UTF-8": b'{"cells": [{"cell_type": "code", "source": "x = \xff\\n"}]}',
    "empty file": b"",
}


@pytest.mark.parametrize("data", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_notebook_is_mpc001_and_the_rest_is_checked(
    tmp_path: Path, data: bytes
) -> None:
    (tmp_path / "bad.ipynb").write_bytes(data)
    nbformat.write(_nb("import torch\n", LEGACY), tmp_path / "good.ipynb")
    code, out, err = _run("check", "--output-format", "concise", "--no-cache", str(tmp_path))
    assert code == 1 and "internal error" not in err and "Traceback" not in err, err
    assert "bad.ipynb:1:1: MPC001 error: cannot read the notebook: " in out
    assert "good.ipynb:cell 2:1:10: MPC404" in out
    # and the fix loop goes on past it
    code, out, err = _run("check", "--fix", "--no-cache", str(tmp_path))
    assert "internal error" not in err and "Traceback" not in err, err
    assert FIXED_JSON in (tmp_path / "good.ipynb").read_text()
    assert (tmp_path / "bad.ipynb").read_bytes() == data


@pytest.mark.parametrize(
    "cell",
    [
        {"cell_type": "code"},  # no source: an empty cell
        {"cell_type": ["code"], "source": "x"},  # not a code cell
        {"cell_type": "code", "source": ["import torch\n", "x = 1"], "metadata": None},
        {"cell_type": "code", "source": "x = 1\x00\n"},  # a NUL byte: the cell's own MPC001
    ],
)
def test_odd_cells_do_not_abort_the_run(tmp_path: Path, cell: dict[str, object]) -> None:
    text = json.dumps({"cells": [cell, {"cell_type": "code", "source": "import torch\n" + LEGACY}]})
    (tmp_path / "odd.ipynb").write_text(text)
    code, _, err = _run("check", "--no-cache", str(tmp_path / "odd.ipynb"))
    assert code == 1 and "internal error" not in err, err


def test_a_utf8_bom_notebook_is_read_and_keeps_its_bom(tmp_path: Path) -> None:
    path = tmp_path / "bom.ipynb"
    path.write_bytes(b"\xef\xbb\xbf" + nbformat.writes(_nb("import torch\n", LEGACY)).encode())
    assert _findings(path) == [(2, 1, 10, "MPC404")]
    assert _run("check", "--fix", "--no-cache", str(path))[0] == 0
    assert path.read_bytes().startswith(b"\xef\xbb\xbf{")


def test_a_big_unicode_notebook_is_checked(tmp_path: Path) -> None:
    cells = [f"größe_{i} = '🚀 {i}'\n" * 20 for i in range(300)]
    nbformat.write(_nb("import torch\n", *cells, LEGACY), tmp_path / "big.ipynb")
    assert _findings(tmp_path / "big.ipynb") == [(302, 1, 10, "MPC404")]


# -- 34.5: cells split as Python's tokenizer splits lines ----------------------------------


@pytest.mark.parametrize("odd", ["\x0c", "\u2028", "\x1c", "\x85", "\x0b"])
def test_line_breaks_python_does_not_know_do_not_move_findings(tmp_path: Path, odd: str) -> None:
    lead = odd if odd == "\x0c" else ""  # only a form feed may start a line of Python
    first = f"import torch\n# a comment{odd}with an odd character\nnote = 'x{odd}y'\n{lead}z = 1\n"
    path = tmp_path / "odd.ipynb"
    nbformat.write(_nb(first, "y = 2\n" + LEGACY), path)
    assert _findings(path) == [(2, 2, 10, "MPC404")]
    assert _run("check", "--fix", "--no-cache", str(path))[0] == 0
    after = nbformat.read(path, as_version=4)
    assert after.cells[0].source == first  # the fix did not land in the first cell
    assert after.cells[1].source == 'y = 2\nscaler = torch.amp.GradScaler("cuda")\n'


# -- 34.13f: only the fixed cells' strings change, byte for byte ---------------------------


def _variants() -> dict[str, str]:
    nb = _nb(
        "import torch\n",
        ("markdown", "Ünïcode — prose, and a float: 1e-05\n"),
        "x = 1\n" + LEGACY + "y = 'é'",
        lr=1e-05,
        zeta={"b": 2, "a": 1.50},
    )
    plain = nbformat.writes(nb)
    data = json.loads(plain)
    return {
        "nbformat": plain + "\n",
        "nbformat, no final newline": plain,
        "indent 2": json.dumps(data, indent=2, ensure_ascii=False) + "\n",
        "indent 2, ASCII escapes": json.dumps(data, indent=2) + "\n",
        "indent 1, CRLF": (plain + "\n").replace("\n", "\r\n"),
        "compact": json.dumps(data, separators=(",", ":")),
        # spellings no JSON writer would produce, kept as they are
        "hand-written": plain.replace("1e-05", "1.0E-5").replace('"é', '"\\u00e9') + "\n",
        "string source": json.dumps(
            {**data, "cells": [{**c, "source": "".join(c["source"])} for c in data["cells"]]},
            indent=1,
        ),
    }


@pytest.mark.parametrize("name", list(_variants()))
def test_fix_changes_only_the_fixed_string(tmp_path: Path, name: str) -> None:
    text = _variants()[name]
    path = tmp_path / "nb.ipynb"
    path.write_bytes(text.encode())
    assert _run("check", "--fix", "--no-cache", str(path))[0] == 0
    expected = text.replace("torch.cuda.amp.GradScaler()", FIXED_JSON)
    assert path.read_bytes() == expected.encode()


def test_fix_that_adds_a_line_keeps_the_list_layout(tmp_path: Path) -> None:
    from mpcheck.files.notebook_json import splice

    for text in _variants().values():
        data = json.loads(text)
        source = "".join(data["cells"][2]["source"])
        new = splice(text, {2: "import os\n" + source})
        after = json.loads(new)
        assert "".join(after["cells"][2]["source"]) == "import os\n" + source
        assert {**after, "cells": None} == {**data, "cells": None}
        assert after["cells"][:2] == data["cells"][:2]
        assert new.count("\r\n") >= text.count("\r\n")


# -- 34.4: a notebook edited between the check and the fix ----------------------------------


def test_a_notebook_edited_after_the_check_is_fixed_where_it_is_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "nb.ipynb"
    nbformat.write(_nb("import torch\n", LEGACY + "z = 3\n"), path)

    def edited_meanwhile(*args: object) -> object:
        nb = nbformat.read(path, as_version=4)  # the user inserts a line above the finding
        nb.cells[1].source = "user_line = 1\n" + nb.cells[1].source
        nbformat.write(nb, path)
        return fix_files(*args)  # type: ignore[arg-type]

    monkeypatch.setattr("mpcheck.cli.check.fix_files", edited_meanwhile)
    assert _run("check", "--fix", "--no-cache", str(path))[0] == 0
    cell = nbformat.read(path, as_version=4).cells[1].source
    assert cell == 'user_line = 1\nscaler = torch.amp.GradScaler("cuda")\nz = 3\n'


def test_a_notebook_broken_after_the_check_is_an_error_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "nb.ipynb"
    nbformat.write(_nb("import torch\n", LEGACY), path)

    def broken_meanwhile(*args: object) -> object:
        path.write_text('{"cells": [')
        return fix_files(*args)  # type: ignore[arg-type]

    monkeypatch.setattr("mpcheck.cli.check.fix_files", broken_meanwhile)
    code, _, err = _run("check", "--fix", "--no-cache", str(path))
    assert code == 2 and "internal error" not in err, err
    assert "cannot fix the notebook: not valid JSON" in err
    assert path.read_text() == '{"cells": ['


# -- 38.5: stdin, cell magics, --add-noqa, order and messages --------------------------------


def _stdin(data: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "mpcheck", "check", "--no-cache", *args, "-"],
        input=data,
        capture_output=True,
        check=False,
    )


def test_a_notebook_on_stdin_is_read_as_a_notebook(tmp_path: Path) -> None:
    data = nbformat.writes(_nb("import torch\n", LEGACY)).encode()
    done = _stdin(data, "--output-format", "concise", "--stdin-filename", "n.ipynb")
    assert done.returncode == 1, done.stderr
    assert b"n.ipynb:cell 2:1:10: MPC404" in done.stdout
    fixed = _stdin(data, "--fix", "--stdin-filename", "n.ipynb")
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout == data.replace(b"torch.cuda.amp.GradScaler()", FIXED_JSON.encode())
    broken = _stdin(b"{", "--stdin-filename", "n.ipynb")
    assert broken.returncode == 1 and b"cannot read the notebook" in broken.stdout


@pytest.mark.parametrize("magic", ["%%time", "%%timeit -n 1", "%%capture out", "%%prun"])
def test_cell_magics_that_run_python_have_their_body_checked(tmp_path: Path, magic: str) -> None:
    path = tmp_path / "nb.ipynb"
    nbformat.write(_nb("import torch\n", f"{magic}\n{LEGACY}", f"%%bash\n{LEGACY}"), path)
    assert _findings(path) == [(2, 2, 10, "MPC404")]  # not the %%bash cell


def test_add_noqa_writes_into_the_cell_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    text = nbformat.writes(_nb("import torch\n", f"%matplotlib inline\n!ls\n{LEGACY}")) + "\n"
    text = text.replace("\n", "\r\n")
    path.write_bytes(text.encode())
    code, _, err = _run("check", "--add-noqa", "--no-cache", str(path))
    assert code == 0 and "Added 1 noqa directive." in err, err
    expected = text.replace("GradScaler()\\n", "GradScaler()  # noqa: MPC404\\n")
    assert path.read_bytes() == expected.encode()
    assert _findings(path) == []


def test_findings_sort_by_cell_then_row(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    nbformat.write(_nb("import torch\n", "a = 1\nb = 2\nc = 3\n" + LEGACY, LEGACY), path)
    assert _findings(path) == [(2, 4, 10, "MPC404"), (3, 1, 10, "MPC404")]
    code, out, _ = _run("check", "--output-format", "concise", "--no-cache", str(path))
    assert out.index("cell 2:4:10") < out.index("cell 3:1:10")


ENCODER = """class Encoder(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.embed = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        h = self.embed(x)
        h = F.gelu(h.to(torch.float32))
        return self.norm(h)
"""


def test_messages_cite_rows_of_cells(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    imports = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
    nbformat.write(_nb(imports, ("markdown", "# the encoder"), ENCODER), path)
    _, out, _ = _run("check", "--output-format", "json", "--no-cache", str(path))
    (finding,) = json.loads(out)
    assert (finding["cell"], finding["location"]["row"]) == (3, 10)
    assert "`.to(torch.float32)` at cell 3, line 9)" in finding["message"]


def test_quoted_code_in_a_message_is_not_renumbered(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    block = ENCODER.replace("self.norm(h)", 'self.norm(h + len("line 3"))')
    imports = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
    nbformat.write(_nb(imports, block), path)
    _, out, _ = _run("check", "--output-format", "json", "--no-cache", str(path))
    (finding,) = json.loads(out)
    assert finding["message"].startswith('`h + len("line 3")` is float32')
    assert "at cell 2, line 9)" in finding["message"]


def test_full_output_frames_the_cells_own_lines(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    text = nbformat.writes(_nb("import torch\n", f"%%time\n{LEGACY}")).replace("\n", "\r\n")
    path.write_bytes(text.encode())
    _, out, _ = _run("check", "--output-format", "full", "--no-cache", str(path))
    assert "1 | %%time\n2 | scaler = torch.cuda.amp.GradScaler()\n  |          ^^^" in out


def test_diff_of_a_notebook_broken_after_the_check_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    from mpcheck.cli.fixes import diff_files

    path = tmp_path / "nb.ipynb"
    data = nbformat.writes(_nb("import torch\n", LEGACY)).encode()
    path.write_bytes(b"\xef\xbb\xbf" + data)  # with a BOM, which the diff does not touch

    assert main(["check", "--diff", "--no-cache", str(path)]) == 1
    out = capsysbinary.readouterr().out
    assert out.count(b"\n+ ") == 1 and out.count(b"\n- ") == 1 and FIXED_JSON.encode() in out

    def broken_meanwhile(*args: Any) -> int:
        path.write_text('{"cells": [')
        return diff_files(*args)

    monkeypatch.setattr("mpcheck.cli.check.diff_files", broken_meanwhile)
    assert main(["check", "--diff", "--no-cache", str(path)]) == 2
    err = capsysbinary.readouterr().err
    assert b"internal error" not in err and b"not valid JSON" in err, err


def test_overlapping_fixes_in_a_cell_converge_in_one_run(tmp_path: Path) -> None:
    # the autocast's argument edit holds the scaler's: one --fix re-checks and fixes again
    path = tmp_path / "nb.ipynb"
    nested = "with torch.cuda.amp.autocast(enabled=torch.cuda.amp.GradScaler().is_enabled()):\n"
    nbformat.write(_nb("import torch\n", nested + "    pass\n"), path)
    code, _, err = _run("check", "--fix", "--no-cache", str(path))
    assert code == 0 and "Fixed 2 findings." in err, err
    cell = nbformat.read(path, as_version=4).cells[1].source
    assert cell.startswith('with torch.amp.autocast("cuda", enabled=torch.amp.GradScaler("cuda")')
