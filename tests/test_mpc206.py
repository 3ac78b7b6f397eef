"""MPC206 fp16-backward-without-scaler: where it reports, what it says, where it stays quiet."""

from __future__ import annotations

import textwrap

from mpcheck.diagnostics import Diagnostic
from tests.support import check, span

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3

TAIL = (
    "with no loss scaling: float16 gradients below 6e-8 flush to zero; scale the loss with a "
    "GradScaler (`scaler.scale(loss).backward()`, `scaler.step(optimizer)`, "
    "`scaler.update()`) or use bfloat16"
)


def findings(body: str) -> list[Diagnostic]:
    return [d for d in check(HEADER + textwrap.dedent(body)) if d.code == "MPC206"]


def test_loss_from_a_float16_block_is_reported_at_its_backward() -> None:
    (d,) = findings(
        """
        def train(model, optimizer, loader):
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    logits = model(x)
                loss = F.cross_entropy(logits.float(), y)
                loss.backward()
                optimizer.step()
        """
    )
    assert span(d) == (10, 9, 10, 24)
    assert d.severity.value == "warning"
    assert d.message == (
        "`loss.backward()` runs the backward of a loss computed under float16 autocast "
        '(`torch.autocast("cuda", dtype=torch.float16)` at line 7) ' + TAIL
    )
    assert [(r.start.row, r.start.column, r.message) for r in d.related] == [
        (7, 14, "float16 autocast entered here")
    ]


def test_cuda_default_dtype_and_an_enabled_switch_are_said() -> None:
    (d,) = findings(
        """
        def train(model, optimizer, loader, use_amp):
            for x, y in loader:
                with torch.cuda.amp.autocast(enabled=use_amp):
                    loss = F.mse_loss(model(x), y)
                loss.backward()
        """
    )
    assert "at line 7, CUDA autocast's default dtype) on the runs that turn it on " in d.message


def test_backward_inside_the_block_and_a_module_level_script() -> None:
    inside = """
        class Trainer:
            def step(self, x):
                with torch.autocast("cuda"):
                    out = self.model(x)
                    out["loss"].backward()
        """
    (d,) = findings(inside)
    assert span(d)[:2] == (9, 13)
    script = """
        model = nn.Linear(4, 4).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in range(3):
            with torch.autocast(device_type="cuda", dtype=torch.half):
                out = model(torch.randn(2, 4, device="cuda"))
            total = out.sum()
            total.backward()
            opt.step()
        """
    (d,) = findings(script)
    assert span(d)[:2] == (11, 5)


def test_bfloat16_unknown_and_cpu_default_dtypes_are_quiet() -> None:
    for region in (
        'torch.autocast("cuda", dtype=torch.bfloat16)',
        'torch.autocast("cuda", dtype=args.amp_dtype)',
        'torch.autocast("cpu")',  # CPU's default is bfloat16
        'torch.autocast("cuda", enabled=False)',
        "accelerator.autocast()",
    ):
        body = f"""
            def train(model, optimizer, loader, args, accelerator):
                for x, y in loader:
                    with {region}:
                        loss = F.mse_loss(model(x), y)
                    loss.backward()
            """
        assert findings(body) == [], region


def test_a_scaler_on_the_path_or_named_in_the_file_keeps_it_quiet() -> None:
    aliased = """
        from torch.amp import GradScaler as GS

        def train(model, optimizer, loader, fp16):
            gs = GS("cuda", enabled=fp16)
            for x, y in loader:
                with torch.autocast("cuda", enabled=fp16):
                    loss = F.mse_loss(model(x), y)
                if fp16:
                    gs.scale(loss).backward()
                else:
                    loss.backward()
        """
    assert findings(aliased) == []
    held = """
        class Trainer:
            def __init__(self):
                self.grad_scaler = make_scaler()

            def step(self, x, y):
                with torch.autocast("cuda"):
                    loss = F.mse_loss(self.model(x), y)
                self.backward(loss)

            def plain(self, x, y):
                with torch.autocast("cuda"):
                    loss = F.mse_loss(self.model(x), y)
                loss.backward()
        """
    assert findings(held) == []


def test_losses_not_computed_in_the_block_are_quiet() -> None:
    body = """
        def fit(model, optimizer, train, val):
            for x, y in train:
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
            for x, y in val:
                with torch.no_grad(), torch.autocast("cuda"):
                    loss = F.cross_entropy(model(x), y)
            with torch.autocast("cuda"):
                preview = model(val[0][0])
            extra = F.mse_loss(model(train[0][0]), train[0][1])
            extra.backward()
        """
    assert findings(body) == []


