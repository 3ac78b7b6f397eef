"""``Options``: argparse switches no command line can turn (``store_true`` defaulting to
true, ``store_false`` to false) are constants; anything that lets the program change a
parsed value, or a receiver not bound from a parser, keeps the test open."""

from __future__ import annotations

import argparse
import textwrap

import libcst as cst
import pytest

from mpcheck.engine.options import Options

PARSER = """\
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--keep-fp32", action="store_true", default=True)
parser.add_argument("-q", "--quiet_half", action="store_false", default=False)
parser.add_argument("--maybe", action="store_true")
parser.add_argument("--named", dest="chosen", action="store_true", default=True)
args = parser.parse_args()
opt, rest = parser.parse_known_args()
first = parser.parse_known_args()[0]
"""


def options(extra: str = "") -> tuple[Options, cst.Module]:
    source = PARSER + textwrap.dedent(extra)
    module = cst.parse_module(source)
    return Options(module, source.encode()), module


def value(text: str, extra: str = "") -> bool | None:
    found, _ = options(extra)
    return found.value(cst.parse_expression(text))


def test_the_parser_module_agrees_with_the_reading() -> None:
    """The semantics read, as argparse 3.11 runs it, for every command line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--keep-fp32", action="store_true", default=True)
    parser.add_argument("-q", "--quiet_half", action="store_false", default=False)
    parser.add_argument("--named", dest="chosen", action="store_true", default=True)
    for argv in ([], ["--keep-fp32"], ["-q"], ["--named", "--quiet_half"]):
        args = parser.parse_args(argv)
        assert (args.keep_fp32, args.quiet_half, args.chosen) == (True, False, True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("args.keep_fp32", True),
        ("not args.keep_fp32", False),
        ("args.quiet_half", False),
        ("opt.keep_fp32", True),
        ("first.quiet_half", False),
        ("args.chosen", True),
        ("args.named", None),  # (``dest=`` names the attribute)
        ("args.maybe", None),  # the run decides
        ("args.keep_fp32 and args.maybe", None),
        ("args.quiet_half and args.maybe", False),
        ("args.keep_fp32 or args.maybe", True),
        ("config.keep_fp32", None),  # not bound from a parser
        ("self.keep_fp32", None),
    ],
)
def test_constant_switches(text: str, expected: bool | None) -> None:
    assert value(text) is expected


def test_a_parameter_named_like_the_parsed_namespace_reads_it() -> None:
    """``def main(args)`` beside ``args = parser.parse_args()``: the script's own namespace."""
    found, module = options("def main(args):\n    return args.keep_fp32\n")
    fn = next(s for s in module.body if isinstance(s, cst.FunctionDef))
    ret = fn.body.body[0].body[0]
    assert isinstance(ret, cst.Return) and ret.value is not None
    assert found.value(ret.value) is True


@pytest.mark.parametrize(
    "extra",
    [
        "parser.set_defaults(keep_fp32=False)\n",
        "args.keep_fp32 = False\n",
        "vars(args).update(config)\n",
        "args.__dict__.update(config)\n",
        'setattr(args, "keep_fp32", False)\n',
        "args = parser.parse_args(namespace=preset)\n",
        "args = argparse.Namespace(keep_fp32=False)\n",
    ],
)
def test_a_program_that_may_change_parsed_values_keeps_them_open(extra: str) -> None:
    assert value("args.keep_fp32", extra) is None


def test_a_destination_declared_twice_is_open() -> None:
    extra = 'parser.add_argument("--no-keep", dest="keep_fp32", action="store_false")\n'
    assert value("args.keep_fp32", extra) is None


def test_a_file_without_switches_pays_no_walk() -> None:
    module = cst.parse_module("x = args.keep_fp32\n")
    found = Options(module, b"x = args.keep_fp32\n")
    assert found.value(cst.parse_expression("args.keep_fp32")) is None
    assert "_namespaces" not in found.__dict__  # (the byte search answered)
