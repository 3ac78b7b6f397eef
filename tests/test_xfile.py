"""Whole-project analysis on multi-file packages: a dtype decided in one file, the bug in
another. Each case in ``fixtures/xfile/<case>/`` is checked as a project by the CLI and by
the flake8 plugin (one file at a time, the way flake8 runs it), must give exactly the
``# expect:`` findings, and is run under real torch: bad cases raise, good ones run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import XFILE, expected, runtime
from tests.test_output_formats import validate_sarif

CASES = sorted(p for p in XFILE.iterdir() if p.is_dir())


def expectations(case: Path) -> set[tuple[str, int, str]]:
    return {
        (path.relative_to(case).as_posix(), row, code)
        for path in case.rglob("*.py")
        for row, code in expected(path)
    }


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_cli_finds_exactly_the_expected(case: Path) -> None:
    cmd = [sys.executable, "-m", "mpcheck", "check", "--output-format", "json", "."]
    done = subprocess.run(cmd, cwd=case, capture_output=True, text=True, check=False)
    found = {
        (Path(d["filename"]).relative_to(case).as_posix(), d["location"]["row"], d["code"])
        for d in json.loads(done.stdout)
    }
    assert found == expectations(case), done.stderr


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_flake8_plugin_agrees_file_by_file(case: Path) -> None:
    """flake8 hands the plugin one file at a time, as it does on a user's tree; one flake8
    run per case (not per file) is that client, without a process start per file."""
    pytest.importorskip("flake8")
    rels = sorted(path.relative_to(case).as_posix() for path in case.rglob("*.py"))
    cmd = [sys.executable, "-m", "flake8", "--select", "MPC", *rels]
    done = subprocess.run(cmd, cwd=case, capture_output=True, text=True, check=False)
    found = set()
    for line in done.stdout.splitlines():
        name, row, _col, rest = line.split(":", 3)
        found.add((name, int(row), rest.split()[0]))
    assert found == expectations(case), done.stderr


# Each case runs as ``python -m module`` would run it, in a fork of one process that imported
# torch once (importing torch costs seconds; a fork, milliseconds), with torch's generator
# seeded first: a case whose proof draws random weights measures the same numbers on every run
# (CI once drew weights that kept every square of bad_half_and_data_module_helper under 256).
# The parent never runs a torch op, so no thread pool exists yet when it forks. A request is a
# JSON line ``[case directory, module, file for the child's stderr]``; the answer, the child's
# exit code.
FORKER = r"""
import json, os, runpy, sys, traceback, warnings
import torch
for line in sys.stdin:
    case, module, err = json.loads(line)
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 2)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.chdir(case)
        sys.path.insert(0, case)
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        code = 0
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (exc.code is not None)
            if not isinstance(exc.code, (int, type(None))):
                print(exc.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
"""


class Forker:
    """One process holding torch, forking a child per case run (see :data:`FORKER`)."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", FORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def run(self, case: Path, module: str) -> tuple[int, str]:
        """The exit code and standard error of ``python -m module`` in ``case``."""
        err = self.scratch / "stderr.txt"
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps([str(case), module, str(err)]) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, "the forking process died"
        return int(answer), err.read_text()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


@pytest.fixture(scope="module")
def forker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forker]:
    """Skips without torch, or fails when ``MPCHECK_REQUIRE_TORCH=1`` (CI): the proofs
    must run there."""
    if importlib.util.find_spec("torch") is None:  # (the forking process imports it)
        if os.environ.get("MPCHECK_REQUIRE_TORCH") == "1":
            pytest.fail("torch is required (MPCHECK_REQUIRE_TORCH=1) but not installed")
        pytest.skip("torch not installed")
    made = Forker(tmp_path_factory.mktemp("forker"))
    yield made
    made.close()


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_case_runs_as_its_header_says(case: Path, forker: Forker) -> None:
    mains = [p for p in case.rglob("*.py") if runtime(p) is not None]
    assert len(mains) == 1, "one file of the case says how it runs"
    main = mains[0]
    rt = runtime(main)
    assert rt is not None
    if rt.outcome == "none":  # (a library not installed here: its test runs what it does)
        pytest.skip(f"{main.name} says how it is proven instead")
    module = ".".join(main.relative_to(case).with_suffix("").parts)
    code, stderr = forker.run(case, module)
    if rt.outcome == "ok":
        assert code == 0, stderr
    else:
        assert code != 0
        assert rt.pattern is None or re.search(rt.pattern, stderr), stderr


def only_finding(case: Path, fmt: str = "json") -> object:
    """The CLI's cold report of ``case`` in ``fmt``, parsed; JSON: its one finding."""
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", "--output-format", fmt, "."]
    done = subprocess.run(cmd, cwd=case, capture_output=True, text=True)
    report = json.loads(done.stdout)
    if fmt != "json":
        return report
    (finding,) = report
    return finding


def row_of(path: Path, text: str) -> int:
    """The first line of ``path`` that holds ``text``."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_origin_in_another_file_is_a_related_location_there() -> None:
    """JSON names the helper's file for the place the dtype was decided; SARIF links it."""
    case = XFILE / "bad_rope_helper"
    row = row_of(case / "pkg" / "rope.py", ".float()")
    finding: Any = only_finding(case)
    there = [r for r in finding["related"] if "filename" in r]
    cast = row_of(case / "pkg" / "attention.py", "Attention(8).half()")
    # the origin in the helper's file, and the evidence of half: the cast of the class
    assert [(Path(r["filename"]).name, r["location"]["row"]) for r in there] == [
        ("rope.py", row),
        ("attention.py", cast),
    ]
    sarif: Any = only_finding(case, "sarif")
    (result,) = sarif["runs"][0]["results"]
    uris = [r["physicalLocation"]["artifactLocation"]["uri"] for r in result["relatedLocations"]]
    assert any(uri.endswith("pkg/rope.py") for uri in uris)
    assert any(uri.endswith("pkg/attention.py") for uri in uris)


