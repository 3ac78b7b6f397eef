"""MPC202 clip-before-unscale: exact positions, messages, related locations and silences."""

from __future__ import annotations

import textwrap

import pytest

from mpcheck.diagnostics import Diagnostic
from tests.support import check, span

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3


def findings(body: str, code: str = "MPC202") -> list[Diagnostic]:
    return [d for d in check(HEADER + textwrap.dedent(body)) if d.code == code]


def related(d: Diagnostic) -> list[tuple[int, int, str]]:
    return [(r.start.row, r.start.column, r.message) for r in d.related]


LOOP = """
def train(model, loader, optimizer, accum_steps):
    scaler = torch.amp.GradScaler("cuda")
    for step, (x, y) in enumerate(loader):
        with torch.autocast("cuda"):
            loss = F.cross_entropy(model(x), y) / accum_steps
        scaler.scale(loss).backward()
        if (step + 1) % accum_steps != 0:
            continue
        {before}
        {clip}
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
"""  # lines 4-17


def test_clip_norm_of_scaled_gradients() -> None:
    body = LOOP.format(
        before="pass", clip="torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"
    )
    (d,) = findings(body)
    assert span(d) == (14, 9, 14, 64)
    assert d.severity.value == "warning"
    assert d.message == (
        "`torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)` clips gradients that are "
        'still multiplied by the loss scale of the GradScaler `torch.amp.GradScaler("cuda")`: '
        "the threshold applies to the scaled norm, so the true gradients are shrunk by the "
        "scale (65536 by default); call `scaler.unscale_(optimizer)` before it"
    )
    assert related(d) == [
        (10, 9, "the scaled backward is here"),
        (6, 14, '`torch.amp.GradScaler("cuda")` is made here'),
    ]


def test_clip_value_in_a_gradient_accumulation_loop() -> None:
    body = LOOP.format(
        before="pass", clip="torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)"
    )
    (d,) = findings(body)
    assert span(d) == (14, 9, 14, 65)
    assert (
        "the threshold applies to the scaled gradients, so once unscaled they are clamped to "
        "the threshold divided by the scale (65536 by default)"
    ) in d.message


def test_timm_dispatch_clip_in_a_loss_scaler_class() -> None:
    (d,) = findings(
        """
        from timm.utils import dispatch_clip_grad

        class LossScaler:
            def __init__(self):
                self._scaler = torch.cuda.amp.GradScaler()

            def __call__(self, loss, optimizer, clip_grad=None, clip_mode="norm", parameters=None):
                self._scaler.scale(loss).backward()
                if clip_grad is not None:
                    dispatch_clip_grad(parameters, clip_grad, mode=clip_mode)
                self._scaler.step(optimizer)
                self._scaler.update()
        """
    )
    assert span(d) == (14, 13, 14, 70)
    assert "loss scale of the GradScaler `torch.cuda.amp.GradScaler()`" in d.message
    assert [(r.start.row, r.start.column) for r in d.related] == [(12, 9), (9, 24)]


def test_relatively_imported_timm_clip_helper() -> None:
    """Inside timm itself the helper is imported relatively: known by its name."""
    (d,) = findings(
        """
        from .clip_grad import dispatch_clip_grad

        def step(loss, optimizer, parameters):
            scaler = torch.amp.GradScaler("cuda")
            scaler.scale(loss).backward()
            dispatch_clip_grad(parameters, 1.0, mode="value")
            scaler.step(optimizer)
        """
    )
    assert span(d) == (10, 5, 10, 54)
    assert "once unscaled they are clamped to the threshold divided by the scale" in d.message


def test_scaler_handed_to_a_helper() -> None:
    (d,) = findings(
        """
        def train_step(model, x, optimizer, scaler, max_norm):
            loss = model(x).sum()
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
        """
    )
    assert span(d) == (8, 5, 8, 65)
    assert "loss scale of the GradScaler `scaler`, an argument of the function:" in d.message
    assert related(d) == [
        (7, 5, "the scaled backward is here"),
        (5, 37, "the GradScaler comes in as this argument"),
    ]


