"""The ``mpcheck`` command line, shaped like ruff's: ``check`` and ``rule``.

Exit codes: 0 no findings, 1 findings, 2 usage, configuration or internal error.
No traceback reaches the user: bad input becomes a one-line message and exit 2,
a bad file becomes a finding.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import fields, replace
from functools import cache, partial
from pathlib import Path

from mpcheck import __version__
from mpcheck.config import FAIL_ON, FOLLOW_IMPORTS, ConfigError, parse_size, with_overrides
from mpcheck.diagnostics import Diagnostic, RuleInfo, Severity
from mpcheck.discovery import MissingPathError, discover
from mpcheck.engine import Options, check_source
from mpcheck.reporters import FORMATS, render
from mpcheck.reporters.base import ReportContext
from mpcheck.resolver import Project, Resolver
from mpcheck.rule import Rule, all_rules
from mpcheck.runner import Job, check_files
from mpcheck.selection import SelectionError
from mpcheck.source import SourceError, SourceFile
from mpcheck.terminal import COLOR_CHOICES, Progress, colorize, use_color
from mpcheck.torch_target import format_version, parse_version

# Imported where used, not here: a one-file check loads none of fixes (difflib, tempfile),
# notebooks, tracebacks or the step summary (tests/test_startup_imports.py holds this).

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class UsageError(Exception):
    """A problem with how mpcheck was called: exit 2 with a one-line message."""


def _comma_list(value: str) -> list[str]:
    """``--ignore MPC101,MPC103``; repeated flags add up (``action="extend"``), as in ruff."""
    codes = [c.strip() for c in value.split(",") if c.strip()]
    if not codes:  # ``--select ''`` would check nothing and report success
        raise argparse.ArgumentTypeError("expected at least one value")
    return codes


def _jobs(value: str) -> int:
    try:
        jobs = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if jobs < 0:
        raise argparse.ArgumentTypeError("must be 0 (one per CPU) or more")
    return jobs


def _size(value: str) -> int:
    size = parse_size(value)
    if size is None:
        raise argparse.ArgumentTypeError(f"not a positive size: {value!r} (e.g. 1048576, 2MiB)")
    return size


def terminal_width() -> int:
    """The columns ``shutil.get_terminal_size()`` gives: ``$COLUMNS`` when it is a positive
    number, else the terminal of ``sys.__stdout__``, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):  # (AttributeError: no sys.__stdout__)
        return 80


