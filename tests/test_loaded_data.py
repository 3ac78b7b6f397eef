"""Loaded data, pipeline holders and samplers: what the engine reports, and the correct code
(and the correlated branches found on real training scripts) that it must leave alone.

Each guard below was a false alarm on the precision corpora (docs/real-world.md); each
positive case is the bug the guard must not hide.
"""

from __future__ import annotations

import textwrap

from mpcheck.diagnostics import Diagnostic
from tests.support import check

HEADER = "import torch\nfrom torch import nn\n"  # lines 1-2


def findings(body: str) -> list[Diagnostic]:
    return [d for d in check(HEADER + textwrap.dedent(body)) if d.code.startswith("MPC1")]


SCRIPT = """
def main(args, weight_dtype):
    vae = load_vae(args)
    vae.to("cuda", dtype=weight_dtype)
    for step, batch in enumerate(train_dataloader):
        {body}
"""


def script(body: str) -> list[Diagnostic]:
    return findings(SCRIPT.format(body=textwrap.indent(textwrap.dedent(body), " " * 8).strip()))


def test_a_batch_item_reaching_a_model_cast_by_a_statement_is_reported() -> None:
    (d,) = script('latents = vae.encode(batch["pixel_values"])')
    assert (d.code, d.start.row) == ("MPC102", 8)
    assert "float32 as loaded (a batch of `train_dataloader`" in d.message


def test_ids_labels_and_masks_are_integers_by_name() -> None:
    assert not script(
        """
        a = vae(batch["input_ids"])
        b = vae(batch["text_input_ids_2"])
        c = vae(batch["attention_mask"])
        d = vae(batch["labels"])
        """
    )


def test_an_item_replaced_after_loading_is_followed() -> None:
    body = """
        batch["pixel_values"] = batch["pixel_values"].to("cuda", dtype=weight_dtype)
        latents = vae.encode(batch["pixel_values"])
    """
    assert not script(body)


def test_data_cast_on_one_branch_goes_with_that_branch() -> None:
    """diffusers' SDXL scripts: the VAE is float32 exactly when the pixels stay float32."""
    body = """
        def train(args, weight_dtype):
            vae = load_vae(args)
            if args.pretrained_vae is None:
                vae.to("cuda", dtype=torch.float32)
            else:
                vae.to("cuda", dtype=weight_dtype)
            for batch in train_dataloader:
                if args.pretrained_vae is not None:
                    pixel_values = batch["pixel_values"].to(dtype=weight_dtype)
                else:
                    pixel_values = batch["pixel_values"]
                latents = vae.encode(pixel_values)
    """
    assert not findings(body)


def test_data_moved_by_another_tensor_takes_its_dtype() -> None:
    body = """
        def score(pipe, question_hidden_states, images):
            docs = pipe.feature_extractor(images, return_tensors="pt").pixel_values
            docs = docs.to(question_hidden_states)
            return pipe.unet(docs)
    """
    assert not findings(body)


def test_a_processor_output_into_a_depth_estimator_is_reported_not_into_clip() -> None:
    body = """
        def check(pipe, images):
            pixels = pipe.feature_extractor(images, return_tensors="pt").pixel_values
            a = pipe.safety_checker(clip_input=pixels)
            b = pipe.text_encoder(pixel_values=pixels)
            return pipe.depth_estimator(pixels)
    """
    (d,) = findings(body)
    assert d.start.row == 5 and "`pipe.depth_estimator`" in d.message


def test_model_is_no_pipeline_holder() -> None:
    """litgpt's tests: ``model.transformer`` is a GPT's trunk, not a pipeline's transformer."""
    body = """
        def test_lora():
            model = LoRAGPT(config)
            attn = model.transformer.h[0].attn.qkv
            return attn(torch.randn(2, 30, 8))
    """
    assert not findings(body)


