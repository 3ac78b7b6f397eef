"""Notebooks: cells joined with magics masked, findings per cell, fixes written back in place."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from mpcheck.cli.app import main
from mpcheck.files.notebook import NotebookError, check_notebook, fix_notebook_file, load
from mpcheck.ruleset.rule import all_rules

nbformat = pytest.importorskip("nbformat")

FIXTURE = Path(__file__).parent / "data" / "notebooks" / "train.ipynb"


def _shown(text: str) -> list[tuple[int, int, int, str]]:
    found = check_notebook(text, "train.ipynb", all_rules())
    return [(d.cell, d.start.row, d.start.column, d.code) for d in found if not d.suppressed]


def test_findings_in_two_cells_with_cell_positions() -> None:
    # cell 1's magics and shell line and the noqa'd line are not findings; the body of the
    # %%time cell 4 is Python, checked as ruff checks it
    assert _shown(FIXTURE.read_text()) == [
        (3, 2, 10, "MPC404"),
        (4, 2, 10, "MPC404"),
        (5, 2, 11, "MPC404"),
    ]


def test_magics_become_blank_lines() -> None:
    source = load(FIXTURE.read_text()).source
    assert "%" not in source and "!" not in source
    assert source.splitlines()[:3] == ["", "import torch", ""]


def _notebook(*cells: str) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "source": c} for c in cells], "nbformat": 4})


@pytest.mark.parametrize(
    "cell",
    [
        "version = !python --version\nfiles, = !ls\n",  # IPython's system assignment
        "t = %timeit -o sum(range(9))\n",  # and its magic assignment
        "!python train.py \\\n    --lr 1e-4 \\\n    --resume 'a b'\nx = 1\n",  # continued
        "%run train.py \\\n  --fp16\n",
        "for f in files:\n    !rm {f}\n",  # a block whose only statement is a shell line
        "torch.autocast??\n",
        "cd PhotoMaker/\n",  # automagic: a one-line cell naming a line magic without %
        "\npip install -q diffusers\n",  # (leading blank lines do not count)
        "ls -la\n",  # (IPython's Python-operator check does not look at ``-``)
    ],
)
def test_ipython_forms_are_not_syntax_errors(cell: str) -> None:
    text = _notebook("import torch\n", cell)
    assert [d.code for d in check_notebook(text, "nb.ipynb", all_rules())] == []
    assert len(load(text).source.splitlines()) == 1 + cell.count("\n")  # rows kept


@pytest.mark.parametrize(
    "cells",
    [
        ("cd PhotoMaker/\nx = 1\n",),  # two lines: IPython applies automagic to one-line cells
        ("cd PhotoMaker/\n\n",),  # (a trailing blank line is a line)
        ("cd = 'x'\n", "cd PhotoMaker/\n"),  # the notebook's ``cd`` shadows the magic
        ("def pip(x): ...\n", "pip install x\n"),
        ("for ls in []: pass\n", "ls ~/data\n"),
    ],
)
def test_automagic_only_where_ipython_applies_it(cells: tuple[str, ...]) -> None:
    text = _notebook("import torch\n", *cells)
    assert [d.code for d in check_notebook(text, "nb.ipynb", all_rules())] == ["MPC001"]


def test_python_is_not_taken_for_a_magic() -> None:
    # ``!=``, ``%=`` and ``%`` as an operator stay Python (and a real error is still one)
    cell = "import torch\na = 1\nb = a != 2\nb %= 3\nc = a % 2\nd = (\n"
    source = load(_notebook(cell)).source
    assert source == cell
    assert [d.code for d in check_notebook(_notebook(cell), "nb.ipynb", all_rules())] == ["MPC001"]


def test_fix_writes_cells_back_and_keeps_everything_else(tmp_path: Path) -> None:
    path = tmp_path / "train.ipynb"
    shutil.copy(FIXTURE, path)
    before = json.loads(path.read_text())
    found = check_notebook(path.read_text(), str(path), all_rules())

    assert fix_notebook_file(path, found, unsafe=False) == 3

    text = path.read_text()
    after = json.loads(text)
    nbformat.validate(nbformat.reads(text, as_version=4))
    assert _shown(text) == []
    assert after["metadata"] == before["metadata"]
    for old, new in zip(before["cells"], after["cells"], strict=True):
        assert {k: v for k, v in old.items() if k != "source"} == {
            k: v for k, v in new.items() if k != "source"
        }
    assert after["cells"][2]["source"][1] == 'scaler = torch.amp.GradScaler("cuda")\n'
    assert after["cells"][4]["source"][2].endswith("# noqa: MPC404")  # no newline added
    # the layout: nbformat's own writer gives the same bytes for the fixed notebook
    assert text == nbformat.writes(nbformat.reads(text, as_version=4)) + "\n"


def test_not_a_notebook() -> None:
    with pytest.raises(NotebookError):
        load("[1, 2]")


def test_cli_walks_reports_cells_and_fixes(tmp_path: Path) -> None:
    shutil.copy(FIXTURE, tmp_path / "train.ipynb")
    (tmp_path / "ok.py").write_text("x = 1\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["check", "--output-format", "concise", str(tmp_path)]) == 1
    assert "train.ipynb:cell 3:2:10: MPC404" in out.getvalue()
    assert "train.ipynb:cell 5:2:11: MPC404" in out.getvalue()

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["check", "--output-format", "json", str(tmp_path / "train.ipynb")])
    cells = [(f["cell"], f["location"]["row"]) for f in json.loads(out.getvalue())]
    assert cells == [(3, 2), (4, 2), (5, 2)]

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["check", "--fix", str(tmp_path)]) == 0
    nbformat.validate(nbformat.read(tmp_path / "train.ipynb", as_version=4))


def test_notebooks_can_be_left_out_of_walks(tmp_path: Path) -> None:
    shutil.copy(FIXTURE, tmp_path / "train.ipynb")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["check", "--no-notebooks", str(tmp_path)]) == 0
        (tmp_path / "pyproject.toml").write_text("[tool.mpcheck]\ninclude-notebooks = false\n")
        assert main(["check", str(tmp_path)]) == 0
        # an explicit notebook is checked whatever the setting, as an explicit .pyi would be
        assert main(["check", str(tmp_path / "train.ipynb")]) == 1
