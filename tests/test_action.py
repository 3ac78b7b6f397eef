"""The composite GitHub Action, executed step by step the way the runner does it.

Each step's ``run`` script is written to a file and run with the runner's ``bash``
invocation (``bash --noprofile --norc -eo pipefail``), its ``env`` expressions evaluated from
the inputs and earlier steps' ``$GITHUB_OUTPUT``; ``GITHUB_ACTION_PATH`` is a copy of this
working tree, ``GITHUB_WORKSPACE``, ``GITHUB_STEP_SUMMARY`` and ``RUNNER_TEMP`` live in tmp.
The install step really builds a venv and pip-installs mpcheck (once per module).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

import mpcheck
from mpcheck.cli import app as cli
from mpcheck.diagnostics import Diagnostic, Position, RuleInfo, Severity
from mpcheck.output.job_summary import ENV_VAR, MAX_LISTED, render_summary, write_step_summary
from tests.support import FIXTURES, ROOT, XFILE

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
STEPS: list[dict[str, Any]] = ACTION["runs"]["steps"]
SARIF_SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]  # GitHub's `shell: bash`


@dataclass
class Run:
    """What one execution of the action left behind."""

    returncode: int
    stdout: str
    stderr: str
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    summary: str = ""


def evaluate(
    value: str,
    inputs: dict[str, str],
    steps: dict[str, dict[str, str]],
    github: dict[str, str] | None = None,
) -> str:
    """The expressions action.yml may use: ``inputs.*``, ``steps.*.outputs.*`` and the
    ``github.*`` context (given as dotted names, empty when absent, as on GitHub)."""

    def one(match: re.Match[str]) -> str:
        expr = match.group(1)
        if expr.startswith("github."):
            return (github or {}).get(expr.removeprefix("github."), "")
        if expr.startswith("inputs."):
            name = expr.removeprefix("inputs.")
            return str(inputs.get(name, ACTION["inputs"][name].get("default", "")))
        m = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr)
        assert m, f"expression the test cannot evaluate: {expr}"
        return steps.get(m.group(1), {}).get(m.group(2), "")

    return EXPRESSION.sub(one, str(value))


def read_outputs(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines() if path.exists() else []
    return dict(line.split("=", 1) for line in lines if "=" in line)


def snapshot(dest: Path) -> Path:
    """The files of this working tree (as an action checkout would have them)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


@dataclass
class Runner:
    """A fake GitHub runner: one action path, one temp dir, fresh files per execution."""

    action_path: Path
    tmp: Path
    base_env: dict[str, str]
    counter: int = 0

    def run_steps(
        self,
        steps: list[dict[str, Any]],
        workspace: Path,
        inputs: dict[str, str] | None = None,
        known: dict[str, dict[str, str]] | None = None,
        extra_env: dict[str, str] | None = None,
        github: dict[str, str] | None = None,
    ) -> Run:
        self.counter += 1
        work = self.tmp / f"exec{self.counter}"
        work.mkdir()
        summary = work / "step_summary.md"
        outputs: dict[str, dict[str, str]] = dict(known or {})
        out, err, rc = [], [], 0
        for index, step in enumerate(steps):
            script = work / f"step{index}.sh"
            script.write_text(step["run"])
            output_file = work / f"output{index}"
            env = {
                **self.base_env,
                "GITHUB_ACTION_PATH": str(self.action_path),
                "GITHUB_WORKSPACE": str(workspace),
                "GITHUB_STEP_SUMMARY": str(summary),
                "GITHUB_OUTPUT": str(output_file),
                "GITHUB_ENV": str(work / "env"),
                "GITHUB_ACTIONS": "true",
                "RUNNER_TEMP": str(self.tmp),
                **{
                    k: evaluate(v, inputs or {}, outputs, github)
                    for k, v in step.get("env", {}).items()
                },
                **(extra_env or {}),
            }
            proc = subprocess.run(
                [*BASH, str(script)], cwd=workspace, env=env, capture_output=True, text=True
            )
            out.append(proc.stdout)
            err.append(proc.stderr)
            outputs[step.get("id", str(index))] = read_outputs(output_file)
            rc = proc.returncode
            if rc:
                break
        text = summary.read_text() if summary.exists() else ""
        return Run(rc, "".join(out), "".join(err), outputs, text)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    tmp = tmp_path_factory.mktemp("runner")
    home = tmp_path_factory.mktemp("home")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "MPCHECK_", "VIRTUAL_ENV", "PYTHONPATH"))
    }
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    # The runner's python3 (any >= 3.10); here, the one running the tests.
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    return Runner(snapshot(tmp_path_factory.mktemp("action")), tmp, env)


