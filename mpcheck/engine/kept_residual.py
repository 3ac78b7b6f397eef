"""A part kept float32 whose output joins a half model's residual stream ahead of a strict norm.

``from_pretrained(..., torch_dtype=torch.float16)`` keeps the parts named in
``_keep_in_fp32_modules`` float32 (T5's ``wo``). When such a part is the last layer of a
block whose output is added to the residual stream (``h = h + self.dropout(ff(x))``), the
stream is float32 from then on (half + float32 promotes), and the next layer's norm gets a
float32 input with half weights. A norm that upcasts and casts back to its weight's dtype
tolerates that; a fused norm does not: apex's ``FusedRMSNorm``/``FusedLayerNorm`` raise
"expected scalar type Float but found Half". Libraries substitute them at import time when
apex is importable (``try: from apex.normalization import FusedRMSNorm; T5LayerNorm =
FusedRMSNorm``), so the hazard depends on the environment: a latent one, stated with its
premise. Everything here is read from one file's syntax: the model class, its blocks and the
substitution live together in a library's modeling file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import libcst as cst

from mpcheck.engine.facts import Fact, Prec
from mpcheck.engine.keep_fp32 import keep_patterns
from mpcheck.engine.loads import load_dtype
from mpcheck.engine.sites import KeptResidualLoad, Operand
from mpcheck.knowledge.torch_api import STRICT_NORMS
from mpcheck.project.names import children, dotted
from mpcheck.project.summary import ClassSummary, Place

__all__ = ["KeptResidual", "kept_residuals", "load_hazard"]


@dataclass(frozen=True)
class KeptResidual:
    """The evidence, as nodes of the file and the class each lies in (for its position)."""

    kept: str  # ``wo``
    keep: tuple[str, cst.CSTNode]  # the ``"wo"`` of ``_keep_in_fp32_modules``
    join: tuple[str, cst.CSTNode]  # ``hidden_states + self.dropout(forwarded_states)``
    norm: tuple[str, cst.CSTNode]  # ``self.layer_norm = T5LayerNorm(...)``
    strict: str  # ``FusedRMSNorm``
    substituted: cst.CSTNode | None  # ``T5LayerNorm = FusedRMSNorm`` (None: built strict)


def kept_residuals(
    module: cst.Module, resolve: Callable[[cst.BaseExpression], str | None]
) -> dict[str, KeptResidual]:
    """Each class of ``module`` that keeps (or inherits, within the file) a part float32 whose
    output joins a residual stream normalised by a strict norm, with the evidence."""
    classes = {s.name.value: s for s in module.body if isinstance(s, cst.ClassDef)}
    keeps = {
        name: [el for el in _keep_elements(node)]
        for name, node in classes.items()
        if any("." not in p for p in keep_patterns(node))
    }
    if not keeps:
        return {}
    strict = _substitutions(module, resolve)
    found: dict[str, KeptResidual] = {}
    for owner, elements in keeps.items():
        for kept, element in elements:
            hazard = _hazard(classes, kept, strict, resolve)
            if hazard is not None:
                join, norm, strict_name, sub = hazard
                found[owner] = KeptResidual(kept, (owner, element), join, norm, strict_name, sub)
                break
    out: dict[str, KeptResidual] = {}
    for name in classes:  # a subclass in the file (``T5EncoderModel(T5PreTrainedModel)``)
        seen = name
        for _ in range(8):
            if seen in found:
                out[name] = found[seen]
                break
            bases = [dotted(a.value) or "" for a in classes[seen].bases if not a.keyword]
            seen = next((b for b in bases if b in classes and b != seen), "")
            if not seen:
                break
    return out


def _keep_elements(node: cst.ClassDef) -> Iterator[tuple[str, cst.CSTNode]]:
    """``("wo", <the string node>)`` for each single-segment name the class keeps float32."""
    for stmt in node.body.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if not isinstance(small, (cst.Assign, cst.AnnAssign)) or small.value is None:
                continue
            target = small.targets[0].target if isinstance(small, cst.Assign) else small.target
            value = small.value
            if dotted(target) == "_keep_in_fp32_modules" and isinstance(
                value, (cst.List, cst.Tuple)
            ):
                for el in value.elements:
                    text = (
                        el.value.evaluated_value if isinstance(el.value, cst.SimpleString) else None
                    )
                    if isinstance(text, str) and "." not in text:
                        yield text, el.value


def _substitutions(
    module: cst.Module, resolve: Callable[[cst.BaseExpression], str | None]
) -> dict[str, tuple[str, cst.CSTNode]]:
    """``{"T5LayerNorm": ("FusedRMSNorm", <the assignment>)}``: a class name rebound at the
    module's top level, inside ``try``, to a fused norm imported there."""
    out: dict[str, tuple[str, cst.CSTNode]] = {}
    for stmt in module.body:
        if not isinstance(stmt, cst.Try):
            continue
        imported: dict[str, str] = {}
        for line in stmt.body.body:
            if not isinstance(line, cst.SimpleStatementLine):
                continue
            for small in line.body:
                if isinstance(small, cst.ImportFrom) and not isinstance(
                    small.names, cst.ImportStar
                ):
                    for alias in small.names:
                        leaf = dotted(alias.name) or ""
                        local = alias.evaluated_alias or leaf
                        if leaf in STRICT_NORMS:
                            imported[local] = leaf
                elif isinstance(small, cst.Assign) and len(small.targets) == 1:
                    target, value = dotted(small.targets[0].target), dotted(small.value)
                    if target and value in imported:
                        out[target] = (imported[value], small)
    return out


