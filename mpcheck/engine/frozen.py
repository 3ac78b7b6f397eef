"""Dtypes frozen at construction: a module attribute that casting the module leaves stale.

``Net.__init__(self, dtype=torch.float32)`` that only stores ``self.dtype = dtype`` (its
layers are built without it) holds float32 on the default path. ``model.half()`` or
``model.to(device, torch.bfloat16)`` then casts the layers and leaves the attribute as it
was, so ``x.to(self.dtype)`` in ``forward`` hands float32 to half weights (Open-Sora's
STDiT). ``self.dtype = torch.get_default_dtype()`` goes stale the same way.

Read from the class's code alone, and only where nothing else could keep the attribute
right: it is assigned once, in ``__init__``, and nothing built at construction uses it (a
class that builds its parts with ``dtype=dtype`` is made half by passing a dtype, which also
sets the attribute). A class ``from_pretrained`` loads builds under the load's default
dtype, so ``torch.get_default_dtype()`` is right there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from mpcheck.engine.binding import parameters
from mpcheck.project.names import descendants, dotted

FLOAT32 = ("torch.float32", "torch.float")
DEFAULT_DTYPE = "torch.get_default_dtype"


@dataclass(frozen=True)
class Frozen:
    """Where an attribute's float32 was decided, and a phrase saying how."""

    node: cst.CSTNode
    text: str  # "fixed when the model is built, by the default `dtype=torch.float32`"


def frozen_dtypes(
    cls: cst.ClassDef,
    methods: dict[str, cst.FunctionDef],
    resolve: Callable[[cst.BaseExpression], str | None],
    code: Callable[[cst.CSTNode], str],
    *,
    pretrained: bool,
) -> dict[str, Frozen]:
    """``self.<attr>`` -> where its float32 came from, for the attributes of ``cls`` that
    hold a float32 dtype decided when the module was built and that its casts never update."""
    init = methods.get("__init__")
    if init is None or not isinstance(init.body, cst.IndentedBlock):
        return {}
    defaults: dict[str, Frozen] = {}
    for param in parameters(init, skip_self=True):
        name, default = param.name.value, param.default
        if name.endswith("dtype") and default is not None and resolve(default) in FLOAT32:
            how = f"the default `{name}={code(default)}` of `{cls.name.value}.__init__`"
            defaults[name] = Frozen(default, f"fixed when the model is built, by {how}")
    found: dict[str, tuple[Frozen, str | None]] = {}  # attr -> source, parameter it stores
    for stmt in init.body.body:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
        if not isinstance(small, cst.Assign) or len(small.targets) != 1:
            continue
        key, value = dotted(small.targets[0].target), small.value
        if key is None or not key.startswith("self.") or key.count(".") != 1:
            continue
        if isinstance(value, cst.Name) and value.value in defaults:
            found[key] = (defaults[value.value], value.value)
        elif _default_dtype(value, resolve) and not pretrained:
            text = f"fixed when the model is built, by `{code(value)}` (float32 unless set)"
            found[key] = (Frozen(value, text), None)
    if not found:
        return {}
    building = [init, *_called_by(init, methods)]
    return {
        key: source
        for key, (source, param) in found.items()
        if not _used_in(building, key, param) and _assigned_once(cls, key)
    }


def _default_dtype(value: cst.BaseExpression, resolve: Callable[..., str | None]) -> bool:
    return isinstance(value, cst.Call) and not value.args and resolve(value.func) == DEFAULT_DTYPE


def _called_by(init: cst.FunctionDef, methods: dict[str, cst.FunctionDef]) -> list[cst.FunctionDef]:
    """The methods ``__init__`` calls as ``self.name(...)``: they run at construction too."""
    called = []
    for node in descendants(init.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            fn = methods.get(node.func.attr.value)
            if dotted(node.func.value) == "self" and fn is not None and fn is not init:
                called.append(fn)
    return called


def _used_in(fns: list[cst.FunctionDef], key: str, param: str | None) -> bool:
    """Whether anything run at construction reads ``key`` or, in ``__init__``, the parameter
    it stores (``nn.Linear(d, d, dtype=dtype)``, ``self.to(self.dtype)``), past the one
    assignment ``self.<attr> = <param>``."""
    attrs = names = 0
    for fn in fns:
        skip: set[int] = set()  # names that read nothing: keywords, attribute names
        nodes = descendants(fn.body)
        for node in nodes:
            if isinstance(node, cst.Arg) and node.keyword is not None:
                skip.add(id(node.keyword))
            elif isinstance(node, cst.Attribute):
                skip.add(id(node.attr))
                attrs += dotted(node) == key
        if fn.name.value == "__init__" and param is not None:
            names += sum(
                isinstance(n, cst.Name) and n.value == param and id(n) not in skip for n in nodes
            )
    return attrs > 1 or names > 1


def _assigned_once(cls: cst.ClassDef, key: str) -> bool:
    """``key`` is bound by one statement of the class (``__init__``'s) and never re-set:
    no other assignment, augmented assignment or ``setattr`` that could update it."""
    targets = 0
    for node in descendants(cls.body):
        if isinstance(node, cst.AssignTarget | cst.AnnAssign | cst.AugAssign):
            targets += dotted(node.target) == key
        elif isinstance(node, cst.Call) and dotted(node.func) == "setattr":
            return False
    return targets == 1
