"""Parts chosen by a config switch, and values float32 on the path of the same switch.

A model's ``__init__`` often builds a part as one of several classes by config::

    if class_embed_type == "timestep":
        self.class_embedding = TimestepEmbedding(...)   # half Linear layers
    elif class_embed_type == "identity":
        self.class_embedding = nn.Identity()
    ...

and its ``forward`` tests the same switch::

    if self.config.class_embed_type == "timestep":
        class_labels = self.time_proj(class_labels)     # float32 sinusoids
    class_emb = self.class_embedding(class_labels)

The join of the parts says nothing useful (unknown, or whichever class came first), and the
join of ``class_labels`` (float32 or the int labels passed) neither. But the switch is the
same: where ``class_embed_type == "timestep"`` the part is the ``TimestepEmbedding`` and the
labels are float32. So the walk remembers, after each ``if``, the part each path built under
the switch it tested (``name == "literal"``, the name being the last of a dotted one, so
``self.config.class_embed_type`` is ``class_embed_type``), and the value a path of a switch
made float32; a call of the part with that value is the call of the part of that path.

A switch about precision or the device (``if use_fp32:``) says nothing of the kind: its paths
go with the model's precision (:func:`mpcheck.engine.branches.about_precision`), so no part is
remembered under it. A part chosen by config among classes of which one returns float32
(``Timesteps`` or ``GaussianFourierProjection``) returns float32 on that path: see
``ExpressionWalk.switched_call``.

The memos ride in the environment under keys no Python name can take (as in
:mod:`mpcheck.engine.guards`), so they are copied at branches like any binding, a part's memo
reaches the class's other methods with its attributes, and binding the name again (a cast
of the part, a new value) makes the memo stale: it holds the joined fact it was made for.
"""

from __future__ import annotations

import re
from dataclasses import replace

import libcst as cst

from mpcheck.engine.facts import Fact, Kind, seq_of
from mpcheck.engine.frames import Env

_PARTS = "\0parts\0"  # after ``self.``: ``self.\0parts\0class_embedding`` joins the attrs
_SWITCHED = "\0switched\0"
_SEP = "\n"
_PRECISION = "\0precision"  # a memo's switches: a test about precision chose the part
Switch = tuple[str, str]  # (``class_embed_type``, ``timestep``)


def switch_of(test: cst.BaseExpression) -> Switch | None:
    """``(name, literal)`` for ``x.name == "literal"`` (either side); None otherwise."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    if not isinstance(target.operator, cst.Equal):
        return None
    for a, b in ((test.left, target.comparator), (target.comparator, test.left)):
        if isinstance(b, cst.SimpleString) and isinstance(a, (cst.Name, cst.Attribute)):
            name = a.value if isinstance(a, cst.Name) else a.attr.value
            return name, b.evaluated_value if isinstance(b.evaluated_value, str) else b.value
    return None


def _key(switch: Switch | None) -> str:
    return "" if switch is None else f"{switch[0]}\0{switch[1]}"


def _parts_key(path: str) -> str:
    return "self." + _PARTS + path[len("self.") :]


def _is_part(name: str) -> bool:
    return name.startswith("self.") and name.count(".") == 1 and "\0" not in name


def _memo(env: Env, path: str) -> Fact | None:
    memo = env.get(_parts_key(path)) if _is_part(path) else None
    if memo is None or memo.items is None or env.get(path) != memo.items[0]:
        return None
    return memo


def parts(env: Env, path: str) -> list[tuple[Switch | None, Fact]]:
    """The parts ``path`` (``self.class_embedding``) may be, each with the switch that chose
    it; empty when none were remembered, a test about precision chose among them, or
    ``path`` was bound again since."""
    memo = _memo(env, path)
    if memo is None or memo.layer == _PRECISION:
        return []
    assert memo.items is not None
    keys = (memo.layer or "").split(_SEP)
    out: list[tuple[Switch | None, Fact]] = []
    for key, part in zip(keys, memo.items[1:], strict=False):
        name, _, literal = key.partition("\0")
        out.append(((name, literal) if name else None, part))
    return out


def has_new_part(then: Env, other: Env) -> bool:
    """Whether the paths of an ``if`` bound some part of ``self`` to different modules."""
    return any(
        _is_part(name)
        and fact is not other.get(name)
        and (fact.kind is Kind.MODULE or _parts_key(name) in other)
        for name, fact in then.items()
    )


def chosen_by_precision(after: Env, then: Env, other: Env) -> None:
    """After ``if use_fp32_proj:`` binding a part to different modules: its paths go with
    the model's precision, so an outer ``if`` remembers no choice among them either."""
    for name, a in then.items():
        merged = after.get(name)
        if _is_part(name) and a is not other.get(name) and merged is not None:
            after[_parts_key(name)] = replace(seq_of((merged,)), layer=_PRECISION)


def remember_parts(after: Env, then: Env, other: Env, switch: Switch | None, test: str) -> None:
    """After an ``if`` (not about precision) whose paths bound a part of ``self`` to different
    modules: the module of each path, with the switch the ``then`` path was chosen by. The
    choices of an ``elif`` chain keep their switch when the outer ``test`` reads the same
    name (where ``name == "identity"``, the outer ``name == "timestep"`` or ``name is None
    and ...`` was false); other tests may hold with it, so theirs are chosen by nothing."""
    for name, a in then.items():
        b = other.get(name)
        if not _is_part(name) or a is b:
            continue
        if b is not None and (memo := _memo(other, name)) and memo.layer == _PRECISION:
            chosen_by_precision(after, {name: a}, other)
            continue
        found: list[tuple[Switch | None, Fact]] = []
        if a.kind is Kind.MODULE:
            found.append((switch, a))
        inner = parts(other, name) if b is not None else []
        if inner:
            found += [(s if s and _reads(test, s[0]) else None, p) for s, p in inner]
        elif b is not None and b.kind is Kind.MODULE:
            found.append((None, b))
        merged = after.get(name)
        if not found or merged is None or found == [(None, merged)]:
            continue
        memo = seq_of((merged, *(p for _, p in found)))
        after[_parts_key(name)] = replace(memo, layer=_SEP.join(_key(s) for s, _ in found))


def _reads(test: str, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", test) is not None


def remember_switched(after: Env, name: str, value: Fact, switch: Switch) -> None:
    """``name`` is ``value`` (float32) on the path where ``switch`` holds."""
    merged = after.get(name)
    if merged is not None:
        after[_SWITCHED + name] = replace(seq_of((merged, value)), layer=_key(switch))


def switched(env: Env, name: str, fact: Fact) -> tuple[Switch, Fact] | None:
    """The switch and the value of ``name`` on its path, when ``name`` still holds ``fact``,
    the join it was remembered for."""
    memo = env.get(_SWITCHED + name)
    if memo is None or memo.items is None or memo.items[0] != fact or not memo.layer:
        return None
    key, _, literal = memo.layer.partition("\0")
    return (key, literal), memo.items[1]
