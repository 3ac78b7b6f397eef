"""The engine's reading of buffers a checkpoint leaves out, checkpointed calls, ``enumerate``/
``zip`` over modules, input conversion guards and pictures moved with a dtype.

Each test pairs the pattern with its near miss, so a guard that stops working fails here.
"""

from __future__ import annotations

import textwrap

import pytest

from mpcheck.diagnostics import Diagnostic
from tests.support import check

HEADER = (
    "import torch\nfrom torch import nn\nfrom torch.utils.checkpoint import checkpoint\n"
    "from diffusers.models.modeling_utils import ModelMixin\n"
)  # lines 1-4


def codes(body: str) -> list[tuple[str, int]]:
    found: list[Diagnostic] = check(HEADER + textwrap.dedent(body))
    return [(d.code, d.start.row) for d in found]


BUFFER = """
    class Net({base}):
        def __init__(self, n):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(n, n) for _ in range(2)])
            self.register_buffer("pos", torch.arange(n).float(){persistent})

        def forward(self, h):
            for i, block in {loop}:
                if i == 0:
                    h = h + self.pos
                h = {call}
            return h
    """
PLAIN = {
    "base": "ModelMixin",
    "persistent": ", persistent=False",
    "loop": "enumerate(self.blocks)",
    "call": "block(h)",
}


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"call": "checkpoint(block, h, use_reentrant=False)"},
        {"call": "self._gradient_checkpointing_func(block, h)"},
        {"loop": "zip(range(2), self.blocks)"},
    ],
)
def test_a_non_persistent_float32_buffer_of_a_pretrained_model_is_reported(
    change: dict[str, str],
) -> None:
    assert codes(BUFFER.format(**{**PLAIN, **change})) == [("MPC102", 15)]


@pytest.mark.parametrize(
    "change",
    [
        {"base": "nn.Module"},  # .half() casts every buffer
        {"persistent": ""},  # in the checkpoint: loaded in the model's dtype
        {"persistent": ", persistent=True"},
    ],
)
def test_a_buffer_the_model_casts_is_not_reported(change: dict[str, str]) -> None:
    assert codes(BUFFER.format(**{**PLAIN, **change})) == []


def test_a_buffer_cast_where_it_is_read_is_not_reported() -> None:
    body = BUFFER.format(**PLAIN).replace("h + self.pos", "h + self.pos.to(h.dtype)")
    assert codes(body) == []


STEP = """
    def prepare(pipe, image, device):
        {guard}
            image = pipe.image_processor.preprocess(image)
            image = image.to(device=device, dtype={dtype})
        return pipe.vae.encode(image)
    """


def test_a_picture_converted_to_float32_reaches_the_pipeline_vae() -> None:
    body = STEP.format(guard="if not isinstance(image, torch.Tensor):", dtype="torch.float32")
    assert codes(body) == [("MPC101", 10)]


@pytest.mark.parametrize(
    ("guard", "dtype"),
    [
        ("if not isinstance(image, torch.Tensor):", "pipe.vae.dtype"),
        ("if not isinstance(image, list):", "torch.float32"),  # not the tensor test
    ],
)
def test_a_picture_in_the_model_dtype_or_another_guard_is_not_reported(
    guard: str, dtype: str
) -> None:
    assert codes(STEP.format(guard=guard, dtype=dtype)) == []


def test_a_model_moved_with_a_dtype_is_no_picture() -> None:
    body = """
        def prepare(pipe, model, device):
            model = model.to(device=device, dtype=torch.float32)
            return pipe.vae.encode(model)
        """
    assert codes(body) == []