class _Formatter(argparse.HelpFormatter):
    """argparse's own, but measuring the terminal without importing ``shutil`` (which brings
    bz2, lzma and zlib): argparse makes one of these for every option it is given."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        width = terminal_width() - 2 if width is None else width
        super().__init__(prog, indent_increment, max_help_position, width)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mpcheck",
        description="Find mixed-precision (fp16/bf16) bugs in PyTorch code before they run.",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"mpcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = sub.add_parser(
        "check", help="check files or directories (default: .)", formatter_class=_Formatter
    )
    check.set_defaults(parser=check)
    check.add_argument("paths", nargs="*", type=Path, help="files or directories; - for stdin")
    check.add_argument(
        "--select", action="extend", type=_comma_list, help="rule codes or prefixes to enable (ALL)"
    )
    check.add_argument(
        "--extend-select",
        action="extend",
        type=_comma_list,
        default=[],
        help="add to the selection",
    )
    check.add_argument(
        "--ignore",
        action="extend",
        type=_comma_list,
        default=[],
        help="rule codes or prefixes to skip",
    )
    check.add_argument(
        "--exclude", action="extend", type=_comma_list, help="replace the exclude patterns"
    )
    check.add_argument(
        "--extend-exclude",
        action="extend",
        type=_comma_list,
        default=[],
        help="add exclude patterns",
    )
    check.add_argument(
        "--output-format",
        choices=FORMATS,
        default=os.environ.get("MPCHECK_OUTPUT_FORMAT") or "full",
        help="how findings are printed (env: MPCHECK_OUTPUT_FORMAT)",
    )
    check.add_argument("-o", "--output-file", type=Path, help="write the report to this file")
    check.add_argument(
        "--extra-output",
        action="append",
        default=[],
        metavar="FORMAT:FILE",
        help="also write the findings in FORMAT to FILE, from the same run (repeatable)",
    )
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")
    check.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        help="exit 1 for findings of this severity or worse (config: fail-on; default warning)",
    )
    check.add_argument(
        "--baseline",
        type=Path,
        help="do not report the findings recorded in this file (config: baseline)",
    )
    check.add_argument(
        "--write-baseline",
        type=Path,
        metavar="FILE",
        help="record every current finding in FILE, to be hidden by --baseline",
    )
    check.add_argument(
        "--diff-base",
        metavar="REF",
        help="report only findings on lines changed since the git revision REF",
    )
    check.add_argument("--statistics", action="store_true", help="count findings per rule")
    check.add_argument(
        "--follow-imports",
        choices=FOLLOW_IMPORTS,
        help="site: summarise imported installed libraries too (config: follow-imports; "
        "default normal, the project's own files)",
    )
    check.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    check.add_argument(
        "--cache-dir",
        type=Path,
        default=os.environ.get("MPCHECK_CACHE_DIR") or None,
        help="where the cache lives (env: MPCHECK_CACHE_DIR; default .mpcheck_cache)",
    )
    check.add_argument("--config", type=Path, help="pyproject.toml or mpcheck.toml to use")
    check.add_argument("--stdin-filename", help="the name of the file read from stdin")
    check.add_argument(
        "--force-exclude", action="store_true", help="apply excludes to explicit paths too"
    )
    check.add_argument("-q", "--quiet", action="store_true", help="print findings only")
    check.add_argument(
        "--color",
        choices=COLOR_CHOICES,
        default="auto",
        help="colour the text output (auto: on a terminal, unless NO_COLOR; FORCE_COLOR forces)",
    )
    check.add_argument(
        "--show-files", action="store_true", help="list the files that would be checked, and exit"
    )
    check.add_argument(
        "--show-settings",
        action="store_true",
        help="print the settings that govern the first path (or .), and exit",
    )
    check.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    check.add_argument(
        "--unsafe-fixes", action="store_true", help="also apply fixes that may change behaviour"
    )
    check.add_argument("--diff", action="store_true", help="print fixes as a diff, change nothing")
    check.add_argument(
        "--add-noqa",
        action="store_true",
        help="add a `# noqa: CODE` directive to every line with a finding",
    )
    check.add_argument(
        "-j", "--jobs", type=_jobs, default=0, help="worker processes (0: one per CPU)"
    )
    check.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print tracebacks of internal errors, and how many files were analysed",
    )
    check.add_argument(
        "--max-file-size",
        type=_size,
        help="skip larger files with MPC002 (bytes, or 512KiB, 2MB; default 1MiB)",
    )
    check.add_argument(
        "--target-torch-version",
        metavar="X.Y",
        help="the oldest torch the code must run on; fixes use only its APIs "
        "(config: target-torch-version; default: the project's torch requirement)",
    )
    check.add_argument(
        "--no-notebooks",
        dest="include_notebooks",
        action="store_const",
        const=False,
        help="leave *.ipynb out of directory walks (config: include-notebooks = false)",
    )

    rule = sub.add_parser(
        "rule", help="explain a rule, or list them all", formatter_class=_Formatter
    )
    rule.set_defaults(parser=rule)
    rule.add_argument("code", nargs="?", help="a rule code such as MPC101")
    rule.add_argument("--all", action="store_true", help="list every rule")
    rule.add_argument("--output-format", choices=("text", "json"), default="text")

    sub.add_parser(
        "server", help="run the language server (stdio) for editors", formatter_class=_Formatter
    )

    clean = sub.add_parser("clean", help="remove the cache", formatter_class=_Formatter)
    clean.set_defaults(parser=clean)
    clean.add_argument(
        "--cache-dir",
        type=Path,
        default=os.environ.get("MPCHECK_CACHE_DIR") or None,
        help="the cache to remove (env: MPCHECK_CACHE_DIR; default: the project's)",
    )
    clean.add_argument("--config", type=Path, help="pyproject.toml or mpcheck.toml to use")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 clean, 1 findings, 2 for any error: usage, configuration, I/O or internal."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # ``mpcheck check --bad-option``: the usage of ``check``, not of ``mpcheck``
        command = getattr(args, "parser", parser)
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    verbose = getattr(args, "verbose", False) or os.environ.get("MPCHECK_DEBUG") == "1"
    try:
        if args.command == "check":
            return run_check(args)
        if args.command == "rule":
            return run_rule(args)
        if args.command == "server":
            return run_server()
        if args.command == "clean":
            return run_clean(args)
        parser.print_help()
        return EXIT_ERROR
    except (UsageError, ConfigError, SelectionError, MissingPathError) as exc:
        print(f"mpcheck: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # ``mpcheck check | head``: the reader is gone, say nothing more
        _silence_stdout()
        return EXIT_ERROR
    except OSError as exc:  # ``> /dev/full``, a vanished directory, ...
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"mpcheck: error: {where}{exc.strerror or exc}", file=sys.stderr)
        if verbose:
            _print_traceback()
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 - an internal error is one line and exit 2
        print(f"mpcheck: error: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        if verbose:
            _print_traceback()
        else:
            print("(run with --verbose or MPCHECK_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_ERROR


def _print_traceback() -> None:
    import traceback

    traceback.print_exc()


def _write_stdout(text: str) -> None:
    """A file name's undecodable bytes go out as the bytes they were, whatever the locale."""
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a replaced stream (tests, embedding): it takes text
        sys.stdout.write(text)
    else:
        buffer.write(text.encode(sys.stdout.encoding or "utf-8", "surrogateescape"))
        buffer.flush()


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def run_server() -> int:
    """Start the language server; its dependencies are the optional ``server`` extra."""
    try:
        from mpcheck.server import serve
    except ImportError as exc:
        raise UsageError(
            f"the language server needs `pip install 'mpcheck[server]'` ({exc})"
        ) from exc
    serve()
    return EXIT_CLEAN


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