def test_torch_clip_after_accelerate_backward() -> None:
    (d,) = findings(
        """
        from accelerate import Accelerator

        def train(args, model, optimizer, loader):
            accelerator = Accelerator(mixed_precision=args.mixed_precision)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for x, y in loader:
                accelerator.backward(F.mse_loss(model(x), y))
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
        """
    )
    assert span(d) == (12, 9, 12, 79)
    assert d.message.endswith(
        "loss scale of the GradScaler of `Accelerator(mixed_precision=args.mixed_precision)` "
        "when its mixed precision is fp16: the threshold applies to the scaled norm, so the "
        "true gradients are shrunk by the scale (65536 by default); use "
        "`accelerator.clip_grad_norm_`, which unscales first"
    )
    assert [(r.start.row, r.start.column) for r in d.related] == [(11, 9), (8, 19)]


def test_scaled_on_some_paths() -> None:
    (d,) = findings(
        """
        def step(model, x, optimizer, use_amp):
            scaler = torch.amp.GradScaler()
            loss = model(x).sum()
            if use_amp:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
        """
    )
    assert span(d) == (12, 5, 12, 60)
    assert "`torch.amp.GradScaler()` on some paths:" in d.message


@pytest.mark.parametrize(
    "before, clip",
    [
        ("scaler.unscale_(optimizer)", "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"),
        ("scaler.unscale_(optimizer)", "torch.nn.utils.clip_grad_value_(model.parameters(), 1.0)"),
        # clipping nothing scaled: after the step, before the next backward
        ("pass", "pass"),
    ],
)
def test_silent_after_unscale(before: str, clip: str) -> None:
    assert findings(LOOP.format(before=before, clip=clip)) == []


def test_silent_for_the_correct_idioms() -> None:
    body = """
        from accelerate import Accelerator

        from .clip_grad import dispatch_clip_grad  # as in timm/utils/cuda.py

        class NativeScaler:
            def __init__(self, device="cuda"):
                self._scaler = torch.amp.GradScaler(device=device)

            def __call__(self, loss, optimizer, clip_grad=None, parameters=None):
                self._scaler.scale(loss).backward()
                if clip_grad is not None:
                    self._scaler.unscale_(optimizer)
                    dispatch_clip_grad(parameters, clip_grad)
                self._scaler.step(optimizer)
                self._scaler.update()

        def accelerate_loop(model, optimizer, loader):
            accelerator = Accelerator(mixed_precision="fp16")
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for x in loader:
                accelerator.backward(model(x).sum())
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()

        def bf16_loop(model, optimizer, loader):
            accelerator = Accelerator(mixed_precision="bf16")  # no GradScaler
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for x in loader:
                accelerator.backward(model(x).sum())
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()

        def scaler_off(model, optimizer, x):
            scaler = torch.amp.GradScaler(enabled=False)
            scaler.scale(model(x).sum()).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)

        def no_scaler(model, optimizer, x):
            model(x).sum().backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        """
    assert findings(body) == []


OPTIONAL = """
def backward(loss, scaler):
    if scaler is not None:
        scaler.scale(loss).backward()
    else:
        loss.backward()

def step(model, loss, optimizer, scaler, args):
    backward(loss, scaler)
    {guard}
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
"""  # lines 4-15; the clip is on line 14


@pytest.mark.parametrize(
    "guard",
    [
        "if scaler is not None:\n        scaler.step(optimizer)\n    else:",
        "if scaler is None:",
        "if None is scaler:",
        "if scaler == None:",
        "if not scaler:",
        "if scaler:\n        scaler.step(optimizer)\n    else:",
        "if scaler is None and args.clip:",
        "if not (scaler is not None or args.skip):",
        "if args.amp and scaler is not None:\n        scaler.step(optimizer)\n    elif not scaler:",
    ],
)
def test_silent_where_the_optional_scaler_is_none(guard: str) -> None:
    """open_clip: where the scaler is None the backward was plain, so nothing is scaled."""
    assert findings(OPTIONAL.format(guard=guard)) == []


