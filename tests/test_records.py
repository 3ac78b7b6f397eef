"""A dataclass's fields hold what its own factories construct it with
(:mod:`mpcheck.engine.records`), so its methods, and the summary other files read, know
their dtypes; ``dtype=torch.get_default_dtype()`` is the default dtype. The CLI side is
``fixtures/xfile/*_dataclass_cache_entry`` (tests/test_xfile.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mpcheck.project import summarise
from mpcheck.project.summarise import FileSummariser
from mpcheck.project.summary import ModuleSummary

ENTRY = """\
from dataclasses import dataclass

import torch


{decorator}
class Entry:
    past_keys: torch.Tensor
    frozen: bool = False

    @classmethod
    def new(cls, n, d):
        return cls({construction})

    def append(self, new_keys):
        return torch.cat([self.past_keys, new_keys], dim=1)
"""


@pytest.fixture
def fresh() -> Iterator[None]:
    summarise.forget()
    yield
    summarise.forget()


def summary_of(tmp_path: Path, decorator: str, construction: str) -> ModuleSummary:
    text = ENTRY.format(decorator=decorator, construction=construction)
    (tmp_path / "entry.py").write_text(text)
    summary = FileSummariser(tmp_path).summarise(tmp_path / "entry.py", lambda *a: None)
    assert summary is not None
    again = ModuleSummary.from_json(summary.to_json())
    assert again == summary
    return summary


@pytest.mark.parametrize(
    "construction",
    [
        "past_keys=torch.empty((1, 0, n, d))",
        "torch.empty((1, 0, n, d))",  # positional, in field order
        "past_keys=torch.empty((1, 0, n, d), dtype=torch.get_default_dtype())",
        "past_keys=torch.zeros(1, 0, n, d, dtype=torch.float32)",
    ],
)
def test_a_dataclass_field_is_what_its_factory_builds(
    tmp_path: Path, fresh: None, construction: str
) -> None:
    entry = summary_of(tmp_path, "@dataclass", construction).classes["Entry"]
    assert entry.attrs["past_keys"].prec == "full"
    assert entry.methods["append"].returns.prec == "full"


@pytest.mark.parametrize(
    ("decorator", "construction"),
    [
        ("@dataclass", "past_keys=torch.empty((1, 0, n, d), dtype=torch.float16)"),
        ("@dataclass", "past_keys=torch.empty((1, 0, n, d), dtype=dtype)"),  # not known here
        ("", "past_keys=torch.empty((1, 0, n, d))"),  # no dataclass: its __init__ decides
    ],
)
def test_no_float32_field_without_a_float32_construction(
    tmp_path: Path, fresh: None, decorator: str, construction: str
) -> None:
    entry = summary_of(tmp_path, decorator, construction).classes["Entry"]
    assert entry.methods["append"].returns.prec != "full"


def test_a_multi_line_origin_is_placed_at_its_first_line(tmp_path: Path, fresh: None) -> None:
    """libcst renders a nested multi-line call re-indented: its place is found by its first
    line (it was line 0, column 0, in messages of other files)."""
    construction = "\n".join(["", "past_keys=torch.empty(", "    (1, 0, n, d),", "),", ""]).replace(
        "\n", "\n            "
    )
    origin = summary_of(tmp_path, "@dataclass", construction).classes["Entry"].attrs["past_keys"]
    assert origin.origin is not None
    assert (origin.origin.line, origin.origin.column) == (14, 23)
