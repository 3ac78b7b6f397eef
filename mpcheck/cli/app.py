"""The ``mpcheck`` command line, shaped like ruff's: ``check`` and ``rule``.

Exit codes: 0 no findings, 1 findings, 2 usage, configuration or internal error.
No traceback reaches the user: bad input becomes a one-line message and exit 2,
a bad file becomes a finding.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from mpcheck.cli.args import EXIT_ERROR, UsageError, build_parser, terminal_width
from mpcheck.cli.check import run_check
from mpcheck.cli.commands import run_clean, run_rule, run_server
from mpcheck.files.discovery import MissingPathError
from mpcheck.ruleset.selection import SelectionError
from mpcheck.settings.config import ConfigError

__all__ = ["build_parser", "main", "terminal_width"]


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


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
