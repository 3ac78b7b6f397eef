"""MPC203 scaler-with-bf16: exact positions and messages, and where it must stay silent."""

from __future__ import annotations

import textwrap

from mpcheck.diagnostics import Diagnostic
from tests.support import check, span

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3


def findings(body: str) -> list[Diagnostic]:
    return [d for d in check(HEADER + textwrap.dedent(body)) if d.code == "MPC203"]


def related(d: Diagnostic) -> list[tuple[int, int, str]]:
    return [(r.start.row, r.start.column, r.message) for r in d.related]


TAIL = (
    "bfloat16 has float32's range, so loss scaling does nothing but cost time; drop the "
    "scaler or enable it only for float16"
)


def test_bf16_autocast_loop_is_reported_once_at_the_backward() -> None:
    (d,) = findings(
        """
        def train(model, loader, optimizer):
            scaler = torch.cuda.amp.GradScaler()
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = F.mse_loss(model(x), y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
        """
    )
    assert span(d) == (10, 9, 10, 38)
    assert d.severity.value == "warning"
    assert d.message == (
        "`scaler.scale(loss).backward()` goes through the GradScaler "
        "`torch.cuda.amp.GradScaler()` (made at line 6), but the training runs in bfloat16 "
        f"(the loss is computed under bfloat16 autocast at line 8): {TAIL}"
    )
    assert related(d) == [
        (8, 14, "the loss is computed under bfloat16 autocast"),
        (6, 14, "the GradScaler is made here"),
    ]


def test_autocast_dtype_held_in_a_variable_is_resolved() -> None:
    bf16_on_cuda = """
        def train(model, loader, optimizer):
            amp_dtype = torch.bfloat16
            scaler = torch.amp.GradScaler("cuda")
            for x, y in loader:
                with torch.autocast("cuda", dtype=amp_dtype):
                    loss = F.mse_loss(model(x), y)
                scaler.scale(loss).backward()
        """
    (d,) = findings(bf16_on_cuda)
    assert span(d) == (11, 9, 11, 38)
    # float16 through a variable on "cpu" (whose default autocast dtype is bfloat16):
    # the scaler is needed, so the device default must not decide.
    fp16_on_cpu = bf16_on_cuda.replace("torch.bfloat16", "torch.float16").replace('"cuda"', '"cpu"')
    assert findings(fp16_on_cpu) == []
    # A dtype chosen at run time, float16 on one path: the scaler may be needed.
    chosen = bf16_on_cuda.replace(
        "amp_dtype = torch.bfloat16", "amp_dtype = torch.bfloat16 if bf16 else torch.float16"
    ).replace("(model, loader, optimizer)", "(model, loader, optimizer, bf16)")
    assert findings(chosen) == []


def test_cpu_autocast_default_dtype_is_bfloat16() -> None:
    body = """
        def train(model, loader, optimizer):
            scaler = torch.amp.GradScaler("cpu")
            for x, y in loader:
                with torch.autocast("cpu"):
                    loss = F.mse_loss(model(x), y)
                scaler.scale(loss).backward()
        """
    (d,) = findings(body)
    assert span(d) == (10, 9, 10, 38)
    assert findings(body.replace('"cpu"', '"cuda"')) == []  # cuda's default is float16


def test_weight_dtype_bf16_or_fp32_is_reported_at_the_first_unscale() -> None:
    (d,) = findings(
        """
        def train(args, loader):
            weight_dtype = torch.bfloat16 if args.mixed_precision == "bf16" else torch.float32
            model = nn.Linear(8, 8).to(dtype=weight_dtype)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler()
            for x, y in loader:
                loss = F.mse_loss(model(x).float(), y)
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                scaler.step(optimizer)
                scaler.update()
        """
    )
    assert span(d) == (13, 9, 13, 35)
    assert d.message == (
        "`scaler.unscale_(optimizer)` goes through the GradScaler `torch.amp.GradScaler()` "
        "(made at line 9), but the training runs in bfloat16 or float32, never float16 (the "
        "parameters are cast by `.to(weight_dtype)` at line 7; `weight_dtype` is "
        f"`torch.bfloat16` at line 6): {TAIL}"
    )
    assert related(d) == [
        (7, 13, "the parameters are cast by `.to(weight_dtype)`"),
        (6, 20, "`weight_dtype` is `torch.bfloat16` here"),
        (9, 14, "the GradScaler is made here"),
    ]


def test_silent_where_the_scaler_can_matter_or_is_gated() -> None:
    template = """
        def train(args, loader):
            weight_dtype = {dtype}
            model = nn.Linear(8, 8).to(dtype=weight_dtype)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = {scaler}
            for x, y in loader:
                loss = F.mse_loss(model(x).float(), y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
        """
    bf16 = "torch.bfloat16"
    plain = "torch.amp.GradScaler()"
    assert len(findings(template.format(dtype=bf16, scaler=plain))) == 1
    silent = [
        (bf16, "torch.amp.GradScaler(enabled=weight_dtype == torch.float16)"),
        (bf16, "torch.amp.GradScaler(enabled=False)"),
        (bf16, "torch.amp.GradScaler(enabled=args.fp16)"),
        ("torch.bfloat16 if args.bf16 else torch.float16", plain),  # float16 on one path
        ("torch.float32", plain),  # float32 only: nothing says bfloat16
    ]
    for dtype, scaler in silent:
        assert findings(template.format(dtype=dtype, scaler=scaler)) == [], (dtype, scaler)


def test_accelerate_bf16_has_no_scaler() -> None:
    body = """
        from accelerate import Accelerator

        def train(loader):
            accelerator = Accelerator(mixed_precision="bf16")
            model = nn.Linear(8, 8).to(dtype=torch.bfloat16)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model, optimizer = accelerator.prepare(model, optimizer)
            for x, y in loader:
                with accelerator.autocast():
                    loss = F.mse_loss(model(x), y)
                accelerator.backward(loss)
                optimizer.step()
        """
    assert findings(body) == []


def test_scaler_made_in_a_bf16_only_branch_is_reported_at_the_construction() -> None:
    (d,) = findings(
        """
        class Trainer:
            def __init__(self, mode, device):
                self.scaler = None
                if mode == "fp16":
                    self.scaler = torch.cuda.amp.GradScaler()
                elif mode == "bf16" and device.type != "cpu":
                    self.scaler = torch.cuda.amp.GradScaler()
        """
    )
    assert span(d) == (11, 27, 11, 54)
    assert 'is made only when `mode == "bf16"` (line 10)' in d.message
    assert related(d) == [(10, 14, "only bfloat16 runs in this branch")]


def test_scaler_in_the_else_of_a_not_bf16_test_is_reported() -> None:
    (d,) = findings(
        """
        def make(dtype):
            if dtype != torch.bfloat16:
                return None
            else:
                return torch.amp.GradScaler("cuda")
        """
    )
    assert span(d) == (9, 16, 9, 44)


def test_branches_that_also_run_fp16_or_disable_the_scaler_are_quiet() -> None:
    assert not findings(
        """
        def make(mode, dtype):
            if mode in ("fp16", "bf16"):
                a = torch.amp.GradScaler("cuda")
            if mode == "bf16" or mode == "fp16":
                b = torch.amp.GradScaler("cuda")
            if dtype == torch.bfloat16:
                c = torch.amp.GradScaler("cuda", enabled=False)
            if mode == "fp16":
                d = torch.amp.GradScaler("cuda")
            return a, b, c, d
        """
    )
