"""Command-line switches no run can turn: their tests are constants (issue 36, item 4).

argparse's ``store_true`` action stores ``True`` when the option is given and otherwise
leaves the option's default; ``store_false`` stores ``False`` the same way. So
``parser.add_argument("--use_fp32", action="store_true", default=True)`` makes
``args.use_fp32`` true in every run: no command line can make it false, and the branch it
turns off never runs (nor does the other side of ``x if args.use_fp32 else y``). The same
holds for ``store_false`` with ``default=False``.

Only the program itself can change such a value, so the switch is a constant only where the
file shows no way to do that: one ``add_argument`` declares its destination, and the file
has no ``set_defaults`` (which overrides defaults), no ``namespace=`` (a namespace's own
attribute wins over the default), no ``Namespace(`` built by hand, no ``vars(``,
``__dict__`` or ``setattr(`` (a configuration merged into the arguments), and no assignment
to an attribute of that name. The test must read the switch off a name the file binds from
``parse_args``/``parse_known_args`` (``args = parser.parse_args()``, ``args = parse_args()``,
``opt, _ = parser.parse_known_args()``), or a parameter of that name, so an unrelated
object's attribute of the same name is never taken for it.

A file that never writes ``store_true``/``store_false`` pays one byte search.
"""

from __future__ import annotations

import re
from functools import cached_property

import libcst as cst

from mpcheck.project.names import descendants, dotted

__all__ = ["Options"]

# What lets a program change a parsed value without its command line.
_OPENINGS = (b"set_defaults", b"namespace=", b"Namespace(", b"vars(", b"__dict__", b"setattr(")
_PARSERS = ("parse_args", "parse_known_args")


class Options:
    """The switches of one file whose value no run can change (see the module docstring)."""

    def __init__(self, module: cst.Module, source: bytes) -> None:
        self._module = module
        self._source = source

    def value(self, test: cst.BaseExpression) -> bool | None:
        """The value ``test`` always has when it reads constant switches (``args.flag``,
        ``not args.flag``, joined by ``and``/``or``), else None."""
        if not self._constants:
            return None
        return self._value(test)

    def _value(self, test: cst.BaseExpression) -> bool | None:
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self._value(test.expression)
            return None if inner is None else not inner
        if isinstance(test, cst.BooleanOperation):
            left, right = self._value(test.left), self._value(test.right)
            if isinstance(test.operator, cst.And):
                if left is False or right is False:
                    return False
                return True if left is True and right is True else None
            if left is True or right is True:
                return True
            return False if left is False and right is False else None
        if (
            isinstance(test, cst.Attribute)
            and isinstance(test.value, cst.Name)
            and test.value.value in self._namespaces
        ):
            return self._constants.get(test.attr.value)
        return None

    @cached_property
    def _constants(self) -> dict[str, bool]:
        """Each constant switch's destination and its value."""
        source = self._source
        if b"store_true" not in source and b"store_false" not in source:
            return {}
        if any(opening in source for opening in _OPENINGS):
            return {}
        declared: dict[str, list[bool | None]] = {}
        for node in descendants(self._module):
            if type(node) is cst.Call and _method(node) == "add_argument":
                dest = _destination(node)
                if dest is not None:
                    declared.setdefault(dest, []).append(_always(node))
        found = {
            dest: values[0]
            for dest, values in declared.items()
            if len(values) == 1 and values[0] is not None
        }
        return {dest: value for dest, value in found.items() if not _assigned(source, dest)}

    @cached_property
    def _namespaces(self) -> frozenset[str]:
        """The names the file binds from a parser's result (see the module docstring)."""
        names: set[str] = set()
        for node in descendants(self._module):
            if type(node) is not cst.Assign:
                continue
            call = node.value
            if type(call) is cst.Subscript:  # ``parser.parse_known_args()[0]``
                call = call.value
            if type(call) is not cst.Call:
                continue
            func = call.func  # (``build_parser().parse_args()``: the last name is enough)
            callee = func.attr.value if isinstance(func, cst.Attribute) else dotted(func)
            if callee not in _PARSERS:
                continue
            for target in node.targets:
                bound: cst.BaseExpression = target.target
                if isinstance(bound, cst.Tuple) and bound.elements:  # ``args, rest = ...``
                    bound = bound.elements[0].value
                if isinstance(bound, cst.Name):
                    names.add(bound.value)
        return frozenset(names)


def _method(call: cst.Call) -> str | None:
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else None


def _string(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _destination(call: cst.Call) -> str | None:
    """The attribute ``add_argument`` stores into: ``dest=``, else the first long option
    without its dashes (inner dashes become underscores), else the first short one."""
    flags: list[str] = []
    for arg in call.args:
        if arg.keyword is None and arg.star == "":
            text = _string(arg.value)
            if text is None:
                return None
            flags.append(text)
        elif arg.keyword is not None and arg.keyword.value == "dest":
            return _string(arg.value)
        elif arg.star:
            return None
    long = [f for f in flags if f.startswith("--")]
    short = [f for f in flags if f.startswith("-") and not f.startswith("--")]
    chosen = long[0][2:] if long else short[0][1:] if short else None
    return chosen.replace("-", "_") if chosen else None


def _always(call: cst.Call) -> bool | None:
    """``True`` for ``store_true`` with a true literal default, ``False`` for ``store_false``
    with a false one, else None (the run may set either value)."""
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    action = _string(keywords["action"]) if "action" in keywords else None
    default = keywords.get("default")
    if action is None or not isinstance(default, cst.Name):
        return None
    if action == "store_true" and default.value == "True":
        return True
    if action == "store_false" and default.value == "False":
        return False
    return None


def _assigned(source: bytes, name: str) -> bool:
    """Whether the file assigns an attribute ``name`` (``args.name = ...``, ``+=``)."""
    pattern = rb"\.%s\s*(?:[-+*/%%@&|^]|//|\*\*|<<|>>)?=(?!=)" % re.escape(name.encode())
    return re.search(pattern, source) is not None
