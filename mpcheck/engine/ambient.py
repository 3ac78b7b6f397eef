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

import re
from dataclasses import replace
from functools import cached_property

import libcst as cst

from mpcheck.engine.base import CallRecord, Walk
from mpcheck.engine.frames import ClassInfo, Frame
from mpcheck.engine.functions import Definitions
from mpcheck.engine.sites import Autocast, CallSite
from mpcheck.engine.statements import Statements
from mpcheck.knowledge import torch_api as T
from mpcheck.project.names import dotted

__all__ = ["Ambient"]


class Ambient:
    """Walks the methods that hold ops autocast does not see as if autocast were on."""

    def __init__(self, file: Walk, definitions: Definitions, statements: Statements) -> None:
        self.file = file
        self.definitions = definitions
        self.statements = statements

    @cached_property
    def blind_in_source(self) -> bool:
        """Whether the file's text names any op autocast passes by (most files do not)."""
        return _names_blind(self.file.source)

    @cached_property
    def blind(self) -> dict[cst.FunctionDef, set[cst.CSTNode]]:
        """The calls autocast passes by, by the function the plain walk met them in."""
        return {}

    def note(self, call: CallRecord, frame: Frame) -> None:
        """Remember ``call`` if autocast passes it by, for :meth:`ambient_pass` to walk again."""
        function = frame.scope.function
        if function is not None and self.blind_in_source and _blind(call):
            self.blind.setdefault(function, set()).add(call.node)

    def ambient_pass(self, info: ClassInfo) -> None:
        """Report the ops of ``info``'s methods autocast passes by, walked under autocast."""
        if not (info.is_module and not info.kept_fp32 and self.file.half_capable):
            return
        if not self.file.may_autocast:
            return  # (no trainer of the project turns autocast on: no region to walk in)
        if not self.file.reporting.listener.wants("ambient") or not self.blind_in_source:
            return
        for name, fn in info.methods.items():
            blind = self.blind.get(fn) if name != "__init__" else None
            if not blind or fn in self.definitions.in_progress:
                continue
            frame = self.definitions.function_frame(fn, info, None)
            if frame.scope.autocast is not None:
                continue  # a region of its own (a decorator): the plain walk saw it
            region = Autocast(
                fn, "cuda", None, True, torch_version=self.file.target_torch, implicit=True
            )
            frame.scope = replace(frame.scope, autocast=region)
            recorded: list[CallSite] = []
            self.definitions.in_progress.add(fn)
            try:
                with self.file.reporting.hypothetical(recorded):
                    self.statements.block(
                        fn.body.body if isinstance(fn.body, cst.IndentedBlock) else [], frame
                    )
            finally:
                self.definitions.in_progress.discard(fn)
            for site in recorded:
                if site.node in blind and site.scope.autocast is region:
                    self.file.reporting.listener.deliver("ambient", site)


# What a file must contain for any call in it to be one autocast passes by: one of these
# names as a whole word, ``out=`` after ``(`` or ``,``, ``.apply(``, or ``_C.`` as a word.
# (Each name is searched for as itself, its word boundary before it checked by hand: one
# pattern of them all, led by ``\b``, was tried at every offset of every file.)
_BLIND_NAMES = tuple(
    (name.encode(), re.compile(re.escape(name.encode()) + rb"\b"))
    for name in sorted({*T.DTYPE_STRICT_WRITES, *T.KERNEL_PACKAGES})
)
_KERNEL_MODULE = re.compile(rb"\b_C\.")
_OUT_KEYWORD = re.compile(rb"out\s*=(?!=)")
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_SPACE = frozenset(b" \t\n\r\f\v")  # (what ``\s`` matches in a bytes pattern)


def _names_blind(source: bytes) -> bool:
    """Whether ``source`` holds one of the names as a whole word, ``out=`` after ``(`` or
    ``,`` (spaces between), ``.apply(`` or the word ``_C.``. (A name's match not preceded
    by a word's end hides no other: the bytes it covers are word bytes, and a match starting
    among them follows a word byte.)"""
    if b".apply(" in source:
        return True
    if b"_C." in source and _KERNEL_MODULE.search(source) is not None:
        return True
    for name, pattern in _BLIND_NAMES:
        if name in source:
            for match in pattern.finditer(source):
                at = match.start()
                if at == 0 or source[at - 1] not in _WORD:
                    return True
    for match in _OUT_KEYWORD.finditer(source):
        at = match.start() - 1
        while at >= 0 and source[at] in _SPACE:
            at -= 1
        if at >= 0 and source[at] in b"(,":
            return True
    return False


def _blind(call: CallRecord) -> bool:
    """A call autocast does not recast: an index write, ``out=``, a compiled kernel, or an
    autograd Function's ``apply`` (``DeformAttnFunction.apply(...)``, not ``self.apply(init)``)."""
    if "out" in call.kwargs or T.is_kernel(call.qual):
        return True
    if call.method == "apply" and call.receiver is not None:
        return (dotted(call.receiver.node) or "").rpartition(".")[2][:1].isupper()
    qual = call.qual or ""
    name = call.method or (qual[6:] if qual.startswith("torch.") else "")  # torch.index_copy
    return name in T.DTYPE_STRICT_WRITES and name != "lerp"