@pytest.fixture(scope="module")
def installed(runner: Runner, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The install step, run once: a venv with mpcheck built from the action checkout."""
    workspace = tmp_path_factory.mktemp("install-workspace")
    result = runner.run_steps([STEPS[0]], workspace)
    assert result.returncode == 0, result.stdout + result.stderr
    bin_dir = result.outputs["install"]["bin"]
    assert Path(bin_dir, "mpcheck").exists()
    assert result.stdout.strip().endswith(f"mpcheck {mpcheck.__version__}")
    return {"bin": bin_dir}


def run_action(
    runner: Runner,
    installed: dict[str, str],
    workspace: Path,
    inputs: dict[str, str] | None = None,
    github: dict[str, str] | None = None,
) -> Run:
    return runner.run_steps(
        STEPS[1:], workspace, inputs, known={"install": installed}, github=github
    )


def copy_fixtures(dest: Path, pattern: str) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for src in sorted(FIXTURES.glob(pattern)):
        shutil.copy2(src, dest / f"{src.parent.name}_{src.name}")
    return dest


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A repository with bad fixtures under ``models/`` and good ones under ``clean/``."""
    copy_fixtures(tmp_path / "models", "mpc10[12]/bad_*.py")
    copy_fixtures(tmp_path / "clean", "mpc10[12]/good_*.py")
    return tmp_path


def expected_findings(workspace: Path, *paths: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "mpcheck", "check", "--output-format", "json", *paths],
        cwd=workspace,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "MPCHECK_"))},
    ).stdout
    findings: list[dict[str, Any]] = json.loads(out)
    return findings


# -- the action's definition -------------------------------------------------------------------


def test_inputs_and_defaults() -> None:
    inputs = ACTION["inputs"]
    assert set(inputs) == {"args", "src", "version", "sarif-file", "fail-on-findings", "diff-base"}
    assert inputs["args"]["default"] == "check ."
    assert inputs["diff-base"]["default"] == "auto"
    assert inputs["fail-on-findings"]["default"] == "true"
    assert all(inputs[name]["default"] == "" for name in ("src", "version", "sarif-file"))
    assert all(spec["description"] for spec in inputs.values())
    assert ACTION["runs"]["using"] == "composite"


def test_inputs_never_reach_the_shell_as_code() -> None:
    used = set()
    for step in STEPS:
        assert step["shell"] == "bash"
        assert "${{" not in step["run"], "expressions belong in env:, not in the script"
        for value in step.get("env", {}).values():
            used |= set(re.findall(r"inputs\.([\w-]+)", str(value)))
    assert used == set(ACTION["inputs"])


def test_run_step_invokes_the_cli_with_github_annotations() -> None:
    run = STEPS[1]
    assert run["env"]["MPCHECK_OUTPUT_FORMAT"] == "github"
    assert '"$MPCHECK_BIN/mpcheck" "${args[@]}"' in run["run"]
    # one run of the check, which also writes the SARIF file
    assert run["run"].count('"$MPCHECK_BIN/mpcheck"') == 1
    assert 'args+=(--extra-output "sarif:$INPUT_SARIF_FILE")' in run["run"]
    # The CLI agrees with what the action relies on.
    parser = cli.build_parser()
    ns = parser.parse_args(["check", ".", "--extra-output", "sarif:x"])
    assert ns.extra_output == ["sarif:x"]


