"""The engine's shared parts on their own: the reporting policy and the argument binder."""

from __future__ import annotations

from contextlib import ExitStack

import libcst as cst

from mpcheck.engine.binding import bind_arguments, parameters, passed
from mpcheck.engine.facts import SCALAR, UNKNOWN_TENSOR, Fact
from mpcheck.engine.reporting import Reporting
from mpcheck.engine.sites import CallSite, Operand, Scope
from mpcheck.ruleset.hooks import Site, SiteKind


class Recorder:
    """A listener that wants the kinds it is given and keeps the call sites it gets."""

    def __init__(self, *kinds: str) -> None:
        self.kinds = set(kinds)
        self.calls: list[CallSite] = []

    def wants(self, kind: SiteKind) -> bool:
        return kind in self.kinds

    def deliver(self, kind: SiteKind, site: Site) -> None:
        if isinstance(site, CallSite):
            self.calls.append(site)


def _site() -> CallSite:
    node = cst.parse_expression("f(x)")
    assert isinstance(node, cst.Call)
    scope = Scope(None, None, False, None)
    return CallSite(node, "f", None, None, (), {}, None, "", scope, UNKNOWN_TENSOR)


def test_muted_walk_reports_nothing_and_live_walk_inside_it_reports() -> None:
    listener = Recorder("calls", "returns", "training")
    policy = Reporting(listener)
    assert policy.takes("calls") and policy.takes("returns") and not policy.takes("setitems")
    with policy.muted():
        assert not policy.takes("calls") and not policy.takes("training")
        with policy.live():  # a class reached on demand from a loop's first pass
            assert policy.takes("calls")
        assert not policy.takes("calls")
    assert policy.takes("calls")


def test_recording_takes_calls_for_the_recorder_only() -> None:
    listener = Recorder("returns")  # no rule reads calls, but a re-walk still records them
    policy = Reporting(listener)
    recorded: list[CallSite] = []
    assert not policy.takes("calls")
    with policy.muted(), policy.recording_into(recorded):
        assert policy.recording and policy.takes("calls") and not policy.takes("returns")
        policy.call(_site())
    assert len(recorded) == 1 and not listener.calls and not policy.recording


def test_nested_rewalks_stop_at_the_depth_limit() -> None:
    policy = Reporting(Recorder("calls"))
    depth = 0
    with ExitStack() as walks:
        while policy.may_rewalk and depth < 10:
            depth += 1
            walks.enter_context(policy.recording_into([]))
    assert depth == 6
    assert policy.may_rewalk and not policy.recording  # all unwound


def test_a_helper_rewalked_for_the_training_loop_reports_training_not_calls() -> None:
    listener = Recorder("calls", "training")
    policy = Reporting(listener)
    with policy.calls_reported_elsewhere():
        assert policy.takes("training") and policy.takes("calls")
        policy.call(_site())
    assert not listener.calls
    policy.call(_site())
    assert len(listener.calls) == 1


def _fn(source: str) -> cst.FunctionDef:
    fn = cst.parse_statement(source)
    assert isinstance(fn, cst.FunctionDef)
    return fn


def _op(fact: Fact) -> Operand:
    return Operand(cst.Name("v"), fact)


def test_binder_prefers_keywords_and_keeps_keyword_only_parameters_for_keywords() -> None:
    fn = _fn("def f(self, a, b=1, *rest, c, d=2): pass")
    a, b, c = UNKNOWN_TENSOR, SCALAR, Fact(UNKNOWN_TENSOR.kind)
    names = [p.name.value for p in parameters(fn, skip_self=True)]
    assert names == ["a", "b", "c", "d"]
    bound = bind_arguments(fn, (_op(a), _op(b), _op(c)), {"a": _op(c)}, skip_self=True)
    assert bound == [c, b, None, None]  # a by keyword; the third positional is not ``c``
    assert passed(fn, (_op(a),), {"c": _op(c)}, skip_self=True) == {"a": a, "c": c}
    assert passed(fn, (_op(a),), {}, skip_self=False) == {"self": a}
