"""Reporters: every format is parsed back by a real consumer, or compared to a golden string."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mpcheck.diagnostics import Diagnostic, Edit, Fix, Position, Related, RuleInfo, Severity
from mpcheck.output.reporters import FORMATS, ReportContext, render

SARIF_SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
ROOT = Path("/repo")
MODEL = "/repo/pkg/model.py"
TRAIN = "/repo/train.py"  # its source is "unavailable" to the reporters

MODEL_SOURCE = [
    "import torch",
    "",
    "",
    "class Block(torch.nn.Module):",
    "    def forward(self, x):",
    "        h = self.norm(x).float()",
    "        h = h * torch.rsqrt(h.pow(2).mean(-1) + 1e-6)",
    "        return self.proj(h)",
    "",
    "",
    "def attn(q, k):",
    "    scores = torch.matmul(",
    "        q.float(),",
    "        k.transpose(-1, -2),",
    "    )",
    "    return scores  # noqa: MPC102",
]


def P(row: int, column: int) -> Position:
    return Position(row, column)


UPCAST = Diagnostic(
    code="MPC101",
    name="upcast-reaches-half-op",
    message="`h` is float32 but `self.proj` runs in half",
    severity=Severity.ERROR,
    filename=MODEL,
    start=P(8, 16),
    end=P(8, 28),
    related=(Related("`h` was upcast to float32 here", P(6, 13), P(6, 33)),),
    fix=Fix(
        "Cast `h` to `self.proj.weight.dtype`",
        (Edit("h.to(self.proj.weight.dtype)", P(8, 26), P(8, 27)),),
        applicability="safe",
    ),
    noqa_row=8,
)
MATMUL = Diagnostic(  # multi-line range, special characters and a newline in the message
    code="MPC103",
    name="upcast-matmul",
    message="100% of `q`: upcast, then matmul,\nsecond line",
    severity=Severity.WARNING,
    filename=MODEL,
    start=P(12, 14),
    end=P(15, 6),
    noqa_row=12,
)
SILENCED = Diagnostic(
    code="MPC102",
    name="returns-upcast",
    message="`scores` leaves the function as float32",
    severity=Severity.WARNING,
    filename=MODEL,
    start=P(16, 12),
    end=P(16, 18),
    noqa_row=16,
    suppressed=True,
)
LOSS = Diagnostic(
    code="MPC104",
    name="loss-in-half",
    message="50%: x, y",
    severity=Severity.ERROR,
    filename=TRAIN,
    start=P(1, 8),
    end=P(1, 16),
    noqa_row=1,
)
ALL = [UPCAST, MATMUL, SILENCED, LOSS]

RULES = {
    code: RuleInfo(code, name, severity, f"Summary of {code}.", f"# {code}\n\nDocs of *{code}*.")
    for code, name, severity in [
        ("MPC104", "loss-in-half", Severity.ERROR),
        ("MPC101", "upcast-reaches-half-op", Severity.ERROR),
        ("MPC103", "upcast-matmul", Severity.WARNING),
        ("MPC102", "returns-upcast", Severity.WARNING),
    ]
}


def make_ctx(sources: dict[str, list[str]] | None = None, root: Path = ROOT) -> ReportContext:
    files = {MODEL: MODEL_SOURCE} if sources is None else sources
    return ReportContext(
        root=root,
        rules=RULES,
        source_lines=lambda filename: files.get(filename, []),
        tool_version="1.2.3",
    )


def diag(row: int, severity: Severity = Severity.ERROR, **changes: Any) -> Diagnostic:
    base = Diagnostic("MPC101", "n", f"finding {row}", severity, MODEL, P(row, 1), P(row, 2))
    return replace(base, **changes)


@pytest.fixture(autouse=True)
def outside_github_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``github`` format reads $GITHUB_WORKSPACE; a CI runner's own must not leak in."""
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)


# --- registry and cross-format behaviour -------------------------------------------------


def test_formats_registry() -> None:
    assert FORMATS == (
        "full",
        "concise",
        "json",
        "json-lines",
        "github",
        "sarif",
        "junit",
        "gitlab",
        "pylint",
        "grouped",
        "azure",
        "rdjson",
    )
    with pytest.raises(ValueError, match="unknown output format 'xml'.*full, concise"):
        render("xml", ALL, make_ctx())


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "sarif"])
def test_suppressed_findings_are_dropped(fmt: str) -> None:
    ctx = make_ctx()
    assert render(fmt, [SILENCED], ctx) == render(fmt, [], ctx)
    assert "scores" not in render(fmt, [UPCAST, SILENCED], ctx)


