"""Run two mpcheck installs over every corpus, real-bug checkout and fixture; diff the findings.

An engine refactoring or a speed-up must not change one finding. This script checks the
precision corpora (each directory under ``--corpora``, as ``bench/precision.py`` unpacks them),
both sides of every real-bug case (the checkouts under ``--realbugs``, run as
``bench/realbugs/score.py`` runs them) and the repository's ``fixtures/``, once with each
install, and diffs each pair of JSON reports with ``bench/compare_json.py``. It prints the
finding counts of each target, every difference, and the CPU seconds each side spent; it exits
1 on any difference (or a target with no stored report), 2 on bad input.

Usage::

    python bench/identical.py --before /work/wt/base/.venv/bin/mpcheck \\
        [--after .venv/bin/mpcheck] [--corpora /tmp/corpora] [--realbugs /tmp/realbugs] \\
        [--fixtures DIR] [--jobs 2] [--only corpora/timm,fixtures,...] [--save DIR]
    python bench/identical.py --before-dir /tmp/baseline/json [--after ...]

``--save DIR`` keeps the ``before`` reports (and their CPU seconds) so that later runs compare
with them (``--before-dir DIR``) instead of running the base install again. Filenames in the
reports are made relative to the directory each run starts in, so reports made from different
worktrees compare. A branch that adds fixtures sees their findings as differences: pass the
base worktree's ``--fixtures`` to compare on the base's fixtures only. On a shared machine the
CPU seconds of stored reports were measured under another load: compare them with care.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
INDEX = "index.json"  # in a --save directory: the CPU seconds of each stored report


def _load(name: str, path: Path) -> ModuleType:
    """A sibling bench script as a module (``bench/`` is no package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (dataclasses look their module up while building)
    spec.loader.exec_module(module)
    return module


compare_json = _load("compare_json", HERE / "compare_json.py")
score = _load("realbugs_score", HERE / "realbugs" / "score.py")

Report = list[dict[str, Any]]


class UsageError(Exception):
    """Bad input or a failed mpcheck run: one line on stderr, exit 2."""


@dataclass(frozen=True)
class Target:
    """One mpcheck run: ``mpcheck check *args`` started in ``cwd``."""

    key: str  # ``corpora/transformers``, ``realbugs/<case id>/buggy``, ``fixtures``
    cwd: Path
    args: tuple[str, ...]
    mirror: Path | None = None  # a real-bug side: where its checkout comes from

    def prepare(self) -> None:
        """Extract a real-bug checkout not there yet (only for a target that is run)."""
        if self.mirror is None or (self.cwd / ".mpcheck-realbug").is_file():
            return
        if not self.mirror.is_dir():
            raise UsageError(f"no checkout {self.cwd}, and no mirror {self.mirror} to make it")
        score.checkout(self.mirror, self.cwd.name, self.cwd.parent)


@dataclass(frozen=True)
class Run:
    report: Report
    cpu: float  # user + system seconds of mpcheck and the workers it reaped


def corpus_targets(corpora: Path, jobs: int) -> list[Target]:
    """Each corpus directory with ``precision.check``'s options. The run starts in the corpora
    root, so no worktree's pyproject or requirements decide the settings."""
    names = sorted(p.name for p in corpora.iterdir() if p.is_dir() and not p.name.startswith("."))
    options = ("--no-cache", "--output-format", "json", "--exit-zero", "-j", str(jobs))
    return [Target(f"corpora/{name}", corpora, (*options, name)) for name in names]


def realbug_targets(checkouts: Path, mirrors: Path) -> list[Target]:
    """Both sides of each real-bug case with ``score.findings``' options: the checkout of the
    commit (``score.checkout``'s layout) is the cwd, the case's file the one path."""
    targets = []
    for case in score.load_cases():
        mirror = mirrors / case.repo.replace("/", "+") / "repo"
        sides = (("buggy", case.buggy, case.path), ("fixed", case.fixed, case.fixed_path))
        for side, commit, path in sides:
            options = ("--output-format", "json", "--no-cache", path or case.path)
            key = f"realbugs/{case.id}/{side}"
            targets.append(Target(key, checkouts / commit, options, mirror))
    return targets


def fixture_targets(fixtures: Path, jobs: int) -> list[Target]:
    options = ("--no-cache", "--output-format", "json", "--exit-zero", "-j", str(jobs), ".")
    return [Target("fixtures", fixtures, options)]


def run(mpcheck: str, target: Target) -> Run:
    """``mpcheck check`` on the target, with the CPU seconds it spent. Runs are sequential, so
    the growth of this process's children times is this run's (its reaped workers included)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPCHECK_")}
    start = os.times()
    try:
        proc = subprocess.run(
            [mpcheck, "check", *target.args], cwd=target.cwd, env=env, capture_output=True
        )
    except OSError as error:
        raise UsageError(f"cannot run {mpcheck}: {error.strerror}") from None
    end = os.times()
    cpu = (end.children_user - start.children_user) + (end.children_system - start.children_system)
    if proc.returncode not in (0, 1):
        detail = " ".join(proc.stderr.decode(errors="replace").split())[-300:]
        raise UsageError(f"{mpcheck} exited {proc.returncode} on {target.key}: {detail}")
    return Run(relative(json.loads(proc.stdout or b"[]"), target.cwd), cpu)


def relative(report: Report, cwd: Path) -> Report:
    """The report with each filename relative to ``cwd`` (mpcheck prints absolute ones)."""
    for finding in report:
        path = Path(finding.get("filename") or "")
        if path.is_absolute() and path.is_relative_to(cwd):
            finding["filename"] = path.relative_to(cwd).as_posix()
    return report


class Store:
    """A directory of saved reports: ``<key>.json`` each, and their CPU seconds in INDEX."""

    def __init__(self, root: Path) -> None:
        self.root = root
        index = root / INDEX
        self.cpu: dict[str, float] = json.loads(index.read_text()) if index.is_file() else {}

    def keys(self) -> set[str]:
        return set(self.cpu)

    def get(self, key: str) -> Run | None:
        path = self.root / f"{key}.json"
        if not path.is_file():
            return None
        return Run(json.loads(path.read_text()), self.cpu.get(key, 0.0))

    def put(self, key: str, result: Run) -> None:
        """Store one report; the index is read again first, so that runs of disjoint ``--only``
        sets may save into one directory side by side."""
        path = self.root / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result.report, indent=2, sort_keys=True) + "\n")
        index = self.root / INDEX
        self.cpu = json.loads(index.read_text()) if index.is_file() else {}
        self.cpu[key] = round(result.cpu, 2)
        fresh = index.with_suffix(f".{os.getpid()}")
        fresh.write_text(json.dumps(self.cpu, indent=2, sort_keys=True) + "\n")
        fresh.replace(index)


def _executable(exe: str) -> str:
    """An absolute path: the runs start in other directories."""
    return str(Path(exe).resolve()) if os.sep in exe else exe


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    before = parser.add_mutually_exclusive_group(required=True)
    before.add_argument("--before", help="the mpcheck executable to compare to")
    before.add_argument("--before-dir", type=Path, help="reports stored by --save, instead")
    parser.add_argument("--after", default=str(Path(sys.executable).with_name("mpcheck")))
    parser.add_argument("--corpora", type=Path, default=Path("/tmp/corpora"))
    parser.add_argument("--realbugs", type=Path, default=Path("/tmp/realbugs"))
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--fixtures", type=Path, default=HERE.parent / "fixtures")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="", help="comma-separated keys or key prefixes")
    parser.add_argument("--save", type=Path, help="store the before reports here")
    parser.add_argument(
        "--save-only", action="store_true", help="with --save: run only before (a baseline)"
    )
    args = parser.parse_args(argv)
    if args.save and args.before_dir:
        parser.error("--save stores what --before runs; with --before-dir there is nothing new")
    if args.save_only and not args.save:
        parser.error("--save-only needs --save DIR")
    for name in ("corpora", "realbugs", "fixtures", "before_dir"):
        value = getattr(args, name)
        if value is not None and not value.is_dir():
            parser.error(f"--{name.replace('_', '-')}: no directory {value}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    try:
        return compare_all(args)
    except UsageError as error:
        print(f"identical: {error}", file=sys.stderr)
        return 2


def compare_all(args: argparse.Namespace) -> int:
    targets = [
        *corpus_targets(args.corpora.resolve(), args.jobs),
        *realbug_targets(args.realbugs.resolve(), args.mirrors),
        *fixture_targets(args.fixtures.resolve(), args.jobs),
    ]
    only = [name for name in args.only.split(",") if name]
    targets = [t for t in targets if not only or any(t.key.startswith(o) for o in only)]
    stored = Store(args.before_dir) if args.before_dir else None
    save = Store(args.save) if args.save else None
    after_exe = _executable(args.after)
    cpu = {"before": 0.0, "after": 0.0}
    differ: list[str] = []
    for target in targets:
        target.prepare()
        before = stored.get(target.key) if stored else run(_executable(args.before), target)
        if args.save_only and save and before:
            save.put(target.key, before)
            print(
                f"{target.key}: {len(before.report)} findings, CPU {before.cpu:.1f} s, saved",
                flush=True,
            )
            cpu["before"] += before.cpu
            continue
        after = run(after_exe, target)
        cpu["after"] += after.cpu
        if before is None:
            print(f"{target.key}: {len(after.report)} findings, NO STORED REPORT", flush=True)
            differ.append(target.key)
            continue
        cpu["before"] += before.cpu
        if save:
            save.put(target.key, before)
        diff = compare_json.compare(before.report, after.report)
        status = "DIFFERENT" if diff else "identical"
        counts = f"{len(before.report)} -> {len(after.report)} findings"
        times = f"CPU {before.cpu:.1f} s -> {after.cpu:.1f} s"
        print(f"{target.key}: {counts}, {times}, {status}", flush=True)
        for line in diff:
            print("  " + line)
        if diff:
            differ.append(target.key)
    if stored:  # a target the baseline has and this run lacks is a difference too
        wanted = {k for k in stored.keys() if not only or any(k.startswith(o) for o in only)}
        gone = sorted(wanted - {t.key for t in targets})
        for key in gone:
            print(f"{key}: stored, but not run now (its corpus or checkout is missing)")
        differ += gone
    source = f"stored in {args.before_dir}" if stored else "this run"
    if args.save_only:
        print(f"CPU seconds: before {cpu['before']:.1f}; {len(targets)} reports in {args.save}")
        return 0
    print(f"CPU seconds: before {cpu['before']:.1f} ({source}), after {cpu['after']:.1f}")
    if differ:
        print(f"{len(differ)} targets DIFFER: {', '.join(differ)}")
        return 1
    print(f"all {len(targets)} targets identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
