"""Every row of the op table (:mod:`mpcheck.knowledge.ops`) holds under real torch.

Each row is called on CPU with float16 and bfloat16 inputs, the first of a few generic
argument lists that torch accepts (or the row's own in ``EXAMPLES``), and each behaviour the
row claims is checked on the result: ``SAME`` keeps the input's dtype, ``PROMOTED`` makes
float32 with a float32 argument, ``FLOATING`` turns an int64 input into the default dtype,
and so on. A row torch cannot run here (CUDA only, a package not installed) is skipped with
the reason; a claim that torch contradicts fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mpcheck.knowledge.ops import FUNCTIONS, METHODS, Does, Op

torch = pytest.importorskip("torch")

LOW = ("float16", "bfloat16")

# Rows whose claim torch 2.13 does not bear out, with what it does instead; the engine keeps
# them (no finding depends on the difference) until a row is corrected on purpose.
KNOWN: dict[str, str] = {
    "equal": "returns a Python bool, not a bool tensor",
}


def _inputs(dt: Any) -> dict[str, Any]:
    x = torch.randn(4, 4).to(dt)
    return {
        "x": x,
        "y": torch.randn(4, 4),  # float32
        "idx": torch.zeros(4, 4, dtype=torch.long),
        "mask": torch.zeros(4, 4, dtype=torch.bool),
        "scalar": torch.tensor(0.5).to(dt),
        "ints": torch.arange(16).reshape(4, 4),
    }


def _argument_lists(v: dict[str, Any], t: Any) -> Iterator[tuple[Any, ...]]:
    """Generic argument lists after the receiver; ``t`` stands for a second tensor."""
    yield from [(), (0,), (1,), (t,), (0, v["idx"]), (v["mask"], 0.5), (t, t), (v["mask"], t)]
    yield from [(0, v["idx"], t), ((4, 4),), (4, 4), (2, 8), (1.0,), (0, 1), ((1,),)]


def _call(fn: Callable[..., Any], lists: Iterator[tuple[Any, ...]]) -> tuple[Any, ...] | None:
    """The first argument list ``fn`` accepts, and its result."""
    for args in lists:
        try:
            return args, fn(*args)
        except Exception:  # noqa: BLE001 - probing which arguments this op takes
            continue
    return None


def _tensors(result: Any) -> list[Any]:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [r for r in result if isinstance(r, torch.Tensor)]
    return []


def _check(name: str, row: Op, dt: Any, run: Callable[..., Any]) -> None:
    """Check ``row``'s claims; ``run(receiver, other)`` calls the op and returns its result
    (``other`` is a second tensor for the ops that take one), or None if it found no call."""
    if name in KNOWN:
        pytest.xfail(KNOWN[name])
    v = _inputs(dt)
    if name in METHODS and name not in EXAMPLES and not hasattr(v["x"], name):
        pytest.xfail(f"{name}: not a torch.Tensor method in torch {torch.__version__}")
    found = run(v["x"], v["x"])
    if found is None:
        pytest.skip(f"{name}: no CPU call found")
    result = found
    does = row.does
    if row.casts_to:
        assert result.dtype == getattr(torch, row.casts_to)
    if Does.SAME in does or Does.FIRST_INPUT in does or Does.LIKE in does:
        assert _tensors(result)[0].dtype == dt
    if Does.MATCHED in does:
        assert result.dtype == dt
        with pytest.raises(RuntimeError):
            run(v["x"], v["y"], strict=True)
    if Does.PROMOTED in does or Does.CONCAT in does:
        mixed = run(v["x"], v["y"], other=True)
        assert mixed is not None and _tensors(mixed)[0].dtype == torch.float32
    if Does.EACH_OWN in does:  # (half, float32) in, (half, float32) out: no promotion
        mixed = run(v["x"], v["y"], other=True)
        assert [r.dtype for r in _tensors(mixed)] == [dt, torch.float32]
    if Does.FLOATING in does:
        assert run(v["ints"], v["ints"]).dtype == torch.get_default_dtype()
    if Does.INTEGER in does:
        assert not result.dtype.is_floating_point and result.dtype != torch.bool
    if Does.BOOL in does:
        assert isinstance(result, torch.Tensor) and result.dtype == torch.bool
    if Does.NOT_TENSOR in does:
        assert not isinstance(result, torch.Tensor)
    if Does.VALUES_INDICES in does:
        values, indices = result
        assert values.dtype == dt and indices.dtype == torch.int64
    if Does.STATISTIC_MEAN in does:
        statistic, mean = result
        assert statistic.dtype == dt and mean.dtype == dt
    if Does.SPLIT in does:
        assert isinstance(result, (tuple, list)) and all(r.dtype == dt for r in result)
    if Does.REDUCES_ALL in does:  # a method row: called without arguments
        assert getattr(v["x"], name)().dim() == 0
    if Does.KEEPS_DIMS in does or Does.RESHAPES in does:
        made = run(v["scalar"], v["x"])
        assert made is not None, f"{name}: no call on a 0-dim tensor"
        assert _tensors(made)[0].dim() >= 1


# Calls the generic argument lists do not find: (receiver, other) -> result.
EXAMPLES: dict[str, Callable[[Any, Any], Any]] = {
    "max": lambda x, t: x.max(0),
    "min": lambda x, t: x.min(0),
    "median": lambda x, t: x.median(0),
    "new_zeros": lambda x, t: x.new_zeros((2,)),
    "new_ones": lambda x, t: x.new_ones((2,)),
    "new_empty": lambda x, t: x.new_empty((2,)),
    "new_full": lambda x, t: x.new_full((2,), 1.0),
    "new_tensor": lambda x, t: x.new_tensor([1.0]),
    "view": lambda x, t: x.view(-1),
    "reshape": lambda x, t: x.reshape(-1),
    "expand": lambda x, t: x.expand(1) if x.dim() == 0 else x.expand(4, 4),
    "repeat": lambda x, t: x.repeat(1) if x.dim() == 0 else x.repeat(1, 1),
    "tile": lambda x, t: x.tile((1,)),
    "view_as": lambda x, t: x.view_as(x.reshape(-1)),
    "reshape_as": lambda x, t: x.reshape_as(x.reshape(-1)),
    "broadcast_to": lambda x, t: x.broadcast_to((4, 4)),
    "flatten": lambda x, t: x.flatten(),
    "unsqueeze": lambda x, t: x.unsqueeze(0),
    "mv": lambda x, t: x.mv(t[0]),
    "dot": lambda x, t: x[0].dot(t[0]),
    "inner": lambda x, t: x.inner(t),
    "baddbmm": lambda x, t: x[None].baddbmm(x[None], t[None]),
    "addmm": lambda x, t: x.addmm(x, t),
    "addbmm": lambda x, t: x.addbmm(x[None], t[None]),
    "bmm": lambda x, t: x[None].bmm(t[None]),
    "topk": lambda x, t: x.topk(1),
    "sort": lambda x, t: x.sort(),
    "kthvalue": lambda x, t: x.kthvalue(1),
    "index_select": lambda x, t: x.index_select(0, torch.tensor([0])),
    "index_fill": lambda x, t: x.index_fill(0, torch.tensor([0]), 1.0),
    "index_fill_": lambda x, t: x.clone().index_fill_(0, torch.tensor([0]), 1.0),
    "narrow": lambda x, t: x.narrow(0, 0, 1),
    "take": lambda x, t: x.take(torch.tensor([0])),
    "masked_select": lambda x, t: x.masked_select(x > 0),
    "split_with_sizes": lambda x, t: x.split_with_sizes([2, 2]),
    "unflatten": lambda x, t: x.unflatten(1, (2, 2)),
    "unfold": lambda x, t: x.unfold(0, 2, 1),
    "as_strided": lambda x, t: x.as_strided((2, 2), (1, 1)),
    "scatter_": lambda x, t: x.clone().scatter_(0, torch.zeros(4, 4, dtype=torch.long), t),
    "item": lambda x, t: x.reshape(-1)[0].item(),
    "torch.index_select": lambda x, t: torch.index_select(x, 0, torch.tensor([0])),
    "torch.take_along_dim": lambda x, t: torch.take_along_dim(
        x, torch.zeros(4, 1, dtype=torch.long), 1
    ),
    "multinomial": lambda x, t: x.abs().multinomial(1),
    "torch.multinomial": lambda x, t: torch.multinomial(x.abs(), 2),
    "torch.bucketize": lambda x, t: torch.bucketize(x, torch.tensor([0.0], dtype=x.dtype)),
    "torch.get_default_dtype": lambda x, t: torch.get_default_dtype(),
    "torch.is_autocast_enabled": lambda x, t: torch.is_autocast_enabled(),
    "torch.get_autocast_dtype": lambda x, t: torch.get_autocast_dtype("cpu"),
    "torch.cpu.amp.autocast": lambda x, t: torch.autocast("cpu"),
    "torch.eye": lambda x, t: torch.eye(3),
    "torch.linspace": lambda x, t: torch.linspace(0, 1, 5),
    "torch.logspace": lambda x, t: torch.logspace(0, 1, 5),
    "torch.empty_strided": lambda x, t: torch.empty_strided((2, 2), (2, 1)),
    "torch.full": lambda x, t: torch.full((), 1.5, dtype=x.dtype),
    "torch.randint": lambda x, t: torch.randint(0, 5, (2,)),
    "torch.randperm": lambda x, t: torch.randperm(4),
    "torch.arange": lambda x, t: torch.arange(4, dtype=x.dtype),
    "torch.tensor": lambda x, t: torch.tensor([1.0], dtype=x.dtype),
    "torch.as_tensor": lambda x, t: torch.as_tensor([1.0], dtype=x.dtype),
    "torch.full_like": lambda x, t: torch.full_like(x, 1.0),
    "torch.randint_like": lambda x, t: torch.randint_like(x, 5),
    "torch.finfo": lambda x, t: torch.finfo(x.dtype),
    "torch.iinfo": lambda x, t: torch.iinfo(torch.int32),
    "torch.device": lambda x, t: torch.device("cpu"),
    "torch.Size": lambda x, t: torch.Size((2,)),
    "torch.autocast": lambda x, t: torch.autocast("cpu"),
    "torch.manual_seed": lambda x, t: torch.manual_seed(0),
    "torch.set_grad_enabled": lambda x, t: torch.set_grad_enabled(True),
    "torch.compile": lambda x, t: torch.compile(abs),
    "torch.jit.script": lambda x, t: torch.jit.script(lambda a: a),  # type: ignore[misc]
    "torch.broadcast_tensors": lambda x, t: torch.broadcast_tensors(x, t[:1]),
    "torch.broadcast_shapes": lambda x, t: torch.broadcast_shapes(x.shape, (1, 4)),
    "torch.nn.functional.grid_sample": lambda x, t: torch.nn.functional.grid_sample(
        x[None, None], torch.zeros(1, 2, 2, 2, dtype=x.dtype), align_corners=False
    ),
}


def _method_runner(name: str) -> Callable[..., Any]:
    def run(x: Any, t: Any, strict: bool = False, other: bool = False) -> Any:
        if name in EXAMPLES:
            if strict:
                return EXAMPLES[name](x, t)
            try:
                return EXAMPLES[name](x, t)
            except Exception:  # noqa: BLE001 - this example does not fit a 0-dim input
                return None
        fn = getattr(x, name, None)
        if fn is None:
            return None
        if strict:  # the same arguments that worked, with ``t`` now float32
            return fn(t) if name != "addmm" else fn(x, t)
        lists = _argument_lists(_inputs(torch.float16), t)
        found = _call(fn, (a for a in lists if not other or any(b is t for b in a)))
        return None if found is None else found[1]

    return run


def _function(qual: str) -> Callable[..., Any] | None:
    obj: Any = torch
    parts = qual.split(".")
    if parts[0] != "torch":
        return None
    for part in parts[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj  # type: ignore[no-any-return]


def _function_runner(qual: str) -> Callable[..., Any]:
    def run(x: Any, t: Any, strict: bool = False, other: bool = False) -> Any:
        if qual in EXAMPLES:
            try:
                return EXAMPLES[qual](x, t)
            except Exception:  # noqa: BLE001 - this example does not fit this input
                if strict:
                    raise
                return None
        fn = _function(qual)
        if fn is None:
            return None
        row = FUNCTIONS[qual]
        if Does.CONCAT in row.does:
            return fn([x, t])
        if Does.DEFAULT_DTYPE in row.does and x.dim() == 2:
            return fn((2, 2))
        lists = ((x, *a) for a in _argument_lists(_inputs(torch.float16), t))
        lists = (a for a in lists if not other or any(b is t for b in a[1:]))
        found = _call(fn, lists)
        return None if found is None else found[1]

    return run


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_row_holds_under_torch(name: str, dtype: str) -> None:
    _check(name, METHODS[name], getattr(torch, dtype), _method_runner(name))


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("qual", sorted(FUNCTIONS))
def test_function_row_holds_under_torch(qual: str, dtype: str) -> None:
    row = FUNCTIONS[qual]
    if _function(qual) is None:
        pytest.skip(f"{qual}: not importable here")
    _check(qual, row, getattr(torch, dtype), _function_runner(qual))


@pytest.mark.parametrize(
    "qual", sorted(q for q, r in FUNCTIONS.items() if Does.DEFAULT_DTYPE in r.does)
)
def test_factory_row_makes_the_default_dtype_unless_told(qual: str) -> None:
    fn = _function(qual)
    assert fn is not None
    made = EXAMPLES[qual](None, None) if qual in EXAMPLES else fn((2, 2))
    assert made.dtype == torch.get_default_dtype()


def test_every_row_names_a_behaviour_or_a_cast() -> None:
    for table in (METHODS, FUNCTIONS):
        assert all(row.does or row.casts_to for row in table.values())


def test_torch_functional_names_are_torchs_own() -> None:
    # ``torch.functional.einsum`` is ``torch.einsum``: the engine reads every name of
    # ``torch.functional.__all__`` as torch's row, which holds only while they are one object.
    from mpcheck.project.names import canonical

    for name in torch.functional.__all__:
        assert getattr(torch, name) is getattr(torch.functional, name)
        assert canonical(f"torch.functional.{name}") == f"torch.{name}"
    assert canonical("torch.functional.Tensor") == "torch.functional.Tensor"
