"""The engine's reading of ``if`` tests: which names are None in each branch."""

from __future__ import annotations

import libcst as cst
import pytest

from mpcheck.engine.training import none_when


@pytest.mark.parametrize(
    ("test", "when_true", "when_false"),
    [
        ("scaler is None", {"scaler"}, set()),
        ("scaler is not None", set(), {"scaler"}),
        ("None is self.scaler", {"self.scaler"}, set()),
        ("scaler == None", {"scaler"}, set()),
        ("scaler != None", set(), {"scaler"}),
        ("scaler", set(), {"scaler"}),
        ("not scaler", {"scaler"}, set()),
        ("args.amp and scaler is not None", set(), set()),
        ("scaler is None and args.clip", {"scaler"}, set()),
        ("scaler is None or args.clip", set(), {"args.clip"}),
        ("not (scaler is not None or args.skip)", {"scaler", "args.skip"}, set()),
        ("scaler is not None or a is not None", set(), {"a", "scaler"}),
        ("scaler is not None and a is not None", set(), set()),
        ("(scaler is None) and (a is None)", {"a", "scaler"}, set()),
        ("scaler.is_enabled()", set(), set()),
        ("a is b is None", set(), set()),
        ("scaler in cache", set(), set()),
    ],
)
def test_none_when(test: str, when_true: set[str], when_false: set[str]) -> None:
    expr = cst.parse_expression(test)
    assert none_when(expr, True) == when_true
    assert none_when(expr, False) == when_false
