"""Properties of ``--fix`` over generated files: exact bytes, valid code, idempotent.

Files are built from lines of odd but legal content (form feeds, ``\\x85``, U+2028, non-ASCII
text in strings and comments), each with its own line ending, an optional BOM and an
optional final newline, with MPC404 findings sprinkled in. The expected output is built
alongside, so the test knows every byte the fix may change. The seed is fixed (derandomised)
and the example count bounded (``tests/robustness/budget.py``: the full count under CI, a fifth
in the fast loop), so CI is deterministic; ``bench/fuzz.py`` runs the same properties for as
long as it is given.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mpcheck.files.source import SourceFile
from mpcheck.output.fixes import apply_fixes
from mpcheck.pipeline.one_file import check_source
from mpcheck.ruleset.rule import rules_by_code
from tests.robustness.budget import examples

RULES = (rules_by_code()["MPC404"],)
ODD = ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "é", "\u00a0", "\t"]
FIXABLE = [
    ("scaler = torch.cuda.amp.GradScaler()", 'scaler = torch.amp.GradScaler("cuda")'),
    ("with torch.cuda.amp.autocast():", 'with torch.amp.autocast("cuda"):'),
]

odd_text = st.text(st.sampled_from(ODD + list("ab #'")), max_size=12).map(
    lambda s: s.replace("'", "")
)
filler = st.one_of(
    odd_text.map(lambda s: f"s = '{s}'"),
    odd_text.map(lambda s: f"# {s}"),
    odd_text.map(lambda s: f"x = 1  # {s}"),
    st.just(""),
    st.just("y = [1,\\"),  # a continuation line, closed by the next filler
)


@st.composite
def programs(draw: st.DrawFn) -> tuple[bytes, bytes, int]:
    """(file, the file with every fix applied, how many fixes)."""
    lines: list[tuple[str, str]] = [("import torch", "import torch")]
    fixes = 0
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.booleans()):
            old, new = draw(st.sampled_from(FIXABLE))
            body = draw(st.sampled_from(["    pass", "    x = 2"]))
            lines.append((old, new))
            fixes += 1
            if old.startswith("with"):
                lines.append((body, body))
        else:
            line = draw(filler)
            lines.append((line, line))
            if line.endswith("\\"):
                lines.append(("2]", "2]"))
    eols = [draw(st.sampled_from(["\n", "\r\n", "\r"])) for _ in lines]
    if not draw(st.booleans()):
        eols[-1] = ""
    bom = b"\xef\xbb\xbf" if draw(st.booleans()) else b""
    before = bom + "".join(o + e for (o, _), e in zip(lines, eols, strict=True)).encode()
    after = bom + "".join(n + e for (_, n), e in zip(lines, eols, strict=True)).encode()
    return before, after, fixes


def fixed(data: bytes) -> tuple[bytes, int]:
    source = SourceFile.decode(data)
    text, count = apply_fixes(source, check_source(data, "f.py", RULES), unsafe=True)
    return source.encode(text), count


def fix_is_exact(case: tuple[bytes, bytes, int]) -> None:
    """The property: the output is the expected bytes, compiles, and has nothing left to fix."""
    before, after, fixes = case
    compile(before, "f.py", "exec")
    out, count = fixed(before)
    assert (out, count) == (after, fixes)
    compile(out, "f.py", "exec")
    assert fixed(out) == (out, 0)  # idempotent: nothing left to fix


@settings(derandomize=True, max_examples=examples(150), deadline=None)
@given(programs())
def test_fix_changes_exactly_the_edits(case: tuple[bytes, bytes, int]) -> None:
    fix_is_exact(case)
