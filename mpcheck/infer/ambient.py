"""The autocast a trainer wraps around a model: what a module's methods compute under it.

Mixed-precision training keeps the model in float32 and runs its ``forward`` under
``torch.autocast`` (accelerate, Lightning's ``16-mixed``, a trainer's ``with autocast():``),
almost always in another file. Autocast recasts only the ops on its lists; the ops it never
sees -- writes through an index (``cache.index_copy_(2, pos, k)``), calls with ``out=``, a
compiled kernel (``natten``, a package's ``_C`` extension) -- then meet a half matmul output
and a float32 weight, buffer or softmax, and raise. A module method holding such an op is
walked once more as if in that region (CUDA, its default float16), and only the sites of
those ops reach the rules, through ``check_ambient``; a region the code opens inside the
method (``enabled=False``) is its own.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from mpcheck import torch_api as T
from mpcheck.infer.frames import ClassInfo
from mpcheck.infer.statements import StatementWalk
from mpcheck.names import dotted
from mpcheck.sites import Autocast, CallSite

__all__ = ["AmbientWalk"]


class AmbientWalk(StatementWalk):
    """Walks the methods that hold ops autocast does not see as if autocast were on."""

    def ambient_pass(self, info: ClassInfo) -> None:
        """Report the ops of ``info``'s methods autocast passes by, walked under autocast."""
        if not (info.is_module and not info.kept_fp32 and self.half_capable):
            return
        if not self.reporting.listener.wants("ambient"):
            return
        for name, fn in info.methods.items():
            blind = _blind_calls(fn) if name != "__init__" else set()
            if not blind or fn in self.in_progress:
                continue
            frame = self.function_frame(fn, info, None)
            if frame.scope.autocast is not None:
                continue  # a region of its own (a decorator): the plain walk saw it
            region = Autocast(
                fn, "cuda", None, True, torch_version=self.target_torch, implicit=True
            )
            frame.scope = replace(frame.scope, autocast=region)
            recorded: list[CallSite] = []
            self.in_progress.add(fn)
            try:
                with self.reporting.hypothetical(recorded):
                    self.block(
                        fn.body.body if isinstance(fn.body, cst.IndentedBlock) else [], frame
                    )
            finally:
                self.in_progress.discard(fn)
            for site in recorded:
                if site.node in blind and site.scope.autocast is region:
                    self.reporting.listener.deliver("ambient", site)


def _blind_calls(fn: cst.FunctionDef) -> set[cst.CSTNode]:
    """The calls in ``fn``'s own body that autocast passes by (not in nested ``def``s)."""
    found: set[cst.CSTNode] = set()
    stack: list[cst.CSTNode] = [fn.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(node, cst.Call) and _blind(node):
            found.add(node)
        stack.extend(node.children)
    return found


def _blind(call: cst.Call) -> bool:
    func = call.func
    if any(a.keyword is not None and a.keyword.value == "out" for a in call.args):
        return True
    if isinstance(func, cst.Attribute):
        name = func.attr.value
        if name in T.DTYPE_STRICT_WRITES and name != "lerp":
            return True
        path = dotted(func) or ""
        if name == "apply":  # ``DeformAttnFunction.apply(...)``, not ``self.apply(init)``
            return path.rpartition(".")[0].rpartition(".")[2][:1].isupper()
        return path.split(".")[0] in T.KERNEL_PACKAGES or "._C." in f".{path}"
    return False
