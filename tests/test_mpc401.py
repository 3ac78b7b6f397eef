"""MPC401 autocast-unsafe-op: positions, messages, the logits fix and the silent cases."""

from __future__ import annotations

import textwrap

import libcst as cst

from mpcheck.diagnostics import Diagnostic
from mpcheck.output.fixes import apply_fixes
from tests.support import check, span

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3
REFUSED = (
    '("torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.")'
)


def source(body: str) -> str:
    return HEADER + textwrap.dedent(body)


def findings(body: str) -> list[Diagnostic]:
    return [d for d in check(source(body)) if d.code == "MPC401"]


def fixed(body: str) -> str:
    text = source(body)
    out, applied = apply_fixes(text, findings(body), unsafe=True)
    assert applied
    cst.parse_module(out)  # the fix produces valid code
    return out[len(HEADER) :]


GAN = """
def d_step(disc, real, fake, ones, zeros):
    with torch.autocast("cuda", dtype=torch.float16):
        real_logits = disc(real)
        loss = F.binary_cross_entropy(torch.sigmoid(real_logits), ones, reduction="sum")
        loss = loss + F.binary_cross_entropy(disc(fake).sigmoid(), zeros)
    return loss
"""


def test_functional_bce_under_cuda_autocast() -> None:
    first, second = findings(GAN)
    assert span(first) == (8, 16, 8, 89)
    assert first.severity.value == "error"
    assert first.message == (
        '`F.binary_cross_entropy` raises inside `torch.autocast("cuda", dtype=torch.float16)` '
        f"(line 6): autocast refuses it {REFUSED}; use "
        "`F.binary_cross_entropy_with_logits` on the logits (without the sigmoid)"
    )
    (note,) = first.related
    assert (note.start.row, note.start.column, note.message) == (6, 10, "the autocast region")
    assert first.fix is not None and first.fix.applicability == "unsafe"
    assert first.fix.message == (
        "Use `F.binary_cross_entropy_with_logits` on `real_logits` (the logits, without the "
        "sigmoid)"
    )
    assert span(second)[:2] == (9, 23)


def test_fix_drops_the_sigmoid_and_keeps_the_other_arguments() -> None:
    assert fixed(GAN) == textwrap.dedent(
        """
        def d_step(disc, real, fake, ones, zeros):
            with torch.autocast("cuda", dtype=torch.float16):
                real_logits = disc(real)
                loss = F.binary_cross_entropy_with_logits(real_logits, ones, reduction="sum")
                loss = loss + F.binary_cross_entropy_with_logits(disc(fake), zeros)
            return loss
        """
    )


def test_fix_spells_the_new_name_through_the_files_imports() -> None:
    body = """
    from torch.nn.functional import binary_cross_entropy

    def step(logits, y):
        with torch.cuda.amp.autocast():
            return binary_cross_entropy(torch.nn.functional.sigmoid(logits), y)
    """
    # the most specific import of torch.nn.functional in the file: ``F``
    assert "return F.binary_cross_entropy_with_logits(logits, y)" in fixed(body)


def test_probabilities_from_elsewhere_get_no_fix() -> None:
    (d,) = findings(
        """
        def step(logits, y, w):
            with torch.autocast("cuda"):
                probs = torch.sigmoid(logits)
                return F.binary_cross_entropy(probs, y, weight=w)
        """
    )
    assert d.fix is None


def test_bce_module_instances() -> None:
    first, second = findings(
        """
        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 3)
                self.criterion = nn.BCELoss()

            @torch.autocast("cuda")
            def loss(self, x, y):
                return self.criterion(torch.sigmoid(self.fc(x)), y)

        def train(model, x, y):
            with torch.autocast("cuda"):
                return nn.BCELoss()(model(x), y)
        """
    )
    assert span(first)[:2] == (13, 16)
    assert first.message == (
        '`self.criterion` (`nn.BCELoss`) raises inside `torch.autocast("cuda")` (line 11): '
        f"autocast refuses it {REFUSED}; use `nn.BCEWithLogitsLoss` on the logits"
    )
    assert first.fix is None
    assert span(second)[:2] == (17, 16)
    assert second.message.startswith("`nn.BCELoss()` (`nn.BCELoss`) raises inside")