@pytest.mark.parametrize("fmt", FORMATS)
def test_output_ends_with_one_newline(fmt: str) -> None:
    text = render(fmt, ALL, make_ctx())
    assert text.endswith("\n")
    assert not text.endswith("\n\n")
    empty = render(fmt, [], make_ctx())
    assert empty == "" or (empty.endswith("\n") and not empty.endswith("\n\n"))


@pytest.mark.parametrize("fmt", ["full", "concise", "json-lines", "github", "pylint", "grouped"])
def test_clean_run_prints_nothing(fmt: str) -> None:
    assert render(fmt, [], make_ctx()) == ""


# --- full ---------------------------------------------------------------------------------

FULL = """\
pkg/model.py:8:16: MPC101 [*] error: `h` is float32 but `self.proj` runs in half
  |
6 |         h = self.norm(x).float()
7 |         h = h * torch.rsqrt(h.pow(2).mean(-1) + 1e-6)
8 |         return self.proj(h)
  |                ^^^^^^^^^^^^ MPC101
  |
  = note: pkg/model.py:6:13: `h` was upcast to float32 here
  = help: Cast `h` to `self.proj.weight.dtype`

pkg/model.py:12:14: MPC103 warning: 100% of `q`: upcast, then matmul, second line
   |
11 |   def attn(q, k):
12 |       scores = torch.matmul(
   |  ______________^
13 | |         q.float(),
14 | |         k.transpose(-1, -2),
15 | |     )
   | |_____^ MPC103
16 |       return scores  # noqa: MPC102
   |

train.py:1:8: MPC104 error: 50%: x, y
"""


def test_full_golden() -> None:
    assert render("full", ALL, make_ctx()) == FULL


def test_full_without_source_prints_header_and_notes() -> None:
    assert render("full", [UPCAST], make_ctx(sources={})) == (
        "pkg/model.py:8:16: MPC101 [*] error: `h` is float32 but `self.proj` runs in half\n"
        "  = note: pkg/model.py:6:13: `h` was upcast to float32 here\n"
        "  = help: Cast `h` to `self.proj.weight.dtype`\n"
    )


def test_full_range_from_line_start_and_long_range_elided() -> None:
    source = ["x = 1", "y = torch.cat(["] + [f"    t{i}," for i in range(9)] + ["])", "z = 2"]
    d = diag(2, start=P(2, 1), end=P(12, 3), message="long")
    assert render("full", [d], make_ctx({MODEL: source})) == (
        "pkg/model.py:2:1: MPC101 error: long\n"
        "   |\n"
        " 1 |   x = 1\n"
        " 2 | / y = torch.cat([\n"
        " 3 | |     t0,\n"
        " 4 | |     t1,\n"
        "...\n"
        "11 | |     t8,\n"
        "12 | | ])\n"
        "   | |__^ MPC101\n"
        "13 |   z = 2\n"
        "   |\n"
    )


def test_full_range_ending_at_column_one_ends_on_the_line_above() -> None:
    d = diag(8, start=P(8, 9), end=P(9, 1), message="stmt")
    assert render("full", [d], make_ctx()) == (
        "pkg/model.py:8:9: MPC101 error: stmt\n"
        "  |\n"
        "6 |         h = self.norm(x).float()\n"
        "7 |         h = h * torch.rsqrt(h.pow(2).mean(-1) + 1e-6)\n"
        "8 |         return self.proj(h)\n"
        "  |         ^^^^^^^^^^^^^^^^^^^ MPC101\n"
        "  |\n"
    )


def test_full_carets_align_under_tabs_and_wide_characters() -> None:
    d = diag(1, start=P(1, 6), end=P(1, 15), message="wide")
    assert render("full", [d], make_ctx({MODEL: ["\t名 = h.float()"]})) == (
        "pkg/model.py:1:6: MPC101 error: wide\n"
        "  |\n"
        "1 |     名 = h.float()\n"
        "  |          ^^^^^^^^^ MPC101\n"
        "  |\n"
    )


# --- line formats -------------------------------------------------------------------------


def test_concise_golden() -> None:
    assert render("concise", ALL, make_ctx()) == (
        "pkg/model.py:8:16: MPC101 [*] error: `h` is float32 but `self.proj` runs in half\n"
        "pkg/model.py:12:14: MPC103 warning: 100% of `q`: upcast, then matmul, second line\n"
        "train.py:1:8: MPC104 error: 50%: x, y\n"
    )


