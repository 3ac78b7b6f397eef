"""Every ``--output-format``, end to end through the CLI, read back by a real consumer.

The same project (real fixtures with errors, warnings, related locations and fixes, a
``# noqa``-suppressed finding, and a directory whose name needs escaping) is checked once
per format. Each output is parsed the way its consumer parses it (ElementTree for JUnit,
the official schema for SARIF, ``json`` for the JSON formats, the runner's unescaping for
GitHub and Azure logging commands, the editors' ``path:row:col`` patterns for the text
formats) and must name exactly the findings ``--output-format json`` names.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mpcheck.cli import app as cli
from mpcheck.output.reporters import FORMATS
from tests.support import FIXTURES, ROOT

SARIF_SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"
SHARED_SARIF_SCHEMA = ROOT.parent / "shared" / "reference" / "sarif-schema-2.1.0.json"
ODD_DIR = "odd,dir:50%"  # every character GitHub escapes in a property value
SUPPRESSED = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        h = x.float()
        return self.proj(h)  # noqa: MPC101
"""
SUPPRESSED_AT = ("silenced.py", 12, "MPC101")
# A finding whose range spans lines and whose message holds `%`, `:` and `,`.
MULTI_LINE = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj((x[:, 0:4]
                          % 2).float())
"""

# A script casting a model it picks by name: any class of the project may run in half. That is a
# path mpcheck cannot follow, so the fixtures' premise warnings ("raises if `Block` runs in half")
# stand only where the project asks for them (``OPEN_WORLD_CONFIG``)
OPEN_WORLD = """\
import importlib
import sys

if __name__ == "__main__":
    getattr(importlib.import_module(sys.argv[1]), sys.argv[2])().half()
"""
OPEN_WORLD_CONFIG = "open-world-premises = true\n"

PROJECT_FILES = frozenset(
    """bad_device_branch.py bad_encoder_layernorm.py bad_from_imports_cpu_and_custom_fn.py
    bad_legacy_amp_training_loop.py bad_rmsnorm_block.py bad_script_half_model.py
    bad_script_working_dtype.py bad_unet_timestep_class_embedding.py
    bad_upcast_into_submodule_output.py""".split()
)
Where = tuple[str, int, int, str]  # root-relative POSIX path, row, 1-based column, code


def make_project(root: Path) -> Path:
    """A repository with errors, warnings, fixes, a suppression and an awkward path."""
    # A pinned set: under GitHub's ten annotations per level, so every finding is annotated
    # (the cap has its own test).
    for pattern in ("mpc101/bad_*.py", "mpc404/bad_*.py"):
        for src in sorted(FIXTURES.glob(pattern)):
            if src.name not in PROJECT_FILES:
                continue
            dest = root / "models" / src.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
    odd = root / ODD_DIR
    odd.mkdir()
    shutil.copy2(FIXTURES / "mpc101" / "bad_script_half_model.py", odd / "script.py")
    (root / "silenced.py").write_text(SUPPRESSED)
    (root / "multi_line.py").write_text(MULTI_LINE)
    (root / "models" / "open_world.py").write_text(OPEN_WORLD)  # (checked alone too)
    (root / ".mpcheck.toml").write_text(OPEN_WORLD_CONFIG)
    return root


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The project and one cache for every test of this module: each test reads the same
    findings in its own format, and only the first run analyses (``tests/test_cache.py``
    proves that a cached run prints what a cold one does). Tests that change the project
    work on copies, under the same cache."""
    base = tmp_path_factory.mktemp("formats")
    return make_project(base / "project"), base / "cache"