def _options(project: Project, cache: Path | None) -> Options:
    settings = project.settings
    return Options(
        module_half_capable=settings.module_half_capable,
        max_file_size=settings.max_file_size,
        project_root=str(Path.cwd()),
        follow_imports=settings.follow_imports,
        cache_dir=None if cache is None else str(cache),
        target_torch_version=settings.target_torch_version,
    )


def _cache_dir(args: argparse.Namespace, resolver: Resolver, cwd: Path) -> Path:
    """``--cache-dir``/``MPCHECK_CACHE_DIR``, else the ``cache-dir`` of the configuration
    governing the current directory, else ``.mpcheck_cache`` at that configuration's root."""
    if args.cache_dir is not None:
        return Path(os.path.abspath(args.cache_dir))
    from mpcheck.cache import CACHE_DIR_NAME

    settings = resolver.settings_for(str(cwd))
    return settings.cache_dir or Path(os.path.abspath(settings.root)) / CACHE_DIR_NAME


def _usable_cache(args: argparse.Namespace, resolver: Resolver, cwd: Path) -> Path | None:
    """The cache directory to use, None with ``--no-cache``; one that cannot be written is a
    warning, and the run goes on without a cache."""
    if args.no_cache:
        return None
    directory = _cache_dir(args, resolver, cwd)
    # a file of this process's own (not ``tempfile``: it imports shutil, random, bz2, lzma)
    probe = directory / f".probe-{os.getpid()}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        os.unlink(probe)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        print(f"mpcheck: warning: cannot use the cache {directory} ({reason})", file=sys.stderr)
        return None
    return directory


def _print_counts() -> None:
    """``--verbose``: how many files were analysed and how many came from the cache."""
    from mpcheck.runner import last_run

    total = sum(last_run.values())
    parts = [f"{last_run[k]} {k}" for k in ("analysed", "cached", "unreadable") if last_run[k]]
    print(f"mpcheck: {total} files: {', '.join(parts) or 'none'}", file=sys.stderr)


def _fresh_run() -> None:
    """Forget what an earlier run in this process learnt: the files may have changed."""
    for name in ("mpcheck.incremental", "mpcheck.project.summarise"):
        module = sys.modules.get(name)
        if module is not None:
            module.forget()


def run_clean(args: argparse.Namespace) -> int:
    """``mpcheck clean``: remove the cache (only a directory that mpcheck tagged as its own)."""
    cwd = Path.cwd()
    resolver = Resolver(cwd, config=args.config)
    from mpcheck.cache import clean

    directory = _cache_dir(args, resolver, cwd)
    if clean(directory):
        print(f"Removed {directory}", file=sys.stderr)
    return EXIT_CLEAN