# -- executing it ---------------------------------------------------------------------------------


def test_install_step_is_from_the_action_checkout(installed: dict[str, str]) -> None:
    venv = Path(installed["bin"]).parent
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import mpcheck; print(mpcheck.__file__)"],
        cwd=venv,
        capture_output=True,
        text=True,
        check=True,
    )
    # A real (non-editable) install into the venv, not the source tree.
    assert Path(proc.stdout.strip()).is_relative_to(venv / "lib")


def test_version_input_installs_a_git_ref(runner: Runner, tmp_path: Path) -> None:
    """``version`` is a git ref of the action's repository (mpcheck is not on PyPI); pip
    itself is stubbed: nothing is fetched."""
    log = tmp_path / "pip.log"
    fake = tmp_path / "fakebin"
    fake.mkdir()
    python = fake / "python3"
    python.write_text(
        "#!/bin/sh\n"
        'if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python";'
        ' printf \'#!/bin/sh\\necho "mpcheck 9.9.9"\\n\' > "$3/bin/mpcheck";'
        ' chmod +x "$3/bin/python" "$3/bin/mpcheck"; exit 0; fi\n'
        f'echo "$@" >> "{log}"\n'
    )
    python.chmod(0o755)
    # Its own RUNNER_TEMP, so the stub venv does not replace the real one other tests use.
    path = {"PATH": f"{fake}{os.pathsep}{runner.base_env['PATH']}", "RUNNER_TEMP": str(tmp_path)}
    url = "git+https://github.com/owner/fork@"
    cases = {
        "main": f"mpcheck @ {url}main",
        " v1.2.3\n": f"mpcheck @ {url}v1.2.3",  # a tag, stray whitespace
        "3d0c5bb": f"mpcheck @ {url}3d0c5bb",  # a commit
    }
    for version, spec in cases.items():
        github = {"action_repository": "owner/fork"}
        result = runner.run_steps(
            [STEPS[0]], tmp_path, {"version": version}, extra_env=path, github=github
        )
        assert result.returncode == 0, result.stderr
        pip_args = log.read_text().splitlines()[-1]
        assert pip_args.endswith(f" --upgrade {spec}")  # a reused venv moves to the ref


def test_install_step_explains_a_python_without_venv(runner: Runner, tmp_path: Path) -> None:
    """Debian's python3 without python3-venv: a clear error, not a bare traceback."""
    fake = tmp_path / "fakebin"
    fake.mkdir()
    python = fake / "python3"
    python.write_text("#!/bin/sh\necho 'ensurepip is not available' >&2\nexit 1\n")
    python.chmod(0o755)
    env = {"PATH": f"{fake}{os.pathsep}{runner.base_env['PATH']}", "RUNNER_TEMP": str(tmp_path)}
    result = runner.run_steps([STEPS[0]], tmp_path, extra_env=env)
    assert result.returncode == 2
    assert f"::error title=mpcheck action::'{python} -m venv' failed" in result.stdout
    assert "actions/setup-python" in result.stdout
    assert "bin" not in result.outputs["install"]


