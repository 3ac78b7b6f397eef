"""Which option of the run a cast or a GradScaler rests on: the choice a test reads.

A training script decides its precision from options of the run (``args.mixed_precision ==
"fp16"``, ``training_args.fp16``, accelerate's launch configuration). A cast to float16 made
where such a test holds, and a GradScaler enabled by the same test, go together on every run:
whenever the parameters are float16, the scaler is on. Two different options (the scaler's
``enabled=args.fp16``, the load's ``args.dtype``) meet only on the runs that set both.

An option is named by its last attribute: ``args.mixed_precision``,
``accelerator.mixed_precision`` and ``self.config.mixed_precision`` are one option (accelerate's
mixed precision is the one it was handed, or the launch configuration's, and scripts copy it
into their own arguments), and ``"fp16"``, ``"float16"``, ``"16"``, ``"16-mixed"`` and
``"half"`` are one value. Only what a test says on its own counts: an ``and`` that holds holds
each side, an ``or`` that fails fails each side; any other test says nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from mpcheck.engine.training import Scaler, bool_value
from mpcheck.project.names import dotted

Choice = tuple[str, str | bool]  # (option, value): ("mixed_precision", "fp16"), ("fp16", True)
FP16 = "fp16"
_FP16_SPELLINGS = frozenset(
    {"fp16", "float16", "16", "16-mixed", "half", "torch.float16", "torch.half"}
)


def option(node: cst.BaseExpression) -> str | None:
    """The option ``node`` reads: ``args.fp16`` is ``fp16``, ``config["fp16"]`` too."""
    name = dotted(node)
    if name is not None:
        return name.rpartition(".")[2]
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        index = node.slice[0].slice
        if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
            key = index.value.evaluated_value
            return key if isinstance(key, str) and key.isidentifier() else None
    return None


def chosen(test: cst.BaseExpression, truth: bool) -> frozenset[Choice]:
    """The choices that hold wherever ``test`` is ``truth``."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return chosen(test.expression, not truth)
    if isinstance(test, cst.IfExp):  # ``True if precision == "fp16" else False``
        sides = (bool_value(test.body), bool_value(test.orelse))
        if sides == (truth, not truth):
            return chosen(test.test, True)
        if sides == (not truth, truth):
            return chosen(test.test, False)
        return frozenset()
    if isinstance(test, cst.BooleanOperation):
        if isinstance(test.operator, cst.And) == truth:  # (both sides hold)
            return chosen(test.left, truth) | chosen(test.right, truth)
        return frozenset()
    if isinstance(test, cst.Comparison):
        if len(test.comparisons) != 1:
            return frozenset()
        comp = test.comparisons[0]
        equal = isinstance(comp.operator, cst.Equal) or isinstance(comp.operator, cst.Is)
        if not (equal or isinstance(comp.operator, (cst.NotEqual, cst.IsNot))) or equal != truth:
            return frozenset()  # (``x != "fp16"`` where it holds says nothing of x)
        for side, value in ((test.left, comp.comparator), (comp.comparator, test.left)):
            name = option(side)
            if name is not None and _spelling(value) in _FP16_SPELLINGS:
                return frozenset({(name, FP16)})
        return frozenset()
    if isinstance(test, (cst.Name, cst.Attribute, cst.Subscript)):
        name = option(test)
        if name is not None and name not in ("True", "False", "None"):
            return frozenset({(name, truth)})
    return frozenset()


def _spelling(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value.lower() if isinstance(value, str) else None
    if isinstance(node, cst.Integer):
        return node.value
    return dotted(node)


class Branches:
    """The tests each node of one module runs under, within its function."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._parents: dict[int, cst.CSTNode] | None = None

    @property
    def parents(self) -> dict[int, cst.CSTNode]:
        if self._parents is None:  # (built once, and only for a file that asks)
            parents: dict[int, cst.CSTNode] = {}
            stack: list[cst.CSTNode] = [self.module]
            while stack:
                node = stack.pop()
                for child in node.children:
                    parents[id(child)] = node
                    stack.append(child)
            self._parents = parents
        return self._parents

    def choices(self, node: cst.CSTNode) -> frozenset[Choice]:
        """What the tests of the ``if`` statements and conditional expressions around
        ``node`` (up to its function) choose wherever ``node`` runs."""
        found: set[Choice] = set()
        for test, truth in self._tests(node):
            found |= chosen(test, truth)
        return frozenset(found)

    def _tests(self, node: cst.CSTNode) -> Iterator[tuple[cst.BaseExpression, bool]]:
        parents = self.parents
        child, parent = node, parents.get(id(node))
        while parent is not None:
            if isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return
            if isinstance(parent, (cst.If, cst.IfExp)) and child is not parent.test:
                yield parent.test, child is parent.body
            child, parent = parent, parents.get(id(parent))


def scaler_choices(scaler: Scaler, branches: Branches) -> tuple[frozenset[Choice], ...]:
    """The ways a run turns ``scaler`` on, each the choices that together do: accelerate's
    when its mixed precision is fp16 (``mixed_precision=args.precision`` names that option
    too), transformers' when ``fp16`` is set, a torch scaler's as ``enabled=`` says; each
    with the branch it is made on, if any. () when nothing of the code says."""
    made = frozenset() if isinstance(scaler.node, cst.Param) else branches.choices(scaler.node)
    if scaler.enabled is True:
        return (made,) if made else ()
    ways: list[frozenset[Choice]] = []
    flag = scaler.flag
    if scaler.via == "accelerate":
        ways.append(frozenset({("mixed_precision", FP16)}))
        name = option(flag) if flag is not None else None
        if name is not None:
            ways.append(frozenset({(name, FP16)}))
    elif scaler.via == "transformers":
        ways.append(frozenset({("fp16", True)}))
        if flag is not None:
            ways.append(chosen(flag, True))
    elif flag is not None:
        ways.append(chosen(flag, True))
    return tuple(way | made for way in ways if way)
