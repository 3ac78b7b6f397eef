"""Facts of diffusion pipelines, trainers and samplers: guards, tables, shapes, linalg.

Each snippet calls ``probe.at(x)``; the test reads the fact the engine holds for ``x`` there
(the probe rule of ``tests/test_analysis.py``).
"""

from __future__ import annotations

from mpcheck.engine.facts import Cause, Kind, Prec
from tests.test_analysis import one, probe


def test_a_model_bound_under_a_flag_and_its_complement_is_the_model() -> None:
    facts = probe(
        """
        def main(cache_latents, weight_dtype, load):
            vae = None
            if cache_latents:
                vae = load()
                vae.to("cpu", dtype=weight_dtype)
            probe.at(vae)
            if not cache_latents:
                vae = load()
                vae.to("cpu", dtype=weight_dtype)
            probe.at(vae)
        """
    )
    assert facts[0].kind is Kind.OTHER
    assert facts[1].kind is Kind.MODULE and facts[1].cause is Cause.MODEL_CAST


def test_other_flags_or_a_rebound_name_leave_the_join_unknown() -> None:
    facts = probe(
        """
        def main(cache_latents, train_te, weight_dtype, load):
            vae = None
            if cache_latents:
                vae = load()
                vae.to("cpu", dtype=weight_dtype)
            if not train_te:
                vae = load()
                vae.to("cpu", dtype=weight_dtype)
            probe.at(vae)
            te = None
            if cache_latents:
                te = load()
                te.to("cpu", dtype=weight_dtype)
            te = None
            if not cache_latents:
                te = load()
                te.to("cpu", dtype=weight_dtype)
            probe.at(te)
        """
    )
    assert [f.kind for f in facts] == [Kind.OTHER, Kind.OTHER]


def test_a_tensor_none_on_another_path_is_the_tensor_where_tested_not_none() -> None:
    facts = probe(
        """
        class Net(nn.Module):
            def forward(self, x, n):
                if n > 0:
                    extra = x * 2
                else:
                    extra = None
                probe.at(extra)
                if extra is not None:
                    probe.at(extra)
                if extra is None:
                    pass
                else:
                    probe.at(extra)
        """
    )
    assert facts[0].kind is Kind.OTHER
    assert facts[1].prec is Prec.MODEL and facts[2].prec is Prec.MODEL


def test_shape_ops_give_a_zero_dim_table_value_dimensions() -> None:
    facts = probe(
        """
        def f(noise_scheduler, t):
            a = noise_scheduler.alphas_cumprod[t] ** 0.5
            probe.at(a); probe.at(a.flatten()); probe.at(a.reshape(-1, 1, 1, 1))
            probe.at(a.reshape(())); probe.at(a.view(torch.int32)); probe.at(a.unsqueeze(-1))
        """
    )
    assert [f.zero_dim for f in facts] == [True, False, False, True, True, False]
    assert all(f.cause is Cause.TABLE for f in facts[:3])


def test_a_trainers_model_holder_has_pipeline_models_only_for_diffusion_parts() -> None:
    facts = probe(
        """
        def f(model, sd):
            probe.at(model.vae); probe.at(sd.unet); probe.at(model.transformer)
        """
    )
    assert facts[0].kind is Kind.MODULE and facts[0].prec is Prec.HALF and facts[0].maybe
    assert facts[1].cause is Cause.MODEL_CAST
    assert facts[2].cause is not Cause.MODEL_CAST


def test_a_samplers_own_tables_history_and_solved_coefficients() -> None:
    facts = probe(
        """
        class TinyScheduler:
            def __init__(self):
                self.sigmas = None
                self.model_outputs = [None] * 2

            def step(self, sample):
                probe.at(self.sigmas)
                probe.at(self.model_outputs[-1])
                rks = [self.sigmas[0] / self.sigmas[1], 1.0]
                probe.at(torch.tensor(rks))
                probe.at(torch.linalg.solve(torch.eye(2), torch.tensor(rks)))
                probe.at(torch.tensor([i for i in range(3)]))
        """
    )
    table, history, vector, solved, ints = facts
    assert table.cause is Cause.TABLE and table.prec is Prec.FULL
    assert history.prec is Prec.MODEL
    assert vector.cause is Cause.FACTORY and vector.prec is Prec.FULL and not vector.zero_dim
    assert solved.cause is Cause.FACTORY and "linalg.solve" in (
        solved.origin.text if solved.origin else ""
    )
    assert ints.prec is Prec.UNKNOWN


def test_tables_outside_a_sampler_class_stay_as_bound() -> None:
    fact = one(
        """
        class Helper:
            def __init__(self):
                self.sigmas = None

            def run(self):
                probe.at(self.sigmas)
        """
    )
    assert fact.cause is not Cause.TABLE


def test_a_helper_handed_float32_as_dtype_is_walked_with_it() -> None:
    facts = probe(
        """
        class TinyPipeline(DiffusionPipeline):
            def prepare(self, image, dtype=None):
                probe.at(image)
                probe.at(image.to(dtype=dtype))

            def __call__(self, image):
                image = self.image_processor.preprocess(image).to("cpu", dtype=torch.float32)
                self.prepare(image, torch.float32)
        """
    )
    image, cast = facts[:2]
    assert image.prec is Prec.FULL and cast.prec is Prec.FULL and cast.cause is Cause.UPCAST


def test_a_helper_handed_the_models_dtype_keeps_its_plain_parameters() -> None:
    facts = probe(
        """
        class TinyPipeline(DiffusionPipeline):
            def prepare(self, image, dtype=None):
                probe.at(image.to(dtype=dtype))

            def __call__(self, image, prompt_embeds):
                self.prepare(image, prompt_embeds.dtype)
        """
    )
    assert facts[0].prec is not Prec.FULL


def test_a_tensor_found_apart_from_a_model_stays_apart_until_cast() -> None:
    facts = probe(
        """
        class TinyPipeline(DiffusionPipeline):
            def __call__(self, latents, callback_outputs):
                latents = self.unet(latents)
                if latents.dtype != self.vae.dtype:
                    if torch.backends.mps.is_available():
                        self.vae = self.vae.to(latents.dtype)
                latents = callback_outputs.pop("latents", latents) / 2
                probe.at(latents)
                if latents.dtype != self.vae.dtype:
                    latents = latents.to(self.vae.dtype)
                probe.at(latents)
        """
    )
    assert facts[0].apart is not None and facts[0].apart[0] == "self.vae"
    assert facts[1].apart is None


def test_diffusers_randn_tensor_is_a_factory_of_its_dtype() -> None:
    facts = probe(
        """
        from diffusers.utils.torch_utils import randn_tensor
        def f(shape, generator):
            probe.at(randn_tensor(shape, generator=generator, dtype=torch.float32))
            probe.at(randn_tensor(shape, generator=generator, dtype=torch.float16))
        """
    )
    assert facts[0].prec is Prec.FULL and facts[1].prec is Prec.HALF