@pytest.mark.parametrize(
    "guard",
    [
        "if scaler is not None:",
        "if scaler:",
        "if args.amp and scaler is not None:",
        # these say nothing about the scaler: it may exist, and may have scaled
        "if scaler is None or args.clip:",
        "if not (args.amp and scaler is not None):",
    ],
)
def test_clip_where_the_optional_scaler_may_exist(guard: str) -> None:
    (d,) = findings(OPTIONAL.format(guard=guard))
    assert span(d) == (14, 9, 14, 64)
    assert "loss scale of the GradScaler `scaler`, an argument of the function:" in d.message
    assert related(d) == [
        (7, 9, "the scaled backward is here"),
        (11, 34, "the GradScaler comes in as this argument"),
    ]


def test_optional_local_scaler() -> None:
    """A local that is None without AMP; the clip without ``unscale_`` still reports."""
    body = """
        def train(model, loader, optimizer, use_amp):
            scaler = None
            if use_amp:
                scaler = torch.amp.GradScaler("cpu")
            for x in loader:
                loss = model(x).sum()
                if scaler is None:
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    continue
                scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
        """
    (d,) = findings(body)
    assert span(d) == (17, 9, 17, 64)
    assert 'loss scale of the GradScaler `torch.amp.GradScaler("cpu")`:' in d.message
    assert related(d) == [
        (16, 9, "the scaled backward is here"),
        (8, 18, '`torch.amp.GradScaler("cpu")` is made here'),
    ]


PER_UNET = """
class DecoderTrainer(nn.Module):
    def __init__(self, unets, amp=False):
        super().__init__()
        for ind, unet in enumerate(unets):
            setattr(self, f"optim{ind}", torch.optim.AdamW(unet.parameters()))
            setattr(self, f"scaler{ind}", torch.amp.GradScaler("cuda", enabled=amp))
        self.unets = unets

    def update(self, unet_number):
        index = unet_number - 1
        torch.nn.utils.clip_grad_norm_(self.unets[index].parameters(), 1.0)
        optimizer = getattr(self, f"optim{index}")
        scaler = getattr(self, f"scaler{index}")
        scaler.step(optimizer)
        scaler.update()

    def forward(self, loss, unet_number):
        return getattr(self, f"scaler{unet_number - 1}").scale(loss)
"""  # lines 4-23; the clip is on line 15, the step on line 18


