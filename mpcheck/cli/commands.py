"""The other subcommands: ``mpcheck rule``, ``mpcheck clean`` and ``mpcheck server``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mpcheck.cli.args import EXIT_CLEAN, UsageError
from mpcheck.cli.check import cache_directory
from mpcheck.cli.report import write_stdout
from mpcheck.ruleset.rule import Rule, all_rules
from mpcheck.settings.resolver import Resolver

# Imported where used, not here: a one-file check loads none of fixes (difflib, tempfile),
# notebooks, tracebacks or the step summary (tests/test_startup_imports.py holds this).


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


def run_clean(args: argparse.Namespace) -> int:
    """``mpcheck clean``: remove the cache (only mpcheck's own layout, see ``cache_dir``)."""
    cwd = Path.cwd()
    resolver = Resolver(cwd, config=args.config)
    from mpcheck.pipeline.cache_dir import CacheDirError, clean

    directory = cache_directory(args, resolver, cwd)
    try:
        removed = clean(directory)
    except CacheDirError as exc:
        raise UsageError(str(exc)) from None
    if removed:
        print(f"Removed {directory}", file=sys.stderr)
    return EXIT_CLEAN


def run_rule(args: argparse.Namespace) -> int:
    """Written through :func:`write_stdout`, as reports are: a closed stdout is one line and
    a character the output's encoding lacks (the docs' ``·``) goes out as its escape."""
    rules = all_rules()
    if args.all or not args.code:
        if args.output_format == "json":
            write_stdout(json.dumps([_rule_json(r) for r in rules], indent=2) + "\n")
        else:
            write_stdout(
                "".join(
                    f"{r.code}  {r.name:<36} {r.severity.value:<8} {r.summary}\n" for r in rules
                )
            )
        return EXIT_CLEAN
    by_code = {r.code: r for r in rules}
    by_name = {r.name: r for r in rules}
    rule = by_code.get(args.code.upper()) or by_name.get(args.code)
    if rule is None:
        raise UsageError(f"unknown rule `{args.code}` (see `mpcheck rule --all`)")
    if args.output_format == "json":
        write_stdout(json.dumps(_rule_json(rule), indent=2) + "\n")
    else:
        write_stdout(rule.docs())
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
