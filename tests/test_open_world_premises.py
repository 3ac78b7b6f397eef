"""``open-world-premises`` (issue 36, "Severity follows evidence"): a latent premise whose only
support is a half path mpcheck cannot follow -- a cast of a model of unknown class, a wrapper
whose setting it cannot read that is handed such a model, a use of the model that may cast it
-- is no evidence that the class runs in half. Such premises are silent unless the project
asks for them; a premise naming a followed path (a default dtype, a class handed to a wrapper
whose setting is unread) stays a warning either way. Driven through the CLI, the cache and
flake8, which read the same configuration.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support import XFILE

UNKNOWN = "a model of unknown class is cast at app/run.py:15"


def _case(tmp_path: Path, name: str, config: str | None) -> Path:
    case = tmp_path / name
    shutil.copytree(XFILE / name, case)
    (case / ".mpcheck.toml").unlink(missing_ok=True)
    if config is not None:
        (case / ".mpcheck.toml").write_text(config)
    return case


def _check(case: Path, *extra: str) -> tuple[int, list[Any], str]:
    cmd = [sys.executable, "-m", "mpcheck", "check", "--output-format", "json", *extra, "."]
    done = subprocess.run(cmd, cwd=case, capture_output=True, text=True, check=False)
    found: list[Any] = json.loads(done.stdout) if done.stdout.strip() else []
    return done.returncode, found, done.stderr


def test_a_cast_of_unknown_class_alone_is_no_premise_by_default(tmp_path: Path) -> None:
    case = _case(tmp_path, "bad_unresolved_half_cast", None)
    rc, found, err = _check(case, "--no-cache")
    assert (rc, found) == (0, []), err


def test_the_setting_reports_it_as_a_latent_warning_naming_its_support(tmp_path: Path) -> None:
    case = _case(tmp_path, "bad_unresolved_half_cast", "open-world-premises = true\n")
    rc, (finding,), _ = _check(case, "--no-cache")
    assert rc == 1
    assert (finding["code"], finding["severity"]) == ("MPC101", "warning")
    assert "latent: raises if `ModelB` runs in half without autocast" in finding["message"]
    assert UNKNOWN in finding["message"]


def test_false_is_the_default_written_out(tmp_path: Path) -> None:
    case = _case(tmp_path, "bad_unresolved_half_cast", "open-world-premises = false\n")
    assert _check(case, "--no-cache")[:2] == (0, [])


def test_the_cache_keeps_the_two_settings_apart(tmp_path: Path) -> None:
    """A cached run under one value must not answer a run under the other."""
    case = _case(tmp_path, "bad_unresolved_half_cast", None)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert _check(case, *cache)[:2] == (0, [])
    (case / ".mpcheck.toml").write_text("open-world-premises = true\n")
    rc, found, _ = _check(case, *cache)
    assert rc == 1 and [f["code"] for f in found] == ["MPC101"]
    (case / ".mpcheck.toml").write_text("open-world-premises = false\n")
    assert _check(case, *cache)[:2] == (0, [])


def test_a_premise_on_a_followed_half_path_stays_by_default(tmp_path: Path) -> None:
    """A file that changes the default dtype is a half path the records follow: every class
    built after it may be half, and its premise is reported without the setting."""
    case = _case(tmp_path, "bad_unresolved_half_cast", None)
    run = case / "app" / "run.py"
    text = run.read_text().replace(
        "import torch\n", "import torch\n\ntorch.set_default_dtype(torch.float16)\n", 1
    )
    run.write_text(text)
    rc, (finding,), _ = _check(case, "--no-cache")
    assert (rc, finding["severity"]) == (1, "warning")
    assert "a file of the project changes the default dtype" in finding["message"]


def test_a_value_to_anything_but_a_bool_is_one_line_and_exit_2(tmp_path: Path) -> None:
    case = _case(tmp_path, "bad_unresolved_half_cast", 'open-world-premises = "yes"\n')
    rc, found, err = _check(case, "--no-cache")
    assert (rc, found) == (2, [])
    assert err.count("\n") == 1 and "open-world-premises" in err
    assert "Traceback" not in err


def test_flake8_reads_the_setting(tmp_path: Path) -> None:
    case = _case(tmp_path, "bad_unresolved_half_cast", "open-world-premises = true\n")
    cmd = [sys.executable, "-m", "flake8", "--select", "MPC", "--jobs=1", "--isolated", "app"]
    done = subprocess.run(cmd, cwd=case, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    (line,) = done.stdout.splitlines()
    assert "MPC101" in line and UNKNOWN in line
    (case / ".mpcheck.toml").unlink()
    done = subprocess.run(cmd, cwd=case, capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (0, ""), done.stderr


def test_an_installable_package_keeps_the_premise_by_default(tmp_path: Path) -> None:
    """A package's users cast its models as it shows them cast: its own cast of a model of
    unknown class shows them casting some model, any of its classes perhaps."""
    case = _case(tmp_path, "bad_unresolved_half_cast", None)
    (case / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0.1"\n')
    rc, (finding,), _ = _check(case, "--no-cache")
    assert (rc, finding["severity"]) == (1, "warning")
    assert UNKNOWN in finding["message"]


def test_models_run_in_half_outranks_the_gate() -> None:
    """A project that says its users run every module in half (``models-run-in-half``) keeps
    a function's premise even where only an unseen half path supports it."""
    from typing import cast

    from mpcheck.engine.evidence import Evidence
    from mpcheck.project.closed import LOOSE, Opening
    from mpcheck.project.models import ModelUses

    class Uses:
        application = True

        def opening(self, name: str) -> Opening:
            return Opening(LOOSE, "a model of unknown class is cast at run.py:3")

        def premise_bfloat16(self, name: str) -> bool:
            return False

    uses = cast(ModelUses, Uses())
    assert Evidence({}, uses).premise("scale").unseen
    assert not Evidence({}, uses, setting=True).premise("scale").unseen
    assert not Evidence({}, uses, open_world=True).premise("scale").unseen
