"""Start a new rule: the rule module, its bad and good fixtures, and its test file.

    python tools/new_rule.py MPC303 half-cumsum "A cumulative sum runs in float16."

What it writes fails the test suite until the rule is done, on purpose: the bad fixture
expects a finding the empty rule does not give, and its runtime header claims a failure the
placeholder program does not have. Fill in, in this order (CONTRIBUTING.md says why):

1. the fixtures: a bad program that really fails under torch (``# runtime: raises ...`` or
   ``# runtime: wrong "..."``) with ``# expect: CODE:column`` on the reported line, and a good
   one holding the correct idioms of the family (``# runtime: ok``);
2. the rule's text (``summary``, ``why``, ``symptom``, ``how_to_fix``, ``bad``, ``good``);
3. the hooks, asking the engine through ``mpcheck.api`` only;
4. ``python tools/gen_rule_docs.py`` for docs/rules/CODE.md and the README table.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RULE = '''"""{code}: {summary}"""

from __future__ import annotations

from mpcheck.api import CallSite, Rule, Severity


class {cls}(Rule):
    code = "{code}"
    name = "{name}"
    severity = Severity.{severity}
    summary = "{summary}"
    why = """
        TODO: why it is a problem, with the numbers measured under torch.
        """
    symptom = """
        TODO: the exact message, or what goes silently wrong.
        """
    how_to_fix = """
        TODO: the fix, and what mpcheck's fix (if any) changes.
        """
    bad = """
        TODO
        """
    good = """
        TODO
        """

    def check_call(self, call: CallSite) -> None:
        """TODO: ask the engine (``call.result``, ``call.args[i].fact``) and ``self.report``."""
'''

BAD = '''# runtime: raises RuntimeError "TODO: the exact message"
"""TODO: the real-world shape of the bug, and where it was seen."""

import torch


def main() -> None:
    torch.ones(1)  # expect: {code}:5


if __name__ == "__main__":
    main()
'''

GOOD = '''# runtime: ok
"""TODO: the correct idioms of the family, which {code} must not report."""

import torch


def main() -> None:
    torch.ones(1)


if __name__ == "__main__":
    main()
'''

TEST = '''"""{code} {name}: TODO what is reported and what stays quiet."""

from __future__ import annotations

from tests.support import check


def test_reported() -> None:
    source = "import torch\\n\\nTODO\\n"
    assert [(d.code, d.start.row) for d in check(source) if d.code == "{code}"] == [("{code}", 3)]
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("code", help="MPC303")
    parser.add_argument("name", help="kebab-case name: half-cumsum")
    parser.add_argument("summary", help="one sentence")
    parser.add_argument("--warning", action="store_true", help="silently wrong, not raising")
    args = parser.parse_args()
    if not re.fullmatch(r"[A-Z]+[0-9]{3}", args.code) or not re.fullmatch(r"[a-z0-9-]+", args.name):
        parser.error("CODE looks like MPC303 and NAME like half-cumsum")
    stem = f"{args.code.lower()}_{args.name.replace('-', '_')}"
    fields = {
        "code": args.code,
        "name": args.name,
        "summary": args.summary.replace('"', '\\"'),
        "cls": "".join(part.title() for part in args.name.split("-")),
        "severity": "WARNING" if args.warning else "ERROR",
    }
    files = {
        ROOT / "rules" / f"{stem}.py": RULE,
        ROOT / "fixtures" / args.code.lower() / f"bad_{args.name.replace('-', '_')}.py": BAD,
        ROOT / "fixtures" / args.code.lower() / f"good_{args.name.replace('-', '_')}.py": GOOD,
        ROOT / "tests" / f"test_{args.code.lower()}.py": TEST,
    }
    taken = [p for p in files if p.exists()]
    if taken:
        print(f"already there, nothing written: {', '.join(map(str, taken))}", file=sys.stderr)
        return 2
    for path, template in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**fields))
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
