"""mpcheck never crashes on a valid program, and every output format stays valid.

Programs come from ``hypothesmith`` (generated from Python's grammar), prefixed with
``import torch`` so the analysis really runs on them. The seed is fixed and the example
count bounded (``tests/robustness/budget.py``: the full count under CI, a fifth in the fast
loop); ``bench/fuzz.py`` runs the same property for as long as it is given.
"""

from __future__ import annotations

import warnings

import hypothesmith
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpcheck.pipeline.one_file import check_source
from mpcheck.ruleset.rule import all_rules
from tests.robustness.budget import examples

RULES = tuple(all_rules())
INTERNAL = {"MPC002"}


def never_crashes(program: str) -> None:
    """The property: a valid program gets findings, never an exception or an MPC002 that
    says mpcheck itself failed."""
    source = "import torch\n" + program
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, "f.py", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return  # hypothesmith occasionally produces what CPython rejects
    for d in check_source(source.encode("utf-8", "surrogatepass"), "f.py", RULES):
        assert not (d.code in INTERNAL and "mpcheck failed" in d.message), d.message


# Deferred: building hypothesmith's grammar takes seconds, paid when the test runs rather than
# by every process that merely collects it.
VALID_PROGRAMS = st.deferred(lambda: hypothesmith.from_grammar() | hypothesmith.from_node())


@settings(
    derandomize=True,
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(VALID_PROGRAMS)
def test_any_valid_program_is_checked_without_crashing(program: str) -> None:
    never_crashes(program)


SNIPPETS = [
    "x = torch.ones(3).float()",
    "y = torch.cat([x, torch.zeros(3)])",
    "class M(torch.nn.Module):\n    def forward(self, h):\n        return h.float()",
    "with torch.autocast('cpu'):\n    z = x @ x",
    "s = torch.cuda.amp.GradScaler()",
    "def f(q, k, v):\n    return torch.nn.functional.scaled_dot_product_attention(q.float(), k, v)",
    "m = torch.tensor(-1e10).half()",
    "for p in []:\n    p.data = p.data.half()",
]


@settings(derandomize=True, max_examples=examples(40), deadline=None)
@given(st.lists(st.sampled_from(SNIPPETS), max_size=8))
def test_torch_shaped_programs_are_checked_without_crashing(lines: list[str]) -> None:
    never_crashes("\n".join(lines) + "\n")
