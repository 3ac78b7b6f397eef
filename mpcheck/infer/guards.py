"""Models bound under complementary guards: ``if cache: vae = load()`` then ``if not cache:
vae = load()``.

After the first ``if`` the model is joined with what the name held before (often ``None``),
which is unknown; after the second, every path has bound the model, so it is the model again.
Joining a model with ``None`` in general is wrong (``text_encoder = ... if train_te else None``
correlates with other branches), so only the exact complement of a remembered test restores
it. The memo rides in the environment under a key no Python name can take, so it is copied
at branches like any binding, and it is used only while the name still holds what the first
``if`` left in it.
"""

from __future__ import annotations

import libcst as cst

from mpcheck.facts import Fact, Kind, join, seq_of
from mpcheck.infer.frames import Env
from mpcheck.names import dotted

_MEMO = "\0guarded\0"


def guard_of(test: cst.BaseExpression) -> tuple[str, bool] | None:
    """``(name, True)`` for ``if cache_latents:``, ``(name, False)`` for ``if not ...:``;
    None for any other test (only a plain flag is known to mean the same twice)."""
    polarity = True
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, polarity = test.expression, False
    name = dotted(test) if isinstance(test, (cst.Name, cst.Attribute)) else None
    return (name, polarity) if name else None


def _key(flag: str, polarity: bool, name: str) -> str:
    return f"{_MEMO}{flag}\0{polarity}\0{name}"


def remember(after: Env, then: Env, guard: tuple[str, bool]) -> None:
    """After ``if flag:`` (no ``else``): the models its body bound, joined away in ``after``."""
    flag, polarity = guard
    for name, fact in then.items():
        if fact.kind is not Kind.MODULE or name.startswith(_MEMO):
            continue
        merged = after.get(name)
        if merged is not None and merged != fact:
            after[_key(flag, polarity, name)] = seq_of((merged, fact))


def complete(before: Env, after: Env, then: Env, guard: tuple[str, bool]) -> None:
    """After ``if not flag:`` binding a model that ``if flag:`` bound before: on every path
    the name holds a model, so it is their join, not unknown."""
    flag, polarity = guard
    for name, fact in then.items():
        if fact.kind is not Kind.MODULE or name.startswith(_MEMO):
            continue
        memo = before.get(_key(flag, not polarity, name))
        if memo is None or memo.items is None:
            continue
        merged, bound = memo.items
        if before.get(name) == merged:  # not rebound since the first ``if``
            after[name] = _join_models(bound, fact)


def _join_models(a: Fact, b: Fact) -> Fact:
    joined = join(a, b)
    return joined if joined.kind is Kind.MODULE else a
