"""No input takes the process down: deep but valid code is MPC002, never a segfault.

Each case crashed libcst's native parser (SIGSEGV: no output, a broken ``-j`` pool, a dead
flake8) before the pre-checks in :mod:`mpcheck.files.parsing`. They run in subprocesses, since
the failure being guarded against is the death of the process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from mpcheck.files.parsing import Unparsable, parse
from mpcheck.pipeline.one_file import check_source
from mpcheck.ruleset.rule import all_rules

# Valid grammar; CPython 3.11's own parser gives up on some of them (RecursionError), which
# is no reason for mpcheck to die.
DEEP = {
    "and-chain": "x = " + " and ".join(["a"] * 10_000),
    "not-chain": "x = " + "not " * 10_000 + "a",
    "minus-chain": "x = " + "-" * 10_000 + "a",
    "attribute-chain": "x = a" + ".b" * 10_000,
    "call-chain": "x = a" + "()" * 10_000,
    "adjacent-strings": "x = (\n" + "\n".join(["    's'"] * 5_000) + "\n)",
    "plus-over-lines": "x = (\n" + "\n".join(["    a +"] * 10_000) + "\n    a\n)",
}
FINE = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"


def mpcheck(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "mpcheck", "check", "--output-format", "json", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize("case", sorted(DEEP))
def test_deep_valid_code_is_mpc002_and_the_run_goes_on(tmp_path: Path, case: str) -> None:
    body = "import torch\n" + DEEP[case] + "\n"
    (tmp_path / "deep.py").write_text(body)
    (tmp_path / "fine.py").write_text(FINE)
    done = mpcheck("deep.py", "fine.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    found = {(Path(d["filename"]).name, d["code"]) for d in json.loads(done.stdout)}
    assert found == {("deep.py", "MPC002"), ("fine.py", "MPC404")}


def test_worker_pool_survives_deep_files(tmp_path: Path) -> None:
    for i in range(70):  # enough files for the process pool
        (tmp_path / f"m{i}.py").write_text(FINE)
    for name, body in DEEP.items():
        (tmp_path / f"{name}.py").write_text("import torch\n" + body + "\n")
    done = mpcheck("-j", "2", ".", cwd=tmp_path)
    assert "BrokenProcessPool" not in done.stderr and "Traceback" not in done.stderr
    codes = [d["code"] for d in json.loads(done.stdout)]
    assert codes.count("MPC002") == len(DEEP) and codes.count("MPC404") == 70


def test_flake8_survives_deep_files(tmp_path: Path) -> None:
    pytest.importorskip("flake8")
    # flake8's own ast.parse gives up (MemoryError) on most of DEEP; this one it takes
    (tmp_path / "deep.py").write_text("import torch\n" + DEEP["and-chain"] + "\n")
    (tmp_path / "fine.py").write_text(FINE)
    cmd = [sys.executable, "-m", "flake8", "--select", "MPC", "-j", "2", "deep.py", "fine.py"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "MPC002" in done.stdout and "MPC404" in done.stdout, done.stderr


def test_nesting_beyond_cpython_is_still_a_syntax_error() -> None:
    parsed = parse(b"x = " + b"[" * 3000 + b"1" + b"]" * 3000 + b"\n")
    assert isinstance(parsed, Unparsable) and parsed.syntax
    assert parsed.message == "SyntaxError: too many nested parentheses"


def test_valid_file_libcst_rejects_is_mpc002_not_a_syntax_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def reject(data: bytes) -> cst.Module:
        raise cst.ParserSyntaxError("unsupported", lines=["x"], raw_line=1, raw_column=0)

    monkeypatch.setattr(cst, "parse_module", reject)
    found = check_source(FINE.encode(), "f.py", all_rules())
    assert [(d.code, d.message) for d in found] == [
        ("MPC002", "libcst cannot parse this valid file (unsupported); it was not analysed")
    ]


def test_a_real_syntax_error_keeps_cpythons_message() -> None:
    found = check_source(b"import torch\nx = (1,\n", "f.py", all_rules())
    assert [d.code for d in found] == ["MPC001"]
    assert found[0].message.startswith("SyntaxError: ")


def test_ordinary_long_expressions_are_parsed() -> None:
    """A long flat literal or call is not a chain: commas separate its parts."""
    data = ("import torch\nx = [" + ", ".join(["a.b + 1"] * 20_000) + "]\n").encode()
    assert isinstance(parse(data), cst.Module)


@pytest.mark.parametrize("literal", ['b"a" "c"', '"a" b"c"', 'f"a" b"c"'])
def test_str_and_bytes_concatenated_are_cpythons_syntax_error(literal: str) -> None:
    """libcst's grammar lets ``b"a" "c"`` through (its validation does not): the parse
    thread still validates that kind of node, so the file is the syntax error it is."""
    found = parse(f"import torch\nx = {literal}\n".encode())
    assert isinstance(found, Unparsable) and found.syntax
    assert found.message == "SyntaxError: cannot mix bytes and nonbytes literals"
    assert found.position.row == 2


def test_parsing_skips_libcsts_validation_and_nothing_else_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """libcst's parser builds valid trees, so the parse thread does not validate each node
    (a tenth of a parse's cost); a node built anywhere else still is validated."""
    validated: list[str] = []
    real = cst.Name._validate

    def counted(node: cst.Name) -> None:
        validated.append(node.value)
        real(node)

    monkeypatch.setattr(cst.Name, "_validate", counted)
    module = parse(b"x = y\n")
    assert isinstance(module, cst.Module) and module.code == "x = y\n"
    assert validated == []
    cst.parse_module("z = 1\n")  # libcst's own entry point, on this thread
    assert validated == ["z"]
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")