def test_origin_in_another_files_class_is_a_related_location_there() -> None:
    """A float32 norm class of ``norms.py``: the finding in ``mlp.py`` names where its
    ``forward`` decided float32, in that file."""
    case = XFILE / "bad_fp32_norm_class"
    row = row_of(case / "blocks" / "norms.py", ".float()")
    finding: Any = only_finding(case)
    assert "RMSNormFp32.forward" in finding["message"]
    there = [r for r in finding["related"] if "filename" in r]
    built = row_of(case / "blocks" / "mlp.py", "MlpBlock(16, dtype=torch.float16)")
    assert [(Path(r["filename"]).name, r["location"]["row"]) for r in there] == [
        ("norms.py", row),
        ("mlp.py", built),  # the evidence of half: the block built in float16
    ]


def test_class_default_through_an_annotation_is_a_related_location_there() -> None:
    """torchtune's shape: the cache comes in through a parameter annotated ``KVCache``,
    whose ``dtype`` default in ``kv_cache.py`` decides float32; the finding at the attention
    call names that default's line (not the class docstring's) in text, JSON and SARIF."""
    case = XFILE / "bad_optional_cache_param"
    row = row_of(case / "pkg" / "kv_cache.py", "dtype: torch.dtype = torch.float32")
    finding: Any = only_finding(case)
    there = [r for r in finding["related"] if "filename" in r]
    assert [(Path(r["filename"]).name, r["location"]["row"]) for r in there] == [
        ("kv_cache.py", row)
    ]
    sarif: Any = only_finding(case, "sarif")
    validate_sarif(sarif)
    (result,) = sarif["runs"][0]["results"]
    spots = [
        (r["physicalLocation"]["artifactLocation"]["uri"], r["physicalLocation"]["region"])
        for r in result["relatedLocations"]
    ]
    assert any(u.endswith("pkg/kv_cache.py") and g["startLine"] == row for u, g in spots)
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", "."]
    text = subprocess.run(cmd, cwd=case, capture_output=True, text=True).stdout
    assert f"note: pkg/kv_cache.py:{row}:" in text


def test_finding_at_a_call_decided_elsewhere_names_that_place() -> None:
    """TransformerLens's shape: MPC102 reports at ``entry.append(k, v)`` (where the float32
    keys enter this file); the related locations name the factory in ``cache.py``."""
    case = XFILE / "bad_dataclass_cache_entry"
    row = row_of(case / "pkg" / "cache.py", "past_keys=torch.empty")
    finding: Any = only_finding(case)
    there = [r for r in finding["related"] if "filename" in r]
    assert ("cache.py", row) in [(Path(r["filename"]).name, r["location"]["row"]) for r in there]
    sarif: Any = only_finding(case, "sarif")
    validate_sarif(sarif)


def test_switched_part_names_where_the_other_file_decided_float32() -> None:
    """``class_labels`` made float32 by a projection of ``embeddings.py`` on the path of the
    config switch that also chose the half ``TimestepEmbedding``: the finding says both."""
    case = XFILE / "bad_switched_class_embedding"
    row = row_of(case / "pkg" / "embeddings.py", "torch.arange")
    finding: Any = only_finding(case)
    assert f"(pkg/embeddings.py:{row})" in finding["message"]
    assert 'as built when `time_embedding_type == "positional"`' in finding["message"]
    assert 'on the path where `self.class_embed_type == "timestep"`' in finding["message"]
    assert "`self.class_embedding` at line 38" in finding["message"]


@pytest.mark.parametrize("cached", [False, True], ids=["no-cache", "cache"])
def test_follow_imports_skip_checks_each_file_alone(cached: bool, tmp_path: Path) -> None:
    """``--follow-imports skip``: no project phase, so the rotary helper's upcast in another
    file is unknown and the attention file is quiet; without it the finding is back."""
    case = XFILE / "bad_rope_helper"
    cache = ["--cache-dir", str(tmp_path / "cache")] if cached else ["--no-cache"]
    cmd = [sys.executable, "-m", "mpcheck", "check", *cache, "--output-format", "json", "."]
    alone = subprocess.run([*cmd, "--follow-imports", "skip"], cwd=case, capture_output=True)
    assert json.loads(alone.stdout) == [], alone.stderr
    project = subprocess.run(cmd, cwd=case, capture_output=True)
    assert len(json.loads(project.stdout)) == 1, project.stderr


def test_library_itself_is_run_in_half_by_its_users() -> None:
    """``bad_library_itself_norm_helper`` casts nothing: its users do. Built by its own
    factory and cast with ``.half()`` as a user casts it, its variance overflows float16 (a
    standard deviation past 256), and the norm outputs zeros where float32 outputs unit rows."""
    pytest.importorskip("torch")
    case = XFILE / "bad_library_itself_norm_helper"
    proof = (
        "import torch, timm; torch.manual_seed(0); net = timm.create_net(8); "
        "x = 3000 * torch.randn(4, 8); ref = net(x); out = net.half()(x.half()).float(); "
        "err = ((out - ref).abs().max() / ref.abs().max()).item(); "
        "assert err > 0.5, err; print(err)"
    )
    done = subprocess.run(
        [sys.executable, "-c", proof], cwd=case, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
