"""``ImportTable.of_source`` (CPython's parser) gives what ``ImportTable.of`` (libcst's tree)
gives, or declines: summarising a file without torch reads its re-exports through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpcheck.files.parsing import Unparsable, parse
from mpcheck.project.names import ImportTable

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*(ROOT / "fixtures").rglob("*.py"), *(ROOT / "mpcheck").rglob("*.py")])


def _both(data: bytes) -> tuple[ImportTable, ImportTable | None]:
    module = parse(data)
    assert not isinstance(module, Unparsable)
    return ImportTable.of(module), ImportTable.of_source(data)


def _plain(table: ImportTable) -> tuple[object, ...]:
    return (list(table.aliases.items()), list(table.relative.items()), table.levels)


def test_every_fixture_and_engine_module_gives_the_same_table() -> None:
    declined = 0
    for path in SOURCES:
        data = path.read_bytes()
        if isinstance(parse(data), Unparsable):
            continue
        full, cheap = _both(data)
        if cheap is None:
            declined += 1
            continue
        assert _plain(cheap) == _plain(full), path
    assert declined < len(SOURCES) // 10


SAME = [
    "import torch\nimport torch.nn as nn\nfrom torch import nn as n2, amp\n",
    "from . import a\nfrom ..b import c as d\nfrom .e.f import g\nfrom x import *\n",
    "try:\n    import a\nexcept ImportError:\n    import b as a\nelse:\n    import c\n"
    "finally:\n    import d\n",
    "if x:\n    import a\nelif y:\n    import b\nelse:\n    from c import a\n",
    "def f():\n    import a\n    class C:\n        from b import c\n\nimport a as z\n",
    "with open(p) as f:\n    import a\nfor i in x:\n    pass\nelse:\n    import b\n",
]


@pytest.mark.parametrize("source", SAME)
def test_the_same_table(source: str) -> None:
    full, cheap = _both(source.encode())
    assert cheap is not None
    assert _plain(cheap) == _plain(full)


@pytest.mark.parametrize(
    "source",
    [
        "if x: import a\n",  # a one-line suite: libcst's table does not enter it
        "try:\n    pass\nexcept E: import a\n",
        "match x:\n    case 1:\n        import a\n",
        "def f(:\n",  # CPython rejects it
    ],
)
def test_declined(source: str) -> None:
    assert ImportTable.of_source(source.encode()) is None
