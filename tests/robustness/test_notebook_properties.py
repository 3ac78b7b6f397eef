"""Mutated notebooks never crash a check or a fix, and a fix changes only cell sources.

A notebook is generated (torch-shaped cells, magics, odd line breaks, one of several JSON
layouts) and then mutated: its bytes (cut, spliced, flipped) or its structure (a value in a
cell replaced by arbitrary JSON). The property: checking gives findings or an MPC001, never
an exception or an internal error; where fixes apply, everything outside the fixed cells'
``source`` strings keeps its bytes and the result is still a notebook. ``bench/fuzz.py``
runs the same property for as long as it is given.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpcheck.files.notebook import check_notebook_bytes, fix_notebook_bytes
from mpcheck.files.notebook_json import scan
from mpcheck.ruleset.rule import all_rules
from tests.robustness.budget import examples
from tests.robustness.test_run_properties import SNIPPETS

RULES = tuple(all_rules())
LINES = [
    *SNIPPETS,
    "import torch",
    "%matplotlib inline",
    "%%time",
    "%%bash",
    "!ls",
    "files = !ls",
    "# a form feed\x0c and U+2028\u2028 in a comment",
    "x = 'é🚀'",
    "scaler = torch.cuda.amp.GradScaler()  # a safe fix",
    "",
]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def notebooks(draw: st.DrawFn) -> bytes:
    """A valid notebook's bytes in one of the layouts notebooks are found in."""
    cells: list[dict[str, Any]] = [{"cell_type": "code", "metadata": {}, "source": "import torch"}]
    for _ in range(draw(st.integers(1, 4))):
        text = "\n".join(draw(st.lists(st.sampled_from(LINES), max_size=5)))
        kind = draw(st.sampled_from(["code", "code", "markdown"]))
        ending = draw(st.sampled_from(["\n", "\r\n"]))
        text = text.replace("\n", ending) + draw(st.sampled_from(["", ending]))
        listed = draw(st.booleans())
        source: Any = text.splitlines(keepends=True) if listed else text
        cells.append({"cell_type": kind, "metadata": {}, "source": source})
    doc = {"cells": cells, "metadata": {"lr": 1e-05}, "nbformat": 4, "nbformat_minor": 5}
    indent = draw(st.sampled_from([None, 1, 2]))
    text = json.dumps(doc, indent=indent, ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    return text.encode("utf-8")


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = draw(notebooks())
    how = draw(st.sampled_from(["none", "none", "bytes", "cut", "value"]))
    if how == "bytes":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.binary(max_size=4)) + data[at + draw(st.integers(0, 4)) :]
    if how == "cut":
        return data[: draw(st.integers(0, len(data)))]
    if how == "value":
        doc = json.loads(data)
        cell = draw(st.sampled_from(doc["cells"]))
        cell[draw(st.sampled_from(["source", "cell_type", "metadata", "extra"]))] = draw(JSON)
        if draw(st.booleans()):
            doc[draw(st.sampled_from(["cells", "nbformat", "metadata"]))] = draw(JSON)
        return json.dumps(doc).encode("utf-8")
    return data


def _outside_sources(text: str) -> list[str]:
    """The text between (and around) the cells' ``source`` values."""
    spans = sorted((v.start, v.end) for v in scan(text).values())
    edges = [0, *(x for span in spans for x in span), len(text)]
    return [text[a:b] for a, b in zip(edges[::2], edges[1::2], strict=True)]


def checks_and_fixes(data: object) -> None:
    """The property (see the module docstring)."""
    assert isinstance(data, bytes)
    found = check_notebook_bytes(data, "nb.ipynb", RULES)
    assert not any(d.code == "MPC002" for d in found), [d.message for d in found]
    if any(d.code == "MPC001" and d.message.startswith("cannot read") for d in found):
        return
    fixed, _ = fix_notebook_bytes(data, found, unsafe=True)
    if fixed == data:
        return
    before, after = data.decode("utf-8"), fixed.decode("utf-8")
    json.loads(after)
    assert _outside_sources(before) == _outside_sources(after)
    check_notebook_bytes(fixed, "nb.ipynb", RULES)


@settings(
    derandomize=True,
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(mutated())
def test_mutated_notebooks_are_checked_and_fixed_without_crashing(data: bytes) -> None:
    checks_and_fixes(data)