def test_objects_that_scale_their_own_backward_are_quiet() -> None:
    body = """
        def train(engine, optimizer, loader, accelerator):
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = F.mse_loss(engine(x), y)
                engine.backward(loss)  # DeepSpeed
                optimizer.backward(loss)  # fairseq
                accelerator.backward(loss)
                loss.backward(torch.ones_like(loss))  # a gradient handed in
        """
    assert findings(body) == []


def test_one_finding_per_backward_though_the_loop_is_walked_twice() -> None:
    body = """
        def train(model, optimizer, loader):
            for epoch in range(3):
                for x, y in loader:
                    with torch.autocast("cuda"):
                        loss = F.mse_loss(model(x), y)
                    loss.backward()
        """
    assert len(findings(body)) == 1


def test_a_dtype_float16_on_some_runs_is_a_stated_premise() -> None:
    (d,) = findings(
        """
        def train(model, optimizer, loader, fp16):
            amp_dtype = torch.float16 if fp16 else torch.bfloat16
            for x, y in loader:
                with torch.autocast("cuda", dtype=amp_dtype):
                    loss = F.mse_loss(model(x), y)
                loss.backward()
        """
    )
    assert "at line 8, float16 on the runs whose `dtype=` picks it) with no loss" in d.message
    only_bf16 = """
        def train(model, optimizer, loader, bf16):
            amp_dtype = torch.bfloat16 if bf16 else torch.float32
            for x, y in loader:
                with torch.autocast("cuda", dtype=amp_dtype):
                    loss = F.mse_loss(model(x), y)
                loss.backward()
        """
    assert findings(only_bf16) == []


def test_a_scaler_made_disabled_scales_nothing() -> None:
    (d,) = findings(
        """
        def train(model, optimizer, loader):
            scaler = torch.amp.GradScaler("cuda", enabled=False)
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = F.mse_loss(model(x), y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
        """
    )
    assert span(d)[:2] == (10, 9)
    assert "(the GradScaler made at line 6 is made with `enabled=False`" in d.message
    assert [r.message for r in d.related] == [
        "float16 autocast entered here",
        "the GradScaler is made disabled here",
    ]
    switched = """
        def train(model, optimizer, loader, fp16):
            scaler = torch.amp.GradScaler("cuda", enabled=fp16)
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.float16, enabled=fp16):
                    loss = F.mse_loss(model(x), y)
                scaler.scale(loss).backward()
        """
    assert findings(switched) == []


def test_a_held_context_chosen_against_nullcontext_in_init_is_read_there() -> None:
    """``self.ctx`` bound to ``nullcontext()`` and, under a test, to an autocast whose
    ``dtype=`` variable ``__init__`` picks: the region on the runs that turn it on, float16 on
    those that pick it (oumi's trainer before its fix, with a scaler made disabled)."""
    trainer = """
        import contextlib

        class Trainer:
            def __init__(self, model, params):
                self.model = model
                self.ctx = contextlib.nullcontext()
                amp_dtype = None
                if params.dtype == "bf16":
                    amp_dtype = torch.bfloat16
                elif params.dtype == "fp16":
                    amp_dtype = {half}
                if amp_dtype:
                    self.ctx = torch.amp.autocast(device_type="cuda", dtype=amp_dtype)

            def step(self, x, y):
                with self.ctx:
                    loss = F.mse_loss(self.model(x), y)
                loss.backward()
        """
    (d,) = findings(trainer.format(half="torch.float16"))
    assert span(d)[:2] == (22, 9)
    assert "float16 on the runs whose `dtype=` picks it) on the runs that turn it on" in d.message
    assert findings(trainer.format(half="torch.bfloat16")) == []


def test_a_context_bound_to_two_plain_contexts_is_no_region() -> None:
    """``cm = pool.get_context()`` or ``cm = nullcontext()`` on two paths (transformers'
    wav2vec2 processor): two values, one of them ``nullcontext()`` and the other no autocast,
    hold no region, and the walk reads on (it raised IndexError when both were plain)."""
    body = """
        from contextlib import nullcontext


        def decode(pool, logits):
            if pool is None:
                cm = nullcontext()
            else:
                cm = nullcontext()
            with cm:
                return logits.float()
        """
    assert [d.code for d in check(HEADER + textwrap.dedent(body))] == []
