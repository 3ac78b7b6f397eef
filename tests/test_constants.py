"""The numbers names stand for (mpcheck.engine.constants): module constants, parameter
defaults no call of the file replaces, ``self.eps`` set once from one."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from mpcheck.engine.constants import Constants
from tests.support import check

HALF_MODEL = """
import torch
from torch import nn

{top}

class Coder(nn.Module):
    def __init__(self, dim, eps={init_eps}):
        super().__init__()
        self.head = nn.Linear(dim, 4)
        self.eps = eps

    def forward(self, x):
        h = self.head(x).relu()
        {body}

{script}
"""


def _codes(
    top: str = "", init_eps: str = "1e-8", body: str = "", script: str = ""
) -> list[tuple[int, str]]:
    source = HALF_MODEL.format(top=top, init_eps=init_eps, body=body, script=script)
    return [(d.start.row, d.code) for d in check(textwrap.dedent(source)) if d.code == "MPC304"]


def test_module_constant_read_in_a_method() -> None:
    found = _codes("EPS = 1e-8", body="return torch.log(h + EPS)", script="m = Coder(4).half()")
    assert found == [(15, "MPC304")]


def test_module_constant_bound_twice_or_declared_global_is_unknown() -> None:
    twice = "EPS = 1e-8\nif torch.cuda.is_available():\n    EPS = 1e-6"
    body = "return torch.log(h + EPS)"
    assert not _codes(twice, body=body, script="m = Coder(4).half()")
    rebound = "EPS = 1e-8\ndef setup():\n    global EPS\n    EPS = 1e-6"
    assert not _codes(rebound, body=body, script="m = Coder(4).half()")


def test_constructor_default_kept_on_self() -> None:
    body = "return torch.log(h + self.eps)"
    assert _codes(body=body, script="m = Coder(4).half()") == [(15, "MPC304")]
    # a call of the file passes it (by keyword, by position, or unpacked): unknown
    assert not _codes(body=body, script="m = Coder(4, eps=1e-6).half()")
    assert not _codes(body=body, script="m = Coder(4, 1e-6).half()")
    assert not _codes(body=body, script="kw = {}\nm = Coder(4, **kw).half()")
    # set again elsewhere: unknown
    again = "self.eps = 1e-6\n        return torch.log(h + self.eps)"
    assert not _codes(body=again, script="m = Coder(4).half()")


def test_bfloat16_keeps_the_guard() -> None:
    body = "return torch.log(h + self.eps)"
    assert not _codes(body=body, script="m = Coder(4).to(torch.bfloat16)")


def test_function_default_handed_on_is_unknown() -> None:
    module = cst.parse_module("def f(x, eps=1e-8):\n    return x + eps\n\ng = partial(f, eps=1)\n")
    constants = Constants(module, module.code.encode())
    fn = module.body[0]
    assert isinstance(fn, cst.FunctionDef)
    assert constants.default(fn, fn.params.params[1], 1, None) is None
    plain = cst.parse_module("def f(x, eps=1e-8):\n    return x + eps\n\ny = f(2)\n")
    fn = plain.body[0]
    assert isinstance(fn, cst.FunctionDef)
    known = Constants(plain, plain.code.encode()).default(fn, fn.params.params[1], 1, None)
    assert known is not None and known.value == 1e-8


@pytest.mark.parametrize("word", [b"scale", b"__init__", b"f", b"aa", b"Coder"])
def test_a_name_is_found_where_the_pattern_finds_it(word: bytes) -> None:
    """``_occurrences`` finds a name where ``re.finditer(name + rb"(?!\\w)")`` does (a name
    followed by a word byte is inside a longer one; overlapping candidates included)."""
    import re

    from mpcheck.engine.constants import _occurrences

    code = b"aaa = scale(f, fx) + scaled(aa)\nCoder.__init__(self)\nf(scale=1) aa\nf"
    pattern = re.compile(re.escape(word) + rb"(?![\w])")
    assert list(_occurrences(code, word)) == [(m.start(), m.end()) for m in pattern.finditer(code)]