# torch's norms that refuse a float32 input with half parameters (measured, CPU and CUDA:
# "mixed dtype (CPU): expect parameter to have scalar type of Float"); ``rms_norm`` runs it
TORCH_STRICT = frozenset({"torch.nn.LayerNorm", "torch.nn.GroupNorm"})
STRICT_FUNCTIONS = frozenset({"torch.nn.functional.layer_norm", "torch.nn.functional.group_norm"})


def _strict_norm(
    call: cst.Call,
    strict: Mapping[str, tuple[str, cst.CSTNode]],
    resolve: Callable[[cst.BaseExpression], str | None],
    classes: Mapping[str, cst.ClassDef],
) -> tuple[str, cst.CSTNode | None] | None:
    """The norm a constructor call builds when it refuses a float32 input with half weights:
    a fused norm substituted for a class name or named directly (``FusedRMSNorm(d)``), torch's
    ``nn.LayerNorm``/``nn.GroupNorm``, or a class of the file handing its own weight with the
    input to ``F.layer_norm``/``F.group_norm``."""
    name = dotted(call.func) or ""
    if name in strict:
        return strict[name][0], strict[name][1]
    qual = resolve(call.func) or name
    leaf = qual.rsplit(".", 1)[-1]
    if leaf in STRICT_NORMS or qual in TORCH_STRICT:
        return leaf, None
    node = classes.get(name)
    forward = _method(node, "forward") if node is not None else None
    if forward is not None and any(
        isinstance(sub, cst.Call)
        and resolve(sub.func) in STRICT_FUNCTIONS
        and any(dotted(a.value) == "self.weight" for a in sub.args)
        for sub in _walk(forward.body)
    ):
        return name, None
    return None


def _hazard(
    classes: Mapping[str, cst.ClassDef],
    kept: str,
    strict: Mapping[str, tuple[str, cst.CSTNode]],
    resolve: Callable[[cst.BaseExpression], str | None],
) -> tuple[tuple[str, cst.CSTNode], tuple[str, cst.CSTNode], str, cst.CSTNode | None] | None:
    """A block of the file that builds a part ending in ``self.<kept>``, adds that part's
    output to its input, and normalises with a strict norm."""
    producers = {n for n, node in classes.items() if _ends_with(node, kept)}
    if not producers:
        return None
    for name, node in classes.items():
        built = dict(_init_builds(node))
        parts = {attr for attr, call in built.items() if (dotted(call.func) or "") in producers}
        norms = {
            attr: found
            for attr, call in built.items()
            if (found := _strict_norm(call, strict, resolve, classes)) is not None
        }
        if not parts or not norms:
            continue
        join = _residual_join(node, parts)
        if join is None:
            continue
        attr, (strict_name, sub) = next(iter(norms.items()))
        norm_call = built[attr]
        return (name, join), (name, norm_call), strict_name, sub
    return None


def _method(node: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    return next((f for f in body if isinstance(f, cst.FunctionDef) and f.name.value == name), None)


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(children(current))))


def _init_builds(node: cst.ClassDef) -> Iterator[tuple[str, cst.Call]]:
    """``(attr, call)`` for each ``self.attr = Call(...)`` anywhere in ``__init__`` (in either
    branch of an ``if``: ``T5LayerFF`` picks its feed-forward class by the config)."""
    init = _method(node, "__init__")
    if init is None:
        return
    for sub in _walk(init.body):
        if isinstance(sub, cst.Assign) and isinstance(sub.value, cst.Call):
            target = dotted(sub.targets[0].target) or ""
            if target.startswith("self.") and target.count(".") == 1:
                yield target[5:], sub.value


