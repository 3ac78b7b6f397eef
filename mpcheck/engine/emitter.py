"""The production of sites for the rules: a call the walk met becomes a :class:`CallSite`.

The walk describes each call it evaluates as a :class:`CallRecord`; this part decides, with
the reporting policy, whether the rules see it, and adds what a site says beyond the walk's
facts (the attention role of a matmul, a module that feeds its own weights).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from mpcheck.engine.attention import AttentionRoles
from mpcheck.engine.base import CallRecord, Walk
from mpcheck.engine.facts import Fact, Kind
from mpcheck.engine.frames import ClassInfo, Frame
from mpcheck.engine.inputs import REFUSING_OPS, fed_inputs, feeds_weights, refusing_inputs
from mpcheck.engine.sites import CallSite
from mpcheck.knowledge import torch_api as T


class SiteEmitter:
    """Turns the calls the walk meets into sites for the rules."""

    def __init__(self, file: Walk) -> None:
        self.file = file
        self.attention = AttentionRoles(file.module)  # which matmuls are attention's

    def emit(self, call: CallRecord, frame: Frame) -> Fact:
        """Report ``call`` to the rules (if the policy says so); returns its result."""
        module_call = call.receiver is not None and call.method is None and call.qual is None
        if module_call and frame.scope.in_module:
            owner = self.file.classes.get(frame.scope.class_name or "")
            fn = frame.scope.function
            if owner is not None and feeds_weights(fn, call.op, call.receiver, call.args):
                owner.feeds_weights = True
            if owner is not None:
                owner.fed_inputs |= fed_inputs(fn, call.op, call.receiver, call.args)
                self._feeds(owner, fn, call, frame)
        if self.file.reporting.takes("calls"):
            self.file.shown(_Facts(call))
            if module_call and call.path is not None and call.receiver is not None:
                if call.receiver.fact.kind is Kind.MODULE:
                    self.file.module_calls.add(call.node)
            role = None
            if call.op is T.OpKind.MATMUL:
                name = call.method or (call.qual or "").rsplit(".", 1)[-1]
                recv = call.receiver.node if call.method and call.receiver else None
                nodes = [a.node for a in call.args]
                role = self.attention.site_role(call.node, name, recv, nodes, frame.scope.function)
            site = CallSite(
                call.node,
                call.qual,
                call.method,
                call.receiver,
                call.args,
                call.kwargs,
                call.op,
                call.aten,
                frame.scope,
                call.result,
                call.path,
                attention=role,
                owner=call.owner,
                inner=call.inner,
                through=call.through,
                fed_half=call.fed_half,
                fed_elsewhere=call.fed_elsewhere,
                replacement=call.replacement,
                kept_residual=call.kept_residual,
                fed=call.fed,
                handed_split=call.handed_split,
                average=call.average,
                module_calls=self.file.module_calls,
            )
            self.file.reporting.call(site)
        return call.result

    def _feeds(
        self, owner: ClassInfo, fn: cst.FunctionDef | None, call: CallRecord, frame: Frame
    ) -> None:
        """Keep, for the class's summary, the layers a method hands its inputs to as they
        came (``ClassSummary.feeds``): a Linear, conv or RNN, or a module of this file's
        class (its ``forward`` decides, once every class is walked) or another file's whose
        summary says its ``forward`` does."""
        if fn is None or owner.methods.get(fn.name.value) is not fn:
            return  # (a method, not a closure in one)
        if self.file.reporting.recording:
            return  # (walked again with a caller's module or region: the class's own walk says)
        if not isinstance(call.node, cst.Call) or call.receiver is None:
            return
        layer = call.receiver.fact
        via = None
        if call.op in REFUSING_OPS:
            via = ""
        elif call.op in (None, T.OpKind.MODEL) and layer.layer and not layer.library:
            own = self.file.classes.get(layer.layer)
            if own is not None and own.is_module:
                via = layer.layer
            imported = self.file.imported.get(layer.layer) if own is None else None
            if imported is not None and any(f[:2] == ("forward", (0,)) for f in imported.feeds):
                via = ""
        if via is None:
            return
        fed = refusing_inputs(fn, call.args, frame.scope.autocast)
        if fed:
            owner.feeds.setdefault((fn.name.value, fed), []).append((call.node, via))


class _Facts:
    """The facts a call site shows the rules: its result, receiver and arguments, read when
    a finding asks (:meth:`Walk.decided_at`), as often as it asks."""

    __slots__ = ("call",)

    def __init__(self, call: CallRecord) -> None:
        self.call = call

    def __iter__(self) -> Iterator[Fact]:
        call = self.call
        yield call.result
        if call.receiver is not None:
            yield call.receiver.fact
        yield from (a.fact for a in call.args)
        yield from (k.fact for k in call.kwargs.values())
        yield from (f.fact for f in call.fed)
