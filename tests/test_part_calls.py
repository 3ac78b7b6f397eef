"""A method's parameter is what its calls hand it: a part's method that only its owners call
(``self.scorer.pool(x.float(), mask)``) is walked from that call, with the float32 it hands
(:mod:`mpcheck.project.part_methods`)."""

from __future__ import annotations

import textwrap

from mpcheck.project.part_methods import part_called_names
from tests.support import check

HEAD = """\
    import torch
    from torch import nn


    class Scorer(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            return self.proj(x)

        def pool(self, x, mask):
            return x.masked_fill(~mask, -1e9).softmax(-1) * x


    class Head(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.scorer = Scorer(dim)

        def forward(self, x, mask):
            return self.scorer.pool({arg}, mask).to(x.dtype)
    {tail}

    head = Head(8).half()
    """


def _codes(arg: str, tail: str = "") -> list[str]:
    source = textwrap.dedent(HEAD).format(arg=arg, tail=textwrap.indent(tail, "    "))
    return [d.code for d in check(source)]


def test_a_parts_method_only_its_owner_calls_is_named() -> None:
    source = textwrap.dedent(HEAD).format(arg="x.float()", tail="").encode()
    assert part_called_names(source) == frozenset({"pool"})


def test_a_method_written_elsewhere_after_a_dot_or_quoted_is_not() -> None:
    base = textwrap.dedent(HEAD).format(arg="x.float()", tail="").encode()
    assert part_called_names(base + b"\nhook = head.scorer.pool\n") == frozenset()
    assert part_called_names(base + b'\nfn = getattr(head.scorer, "pool")\n') == frozenset()
    assert part_called_names(base + b"\nhead.scorer.pool(x, mask)\n") == frozenset()
    # (a bare local name reaches no method)
    assert part_called_names(base + b"\npool = Head(8)\n") == frozenset({"pool"})
    twice = base + b"\nclass Other:\n    def pool(self, x):\n        return x\n"
    assert part_called_names(twice) == frozenset()


def test_the_upcast_the_only_call_hands_is_what_the_method_holds() -> None:
    assert "MPC301" not in _codes("x.float()")


def test_a_half_or_unknown_argument_keeps_the_activation() -> None:
    assert "MPC301" in _codes("x")


def test_a_method_a_callback_reaches_keeps_its_activation() -> None:
    tail = "\ndef hooked(head):\n    return head.scorer.pool\n"
    assert "MPC301" in _codes("x.float()", tail)


def test_another_file_that_writes_the_name_may_call_it() -> None:
    from mpcheck.project.models import uses_of_sources

    head = textwrap.dedent(HEAD).format(arg="x.float()", tail="").encode()
    alone = uses_of_sources({"pkg/head.py": head, "pkg/run.py": b"import torch\n"})
    assert alone.at("pkg.head").called_in_file("pool")
    run = b"from pkg.head import Head\nhead = Head(8)\nhead.scorer.pool(x, mask)\n"
    both = uses_of_sources({"pkg/head.py": head, "pkg/run.py": run})
    assert not both.at("pkg.head").called_in_file("pool")
    assert alone.digest != both.digest


def test_a_record_with_part_calls_and_autocast_reads_back_from_the_cache() -> None:
    """Every field of a record survives the cache (``to_plain`` / ``from_plain``): a field
    written but not read back would answer differently on a warm run."""
    import json

    from mpcheck.project.records import ModelRecord, record_of

    code = (
        b"import torch\nfrom torch import nn\n\n\nclass Head(nn.Module):\n"
        b"    def pool(self, x):\n        return x.mean(1)\n\n\n"
        b"class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        b"        self.head = Head()\n\n    def forward(self, x):\n"
        b"        return self.head.pool(x.float())\n\n\n"
        b"class Block(nn.Module):\n    def __init__(self, dim, scaled=False):\n"
        b"        super().__init__()\n        self.scaled = scaled\n\n\n"
        b"with torch.autocast('cuda', dtype=torch.bfloat16):\n    Net()(torch.ones(2, 3))\n"
    )
    record = record_of(code, "run.py")
    assert record.part_called and not record.autocast_float16 and record.flags[0]
    assert ModelRecord.from_plain(json.loads(json.dumps(record.to_plain()))) == record
