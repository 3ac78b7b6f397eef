"""What an ``if`` tells of a value beyond the join of its paths.

Models bound under complementary guards: ``if cache: vae = load()`` then ``if not cache:
vae = load()``; a tensor that is ``None`` on another path, inside ``if x is not None:``; and a
tensor whose dtype the code found different from a model's (``if x.dtype != vae.dtype:``).

After the first ``if`` the model is joined with what the name held before (often ``None``),
which is unknown; after the second, every path has bound the model, so it is the model again.
Joining a model with ``None`` in general is wrong (``text_encoder = ... if train_te else None``
correlates with other branches), so only the exact complement of a remembered test restores
it. The memo rides in the environment under a key no Python name can take, so it is copied
at branches like any binding, and binding the name again forgets it. It also keeps what the
name held on the other paths: code known to run only where the flag went the other way
(``if args.train_text_encoder:`` after ``if not args.train_text_encoder: te.to(dtype)``) sees
that value, not the join.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import libcst as cst

from mpcheck.engine.exits import EXITS, last_exit
from mpcheck.engine.facts import UNKNOWN, Cause, Fact, Kind, Origin, Prec, join, none_tested, seq_of
from mpcheck.engine.frames import Env, Frame
from mpcheck.engine.sites import Flags
from mpcheck.project.names import dotted

_MEMO = "\0guarded\0"
_OPTIONAL = "\0optional\0"
_TRAINS_IF = "\0trains_if\0"  # ``model.requires_grad_(train_model)``: the flag, as memo layer


def guard_of(test: cst.BaseExpression) -> tuple[str, bool] | None:
    """``(name, True)`` for ``if cache_latents:``, ``(name, False)`` for ``if not ...:``;
    None for any other test (only a plain flag is known to mean the same twice)."""
    polarity = True
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, polarity = test.expression, False
    name = dotted(test) if isinstance(test, (cst.Name, cst.Attribute)) else None
    return (name, polarity) if name else None


def _flag(flag: str, polarity: bool) -> str:
    return f"{'' if polarity else 'not '}{flag}"


def forget(env: Env, name: str) -> None:
    """``name`` is bound anew: what the ``if`` statements before said of it is past."""
    env.pop(_MEMO + name, None)
    env.pop(_OPTIONAL + name, None)
    env.pop(_TRAINS_IF + name, None)


def trains_if(env: Env, name: str, arg: cst.BaseExpression) -> None:
    """``model.requires_grad_(train_model)``: the model has trainable parameters only on the
    runs where that flag holds (a cast under ``if not train_model:`` casts frozen weights,
    whose gradients are None: no scaler sees them). Any other argument forgets it."""
    flag = guard_of(arg)
    if flag is None or flag[0] in ("True", "False"):
        env.pop(_TRAINS_IF + name, None)
    else:
        env[_TRAINS_IF + name] = Fact(Kind.OTHER, layer=_flag(*flag))


def trained_flags(env: Env, name: str) -> Flags:
    """The flag a ``requires_grad_`` of ``name`` tied its training to, as a known flag."""
    memo = env.get(_TRAINS_IF + name)
    if memo is None or memo.layer is None:
        return ()
    negated = memo.layer.startswith("not ")
    return ((memo.layer[4:] if negated else memo.layer, not negated),)


def remember(before: Env, after: Env, then: Env, guard: tuple[str, bool]) -> None:
    """After ``if flag:`` (no ``else``): the models its body bound, joined away in ``after``,
    and what the name held on the paths that skipped the body."""
    flag, polarity = guard
    for name, fact in then.items():
        if fact.kind is not Kind.MODULE or name.startswith("\0"):
            continue
        merged, previous = after.get(name), before.get(name)
        # (a cast to a ``weight_dtype`` half on some paths joins to itself: still a change)
        if merged is not None and (merged != fact or previous not in (None, fact)):
            skipped = _other_paths(before, name, flag, polarity)
            # an earlier ``if`` on another flag that bound the name: what the paths that
            # skipped this one held is known more finely by that one (see ``on_flagged_path``)
            earlier = _shortened(before.get(_MEMO + name), _CHAIN - 1)
            chain = (earlier,) if earlier is not None else ()
            memo = replace(seq_of((merged, fact, skipped, *chain)), layer=_flag(flag, polarity))
            after[_MEMO + name] = memo


_CHAIN = 4  # memos kept per name: ``if`` statements on distinct flags seldom nest deeper


def _shortened(memo: Fact | None, depth: int) -> Fact | None:
    """``memo`` with at most ``depth`` memos in its chain (itself included)."""
    if memo is None or memo.items is None or depth <= 0:
        return None
    if len(memo.items) <= 3:
        return memo
    inner = _shortened(memo.items[3], depth - 1)
    items = memo.items[:3] + ((inner,) if inner is not None else ())
    return memo if items == memo.items else replace(memo, items=items)


def _other_paths(before: Env, name: str, flag: str, polarity: bool) -> Fact:
    """What ``name`` holds where ``flag`` is not ``polarity``: its value before the ``if``,
    or, where an earlier ``if`` on the complement bound it, what that one bound."""
    memo = before.get(_MEMO + name)
    if memo is not None and memo.items is not None and memo.layer == _flag(flag, not polarity):
        merged, bound = memo.items[:2]
        if before.get(name) == merged:
            return bound
    return before.get(name, UNKNOWN)


def linked_module(env: Env, path: str | None, module: Fact, flags: Flags) -> Fact:
    """The module a parameter link names (``path``, bound to ``module`` when the parameters
    were taken under ``flags``) as it is now on those paths; ``module`` when ``path`` no
    longer holds a module."""
    now = env.get(path) if path else None
    if path and flags:  # ``if not train_te: te.to(dtype)``, te trained only if train_te
        now = on_flagged_path(env, path, flags) or now
    return now if now is not None and now.kind is Kind.MODULE else module


def on_flagged_path(env: Env, name: str, flags: Flags) -> Fact | None:
    """What ``name`` holds on a path where ``flags`` hold (``(flag, value)`` pairs), when the
    last ``if`` that bound it tested one of them: what its body bound, or what the paths that
    skipped it held; None when nothing says so."""
    memo = env.get(_MEMO + name)
    return _flagged(memo, env.get(name), flags)


def _flagged(memo: Fact | None, now: Fact | None, flags: Flags) -> Fact | None:
    """``on_flagged_path`` through a chain of memos: where the last ``if`` was skipped, the
    ``if`` before it (on another flag) may say what those paths held."""
    if memo is None or memo.items is None or now != memo.items[0]:
        return None
    bound, skipped = memo.items[1], memo.items[2]
    earlier = memo.items[3] if len(memo.items) > 3 else None
    for flag, value in flags:
        if memo.layer == _flag(flag, value):
            return bound
        if memo.layer == _flag(flag, not value):
            return _flagged(earlier, skipped, flags) or skipped
    # a flag not known here: either path, the skipped one as the ``if`` before says
    deeper = _flagged(earlier, skipped, flags)
    return None if deeper is None else _join_models(bound, deeper)


def complete(before: Env, after: Env, then: Env, guard: tuple[str, bool]) -> None:
    """After ``if not flag:`` binding a model that ``if flag:`` bound before: on every path
    the name holds a model, so it is their join, not unknown."""
    flag, polarity = guard
    for name, fact in then.items():
        if fact.kind is not Kind.MODULE or name.startswith("\0"):
            continue
        memo = before.get(_MEMO + name)
        if memo is None or memo.items is None or memo.layer != _flag(flag, not polarity):
            continue
        merged, bound = memo.items[:2]
        if before.get(name) == merged:  # (rebinding the name forgets the memo)
            after[name] = _join_models(bound, fact)


def _join_models(a: Fact, b: Fact) -> Fact:
    joined = join(a, b)
    return joined if joined.kind is Kind.MODULE else a


# -- ``D1s = torch.stack(D1s) if ... else None``, then ``if D1s is not None: ...`` ----------


def remember_optional(after: Env, then: Env, other: Env) -> None:
    """After an ``if`` whose one path bound a tensor and the other ``None`` (or left a value
    the walk does not know): the tensor, for the branches that test it is not ``None``."""
    for name, merged in list(after.items()):
        if merged.is_tensor or name.startswith("\0"):
            continue
        a, b = then.get(name, UNKNOWN), other.get(name, UNKNOWN)
        if a is b:  # neither path bound it (most of the environment): nothing to remember
            continue
        tensor = a if a.is_tensor and b == UNKNOWN else b if b.is_tensor and a == UNKNOWN else None
        if tensor is not None:
            after[_OPTIONAL + name] = seq_of((merged, tensor))


def narrowed(env: Env, test: cst.BaseExpression, polarity: bool) -> Env:
    """``env`` for the branch of ``if x is not None:`` (``polarity``: the way the test went)
    where ``x`` is the tensor it was on the one path that bound one."""
    name = none_tested(test, negated=polarity)
    memo = env.get(_OPTIONAL + name) if name is not None else None
    if name is None or memo is None or memo.items is None:
        return env
    merged, tensor = memo.items
    if env.get(name) != merged:
        return env  # rebound since
    return {**env, name: tensor}


# -- ``elif latents.dtype != self.vae.dtype:`` with a cast on some paths only ----------------


def dtypes_tested(
    test: cst.BaseExpression,
) -> tuple[cst.BaseExpression, cst.BaseExpression, bool] | None:
    """``(a, b, True)`` for ``a.dtype != b.dtype`` (``False`` for ``==``; ``b`` may be a dtype
    variable): the branch where the two dtypes differ is the one taken that way."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    if not isinstance(target.operator, (cst.NotEqual, cst.Equal)):
        return None
    sides = [test.left, target.comparator]
    held = [s for s in sides if isinstance(s, cst.Attribute) and s.attr.value == "dtype"]
    named = [s for s in sides if isinstance(s, cst.Name) and s.value.endswith("dtype")]
    if len(held) + len(named) != 2 or not held:  # ``x.dtype != y.dtype`` or ``!= decode_dtype``
        return None
    a, b = [s.value if isinstance(s, cst.Attribute) else s for s in sides]
    if dotted(a) is None or dotted(a) == dotted(b):
        return None
    return a, b, isinstance(target.operator, cst.NotEqual)


