"""The record pass's cheaper scans answer as the ones they replaced: line-anchored patterns
found by a literal part (:mod:`mpcheck.project.lines`) and bracket matching by a regex
(:mod:`mpcheck.project.brackets`), compared with the plain forms on generated code and on
every fixture of the repository."""

from __future__ import annotations

import random
import re
from pathlib import Path

from mpcheck.project import callers, construction, reach, records
from mpcheck.project.brackets import closing, enclosing, opening
from mpcheck.project.lines import headers, line_matches, narrowed

ROOT = Path(__file__).resolve().parent.parent
_PIECES = [
    b"\n", b"\n", b"    ", b"\t", b" ", b"def", b"class", b"async ", b"f", b"Model", b"x",
    b"(", b")", b"[", b"]", b"{", b"}", b",", b"=", b"==", b":", b".", b"import ", b"from ",
    b"a.b", b"\r", b"\x0c", b"_1",
]  # fmt: skip


def _generated(count: int, seed: int = 21) -> list[bytes]:
    rng = random.Random(seed)
    return [b"".join(rng.choices(_PIECES, k=rng.randrange(1, 160))) for _ in range(count)]


def _corpus() -> list[bytes]:
    files = sorted((ROOT / "fixtures").rglob("*.py"))[:400]
    return [records.blank(p.read_bytes()) for p in files] + _generated(3000)


def _spans(matches: object) -> list[tuple[tuple[int, int], ...]]:
    return [
        tuple(m.span(g) for g in range(m.re.groups + 1))
        for m in matches  # type: ignore[attr-defined]
    ]


def test_line_anchored_patterns_found_by_a_literal_match_as_finditer_does() -> None:
    pairs = [(records._MADE, records._MADE_CALL), (reach._DEF, reach._DEF_WORD)]
    for code in _corpus():
        for pattern, lead in pairs:
            expected = _spans(pattern.finditer(code))
            assert _spans(line_matches(pattern, lead, code)) == expected, (pattern, code)


def test_headers_read_once_answer_as_each_pass_searching_for_its_own() -> None:
    """The headers found once (:func:`~mpcheck.project.lines.headers`) and the narrower
    header patterns matched only at their lines find what each pattern's ``finditer`` found;
    construction's reading of them holds in the code with its imports blanked."""
    header = re.compile(rb"^([ \t]*)(?:async[ \t]+)?(def|class)[ \t]+(\w+)", re.MULTILINE)
    spaced = _corpus() + [
        b"from a import (b)def f(x):\n    pass\n",
        b"from a import (b,\ndef f(x): pass\n)\nclass C: pass\n",
    ]
    for code in spaced:
        found = headers(code)
        assert _spans(found) == _spans(header.finditer(code)), code
        for pattern in (records._DEF, records._CLASS, reach._DEF):
            expected = _spans(pattern.finditer(code))
            assert _spans(narrowed(pattern, found, code)) == expected, (pattern, code)
        blanked = construction._blank_imports(code)[0]
        assert construction.construction_of(code, "m", found) == construction.construction_of(
            code, "m"
        ), code
        assert construction.construction_of(code, "m") == _construction_as_before(blanked)
        assert callers.callers_of(code, "m", {"g": "p.g"}, False, found) == callers.callers_of(
            code, "m", {"g": "p.g"}, False
        )


def _construction_as_before(blanked: bytes) -> object:
    """``construction_of`` as it read the headers of the import-blanked code itself
    (blanking the imports of that code again changes nothing)."""
    return construction.construction_of(blanked, "m", headers(blanked))


def test_a_match_spanning_lines_hides_the_lines_it_covers_as_in_finditer() -> None:
    pattern = re.compile(rb"^x\((?:[^)]*)\)", re.MULTILINE)
    code = b"x(a,\nx(b)\n)\nx(c)\n"
    assert _spans(line_matches(pattern, re.compile(rb"x\("), code)) == _spans(
        pattern.finditer(code)
    )
    assert len(list(line_matches(pattern, re.compile(rb"x\("), code))) == 2


def _enclosing_loop(data: bytes, at: int) -> int:
    depth, i, stop = 0, at - 1, max(-1, at - 2000)
    while i > stop:
        c = data[i]
        if c in b")]}":
            depth += 1
        elif c in b"([{":
            if depth == 0:
                return i if c == 0x28 else -1
            depth -= 1
        i -= 1
    return -1


def _opening_loop(data: bytes, close: int) -> int:
    depth, i, stop = 0, close, max(-1, close - 2000)
    while i > stop:
        c = data[i]
        if c in b")]}":
            depth += 1
        elif c in b"([{":
            depth -= 1
            if depth == 0:
                return i
        i -= 1
    return -1


def _closing_loop(data: bytes, start: int) -> int:
    depth, i, end = 1, start, min(len(data), start + 2000)
    while i < end:
        c = data[i]
        if c in b"([{":
            depth += 1
        elif c in b")]}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return end


def test_bracket_matching_answers_as_the_byte_loops_did() -> None:
    rng = random.Random(37)
    long = b"".join(_generated(200, seed=5))  # (longer than the 2,000-byte reach)
    for code in [*_generated(600), long, b"(" * 2500 + b"x" + b")" * 2500]:
        offsets = {0, len(code), *(rng.randrange(len(code) + 1) for _ in range(40))}
        for at in sorted(offsets):
            assert enclosing(code, at) == _enclosing_loop(code, at), (code, at)
            assert closing(code, at) == _closing_loop(code, at), (code, at)
            if at < len(code):
                assert opening(code, at) == _opening_loop(code, at), (code, at)