@pytest.fixture
def project(shared: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    root, cache = shared
    monkeypatch.setenv("MPCHECK_CACHE_DIR", str(cache))
    for name in ("MPCHECK_OUTPUT_FORMAT", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(root)
    return root


@pytest.fixture(scope="module")
def shifted(shared: tuple[Path, Path]) -> Path:
    """A copy of the project whose code in ``models/`` moved down two lines."""
    root = shutil.copytree(shared[0], shared[0].parent / "shifted")
    for path in sorted((root / "models").glob("*.py")):
        path.write_text("# a new header comment\n\n" + path.read_text())
    return root


@pytest.fixture(scope="module")
def repository(shared: tuple[Path, Path]) -> Path:
    """A copy of the project that is a git repository."""
    root = shutil.copytree(shared[0], shared[0].parent / "repository")
    (root / ".git").mkdir()
    return root


@pytest.fixture(scope="module")
def checkout(repository: Path) -> Path:
    """The same repository checked out elsewhere."""
    return shutil.copytree(repository, repository.parent / "elsewhere" / "checkout")


def run(fmt: str, *extra: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        rc = cli.main(["check", "--output-format", fmt, *extra, "."])
    return rc, out.getvalue()


def reference(project: Path) -> list[dict[str, Any]]:
    rc, text = run("json")
    assert rc == 1
    data: list[dict[str, Any]] = json.loads(text)
    return data


def where(d: dict[str, Any], project: Path) -> Where:
    path = Path(os.path.relpath(d["filename"], project)).as_posix()
    return (path, d["location"]["row"], d["location"]["column"], d["code"])


# -- consumers -----------------------------------------------------------------------------------

_GITHUB_UNESCAPE = {"%25": "%", "%0D": "\r", "%0A": "\n", "%3A": ":", "%2C": ","}
_AZURE_UNESCAPE = {"%AZP25": "%", "%0D": "\r", "%0A": "\n", "%3B": ";", "%5D": "]"}


def unescape(text: str, table: dict[str, str]) -> str:
    pattern = "|".join(re.escape(k) for k in table)
    return re.sub(pattern, lambda m: table[m.group(0)], text)


def github_commands(text: str) -> list[tuple[str, dict[str, str], str]]:
    """Workflow commands as the runner reads them: ``::name k=v,k=v::data``."""
    commands = []
    for line in text.splitlines():
        m = re.fullmatch(r"::(\w+)(?: ([^:]*))?::(.*)", line)
        if m is None:
            continue
        props = {}
        for pair in filter(None, (m.group(2) or "").split(",")):
            key, value = pair.split("=", 1)
            props[key] = unescape(value, _GITHUB_UNESCAPE)
        commands.append((m.group(1), props, unescape(m.group(3), _GITHUB_UNESCAPE)))
    return commands


def github_key(props: dict[str, str], data: str) -> Where:
    """Where an annotation points; its message repeats that place for the log reader."""
    m = re.match(r"(.+?):(\d+):(\d+): (MPC\d{3}) ", data)
    assert m, data
    key = (props["file"], int(props["line"]), int(props["col"]), m[4])
    assert (m[1], int(m[2]), int(m[3]), m[4]) == key
    # What the runner accepts: columns only on a single line, never ending before they start.
    assert props["endLine"] == props["line"]
    assert int(props["endColumn"]) >= int(props["col"])
    return key


def read_github(text: str) -> set[Where]:
    return {
        github_key(p, data)
        for level, p, data in github_commands(text)
        if level in ("error", "warning")
    }


def read_azure(text: str) -> set[Where]:
    found = set()
    for line in text.splitlines():
        m = re.fullmatch(r"##vso\[task\.logissue ([^\]]*)\](.*)", line)
        assert m, line
        props = dict(pair.split("=", 1) for pair in filter(None, m.group(1).split(";")))
        props = {k: unescape(v, _AZURE_UNESCAPE) for k, v in props.items()}
        path = Path(os.path.relpath(props["sourcepath"])).as_posix()  # Azure wants it absolute
        assert Path(props["sourcepath"]).is_absolute()
        found.add((path, int(props["linenumber"]), int(props["columnnumber"]), props["code"]))
    return found


LINE = re.compile(r"^(?P<path>[^\s].*?):(?P<row>\d+):(?P<col>\d+): (?P<code>MPC\d{3}) ", re.M)


def read_lines(text: str) -> set[Where]:
    """What problem matchers, ``vim``'s quickfix and ``grep -n`` users rely on."""
    return {(m["path"], int(m["row"]), int(m["col"]), m["code"]) for m in LINE.finditer(text)}


def read_grouped(text: str) -> set[Where]:
    found, path = set(), ""
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            path = line[:-1]
        elif m := re.match(r"^\s+(\d+):(\d+)\s+(MPC\d{3}) ", line):
            found.add((path, int(m[1]), int(m[2]), m[3]))
    return found


def read_pylint(text: str) -> set[Where]:
    rows = re.findall(r"^(.+?):(\d+): \[(MPC\d{3})\] ", text, re.M)
    return {(path, int(row), 0, code) for path, row, code in rows}


def read_json_lines(text: str) -> set[Where]:
    return {where(json.loads(line), Path.cwd()) for line in text.splitlines()}


def read_junit(text: str) -> set[Where]:
    root = ET.fromstring(text)
    cases = root.findall("./testsuite/testcase")
    assert int(root.get("failures", "-1")) == len(cases)
    names = [case.get("name", "") for case in cases]
    assert len(set(names)) == len(names)  # report views merge cases that share a name
    found = set()
    for case in cases:
        failure = case.find("failure")
        code = case.get("name", "").split(".", 1)[1].split(" ")[0]
        assert failure is not None and failure.get("type") == code
        found.add(
            (case.get("file", ""), int(case.get("line", 0)), int(case.get("column", 0)),
             failure.get("type", ""))
        )  # fmt: skip
    return found


def read_gitlab(text: str) -> set[Where]:
    issues = json.loads(text)
    assert len({i["fingerprint"] for i in issues}) == len(issues)
    assert {i["severity"] for i in issues} <= {"info", "minor", "major", "critical", "blocker"}
    return {
        (i["location"]["path"], i["location"]["lines"]["begin"], 0, i["check_name"]) for i in issues
    }


def _closed(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,  # a misspelt field would be silently ignored
    }


# reviewdog's Diagnostic Format (proto/rdf/reviewdog.proto: DiagnosticResult, `rdjson`), as a
# JSON schema written from the message definitions: the field names and types reviewdog's
# protojson decoder accepts, lines and UTF-8 byte columns from 1, exclusive range ends.
_POSITION = _closed(
    {"line": {"type": "integer", "minimum": 1}, "column": {"type": "integer", "minimum": 1}},
    ("line", "column"),
)
_RANGE = _closed({"start": _POSITION, "end": _POSITION}, ("start",))
_LOCATION = _closed({"path": {"type": "string", "minLength": 1}, "range": _RANGE}, ("path",))
_SOURCE = _closed({"name": {"type": "string"}, "url": {"type": "string"}}, ("name",))
RDJSON_SCHEMA = _closed(
    {
        "source": _SOURCE,
        "severity": {"enum": ["UNKNOWN_SEVERITY", "ERROR", "WARNING", "INFO"]},
        "diagnostics": {
            "type": "array",
            "items": _closed(
                {
                    "message": {"type": "string", "minLength": 1},
                    "location": _LOCATION,
                    "severity": {"enum": ["UNKNOWN_SEVERITY", "ERROR", "WARNING", "INFO"]},
                    "source": _SOURCE,
                    "code": _closed(
                        {"value": {"type": "string"}, "url": {"type": "string"}}, ("value",)
                    ),
                    "suggestions": {
                        "type": "array",
                        "items": _closed(
                            {"range": _RANGE, "text": {"type": "string"}}, ("range", "text")
                        ),
                    },
                    "original_output": {"type": "string"},
                    "related_locations": {
                        "type": "array",
                        "items": _closed(
                            {"message": {"type": "string"}, "location": _LOCATION}, ("location",)
                        ),
                    },
                },
                ("message", "location"),
            ),
        },
    },
    ("diagnostics",),
)


def read_rdjson(text: str) -> set[Where]:
    doc = json.loads(text)
    jsonschema.Draft7Validator(RDJSON_SCHEMA).validate(doc)
    assert doc["source"]["name"] == "mpcheck"
    return {
        (
            d["location"]["path"],
            d["location"]["range"]["start"]["line"],
            d["location"]["range"]["start"]["column"],  # UTF-8 bytes; the fixtures are ASCII
            d["code"]["value"],
        )
        for d in doc["diagnostics"]
    }


def validate_sarif(log: Any) -> None:
    schemas = [SARIF_SCHEMA] + [SHARED_SARIF_SCHEMA] * SHARED_SARIF_SCHEMA.is_file()
    for path in schemas:
        schema = json.loads(path.read_text(encoding="utf-8"))
        validator = jsonschema.Draft4Validator(
            schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER
        )
        assert [e.message for e in validator.iter_errors(log)] == []


def read_sarif(text: str) -> set[Where]:
    log = json.loads(text)
    validate_sarif(log)
    found = set()
    for result in log["runs"][0]["results"]:
        if result.get("suppressions"):
            continue
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        path = re.sub(
            "%([0-9A-F]{2})", lambda m: chr(int(m[1], 16)), location["artifactLocation"]["uri"]
        )
        region = location["region"]
        found.add((path, region["startLine"], region["startColumn"], result["ruleId"]))
    return found


READERS: dict[str, Callable[[str], set[Where]]] = {
    "full": read_lines,
    "concise": read_lines,
    "json": lambda text: {where(d, Path.cwd()) for d in json.loads(text)},
    "json-lines": read_json_lines,
    "github": read_github,
    "sarif": read_sarif,
    "junit": read_junit,
    "gitlab": read_gitlab,
    "pylint": read_pylint,
    "grouped": read_grouped,
    "azure": read_azure,
    "rdjson": read_rdjson,
}
WITHOUT_COLUMN = {"gitlab", "pylint"}


def test_every_format_has_a_reader() -> None:
    assert set(READERS) == set(FORMATS)


@pytest.mark.parametrize("fmt", FORMATS)
def test_format_names_exactly_the_findings_json_names(project: Path, fmt: str) -> None:
    wanted = {where(d, project) for d in reference(project)}
    assert {"MPC101", "MPC404"} <= {w[3] for w in wanted}  # errors and warnings
    spanning = [d for d in reference(project) if d["end_location"]["row"] > d["location"]["row"]]
    assert any(all(c in d["message"] for c in "%:,") for d in spanning)
    assert any(w[0].startswith(ODD_DIR + "/") for w in wanted)
    if fmt in WITHOUT_COLUMN:
        wanted = {(path, row, 0, code) for path, row, _, code in wanted}
    rc, text = run(fmt)
    assert rc == 1
    assert READERS[fmt](text) == wanted
    assert SUPPRESSED_AT[0] not in text or fmt == "sarif"


@pytest.mark.parametrize("fmt", FORMATS)
def test_output_file_holds_what_stdout_would(project: Path, fmt: str) -> None:
    _, printed = run(fmt)
    rc, text = run(fmt, "-o", "report.out")
    try:
        assert (rc, text) == (1, "")
        assert Path("report.out").read_text(encoding="utf-8") == printed
    finally:
        Path("report.out").unlink(missing_ok=True)  # the project is shared by every test


def test_environment_chooses_the_format(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPCHECK_OUTPUT_FORMAT", "sarif")
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(["check", "."]) == 1
    assert read_sarif(out.getvalue()) == {where(d, project) for d in reference(project)}


def test_github_levels_and_escaped_paths(project: Path) -> None:
    severities = {where(d, project): d["severity"] for d in reference(project)}
    _, text = run("github")
    commands = github_commands(text)
    assert {level for level, _, _ in commands} == {"error", "warning"}
    for level, props, data in commands:
        key = github_key(props, data)
        assert level == severities[key]
        assert props["title"] == f"mpcheck ({key[3]})"
    # The awkward directory reached the runner escaped, and came back intact.
    raw = [line for line in text.splitlines() if ",file=odd" in line]
    assert raw and all("file=odd%2Cdir%3A50%25/script.py," in line for line in raw)


def test_sarif_keeps_suppressed_findings_and_related_locations(project: Path) -> None:
    findings = reference(project)
    _, text = run("sarif")
    log = json.loads(text)
    validate_sarif(log)
    results = log["runs"][0]["results"]
    suppressed = [r for r in results if r.get("suppressions")]
    assert len(suppressed) == 1
    (silenced,) = suppressed
    assert silenced["suppressions"] == [{"kind": "inSource"}]
    region = silenced["locations"][0]["physicalLocation"]["region"]
    uri = silenced["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert (uri, region["startLine"], silenced["ruleId"]) == SUPPRESSED_AT
    # Where each dtype came from: the engine's related locations, one SARIF location each.
    by_place = {where(d, project): d for d in findings}
    with_related = 0
    for result in results:
        if result.get("suppressions"):
            continue
        location = result["locations"][0]["physicalLocation"]
        uri = re.sub(
            "%([0-9A-F]{2})", lambda m: chr(int(m[1], 16)), location["artifactLocation"]["uri"]
        )
        key = (
            uri,
            location["region"]["startLine"],
            location["region"]["startColumn"],
            result["ruleId"],
        )
        related = by_place[key]["related"]
        got = [
            (r["message"]["text"], r["physicalLocation"]["region"]["startLine"])
            for r in result.get("relatedLocations", [])
        ]
        assert got == [(r["message"], r["location"]["row"]) for r in related]
        with_related += bool(related)
        assert result["level"] == by_place[key]["severity"]
    assert with_related >= 3
    rules = {rule["id"]: rule for rule in log["runs"][0]["tool"]["driver"]["rules"]}
    assert {"MPC101", "MPC404"} <= set(rules)
    for rule in rules.values():
        assert rule["help"]["text"] and rule["help"]["markdown"]
        assert rule["helpUri"].endswith(f"/docs/rules/{rule['id']}.md")
        assert (ROOT / "docs" / "rules" / f"{rule['id']}.md").is_file()
        assert rule["defaultConfiguration"]["level"] in ("error", "warning", "note")


@pytest.mark.parametrize("fmt", ["sarif", "gitlab"])
def test_fingerprints_are_stable_when_code_moves(project: Path, shifted: Path, fmt: str) -> None:
    def prints() -> dict[tuple[str, str], list[str]]:
        _, text = run(fmt)
        data = json.loads(text)
        out: dict[tuple[str, str], list[str]] = {}
        if fmt == "sarif":
            for r in data["runs"][0]["results"]:
                uri = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                out.setdefault((uri, r["ruleId"]), []).append(
                    r["partialFingerprints"]["mpcheck/v1"]
                )
        else:
            for i in data:
                out.setdefault((i["location"]["path"], i["check_name"]), []).append(
                    i["fingerprint"]
                )
        return out

    before = prints()
    assert prints() == before  # deterministic
    os.chdir(shifted)  # every finding in models/ two lines further down
    assert prints() == before


def located_prints(fmt: str) -> set[tuple[str, str, str]]:
    """(repository path, code, fingerprint) of every finding a SARIF or GitLab report holds."""
    _, text = run(fmt)
    data = json.loads(text)
    if fmt == "gitlab":
        return {(i["location"]["path"], i["check_name"], i["fingerprint"]) for i in data}
    validate_sarif(data)
    found = set()
    for r in data["runs"][0]["results"]:
        artifact = r["locations"][0]["physicalLocation"]["artifactLocation"]
        assert artifact["uriBaseId"] == "%SRCROOT%"
        path = re.sub("%([0-9A-F]{2})", lambda m: chr(int(m[1], 16)), artifact["uri"])
        found.add((path, r["ruleId"], r["partialFingerprints"]["mpcheck/v1"]))
    return found


@pytest.mark.parametrize("fmt", ["sarif", "gitlab"])
def test_paths_and_fingerprints_are_relative_to_the_repository(
    project: Path, repository: Path, checkout: Path, fmt: str
) -> None:
    """Code scanning and GitLab resolve paths in the repository, wherever mpcheck ran."""
    os.chdir(repository)
    at_root = located_prints(fmt)
    assert any(path.startswith("models/") for path, _, _ in at_root)
    os.chdir(repository / "models")  # e.g. `cd models && mpcheck check .` in a CI job
    below = located_prints(fmt)
    assert below and below == {f for f in at_root if f[0].startswith("models/")}
    if fmt == "sarif":
        _, text = run(fmt)
        base = json.loads(text)["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"]
        assert base == repository.as_uri() + "/"
    # The same repository checked out elsewhere: nothing absolute leaks into a fingerprint.
    os.chdir(checkout)
    assert located_prints(fmt) == at_root


# -- notebooks: formats laid over the file itself name the .ipynb file's own lines ---------------

# Cell rows mean nothing to a CI annotation, a review comment or code scanning: these formats
# point at the JSON line (and column) holding the finding's source text, and name the cell in
# the message; they offer no fix (a cell edit is not an edit of the JSON text).
FILE_FORMATS = ("github", "pylint", "azure", "gitlab", "rdjson", "sarif")
NOTEBOOK_CELLS = ["import torch\n", "x = 'é'\nscaler = torch.cuda.amp.GradScaler()\n"]


def _notebook_text(layout: str) -> str:
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Ünïcode")]
    nb.cells += [nbformat.v4.new_code_cell(source) for source in NOTEBOOK_CELLS]
    text: str = nbformat.writes(nb) + "\n"
    if layout == "nbformat":
        return text
    data = json.loads(text)
    for cell in data["cells"]:
        cell["source"] = "".join(cell["source"])
    escaped = json.dumps(data, indent=2)  # one string per cell, non-ASCII as \u escapes
    return escaped.replace("\n", "\r\n") if layout == "string source, CRLF" else escaped


@pytest.mark.parametrize("layout", ["nbformat", "string source, ASCII", "string source, CRLF"])
@pytest.mark.parametrize("fmt", FILE_FORMATS)
def test_notebook_findings_point_at_the_notebook_files_own_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, layout: str
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("nb.ipynb").write_bytes(_notebook_text(layout).encode())
    rc, text = run(fmt, "--no-cache")
    assert rc == 1
    ((path, row, col, code),) = READERS[fmt](text)
    assert (path, code) == ("nb.ipynb", "MPC404")
    line = Path("nb.ipynb").read_text(encoding="utf-8").splitlines()[row - 1]
    assert "torch.cuda.amp.GradScaler()" in line  # the JSON line holding the cell's line
    if col:  # rdjson counts UTF-8 bytes, the others characters
        rest = line.encode()[col - 1 :] if fmt == "rdjson" else line[col - 1 :].encode()
        assert rest.startswith(b"torch.cuda.amp.GradScaler()")
    assert "cell 3, line 2" in text
    assert "suggestions" not in text and '"fixes"' not in text  # never over the JSON's bytes


def test_grouped_names_the_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("nb.ipynb").write_text(_notebook_text("nbformat"), encoding="utf-8")
    rc, text = run("grouped", "--no-cache")
    assert re.search(r"^nb\.ipynb:\n  cell 3:2:10 MPC404 \[\*\] ", text, re.M), text


@pytest.mark.parametrize("fmt", ["gitlab", "sarif"])
def test_notebook_fingerprints_hash_the_cells_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    # As documented (code, path, the reported line's text, occurrence): the line is the
    # cell's, so a string-source cell (one JSON line) edited elsewhere keeps the fingerprint.
    from hashlib import sha256

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    text = _notebook_text("string source, ASCII")
    payload = "\0".join(("MPC404", "nb.ipynb", "scaler = torch.cuda.amp.GradScaler()", "0"))
    for edited in (text, text.replace("x = '\\u00e9'", "x = 'other'")):
        assert edited.count("other") == (edited is not text)
        Path("nb.ipynb").write_text(edited)
        _, out = run(fmt, "--no-cache")
        doc = json.loads(out)
        prints = (
            [i["fingerprint"] for i in doc]
            if fmt == "gitlab"
            else [r["partialFingerprints"]["mpcheck/v1"] for r in doc["runs"][0]["results"]]
        )
        assert prints == [sha256(payload.encode()).hexdigest()]
