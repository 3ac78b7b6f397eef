"""``mpcheck check``: from the arguments to the exit status, through configuration, the
files' analyses (cached), baselines, changed lines, fixes and the report."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import fields
from functools import partial
from pathlib import Path

from mpcheck.cli.args import EXIT_CLEAN, EXIT_ERROR, UsageError
from mpcheck.cli.fixes import add_noqa, diff_files, fix_files, fix_stdin
from mpcheck.cli.report import (
    display_path,
    emit,
    extra_outputs,
    write_stdout,
)
from mpcheck.cli.terminal import Progress
from mpcheck.diagnostics import Diagnostic
from mpcheck.files.discovery import discover
from mpcheck.output.reporters import FORMATS
from mpcheck.pipeline.one_file import Options, check_source
from mpcheck.pipeline.pool import check_files
from mpcheck.ruleset.rule import Rule, all_rules
from mpcheck.settings.config import with_overrides
from mpcheck.settings.resolver import Project, Resolver
from mpcheck.settings.torch_target import format_version, parse_version

# Imported where used, not here: a one-file check loads none of fixes (difflib, tempfile),
# notebooks, tracebacks or the step summary (tests/test_startup_imports.py holds this).


def _resolver(args: argparse.Namespace, cwd: Path, rules: Sequence[type[Rule]]) -> Resolver:
    """Each file's configuration (or ``--config``'s for all), with the options layered on top."""
    config = args.config
    if config is not None and not config.is_file():
        raise UsageError(f"{config}: no such configuration file")
    overrides = partial(
        with_overrides,
        select=args.select,
        extend_select=args.extend_select,
        ignore=args.ignore,
        exclude=args.exclude,
        extend_exclude=args.extend_exclude,
        max_file_size=args.max_file_size,
        include_notebooks=args.include_notebooks,
        target_torch_version=_target_torch(args.target_torch_version),
        follow_imports=args.follow_imports,
        cwd=cwd,
    )
    return Resolver(cwd, config=config, overrides=overrides, rules=rules)


def _target_torch(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    version = parse_version(value)
    if version is None:
        raise UsageError(
            f"--target-torch-version: expected a torch version such as 2.1, got {value!r}"
        )
    return version


def _options(
    project: Project,
    cache: Path | None,
    file: Path,
    given: Sequence[Path] = (),
    seen: dict[Path, bool] | None = None,
) -> Options:
    from mpcheck.settings.roots import analysis_root

    root = analysis_root(file, Path.cwd(), given, seen)
    return Options.from_settings(
        project.settings, str(root), cache_dir=None if cache is None else str(cache)
    )


def cache_directory(args: argparse.Namespace, resolver: Resolver, cwd: Path) -> Path:
    """``--cache-dir``/``MPCHECK_CACHE_DIR``, else the ``cache-dir`` of the configuration
    governing the current directory, else ``.mpcheck_cache`` at that configuration's root."""
    if args.cache_dir is not None:
        return Path(os.path.abspath(args.cache_dir))
    from mpcheck.pipeline.cache import CACHE_DIR_NAME

    settings = resolver.settings_for(str(cwd))
    return settings.cache_dir or Path(os.path.abspath(settings.root)) / CACHE_DIR_NAME


def _usable_cache(args: argparse.Namespace, resolver: Resolver, cwd: Path) -> Path | None:
    """The cache directory to use, None with ``--no-cache``; one that cannot be written is a
    warning, and the run goes on without a cache."""
    if args.no_cache:
        return None
    directory = cache_directory(args, resolver, cwd)
    from mpcheck.pipeline.cache_dir import CacheDirError, claim

    # a file of this process's own (not ``tempfile``: it imports shutil, random, bz2, lzma)
    probe = directory / f".probe-{os.getpid()}"
    try:
        claim(directory)  # never a directory that held anything but mpcheck's cache
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        os.close(os.open(probe, flags, 0o600))
        os.unlink(probe)
    except CacheDirError as exc:
        print(f"mpcheck: warning: cannot use the cache: {exc}", file=sys.stderr)
        return None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        print(f"mpcheck: warning: cannot use the cache {directory} ({reason})", file=sys.stderr)
        return None
    return directory