def test_local_loss_module_whose_forward_calls_bce() -> None:
    (d,) = findings(
        """
        class DiceBCELoss(nn.Module):
            def forward(self, logits, targets):
                probs = torch.sigmoid(logits)
                return F.binary_cross_entropy(probs, targets) + (1 - probs).mean()

        class SafeLoss(nn.Module):
            def forward(self, probs, targets):
                with torch.autocast("cuda", enabled=False):
                    return F.binary_cross_entropy(probs.float(), targets.float())

        def train(model, x, y):
            criterion, safe = DiceBCELoss(), SafeLoss()
            with torch.autocast("cuda"):
                out = model(x)
                return criterion(out, y) + safe(torch.sigmoid(out), y)

        def train_cpu(model, x, y):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return DiceBCELoss()(model(x), y)
        """
    )
    assert span(d) == (19, 16, 19, 33)
    assert d.message == (
        "`criterion` runs `DiceBCELoss.forward`, whose `F.binary_cross_entropy` (line 8) raises "
        'inside `torch.autocast("cuda")` (line 17): autocast refuses binary cross-entropy '
        f"{REFUSED}; compute it from the logits with `F.binary_cross_entropy_with_logits` or "
        "`nn.BCEWithLogitsLoss`"
    )
    assert [(r.start.row, r.start.column, r.message) for r in d.related] == [
        (8, 16, "autocast refuses this op"),
        (17, 10, "the autocast region"),
    ]
    assert d.fix is None


def test_module_bound_at_the_top_level_and_used_in_a_function() -> None:
    (d,) = findings(
        """
        criterion = nn.BCELoss()

        def train(model, x, y):
            with torch.autocast("cuda"):
                return criterion(model(x), y)
        """
    )
    assert span(d)[:2] == (9, 16)
    assert d.message.startswith('`criterion` (`nn.BCELoss`) raises inside `torch.autocast("cuda")`')


def test_device_chosen_at_run_time_is_reported() -> None:
    (d,) = findings(
        """
        def step(accelerator, model, x, y):
            with accelerator.autocast():
                return F.binary_cross_entropy(model(x), y)
        """
    )
    assert d.message.startswith(
        "`F.binary_cross_entropy` raises inside `accelerator.autocast()` (line 6), which is "
        "CUDA autocast when this runs on a GPU:"
    )


def test_silent_cases() -> None:
    assert not findings(
        """
        from mylosses import binary_cross_entropy

        def step(model, x, y, z):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                a = F.binary_cross_entropy(torch.sigmoid(model(x)), y)  # CPU: an fp32-list op
            with torch.autocast("cuda"):
                b = F.binary_cross_entropy_with_logits(model(x), y)
                c = nn.BCEWithLogitsLoss()(model(x), y)
                d = binary_cross_entropy(z, y)  # not torch's
                with torch.autocast("cuda", enabled=False):
                    e = F.binary_cross_entropy(torch.sigmoid(model(x)).float(), y.float())
            f = F.binary_cross_entropy(torch.sigmoid(model(x)), y)  # no autocast at all
            return a + b + c + d + e + f
        """
    )


def test_lightning_step_is_an_implicit_autocast_region_reported_as_a_warning() -> None:
    found = findings(
        """
        import pytorch_lightning as pl

        class Base(pl.LightningModule):
            pass

        class Net(Base):
            def forward(self, x):
                return torch.sigmoid(self.head(x))

            def shared(self, batch):
                x, y = batch
                return F.binary_cross_entropy(self(x), y)

            def training_step(self, batch, batch_idx):
                return self.shared(batch)

            def on_train_epoch_end(self):
                return F.binary_cross_entropy(self.p, self.y)

            def helper_never_stepped(self, p, y):
                return F.binary_cross_entropy(p, y)
        """
    )
    (d,) = found
    assert span(d) == (16, 16, 16, 50)
    assert d.severity.value == "warning"
    assert "when the Trainer runs `training_step` with mixed precision" in d.message
    assert [(r.start.row, r.start.column) for r in d.related] == [(18, 9)]


def test_lightning_step_with_autocast_disabled_or_a_plain_module_is_quiet() -> None:
    assert not findings(
        """
        import lightning as L

        class Net(L.LightningModule):
            def training_step(self, batch, batch_idx):
                p, y = batch
                with torch.autocast("cuda", enabled=False):
                    return F.binary_cross_entropy(p.float(), y.float())

        class Plain(nn.Module):
            def training_step(self, batch, batch_idx):
                p, y = batch
                return F.binary_cross_entropy(p, y)
        """
    )


def test_the_message_names_the_target_torch() -> None:
    from mpcheck.pipeline.one_file import Options, check_source
    from mpcheck.ruleset.rule import all_rules

    def messages(target: tuple[int, int] | None) -> list[str]:
        found = check_source(source(GAN), "t.py", all_rules(), Options(target_torch_version=target))
        return [d.message for d in found if d.code == "MPC401"]

    old, latest = messages((2, 1)), messages(None)
    assert len(old) == len(latest) == 2  # banned in every measured torch
    assert f"autocast (torch 2.1) refuses it {REFUSED}" in old[0]
    assert f"(line 6): autocast refuses it {REFUSED}" in latest[0]
