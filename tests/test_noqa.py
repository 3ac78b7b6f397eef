"""noqa comments: parsing, logical lines, file-level exemption, unused reporting (output.noqa)."""

from __future__ import annotations

import textwrap

import pytest

from mpcheck.diagnostics import Diagnostic, Position, Severity
from mpcheck.output.noqa import (
    FileSuppressions,
    NoqaComment,
    apply,
    might_have_noqa,
    noqa_row_for,
    scan,
)

FILE = "pkg/model.py"


def diag(row: int, col: int = 1, code: str = "MPC101") -> Diagnostic:
    return Diagnostic(
        code=code,
        name="some-rule",
        message="m",
        severity=Severity.ERROR,
        filename=FILE,
        start=Position(row, col),
        end=Position(row, col + 3),
        noqa_row=row,
    )


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def shown(result: list[Diagnostic]) -> list[tuple[str, int]]:
    return [(d.code, d.start.row) for d in result if not d.suppressed]


# -- parsing --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "start", "end", "codes"),
    [
        ("x = 1  # noqa", 8, 14, None),
        ("x = 1  # noqa: MPC101, MPC103", 8, 30, ("MPC101", "MPC103")),
        ("x = 1  # noqa:MPC101,MPC103", 8, 28, ("MPC101", "MPC103")),
        ("x = 1  #noqa : MPC101", 8, 22, ("MPC101",)),
        ("x = 1  # NOQA: mpc101 E501", 8, 27, ("MPC101", "E501")),
        ("x = 1  # noqa: MPC101 because of reasons", 8, 22, ("MPC101",)),
        ("x = 1  # noqa: MPC101, ", 8, 22, ("MPC101",)),
        ("x = 1  # type: ignore  # noqa: MPC101", 24, 38, ("MPC101",)),
        ("x = 1  # noqa: because", 8, 14, None),  # no codes after the colon: blanket (flake8)
        ("x = 1  # noqa:MPC101,MPC101", 8, 28, ("MPC101",)),
        ("# noqa: MPC101", 1, 15, ("MPC101",)),
    ],
)
def test_inline_forms(line: str, start: int, end: int, codes: tuple[str, ...] | None) -> None:
    sup = scan(line + "\n")
    assert sup.comments == (NoqaComment(row=1, start_col=start, end_col=end, codes=codes),)
    assert line[start - 1 : end - 1].lstrip("# ").lower().startswith("noqa")


@pytest.mark.parametrize(
    "line",
    [
        "x = 1  # noqanything",
        "x = 1  # noqa-ish",
        "x = 1  # mpcheck: noqa",  # a file-level directive must be on its own line
        "x = 1  # no qa",
        's = "# noqa"',
        "s = '''# noqa: MPC101'''",
        "f = f'{x}  # noqa'",
    ],
)
def test_not_inline_noqa(line: str) -> None:
    sup = scan(line + "\n")
    assert sup.comments == ()
    assert not sup.file_exempt and sup.file_codes == frozenset()


def test_noqa_inside_multiline_string_is_not_a_noqa() -> None:
    source = src(
        '''
        doc = """
        x = 1  # noqa
        # mpcheck: noqa
        """
        y = 2
        '''
    )
    sup = scan(source)
    assert sup.comments == ()
    assert sup.file_exempt is False
    assert sup.logical_lines == ((1, 4),)
    assert shown(apply([diag(2), diag(5)], sup, unused_noqa=True)) == [
        ("MPC101", 2),
        ("MPC101", 5),
    ]


def test_might_have_noqa() -> None:
    assert might_have_noqa("x = 1  # NoQA\n")
    assert might_have_noqa('s = "noqa"\n')  # cheap pre-check; scan decides
    assert not might_have_noqa("x = 1  # no qa\n")


# -- logical lines --------------------------------------------------------------------------------

MULTI = src(
    """
    import torch
    y = torch.matmul(  # A
        a,  # B
        b,
    )  # C
    z = 1 + \\
        2  # D
    w = 3
    """
)


def test_logical_lines() -> None:
    sup = scan(MULTI)
    assert sup.logical_lines == ((2, 5), (6, 7))
    assert [sup.logical_range(r) for r in range(1, 10)] == [
        (1, 1),
        (2, 5),
        (2, 5),
        (2, 5),
        (2, 5),
        (6, 7),
        (6, 7),
        (8, 8),
        (9, 9),
    ]
    assert [noqa_row_for(r, sup) for r in (1, 2, 3, 6, 8)] == [1, 5, 5, 7, 8]


