"""Write docs/rules/<CODE>.md and the rule table from the rule classes themselves.

The rule file is the single source of a rule's documentation; this script
renders it for people browsing the repository. ``--check`` exits 1 when the
committed pages differ from what the rules say (CI runs it through the tests).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mpcheck.ruleset.rule import Rule, all_rules

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "rules"
README = ROOT / "README.md"
BEGIN, END = "<!-- rules:begin -->", "<!-- rules:end -->"


def rule_table(rules: tuple[type[Rule], ...], link_prefix: str) -> str:
    rows = ["| Code | Name | Severity | Fix | Summary |", "|---|---|---|---|---|"]
    for r in rules:
        fix = ("unsafe" if r.fix_applicability == "unsafe" else "yes") if r.fixable else ""
        link = f"[{r.code}]({link_prefix}{r.code}.md)"
        rows.append(f"| {link} | `{r.name}` | {r.severity.value} | {fix} | {r.summary} |")
    return "\n".join(rows) + "\n"


def pages() -> dict[Path, str]:
    rules = all_rules()
    out = {DOCS / f"{r.code}.md": r.docs() for r in rules}
    out[DOCS / "README.md"] = "# Rules\n\n" + rule_table(rules, "")
    readme = README.read_text(encoding="utf-8")
    head, _, rest = readme.partition(BEGIN)
    _, _, tail = rest.partition(END)
    table = rule_table(rules, "docs/rules/")
    out[README] = f"{head}{BEGIN}\n{table}{END}{tail}"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the pages are stale")
    args = parser.parse_args()
    stale = []
    for path, text in pages().items():
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if stale:
        names = ", ".join(p.name for p in stale)
        print(f"stale rule docs: {names}; run python tools/gen_rule_docs.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
