"""Each rule's examples are tests: the ``bad`` one (shown by ``mpcheck rule CODE`` and in
``docs/rules/``) yields its rule and nothing else, the ``good`` one yields nothing.

Examples are written without imports to stay short; they are checked with this preamble.
"""

from __future__ import annotations

import textwrap

import pytest

from mpcheck.pipeline.one_file import check_source
from mpcheck.ruleset.rule import Rule, all_rules

PREAMBLE = (
    "import copy\n"
    "import torch\n"
    "import torch.nn.functional as F\n"
    "from torch import nn\n"
    "from diffusers.training_utils import cast_training_params\n\n"
)
WITH_EXAMPLES = [r for r in all_rules() if r.bad]


def codes(example: str) -> list[str]:
    source = PREAMBLE + textwrap.dedent(example).strip("\n") + "\n"
    found = check_source(source.encode(), "example.py", all_rules())
    return sorted({d.code for d in found if not d.suppressed})


@pytest.mark.parametrize("rule", WITH_EXAMPLES, ids=lambda r: r.code)
def test_bad_example_yields_its_rule(rule: type[Rule]) -> None:
    assert codes(rule.bad) == [rule.code]


@pytest.mark.parametrize("rule", [r for r in WITH_EXAMPLES if r.good], ids=lambda r: r.code)
def test_good_example_yields_nothing(rule: type[Rule]) -> None:
    assert codes(rule.good) == []


def test_every_analysis_rule_has_examples() -> None:
    engine_level = {"MPC001", "MPC002"}
    missing = [r.code for r in all_rules() if r.code not in engine_level and not (r.bad and r.good)]
    assert missing == []