@pytest.mark.parametrize("marker", ["# A", "# B", "# C"])
def test_noqa_on_any_line_of_a_bracketed_statement(marker: str) -> None:
    source = MULTI.replace(marker, "# noqa: MPC101")
    diags = [diag(2, 5), diag(3, 5), diag(5, 1), diag(8)]
    assert shown(apply(diags, scan(source), unused_noqa=True)) == [("MPC101", 8)]


@pytest.mark.parametrize("marker", ["# D"])
def test_noqa_on_last_line_of_backslash_continuation(marker: str) -> None:
    source = MULTI.replace(marker, "# noqa")
    diags = [diag(6, 5), diag(7, 5), diag(5)]
    assert shown(apply(diags, scan(source), unused_noqa=True)) == [("MPC101", 5)]


def test_noqa_after_multiline_string_covers_its_first_line() -> None:
    source = src(
        '''
        x = torch.ones(3).half() + """
        text
        """  # noqa: MPC101
        y = 1
        '''
    )
    result = apply([diag(1, 5), diag(4)], scan(source), unused_noqa=True)
    assert shown(result) == [("MPC101", 4)]


def test_comment_only_line_does_not_cover_the_next_statement() -> None:
    source = src(
        """
        # noqa: MPC101
        x = 1

        # noqa
        y = (
            2
        )
        """
    )
    sup = scan(source)
    assert sup.logical_lines == ((5, 7),)
    assert shown(apply([diag(2), diag(5), diag(6)], sup, unused_noqa=False)) == [
        ("MPC101", 2),
        ("MPC101", 5),
        ("MPC101", 6),
    ]


def test_compound_statement_header_is_its_own_line() -> None:
    source = src(
        """
        if x:  # noqa
            y = 1
        """
    )
    assert shown(apply([diag(1), diag(2)], scan(source), unused_noqa=False)) == [("MPC101", 2)]


# -- matching -------------------------------------------------------------------------------------


def test_codes_must_match_and_prefixes_count() -> None:
    source = src(
        """
        a = 1  # noqa: MPC102
        b = 1  # noqa: MPC1
        c = 1  # noqa: E501
        d = 1  # noqa
        e = 1
        """
    )
    diags = [diag(r) for r in range(1, 6)]
    result = apply(diags, scan(source), unused_noqa=False)
    assert shown(result) == [("MPC101", 1), ("MPC101", 3), ("MPC101", 5)]
    assert [d.suppressed for d in result] == [False, True, False, True, False]
    assert len(result) == 5


def test_apply_keeps_input_suppressed_and_sorts() -> None:
    already = diag(3).with_suppressed()
    result = apply([diag(2, 9), already, diag(2, 1)], scan("a\nb\nc\n"), unused_noqa=False)
    assert [(d.start.row, d.start.column, d.suppressed) for d in result] == [
        (2, 1, False),
        (2, 9, False),
        (3, 1, True),
    ]


# -- file-level directive -------------------------------------------------------------------------


def test_file_level_blanket_exemption() -> None:
    source = src(
        """
        import torch

        # mpcheck: noqa
        x = 1  # noqa: MPC103
        """
    )
    sup = scan(source)
    assert sup.file_exempt is True
    result = apply([diag(1), diag(4, code="MPC201")], sup, unused_noqa=True)
    assert [d.suppressed for d in result] == [True, True]
    assert len(result) == 2  # nothing reported as unused in an exempt file


@pytest.mark.parametrize(
    "line", ["#mpcheck:noqa", "# MPCHECK: NOQA", "    # mpcheck: noqa  (generated file)"]
)
def test_file_level_spellings(line: str) -> None:
    assert scan(f"x = 1\nif x:\n    pass\n{line}\n").file_exempt is True


def test_file_level_codes() -> None:
    source = src(
        """
        # mpcheck: noqa: MPC101, MPC2
        x = 1
        """
    )
    sup = scan(source)
    assert sup.file_exempt is False
    assert sup.file_codes == {"MPC101", "MPC2"}
    result = apply([diag(2), diag(2, code="MPC102"), diag(2, code="MPC201")], sup, unused_noqa=True)
    assert shown(result) == [("MPC102", 2)]


def test_file_level_directive_with_bad_codes_is_ignored() -> None:
    sup = scan("# mpcheck: noqa: because\nx = 1\n")
    assert sup.file_exempt is False and sup.file_codes == frozenset()


# -- unused noqa ----------------------------------------------------------------------------------


