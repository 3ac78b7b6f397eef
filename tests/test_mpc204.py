"""MPC204 fp16-optimizer-eps: exact positions and messages, and where it must stay silent."""

from __future__ import annotations

import textwrap

import pytest

from mpcheck.diagnostics import Diagnostic
from mpcheck.engine.training import to_fp16
from tests.support import check, span

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3

# The optimizer is built on line 8, the step is on line 12.
HALF_LOOP = """
def train(loader):
    model = nn.Linear(8, 1)
    model.half()
    optimizer = {opt}
    for x, y in loader:
        loss = F.mse_loss(model(x).float(), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""

FIX = "keep the trainable parameters in float32 or pass eps=1e-4"
ZERO = (
    "which rounds to 0 in float16: where the denominator is 0 before eps (zero gradients, "
    "or small ones whose square underflows float16) the update divides by zero and the "
    "parameters become inf/NaN"
)
SUBNORMAL = (
    "which is a float16 subnormal (below 6.1e-5): the second moment is stored in float16 "
    "and underflows to 0 for small gradients, leaving eps as the whole denominator, so "
    "those steps are about lr*grad/eps, up to 1000x the float32 step, and the weights "
    "blow up"
)
HALF = "(cast to float16 by `.half()` at line 7)"


def findings(body: str) -> list[Diagnostic]:
    return [d for d in check(HEADER + textwrap.dedent(body)) if d.code == "MPC204"]


def loop(opt: str) -> list[Diagnostic]:
    return findings(HALF_LOOP.format(opt=opt))


def related(d: Diagnostic) -> list[tuple[int, int, str]]:
    return [(r.start.row, r.start.column, r.message) for r in d.related]


def test_half_model_with_default_adam_eps() -> None:
    (d,) = loop("torch.optim.Adam(model.parameters(), lr=1e-3)")
    assert span(d) == (8, 17, 8, 62)
    assert d.severity.value == "warning"
    assert d.message == (
        f"Adam updates float16 parameters {HALF} with eps=1e-08 (the default), {ZERO}; {FIX}"
    )
    assert related(d) == [
        (7, 5, "the parameters are cast to float16 by `.half()`"),
        (12, 9, "the step that updates them"),
    ]


def test_positional_eps_is_read_and_pointed_at() -> None:
    (d,) = loop("torch.optim.Adam(model.parameters(), 1e-3, (0.9, 0.999), 1e-8)")
    assert span(d) == (8, 17, 8, 79)
    assert d.message == f"Adam updates float16 parameters {HALF} with eps=1e-08, {ZERO}; {FIX}"
    assert (8, 74, "eps is set here") in related(d)


def test_subnormal_eps_is_reported_with_its_own_consequence() -> None:
    (d,) = loop("torch.optim.AdamW(model.parameters(), lr=1e-3, eps=1e-6)")
    assert span(d) == (8, 17, 8, 73)
    assert d.message == (
        f"AdamW updates float16 parameters {HALF} with eps=1e-06, {SUBNORMAL}; {FIX}"
    )
    assert (8, 68, "eps is set here") in related(d)


@pytest.mark.parametrize(
    ("opt", "reported"),
    [
        ("torch.optim.Adam(model.parameters(), eps=6e-5)", True),  # just below 2**-14
        ("torch.optim.Adam(model.parameters(), eps=1e-4)", False),
        ("torch.optim.Adam(model.parameters(), eps=1e-3)", False),
        ("torch.optim.RMSprop(model.parameters(), lr=1e-3)", True),
        ("torch.optim.NAdam(model.parameters())", True),
        ("torch.optim.RAdam(model.parameters(), eps=1e-5)", True),
        ("torch.optim.Adagrad(model.parameters(), lr=1e-2)", True),  # eps=1e-10
        ("torch.optim.Adagrad(model.parameters(), 1e-2, 0, 0, 0, 1e-4)", False),
        ("torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)", False),
        ("torch.optim.Adam(model.parameters(), eps=args.adam_epsilon)", False),  # not known
    ],
)
def test_which_optimizers_and_eps_values(opt: str, reported: bool) -> None:
    assert bool(loop(opt)) is reported


def test_adamax_only_when_eps_rounds_to_zero() -> None:
    """Adamax divides by max(|grad|) + eps: nothing squared underflows, measured fine at 1e-6."""
    (d,) = loop("torch.optim.Adamax(model.parameters(), lr=1e-2)")
    assert "(zero gradients) the update divides by zero" in d.message
    assert loop("torch.optim.Adamax(model.parameters(), lr=1e-2, eps=1e-6)") == []


def test_fused_adam_keeps_eps_but_not_the_second_moment() -> None:
    (d,) = loop("torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)")
    assert d.message == (
        f"Adam updates float16 parameters {HALF} with eps=1e-08 (the default), which the "
        "fused kernel keeps in float32, but the second moment is stored in float16 and "
        "underflows to 0 for small gradients, so those steps are about lr*grad/eps and the "
        f"weights blow up; {FIX}"
    )
    assert loop("torch.optim.Adam(model.parameters(), eps=1e-6, fused=True)") == []
    assert loop("torch.optim.Adagrad(model.parameters(), fused=True)") == []


def test_weight_dtype_fp16_on_some_paths() -> None:
    (d,) = findings(
        """
        def train(args, loader):
            weight_dtype = torch.float32
            if args.mixed_precision == "fp16":
                weight_dtype = torch.float16
            model = nn.Linear(8, 1).to(dtype=weight_dtype)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            for x, y in loader:
                loss = F.mse_loss(model(x).float(), y)
                loss.backward()
                optimizer.step()
                optimizer.step()
        """
    )  # one finding, though two steps
    assert span(d) == (10, 17, 10, 63)
    assert d.message == (
        "AdamW updates float16 parameters on some paths (cast by `.to(weight_dtype)` at "
        "line 9; `weight_dtype` is `torch.float16` at line 8) with eps=1e-08 (the default), "
        f"{ZERO}; {FIX}"
    )
    assert related(d) == [
        (9, 13, "the parameters are cast by `.to(weight_dtype)`"),
        (8, 24, "`weight_dtype` is `torch.float16` here"),
        (14, 9, "the step that updates them"),
    ]


@pytest.mark.parametrize(
    "body",
    [
        # float32 parameters under float16 autocast: the optimizer works in float32
        """
        def train(loader):
            model = nn.Linear(8, 1)
            optimizer = torch.optim.Adam(model.parameters())
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = F.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
        """,
        # bfloat16 parameters: 1e-8 is a normal bfloat16 number
        """
        def train(loader):
            model = nn.Linear(8, 1).to(torch.bfloat16)
            optimizer = torch.optim.Adam(model.parameters())
            for x, y in loader:
                F.mse_loss(model(x).float(), y).backward()
                optimizer.step()
        """,
        # float32 master copies of a half model's weights
        """
        def train(loader):
            model = nn.Linear(8, 1).half()
            master = [p.detach().clone().float().requires_grad_() for p in model.parameters()]
            optimizer = torch.optim.AdamW(master, lr=1e-3)
            for x, y in loader:
                F.mse_loss(model(x).float(), y).backward()
                optimizer.step()
        """,
        # a GradScaler steps them: it raises on float16 gradients first (MPC201's finding)
        """
        def train(loader):
            model = nn.Linear(8, 1).half()
            optimizer = torch.optim.Adam(model.parameters())
            scaler = torch.amp.GradScaler("cuda")
            for x, y in loader:
                scaler.scale(F.mse_loss(model(x).float(), y)).backward()
                scaler.step(optimizer)
                scaler.update()
        """,
    ],
)
def test_silent(body: str) -> None:
    assert findings(body) == []


@pytest.mark.parametrize(
    ("value", "held"),
    [(1e-8, 0.0), (2.0**-25, 0.0), (3e-8, 2.0**-24), (1e-4, 0.00010001659393310547)],
)
def test_to_fp16_rounds_like_torch(value: float, held: float) -> None:
    """Half to even, as `torch.tensor(value, dtype=torch.float16)` does (checked there)."""
    assert to_fp16(value) == held


def test_to_fp16_agrees_with_torch() -> None:
    torch = pytest.importorskip("torch")
    for value in (1e-10, 1e-8, 2.9e-8, 3e-8, 6e-8, 1e-7, 1e-6, 1e-5, 6e-5, 2.0**-14, 1e-4, 1.0):
        assert to_fp16(value) == float(torch.tensor(value, dtype=torch.float16)), value