def run_check(args: argparse.Namespace) -> int:
    if args.output_format not in FORMATS:  # a bad MPCHECK_OUTPUT_FORMAT skips argparse's check
        raise UsageError(
            f"unknown output format `{args.output_format}` (from MPCHECK_OUTPUT_FORMAT); "
            f"expected one of: {', '.join(FORMATS)}"
        )
    _extra_outputs(args.extra_output)  # a mistake there is reported before the run
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
        _write_stdout(_settings_text(project, cwd))
        return EXIT_CLEAN
    if [str(p) for p in paths] == ["-"] or (not args.paths and args.stdin_filename):
        name = args.stdin_filename or "-"
        data = sys.stdin.buffer.read()
        filename = str(Path(name).resolve()) if args.stdin_filename else "-"
        project = resolver.project_for(Path(name))
        file_rules, options = project.rules_for(Path(name)), _options(project, None)
        diagnostics = check_source(data, filename, file_rules, options)
        if args.fix or args.diff:
            return _fix_stdin(args, data, filename, diagnostics, file_rules, options)
        project_of = {filename: project}
    else:
        if any(str(p) == "-" for p in paths):
            raise UsageError("`-` (stdin) cannot be mixed with other paths")
        errors: list[str] = []
        files = discover(
            paths, resolver.settings_for, force_exclude=args.force_exclude, errors=errors
        )
        for message in errors:
            print(f"mpcheck: error: {message}", file=sys.stderr)
        failed = bool(errors)
        if not files and not errors and not any(p.is_file() for p in paths):
            # (a file named explicitly and excluded, as pre-commit passes them, says nothing)
            where = ", ".join(str(p) for p in paths)
            print(f"mpcheck: warning: No Python files found under {where}", file=sys.stderr)
        if args.show_files:
            _write_stdout("".join(f"{_display_path(str(f), cwd)}\n" for f in files))
            return EXIT_ERROR if failed else EXIT_CLEAN
        project_of = {str(f): resolver.project_for(f) for f in files}
        cache_dir = _usable_cache(args, resolver, cwd)
        _fresh_run()
        jobs = [
            (f, project_of[str(f)].rules_for(f), _options(project_of[str(f)], cache_dir))
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
        incremental = sys.modules.get("mpcheck.incremental")
        for warning in [] if incremental is None else incremental.warnings():
            print(f"mpcheck: warning: {warning}", file=sys.stderr)
        if args.add_noqa:
            return _add_noqa(diagnostics, jobs, project_of)
        if args.diff:
            return _diff_files(args, diagnostics, cwd)
        if args.fix:
            diagnostics, fix_failed = _fix_files(args, diagnostics, jobs)
            failed = failed or fix_failed
    diagnostics = [d for d in diagnostics if project_of[d.filename].reports(d.code)]
    diagnostics.sort(key=Diagnostic.sort_key)
    settings = resolver.settings_for(str(cwd))
    if args.write_baseline is not None:
        from mpcheck import baseline

        try:
            recorded = baseline.write(args.write_baseline, diagnostics)
        except OSError as exc:
            raise UsageError(f"cannot write {args.write_baseline}: {exc.strerror}") from None
        print(f"mpcheck: recorded {recorded} findings in {args.write_baseline}", file=sys.stderr)
        return EXIT_ERROR if failed else EXIT_CLEAN
    baseline_file = args.baseline or settings.baseline
    if baseline_file is not None:
        diagnostics = _apply_baseline(args, diagnostics, list(project_of), baseline_file)
    if args.diff_base is not None:
        from mpcheck.changed_lines import DiffError, changed_lines, only_changed

        try:
            diagnostics = only_changed(diagnostics, changed_lines(args.diff_base, cwd))
        except DiffError as exc:
            raise UsageError(str(exc)) from None
    status = _emit(args, diagnostics, rules, cwd, args.fail_on or settings.fail_on)
    return EXIT_ERROR if failed else status


def _settings_text(project: Project, cwd: Path) -> str:
    """``--show-settings``: the configuration file, every setting and the active rules."""
    settings = project.settings
    config = settings.config_path
    lines = [f"config: {_display_path(str(config), cwd) if config else '(none: defaults)'}"]
    for field in fields(settings):
        if field.name not in ("config_path", "target_torch_source"):
            value = getattr(settings, field.name)
            if field.name == "target_torch_version":
                source = settings.target_torch_source
                value = "latest" if value is None else f"{format_version(value)} (from {source})"
            elif isinstance(value, Mapping):
                value = {k: list(v) for k, v in value.items()}
            elif field.name == "extends":
                value = [_display_path(str(p), cwd) for p in value]
            elif isinstance(value, tuple):
                value = list(value)
            lines.append(f"{field.name.replace('_', '-')}: {value}")
    lines.append(f"active rules: {', '.join(r.code for r in project.active)}")
    return "".join(line + "\n" for line in lines)


def _apply_baseline(
    args: argparse.Namespace, diagnostics: list[Diagnostic], checked: list[str], path: Path
) -> list[Diagnostic]:
    """The findings the baseline does not hold; says on stderr when entries are gone."""
    from mpcheck import baseline

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


def _fixable_files(
    args: argparse.Namespace, diagnostics: list[Diagnostic]
) -> dict[str, list[Diagnostic]]:
    """The findings of each file that has at least one fix to apply."""
    from mpcheck.fixes import applicable

    by_file: dict[str, list[Diagnostic]] = {}
    for d in diagnostics:
        by_file.setdefault(d.filename, []).append(d)
    return {
        f: ds
        for f, ds in by_file.items()
        if any(applicable(d, unsafe=args.unsafe_fixes) for d in ds)
    }


def _fix_files(
    args: argparse.Namespace, diagnostics: list[Diagnostic], jobs: Sequence[Job]
) -> tuple[list[Diagnostic], bool]:
    """Apply fixes file by file; re-check what changed. Also says whether a file failed.

    Each file is read again and checked again, so the fixes fit exactly the bytes that are
    written over (``write_fixed`` only writes if the file still holds them).
    """
    from mpcheck.fixes import FileChanged, FixError, apply_fixes, write_fixed
    from mpcheck.notebook import fix_notebook_file

    job_of = {str(path): (rules, options) for path, rules, options in jobs}
    fixable = _fixable_files(args, diagnostics)
    out = [d for d in diagnostics if d.filename not in fixable]
    fixed_total, failed = 0, False
    for filename, old in fixable.items():
        rules, options = job_of[filename]
        path = Path(filename)
        try:
            if filename.endswith(".ipynb"):  # cells: the notebook's own writer
                fixed_total += fix_notebook_file(path, old, unsafe=args.unsafe_fixes)
                out += check_files([(path, *job_of[filename])], processes=1)
                continue
            data = path.read_bytes()
            source = SourceFile.decode(data)
            current = check_source(data, filename, rules, options)
            text, count = apply_fixes(source, current, unsafe=args.unsafe_fixes)
            new = source.encode(text)
            if new != data:
                write_fixed(path, data, new)
        except FileChanged as exc:
            print(f"mpcheck: warning: {exc}", file=sys.stderr)
            out += old
            continue
        except (FixError, SourceError, OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            prefix = "" if isinstance(exc, FixError) else f"{filename}: "
            print(f"mpcheck: error: {prefix}{reason}", file=sys.stderr)
            out += old
            failed = True
            continue
        fixed_total += count
        out += check_source(new, filename, rules, options)
    if fixed_total and not args.quiet:
        print(f"Fixed {fixed_total} error{'s' if fixed_total != 1 else ''}.", file=sys.stderr)
    return out, failed


def _add_noqa(
    diagnostics: list[Diagnostic], jobs: Sequence[Job], project_of: dict[str, Project]
) -> int:
    """``--add-noqa`` (as ruff): a directive for every finding, written in place; exit 0.

    Each file is read and checked again, so the directives fit exactly the bytes that are
    written over (``write_fixed`` only writes if the file still holds them).
    """
    from mpcheck.add_noqa import NOT_SUPPRESSIBLE, with_noqa
    from mpcheck.fixes import FixError, write_fixed

    job_of = {str(path): (rules, options) for path, rules, options in jobs}
    pending = {
        d.filename
        for d in diagnostics
        if not d.suppressed and d.code not in NOT_SUPPRESSIBLE and not d.cell
    }
    total, failed = 0, False
    for filename in sorted(pending):
        rules, options = job_of[filename]
        project = project_of[filename]
        try:
            data = Path(filename).read_bytes()
            found = [
                d
                for d in check_source(data, filename, rules, replace(options, cache_dir=None))
                if project.reports(d.code)
            ]
            new, count = with_noqa(data, found)
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


def _diff_files(args: argparse.Namespace, diagnostics: list[Diagnostic], cwd: Path) -> int:
    """``--diff`` (as ruff): print what ``--fix`` would change, write nothing.

    Only the diff goes to stdout, so it can be piped to ``git apply``; exit 1 when there is
    something to fix, 2 when a file could not be read.
    """
    from mpcheck.fixes import apply_fixes, unified_diff
    from mpcheck.notebook import fix_notebook

    total, failed = 0, False
    for filename, diags in sorted(_fixable_files(args, diagnostics).items()):
        try:
            data = Path(filename).read_bytes()
            if filename.endswith(".ipynb"):
                text, count = fix_notebook(data.decode("utf-8"), diags, unsafe=args.unsafe_fixes)
                new = text.encode("utf-8")
            else:
                source = SourceFile.decode(data)
                text, count = apply_fixes(source, diags, unsafe=args.unsafe_fixes)
                new = source.encode(text)
        except (SourceError, OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            print(f"mpcheck: error: {filename}: {reason}", file=sys.stderr)
            failed = True
            continue
        total += count
        sys.stdout.buffer.write(unified_diff(data, new, _display_path(filename, cwd)))
    sys.stdout.flush()
    if not args.quiet:
        noun = "error" if total == 1 else "errors"
        print(
            f"Would fix {total} {noun}." if total else "No errors would be fixed.", file=sys.stderr
        )
    if failed:
        return EXIT_ERROR
    return EXIT_FINDINGS if total else EXIT_CLEAN


def _display_path(filename: str, cwd: Path) -> str:
    try:
        return Path(filename).relative_to(cwd).as_posix()
    except ValueError:
        return Path(filename).as_posix().lstrip("/")


def _fix_stdin(
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
    from mpcheck.fixes import apply_fixes, unified_diff

    try:
        source = SourceFile.decode(data)
        text, _ = apply_fixes(source, diagnostics, unsafe=args.unsafe_fixes)
        new = source.encode(text)
    except SourceError as exc:
        if not args.diff:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        print(f"mpcheck: error: {filename}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.buffer.write(unified_diff(data, new, "-") if args.diff else new)
    sys.stdout.flush()
    left = [d for d in check_source(new, filename, rules, options) if not d.suppressed]
    return EXIT_FINDINGS if left and not args.exit_zero else EXIT_CLEAN


def _emit(
    args: argparse.Namespace,
    diagnostics: list[Diagnostic],
    rules: Sequence[type[Rule]],
    cwd: Path,
    fail_on: str = "warning",
) -> int:
    shown = [d for d in diagnostics if not d.suppressed]
    _lines.cache_clear()  # files may have changed since an earlier run in this process
    if args.statistics:
        text = _statistics(shown, rules, as_json=args.output_format == "json")
    else:
        text = render(args.output_format, diagnostics, _report_context(rules, cwd))
        if args.output_format in ("full", "concise", "grouped") and not args.quiet:
            text += ("\n" if text else "") + _summary(shown)
    if args.output_file is not None:
        _write_report(args.output_file, text)
    else:
        text_format = args.output_format in ("full", "concise", "grouped")
        if text_format and use_color(args.color, sys.stdout, os.environ):
            text = colorize(text)
        _write_stdout(text)
    for fmt, path in _extra_outputs(args.extra_output):
        _write_report(path, render(fmt, diagnostics, _report_context(rules, cwd)))
    # GitHub Actions: a per-rule table on the run's page ($GITHUB_STEP_SUMMARY, if set).
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        from mpcheck.summary import write_step_summary

        write_step_summary(diagnostics, _RuleInfos(rules), root=cwd)
    failing = [d for d in shown if fail_on == "warning" or d.severity is Severity.ERROR]
    return EXIT_FINDINGS if failing and not args.exit_zero else EXIT_CLEAN


def _report_context(rules: Sequence[type[Rule]], cwd: Path) -> ReportContext:
    return ReportContext(
        root=cwd,
        rules=_RuleInfos(rules),
        source_lines=_lines,
        tool_version=__version__,
    )


def _extra_outputs(values: Sequence[str]) -> list[tuple[str, Path]]:
    """``--extra-output sarif:out.sarif``: one run, several reports (the Action's SARIF)."""
    out = []
    for value in values:
        fmt, sep, path = value.partition(":")
        if not sep or not path or fmt not in FORMATS:
            raise UsageError(
                f"--extra-output: expected FORMAT:FILE with FORMAT one of {', '.join(FORMATS)}, "
                f"got {value!r}"
            )
        out.append((fmt, Path(path)))
    return out


def _write_report(path: Path, text: str) -> None:
    """In one step: a failed run never leaves a partial report."""
    from mpcheck.fixes import write_atomically

    try:
        write_atomically(path, text.encode("utf-8", "surrogateescape"))
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from exc


class _RuleInfos(Mapping[str, RuleInfo]):
    """Each rule's info by code, built when a reporter reads it: building one renders the
    rule's documentation, which only SARIF prints."""

    def __init__(self, rules: Sequence[type[Rule]]) -> None:
        self._rules = {r.code: r for r in rules}
        self._infos: dict[str, RuleInfo] = {}

    def __getitem__(self, code: str) -> RuleInfo:
        if code not in self._infos:
            self._infos[code] = self._rules[code].info()
        return self._infos[code]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rules)

    def __len__(self) -> int:
        return len(self._rules)


def _summary(shown: Sequence[Diagnostic]) -> str:
    if not shown:
        return "All checks passed!\n"
    from mpcheck.fixes import applicable

    fixable = sum(1 for d in shown if applicable(d, unsafe=False))
    hidden = sum(1 for d in shown if d.fix is not None) - fixable
    errors = sum(1 for d in shown if d.severity is Severity.ERROR)
    counts = [_count(errors, "error"), _count(len(shown) - errors, "warning")]
    extra = f"\n[*] {fixable} fixable with the `--fix` option." if fixable else ""
    if hidden:
        s = "fix" if hidden == 1 else "fixes"
        extra += f"\n({hidden} hidden {s} can be enabled with the `--unsafe-fixes` option.)"
    return f"Found {' and '.join(c for c in counts if c)}.{extra}\n"


def _count(n: int, noun: str) -> str:
    return "" if n == 0 else f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _statistics(shown: Sequence[Diagnostic], rules: Sequence[type[Rule]], as_json: bool) -> str:
    """Findings per rule, most frequent first, with the rule's severity and how many of its
    findings ``--fix`` would fix (``[*]``: all of them; ``[-]``: some)."""
    from mpcheck.fixes import applicable

    names = {r.code: r.name for r in rules}
    by_code: dict[str, list[Diagnostic]] = {}
    for d in shown:
        by_code.setdefault(d.code, []).append(d)
    rows: list[dict[str, str | int]] = []
    lines = []
    for code, found in sorted(by_code.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        name, severity = names.get(code, found[0].name), str(found[0].severity)
        safe = sum(1 for d in found if applicable(d, unsafe=False))
        unsafe = sum(1 for d in found if d.fix is not None) - safe
        row: dict[str, str | int] = {"code": code, "name": name, "count": len(found)}
        rows.append(row | {"severity": severity, "fixable": safe, "unsafe_fixable": unsafe})
        mark = "[*]" if safe == len(found) else "[-]" if safe else "   "
        lines.append(f"{len(found):>5}\t{code}\t{severity:<7}\t{mark} {name}\n")
    return json.dumps(rows, indent=2) + "\n" if as_json else "".join(lines)


@cache
def _lines(filename: str) -> list[str]:
    """The file's lines as positions count them (for the source excerpt under a finding)."""
    try:
        return SourceFile.decode(Path(filename).read_bytes()).lines
    except (OSError, SourceError):
        return []


def run_rule(args: argparse.Namespace) -> int:
    rules = all_rules()
    if args.all or not args.code:
        if args.output_format == "json":
            data = [_rule_json(r) for r in rules]
            print(json.dumps(data, indent=2))
        else:
            for r in rules:
                print(f"{r.code}  {r.name:<36} {r.severity.value:<8} {r.summary}")
        return EXIT_CLEAN
    by_code = {r.code: r for r in rules}
    by_name = {r.name: r for r in rules}
    rule = by_code.get(args.code.upper()) or by_name.get(args.code)
    if rule is None:
        raise UsageError(f"unknown rule `{args.code}` (see `mpcheck rule --all`)")
    if args.output_format == "json":
        print(json.dumps(_rule_json(rule), indent=2))
    else:
        sys.stdout.write(rule.docs())
    return EXIT_CLEAN


def _rule_json(rule: type[Rule]) -> dict[str, object]:
    info = rule.info()
    return {
        "code": info.code,
        "name": info.name,
        "severity": info.severity.value,
        "summary": info.summary,
        "fixable": rule.fixable,
        "fix_applicability": rule.fix_applicability if rule.fixable else None,
        "url": info.url,
        "explanation": info.docs,
    }


if __name__ == "__main__":
    sys.exit(main())
