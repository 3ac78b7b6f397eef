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

from mpcheck.project.names import children, descendants, dotted

KEEP_ATTRS = ("_keep_in_fp32_modules", "_keep_in_fp32_modules_strict")
# peft's tuner layers name their adapter containers (``lora_A``, ``lora_B``) here; peft keeps
# those float32 beside a half base layer (``autocast_adapter_dtype=True``, its default).
ADAPTER_ATTRS = ("adapter_layer_names",)
# ... and their other per-adapter containers (VeRA's shared ``vera_A``) here. peft moves the
# entries of both to the base layer's dtype, then upcasts those of the dict classes its
# ``cast_adapter_dtype`` tests for: all three in released peft (0.12.0 on); its main branch
# skipped ``BufferDict`` for a while (June 2024, until the VeRA fix of PR #1874).
MOVED_ATTRS = ("other_param_names",)
ADAPTER_DICTS = frozenset({"ModuleDict", "ParameterDict", "BufferDict"})
CAST_FUNCTIONS = frozenset({"cast_adapter_dtype", "_cast_adapter_dtype"})
FP32_IN_NAME = re.compile(r"fp32|float32", re.IGNORECASE)


@dataclass
class KeepFp32:
    """Parameters a model keeps in float32 whatever it is cast to."""

    names: frozenset[str] = frozenset()  # single-segment patterns: attribute names
    kept_classes: set[str] = field(default_factory=set)  # every parameter is float32
    kept_params: dict[str, set[str]] = field(default_factory=dict)  # class -> attr names
    # class -> its peft adapter containers (``adapter_layer_names``, its local bases' too)
    adapters: dict[str, frozenset[str]] = field(default_factory=dict)
    # class -> its other per-adapter containers (``other_param_names``, local bases' too)
    moved: dict[str, frozenset[str]] = field(default_factory=dict)
    # class -> the dict classes the project's own ``cast_adapter_dtype`` upcasts (when seen)
    casts: dict[str, frozenset[str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.names or self.kept_classes or self.kept_params or self.adapters)

    def listed(self, class_name: str | None, attr: str) -> bool:
        """``self.<attr>`` is named in ``adapter_layer_names`` or ``other_param_names``:
        peft moves its entries to the base layer's dtype when it adds an adapter."""
        return self.adapter(class_name, attr) or attr in self.moved.get(class_name or "", ())

    def upcast(self, class_name: str | None, container: str | None) -> bool:
        """Whether peft upcasts the entries of ``class_name``'s adapter dict of class
        ``container`` to float32: yes unless the project's ``cast_adapter_dtype`` was read
        and tests for other dict classes only (an unknown container counts as cast)."""
        casts = self.casts.get(class_name or "")
        return casts is None or container is None or container in casts

    def param_kept(self, class_name: str | None, attr: str) -> bool:
        return class_name is not None and attr in self.kept_params.get(class_name, ())

    def adapter(self, class_name: str | None, attr: str) -> bool:
        """``self.<attr>`` of ``class_name`` is a peft adapter container: float32 on a half
        base layer."""
        return class_name is not None and attr in self.adapters.get(class_name, ())

    @classmethod
    def of(
        cls,
        classes: Mapping[str, cst.ClassDef],
        casts: Mapping[str, frozenset[str]] | None = None,
    ) -> KeepFp32:
        # ``class LayerNormFp32(nn.LayerNorm)``: its name says its parameters stay float32
        named = {n for n, node in classes.items() if FP32_IN_NAME.search(n) and _name_holds(node)}
        named |= {n for n, node in classes.items() if wholly_fp32(node)}
        adapters = _adapter_names(classes)
        moved = _adapter_names(classes, MOVED_ATTRS)
        casts = dict(casts or {})
        patterns = [p.split(".") for node in classes.values() for p in keep_patterns(node)]
        if not patterns:
            return cls(kept_classes=named, adapters=adapters, moved=moved, casts=casts)
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
            frozenset(s[0] for s in patterns if len(s) == 1),
            kept_classes=named,
            adapters=adapters,
            moved=moved,
            casts=casts,
        )
        for name in classes:
            for segs in patterns:
                if reached(name, segs):
                    keep.kept_classes.add(name)
                elif len(segs) > 1 and reached(name, segs[:-1]):
                    keep.kept_params.setdefault(name, set()).add(segs[-1])
        return keep


