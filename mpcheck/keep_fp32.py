"""Parts of a half model that stay float32: ``_keep_in_fp32_modules`` and ``*Fp32`` classes.

``from_pretrained(..., torch_dtype=torch.float16)`` leaves every parameter whose
dotted name contains a listed pattern at segment boundaries in float32
(``"norm"``, ``"time_embeddings"``, ``"mlp.gate.weight"``). Code inside those
parts legitimately computes in float32, so the analysis must know which
classes and which attributes they cover. Classes are linked to names through
``self.<attr> = Class(...)`` in the other classes' ``__init__``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import libcst as cst

from mpcheck.names import dotted

KEEP_ATTRS = ("_keep_in_fp32_modules", "_keep_in_fp32_modules_strict")
# peft's tuner layers name their adapter containers (``lora_A``, ``lora_B``) here; peft keeps
# those float32 beside a half base layer (``autocast_adapter_dtype=True``, its default).
ADAPTER_ATTRS = ("adapter_layer_names",)
FP32_IN_NAME = re.compile(r"fp32|float32", re.IGNORECASE)


@dataclass
class KeepFp32:
    """Parameters a model keeps in float32 whatever it is cast to."""

    names: frozenset[str] = frozenset()  # single-segment patterns: attribute names
    kept_classes: set[str] = field(default_factory=set)  # every parameter is float32
    kept_params: dict[str, set[str]] = field(default_factory=dict)  # class -> attr names
    # class -> its peft adapter containers (``adapter_layer_names``, its local bases' too)
    adapters: dict[str, frozenset[str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.names or self.kept_classes or self.kept_params or self.adapters)

    def param_kept(self, class_name: str | None, attr: str) -> bool:
        return class_name is not None and attr in self.kept_params.get(class_name, ())

    def adapter(self, class_name: str | None, attr: str) -> bool:
        """``self.<attr>`` of ``class_name`` is a peft adapter container: float32 on a half
        base layer."""
        return class_name is not None and attr in self.adapters.get(class_name, ())

    @classmethod
    def of(cls, classes: Mapping[str, cst.ClassDef]) -> KeepFp32:
        # ``class LayerNormFp32(nn.LayerNorm)``: its name says its parameters stay float32
        named = {name for name in classes if FP32_IN_NAME.search(name)}
        adapters = _adapter_names(classes)
        patterns = [p.split(".") for node in classes.values() for p in keep_patterns(node)]
        if not patterns:
            return cls(kept_classes=named, adapters=adapters)
        # class name -> [(attribute it is built under, class that builds it)]
        built_as: dict[str, list[tuple[str, str]]] = {}
        for owner, node in classes.items():
            for attr, made in _self_constructions(node):
                built_as.setdefault(made, []).append((attr, owner))

        def reached(name: str, segs: list[str], depth: int = 0) -> bool:
            """Whether class ``name`` is built under the attribute path ``segs``."""
            if depth > 8:
                return False
            for attr, owner in built_as.get(name, ()):
                if attr == segs[-1] and (len(segs) == 1 or reached(owner, segs[:-1], depth + 1)):
                    return True
            return False

        keep = cls(
            frozenset(s[0] for s in patterns if len(s) == 1), kept_classes=named, adapters=adapters
        )
        for name in classes:
            for segs in patterns:
                if reached(name, segs):
                    keep.kept_classes.add(name)
                elif len(segs) > 1 and reached(name, segs[:-1]):
                    keep.kept_params.setdefault(name, set()).add(segs[-1])
        return keep


def _adapter_names(classes: Mapping[str, cst.ClassDef]) -> dict[str, frozenset[str]]:
    """Each class's adapter containers: its own ``adapter_layer_names`` and its local bases'."""
    own = {name: frozenset(keep_patterns(node, ADAPTER_ATTRS)) for name, node in classes.items()}

    def names(name: str, depth: int = 0) -> frozenset[str]:
        node = classes.get(name)
        if node is None or depth > 8:
            return frozenset()
        found = own[name]
        for base in node.bases:
            leaf = (dotted(base.value) or "").rsplit(".", 1)[-1]
            if leaf != name and not base.keyword:
                found |= names(leaf, depth + 1)
        return found

    out = {name: names(name) for name in classes}
    return {name: attrs for name, attrs in out.items() if attrs}


def keep_patterns(node: cst.ClassDef, attrs: tuple[str, ...] = KEEP_ATTRS) -> Iterator[str]:
    """The names a class lists in ``_keep_in_fp32_modules`` (another file's subclass inherits
    them), or in other ``attrs``."""
    for stmt in node.body.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                target: cst.BaseExpression = small.targets[0].target
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                target = small.target
            else:
                continue
            value = small.value
            if dotted(target) in attrs and isinstance(value, (cst.List, cst.Tuple, cst.Set)):
                for el in value.elements:
                    if isinstance(el.value, cst.SimpleString):
                        text = el.value.evaluated_value
                        if isinstance(text, str):
                            yield text


def _self_constructions(node: cst.ClassDef) -> Iterator[tuple[str, str]]:
    """``(attr, ClassName)`` for each ``self.attr = ClassName(...)`` in ``__init__``."""
    for fn in node.body.body:
        if not (isinstance(fn, cst.FunctionDef) and fn.name.value == "__init__"):
            continue
        body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else ()
        for stmt in body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call):
                    target = dotted(small.targets[0].target) or ""
                    callee = dotted(small.value.func) or ""
                    if target.startswith("self.") and target.count(".") == 1:
                        yield target[5:], callee.rsplit(".", 1)[-1]