def _refuse_output_onto_input(args: argparse.Namespace, files: Sequence[Path]) -> None:
    """``-o a.py``, ``--extra-output json:a.py`` or ``--write-baseline a.py`` where ``a.py``
    is being checked would overwrite the source with a report: a usage error, before the run."""
    outputs = [("-o", args.output_file), ("--write-baseline", args.write_baseline)]
    outputs += [("--extra-output", path) for _, path in extra_outputs(args.extra_output)]
    wanted = {os.path.realpath(path): option for option, path in outputs if path is not None}
    if not wanted:
        return
    for file in files:
        option = wanted.get(os.path.realpath(file))
        if option is not None:
            raise UsageError(f"{option} {file}: it is one of the files being checked")


def _print_counts() -> None:
    """``--verbose``: how many files were analysed and how many came from the cache."""
    from mpcheck.pipeline.pool import last_run

    total = sum(last_run.values())
    parts = [f"{last_run[k]} {k}" for k in ("analysed", "cached", "unreadable") if last_run[k]]
    files = "file" if total == 1 else "files"
    print(f"mpcheck: {total} {files}: {', '.join(parts) or 'none'}", file=sys.stderr)


def _fresh_run() -> None:
    """Forget what an earlier run in this process learnt: the files may have changed."""
    for name in ("mpcheck.pipeline.incremental", "mpcheck.project.summarise"):
        module = sys.modules.get(name)
        if module is not None:
            module.forget()


def run_check(args: argparse.Namespace) -> int:
    if args.output_format not in FORMATS:  # a bad MPCHECK_OUTPUT_FORMAT skips argparse's check
        raise UsageError(
            f"unknown output format `{args.output_format}` (from MPCHECK_OUTPUT_FORMAT); "
            f"expected one of: {', '.join(FORMATS)}"
        )
    extra_outputs(args.extra_output)  # a mistake there is reported before the run
    if sys.stdout is None and (args.output_file is None or args.diff):  # ``>&-``
        raise UsageError("standard output is closed; redirect it, or write the report with -o")
    if args.add_noqa and (args.fix or args.diff):  # each would edit what the other reads
        option = "--fix" if args.fix else "--diff"
        raise UsageError(f"--add-noqa cannot be combined with {option}")
    try:
        cwd = Path.cwd()
    except FileNotFoundError:
        raise UsageError("the current directory no longer exists") from None
    rules = all_rules()
    resolver = _resolver(args, cwd, rules)
    paths: list[Path] = args.paths or [Path(".")]
    failed = False
    if args.show_settings:
        first = paths[0] if str(paths[0]) != "-" else Path(args.stdin_filename or ".")
        project = resolver.project_for(first if first.is_file() else first / "_")
        write_stdout(_settings_text(project, cwd))
        return EXIT_CLEAN
    if [str(p) for p in paths] == ["-"] or (not args.paths and args.stdin_filename):
        name = args.stdin_filename or "-"
        if args.stdin_filename:  # stdin stands for that file: a report must not replace it
            _refuse_output_onto_input(args, [Path(name)])
        data = sys.stdin.buffer.read()
        filename = str(Path(name).resolve()) if args.stdin_filename else "-"
        project = resolver.project_for(Path(name))
        file_rules, options = (
            project.rules_for(Path(name)),
            _options(project, None, Path(name), [Path(name)]),
        )
        if name.endswith(".ipynb"):  # a notebook on stdin is read as one, not as Python
            from mpcheck.files.notebook import check_notebook_bytes

            diagnostics = check_notebook_bytes(data, filename, file_rules, options)
        else:
            diagnostics = check_source(data, filename, file_rules, options)
        if args.fix or args.diff:
            return fix_stdin(args, data, filename, diagnostics, file_rules, options)
        project_of = {filename: project}
    else:
        if any(str(p) == "-" for p in paths):
            raise UsageError("`-` (stdin) cannot be mixed with other paths")
        errors: list[str] = []
        skipped: list[str] = []
        files = discover(
            paths,
            resolver.settings_for,
            force_exclude=args.force_exclude,
            errors=errors,
            warnings=skipped,
        )
        for message in skipped:
            print(f"mpcheck: warning: {message}", file=sys.stderr)
        for message in errors:
            print(f"mpcheck: error: {message}", file=sys.stderr)
        failed = bool(errors)
        if not files and not errors and not any(p.is_file() for p in paths):
            # (a file named explicitly and excluded, as pre-commit passes them, says nothing)
            where = ", ".join(str(p) for p in paths)
            print(f"mpcheck: warning: No Python files found under {where}", file=sys.stderr)
        if args.show_files:
            write_stdout("".join(f"{display_path(str(f), cwd)}\n" for f in files))
            return EXIT_ERROR if failed else EXIT_CLEAN
        _refuse_output_onto_input(args, files)
        project_of = {str(f): resolver.project_for(f) for f in files}
        cache_dir = _usable_cache(args, resolver, cwd)
        _fresh_run()
        seen: dict[Path, bool] = {}  # (which directories declare a project, asked once each)
        jobs = [
            (
                f,
                project_of[str(f)].rules_for(f),
                _options(project_of[str(f)], cache_dir, f, paths, seen),
            )
            for f in files
        ]
        progress = None
        tty = getattr(sys.stderr, "isatty", None)
        if not args.quiet and tty is not None and tty():  # never in a pipe, log or capture
            progress = Progress(sys.stderr, len(jobs))
        try:
            diagnostics = check_files(
                jobs, processes=args.jobs, progress=None if progress is None else progress.advance
            )
        finally:
            if progress is not None:
                progress.close()
        if args.verbose:
            _print_counts()
        incremental = sys.modules.get("mpcheck.pipeline.incremental")
        for warning in [] if incremental is None else incremental.warnings():
            print(f"mpcheck: warning: {warning}", file=sys.stderr)
        if args.add_noqa:
            return add_noqa(diagnostics, jobs, project_of)
        if args.diff:
            return diff_files(args, diagnostics, cwd, jobs)
        if args.fix:
            diagnostics, fix_failed = fix_files(args, diagnostics, jobs)
            failed = failed or fix_failed
    diagnostics = [d for d in diagnostics if project_of[d.filename].reports(d.code)]
    diagnostics.sort(key=Diagnostic.sort_key)
    settings = resolver.settings_for(str(cwd))
    if args.write_baseline is not None:
        from mpcheck.output import baseline

        try:
            recorded = baseline.write(args.write_baseline, diagnostics)
        except OSError as exc:
            raise UsageError(f"cannot write {args.write_baseline}: {exc.strerror}") from None
        s = "" if recorded == 1 else "s"
        print(f"mpcheck: recorded {recorded} finding{s} in {args.write_baseline}", file=sys.stderr)
        return EXIT_ERROR if failed else EXIT_CLEAN
    baseline_file = args.baseline or settings.baseline
    if baseline_file is not None:
        diagnostics = _apply_baseline(args, diagnostics, list(project_of), baseline_file)
    if args.diff_base is not None:
        from mpcheck.output.changed_lines import DiffError
        from mpcheck.output.pr_base import introduced

        cache = None if args.no_cache else cache_directory(args, resolver, cwd)
        try:
            diagnostics = introduced(diagnostics, args, cwd, cache)
        except DiffError as exc:
            raise UsageError(str(exc)) from None
    status = emit(args, diagnostics, rules, cwd, args.fail_on or settings.fail_on)
    return EXIT_ERROR if failed else status


