"""Where a cast timestep goes: into a call (a model, its timestep projection) or only into
arithmetic with other tensors.

A timestep rounded to half hurts where it is embedded: a model's sinusoidal projection turns
``t`` (or ``t / 1000``, ``1 - t``) into phases, and a rounded ``t`` is another timestep. Once a
timestep is multiplied with or added to another tensor (``noise * sigmas``, ``1 - t`` times
the latents, a loss weighted by ``t``) the result is a sample or a weight, no longer a
timestep, and its half rounding is relative (2**-9 in bfloat16), like that of any activation
it meets: a noise scaling or a loss weighting is no timestep projection. So a cast counts
when the timestep, kept as such (scaled by numbers, reshaped, clamped, renamed), reaches a
call argument, a return, a container or a store; it does not when every path mixes it with
another value first or only reads its shape.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from mpcheck.project.names import children

__all__ = ["code_under", "only_mixed", "stored_under"]

# Methods that keep a timestep a timestep (its shape, device or dtype change only).
_KEEPS = frozenset(
    "to type type_as float double half bfloat16 unsqueeze expand expand_as repeat reshape view "
    "flatten permute transpose contiguous clone detach squeeze clamp clip clamp_min clamp_max "
    "cpu cuda".split()
)
# Torch functions of one timestep that keep it one: ``torch.clamp(t, min=1e-3)``.
_KEEP_FUNCTIONS = frozenset({"torch.clamp", "torch.clip", "torch.abs"})
# What a read of these attributes yields is no timestep: ``len(t.shape)``, ``t.ndim == 0``.
_METADATA = frozenset({"shape", "ndim", "dtype", "device", "is_cuda", "size"})

_CALL, _QUIET = "call", "quiet"


def _parents(root: cst.CSTNode) -> dict[cst.CSTNode, cst.CSTNode]:
    """Each code node under ``root`` -> the node holding it, from a plain walk over the
    nodes' fields (:func:`~mpcheck.project.names.children`: trivia holds no code, so the
    parents of code nodes are those libcst's visitor sees, at a fraction of its cost).
    Kept for the last function asked: its casts are checked one after another."""
    _, parents, stack = _walk_of(root)
    while stack:
        node = stack.pop()
        for child in children(node):
            parents[child] = node
            stack.append(child)
    return parents


def _walk_of(root: cst.CSTNode) -> _Walk:
    """The walk of ``root``, kept for the last root asked where it stopped."""
    global _last
    if _last is None or _last[0] is not root:
        _last = (root, {}, [root])
    return _last


# A root, the parent of each node its walk has reached, and the nodes whose children it has
# not looked at yet: the walk resumes there for the next node asked, and the whole map is
# the same walk finished (the same nodes in the same order as a walk in one go).
_Walk = tuple[cst.CSTNode, dict[cst.CSTNode, cst.CSTNode], list[cst.CSTNode]]
_last: _Walk | None = None


def _parent(node: cst.CSTNode, root: cst.CSTNode) -> cst.CSTNode | None:
    """The node holding ``node`` under ``root``, walking ``root`` only as far as needed
    (most casts asked this are no timestep's, and a whole map would serve nothing else);
    the walk is kept, so a function with many casts (a pipeline's ``__call__``) is walked
    once for all of them, which walked again for each was 2 % of a profiled diffusers
    run."""
    _, parents, stack = _walk_of(root)
    while stack and node not in parents:
        parent = stack.pop()
        for child in children(parent):
            parents[child] = parent
            stack.append(child)
    return parents.get(node)


def code_under(function: cst.FunctionDef) -> Iterable[cst.CSTNode]:
    """Every code node under ``function`` (itself aside), from the parent map kept for it:
    the check of a cast walks the function once for all it asks."""
    return _parents(function).keys()


def _number(node: cst.BaseExpression) -> bool:
    """A Python number: written out (``1000``, ``-1``, ``(1.0 - 1e-6)``) or a setting of a
    model's or scheduler's configuration (``self.config.num_train_timesteps``: a configuration
    holds JSON values, never tensors)."""
    if isinstance(node, cst.UnaryOperation):
        return _number(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return _number(node.left) and _number(node.right)
    if isinstance(node, cst.Attribute):
        return "config" in _dotted(node).split(".")[:-1]
    return isinstance(node, (cst.Integer, cst.Float))


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _climb(node: cst.CSTNode, parents: dict[cst.CSTNode, cst.CSTNode]) -> str:
    """Where ``node``'s value goes while it stays a timestep: ``call`` (a call argument, a
    return, a container, a store), ``quiet`` (mixed with another value, a test, its shape),
    or the name it is assigned to."""
    while True:
        parent = parents.get(node)
        if parent is None:
            return _CALL
        if isinstance(parent, cst.Attribute) and parent.value is node:
            if parent.attr.value in _METADATA:
                return _QUIET
            call = parents.get(parent)
            if isinstance(call, cst.Call) and call.func is parent:
                if parent.attr.value not in _KEEPS:
                    return _CALL
                node = call
                continue
            return _CALL
        if isinstance(parent, cst.BinaryOperation):
            other = parent.right if parent.left is node else parent.left
            rescaled = parent.left is node and isinstance(parent.operator, cst.Divide)
            if not (rescaled or _number(other)):
                return _QUIET  # ``noise * sigmas``: a sample or a weight now
            node = parent  # ``t / num_train_timesteps``, ``1 - t``: still a timestep
        elif isinstance(parent, cst.UnaryOperation):
            node = parent
        elif isinstance(parent, cst.IfExp):
            if parent.test is node:
                return _QUIET
            node = parent
        elif isinstance(parent, cst.Subscript) and parent.value is node:
            node = parent
        elif isinstance(parent, (cst.Comparison, cst.ComparisonTarget, cst.Index)):
            return _QUIET
        elif isinstance(parent, cst.Arg):
            call = parents.get(parent)
            if not isinstance(call, cst.Call):
                return _CALL
            name = _dotted(call.func)
            if name == "len" or name.endswith("_like"):
                return _QUIET  # ``torch.rand_like(t)`` reads its shape and dtype only
            if name not in _KEEP_FUNCTIONS or call.args[0] is not parent:
                return _CALL
            node = call
        elif isinstance(parent, cst.Assign) and parent.value is node:
            targets = parent.targets
            if len(targets) == 1 and isinstance(targets[0].target, cst.Name):
                return "=" + targets[0].target.value
            return _CALL
        else:
            return _CALL


def _loads(
    function: cst.FunctionDef, name: str, parents: dict[cst.CSTNode, cst.CSTNode]
) -> list[cst.Name]:
    """Every read of ``name`` in ``function`` (bindings, keywords and attributes aside)."""
    found: list[cst.Name] = []
    for node in parents:  # (every node under ``function``: the map's keys)
        if type(node) is not cst.Name or node.value != name:
            continue
        parent = parents.get(node)
        if isinstance(parent, (cst.AssignTarget, cst.Param, cst.For, cst.CompFor)):
            continue
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            continue
        if isinstance(parent, cst.Arg) and parent.keyword is node:
            continue
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
            continue
        found.append(node)
    return found


def only_mixed(cast: cst.CSTNode, function: cst.FunctionDef) -> bool:
    """Whether the timestep ``cast`` makes only meets other tensors in arithmetic (or has its
    shape read) before anything else sees it, following it through the names it is assigned
    to in ``function``: a noise scaling or a loss weighting, not a timestep embedded."""
    parents = _parents(function)
    pending: list[cst.CSTNode] = [cast]
    names: set[str] = set()
    while pending:
        where = _climb(pending.pop(), parents)
        if where == _CALL:
            return False
        if where.startswith("=") and where[1:] not in names:
            names.add(where[1:])
            pending.extend(_loads(function, where[1:], parents))
    return True


def stored_under(cast: cst.CSTNode, function: cst.FunctionDef) -> str | None:
    """The name ``cast``'s value is handed on under: the string key of a store
    (``inp["timesteps"] = cast``) or the keyword of a call argument (``f(timestep=cast)``)."""
    parent = _parent(cast, function)
    if isinstance(parent, cst.Arg):
        return parent.keyword.value if parent.keyword is not None else None
    if not isinstance(parent, cst.Assign) or parent.value is not cast or len(parent.targets) != 1:
        return None
    target = parent.targets[0].target
    if not isinstance(target, cst.Subscript) or len(target.slice) != 1:
        return None
    index = target.slice[0].slice
    if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
        key = index.value.evaluated_value
        return key if isinstance(key, str) else None
    return None
