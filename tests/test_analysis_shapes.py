"""Provenance facts that real model code depends on: 0-dim values, index tensors, submodules.

Each case comes from a false alarm in transformers/diffusers (see the comments); the
facts are checked with the ``probe`` rule of ``tests.test_analysis``.
"""

from __future__ import annotations

from mpcheck.engine.facts import Kind, Prec
from tests.test_analysis import probe


def test_empty_shape_factories_are_zero_dim() -> None:
    # encodec/mimi ``quantized_out = torch.full((), 0.0)``; xglm ``torch.max(w, torch.full((), m))``
    facts = probe(
        """
        class Net(nn.Module):
            def forward(self, x):
                probe.at(torch.full((), 0.0, device=x.device))
                probe.at(torch.zeros([]))
                probe.at(torch.full((), 64) ** 0.25)
                probe.at(torch.zeros(()) + x)
                probe.at(torch.zeros((1,)))
                probe.at(torch.empty([0]))
        """
    )
    assert [f.zero_dim for f in facts] == [True, True, True, False, False, False]
    assert facts[3].prec is Prec.MODEL  # a 0-dim float32 tensor does not promote ``x``


def test_full_reductions_are_zero_dim() -> None:
    # siglip/pe_audio losses: ``(labels * logits).sum() / n`` never promotes anything
    facts = probe(
        """
        class Net(nn.Module):
            def forward(self, x):
                probe.at(x.mean()); probe.at(torch.sum(x)); probe.at(x.norm(p=2))
                probe.at(x.mean(-1)); probe.at(x.sum(dim=1)); probe.at(torch.mean(x, 0))
        """
    )
    assert [f.zero_dim for f in facts] == [True, True, True, False, False, False]


def test_index_and_placeholder_arguments_do_not_promote() -> None:
    # grounding_dino ``torch.gather(coords, 1, topk_idx)``; wavlm's ``torch.empty([0])``
    facts = probe(
        """
        class Net(nn.Module):
            def forward(self, x, w):
                idx = torch.topk(torch.zeros(4, 8).max(-1)[0], 2, dim=1)[1]
                probe.at(torch.gather(x, 1, idx))
                probe.at(torch.index_select(x, 0, idx))
                out, weights = F.multi_head_attention_forward(
                    x, x, x, 8, 2, torch.empty([0]), None, None, None, False, 0.0, w, None
                )
                probe.at(out)
        """
    )
    assert [f.prec for f in facts] == [Prec.MODEL, Prec.MODEL, Prec.MODEL]


def test_integer_tensor_annotations() -> None:
    # musicflamingo ``post_lengths: torch.LongTensor``: ``torch.cumsum`` of it stays integer
    facts = probe(
        """
        class Net(nn.Module):
            def forward(
                self,
                x: torch.Tensor,
                post_lengths: torch.LongTensor,
                flags: torch.BoolTensor | None,
                either: torch.LongTensor | torch.FloatTensor,
            ):
                probe.at(post_lengths); probe.at(flags); probe.at(either)
                probe.at(torch.cat([torch.zeros(1), torch.cumsum(post_lengths, dim=0)]))
        """
    )
    assert [f.prec for f in facts] == [Prec.INT, Prec.INT, Prec.MODEL, Prec.FULL]
    assert facts[3].mixed is None  # float32 meeting integers is no clash with the model


def test_a_method_returning_a_submodule_is_that_module() -> None:
    # autoformer ``decoder = self.model.get_decoder(); decoder(inputs_embeds=...)``
    facts = probe(
        """
        class Inner(nn.Module):
            def __init__(self):
                super().__init__()
                self.decoder = nn.Linear(4, 4)
            def get_decoder(self):
                return self.decoder
            def forward(self, x):
                return self.decoder(x)

        class Outer(nn.Module):
            def __init__(self):
                super().__init__()
                self.model = Inner()
            def forward(self, x):
                decoder = self.model.get_decoder()
                probe.at(decoder); probe.at(decoder(x))

        def main():
            model = Outer().half()
            probe.at(model.model.get_decoder())
        """
    )
    assert [(f.kind, f.prec, f.layer) for f in facts] == [
        (Kind.MODULE, Prec.MODEL, "Linear"),
        (Kind.TENSOR, Prec.MODEL, None),
        (Kind.MODULE, Prec.HALF, "Linear"),
    ]


def test_losses_with_the_default_reduction_are_zero_dim() -> None:
    # speecht5 ``self.bce_criterion(logits, stop_labels)``: a float32 target makes a loss
    facts = probe(
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.bce = nn.BCEWithLogitsLoss()
            def forward(self, x):
                target = torch.ones(4, 1)
                probe.at(self.bce(x, target))
                probe.at(F.mse_loss(x, target))
                probe.at(F.mse_loss(x, target, reduction="sum"))
                probe.at(F.mse_loss(x, target, reduction="none"))
        """
    )
    assert [(f.prec, f.zero_dim) for f in facts] == [
        (Prec.FULL, True),
        (Prec.FULL, True),
        (Prec.FULL, True),
        (Prec.FULL, False),
    ]


def test_add_noise_promotes_its_noise_with_the_sample() -> None:
    # diffusers' ``add_noise``: ``a * original_samples + b * noise``, its tables cast to the
    # sample's dtype, the noise not (diffusers-92d7086: a float32 randn noise, half latents)
    facts = probe(
        """
        class Net(nn.Module):
            def forward(self, x, t):
                noise = torch.randn(x.shape)
                probe.at(self.scheduler.add_noise(x, noise, t))
                probe.at(self.scheduler.add_noise(x, torch.randn_like(x), t))
                probe.at(self.scheduler.add_noise(original_samples=x, noise=noise, timesteps=t))
                probe.at(self.scheduler.scale_model_input(x, t))
        """
    )
    assert [f.prec for f in facts] == [Prec.FULL, Prec.MODEL, Prec.FULL, Prec.MODEL]
    assert facts[0].mixed is not None  # it absorbed the model's activations
