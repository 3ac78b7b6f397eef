"""Fixtures run under real torch: bad ones fail the way they claim, good ones run clean.

With MPCHECK_REQUIRE_TORCH=1 (CI) a missing torch is a failure, not a skip.
"""

from __future__ import annotations

import os
import re
import runpy
import warnings
from pathlib import Path

import pytest

from tests.support import FIXTURES, fixture_files, runtime

RUNNABLE = [p for p in fixture_files() if (rt := runtime(p)) and rt.outcome != "none"]


@pytest.fixture(scope="module")
def torch_module() -> object:
    try:
        import torch
    except ImportError:
        if os.environ.get("MPCHECK_REQUIRE_TORCH") == "1":
            pytest.fail("torch is required (MPCHECK_REQUIRE_TORCH=1) but not installed")
        pytest.skip("torch not installed")
    torch.manual_seed(0)
    return torch


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_behaves_as_declared(path: Path, torch_module: object) -> None:
    rt = runtime(path)
    assert rt is not None
    # each run draws the same weights, whatever ran before it in this worker
    torch_module.manual_seed(0)  # type: ignore[attr-defined]
    error: BaseException | None = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            runpy.run_path(str(path), run_name="__main__")
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            error = exc
    if rt.outcome == "ok":
        assert error is None, f"expected a clean run, got {error!r}"
        return
    assert error is not None, f"expected {rt.outcome}, but the fixture ran clean"
    if rt.outcome == "raises":
        assert type(error).__name__ == rt.exception, repr(error)
    else:  # wrong: the fixture's own check of the numbers failed
        assert isinstance(error, AssertionError), repr(error)
    assert rt.pattern is not None and re.search(rt.pattern, str(error)), str(error)


def test_accelerates_prepared_forward_recasts_a_float32_input(torch_module: object) -> None:
    """The premise of ``mpc102/*_teacher.py``: accelerate's ``prepare`` replaces a model's
    ``forward`` with one run under autocast (native mixed precision), so a half model takes a
    float32 input; the same model not prepared raises."""
    import torch

    teacher = torch.nn.Linear(8, 8).to(torch.bfloat16)
    x = torch.randn(2, 8)  # float32
    with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype"):
        teacher(x)
    # what accelerate.Accelerator.prepare_model does with native AMP (CPU: bfloat16)
    teacher.forward = torch.autocast("cpu", dtype=torch.bfloat16)(teacher.forward)
    assert teacher(x).dtype == torch.bfloat16