def found_apart(
    env: Env, tested: list[tuple[str | None, Fact]], test: cst.BaseExpression, text: str
) -> Env:
    """The branch of ``if x.dtype != model.dtype:`` where they differ (``tested``: the name and
    fact of each side): ``x`` is marked apart from ``model`` until it is rebound or the model
    is cast."""
    (a, fa), (b, fb) = tested
    for name, fact, other, partner in ((a, fa, b, fb), (b, fb, a, fa)):
        if name and other and fact.is_tensor and partner.kind is Kind.MODULE:
            origin = Origin(test, Cause.LITERAL, text)
            return {**env, name: replace(fact, apart=(other, origin))}
    return env


def aligned(env: Env, tested: list[tuple[str | None, Fact]]) -> Env:
    """The branch of ``if x.dtype != y.dtype: x = x.to(y.dtype)`` where they are equal: the
    code checks ``x``'s dtype again, so what an earlier test found is settled."""
    out = env
    for name, fact in tested:
        if name is not None and fact.is_tensor and fact.apart is not None:
            out = {**out, name: replace(fact, apart=None)}
    return out


def model_rebound(env: Env, key: str) -> None:
    """``self.vae = self.vae.to(latents.dtype)``: tensors found apart from it are not now."""
    for name, fact in list(env.items()):
        if fact.apart is not None and fact.apart[0] == key:
            env[name] = replace(fact, apart=None)


