"""Paths that leave a block: ``return``, ``raise``, ``continue`` and ``break``.

The code after an ``if`` sees only the paths that fall through it. In ``if ONNX_EXPORT: model =
onnx.load(f); ...; return`` the ``model`` after the ``if`` is the other path's, not the join of
both (a join of a half model and an ONNX graph is neither, and hides the half model's inputs).
A frame that met one of these statements is *dead*: merging it with a live frame keeps the
live one's values, and an ``if`` whose every branch is dead leaves its frame dead too.

What leaves is not lost. A ``continue`` or ``break`` carries its values to the loop (its next
round, or the code after it), and a ``return`` to the function's end, where ``self.<attr>``
bindings and the training state of every path that returned are what its caller sees. A
``raise`` carries nothing: no caller sees what a path that raised bound. The statements of a
block after one that leaves are walked anyway (their calls are still sites), on the dead frame.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from mpcheck.engine.facts import Fact, Kind, join
from mpcheck.engine.frames import Env, Frame
from mpcheck.engine.training import STATE, State

__all__ = ["EXITS", "close_loop", "joined", "last_exit", "leave", "merge_paths", "settle"]

EXITS = (cst.Return, cst.Raise)


def leave(stmt: cst.BaseSmallStatement, frame: Frame) -> None:
    """``stmt`` (``return``, ``raise``, ``continue`` or ``break``) ends the path of ``frame``."""
    if isinstance(stmt, (cst.Continue, cst.Break)):
        frame.jumps.append(dict(frame.env))
    elif isinstance(stmt, cst.Return):
        frame.exits.append(dict(frame.env))
    frame.dead = True


def joined(a: Env, b: Env) -> Env:
    """The values of two paths after they meet."""
    env = dict(a)
    for key, fb in b.items():
        fa = env.get(key)
        if fa is not fb:
            env[key] = fb if fa is None else join(fa, fb)
    if (STATE in a) != (STATE in b):
        # The training loop's state begun on one path only: the other path is the empty
        # state (``if amp: scaler.scale(loss).backward()``: scaled on some paths).
        empty = Fact(Kind.OTHER, train=State())
        env[STATE] = join(a.get(STATE, empty), b.get(STATE, empty))
    return env


def merge_paths(frame: Frame, a: Frame, b: Frame) -> None:
    """``frame`` after the paths ``a`` and ``b`` (copies of it, walked) meet: the values of
    those that fall through, what each returns, and the paths that left on the way."""
    if a.dead != b.dead:
        frame.env = dict((b if a.dead else a).env)
    else:
        frame.env = joined(a.env, b.env)
    frame.dead = a.dead and b.dead
    for side in (a, b):
        frame.jumps += side.jumps
        frame.exits += side.exits
        if side.returns is not None:
            r = side.returns
            frame.returns = r if frame.returns is None else join(frame.returns, r)


def close_loop(frame: Frame, body: Frame) -> None:
    """``frame`` after a round of a loop whose body was walked as ``body``: the paths that
    reached the body's end, and those that left it by ``continue`` or ``break``."""
    jumps, body.jumps = body.jumps, []
    before = dict(frame.env)
    merge_paths(frame, Frame(frame.env, frame.scope), body)
    for env in jumps:
        merge_paths(frame, Frame(frame.env, frame.scope), Frame(env, frame.scope))
    widen(frame, before)


def widen(frame: Frame, before: dict[str, Fact]) -> None:
    """A value range a round of the loop grew (``x = x * 2``) has no bound: the walk takes
    one round, and the next ones would grow it again (interval analysis's widening)."""
    for key, fact in frame.env.items():
        old = before.get(key)
        if fact.bound is not None and (old is None or old.bound != fact.bound):
            frame.env[key] = replace(fact, bound=None)


def settle(frame: Frame) -> None:
    """At the end of a function's body: the values of every path that got there, by falling
    off its end or by ``return`` (what ``__init__`` leaves on ``self``, a helper's training
    state)."""
    exits, frame.exits = frame.exits, []
    envs = ([] if frame.dead else [frame.env]) + exits
    if envs:
        env = envs[0]
        for other in envs[1:]:
            env = joined(env, other)
        frame.env = env
    frame.dead = False


def last_exit(
    block: cst.BaseSuite | cst.If | cst.Else | None,
) -> type[cst.BaseSmallStatement] | type[cst.If] | None:
    """How a branch of an ``if`` ends when the code after it does not follow it: its last
    statement's ``return``, ``raise``, ``continue`` or ``break`` (``cst.If`` for an ``elif``,
    whose paths are not looked into); None when it falls through (so does an absent ``else``)."""
    if isinstance(block, cst.Else):
        block = block.body
    if block is None:
        return None
    if isinstance(block, cst.If):
        return cst.If
    body = block.body
    last: cst.CSTNode | None = body[-1] if body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    if isinstance(last, (cst.Return, cst.Raise, cst.Continue, cst.Break)):
        return type(last)
    return None
