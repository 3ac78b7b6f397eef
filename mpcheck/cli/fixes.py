"""``mpcheck check --fix``, ``--diff`` and ``--add-noqa``: changing files (or stdin) and saying
what changed. The fix machinery is imported only when one of them is asked for."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from mpcheck.cli.args import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS
from mpcheck.cli.report import display_path
from mpcheck.diagnostics import Diagnostic
from mpcheck.files.source import SourceError, SourceFile, UnsafeEncoding
from mpcheck.pipeline.one_file import Options, check_source
from mpcheck.pipeline.pool import Job, check_files
from mpcheck.ruleset.rule import Rule
from mpcheck.settings.resolver import Project

# Imported where used, not here: a one-file check loads none of fixes (difflib, tempfile),
# notebooks, tracebacks or the step summary (tests/test_startup_imports.py holds this).


def _fixable_files(
    args: argparse.Namespace, diagnostics: list[Diagnostic]
) -> dict[str, list[Diagnostic]]:
    """The findings of each file that has at least one fix to apply."""
    from mpcheck.output.fixes import applicable

    by_file: dict[str, list[Diagnostic]] = {}
    for d in diagnostics:
        by_file.setdefault(d.filename, []).append(d)
    return {
        f: ds
        for f, ds in by_file.items()
        if any(applicable(d, unsafe=args.unsafe_fixes) for d in ds)
    }


MAX_ROUNDS = 10  # fix, re-check, fix again: overlapping fixes converge well before this


def fixed_until_stable(
    data: bytes,
    filename: str,
    rules: tuple[type[Rule], ...],
    options: Options,
    *,
    unsafe: bool,
    found: list[Diagnostic] | None = None,
) -> tuple[bytes, int, list[Diagnostic]]:
    """The file's bytes with every fix in, how many went in, and the findings left.

    A fix that overlaps another waits for the next round (as ruff's ``--fix`` loop), so the
    fixed text is checked again and fixed again until nothing changes, at most
    ``MAX_ROUNDS`` times: one ``--fix`` leaves nothing a second one would fix. ``found``
    are the findings of ``data`` when the caller has them.
    """
    from mpcheck.output.fixes import apply_fixes

    if found is None:
        found = check_source(data, filename, rules, options)
    total, seen = 0, {data}
    for _ in range(MAX_ROUNDS):
        source = SourceFile.decode(data)
        text, count = apply_fixes(source, found, unsafe=unsafe)
        new = source.encode(text)
        if not count or new in seen:  # nothing more, or fixes undoing each other
            break
        data, total = new, total + count
        seen.add(data)
        found = check_source(data, filename, rules, options)
    return data, total, found


def fix_files(
    args: argparse.Namespace, diagnostics: list[Diagnostic], jobs: Sequence[Job]
) -> tuple[list[Diagnostic], bool]:
    """Apply fixes file by file; re-check what changed. Also says whether a file failed.

    Each file is read again and checked again, so the fixes fit exactly the bytes that are
    written over (``write_fixed`` only writes if the file still holds them).
    """
    from mpcheck.files.notebook import fix_notebook_file
    from mpcheck.output.fixes import FileChanged, FixError, write_fixed

    job_of = {str(path): (rules, options) for path, rules, options in jobs}
    fixable = _fixable_files(args, diagnostics)
    out = [d for d in diagnostics if d.filename not in fixable]
    fixed_total, failed = 0, False
    for filename, old in fixable.items():
        rules, options = job_of[filename]
        path = Path(filename)
        try:
            if filename.endswith(".ipynb"):  # cells: the notebook's own writer
                fixed_total += fix_notebook_file(
                    path, old, unsafe=args.unsafe_fixes, rules=rules, options=options
                )  # checked again from the bytes it fixes, as below
                out += check_files([(path, *job_of[filename])], processes=1)
                continue
            data = path.read_bytes()
            new, count, left = fixed_until_stable(
                data, filename, rules, options, unsafe=args.unsafe_fixes
            )
            if new != data:
                write_fixed(path, data, new)
        except FileChanged as exc:
            print(f"mpcheck: warning: {exc}", file=sys.stderr)
            out += old
            continue
        except UnsafeEncoding as exc:  # left byte-identical: a warning, not a failure
            print(f"mpcheck: warning: {filename}: {exc}", file=sys.stderr)
            out += old
            continue
        except FileNotFoundError:  # (re-checking a fixed round reads the project around it)
            gone = "was removed before its fixes could be written"
            print(f"mpcheck: error: {filename}: {gone}", file=sys.stderr)
            out += old
            failed = True
            continue
        except (FixError, SourceError, OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            prefix = "" if isinstance(exc, FixError) else f"{filename}: "
            print(f"mpcheck: error: {prefix}{reason}", file=sys.stderr)
            out += old
            failed = True
            continue
        fixed_total += count
        out += left
    if fixed_total and not args.quiet:
        # errors and warnings alike: "findings", not ruff's "errors"
        print(f"Fixed {fixed_total} finding{'s' if fixed_total != 1 else ''}.", file=sys.stderr)
    return out, failed


def add_noqa(
    diagnostics: list[Diagnostic], jobs: Sequence[Job], project_of: dict[str, Project]
) -> int:
    """``--add-noqa`` (as ruff): a directive for every finding, written in place; exit 0.

    Each file is read and checked again, so the directives fit exactly the bytes that are
    written over (``write_fixed`` only writes if the file still holds them).
    """
    from mpcheck.files.notebook import check_notebook_bytes, with_noqa_notebook
    from mpcheck.output.add_noqa import NOT_SUPPRESSIBLE, with_noqa
    from mpcheck.output.fixes import FixError, write_fixed

    job_of = {str(path): (rules, options) for path, rules, options in jobs}
    pending = {
        d.filename for d in diagnostics if not d.suppressed and d.code not in NOT_SUPPRESSIBLE
    }
    total, failed = 0, False
    for filename in sorted(pending):
        rules, options = job_of[filename]
        project = project_of[filename]
        try:
            data = Path(filename).read_bytes()
            notebook = filename.endswith(".ipynb")
            check = check_notebook_bytes if notebook else check_source
            found = [
                d
                for d in check(data, filename, rules, replace(options, cache_dir=None))
                if project.reports(d.code)
            ]
            new, count = (with_noqa_notebook if notebook else with_noqa)(data, found)
            if count:
                write_fixed(Path(filename), data, new)
        except (SourceError, OSError, FixError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            print(f"mpcheck: error: {filename}: {reason}", file=sys.stderr)
            failed = True
            continue
        total += count
    noun = "directive" if total == 1 else "directives"
    print(f"Added {total} noqa {noun}.", file=sys.stderr)
    return EXIT_ERROR if failed else EXIT_CLEAN


def diff_files(
    args: argparse.Namespace,
    diagnostics: list[Diagnostic],
    cwd: Path,
    jobs: Sequence[Job] = (),
) -> int:
    """``--diff`` (as ruff): print what ``--fix`` would change, write nothing.

    Only the diff goes to stdout, so it can be piped to ``git apply``; exit 1 when there is
    something to fix, 2 when a file could not be read. As with ``--fix``, each file is checked
    again on the bytes read: the edits never come from a stale or crafted cache entry.
    """
    job_of = {str(path): (rules, options) for path, rules, options in jobs}
    from mpcheck.files.notebook import fix_notebook
    from mpcheck.output.fixes import apply_fixes, unified_diff

    job_of = {str(path): (rules, options) for path, rules, options in jobs}
    total, failed = 0, False
    for filename, diags in sorted(_fixable_files(args, diagnostics).items()):
        try:
            data = Path(filename).read_bytes()
            if filename.endswith(".ipynb"):
                text, count = fix_notebook(data.decode("utf-8"), diags, unsafe=args.unsafe_fixes)
                new = text.encode("utf-8")
            elif filename in job_of:  # as --fix writes it: until no fix is left
                new, count, _ = fixed_until_stable(
                    data, filename, *job_of[filename], unsafe=args.unsafe_fixes
                )
            else:
                source = SourceFile.decode(data)
                diags = check_source(data, filename, *job_of[filename])
                text, count = apply_fixes(source, diags, unsafe=args.unsafe_fixes)
                new = source.encode(text)
        except UnsafeEncoding as exc:
            print(f"mpcheck: warning: {filename}: {exc}", file=sys.stderr)
            continue
        except (SourceError, OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            print(f"mpcheck: error: {filename}: {reason}", file=sys.stderr)
            failed = True
            continue
        total += count
        sys.stdout.buffer.write(unified_diff(data, new, display_path(filename, cwd)))
    sys.stdout.flush()
    if not args.quiet:
        noun = "finding" if total == 1 else "findings"
        print(
            f"Would fix {total} {noun}." if total else "No findings would be fixed.",
            file=sys.stderr,
        )
    if failed:
        return EXIT_ERROR
    return EXIT_FINDINGS if total else EXIT_CLEAN


def fix_stdin(
    args: argparse.Namespace,
    data: bytes,
    filename: str,
    diagnostics: list[Diagnostic],
    rules: tuple[type[Rule], ...],
    options: Options,
) -> int:
    """With stdin, --fix prints the fixed source (as ruff does) and reports what is left.

    The output is the input's bytes with the edits in them; input that cannot be decoded is
    echoed unchanged (the pipe must not lose it) with an error.
    """
    from mpcheck.output.fixes import unified_diff

    if filename.endswith(".ipynb"):  # cells, written back as the notebook's own JSON
        return _fix_stdin_notebook(args, data, filename, diagnostics, rules, options)
    try:
        new, _, left = fixed_until_stable(
            data, filename, rules, options, unsafe=args.unsafe_fixes, found=diagnostics
        )
    except SourceError as exc:
        if not args.diff:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        print(f"mpcheck: error: {filename}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.buffer.write(unified_diff(data, new, "-") if args.diff else new)
    sys.stdout.flush()
    left = [d for d in left if not d.suppressed]
    return EXIT_FINDINGS if left and not args.exit_zero else EXIT_CLEAN


def _fix_stdin_notebook(
    args: argparse.Namespace,
    data: bytes,
    filename: str,
    diagnostics: list[Diagnostic],
    rules: tuple[type[Rule], ...],
    options: Options,
) -> int:
    from mpcheck.files.notebook import NotebookError, check_notebook_bytes, fix_notebook_bytes
    from mpcheck.output.fixes import unified_diff

    try:
        new, _ = fix_notebook_bytes(data, diagnostics, unsafe=args.unsafe_fixes)
    except NotebookError:
        new = data  # not a notebook: echoed unchanged, its MPC001 reported below
    sys.stdout.buffer.write(unified_diff(data, new, "-") if args.diff else new)
    sys.stdout.flush()
    left = [d for d in check_notebook_bytes(new, filename, rules, options) if not d.suppressed]
    return EXIT_FINDINGS if left and not args.exit_zero else EXIT_CLEAN