def test_unused_codes_reported_with_exact_position() -> None:
    source = src(
        """
        import torch
        y = x.float() @ w  # noqa: MPC101, MPC103, E501
        z = 1  # noqa: MPC102
        """
    )
    result = apply([diag(2, 5)], scan(source), unused_noqa=True, filename=FILE)
    assert [d.suppressed for d in result] == [True, False, False]
    first, second = result[1], result[2]
    assert first == Diagnostic(
        code="MPC100",
        name="unused-noqa",
        message="Unused `noqa` directive (unused: `MPC103`)",
        severity=Severity.WARNING,
        filename=FILE,
        start=Position(2, 20),
        end=Position(2, 48),
        noqa_row=2,
    )
    assert source.splitlines()[1][19:47] == "# noqa: MPC101, MPC103, E501"
    assert (second.message, second.start, second.end, second.noqa_row) == (
        "Unused `noqa` directive (unused: `MPC102`)",
        Position(3, 8),
        Position(3, 22),
        3,
    )


def test_unused_lists_every_unused_code_of_a_comment_in_order() -> None:
    result = apply([], scan("x = 1  # noqa: MPC201,MPC101 , MPC1\n"), unused_noqa=True)
    assert [d.message for d in result] == ["Unused `noqa` directive (unused: `MPC201`, `MPC101`)"]
    # With no diagnostics to copy it from, the filename must be given.
    assert result[0].filename == "-"
    named = apply([], scan("x = 1  # noqa: MPC201\n"), unused_noqa=True, filename="a.py")
    assert named[0].filename == "a.py"


def test_used_by_a_finding_on_another_line_of_the_statement() -> None:
    source = src(
        """
        y = f(  # noqa: MPC101
            a,  # noqa: MPC102
        )
        """
    )
    result = apply([diag(3, 5)], scan(source), unused_noqa=True)
    assert [(d.code, d.start.row, d.suppressed) for d in result] == [
        ("MPC100", 2, False),
        ("MPC101", 3, True),
    ]
    assert result[0].message == "Unused `noqa` directive (unused: `MPC102`)"


def test_blanket_and_foreign_codes_are_never_reported() -> None:
    source = "a = 1  # noqa\nb = 2  # noqa: E501, F401\n"
    assert apply([], scan(source), unused_noqa=True) == []


def test_unused_reporting_can_be_off() -> None:
    assert apply([], scan("a = 1  # noqa: MPC101\n"), unused_noqa=False) == []


def test_non_enabled_codes_are_reported_as_such() -> None:
    source = "a = 1  # noqa: MPC101, MPC2, MPC103\n"
    result = apply([], scan(source), unused_noqa=True, enabled_codes={"MPC100", "MPC101"})
    assert [d.message for d in result] == [
        "Unused `noqa` directive (unused: `MPC101`; non-enabled: `MPC2`, `MPC103`)"
    ]


def test_unused_noqa_report_can_itself_be_suppressed() -> None:
    result = apply([], scan("a = 1  # noqa: MPC100, MPC103\n"), unused_noqa=True)
    assert [(d.code, d.suppressed) for d in result] == [("MPC100", True)]
    file_level = "# mpcheck: noqa: MPC100\na = 1  # noqa: MPC103\n"
    result = apply([], scan(file_level), unused_noqa=True)
    assert [(d.code, d.suppressed) for d in result] == [("MPC100", True)]


# -- robustness -----------------------------------------------------------------------------------


def test_tokenize_errors_fall_back_to_physical_lines() -> None:
    source = src(
        """
        x = 1  # noqa: MPC101
        y = (  # noqa: MPC102
            2,
        # mpcheck: noqa: MPC2
        """
    )
    sup = scan(source)
    assert sup.logical_lines == ()
    assert sup.comments == (
        NoqaComment(1, 8, 22, ("MPC101",)),
        NoqaComment(2, 8, 22, ("MPC102",)),
    )
    assert sup.file_codes == {"MPC2"}
    result = apply([diag(1), diag(3, code="MPC102")], sup, unused_noqa=True)
    assert [(d.code, d.start.row, d.suppressed) for d in result] == [
        ("MPC101", 1, True),
        ("MPC100", 2, False),
        ("MPC102", 3, False),
    ]


def test_bad_indentation_falls_back_too() -> None:
    sup = scan("if x:\n        a = 1\n    b = 2  # noqa\n")
    assert sup.comments == (NoqaComment(3, 12, 18, None),)


def test_empty_and_crlf_sources() -> None:
    assert scan("") == FileSuppressions()
    sup = scan("x = (1,\r\n  2)  # noqa: MPC101\r\ny = 1\r\n")
    assert sup.comments == (NoqaComment(2, 7, 21, ("MPC101",)),)
    assert sup.logical_lines == ((1, 2),)