def test_scalers_under_computed_names_held_by_the_trainer() -> None:
    """DALLE2's ``DecoderTrainer`` (before 1924c7c): ``forward`` hands the caller the scaled
    loss, ``update`` clips and steps, and no method unscales."""
    (d,) = findings(PER_UNET)
    assert span(d) == (15, 9, 15, 76)
    assert d.message == (
        "`torch.nn.utils.clip_grad_norm_(self.unets[index].paramete...` clips gradients "
        "that are still multiplied by the loss scale of the GradScaler "
        '`torch.amp.GradScaler("cuda", enabled=amp)`, made in `__init__` and kept on `self`, '
        "which steps at line 18 with no `scaler.unscale_(...)` before the clip: the scaled "
        "backward ran elsewhere; the threshold applies to the scaled norm, so the true "
        "gradients are shrunk by the scale (65536 by default); call "
        "`scaler.unscale_(optimizer)` before the clip"
    )
    assert related(d) == [
        (10, 43, '`torch.amp.GradScaler("cuda", enabled=amp)` is made here'),
        (18, 9, "it steps here"),
    ]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # DALLE2 after 1924c7c
        (
            "        torch.nn",
            "        scaler = getattr(self, f'scaler{index}')\n"
            "        scaler.unscale_(getattr(self, f'optim{index}'))\n        torch.nn",
        ),
        ('"cuda", enabled=amp', '"cuda", enabled=False'),  # no scaling at all
        # another method unscales (a backward that unscales at once)
        (
            "    def forward(self, loss, unet_number):\n",
            "    def unscale(self, i):\n"
            "        getattr(self, f'scaler{i}').unscale_(self.optim0)\n\n"
            "    def forward(self, loss, unet_number):\n",
        ),
        # a name the template also spells: ``getattr`` may read it
        (
            "        self.unets = unets\n",
            "        self.unets = unets\n        self.scaler_off = None\n",
        ),
        # another template whose names may coincide (``f"scaler{index}"`` may be ``"scalers_0"``)
        (
            "        self.unets = unets\n",
            "        self.unets = unets\n        setattr(self, f'scalers_{0}', None)\n",
        ),
        # a setattr of any name
        (
            "        self.unets = unets\n",
            "        self.unets = unets\n        setattr(self, name, None)\n",
        ),
        # the clip on the path of a plain step only
        (
            "        torch.nn.utils.clip_grad_norm_(self.unets[index].parameters(), 1.0)\n",
            "        if unet_number < 0:\n"
            "            torch.nn.utils.clip_grad_norm_(self.unets[index].parameters(), 1.0)\n"
            "            self.optim0.step()\n            return\n",
        ),
    ],
)
def test_silent_when_held_scalers_are_unscaled_off_or_unknown(old: str, new: str) -> None:
    assert old in PER_UNET
    assert findings(PER_UNET.replace(old, new, 1)) == []


def test_plain_attribute_scaler_with_backward_in_another_method() -> None:
    (d,) = findings(
        """
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                self.scaler = torch.amp.GradScaler("cuda")

            def backward(self, loss):
                self.scaler.scale(loss).backward()

            def step(self, clip):
                if clip:
                    torch.nn.utils.clip_grad_value_(self.model.parameters(), 1.0)
                if self.scaler is None:
                    self.optimizer.step()
                else:
                    self.scaler.step(self.optimizer)
        """
    )
    assert span(d) == (16, 13, 16, 74)
    assert "made in `__init__` and kept on `self`, which steps at line 20" in d.message
    assert "call `self.scaler.unscale_(optimizer)` before the clip" in d.message


def test_held_accelerator_steps_after_a_torch_clip() -> None:
    (d,) = findings(
        """
        from accelerate import Accelerator

        class Trainer:
            def __init__(self, model):
                self.accelerator = Accelerator(mixed_precision="fp16")
                optimizer = torch.optim.AdamW(model.parameters())
                self.model, self.optimizer = self.accelerator.prepare(model, optimizer)

            def backward(self, loss):
                self.accelerator.backward(loss)

            def step(self):
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
        """
    )
    assert span(d) == (17, 9, 17, 69)
    assert (
        'the GradScaler of `Accelerator(mixed_precision="fp16")`, made in `__init__` and kept on '
        "`self`, which steps at line 18 with no `accelerator.unscale_gradients()` before the clip"
    ) in d.message
    assert d.message.endswith("use `accelerator.clip_grad_norm_`, which unscales first")


def test_passed_scaler_clip_on_the_plain_path_only() -> None:
    """The clip runs where the optional scaler is None, before the plain step: not scaled;
    a clip before the ``if`` precedes the scaler's step too."""
    body = """
        def step(model, optimizer, scaler):
            if scaler is None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            else:
                scaler.step(optimizer)
        """
    assert findings(body) == []
    (d,) = findings(
        """
        def step(model, optimizer, scaler):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if scaler is None:
                optimizer.step()
            else:
                scaler.step(optimizer)
        """
    )
    assert span(d) == (6, 5, 6, 60)
    assert "which comes in as an argument and steps at line 10" in d.message