def test_findings_become_annotations_sarif_and_summary(
    runner: Runner, installed: dict[str, str], workspace: Path
) -> None:
    result = run_action(runner, installed, workspace, {"sarif-file": "reports/mpcheck.sarif"})
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.outputs["run"] == {
        "exit-code": "1",
        "sarif-file": "reports/mpcheck.sarif",
    }
    findings = expected_findings(workspace, ".")
    assert findings

    # Annotations (GitHub keeps 10 per level and step; the rest are plain lines + a notice).
    annotated = re.findall(
        r"^::(error|warning) title=mpcheck \((\w+)\),file=([^,]+),line=(\d+),col=(\d+)",
        result.stdout,
        re.M,
    )
    plain = re.findall(r"^([\w/.]+):(\d+):(\d+): (MPC\d+) ", result.stdout, re.M)
    seen = {(f, int(r), int(c), code) for _, code, f, r, c in annotated}
    seen |= {(f, int(r), int(c), code) for f, r, c, code in plain}
    wanted = {
        (
            os.path.relpath(d["filename"], workspace),
            d["location"]["row"],
            d["location"]["column"],
            d["code"],
        )
        for d in findings
    }
    assert seen == wanted
    assert {level for level, *_ in annotated} <= {"error", "warning"}
    assert ("::notice::" in result.stdout) == (len(plain) > 0)

    # SARIF, valid against the official 2.1.0 schema.
    sarif = json.loads((workspace / "reports" / "mpcheck.sarif").read_text())
    schema = json.loads(SARIF_SCHEMA.read_text())
    jsonschema.Draft4Validator(schema).validate(sarif)
    results = sarif["runs"][0]["results"]
    assert sorted(r["ruleId"] for r in results if not r.get("suppressions")) == sorted(
        d["code"] for d in findings
    )

    # One summary (the SARIF pass does not add a second), one table row per rule.
    assert result.summary.count("### mpcheck:") == 1
    assert f"### mpcheck: {len(findings)} finding" in result.summary
    for code in {d["code"] for d in findings}:
        count = sum(1 for d in findings if d["code"] == code)
        assert re.search(
            rf"^\| \[{code}\]\([^)]*\) \| `[\w-]+` \| \w+ \| {count} \|$", result.summary, re.M
        )