# -- ``-1e9 if x.dtype == torch.float32 else -1e4``: the path a half-precision run takes ------

_EQUAL = (cst.Equal, cst.Is, cst.In)
_UNEQUAL = (cst.NotEqual, cst.IsNot, cst.NotIn)
_HALVES = frozenset({"float16", "bfloat16"})
_RUNS = ("float16", "bfloat16")  # (float16 first: :func:`runs_take` reads it)


def runs_take(
    test: cst.BaseExpression, fact_of: Callable[[cst.BaseExpression], Fact]
) -> tuple[bool | None, bool | None]:
    """Which way the half-precision runs go at a test of a tensor's dtype: ``(half, fp16)``.

    ``half``: whether a run with the model in half precision takes the branch, when both half
    dtypes go one way: ``x.dtype == torch.float32`` is false for a tensor in the model's dtype
    or of unknown dtype (float16 or bfloat16 in that run), ``x.dtype != torch.float32`` and
    ``x.dtype in (torch.float16, torch.bfloat16)`` are true. The rules reason about that run;
    the other path is the one float32 runs take.
    ``fp16``: whether the float16 run takes it when the two half dtypes part
    (``x.dtype == torch.float16``; the bfloat16 run takes the other).
    Each is None when the test does not decide it (or is anything else)."""
    outcomes = _half_runs(test, fact_of)
    if outcomes is None:
        return None, None
    return (outcomes[0], None) if len(set(outcomes)) == 1 else (None, outcomes[0])