def test_a_models_helper_method_is_no_forward_pass() -> None:
    body = """
        class GemmaPipeline(DiffusionPipeline):
            def __call__(self, n):
                return self.transformer.create_attention_mask(inputs_embeds=torch.empty(n, 0))
    """
    assert not findings(body)


def test_full_with_a_fill_of_unknown_type_is_not_float32() -> None:
    body = """
        class VQPipeline(DiffusionPipeline):
            def __call__(self, shape):
                mask_class = self.transformer.num_vector_embeds - 1
                latents = torch.full(shape, mask_class)
                return self.transformer(latents)
    """
    assert not findings(body)


SAMPLER = """
class TinyScheduler(SchedulerMixin):
    def __init__(self, sigmas):
        self.sigmas = torch.cat([torch.from_numpy(sigmas), torch.zeros(1)])

    def step(self, model_output, timestep, sample, eta=1.0):
        sigma = self.sigmas[self.step_index]
        beta = 0.1 + timestep * 0.5
        prev = sample - sigma * beta * model_output
        {noise}
        return (prev,)
"""


def test_a_samplers_noise_without_dtype_is_reported_at_the_factory() -> None:
    noise = "if eta > 0:\n            prev = prev + eta * torch.randn(sample.shape)"
    (d,) = findings(SAMPLER.format(noise=noise))
    assert d.code == "MPC102" and "the next sample from `step`" in d.message


def test_a_samplers_tables_indexed_by_a_number_and_a_continuous_time_do_not_promote() -> None:
    """Euler's ``self.sigmas[self.step_index]`` is one number; SDE-VP's ``t`` is a float."""
    noise = "prev = prev + eta * torch.randn(sample.shape, dtype=sample.dtype)"
    assert not findings(SAMPLER.format(noise=noise))


def test_a_one_path_mix_at_a_module_consumer_is_left_alone() -> None:
    """SAM's point embedding: the pad is concatenated on one path and its consumer casts."""
    body = """
        class PromptEncoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.shared_embedding = PositionalEmbedding()

            def forward(self, points, pad):
                if pad:
                    padding = torch.zeros(points.shape[0], 1, 2)
                    points = torch.cat([points, padding], dim=1)
                return self.shared_embedding(points)
    """
    assert not findings(body)


def test_a_method_a_base_class_calls_has_parameters_of_unknown_dtype() -> None:
    """transformers' modular files: Llama's ``forward`` calls ``self._norm(x.float())``."""
    overridden = """
        class DoryL2Norm(LlamaNormModule):  # a model class of another file
            def _norm(self, x):
                return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + self.eps)
    """
    called_here = """
        class TimestepNorm(nn.Module):
            def _norm(self, x):
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

            def forward(self, x):
                return self._norm(x)
    """
    for body, rows in ((overridden, []), (called_here, [6])):
        found = [d for d in check(HEADER + textwrap.dedent(body)) if d.code == "MPC302"]
        assert [d.start.row for d in found] == rows


def test_a_processor_output_cast_whole_holds_items_of_that_dtype() -> None:
    """transformers' ``BatchFeature.to(device, dtype)`` casts its floating tensors (ids stay
    int64): a float16 cast is quiet, a move alone or a float32 cast is not."""
    body = """
        from transformers import AutoModelForCausalLM, AutoProcessor

        def caption(image, device):
            torch_dtype = torch.float16
            model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch_dtype)
            processor = AutoProcessor.from_pretrained("m")
            moved = processor(images=image, return_tensors="pt").to(device)
            model.generate(input_ids=moved["input_ids"], pixel_values=moved["pixel_values"])
            cast = processor(images=image, return_tensors="pt").to(device, torch_dtype)
            model.generate(input_ids=cast["input_ids"], pixel_values=cast["pixel_values"])
            wide = processor(images=image, return_tensors="pt").to(device, dtype=torch.float32)
            model.generate(input_ids=wide["input_ids"], pixel_values=wide["pixel_values"])
    """
    found = findings(body)
    assert [(d.code, d.start.row) for d in found] == [("MPC102", 11), ("MPC101", 15)]