def _settings_text(project: Project, cwd: Path) -> str:
    """``--show-settings``: the configuration file, every setting and the active rules."""
    settings = project.settings
    config = settings.config_path
    lines = [f"config: {display_path(str(config), cwd) if config else '(none: defaults)'}"]
    for field in fields(settings):
        if field.name not in ("config_path", "target_torch_source"):
            value = getattr(settings, field.name)
            if field.name == "target_torch_version":
                source = settings.target_torch_source
                value = "latest" if value is None else f"{format_version(value)} (from {source})"
            elif isinstance(value, Mapping):
                value = {k: list(v) for k, v in value.items()}
            elif field.name == "extends":
                value = [display_path(str(p), cwd) for p in value]
            elif field.name == "src":  # what it means: ``src/`` by default where it exists
                value = [display_path(str(p), cwd) for p in settings.source_roots]
            elif isinstance(value, tuple):
                value = list(value)
            lines.append(f"{field.name.replace('_', '-')}: {value}")
    lines.append(f"active rules: {', '.join(r.code for r in project.active)}")
    return "".join(line + "\n" for line in lines)


def _apply_baseline(
    args: argparse.Namespace, diagnostics: list[Diagnostic], checked: list[str], path: Path
) -> list[Diagnostic]:
    """The findings the baseline does not hold; says on stderr when entries are gone."""
    from mpcheck.output import baseline

    try:
        outcome = baseline.apply(diagnostics, checked, path, baseline.load(path))
    except baseline.BaselineError as exc:
        raise UsageError(str(exc)) from None
    if outcome.gone and not args.quiet:
        s = "" if outcome.gone == 1 else "s"
        print(
            f"mpcheck: {outcome.gone} finding{s} recorded in {path} no longer occur; "
            f"refresh it with `mpcheck check --write-baseline {path}`",
            file=sys.stderr,
        )
    return outcome.shown
