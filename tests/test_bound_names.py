"""``bound_names``: every name a file binds (a builtin it shadows is no builtin), read from
the code nodes alone, as libcst's visitor over every node read them."""

from __future__ import annotations

import libcst as cst

from mpcheck.engine.reachability import bound_names

SOURCE = """\
import os, numpy as np
import a.b
from x import y as type, z
def f(p, *args, q: int = 1, **kw):
    r = s = 1
    t, [u, *v] = w
    x_: int = 0
    for i, (j, k) in pairs:
        pass
    async def g(): pass
    lam = lambda m, n=1: m
    with open(p) as fh:
        pass
    class C:
        attr = 1
    self.field = 2
    d[k2] = 3
"""


def test_every_binding_kind_is_read() -> None:
    found = bound_names(cst.parse_module(SOURCE))
    assert found == {
        *"os np type z f p args q kw r s t u v x_ i j k g lam m n C attr".split(),
    }
