"""A GradScaler told to take float16 gradients.

torch's ``GradScaler.unscale_`` (and ``step``, which unscales first) refuses float16
gradients only through its ``_unscale_grads_(optimizer, inv_scale, found_inf, allow_fp16)``,
called with ``allow_fp16=False``. A project that replaces that method on its scaler (or on
``accelerator.scaler``) by one passing ``allow_fp16=True`` trains float16 parameters through
the scaler without the error (sd-scripts' ``patch_accelerator_for_fp16_training``, run for
its ``--full_fp16``). A function that does so to a scaler or accelerator handed to it is
found here by its text, so the same answer serves a call in its own file and, through its
summary (``Function.fp16_unscale``), a call from another file.
"""

from __future__ import annotations

import libcst as cst

from mpcheck.project.names import dotted

__all__ = ["fp16_unscale_params"]

_METHOD = "_unscale_grads_"
_ALLOW_POSITION = 3  # ``_unscale_grads_(optimizer, inv_scale, found_inf, allow_fp16)``


class _Finder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.defs: dict[str, cst.FunctionDef] = {}
        self.patches: list[tuple[str, cst.BaseExpression]] = []  # (target base, value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.defs[node.name.value] = node

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            t = target.target
            if isinstance(t, cst.Attribute) and t.attr.value == _METHOD:
                base = dotted(t.value)
                if base:
                    self.patches.append((base, node.value))


class _Allows(cst.CSTVisitor):
    found = False

    def visit_Call(self, node: cst.Call) -> None:
        positional = [a for a in node.args if a.keyword is None and not a.star]
        flag = next((a.value for a in node.args if _keyword(a) == "allow_fp16"), None)
        if flag is None and len(positional) > _ALLOW_POSITION:
            flag = positional[_ALLOW_POSITION].value
        if isinstance(flag, cst.Name) and flag.value == "True":
            self.found = True


def _keyword(arg: cst.Arg) -> str | None:
    return arg.keyword.value if arg.keyword is not None else None


def _allows_fp16(value: cst.BaseExpression, defs: dict[str, cst.FunctionDef]) -> bool:
    """Whether the replacement calls on with ``allow_fp16`` True."""
    body: cst.CSTNode | None = value
    if isinstance(value, cst.Name):
        body = defs.get(value.value)
    if body is None:
        return False
    check = _Allows()
    body.visit(check)
    return check.found


def fp16_unscale_params(fn: cst.FunctionDef) -> tuple[int, ...]:
    """The positions of ``fn``'s parameters (all of them, ``self`` too) whose scaler takes
    float16 gradients after a call: ``p._unscale_grads_ = ...`` or
    ``p.scaler._unscale_grads_ = ...`` with a replacement passing ``allow_fp16=True``.
    Callers ask only where the file's text names ``_unscale_grads_`` (a walk costs)."""
    names = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    finder = _Finder()
    fn.body.visit(finder)
    found = set()
    for base, value in finder.patches:
        root = base.split(".")[0]
        if root in names and base in (root, f"{root}.scaler") and _allows_fp16(value, finder.defs):
            found.add(names.index(root))
    return tuple(sorted(found))