def test_paths_outside_root_stay_absolute() -> None:
    outside = replace(LOSS, filename="/elsewhere/util.py")
    assert (
        render("concise", [outside], make_ctx())
        == "/elsewhere/util.py:1:8: MPC104 error: 50%: x, y\n"
    )


def test_pylint_golden() -> None:
    assert render("pylint", ALL, make_ctx()) == (
        "pkg/model.py:8: [MPC101] `h` is float32 but `self.proj` runs in half\n"
        "pkg/model.py:12: [MPC103] 100% of `q`: upcast, then matmul, second line\n"
        "train.py:1: [MPC104] 50%: x, y\n"
    )


def test_grouped_golden() -> None:
    assert render("grouped", ALL, make_ctx()) == (
        "pkg/model.py:\n"
        "   8:16 MPC101 [*] `h` is float32 but `self.proj` runs in half\n"
        "  12:14 MPC103 100% of `q`: upcast, then matmul, second line\n"
        "\n"
        "train.py:\n"
        "  1:8 MPC104 50%: x, y\n"
    )


def test_azure_golden() -> None:
    odd = replace(LOSS, filename="/repo/a;b].py", message="x]; 5%\r\ny")
    assert render("azure", [UPCAST, MATMUL, odd], make_ctx()) == (
        "##vso[task.logissue type=error;sourcepath=/repo/pkg/model.py;linenumber=8;"
        "columnnumber=16;code=MPC101;]`h` is float32 but `self.proj` runs in half\n"
        "##vso[task.logissue type=warning;sourcepath=/repo/pkg/model.py;linenumber=12;"
        "columnnumber=14;code=MPC103;]100%AZP25 of `q`: upcast, then matmul,%0Asecond line\n"
        "##vso[task.logissue type=error;sourcepath=/repo/a%3Bb%5D.py;linenumber=1;"
        "columnnumber=8;code=MPC104;]x]; 5%AZP25%0D%0Ay\n"
    )


# --- github -------------------------------------------------------------------------------


def test_github_golden() -> None:
    assert render("github", ALL, make_ctx()) == (
        "::error title=mpcheck (MPC101),file=pkg/model.py,line=8,col=16,endLine=8,endColumn=28"
        "::pkg/model.py:8:16: MPC101 `h` is float32 but `self.proj` runs in half\n"
        # Lines 12-15: the runner rejects columns unless line == endLine, so the annotation
        # covers line 12 from column 14 to its end ("    scores = torch.matmul(").
        "::warning title=mpcheck (MPC103),file=pkg/model.py,line=12,col=14,endLine=12,"
        "endColumn=27::pkg/model.py:12:14: MPC103 100%25 of `q`: upcast, then matmul,%0Asecond"
        " line\n"
        "::error title=mpcheck (MPC104),file=train.py,line=1,col=8,endLine=1,endColumn=16"
        "::train.py:1:8: MPC104 50%25: x, y\n"
    )


def test_github_escapes_property_values() -> None:
    odd = replace(LOSS, filename="/repo/dir,x/a:b%c.py", message="a\r\nb: 1%, 2")
    assert render("github", [odd], make_ctx()) == (
        "::error title=mpcheck (MPC104),file=dir%2Cx/a%3Ab%25c.py,line=1,col=8,endLine=1,"
        "endColumn=16::dir,x/a:b%25c.py:1:8: MPC104 a%0D%0Ab: 1%25, 2\n"
    )


def test_github_multi_line_ranges_stay_on_their_first_line() -> None:
    """'col' and 'endColumn' cannot be set if 'line' and 'endLine' are different values."""
    source = {MODEL: ["x = f(", "    a,", ")"]}
    call = diag(1, start=P(1, 5), end=P(3, 2))
    assert "line=1,col=5,endLine=1,endColumn=7::" in render("github", [call], make_ctx(source))
    # Without the source (stdin, an unreadable file) the range shrinks to its start.
    assert "line=1,col=5,endLine=1,endColumn=5::" in render("github", [call], make_ctx({}))
    # An exclusive end at column 1 of the next line, or a zero-width range, stay valid.
    ends = [diag(1, start=P(1, 5), end=P(2, 1)), diag(2, start=P(2, 3), end=P(2, 3))]
    lines = render("github", ends, make_ctx(source)).splitlines()
    assert "line=1,col=5,endLine=1,endColumn=7::" in lines[0]
    assert "line=2,col=3,endLine=2,endColumn=3::" in lines[1]


