"""The integration snippets in the README and docs/integrations.md are real and current.

A user copies these blocks verbatim, so each one is checked against the thing it configures:
pre-commit configurations with pre-commit's own validator and this repository's hook
manifest, workflows against ``action.yml``'s inputs and outputs, flake8 options against what
the plugin registers, format lists against the reporters.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from mpcheck.flake8_plugin import MpcheckPlugin
from mpcheck.output.reporters import FORMATS
from mpcheck.output.reporters.base import HOMEPAGE
from tests.support import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
HOOKS = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
ACTION_REF = HOMEPAGE.removeprefix("https://github.com/")  # "owner/name" in `uses:`
UPLOAD_SARIF = "github/codeql-action/upload-sarif@"


def section(markdown: str, title: str) -> str:
    start = markdown.index(f"\n## {title}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start : end if end != -1 else None]


def yaml_blocks(markdown: str) -> list[Any]:
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", markdown, re.S)]


def precommit_configs(markdown: str) -> list[dict[str, Any]]:
    return [b for b in yaml_blocks(markdown) if isinstance(b, dict) and "repos" in b]


def workflows(markdown: str) -> list[dict[str, Any]]:
    return [b for b in yaml_blocks(markdown) if isinstance(b, dict) and "jobs" in b]


def steps(workflow: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(job, step) pairs of a workflow."""
    return [(job, step) for job in workflow["jobs"].values() for step in job["steps"]]


README_INTEGRATIONS = section(README, "Integrations")
SOURCES = {"README": README_INTEGRATIONS, "docs/integrations.md": DOCS}


def test_readme_shows_the_precommit_snippet_and_both_workflows() -> None:
    assert len(precommit_configs(README_INTEGRATIONS)) == 1
    flows = workflows(README_INTEGRATIONS)
    with_sarif = [w for w in flows if any(UPLOAD_SARIF in s.get("uses", "") for _, s in steps(w))]
    assert len(flows) == 2 and len(with_sarif) == 1
    (sarif_flow,) = with_sarif
    (job,) = sarif_flow["jobs"].values()
    assert job["permissions"]["security-events"] == "write"
    assert "docs/integrations.md" in README_INTEGRATIONS


@pytest.mark.parametrize("where", SOURCES)
def test_precommit_snippets_are_valid_configurations(where: str, tmp_path: Path) -> None:
    from pre_commit.clientlib import load_config

    configs = precommit_configs(SOURCES[where])
    assert configs
    hook_ids = {hook["id"] for hook in HOOKS}
    for config in configs:
        path = tmp_path / ".pre-commit-config.yaml"
        path.write_text(yaml.safe_dump(config))
        loaded = load_config(str(path))  # raises on anything pre-commit would reject
        (repo,) = loaded["repos"]
        assert repo["repo"] == HOMEPAGE
        assert {hook["id"] for hook in repo["hooks"]} <= hook_ids


@pytest.mark.parametrize("where", SOURCES)
def test_workflows_use_only_the_actions_inputs_and_outputs(where: str) -> None:
    flows = workflows(SOURCES[where])
    assert len(flows) >= 2
    for flow in flows:
        ours = [s for _, s in steps(flow) if s.get("uses", "").startswith(f"{ACTION_REF}@")]
        assert len(ours) == 1, "each workflow runs the mpcheck action once"
        (step,) = ours
        assert set(step.get("with", {})) <= set(ACTION["inputs"])
        for job, upload in steps(flow):
            if UPLOAD_SARIF not in upload.get("uses", ""):
                continue
            # The SARIF written by our step is the one uploaded ...
            assert upload["with"]["sarif_file"] == step["with"]["sarif-file"]
            assert job["permissions"]["security-events"] == "write"
            # ... even though our step fails on findings, and only if it was written.
            condition = upload["if"]
            referenced = re.findall(r"steps\.([\w-]+)\.outputs\.([\w-]+)", condition)
            assert referenced == [(step["id"], "sarif-file")]
            assert "sarif-file" in ACTION["outputs"]
            assert "!cancelled()" in condition or "always()" in condition