def _half_runs(
    test: cst.BaseExpression, fact_of: Callable[[cst.BaseExpression], Fact]
) -> tuple[bool, ...] | None:
    """Whether each half run the tested tensor can be in takes the branch of ``test`` (the
    float16 run first)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    if isinstance(target.operator, _EQUAL):
        equal = True
    elif isinstance(target.operator, _UNEQUAL):
        equal = False
    else:
        return None
    tensor, dtypes = test.left, target.comparator
    if not (isinstance(tensor, cst.Attribute) and tensor.attr.value == "dtype"):
        return None
    if dotted(tensor.value) is None:
        return None  # (only names are looked at again: no call is walked twice)
    tested = fact_of(tensor)
    # (a tensor of unknown dtype, ``attn_mask``: the run where it is half, as for the model)
    if tested.kind is not Kind.DTYPE or tested.prec not in (Prec.MODEL, Prec.HALF, Prec.UNKNOWN):
        return None
    runs = [tested.dtype] if tested.prec is Prec.HALF and tested.dtype else _RUNS
    named = (
        [e.value for e in dtypes.elements]
        if isinstance(target.operator, (cst.In, cst.NotIn))
        and isinstance(dtypes, (cst.Tuple, cst.List, cst.Set))
        else [dtypes]
    )
    values: set[str] = set()
    for node in named:
        fact = fact_of(node) if dotted(node) is not None else UNKNOWN
        if fact.kind is not Kind.DTYPE or fact.dtype is None or fact.prec is Prec.MODEL:
            return None
        values.add(fact.dtype)
    return tuple((run in values) is equal for run in runs)


def fp16_upcast(fp16_side: Fact, other: Fact) -> Fact | None:
    """``x.float() if x.dtype == torch.float16 else x``: float32 in the float16 run and the
    model's dtype, bfloat16, in the other: half only as bfloat16 (``never_fp16``), so nothing
    about it can overflow float16. None for other pairs."""
    if not (fp16_side.is_tensor and other.is_tensor and fp16_side.prec is Prec.FULL):
        return None
    if other.prec not in (Prec.MODEL, Prec.UNKNOWN):
        return None
    return Fact(Kind.TENSOR, Prec.HALF, "bfloat16", other.origin, fp16_side.params | other.params)


FP16_RUN_KEPT = " in a float16 run"  # (the words that mark :func:`bf16_upcast`'s value)


def fp16_run_kept(fact: Fact) -> bool:
    """A value :func:`bf16_upcast` made: float16 in the float16 run, which kept it as it came."""
    origin = fact.origin
    return (
        fact.is_tensor
        and fact.prec is Prec.HALF
        and origin is not None
        and (FP16_RUN_KEPT in origin.text)
    )


def bf16_upcast(bf16_side: Fact, fp16_side: Fact, test: cst.BaseExpression) -> Fact | None:
    """``x.float() if x.dtype == torch.bfloat16 else x``: the mirror of :func:`fp16_upcast`.
    A test that converts one half dtype is the code's word that half values come here; the
    float16 run fails it and keeps its tensor as it came, float16 (float32 in the bfloat16
    run): half only as float16. None for other pairs."""
    if not (bf16_side.is_tensor and fp16_side.is_tensor and bf16_side.prec is Prec.FULL):
        return None
    if fp16_side.prec not in (Prec.MODEL, Prec.UNKNOWN):
        return None
    code = cst.Module([]).code_for_node(test)
    kept = fp16_side.origin
    origin = Origin(
        test,
        kept.cause if kept is not None else Cause.ACTIVATION,
        f"float16 as it came{FP16_RUN_KEPT}, which `{code}` does not convert",
    )
    return Fact(Kind.TENSOR, Prec.HALF, "float16", origin, bf16_side.params | fp16_side.params)


def run_split(fp16_side: Fact, other: Fact, test: cst.BaseExpression) -> Fact | None:
    """What a value is after a test only one half dtype's run takes (``fp16_side``: the
    float16 run's value, ``other``: the bfloat16 run's): half only as the run that did not
    upcast it."""
    return fp16_upcast(fp16_side, other) or bf16_upcast(other, fp16_side, test)


def split_by_run(env: Env, fp16_env: Env, other_env: Env, test: cst.BaseExpression) -> None:
    """After ``if x.dtype == torch.float16: x = x.float()`` (or ``torch.bfloat16``), what
    :func:`run_split` makes of each name the two runs' paths left apart (``fp16_env``: the
    path the float16 run took)."""
    for name, fact in fp16_env.items():
        other = other_env.get(name)
        split = run_split(fact, other, test) if other is not None and other is not fact else None
        if split is not None:
            env[name] = split


def half_path(stmt: cst.If, frame: Frame, half: bool, then: Frame, other: Frame) -> None:
    """After an ``if`` on a dtype test, what the half-precision run has (the run the rules
    reason about; ``half``: whether it took the ``if``'s own branch)."""
    taken, skipped = (stmt.body, stmt.orelse) if half else (stmt.orelse, stmt.body)
    if last_exit(taken) in EXITS and last_exit(skipped) is None:
        # ``if x.dtype != torch.float32: raise ...``: only float32 runs go on from here
        frame.scope = replace(frame.scope, full_precision=stmt.test)
    elif last_exit(taken) is None:
        # ``if x.dtype == torch.float32: fill = -1e9 else: fill = -1e4``: that run's values
        for name, fact in (then if half else other).env.items():
            if not all(part.isidentifier() for part in name.split(".")):
                continue  # the training state and the walk's memos: every run's
            if name in then.env and name in other.env:  # (bound before or on both)
                frame.env[name] = fact