def test_github_file_is_relative_to_the_workspace(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner resolves ``file`` against $GITHUB_WORKSPACE, not the working directory."""
    sub = make_ctx(root=ROOT / "pkg")  # e.g. a step with `working-directory: pkg`
    monkeypatch.setenv("GITHUB_WORKSPACE", str(ROOT))
    text = render("github", [UPCAST], sub)
    assert ",file=pkg/model.py," in text
    assert "::model.py:8:16: MPC101 " in text  # the log line stays relative to the cwd
    outside = replace(UPCAST, filename="/elsewhere/model.py")
    assert ",file=/elsewhere/model.py," in render("github", [outside], sub)
    monkeypatch.setenv("GITHUB_WORKSPACE", "")
    assert ",file=model.py," in render("github", [UPCAST], sub)


def _rows(lines: Sequence[str]) -> list[int]:
    return [int(line.split(",line=")[1].split(",")[0]) for line in lines]


def test_github_annotates_the_most_severe_first_and_lists_everything() -> None:
    warnings_at = {2, 5, 15, 25}
    diagnostics = [
        diag(row, Severity.WARNING if row in warnings_at else Severity.ERROR)
        for row in range(1, 29)
    ]
    lines = render("github", diagnostics, make_ctx()).splitlines()
    error_rows = [row for row in range(1, 29) if row not in warnings_at]
    # 10 errors, then every warning (fewer than 10): errors come first though a warning is
    # the second finding, so a job-wide cap would drop warnings before errors.
    assert [line.split(" ", 1)[0] for line in lines[:14]] == ["::error"] * 10 + ["::warning"] * 4
    assert _rows(lines[:10]) == error_rows[:10]
    assert _rows(lines[10:14]) == sorted(warnings_at)
    # Then the full list as plain lines, in input order, annotated or not.
    level = {row: "warning" if row in warnings_at else "error" for row in range(1, 29)}
    assert lines[14:-1] == [
        f"pkg/model.py:{row}:1: MPC101 {level[row]}: finding {row}" for row in range(1, 29)
    ]
    assert lines[-1] == (
        "::notice::14 of 28 findings were not annotated (GitHub shows at most 10 annotations "
        "per level in a step); all 28 are listed in the log above"
    )
    assert len(lines) == 14 + 28 + 1


def test_github_caps_each_level_separately() -> None:
    diagnostics = [diag(row, Severity.WARNING) for row in range(1, 13)] + [diag(13)]
    lines = render("github", diagnostics, make_ctx()).splitlines()
    assert lines[0].startswith("::error ") and _rows(lines[:1]) == [13]
    assert all(line.startswith("::warning ") for line in lines[1:11])
    assert _rows(lines[1:11]) == list(range(1, 11))
    assert lines[-1].startswith("::notice::2 of 13 findings were not annotated")


def test_github_every_severity_has_a_level() -> None:
    from mpcheck.output.reporters.github import LEVELS

    assert set(LEVELS) == set(Severity)
    assert set(LEVELS.values()) <= {"error", "warning", "notice"}


def test_github_no_notice_at_exactly_ten_per_level() -> None:
    diagnostics = [diag(row) for row in range(1, 11)]
    diagnostics += [diag(row, Severity.WARNING) for row in range(11, 21)]
    text = render("github", sorted(diagnostics, key=lambda d: -d.start.row), make_ctx())
    assert text.count("::error ") == 10 and text.count("::warning ") == 10
    assert "::notice::" not in text
    # Without overflow the input order is kept (the log reads top to bottom).
    assert _rows(text.splitlines()) == list(range(20, 0, -1))


def test_github_notice_singular() -> None:
    lines = render("github", [diag(row) for row in range(1, 12)], make_ctx()).splitlines()
    assert lines[-2] == "pkg/model.py:11:1: MPC101 error: finding 11"
    assert lines[-1].startswith("::notice::1 of 11 findings was not annotated")


# --- json ---------------------------------------------------------------------------------

UPCAST_JSON = {
    "cell": None,
    "code": "MPC101",
    "name": "upcast-reaches-half-op",
    "message": "`h` is float32 but `self.proj` runs in half",
    "filename": "/repo/pkg/model.py",
    "location": {"row": 8, "column": 16},
    "end_location": {"row": 8, "column": 28},
    "fix": {
        "applicability": "safe",
        "message": "Cast `h` to `self.proj.weight.dtype`",
        "edits": [
            {
                "content": "h.to(self.proj.weight.dtype)",
                "location": {"row": 8, "column": 26},
                "end_location": {"row": 8, "column": 27},
            }
        ],
    },
    "noqa_row": 8,
    "url": "https://github.com/mpcheck/mpcheck/blob/main/docs/rules/MPC101.md",
    "severity": "error",
    "related": [
        {
            "message": "`h` was upcast to float32 here",
            "location": {"row": 6, "column": 13},
            "end_location": {"row": 6, "column": 33},
        }
    ],
}


def test_json() -> None:
    text = render("json", ALL, make_ctx())
    assert text.startswith('[\n  {\n    "cell": null,\n    "code": "MPC101",')  # indent 2, sorted
    data = json.loads(text)
    assert [d["code"] for d in data] == ["MPC101", "MPC103", "MPC104"]
    assert data[0] == UPCAST_JSON
    assert data[1]["fix"] is None
    assert data[1]["related"] == []
    assert data[1]["severity"] == "warning"
    assert data[1]["message"] == "100% of `q`: upcast, then matmul,\nsecond line"
    assert data[1]["end_location"] == {"row": 15, "column": 6}
    assert data[2]["filename"] == "/repo/train.py"
    assert render("json", [], make_ctx()) == "[]\n"


def test_json_lines() -> None:
    lines = render("json-lines", ALL, make_ctx()).splitlines()
    assert len(lines) == 3
    assert all(": " not in line.split('"message"')[0] for line in lines)  # compact
    assert json.loads(lines[0]) == UPCAST_JSON
    assert [json.loads(line)["location"] for line in lines] == [
        {"row": 8, "column": 16},
        {"row": 12, "column": 14},
        {"row": 1, "column": 8},
    ]


# --- sarif --------------------------------------------------------------------------------


def sarif(diagnostics: Sequence[Diagnostic], ctx: ReportContext | None = None) -> Any:
    """Render SARIF and validate it against the official 2.1.0 schema."""
    log = json.loads(render("sarif", diagnostics, ctx or make_ctx()))
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    validator_class = jsonschema.validators.validator_for(schema)
    assert validator_class is jsonschema.Draft4Validator  # the schema declares draft-04
    validator_class.check_schema(schema)
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(log)]
    assert errors == []
    return log


def test_sarif_validates_and_describes_the_run() -> None:
    log = sarif(ALL)
    assert log["version"] == "2.1.0"
    assert log["$schema"].endswith("sarif-schema-2.1.0.json")
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "mpcheck"
    assert driver["version"] == "1.2.3"
    assert driver["informationUri"] == "https://github.com/mpcheck/mpcheck"
    assert [rule["id"] for rule in driver["rules"]] == ["MPC101", "MPC102", "MPC103", "MPC104"]
    assert driver["rules"][2] == {
        "id": "MPC103",
        "name": "upcast-matmul",
        "shortDescription": {"text": "Summary of MPC103."},
        "fullDescription": {"text": "Summary of MPC103."},
        "help": {
            "text": "Summary of MPC103. "
            "See https://github.com/mpcheck/mpcheck/blob/main/docs/rules/MPC103.md",
            "markdown": "# MPC103\n\nDocs of *MPC103*.",
        },
        "helpUri": "https://github.com/mpcheck/mpcheck/blob/main/docs/rules/MPC103.md",
        "defaultConfiguration": {"level": "warning"},
    }
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": "file:///repo/"}}
    assert run["columnKind"] == "unicodeCodePoints"


def test_sarif_results() -> None:
    results = sarif(ALL)["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["MPC101", "MPC103", "MPC102", "MPC104"]
    assert [r["ruleIndex"] for r in results] == [0, 2, 1, 3]
    assert [r["level"] for r in results] == ["error", "warning", "warning", "error"]
    upcast, matmul, silenced, loss = results
    artifact = {"uri": "pkg/model.py", "uriBaseId": "%SRCROOT%"}
    # Code scanning shows a related location only when the message links to it.
    assert upcast["message"] == {
        "text": "`h` is float32 but `self.proj` runs in half\n"
        "See [`h` was upcast to float32 here](1)."
    }
    assert matmul["message"] == {"text": "100% of `q`: upcast, then matmul,\nsecond line"}
    assert upcast["locations"] == [
        {
            "physicalLocation": {
                "artifactLocation": artifact,
                "region": {"startLine": 8, "startColumn": 16, "endLine": 8, "endColumn": 28},
            }
        }
    ]
    assert upcast["relatedLocations"] == [
        {
            "id": 1,
            "message": {"text": "`h` was upcast to float32 here"},
            "physicalLocation": {
                "artifactLocation": artifact,
                "region": {"startLine": 6, "startColumn": 13, "endLine": 6, "endColumn": 33},
            },
        }
    ]
    replacement = upcast["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert replacement["insertedContent"] == {"text": "h.to(self.proj.weight.dtype)"}
    assert matmul["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 12,
        "startColumn": 14,
        "endLine": 15,
        "endColumn": 6,
    }
    assert "relatedLocations" not in matmul and "fixes" not in matmul
    assert silenced["suppressions"] == [{"kind": "inSource"}]
    assert all("suppressions" not in r for r in (upcast, matmul, loss))
    assert loss["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "train.py",
        "uriBaseId": "%SRCROOT%",
    }
    prints = [r["partialFingerprints"]["mpcheck/v1"] for r in results]
    assert len(set(prints)) == 4
    assert all(len(p) == 64 and int(p, 16) >= 0 for p in prints)


def test_sarif_paths_outside_root_unknown_rules_and_quoting() -> None:
    outside = replace(LOSS, filename="/elsewhere/my util.py")
    spaced = replace(LOSS, filename="/repo/my dir/a#1.py", code="MPC999")
    results = sarif([outside, spaced])["runs"][0]["results"]
    location = results[0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "file:///elsewhere/my%20util.py"}
    assert results[0]["ruleIndex"] == 3
    assert results[1]["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "my%20dir/a%231.py",
        "uriBaseId": "%SRCROOT%",
    }
    assert "ruleIndex" not in results[1]


def test_sarif_deletion_fix_has_no_inserted_content() -> None:
    fix = Fix("Remove it", (Edit("", P(8, 16), P(8, 28)),))
    results = sarif([replace(LOSS, fix=fix)])["runs"][0]["results"]
    (replacement,) = results[0]["fixes"][0]["artifactChanges"][0]["replacements"]
    assert replacement == {
        "deletedRegion": {"startLine": 8, "startColumn": 16, "endLine": 8, "endColumn": 28}
    }


def test_sarif_message_links_escape_literal_brackets() -> None:
    """With embedded links, literal ``[``, ``]`` and ``\\`` are escaped (SARIF 3.11.6)."""
    related = (
        Related("`x[0]` made float32", P(1, 1), P(1, 5)),
        Related("cached in `c\\d`", P(2, 1), P(2, 5)),
    )
    d = replace(LOSS, message="`x[:, 0]` [fp32] meets half", related=related)
    (result,) = sarif([d])["runs"][0]["results"]
    assert result["message"]["text"] == (
        "`x\\[:, 0\\]` \\[fp32\\] meets half\n"
        "See [`x\\[0\\]` made float32](1); [cached in `c\\\\d`](2)."
    )
    assert [r["id"] for r in result["relatedLocations"]] == [1, 2]
    # Each location's own message has no links, so it stays as written.
    assert result["relatedLocations"][0]["message"]["text"] == "`x[0]` made float32"
    # Read back the way a SARIF viewer does: every link names a related location's id.
    text = result["message"]["text"]
    links = re.findall(r"(?<!\\)\[((?:\\.|[^\\\]])*)\]\((\d+)\)", text)

    def unescape(t: str) -> str:
        return re.sub(r"\\(.)", r"\1", t)

    assert [(unescape(t), int(i)) for t, i in links] == [
        (r.message, i + 1) for i, r in enumerate(related)
    ]


def test_sarif_empty_run_is_valid() -> None:
    log = sarif([])
    assert log["runs"][0]["results"] == []


def _prints(diagnostics: Sequence[Diagnostic], source: list[str]) -> list[str]:
    results = sarif(diagnostics, make_ctx({MODEL: source}))["runs"][0]["results"]
    return [r["partialFingerprints"]["mpcheck/v1"] for r in results]


def test_sarif_fingerprints_survive_lines_shifting() -> None:
    diagnostics = [UPCAST, MATMUL, SILENCED]
    before = _prints(diagnostics, MODEL_SOURCE)
    shift = 3
    shifted_source = ["# header", "import os", ""] + MODEL_SOURCE
    shifted = [
        replace(
            d,
            start=P(d.start.row + shift, d.start.column),
            end=P(d.end.row + shift, d.end.column),
        )
        for d in diagnostics
    ]
    assert _prints(shifted, shifted_source) == before
    # Editing the reported line itself is a different finding.
    edited = list(MODEL_SOURCE)
    edited[7] = "        return self.out(h)"
    after_edit = _prints(diagnostics, edited)
    assert after_edit[0] != before[0]
    assert after_edit[1:] == before[1:]


def test_sarif_fingerprints_distinguish_identical_lines() -> None:
    source = ["y = x.float() @ w", "y = x.float() @ w"]
    first, second = diag(1), diag(2)
    prints = _prints([first, second], source)
    assert prints[0] != prints[1]
    # Deleting the first copy makes the second one take over the first's identity.
    assert _prints([replace(second, start=P(1, 1), end=P(1, 2))], source[1:]) == prints[:1]


# --- junit --------------------------------------------------------------------------------


def test_junit() -> None:
    text = render("junit", ALL, make_ctx())
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites')
    root = ET.fromstring(text)
    assert root.tag == "testsuites"
    assert root.attrib == {
        "name": "mpcheck",
        "tests": "3",
        "failures": "3",
        "errors": "0",
        "skipped": "0",
    }
    (suite,) = root
    assert suite.tag == "testsuite" and suite.get("name") == "mpcheck"
    assert suite.get("tests") == "3" and suite.get("failures") == "3"
    cases = suite.findall("testcase")
    assert [c.attrib for c in cases] == [
        {
            "name": "mpcheck.MPC101 pkg/model.py:8:16",
            "classname": "pkg/model",
            "file": "pkg/model.py",
            "line": "8",
            "column": "16",
        },
        {
            "name": "mpcheck.MPC103 pkg/model.py:12:14",
            "classname": "pkg/model",
            "file": "pkg/model.py",
            "line": "12",
            "column": "14",
        },
        {
            "name": "mpcheck.MPC104 train.py:1:8",
            "classname": "train",
            "file": "train.py",
            "line": "1",
            "column": "8",
        },
    ]
    failures = [c.find("failure") for c in cases]
    assert [(f.get("type"), f.get("message")) for f in failures if f is not None] == [
        ("MPC101", "`h` is float32 but `self.proj` runs in half"),
        ("MPC103", "100% of `q`: upcast, then matmul,\nsecond line"),
        ("MPC104", "50%: x, y"),
    ]
    assert failures[0] is not None and failures[0].text == (
        "line 8, col 16, `h` is float32 but `self.proj` runs in half\n"
        "note: pkg/model.py:6:13: `h` was upcast to float32 here\n"
        "help: Cast `h` to `self.proj.weight.dtype`"
    )
    severity = cases[1].find("properties/property[@name='severity']")
    assert severity is not None and severity.get("value") == "warning"


def test_junit_case_names_are_unique() -> None:
    twin = replace(LOSS, message="the other finding at the same place")
    in_cell = replace(LOSS, filename="/repo/nb.ipynb", cell=3)
    root = ET.fromstring(render("junit", [LOSS, twin, in_cell, UPCAST], make_ctx()))
    names = [c.get("name") for c in root.iter("testcase")]
    assert names == [
        "mpcheck.MPC104 train.py:1:8",
        "mpcheck.MPC104 train.py:1:8 (2)",
        "mpcheck.MPC104 nb.ipynb:cell 3:1:8",
        "mpcheck.MPC101 pkg/model.py:8:16",
    ]


def test_sarif_full_description_is_one_sentence() -> None:
    from mpcheck.output.reporters.sarif import first_sentence
    from mpcheck.ruleset.rule import all_rules

    assert first_sentence("One, e.g. this. Two.") == "One, e.g. this."
    assert first_sentence("A `x.float()` call\n  wraps. `b` too.") == "A `x.float()` call wraps."
    for rule in all_rules():
        full = first_sentence(rule.summary)
        assert full.endswith(".") and "\n" not in full, rule.code
        assert full.count(". ") == 0 or "e.g. " in full, (rule.code, full)


def test_junit_empty_and_unrepresentable_characters() -> None:
    root = ET.fromstring(render("junit", [], make_ctx()))
    assert root.get("tests") == "1" and root.get("failures") == "0"
    (case,) = root.iter("testcase")
    assert case.attrib == {"name": "No errors found", "classname": "mpcheck"}
    assert case.find("failure") is None

    weird = replace(LOSS, message='<&"\x00\x1b> ok')
    failure = ET.fromstring(render("junit", [weird], make_ctx())).find(".//failure")
    assert failure is not None
    assert failure.get("message") == '<&"\ufffd\ufffd> ok'


# --- gitlab -------------------------------------------------------------------------------


def test_gitlab() -> None:
    issues = json.loads(render("gitlab", ALL, make_ctx()))
    sarif_prints = [
        r["partialFingerprints"]["mpcheck/v1"] for r in sarif(ALL)["runs"][0]["results"]
    ]
    assert issues == [
        {
            "description": "MPC101: `h` is float32 but `self.proj` runs in half",
            "check_name": "MPC101",
            "fingerprint": sarif_prints[0],
            "severity": "major",
            "location": {"path": "pkg/model.py", "lines": {"begin": 8, "end": 8}},
        },
        {
            "description": "MPC103: 100% of `q`: upcast, then matmul,\nsecond line",
            "check_name": "MPC103",
            "fingerprint": sarif_prints[1],
            "severity": "minor",
            "location": {"path": "pkg/model.py", "lines": {"begin": 12, "end": 15}},
        },
        {
            "description": "MPC104: 50%: x, y",
            "check_name": "MPC104",
            "fingerprint": sarif_prints[3],
            "severity": "major",
            "location": {"path": "train.py", "lines": {"begin": 1, "end": 1}},
        },
    ]
    assert render("gitlab", [], make_ctx()) == "[]\n"


# --- rdjson -------------------------------------------------------------------------------


def test_rdjson() -> None:
    doc = json.loads(render("rdjson", ALL, make_ctx()))
    assert doc["source"] == {"name": "mpcheck", "url": "https://github.com/mpcheck/mpcheck"}
    upcast, matmul, loss = doc["diagnostics"]
    span = {"start": {"line": 8, "column": 16}, "end": {"line": 8, "column": 28}}
    assert upcast == {
        "message": "`h` is float32 but `self.proj` runs in half",
        "location": {"path": "pkg/model.py", "range": span},
        "severity": "ERROR",
        "code": {
            "value": "MPC101",
            "url": "https://github.com/mpcheck/mpcheck/blob/main/docs/rules/MPC101.md",
        },
        "suggestions": [
            {
                "range": {"start": {"line": 8, "column": 26}, "end": {"line": 8, "column": 27}},
                "text": "h.to(self.proj.weight.dtype)",
            }
        ],
        "related_locations": [
            {
                "message": "`h` was upcast to float32 here",
                "location": {
                    "path": "pkg/model.py",
                    "range": {
                        "start": {"line": 6, "column": 13},
                        "end": {"line": 6, "column": 33},
                    },
                },
            }
        ],
    }
    assert matmul["severity"] == "WARNING"
    assert "suggestions" not in matmul and "related_locations" not in matmul
    assert loss["location"]["path"] == "train.py"
    assert json.loads(render("rdjson", [], make_ctx()))["diagnostics"] == []


def test_rdjson_offers_only_safe_fixes_as_suggestions() -> None:
    assert UPCAST.fix is not None
    unsafe = replace(UPCAST, fix=replace(UPCAST.fix, applicability="unsafe"))
    (entry,) = json.loads(render("rdjson", [unsafe], make_ctx()))["diagnostics"]
    assert "suggestions" not in entry
    assert entry["related_locations"]  # the rest of the finding is unchanged


def test_rdjson_columns_are_utf8_bytes() -> None:
    # 'é' is 2 bytes and '𐐀' 4 bytes in UTF-8: `h` (character column 12) is byte column 16.
    source = ["x = 'é𐐀' + h.float()"]
    d = diag(1, start=P(1, 12), end=P(1, 21))
    (entry,) = json.loads(render("rdjson", [d], make_ctx({MODEL: source})))["diagnostics"]
    assert entry["location"]["range"] == {
        "start": {"line": 1, "column": 16},
        "end": {"line": 1, "column": 25},
    }


# --- paths --------------------------------------------------------------------------------


def test_relative_root_is_taken_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    d = replace(LOSS, filename=str(tmp_path / "src" / "train.py"))
    ctx = make_ctx(root=Path("."))
    assert render("concise", [d], ctx) == "src/train.py:1:8: MPC104 error: 50%: x, y\n"
    run = sarif([d], ctx)["runs"][0]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"
    assert run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "src/train.py",
        "uriBaseId": "%SRCROOT%",
    }


def test_stdin_is_shown_as_dash() -> None:
    d = replace(LOSS, filename="-")
    ctx = make_ctx({"-": ["loss = model(x).half()"]})
    assert render("concise", [d], ctx) == "-:1:8: MPC104 error: 50%: x, y\n"
    assert render("full", [d], ctx) == (
        "-:1:8: MPC104 error: 50%: x, y\n"
        "  |\n"
        "1 | loss = model(x).half()\n"
        "  |        ^^^^^^^^ MPC104\n"
        "  |\n"
    )
    artifact = sarif([d], ctx)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert artifact["artifactLocation"] == {"uri": "-"}


def test_fix_marker_only_for_safe_fixes() -> None:
    """Like ruff, `[*]` promises that `--fix` alone applies the fix."""
    assert UPCAST.fix is not None
    unsafe = replace(UPCAST, fix=replace(UPCAST.fix, applicability="unsafe"))
    out = render("concise", [unsafe], make_ctx())
    assert "MPC101 error: `h`" in out and "[*]" not in out
