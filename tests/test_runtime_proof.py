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


def test_cuda_autocast_squares_and_norms_in_float32_and_cpu_autocast_does_not(
    torch_module: object,
) -> None:
    """The premise of ``xfile/good_cast_model_under_cuda_autocast`` and its bad CPU twin: the
    dispatcher's CUDA autocast kernels cast a float16 input of ``pow``, ``sum``, ``norm`` and
    ``rsqrt`` to float32 (probed on storage-less CUDA tensors, as tools/gen_autocast_ops.py
    does, so no GPU is needed), the CPU's leave it float16. Measured: the mean square of
    values of 300 is inf in float16 and exact (to float32's rounding) from the same float16
    values upcast first, and ``norm + 1e-12`` of a zero row is 0 in float16, 1e-12 in float32."""
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location(
        "gen_autocast_ops", FIXTURES.parent / "tools" / "gen_autocast_ops.py"
    )
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for op in ("pow.Tensor_Scalar", "sum.dim_IntList", "norm.ScalarOpt_dim", "rsqrt"):
        assert gen.classify(op, "cuda", torch.float16) == "fp32", op
        assert gen.classify(op, "cpu", torch.float16) is None, op
    x = torch.full((4, 64), 300.0, dtype=torch.float16)
    assert torch.isinf(x.pow(2).mean(-1)).all()  # float16: 300² = 90000 > 65504
    float32 = x.float().pow(2).mean(-1)  # what the float32 list computes from the same input
    assert torch.allclose(float32, torch.full((4,), 90000.0), rtol=1e-6)
    zero = torch.zeros(1, 64, dtype=torch.float16)
    assert (zero.norm(dim=-1) + 1e-12).item() == 0.0  # the guard vanished: 0 / 0 follows
    assert (zero.float().norm(dim=-1) + 1e-12).item() > 0.0