def adapter_casts(module: cst.Module) -> frozenset[str] | None:
    """The dict classes whose entries this file's ``cast_adapter_dtype`` upcasts, as its
    ``isinstance`` tests name them (``(nn.ModuleDict, nn.ParameterDict)`` before PR #1874);
    None when the file defines none that names one."""
    found: set[str] = set()
    for stmt in module.body:  # a function of the module, or a method of one of its classes
        body = stmt.body.body if isinstance(stmt, cst.ClassDef) else (stmt,)
        for fn in body:
            if isinstance(fn, cst.FunctionDef) and fn.name.value in CAST_FUNCTIONS:
                found |= _isinstance_dicts(fn)
    return frozenset(found) or None


def _isinstance_dicts(fn: cst.FunctionDef) -> set[str]:
    """The adapter dict classes named by the ``isinstance(x, ...)`` tests in ``fn``."""
    found: set[str] = set()
    stack: list[cst.CSTNode] = [fn.body]
    while stack:
        node = stack.pop()
        stack.extend(children(node))
        if not (isinstance(node, cst.Call) and dotted(node.func) == "isinstance"):
            continue
        if len(node.args) == 2:
            kinds = node.args[1].value
            parts = kinds.elements if isinstance(kinds, cst.Tuple) else [cst.Element(kinds)]
            leaves = {(dotted(p.value) or "").rsplit(".", 1)[-1] for p in parts}
            found |= leaves & ADAPTER_DICTS
    return found


def _adapter_names(
    classes: Mapping[str, cst.ClassDef], attrs: tuple[str, ...] = ADAPTER_ATTRS
) -> dict[str, frozenset[str]]:
    """Each class's adapter containers: its own ``adapter_layer_names`` (or other ``attrs``)
    and its local bases'."""
    own = {name: frozenset(keep_patterns(node, attrs)) for name, node in classes.items()}

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


def _name_holds(node: cst.ClassDef) -> bool:
    """Whether a class named float32 has code that agrees: its weights come from a torch
    layer it subclasses (open_clip's ``LayerNormFp32(nn.LayerNorm)``, which its half
    conversion leaves float32) or it names float32 (``torch.ones(d, dtype=torch.float32)``).
    A plain ``nn.Module`` building its weights in the default dtype (``RMSNorm_FP32``'s
    ``nn.Parameter(torch.ones(dim))``) follows the model: ``from_pretrained(torch_dtype=...)``
    builds them in that dtype and ``.half()`` casts them; its name says where it computes."""
    bases = [dotted(arg.value) or "" for arg in node.bases if arg.keyword is None]
    if any(base.rsplit(".", 1)[-1] != "Module" for base in bases):
        return True
    return any(
        isinstance(sub, cst.Attribute) and dotted(sub) in _FLOAT32_NAMES
        for sub in descendants(node)
    )


_FLOAT32_NAMES = frozenset({"torch.float32", "torch.float"})


def wholly_fp32(node: cst.ClassDef) -> bool:
    """Every part the class builds in ``__init__`` stays float32: listed in its own
    ``_keep_in_fp32_modules`` (a VAE that lists all its children) or built with
    ``dtype=torch.float32``. No part follows a half dtype, so there is no split to report:
    the class is float32 as a whole."""
    listed = {p for p in keep_patterns(node) if "." not in p}
    parts = [(attr, call) for attr, call in _self_calls(node) if _builds_a_part(call)]
    return bool(parts) and all(attr in listed or _float32_kwarg(call) for attr, call in parts)


def _builds_a_part(call: cst.Call) -> bool:
    """``nn.Conv3d(...)``, ``Decoder(...)``, ``torch.zeros(...)``: not ``math.ceil(...)``."""
    name = dotted(call.func) or ""
    return name.startswith("torch.") or name.rsplit(".", 1)[-1][:1].isupper()


def _float32_kwarg(call: cst.Call) -> bool:
    return any(
        arg.keyword is not None
        and arg.keyword.value == "dtype"
        and dotted(arg.value) in _FLOAT32_NAMES
        for arg in call.args
    )


def _self_constructions(node: cst.ClassDef) -> Iterator[tuple[str, str]]:
    """``(attr, ClassName)`` for each ``self.attr = ClassName(...)`` in ``__init__``."""
    for attr, call in _self_calls(node):
        yield attr, (dotted(call.func) or "").rsplit(".", 1)[-1]


def _self_calls(node: cst.ClassDef) -> Iterator[tuple[str, cst.Call]]:
    """``(attr, call)`` for each ``self.attr = <call>`` of ``__init__``'s own lines."""
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
                    if target.startswith("self.") and target.count(".") == 1:
                        yield target[5:], small.value
