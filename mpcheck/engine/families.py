"""Attributes under computed names: ``setattr(self, f"scaler{i}", scaler)`` read back with
``getattr(self, f"scaler{index}")``.

Trainers that keep one optimizer or GradScaler per sub-model (DALLE2's ``DecoderTrainer``, one
per U-Net) store them under names an f-string builds, since an optimizer cannot go in a
``ModuleList``; models do the same with per-stage layers and embeddings. Every name one
f-string's shape (its *template*, ``scaler{}``) builds is one family of attributes: the walk
binds the family under ``self.scaler{}`` (never a Python name) to the join of what each
``setattr`` stored there, so it flows between methods like ``self.scaler`` does, and a
``getattr`` of the same template reads it.

Only a template that starts with constant text counts, and only when nothing else of the
class can answer the same ``getattr``: no other template whose names can coincide with its
names (``opt{}`` and ``optim{}`` can: ``i`` may be ``"im0"``), no plain attribute, method or
literal ``setattr`` name it could spell (``scaler{}`` spells ``scaler_state``), and no
``setattr(self, name, ...)`` with a name of any other shape, which could be anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import libcst as cst

from mpcheck.engine.facts import UNKNOWN, Fact, join
from mpcheck.engine.frames import ClassInfo, Frame, lineage
from mpcheck.engine.sites import Operand
from mpcheck.project.names import children, dotted

PLACEHOLDER = "{}"  # one formatted value of a template
# Environment key prefix marking a family this function's walk stored into: a second ``setattr``
# of it joins the members (an inherited or earlier method's family is replaced, as
# ``self.x = ...`` replaces ``self.x``). Not a Python name, and never kept on the class.
MEMBERS = "\0members\0"
_TEXT = re.compile(r"[A-Za-z0-9_]*")


def template(node: cst.BaseExpression) -> str | None:
    """``f"scaler{i}"`` -> ``"scaler{}"``: the shape of the names an f-string builds, when it
    starts with constant text and all its constant text could be part of an identifier."""
    if not isinstance(node, cst.FormattedString) or not node.parts:
        return None
    first = node.parts[0]
    if not isinstance(first, cst.FormattedStringText) or not first.value.isidentifier():
        return None
    out: list[str] = []
    for part in node.parts:
        if isinstance(part, cst.FormattedStringText):
            if not _TEXT.fullmatch(part.value):
                return None
            out.append(part.value)
        else:
            out.append(PLACEHOLDER)
    return "".join(out) if len(out) > 1 else None


@dataclass(frozen=True)
class Shapes:
    """The attribute names a class's own code can reach."""

    templates: frozenset[str]  # ``setattr(self, f"scaler{i}", ...)``
    names: frozenset[str]  # ``self.amp``, methods, class-level names, ``setattr(self, "x", ...)``
    other: bool  # a ``setattr(self, name, ...)`` whose name may be anything


def shapes(cls: cst.ClassDef) -> Shapes:
    templates: set[str] = set()
    names: set[str] = set()
    other = False
    for stmt in cls.body.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            names.add(stmt.name.value)
    for node in _own_nodes(cls.body):
        if isinstance(node, cst.Attribute) and dotted(node.value) == "self":
            names.add(node.attr.value)
        elif _sets_self(node):
            assert isinstance(node, cst.Call)
            name = node.args[1].value
            shape = template(name)
            if shape is not None:
                templates.add(shape)
            elif isinstance(name, cst.SimpleString) and isinstance(name.evaluated_value, str):
                names.add(name.evaluated_value)
            else:
                other = True
    # class-level assignments (``scaler_cls = GradScaler``) are attributes of ``self`` too
    for stmt in cls.body.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                targets = small.targets if isinstance(small, cst.Assign) else ()
                names.update(n for t in targets if (n := dotted(t.target)) is not None)
                if isinstance(small, cst.AnnAssign) and (n := dotted(small.target)) is not None:
                    names.add(n)
    return Shapes(frozenset(templates), frozenset(names), other)


class Binder(Protocol):
    """What :func:`computed_attribute` needs of the walk."""

    classes: dict[str, ClassInfo]

    def bind(
        self, target: cst.BaseExpression, value: Fact, frame: Frame, key: str | None = None
    ) -> None: ...


def computed_attribute(
    walk: Binder, name: str, args: Sequence[Operand], frame: Frame
) -> Fact | None:
    """``getattr(self, f"scaler{j}")``: the family's fact. ``setattr(self, f"scaler{i}", v)``
    binds ``v`` as the family (None, as for anything else)."""
    key = family_key(walk.classes, frame.scope.class_name, [a.node for a in args])
    if key is not None and name == "getattr" and len(args) == 2:
        return frame.env.get(key, UNKNOWN)
    if key is not None and name == "setattr" and len(args) == 3:
        # one more member of the family, if this walk stored others (a loop's last pass)
        old = frame.env.get(key) if MEMBERS + key in frame.env else None
        walk.bind(args[1].node, args[2].fact, frame, key)
        frame.env[key] = frame.env[key] if old is None else join(old, frame.env[key])
        frame.env[MEMBERS + key] = UNKNOWN
    return None


def family_key(
    classes: dict[str, ClassInfo], class_name: str | None, args: Sequence[cst.BaseExpression]
) -> str | None:
    """``self.scaler{}`` when the arguments of a ``setattr``/``getattr`` name one family of
    ``self``'s attributes in a method of ``class_name``; None otherwise."""
    if len(args) < 2 or dotted(args[0]) != "self":
        return None
    shape = template(args[1])
    info = classes.get(class_name or "")
    if shape is None or info is None:
        return None
    templates: set[str] = set()
    names = {k[len("self.") :] for k in info.attrs if PLACEHOLDER not in k}
    for found in (shapes(cls.node) for cls in lineage(classes, info)):
        templates |= found.templates
        names |= found.names
        if found.other:
            return None
    if shape not in templates:
        return None
    spelled = re.compile(".*".join(re.escape(p) for p in shape.split(PLACEHOLDER)))
    if any(spelled.fullmatch(n) for n in names):
        return None
    if any(t != shape and _may_coincide(t, shape) for t in templates):
        return None
    return f"self.{shape}"


def _may_coincide(a: str, b: str) -> bool:
    """Whether two templates may build the same name: their leading texts and their trailing
    texts are each one a prefix (suffix) of the other."""
    pa, sa = a.split(PLACEHOLDER)[0], a.split(PLACEHOLDER)[-1]
    pb, sb = b.split(PLACEHOLDER)[0], b.split(PLACEHOLDER)[-1]
    prefixes = pa.startswith(pb) or pb.startswith(pa)
    return prefixes and (sa.endswith(sb) or sb.endswith(sa))


def _sets_self(node: cst.CSTNode) -> bool:
    return (
        isinstance(node, cst.Call)
        and dotted(node.func) == "setattr"
        and len(node.args) >= 2
        and dotted(node.args[0].value) == "self"
    )


def _own_nodes(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``root`` but those of nested classes (whose ``self`` is another)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in children(node) if not isinstance(c, cst.ClassDef))
