"""The ``mpcheck`` command line's arguments: the parser of every subcommand, the checks on
option values, and the exit codes every command returns."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mpcheck import __version__
from mpcheck.cli.terminal import COLOR_CHOICES
from mpcheck.output.reporters import FORMATS
from mpcheck.settings.config import FAIL_ON, FOLLOW_IMPORTS, parse_size

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
        help="report only findings introduced since the git revision REF (A...B: their "
        "merge base); the base is checked in a temporary worktree",
    )
    check.add_argument("--statistics", action="store_true", help="count findings per rule")
    check.add_argument(
        "--follow-imports",
        choices=FOLLOW_IMPORTS,
        help="site: summarise imported installed libraries too; skip: check each file alone "
        "(config: follow-imports; default normal, the project's own files)",
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
