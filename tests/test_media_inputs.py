"""Pictures and sounds as a function was handed them (``data_api.media_input``): MPC302
leaves their means and variances alone, since their values are about one."""

from __future__ import annotations

import pytest

from mpcheck.data_api import media, media_input
from tests.test_analysis import probe


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("pixel_values", True),
        ("image", True),
        ("init_images", True),
        ("input_values", True),
        ("waveform", True),
        ("raw_audio", True),
        ("hidden_states", False),
        ("x", False),
        ("input_ids", False),
        ("audio_embeds", False),
    ],
)
def test_media_names(name: str, expected: bool) -> None:
    assert media(name) is expected


def test_inputs_and_batch_items_named_as_media_are_media() -> None:
    facts = probe(
        """
        class Net(nn.Module):
            def forward(self, pixel_values, input_values, hidden_states):
                frames = pixel_values.flatten(2)
                probe.at(frames); probe.at(input_values.sum(1)); probe.at(hidden_states)

        def train(loader, model):
            for batch in loader:
                images = batch["pixel_values"].to("cuda")
                probe.at(images); probe.at(batch["latents"])
        """
    )
    assert [media_input(f) for f in facts] == [True, True, False, True, False]


def test_a_tensor_made_here_is_no_media_whatever_its_name() -> None:
    (fact,) = probe(
        """
        image = torch.randn(1, 3, 8, 8)
        probe.at(image)
        """
    )
    assert not media_input(fact)
