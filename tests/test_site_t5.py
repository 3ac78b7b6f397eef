"""Issue 36's seed incident (a), against the real transformers 4.44.2 wheel read statically.

A script loads ``T5EncoderModel.from_pretrained(..., torch_dtype=torch.float16)`` and is
checked with ``follow-imports = "site"``. T5 keeps ``wo`` float32 (``_keep_in_fp32_modules``),
so the residual stream turns float32 after each feed-forward block and reaches the next half
``T5LayerNorm``, which tolerates it; apex's ``FusedRMSNorm``, which ``modeling_t5.py`` puts in
its place when apex is importable, raises. The wheel is pure Python: it is downloaded with
pip and unpacked as a site directory, never installed or imported. Without network the test
is skipped, unless ``MPCHECK_REQUIRE_WHEELS=1`` (CI, which reaches PyPI) makes that a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # it downloads a wheel and starts ``python -m mpcheck``

WHEEL = "transformers==4.44.2"
SCRIPT = """\
import torch
from transformers import T5EncoderModel, T5Tokenizer

tokenizer = T5Tokenizer.from_pretrained("google/t5-v1_1-xl")
encoder = T5EncoderModel.from_pretrained("google/t5-v1_1-xl", torch_dtype=torch.float16)
ids = tokenizer(["a photo of a cat"], return_tensors="pt").input_ids
with torch.no_grad():
    embeddings = encoder(input_ids=ids).last_hidden_state
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment's ``site-packages`` holding the unpacked transformers wheel."""
    download = tmp_path_factory.mktemp("wheel")
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", WHEEL, "-d", str(download)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    wheels = sorted(download.glob("transformers-*.whl"))
    if done.returncode != 0 or not wheels:
        reason = f"cannot download {WHEEL}: {done.stderr.strip().splitlines()[-1:]}"
        if os.environ.get("MPCHECK_REQUIRE_WHEELS") == "1":
            pytest.fail(f"{reason} (MPCHECK_REQUIRE_WHEELS=1)")
        pytest.skip(reason)
    venv = tmp_path_factory.mktemp("venv")
    packages = venv / "lib" / "python3.11" / "site-packages"
    with zipfile.ZipFile(wheels[0]) as wheel:
        wheel.extractall(packages)
    return packages


def _check(project: Path, venv: Path) -> list[dict[str, object]]:
    env = {**os.environ, "VIRTUAL_ENV": str(venv)}
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", "--output-format", "json"]
    done = subprocess.run(
        [*cmd, "encode.py"], cwd=project, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode in (0, 1), done.stderr
    found: list[dict[str, object]] = json.loads(done.stdout)
    return found


def test_t5_half_load_warns_with_the_library_evidence(site: Path, tmp_path: Path) -> None:
    modeling = site / "transformers" / "models" / "t5" / "modeling_t5.py"
    lines = modeling.read_text().splitlines()
    keep_line = 1 + next(i for i, t in enumerate(lines) if "_keep_in_fp32_modules = [" in t)
    swap_line = 1 + next(
        i for i, t in enumerate(lines) if t.strip() == "T5LayerNorm = FusedRMSNorm  # noqa"
    )
    project = tmp_path / "project"
    project.mkdir()
    (project / "encode.py").write_text(SCRIPT)
    (project / "pyproject.toml").write_text('[tool.mpcheck]\nfollow-imports = "site"\n')

    found = _check(project, site.parents[2])
    assert [(f["code"], f["location"]) for f in found] == [
        ("MPC104", {"row": 5, "column": 11})  # the ``from_pretrained`` call
    ]
    finding = found[0]
    assert finding["severity"] == "warning"  # without apex the model runs: a stated premise
    message = str(finding["message"])
    assert message.startswith("latent: raises if apex is installed (`FusedRMSNorm`")
    assert "keeps `wo` float32" in message
    related = finding["related"]
    assert isinstance(related, list)
    where = {
        (Path(str(r.get("filename", "encode.py"))).name, r["location"]["row"]) for r in related
    }
    assert ("encode.py", 5) in where  # the ``torch_dtype=`` cast
    assert ("modeling_t5.py", keep_line) in where  # ``_keep_in_fp32_modules = ["wo"]``
    assert ("modeling_t5.py", swap_line) in where  # ``T5LayerNorm = FusedRMSNorm``

    # the same script without site following sees no library, and says nothing
    (project / "pyproject.toml").write_text('[tool.mpcheck]\nfollow-imports = "normal"\n')
    assert _check(project, site.parents[2]) == []