def test_docs_list_every_action_input_and_output() -> None:
    for name, spec in ACTION["inputs"].items():
        default = spec.get("default", "")
        shown = f"`{default}`" if default else "(empty)"
        assert f"| `{name}` | {shown} |" in DOCS
    for name in ACTION["outputs"]:
        assert f"| `{name}` |" in DOCS


def test_docs_describe_every_flake8_option() -> None:
    registered: list[tuple[str, dict[str, Any]]] = []

    class Recorder:
        def add_option(self, *args: str, **kwargs: Any) -> None:
            registered.append((args[0], kwargs))

    MpcheckPlugin.add_options(Recorder())
    assert registered
    for option, kwargs in registered:
        assert option.startswith("--mpcheck-")
        assert kwargs["help"]
        assert f"`{option}=" in DOCS
        if kwargs.get("parse_from_config"):
            assert f"`{option.removeprefix('--')} = " in DOCS


def test_docs_describe_the_hook_as_defined() -> None:
    (hook,) = HOOKS
    assert f"`{hook['entry']} <files>`" in DOCS
    assert f"`language: {hook['language']}`" in DOCS
    assert f"`types_or: [{', '.join(hook['types_or'])}]`" in DOCS
    assert "`require_serial: true`" in DOCS and hook["require_serial"] is True


def test_every_output_format_is_listed() -> None:
    table = set(
        re.findall(r"^\| `([\w-]+)`(?: \(default\))? \|", section(DOCS, "Output formats"), re.M)
    )
    assert table == set(FORMATS)
    usage = section(README, "Usage")
    listed = re.search(r"--output-format json  #(.*?)\n(?:\s+#(.*?)\n)", usage)
    assert listed is not None
    names = {n.strip() for n in (listed.group(1) + "," + listed.group(2)).split(",")} - {""}
    assert names == set(FORMATS)


ALL_DOCS = {p.relative_to(ROOT).as_posix(): p.read_text("utf-8") for p in ROOT.glob("docs/*.md")}
ALL_DOCS["README.md"] = README
GIT_URL = f"git+{HOMEPAGE}@"


def refs_named(text: str) -> list[str]:
    """Every ref an install line names: pip's git URLs, pre-commit ``rev:``, ``uses: …@``."""
    found = re.findall(rf"{re.escape(GIT_URL)}([\w./-]+)", text)
    found += re.findall(r"^\s*rev: *([^\s#]+)", text, re.M)
    found += re.findall(rf"uses: *{re.escape(ACTION_REF)}@([\w./-]+)", text)
    return found


@pytest.mark.parametrize("where", sorted(ALL_DOCS))
def test_every_install_line_works_without_pypi(where: str) -> None:
    """mpcheck is not published: ``pip install mpcheck`` fails on a fresh machine. Install
    lines use the repository's git URL, and each ref they name exists in this repository."""
    text = ALL_DOCS[where]
    for line in re.findall(r"pip install[^\n`&;|]*", text):
        words = line.replace('"', " ").replace("'", " ").split()
        assert "mpcheck" not in words[2:] or GIT_URL in line, f"{where}: {line}"
    import subprocess

    for ref in refs_named(text):
        known = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
            cwd=ROOT,
            capture_output=True,
        )
        assert known.returncode == 0, f"{where}: `{ref}` is not a ref of mpcheck"


def test_install_lines_are_found() -> None:
    named = [ref for text in ALL_DOCS.values() for ref in refs_named(text)]
    assert len(named) >= 8 and set(named) == {"main"}


@pytest.mark.integration
def test_the_documented_pip_line_resolves_to_this_repository(tmp_path: Path) -> None:
    """What a fresh machine runs, with the GitHub URL pointed at this checkout: pip builds the
    package from the git ref and would install it."""
    import json
    import subprocess
    import sys

    (line,) = {m for m in re.findall(r'"(mpcheck @ git\+[^"]+)"', DOCS)}
    local = line.replace(HOMEPAGE, ROOT.as_uri())
    report = tmp_path / "report.json"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--quiet",
         "--no-build-isolation", "--report", str(report), local],
        check=True, capture_output=True, cwd=tmp_path,
    )  # fmt: skip
    (item,) = json.loads(report.read_text())["install"]
    assert item["metadata"]["name"] == "mpcheck"
    assert item["download_info"]["vcs_info"]["requested_revision"] == "main"
