"""Score mpcheck on real mixed-precision fix commits: caught before the fix, quiet after it.

Fixtures we write ourselves prove that a rule does what we meant; they cannot tell whether we
meant the right thing. ``cases.toml`` holds the coordinates of real fix commits from public
repositories (repository, buggy and fixed commit, path, line ranges, rule family). This script
materialises each side of each fix from a local git mirror as a user's checkout has it (every
file of the commit up to 2 MB that the mirror holds: the code, so imports of sibling modules
resolve, and the docs, configurations, scripts and packaging that say what runs it and whether
it is an installable package; ``--python-only`` keeps only the ``.py`` files, the harness of
the passes before the forty-third), runs ``mpcheck check`` on
the file as a user would (default settings, project root = the checkout), and reports per
family: caught in the buggy file at the right lines, and still flagged at those lines after
the fix.

A finding counts when its rule is in the case's family group (1xx dtype flow, 2xx scaler and
optimizer, 3xx numerics, 4xx autocast) and its line is in the case's line ranges; the exact
code is reported too. A cross-file case is also caught by a finding in one of its other files
(``other_paths``: where the value is used and raises) whose dtype origin, a related location,
lies at the case's lines: the hazard reported where it raises, naming where its dtype came
from (shown as ``CODE@other/path.py``). Nothing of the third-party source is kept here:
checkouts live under ``--dir`` (default: a temporary directory).

Usage::

    python bench/realbugs/score.py [--dir /tmp/realbugs] [--mirrors /work/.mirror]
                                   [--markdown] [--only ID ...] [--cases FILE] [--python-only]
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
# The console script, not ``python -m``: the checkout is the cwd and must not shadow imports.
MPCHECK = str(Path(sys.executable).with_name("mpcheck"))


@dataclass(frozen=True)
class Case:
    id: str
    repo: str
    buggy: str
    fixed: str
    path: str
    buggy_lines: list[list[int]]
    fixed_lines: list[list[int]]
    family: str
    note: str
    fixed_path: str = ""
    cross_file: bool = False
    other_paths: list[str] = field(default_factory=list)
    symptom: str = "raises"
    source: str = ""


@dataclass
class Outcome:
    case: Case
    caught: list[tuple[str, int]]  # (code, line) of the buggy-side findings in range
    still: list[tuple[str, int]]  # the same for the fixed side
    missing: str = ""  # why the case could not be run

    @property
    def exact(self) -> bool:
        return any(code.partition("@")[0] == self.case.family for code, _ in self.caught)


def load_cases(path: Path = HERE / "cases.toml") -> list[Case]:
    data = tomllib.loads(path.read_text())
    return [Case(**entry) for entry in data["case"]]


# A file larger than this is data (weights, archives, media), never what mpcheck reads.
MAX_FILE = 2_000_000


def checkout(mirror: Path, commit: str, root: Path, python_only: bool = False) -> Path:
    """``commit`` as a user's checkout has it, under ``root/full-<commit>``: its files of at
    most :data:`MAX_FILE` bytes that the mirror holds (a mirror may leave large blobs out);
    with ``python_only``, its ``.py`` files under ``root/<commit>``. Extracted once, then
    reused."""
    target = root / (commit if python_only else f"full-{commit}")
    stamp = target / ".mpcheck-realbug"
    if not stamp.is_file():
        target.mkdir(parents=True, exist_ok=True)
        (_python_files if python_only else _all_files)(mirror, commit, target)
        stamp.write_text(commit)
    return target


def _git(mirror: Path, *args: str, data: bytes = b"") -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={mirror}", *args], input=data, check=True, capture_output=True
    ).stdout


def _all_files(mirror: Path, commit: str, target: Path) -> None:
    paths: list[tuple[str, str]] = []  # (object, path)
    for entry in _git(mirror, "ls-tree", "-r", "-l", "-z", commit).split(b"\0"):
        meta, _, raw = entry.partition(b"\t")
        fields = meta.split()
        if len(fields) != 4 or fields[1] != b"blob" or fields[0] == b"120000":
            continue  # (a submodule, a symlink or the listing's end)
        if not fields[3].isdigit() or int(fields[3]) > MAX_FILE:
            continue
        paths.append((fields[2].decode(), raw.decode(errors="surrogateescape")))
    batch = _git(mirror, "cat-file", "--batch", data="".join(f"{o}\n" for o, _ in paths).encode())
    at = 0
    for _, name in paths:
        end = batch.index(b"\n", at)
        header = batch[at:end].split()
        at = end + 1
        if len(header) < 3 or header[1] != b"blob":  # ``<oid> missing``
            continue
        size = int(header[2])
        data, at = batch[at : at + size], at + size + 1
        dest = target / name
        if ".." in Path(name).parts or not dest.resolve().is_relative_to(target.resolve()):
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)


def _python_files(mirror: Path, commit: str, target: Path) -> None:
    listing = _git(mirror, "ls-tree", "-r", "-z", "--name-only", commit).split(b"\0")
    wanted = [name.decode() for name in listing if name.endswith(b".py")]
    if wanted:
        archive = _git(mirror, "archive", "--format=tar", commit, "--", *wanted)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(target, filter="data")


def findings(tree: Path, path: str) -> list[tuple[str, int]]:
    """``mpcheck check path`` in ``tree`` as a user runs it: (code, row) of each finding."""
    return [(code, row) for code, row, _ in report(tree, path)]


def report(tree: Path, path: str) -> list[tuple[str, int, list[tuple[str, int]]]]:
    """``mpcheck check path`` in ``tree``: (code, row, related) of each finding, ``related``
    the (path relative to ``tree``, row) of each related location in another file."""
    proc = subprocess.run(
        [MPCHECK, "check", "--output-format", "json", "--no-cache", path],
        cwd=tree,
        capture_output=True,
        text=True,
    )
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"mpcheck exited {proc.returncode}: {proc.stderr.strip()[:300]}")
    out = []
    for d in json.loads(proc.stdout or "[]"):
        related = []
        for r in d.get("related", ()):
            if r.get("filename"):
                name = Path(r["filename"])
                rel = name.relative_to(tree.resolve()) if name.is_absolute() else name
                related.append((rel.as_posix(), r["location"]["row"]))
        out.append((d["code"], d["location"]["row"], related))
    return out


def in_ranges(
    found: list[tuple[str, int]], family: str, ranges: list[list[int]]
) -> list[tuple[str, int]]:
    group = family[3]
    return [
        (code, row)
        for code, row in found
        if code[3] == group and any(lo <= row <= hi for lo, hi in ranges)
    ]


def traced(
    tree: Path, others: list[str], path: str, family: str, ranges: list[list[int]]
) -> list[tuple[str, int]]:
    """Findings of the case's family in its other files whose dtype origin (a related
    location) lies at the case's lines: a cross-file hazard reported where it raises, saying
    where the dtype came from (the header's "the call that raises"), as ``path:row`` codes."""
    group = family[3]
    out = []
    for other in others:
        if not (tree / other).is_file():
            continue
        for code, row, related in report(tree, other):
            if code[3] != group:
                continue
            if any(r == path and any(lo <= n <= hi for lo, hi in ranges) for r, n in related):
                out.append((f"{code}@{other}", row))
    return out


def score(case: Case, root: Path, mirrors: Path, python_only: bool = False) -> Outcome:
    mirror = mirrors / case.repo.replace("/", "+") / "repo"
    if not mirror.is_dir():
        return Outcome(case, [], [], missing=f"no mirror {mirror}")
    before = checkout(mirror, case.buggy, root, python_only)
    after = checkout(mirror, case.fixed, root, python_only)
    caught = in_ranges(findings(before, case.path), case.family, case.buggy_lines)
    fixed_path = case.fixed_path or case.path
    still = in_ranges(findings(after, fixed_path), case.family, case.fixed_lines)
    if case.cross_file:
        caught += traced(before, case.other_paths, case.path, case.family, case.buggy_lines)
        still += traced(after, case.other_paths, fixed_path, case.family, case.fixed_lines)
    return Outcome(case, caught, still)


def family_table(outcomes: list[Outcome]) -> list[str]:
    head = "| family | kind | cases | caught at the right lines | exact code | flagged after fix |"
    rows = [head]
    rows.append("|---|---|---:|---:|---:|---:|")
    buckets: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        kind = "cross-file" if outcome.case.cross_file else "single-file"
        buckets[(outcome.case.family, kind)].append(outcome)
        buckets[("all", kind)].append(outcome)
    for (family, kind), group in sorted(buckets.items(), key=lambda kv: (kv[0][0] == "all", kv[0])):
        n = len(group)
        caught = sum(bool(o.caught) for o in group)
        exact = sum(o.exact for o in group)
        still = sum(bool(o.still) for o in group)
        name = f"**{family}**" if family == "all" else family
        rows.append(f"| {name} | {kind} | {n} | {caught} ({caught / n:.0%}) | {exact} | {still} |")
    return rows


def case_table(outcomes: list[Outcome]) -> list[str]:
    rows = ["| case | family | kind | buggy side | fixed side |", "|---|---|---|---|---|"]
    for o in outcomes:
        kind = "cross-file" if o.case.cross_file else "single-file"
        got = ", ".join(f"{c}:{r}" for c, r in o.caught) or (
            "n/a: " + o.missing if o.missing else "missed"
        )
        left = ", ".join(f"{c}:{r}" for c, r in o.still) or "quiet"
        rows.append(f"| {o.case.id} | {o.case.family} | {kind} | {got} | {left} |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, help="where checkouts are kept between runs")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument(
        "--markdown", action="store_true", help="print the tables for docs/real-world.md"
    )
    parser.add_argument("--only", nargs="*", default=[], help="case ids to run")
    parser.add_argument(
        "--cases",
        type=Path,
        default=HERE / "cases.toml",
        help="the coordinates to score (default: cases.toml; another: candidates under review)",
    )
    parser.add_argument(
        "--python-only",
        action="store_true",
        help="check out only the .py files (the harness before the forty-third pass)",
    )
    args = parser.parse_args()
    cases = [c for c in load_cases(args.cases) if not args.only or c.id in args.only]
    with tempfile.TemporaryDirectory() as tmp:
        root = args.dir or Path(tmp)
        outcomes = []
        for case in cases:
            outcome = score(case, root, args.mirrors, args.python_only)
            outcomes.append(outcome)
            mark = "caught" if outcome.caught else (outcome.missing or "missed")
            after = f"; still {outcome.still}" if outcome.still else ""
            print(f"{case.id:28} {case.family} {mark}{after}", file=sys.stderr)
    runnable = [o for o in outcomes if not o.missing]
    print("\n".join(family_table(runnable)))
    if args.markdown:
        print()
        print("\n".join(case_table(outcomes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