def test_clean_tree_passes(runner: Runner, installed: dict[str, str], workspace: Path) -> None:
    result = run_action(runner, installed, workspace, {"src": "clean"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "::error" not in result.stdout
    assert "### mpcheck: no findings" in result.summary
    assert result.outputs["run"]["exit-code"] == "0"


def git(tree: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "t"}
    env |= {"GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    done = subprocess.run(["git", *args], cwd=tree, env=env, check=True, capture_output=True)
    return done.stdout.decode().strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_pull_request_is_annotated_only_where_it_changed_code(
    runner: Runner, installed: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    git(workspace, "init", "-q")
    git(workspace, "add", "models")
    git(workspace, "commit", "-qm", "base")
    base = git(workspace, "rev-parse", "HEAD")
    copy_fixtures(workspace / "new", "mpc101/bad_*.py")
    git(workspace, "add", ".")
    git(workspace, "commit", "-qm", "the pull request")
    # as actions/checkout leaves it: one commit, no history; the action fetches the base
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth=1", workspace.as_uri(), str(clone))
    event = {"event.pull_request.base.sha": base}
    result = run_action(runner, installed, clone, github=event)
    files = {f.split("/")[0] for f in re.findall(r",file=([^,]+),", result.stdout)}
    assert result.returncode == 1 and files == {"new"}, result.stdout + result.stderr
    # outside a pull request, or with diff-base emptied: every finding
    everything = run_action(runner, installed, clone, {"diff-base": ""}, github=event)
    assert "new/" in everything.stdout and "models/" in everything.stdout
    assert "models/" in run_action(runner, installed, clone).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_cast_of_a_same_named_class_is_not_the_cause_of_unchanged_findings(
    runner: Runner, installed: dict[str, str], tmp_path: Path
) -> None:
    """A pull request adds ``tools/`` with its own ``Block`` and a script casting it. The
    base's ``dit.blocks.Block`` (same name, another module) gets no evidence from that cast,
    so its unchanged finding has no related location on the change and is not reported."""
    case = XFILE / "bad_same_named_block"
    workspace = tmp_path / "ws"
    (workspace / "dit").mkdir(parents=True)
    for name in ("__init__.py", "blocks.py", "model.py"):
        shutil.copy2(case / "dit" / name, workspace / "dit" / name)
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "add", ".")
    git(workspace, "commit", "-qm", "base")
    base = git(workspace, "rev-parse", "HEAD")
    (workspace / "tools").mkdir()
    shutil.copy2(case / "tools" / "blocks.py", workspace / "tools" / "blocks.py")
    (workspace / "tools" / "__init__.py").write_text("")
    (workspace / "tools" / "run.py").write_text(
        "from .blocks import Block\n\nmodel = Block(8).half()\n"
    )
    git(workspace, "add", ".")
    git(workspace, "commit", "-qm", "the pull request")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth=1", workspace.as_uri(), str(clone))
    event = {"event.pull_request.base.sha": base}
    result = run_action(runner, installed, clone, {"sarif-file": "pr.sarif"}, github=event)
    files = set(re.findall(r",file=([^,]+),", result.stdout))
    assert result.returncode == 1 and files == {"tools/blocks.py"}, result.stdout + result.stderr
    sarif = json.loads((clone / "pr.sarif").read_text())
    (tools,) = [r for r in sarif["runs"][0]["results"] if not r.get("suppressions")]
    related = [
        loc["physicalLocation"]["artifactLocation"]["uri"]
        for loc in tools.get("relatedLocations", [])
    ]
    assert "tools/run.py" in related  # the cast, resolved to this module's ``Block``


# A script of the project that builds both models of the pull request and casts them to half.
RUN = """from block import Block
from pkg.attention import Attention

block = Block(8).half()
attention = Attention(8).half()
"""


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_pull_request_is_held_to_what_it_introduces_off_its_lines(
    runner: Runner, installed: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    """GitHub's checkout of a pull request: one merge commit, no history. A PR that deletes a
    cast back (the finding is on the next, unchanged line) and one that adds ``.float()`` in
    a helper (the finding is in its caller) both fail, in the annotations and in the SARIF;
    the findings the base already had (``models/``) are not reported."""
    from tests.test_pr_mode import ATTENTION, BLOCK, BROKEN_BLOCK, ROPE

    files = {"block.py": BLOCK, "pkg/__init__.py": "", "pkg/rope.py": ROPE}
    files["pkg/attention.py"] = ATTENTION
    # (the project casts both models to half: the PR's findings rest on that evidence, not on
    # whatever the workspace's other files leave open)
    files["run.py"] = RUN
    for name, text in files.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(text)
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "add", ".")
    git(workspace, "commit", "-qm", "base")
    base = git(workspace, "rev-parse", "HEAD")
    git(workspace, "switch", "-q", "-c", "pr")
    (workspace / "block.py").write_text(BROKEN_BLOCK)
    upcast = ROPE.replace("    return q * cos", "    q = q.float()\n    return q * cos")
    (workspace / "pkg" / "rope.py").write_text(upcast)
    git(workspace, "commit", "-qam", "the pull request")
    git(workspace, "switch", "-q", "--detach", "main")
    git(workspace, "merge", "-q", "--no-ff", "-m", "merge", "pr")
    git(workspace, "branch", "pull-1-merge")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth=1", "-b", "pull-1-merge", workspace.as_uri(), str(clone))
    event = {"event.pull_request.base.sha": base}
    result = run_action(runner, installed, clone, {"sarif-file": "pr.sarif"}, github=event)
    found = re.findall(r"::(?:error|warning) [^:]*file=([^,]+),line=(\d+)", result.stdout)
    annotated = set(found)
    assert result.returncode == 1, result.stdout + result.stderr
    assert annotated == {("block.py", "15"), ("pkg/attention.py", "17")}, result.stdout
    sarif = json.loads((clone / "pr.sarif").read_text())
    reported = [
        (r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
        for r in sarif["runs"][0]["results"]
        if not r.get("suppressions")
    ]
    assert sorted(reported) == [("MPC101", "block.py"), ("MPC103", "pkg/attention.py")]
    assert git(clone, "worktree", "list").count("\n") == 0  # the base's checkout is gone


def test_src_replaces_the_default_path(
    runner: Runner, installed: dict[str, str], workspace: Path
) -> None:
    one = sorted((workspace / "models").iterdir())[0].relative_to(workspace).as_posix()
    result = run_action(runner, installed, workspace, {"src": f"'{one}'"})
    files = set(re.findall(r",file=([^,]+),", result.stdout))
    assert files == {one}


def test_inputs_with_spaces(runner: Runner, installed: dict[str, str], workspace: Path) -> None:
    """Quoted words stay whole, in ``src`` and ``args``; ``sarif-file`` is used as given."""
    (workspace / "models").rename(workspace / "my models")
    inputs = {
        "src": "'my models' clean",
        "args": 'check --extend-exclude "no such dir" .',
        "sarif-file": "out dir/mpcheck report.sarif",
        "fail-on-findings": "false",
    }
    result = run_action(runner, installed, workspace, inputs)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.outputs["run"] == {"exit-code": "1", "sarif-file": inputs["sarif-file"]}
    files = set(re.findall(r",file=([^,]+),", result.stdout))
    assert files and all(f.startswith("my models/") for f in files)
    sarif = json.loads((workspace / "out dir" / "mpcheck report.sarif").read_text())
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in sarif["runs"][0]["results"]
    }
    assert uris and all(uri.startswith("my%20models/") for uri in uris)


def test_args_are_split_with_quotes_but_not_executed(
    runner: Runner, installed: dict[str, str], workspace: Path
) -> None:
    marker = workspace / "pwned"
    args = f"check --select 'MPC101' \"models\" $(touch {marker}) ;touch {marker}"
    result = run_action(runner, installed, workspace, {"args": args})
    assert not marker.exists()
    assert result.returncode == 2  # `$(touch` is a path that does not exist
    assert "No such file or directory" in result.stderr
    bad = run_action(runner, installed, workspace, {"args": "check 'unterminated 100%\nx"})
    assert bad.returncode == 2
    # The input is quoted in the error, escaped so that the runner shows it as written.
    (line,) = [line for line in bad.stdout.splitlines() if line.startswith("::error")]
    assert line == "::error title=mpcheck action::cannot split args: check 'unterminated 100%25%0Ax"


def test_fail_on_findings_false(runner: Runner, installed: dict[str, str], workspace: Path) -> None:
    result = run_action(runner, installed, workspace, {"fail-on-findings": "false"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.outputs["run"]["exit-code"] == "1"
    assert "::error title=mpcheck (" in result.stdout
    bad = run_action(runner, installed, workspace, {"fail-on-findings": "sometimes"})
    assert bad.returncode == 2
    assert "fail-on-findings must be true or false" in bad.stdout


def test_configuration_errors_fail_even_without_fail_on_findings(
    runner: Runner, installed: dict[str, str], workspace: Path
) -> None:
    (workspace / "pyproject.toml").write_text("[tool.mpcheck]\nselectt = []\n")
    result = run_action(
        runner,
        installed,
        workspace,
        {"fail-on-findings": "false", "sarif-file": "out.sarif"},
    )
    assert result.returncode == 2
    assert "unknown key 'selectt'" in result.stderr
    assert not (workspace / "out.sarif").exists()
    assert result.summary == ""


# -- the step summary (mpcheck.output.job_summary) ---------------------------------------------


def _diag(code: str, row: int, message: str = "msg", **kw: Any) -> Diagnostic:
    return Diagnostic(
        code=code,
        name=kw.pop("name", "a-rule"),
        message=message,
        severity=kw.pop("severity", Severity.ERROR),
        filename=kw.pop("filename", "/repo/pkg/model.py"),
        start=Position(row, 5),
        end=Position(row, 9),
        **kw,
    )


RULES = {
    "MPC101": RuleInfo("MPC101", "upcast-reaches-half-op", Severity.ERROR, "s", "d"),
    "MPC404": RuleInfo("MPC404", "deprecated|amp", Severity.WARNING, "s", "d"),
}


def test_summary_table_counts_per_rule() -> None:
    diags = [
        _diag("MPC404", 3, severity=Severity.WARNING),
        _diag("MPC101", 7, "`h` is float32"),
        _diag("MPC101", 9, filename="/repo/train.py"),
        _diag("MPC101", 11, suppressed=True),  # suppressed: not counted
        _diag("MPC999", 12, name="third-party", severity=Severity.WARNING),  # unknown rule
    ]
    text = render_summary(diags, RULES, root=Path("/repo"))
    assert text.startswith("### mpcheck: 4 findings in 2 files\n")
    rows = [line for line in text.splitlines() if line.startswith("| ")][2:]
    assert rows == [
        f"| [MPC101]({RULES['MPC101'].url}) | `upcast-reaches-half-op` | error | 2 |",
        f"| [MPC404]({RULES['MPC404'].url}) | `deprecated\\|amp` | warning | 1 |",
        "| MPC999 | `third-party` | warning | 1 |",
        "| **Total** | | | **4** |",
    ]
    assert "pkg/model.py:7:5: MPC101 `h` is float32\n" in text
    assert "train.py:9:5: MPC101 msg\n" in text
    assert ":11:5:" not in text


def test_summary_without_findings() -> None:
    text = render_summary([_diag("MPC101", 1, suppressed=True)], RULES, root=Path("/repo"))
    assert text == "### mpcheck: no findings\n\nAll checks passed.\n\n"


def test_summary_listing_stays_literal_and_bounded() -> None:
    diags = [_diag("MPC101", i, "uses ```x``` and <b>html</b>") for i in range(1, 301)]
    text = render_summary(diags, RULES, root=Path("/repo"))
    fence = "````"  # longer than the message's backtick runs
    block = text.split(f"\n{fence}\n")[1]
    assert len(block.splitlines()) == MAX_LISTED + 1
    assert block.splitlines()[-1] == f"... and {300 - MAX_LISTED} more (see the job log)"


def test_write_step_summary_appends_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    diags = [_diag("MPC101", 1)]
    assert write_step_summary(diags, RULES, root=tmp_path, environ={}) is None
    assert write_step_summary(diags, RULES, root=tmp_path, environ={ENV_VAR: ""}) is None
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n")
    for _ in range(2):
        assert write_step_summary(diags, RULES, root=tmp_path, environ={ENV_VAR: str(target)})
    assert target.read_text().count("### mpcheck: 1 finding in 1 file") == 2
    assert target.read_text().startswith("earlier step\n")
    # Unwritable: a warning, not an exception.
    assert write_step_summary(diags, RULES, root=tmp_path, environ={ENV_VAR: str(tmp_path)}) is None
    assert "mpcheck: warning: cannot write the step summary" in capsys.readouterr().err


def test_cli_writes_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    copy_fixtures(tmp_path / "models", "mpc101/bad_*.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MPCHECK_OUTPUT_FORMAT", raising=False)
    target = tmp_path / "summary.md"
    monkeypatch.setenv(ENV_VAR, str(target))
    assert cli.main(["check", "--statistics", "models"]) == 1
    counted = re.findall(
        r"^\| \[MPC101\]\(.*\) \| `upcast-reaches-half-op` \| error \| (\d+) \|$",
        target.read_text(),
        re.M,
    )
    statistics = capsys.readouterr().out  # "<count>\tMPC101\t..."
    assert counted and statistics.split()[:2] == [counted[0], "MPC101"]
    monkeypatch.setenv(ENV_VAR, str(tmp_path))  # a directory: cannot be written
    assert cli.main(["check", "--exit-zero", "models"]) == 0
    assert "cannot write the step summary" in capsys.readouterr().err