def _casting_loop(code: bytes) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for match in records._DEF.finditer(code):
        indent, stop = len(match.group(1)), len(code)
        for line in re.finditer(rb"(?<=\n)(?=[^\n])", code[match.end() :]):
            at = match.end() + line.start()
            text = code[at : code.find(b"\n", at) % (len(code) + 1)]
            stripped = text.lstrip()
            if stripped and len(text) - len(stripped) <= indent:
                stop = at
                break
        casts = records._CASTING_TEXT.search(code, match.end(), stop) is not None
        name = match.group(2).decode()
        out[name] = out.get(name, False) or casts
    return out


def test_a_function_body_ends_where_the_line_loop_ended_it() -> None:
    extra = [
        b"def f(m):\n    return m\n\x0c\ndef g(m):\n \t m.half()\n",
        b"def f(m):\n  \r\n    m.to(dtype)\n  \x0b x\nclass A:\n  def g(self):\n    pass\n",
        b"class A:\n def f(m):\n  return m\n\x0cx = 1\n  m.half()\n",  # (a form feed indents)
    ]
    for code in [*_corpus(), *extra]:
        headers = list(records._DEF.finditer(code))
        spans = records._casting_spans(code, headers)
        assert records._casting_functions(spans) == _casting_loop(code), code


# What the keyword-led scans replaced, as they were: each was tried at every offset (a
# leading ``\n``, ``\b``, look-behind, or a ``[A-Za-z_][\w.]*`` backtracking over each chain).
_OLD_IMPORTS = re.compile(rb"\n[ \t]*(?:from[ \t]+[\w.]+[ \t]+)?import[ \t]+(?:\([^)]*\)|[^\n]*)")
_OLD_METHOD = re.compile(rb"\bdef[ \t]+(\w+)[ \t]*\(\s*self\b")
_OLD_SPLIT = re.compile(
    rb"([A-Za-z_][\w.]*)\.get_input_embeddings\(\s*\)\s*\.(to|float|half|bfloat16|double|type)\("
)
_OLD_HALF_WORDS = re.compile(
    rb"\bhalf\b|float16|bfloat16|fp16|bf16|torch_dtype|deepspeed|precision|set_default_dtype"
)
_OLD_ENTRY = re.compile(
    rb"^(?:if[ \t]+__name__\b|(?:for|while|with|async[ \t]+with)\b|[A-Za-z_][\w.]*[ \t]*\()", re.M
)
_KEYWORD_PIECES = [
    b"import", b"import ", b"from a import (b,\n c)", b"def", b"def ", b"self", b"(self",
    b"half", b"_half", b"half_", b".get_input_embeddings", b"()", b".to(", b".half(",
    b"torch.float16", b"bf16", b"3", b"with ", b"for", b"if __name__", b"model", b"mymodel",
    b"a.model", b"autocast", b"wrap", b"model_", b"x.model", b"fsdp",
]  # fmt: skip


def _keyword_corpus() -> list[bytes]:
    rng = random.Random(22)
    pieces = _PIECES + _KEYWORD_PIECES * 2
    made = [b"".join(rng.choices(pieces, k=rng.randrange(1, 120))) for _ in range(3000)]
    spelled = [
        b"e = self.text_encoder.get_input_embeddings().to(dtype=torch.float16)\n",
        b"3a.b.get_input_embeddings() .half()\n.get_input_embeddings().to(x)",
        b"(m).get_input_embeddings().float(); _9.x1.get_input_embeddings(\n).type(t)",
        b"a..b.get_input_embeddings().double(", b"1.get_input_embeddings().half(",
    ]  # fmt: skip
    return _corpus() + made + spelled


def test_keyword_led_scans_answer_as_the_patterns_they_replaced() -> None:
    """Import blanking, method headers, input-embedding casts, half words, a script's entry
    and the wrapper gate find what the patterns tried at every offset found."""
    from mpcheck.project import callables

    for code in _keyword_corpus():
        old = _OLD_IMPORTS.sub(lambda m: m.group().translate(construction.SPACES), b"\n" + code)
        assert construction._blank_imports(code)[0] == old[1:], code
        heads = [(m.start(), m.group(1)) for m in callables._METHOD.finditer(code)]
        assert heads == [(m.start(), m.group(1)) for m in _OLD_METHOD.finditer(code)], code
        splits = [
            (callables._receiver(code, m.start()), m.end(), m.group(1))
            for m in callables._SPLIT.finditer(code)
            if callables._receiver(code, m.start()) >= 0
        ]
        expected = [(m.start(), m.end(), m.group(2)) for m in _OLD_SPLIT.finditer(code)]
        assert splits == expected, code
        assert _spans(records.HALF_WORDS.finditer(code)) == _spans(_OLD_HALF_WORDS.finditer(code))
        entry = reach._ENTRY.match(code) or reach._ENTRY_LINE.search(code)
        assert (entry is not None) is (_OLD_ENTRY.search(code) is not None), code
        expected_wrap = records._WRAPPER_NAMES.search(code) is not None
        assert records._names_wrapper(code) is expected_wrap, code


def test_model_names_are_found_where_a_leading_look_behind_found_them() -> None:
    """The uses of a model's variables (``_escapes``) are matched by each name, its look-behind
    after it, at the places the pattern with the look-behind first matched."""
    names = ["model", "model_", "self.model", "m"]
    alternatives = b"|".join(re.escape(n.encode()) for n in sorted(names, key=len, reverse=True))
    old = re.compile(rb"(?<![\w.])(" + alternatives + rb")(?![\w])")
    new = records._names_pattern(names)
    for code in _keyword_corpus():
        assert _spans(new.finditer(code)) == _spans(old.finditer(code)), code