def _self_call(expr: cst.CSTNode, attrs: set[str] | frozenset[str]) -> bool:
    """``expr`` contains a call of ``self.<attr>`` for one of ``attrs``."""
    return any(
        isinstance(sub, cst.Call)
        and (dotted(sub.func) or "")[5:] in attrs
        and (dotted(sub.func) or "").startswith("self.")
        for sub in _walk(expr)
    )


def _ends_with(node: cst.ClassDef, kept: str) -> bool:
    """The class builds ``self.<kept>`` and its ``forward`` returns that part's output."""
    if kept not in dict(_init_builds(node)):
        return False
    forward = _method(node, "forward")
    if forward is None:
        return False
    last: dict[str, cst.BaseExpression] = {}
    for sub in _walk(forward.body):
        if isinstance(sub, cst.Assign) and isinstance(sub.targets[0].target, cst.Name):
            last[sub.targets[0].target.value] = sub.value
        elif isinstance(sub, cst.Return) and sub.value is not None:
            value = sub.value
            if isinstance(value, cst.Name) and value.value in last:
                value = last[value.value]
            return isinstance(value, cst.Call) and dotted(value.func) == f"self.{kept}"
    return False


def _residual_join(node: cst.ClassDef, parts: set[str]) -> cst.BinaryOperation | None:
    """``h + self.dropout(y)`` in ``forward`` where ``y`` holds one of ``parts``' output (or
    the sum calls the part itself): the part's output joins the stream ``h``."""
    forward = _method(node, "forward")
    if forward is None:
        return None
    carriers: set[str] = set()
    for sub in _walk(forward.body):
        if isinstance(sub, cst.Assign) and isinstance(sub.targets[0].target, cst.Name):
            if _self_call(sub.value, parts) or _names(sub.value) & carriers:
                carriers.add(sub.targets[0].target.value)
        if isinstance(sub, cst.BinaryOperation) and isinstance(sub.operator, cst.Add):
            sides = (sub.left, sub.right)
            if any(_self_call(s, parts) or _names(s) & carriers for s in sides):
                return sub
    return None


def _names(expr: cst.CSTNode) -> set[str]:
    return {sub.value for sub in _walk(expr) if isinstance(sub, cst.Name)}


def load_hazard(
    node: cst.Call,
    kwargs: Mapping[str, Operand],
    loaded: Fact,
    module: cst.Module,
    resolve: Callable[[cst.BaseExpression], str | None],
    summary_of: Callable[[str], ClassSummary | None],
    elsewhere: dict[cst.CSTNode, Place],
) -> KeptResidualLoad | None:
    """``Model.from_pretrained(..., torch_dtype=torch.float16)`` where ``Model`` (a class of
    this file, or one a summary describes: the project's or an installed library's) keeps a
    part float32 whose output joins the residual stream ahead of a fused norm. The places in
    other files are pointed at from the call's own parts (``elsewhere``)."""
    cast = load_dtype(kwargs)
    func = node.func
    if cast is None or loaded.prec is not Prec.HALF or not isinstance(func, cst.Attribute):
        return None
    name = dotted(func.value)
    if not name:  # (``super().from_pretrained(...)``: the receiver names no class)
        return None
    leaf = name.rsplit(".", 1)[-1]
    words = f"loaded in half by `torch_dtype={module.code_for_node(cast.node)}`"
    local = kept_residuals(module, resolve).get(leaf) if "." not in name else None
    if local is not None:
        evidence: tuple[tuple[cst.CSTNode, str], ...] = (
            (cast.node, words),
            (local.keep[1], f"`_keep_in_fp32_modules` keeps `{local.kept}` float32"),
            (local.join[1], f"`{local.kept}`'s float32 output joins the residual stream here"),
            (local.norm[1], "the next layer's norm, half, is given that float32 stream"),
        )
        if local.substituted is not None:
            evidence += (
                (local.substituted, f"`{local.strict}` replaces the norm when importable"),
            )
        sub = local.substituted is not None
        fused = local.strict in STRICT_NORMS
        return KeptResidualLoad(leaf, local.kept, local.strict, sub, fused, cast, evidence)
    cls = summary_of(name)
    if cls is None or cls.kept_residual is None:
        return None
    norm, kept, places = cls.kept_residual
    keyword = next(a.keyword for a in node.args if a.keyword and a.value is cast.node)
    anchors: tuple[cst.CSTNode, ...] = (func.value, func.attr, func, keyword)
    pointed: list[tuple[cst.CSTNode, str]] = [(cast.node, words)]
    for anchor, place in zip(anchors, places, strict=False):
        elsewhere[anchor] = place
        pointed.append((anchor, ""))
    fused = norm in STRICT_NORMS
    return KeptResidualLoad(leaf, kept, norm, len(places) > 3, fused, cast, tuple(pointed))
