"""``body_uses(fn).false_locals``: the locals of a function every binding of which is
``False`` or ``None`` (``train_te = False`` then ``if train_te:``), read in the one walk of
its body that also reads its tensor uses and aliases."""

from __future__ import annotations

import libcst as cst

from mpcheck.engine.body_uses import body_uses

SOURCE = """\
def f(p=False, *, k=None):
    a = False
    b = None
    c = False
    c = 1
    d = e = False
    for g in x:
        pass
    g = False
    p = False
    k = None
    h: bool = False
    i += 1
    i = None
    with x as j:
        j = False
    if (m := False):
        pass
    n, o = False, False

    def inner():
        q = None
"""


def test_every_binding_counts_and_parameters_never_do() -> None:
    fn = cst.parse_module(SOURCE).body[0]
    assert isinstance(fn, cst.FunctionDef)
    assert body_uses(fn).false_locals == {"a", "b", "d", "e", "h", "q"}
