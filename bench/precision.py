"""Run mpcheck over the pinned precision corpora and compare every finding with its verdict.

A linter earns trust by what it does not say. After each engine change, this script checks the
library and training-code corpora of ``bench/corpora.toml`` and matches each finding with the
verdicts of ``bench/verdicts.toml`` (rule, file, and the text of the flagged line, so verdicts
survive unrelated edits). It prints what is new and still needs a verdict, what disappeared,
and the precision table of ``docs/real-world.md``; it exits 1 while any finding lacks a verdict.

Usage::

    python bench/precision.py --dir /tmp/mpcheck-corpus [--group libraries] [--only a,b]
                              [--markdown] [--sealed [--batch sealed2]]

Corpora marked ``sealed = true`` are skipped unless ``--sealed`` is given, which runs only the
sealed batch ``--batch`` (a corpus group: ``sealed``, the default, ``sealed2``, ``sealed3``,
``sealed4``, ``sealed5``, ``sealed6`` or ``sealed7``) against its own verdicts
(``bench/sealed/first-run.toml``, ``bench/sealed/<batch>/first-run.toml``), printing their
details: only at the end.
``bench/sealed/score.py`` scores them and prints aggregates only.

Wheels come from the package index (``pip download``); repositories from local git mirrors
(``--mirrors``, default ``/work/.mirror``, one ``owner+name/repo`` directory per repository,
as the search tool's ``fetch`` leaves them). A repository is unpacked as a user's checkout has
it: its ``.py`` files and notebooks, which mpcheck checks, and its own words of up to 2 MB
(configurations, scripts, READMEs, packaging), which tell mpcheck what the project builds,
installs and runs; data and binaries are left out. A wheel unpacks its ``.py`` files only.
Nothing from the corpora is ever committed here.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
REAL = {"bug", "latent bug", "real"}
# What a repository corpus unpacks: named one by one, so a blob the mirror lacks (LFS, a large
# binary) is never read, and a repository without notebooks is no pathspec error. Without its
# configurations and docs a checkout is not the one a user runs mpcheck on: a module named only
# in a YAML config would look unused, a pyproject-only package like an application.
SOURCES = (".py", ".ipynb")
WORDS = (".yaml", ".yml", ".json", ".toml", ".cfg", ".ini", ".sh", ".md", ".rst", ".txt")
MAX_WORDS = 2 * 1024 * 1024  # bytes: a larger "text" file is data
# What a premise names as its support (issue 36: mpcheck.project.closed.Opening), told by
# the words of its clause: (words, kind), the first match wins
PREMISE_KINDS = (
    ("the project builds no model itself", "no application"),
    ("changes the default dtype", "default dtype"),
    ("(it takes `", "reached: a wrapper taking it"),
    ("the models handed to a wrapper may be cast by", "wrapper"),
    ("a model of unknown class is cast at", "unknown class"),
    ("from configurations that are not here", "absent configurations"),
    ("it may be what is cast at", "reached: a cast of some classes"),
    ("a configuration loader may build it", "reached: a configuration loader"),
    ("may cast it", "reached: a use that may cast"),
    ("builds parts in a dtype it computes", "reached: a computed dtype"),
    ("is cast to half by", "reached: a cast class's base or part"),
    ("which its users run in half", "reached: a library base"),
    ("the model whose outputs", "unnamed: a sampler"),
)


@dataclass(frozen=True)
class Corpus:
    name: str
    group: str
    wheel: str = ""  # ``transformers==5.24.0``
    repo: str = ""  # ``owner/name``
    commit: str = ""
    subdir: str = ""
    sealed: bool = False  # measured only at the end (issue 36): never tuned on


@dataclass(frozen=True)
class Finding:
    code: str
    path: str  # ``<corpus>/<path inside it>``
    row: int
    anchor: str  # the flagged line, whitespace-normalised
    message: str
    severity: str = ""  # ``error`` or ``warning``


def load_corpora(group: str, sealed: bool = False) -> list[Corpus]:
    """The corpora of ``group``: the sealed ones only when ``sealed``, and then only they.

    Sealed corpora stay out of every tuning run, so that their findings measure the engine on
    code it was not fitted to.
    """
    data = tomllib.loads((HERE / "corpora.toml").read_text())
    corpora = [Corpus(**entry) for entry in data["corpus"]]
    return [c for c in corpora if group in ("all", c.group) and c.sealed == sealed]


def sealed_dir(batch: str) -> Path:
    """Where a sealed batch keeps its first run's verdicts and its hazards.

    The first batch predates the others and keeps its files in ``bench/sealed/`` itself.
    """
    return HERE / "sealed" if batch == "sealed" else HERE / "sealed" / batch


def materialise(corpus: Corpus, root: Path, mirrors: Path) -> Path | None:
    """The corpus unpacked under ``root``; None (with a message) when its mirror is missing."""
    target = root / corpus.name
    stamp = target / ".mpcheck-corpus"
    # a repository unpacked before notebooks were is unpacked again
    sources = {"sources": SOURCES, "words": WORDS} if corpus.repo else {}
    # (``sealed`` changes what runs, not what is unpacked: corpora unpacked before it stay valid)
    pinned = {k: v for k, v in corpus.__dict__.items() if k != "sealed"}
    spec = json.dumps({**pinned, **sources}, sort_keys=True)
    if stamp.is_file() and stamp.read_text() == spec:
        return target
    if corpus.wheel:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp]
            subprocess.run([*cmd, corpus.wheel], check=True)
            (wheel,) = Path(tmp).glob("*.whl")
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(target, [n for n in zf.namelist() if n.endswith(".py")])
    else:
        mirror = mirrors / corpus.repo.replace("/", "+") / "repo"
        if not mirror.is_dir():
            print(f"missing mirror for {corpus.repo}: fetch it first ({mirror})", file=sys.stderr)
            return None
        listing = ["git", "-C", str(mirror), "ls-tree", "-r", "-l", "-z", corpus.commit]
        entries = subprocess.run(listing, check=True, capture_output=True).stdout.decode()
        prefix = f"{corpus.subdir}/" if corpus.subdir else ""
        blobs = {}  # path -> object id, of the sources and the project's words only
        for entry in filter(None, entries.split("\0")):
            meta, name = entry.split("\t", 1)
            _, kind, oid, size = meta.split()
            if kind != "blob" or not name.startswith(prefix):
                continue
            # (a blob the snapshot lacks has no size: ``BAD``; it is left out below anyway)
            small = size.isdigit() and int(size) <= MAX_WORDS
            if name.endswith(SOURCES) or (name.endswith(WORDS) and small):
                blobs[name] = oid
        paths = _present(mirror, blobs)
        if not paths:  # (``git archive`` with no path would take every blob)
            print(f"no sources in {corpus.repo}@{corpus.commit} {prefix}", file=sys.stderr)
            return None
        git = ["git", "--literal-pathspecs", "-C", str(mirror)]
        archive = [*git, "archive", corpus.commit, "--", *paths]
        data = subprocess.run(archive, check=True, capture_output=True).stdout
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile() as tmp:
            tmp.write(data)
            tmp.seek(0)
            with tarfile.open(fileobj=tmp) as tar:
                tar.extractall(target, filter="data")
    stamp.write_text(spec)
    return target


def _present(mirror: Path, blobs: dict[str, str]) -> list[str]:
    """The paths of ``blobs`` (path -> object id) whose content the mirror holds.

    A snapshot lacks its largest files (a notebook with embedded audio, say): ``git archive``
    would fail on the whole corpus for one such file.
    """
    check = ["git", "-C", str(mirror), "cat-file", "--batch-check=%(objectname) %(objecttype)"]
    query = "".join(f"{oid}\n" for oid in blobs.values())
    answer = subprocess.run(check, input=query, check=True, capture_output=True, text=True)
    held = {line.split()[0] for line in answer.stdout.splitlines() if line.endswith(" blob")}
    return [path for path, oid in blobs.items() if oid in held]


def normalise(line: str) -> str:
    return " ".join(line.split())


def check(root: Path, corpus: str, jobs: int, python: str = sys.executable) -> list[Finding]:
    """The findings of ``python -m mpcheck`` (another venv's engine when given) on one corpus.
    ``-P``: ``-m`` would put the working directory first on ``sys.path``, so run from a
    checkout it would import that checkout's mpcheck, not the given interpreter's."""
    cmd = [python, "-P", "-m", "mpcheck", "check", "--no-cache", str(root / corpus)]
    cmd += ["--output-format", "json", "--exit-zero", "-j", str(jobs)]
    run = subprocess.run(cmd, capture_output=True, text=True, check=True)
    findings = []
    for item in json.loads(run.stdout):
        path = Path(item["filename"])
        row = item["location"]["row"]
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        if item.get("cell"):  # a notebook's row counts in its cell (1-based among all cells)
            source = json.loads("\n".join(lines))["cells"][item["cell"] - 1]["source"]
            lines = ("".join(source) if isinstance(source, list) else source).splitlines()
        anchor = normalise(lines[row - 1]) if row <= len(lines) else ""
        rel = path.relative_to(root).as_posix()
        severity = item.get("severity", "")
        findings.append(Finding(item["code"], rel, row, anchor, item["message"], severity))
    return findings


def premise_kind(message: str, severity: str) -> str:
    """What a finding's premise names as its support ("evidence": an error, resting on
    evidence; "other warning": a warning stating no module premise; "unnamed": a premise
    naming nothing)."""
    if severity == "error":
        return "evidence"
    if "(latent:" not in message:
        return "other warning"
    found = next((kind for words, kind in PREMISE_KINDS if words in message), None)
    if found is not None:
        return found
    subject = message.partition("(latent: raises if `")[2][:1]
    return "unnamed: a class" if subject.isupper() else "unnamed: a function or other"


def lines_of(root: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in root.rglob("*.py"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="where corpora are unpacked")
    parser.add_argument("--group", default="all", help="libraries, training or all")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--markdown", action="store_true", help="print the docs tables")
    parser.add_argument("--only", default="", help="comma-separated corpus names to run")
    parser.add_argument(
        "--sealed", action="store_true", help="run only the sealed corpora (issue 36), at the end"
    )
    parser.add_argument(
        "--batch", default="sealed", help="with --sealed: the sealed batch (corpus group) to run"
    )
    args = parser.parse_args(argv)
    only = {name for name in args.only.split(",") if name}

    # the sealed set keeps its verdicts apart, unread while the engine is tuned
    source = sealed_dir(args.batch) / "first-run.toml" if args.sealed else HERE / "verdicts.toml"
    verdicts = tomllib.loads(source.read_text()).get("verdict", [])
    known = {(v["rule"], v["path"], normalise(v["anchor"])): v for v in verdicts}
    seen: set[tuple[str, str, str]] = set()
    per_rule: Counter[tuple[str, str]] = Counter()
    per_premise: Counter[tuple[str, str]] = Counter()
    rows, untriaged = [], []
    # (a sealed batch is a group of its own: it runs alone, never with another batch)
    for corpus in load_corpora(args.batch if args.sealed else args.group, args.sealed):
        if only and corpus.name not in only:
            continue
        root = materialise(corpus, args.dir, args.mirrors)
        if root is None:
            continue
        findings = check(args.dir, corpus.name, args.jobs)
        lines = lines_of(root)
        real = 0
        for f in findings:
            key = (f.code, f.path, f.anchor)
            verdict = known.get(key)
            if verdict is None:
                untriaged.append(f)
                continue
            seen.add(key)
            real += verdict["verdict"] in REAL
            judged = "real" if verdict["verdict"] in REAL else "false"
            per_rule[(f.code, judged)] += 1
            if f.code != "MPC404":  # (the deprecated-API rule states no dtype premise)
                per_premise[(premise_kind(f.message, f.severity), judged)] += 1
        rows.append((corpus, lines, len(findings), real))
        # progress as each corpus ends: a long run is readable (and stoppable) before its end
        fresh = sum(1 for f in findings if (f.code, f.path, f.anchor) not in known)
        print(f"{corpus.name}: {len(findings)} findings, {real} real, {fresh} new", file=sys.stderr)

    gone = [v for k, v in known.items() if k not in seen and _in_run(v, rows)]
    _print_corpora(rows, args.markdown)
    _print_rules(per_rule, args.markdown)
    _print_premises(per_premise)
    for f in untriaged:
        print(f"NEW {f.code} {f.path}:{f.row}: {f.message}")
    for v in gone:
        print(f"GONE {v['rule']} {v['path']} ({v['verdict']}): {v['anchor']}")
    return 1 if untriaged else 0


def _in_run(verdict: dict[str, str], rows: list[tuple[Corpus, int, int, int]]) -> bool:
    return any(verdict["path"].startswith(c.name + "/") for c, *_ in rows)


def _print_corpora(rows: list[tuple[Corpus, int, int, int]], markdown: bool) -> None:
    print("| corpus | group | lines | findings | real | per 100k lines |")
    print("|---|---|---|---|---|---|")
    for corpus, lines, count, real in rows:
        density = 100_000 * count / lines if lines else 0.0
        source = corpus.wheel or f"{corpus.repo}@{corpus.commit[:7]} {corpus.subdir}".strip()
        name = source if markdown else corpus.name
        print(f"| {name} | {corpus.group} | {lines:,} | {count} | {real} | {density:.1f} |")
    total = sum(r[2] for r in rows)
    real = sum(r[3] for r in rows)
    share = f"{100 * real / total:.0f} %" if total else "n/a"
    print(f"| **all** | | {sum(r[1] for r in rows):,} | {total} | {real} ({share}) | |")
    print()


def _print_rules(per_rule: Counter[tuple[str, str]], markdown: bool) -> None:
    print("| rule | real | false alarms |")
    print("|---|---|---|")
    for code in sorted({code for code, _ in per_rule}):
        print(f"| {code} | {per_rule[(code, 'real')]} | {per_rule[(code, 'false')]} |")
    print()


def _print_premises(per_premise: Counter[tuple[str, str]]) -> None:
    """Dtype findings by what their premise names as support: where false alarms come from
    (the sealed scorer prints the same split for code nobody tuned on)."""
    print("| premise support | real | false alarms |")
    print("|---|---|---|")
    for kind in sorted({kind for kind, _ in per_premise}):
        print(f"| {kind} | {per_premise[(kind, 'real')]} | {per_premise[(kind, 'false')]} |")
    print()


if __name__ == "__main__":
    sys.exit(main())
