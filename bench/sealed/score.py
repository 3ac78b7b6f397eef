"""Score mpcheck on the sealed corpora (issue 36) and print only aggregate numbers.

The sealed corpora of ``bench/corpora.toml`` are code nobody tuned mpcheck on. Their first run's
findings and verdicts (``first-run.toml``) and the hazards found there by hand (``hazards.toml``)
must stay unread while the engine changes, or they stop measuring anything. So this script
never prints a repository, a path, a line or a message: it re-runs the mpcheck of a given
interpreter (``--python``, default: the one running it) on every sealed corpus and prints counts
only -- findings by severity and rule family, how many match a first-run verdict (by rule, file
and flagged-line text, as ``bench/precision.py`` matches) and their verdicts, how many are new,
how many hazards are caught, the share of errors that are bugs or latent bugs, and the false
alarms against the first run's. New findings (no verdict yet) go to a file (``--new-out``)
for a later verdict pass.

Usage::

    python bench/sealed/score.py [--batch sealed] [--python /path/to/venv/bin/python]
                                 [--dir /tmp/mpcheck-sealed] [--mirrors /work/.mirror] [--jobs 2]
                                 [--new-out /tmp/mpcheck-sealed-new.toml]

Sealed batches are scored one at a time (``--batch``): ``sealed``, the first (its corpora are the
group ``sealed``, its files ``bench/sealed/first-run.toml`` and ``hazards.toml``), ``sealed2``,
pinned in the twenty-seventh pass (group ``sealed2``, files in ``bench/sealed/sealed2/``),
``sealed3``, pinned in the thirty-fourth pass (group ``sealed3``, files in
``bench/sealed/sealed3/``), ``sealed4``, pinned in the thirty-fifth pass (group ``sealed4``,
files in ``bench/sealed/sealed4/``), ``sealed5``, pinned in the thirty-seventh pass (group
``sealed5``, files in ``bench/sealed/sealed5/``), ``sealed6``, pinned in the forty-first pass
(group ``sealed6``, files in ``bench/sealed/sealed6/``), and ``sealed7``, pinned in the
forty-second pass (group ``sealed7``, files in ``bench/sealed/sealed7/``). A batch is a sample
of its own: one batch's numbers never move when another is added. ``--dir`` and ``--new-out``
default to ``/tmp/mpcheck-<batch>`` and ``/tmp/mpcheck-<batch>-new.toml``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import tomllib

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import precision  # noqa: E402  (bench/ is not a package; precision.py is its sibling module)

# what opens a project's world, each kind in order (``ModelUses.world_kinds``), asked of --python
OPENING = (
    "import sys\n"
    "from mpcheck.project.models import uses_for\n"
    "print(' + '.join(getattr(uses_for(sys.argv[1]), 'world_kinds', ('?',))) or 'closed')\n"
)
DEPRECATED = "MPC404"  # the deprecated-API rule, counted apart from the dtype findings
VERDICTS = ("bug", "latent bug", "false alarm")
Key = tuple[str, str, str]  # (rule, path inside the corpus root, normalised flagged line)


def _realbugs() -> ModuleType:
    """``bench/realbugs/score.py`` (its ``Case`` and ``in_ranges``), loaded by path."""
    spec = importlib.util.spec_from_file_location(
        "realbugs_score", HERE.parent / "realbugs/score.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up while building)
    spec.loader.exec_module(module)
    return module


realbugs = _realbugs()


@dataclass(frozen=True)
class Verdict:
    rule: str
    path: str
    anchor: str
    verdict: str
    why: str
    row: int = 0
    severity: str = ""

    @property
    def key(self) -> Key:
        return (self.rule, self.path, precision.normalise(self.anchor))


def load_verdicts(batch: str = "sealed") -> list[Verdict]:
    """The first run's verdicts of ``batch`` (none yet while its first run is being judged)."""
    path = precision.sealed_dir(batch) / "first-run.toml"
    return [Verdict(**entry) for entry in tomllib.loads(path.read_text()).get("verdict", [])]


def load_hazards(batch: str = "sealed") -> list[Any]:
    """The hand-found hazards of ``batch`` as realbugs ``Case`` objects, with no fixed side."""
    path = precision.sealed_dir(batch) / "hazards.toml"
    entries = tomllib.loads(path.read_text()).get("case", [])
    return [realbugs.Case(fixed="", fixed_lines=[], **entry) for entry in entries]


def opening(python: str, root: Path) -> str:
    """The kinds of what opens the world of the project at ``root`` ("a + b": ``a`` first,
    ``b`` would open it still), or "closed"."""
    run = subprocess.run([python, "-P", "-c", OPENING, str(root)], capture_output=True, text=True)
    lines = run.stdout.strip().splitlines()
    return lines[-1] if run.returncode == 0 and lines else "?"


def family(code: str) -> str:
    return f"{code[3]}xx"


def caught(hazard: Any, corpus: str, findings: list[precision.Finding]) -> tuple[bool, bool]:
    """(caught at the hazard's lines by its family group, caught with its exact code)."""
    where = f"{corpus}/{hazard.path}"
    found = [(f.code, f.row) for f in findings if f.path == where]
    hits = realbugs.in_ranges(found, hazard.family, hazard.buggy_lines)
    return bool(hits), any(code == hazard.family for code, _ in hits)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", default="sealed", help="the sealed batch (corpus group)")
    parser.add_argument("--dir", type=Path, help="default: /tmp/mpcheck-<batch>")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--python", default=sys.executable, help="the interpreter whose mpcheck is measured"
    )
    parser.add_argument("--new-out", type=Path, help="default: /tmp/mpcheck-<batch>-new.toml")
    args = parser.parse_args(argv)
    args.dir = args.dir or Path(f"/tmp/mpcheck-{args.batch}")
    args.new_out = args.new_out or Path(f"/tmp/mpcheck-{args.batch}-new.toml")

    corpora = precision.load_corpora(args.batch, sealed=True)
    if not corpora:
        parser.error(f"no sealed corpora in group {args.batch!r}")
    verdicts = load_verdicts(args.batch)
    known = {v.key: v for v in verdicts}
    by_repo = {c.repo: c.name for c in corpora}
    findings: list[precision.Finding] = []
    lines = 0
    run: set[str] = set()  # the corpora checked (materialise says which mirror is missing)
    worlds: dict[str, str] = {}  # corpus -> what opens its world (:func:`opening`)
    for corpus in corpora:
        root = precision.materialise(corpus, args.dir, args.mirrors)
        if root is None:
            continue
        run.add(corpus.name)
        lines += precision.lines_of(root)
        findings += precision.check(args.dir, corpus.name, args.jobs, args.python)
        worlds[corpus.name] = opening(args.python, args.dir / corpus.name)

    severity = Counter(f.severity or "?" for f in findings)
    families = Counter(family(f.code) for f in findings if f.code != DEPRECATED)
    deprecated = sum(f.code == DEPRECATED for f in findings)
    matched: Counter[tuple[bool, str]] = Counter()  # (is MPC404, verdict)
    errors: Counter[str] = Counter()  # verdict (or "new") of each error
    new = []
    seen: set[Key] = set()
    kinds: Counter[tuple[str, str]] = Counter()  # (premise kind, first-run verdict or "new")
    opened: Counter[tuple[str, str]] = Counter()  # (what opens its project's world, verdict)
    for f in findings:
        v = known.get((f.code, f.path, f.anchor))
        if f.code != DEPRECATED:
            verdict = "new" if v is None else v.verdict
            kinds[(precision.premise_kind(f.message, f.severity), verdict)] += 1
            opened[(worlds.get(f.path.split("/")[0], "?"), verdict)] += 1
        if v is None:
            new.append(f)
            errors["new"] += f.severity == "error"
            continue
        seen.add(v.key)
        matched[(f.code == DEPRECATED, v.verdict)] += 1
        errors[v.verdict] += f.severity == "error"
    first_false = sum(v.verdict == "false alarm" and v.rule != DEPRECATED for v in verdicts)
    gone = Counter(v.verdict for v in verdicts if v.key not in seen and v.path.split("/")[0] in run)

    label = "sealed corpora" if args.batch == "sealed" else f"sealed corpora ({args.batch})"
    print(f"{label} run: {len(run)} of {len(corpora)}, {lines:,} lines of Python")
    sev = ", ".join(f"{name} {n}" for name, n in sorted(severity.items()))
    print(f"findings: {len(findings)} ({sev})")
    fam = ", ".join(f"{name} {n}" for name, n in sorted(families.items())) or "none"
    print(f"  dtype findings by rule family: {fam}; {DEPRECATED} (deprecated API): {deprecated}")
    for apart, label in ((False, "dtype findings"), (True, DEPRECATED)):
        counts = ", ".join(f"{name} {matched[(apart, name)]}" for name in VERDICTS)
        print(f"  matching a first-run verdict, {label}: {counts}")
    print(f"  new (no verdict yet): {len(new)}")
    print(f"  first-run findings gone: {sum(gone.values())} ({_counts(gone)})")
    real = errors["bug"] + errors["latent bug"]
    judged = real + errors["false alarm"]
    share = f"{100 * real / judged:.0f} %" if judged else "n/a"
    print(f"errors: {sum(errors.values())}; bugs or latent bugs among judged errors: {share}")
    print(f"  ({real} of {judged}; {errors['new']} errors still without a verdict)")
    now_false = matched[(False, "false alarm")]
    drop = f"{100 * (first_false - now_false) / first_false:.0f} %" if first_false else "n/a"
    print(
        f"false alarms (dtype findings): {now_false} now vs {first_false} in the first run "
        f"(fall: {drop}; new findings not counted until judged)"
    )

    print(
        "dtype findings by premise support x first-run verdict (bug, latent bug, false alarm, new):"
    )
    for kind in sorted({k for k, _ in kinds}):
        row = ", ".join(str(kinds[(kind, v)]) for v in (*VERDICTS, "new"))
        print(f"  {kind}: {row}")
    print(
        "projects by what opens their world (first + what would still): "
        f"{_plain(Counter(worlds.values()))}"
    )
    print("dtype findings by what opens their project's world x first-run verdict:")
    for kind in sorted({k for k, _ in opened}):
        row = ", ".join(str(opened[(kind, v)]) for v in (*VERDICTS, "new"))
        print(f"  {kind}: {row}")

    hazards = load_hazards(args.batch)
    scored = [(h, by_repo.get(h.repo, "")) for h in hazards]
    outcomes = [caught(h, corpus, findings) for h, corpus in scored if corpus in run]
    print(
        f"hand-found hazards caught at their lines: {sum(c for c, _ in outcomes)} / "
        f"{len(outcomes)} (with the exact rule: {sum(e for _, e in outcomes)})"
    )
    if new:
        args.new_out.write_text(_new_findings(new))
        print(f"new findings written for a verdict pass: {args.new_out}")
    return 0


def _plain(counter: Counter[str]) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(counter.items()))


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{name} {counter[name]}" for name in VERDICTS)


def _new_findings(new: list[precision.Finding]) -> str:
    """New findings as ``first-run.toml`` entries whose verdict and why are still to be given."""
    out = [
        "# New sealed findings: give each a verdict, then add it to its batch's first-run.toml.",
        "",
    ]
    for f in new:
        out += [
            "[[verdict]]",
            f"rule = {json.dumps(f.code)}",
            f"path = {json.dumps(f.path)}",
            f"row = {f.row}",
            f"severity = {json.dumps(f.severity)}",
            f"anchor = {json.dumps(f.anchor)}",
            'verdict = ""',
            f"why = {json.dumps('(to judge) ' + f.message)}",
            "",
        ]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
