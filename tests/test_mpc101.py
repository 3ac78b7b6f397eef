"""MPC101 upcast-reaches-half-op: exact positions, messages, related locations and fixes."""

from __future__ import annotations

import textwrap

import pytest

from mpcheck.diagnostics import Diagnostic
from mpcheck.output.fixes import apply_fixes
from tests.support import check, span

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3


def findings(body: str) -> list[Diagnostic]:
    return [d for d in check(HEADER + textwrap.dedent(body)) if d.code == "MPC101"]


def test_upcast_into_a_half_projection() -> None:
    body = """
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(8)
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                h = self.norm(x).float()
                return self.proj(h)
        """
    (d,) = findings(body)
    assert span(d) == (13, 16, 13, 28)
    assert d.message == (
        "`h` is float32 (upcast to float32 by `.float()` at line 12) but `self.proj` has the "
        "model's weights, half when the model runs in half precision; cast it back before "
        "this call"
        " (latent: raises if `Block` runs in half without autocast)"
    )
    (note,) = d.related
    assert (note.start.row, note.start.column, note.message) == (
        12,
        13,
        "`h` upcast to float32 by `.float()`",
    )
    assert d.fix is not None and d.fix.message == "Cast `h` to `self.proj.weight.dtype`"


SUBMODULE = """
    class SelfOutput(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dense = nn.Linear(dim, dim)

        def forward(self, hidden_states, input_tensor):
            return self.dense(hidden_states) + input_tensor


    class Attention(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.output = SelfOutput(dim)

        def forward(self, hidden_states):
            context = self.kernel(hidden_states.float())
            return self.output(context.float(), hidden_states)
    """


def test_an_upcast_argument_that_meets_a_half_layer_inside_the_called_module() -> None:
    (d,) = findings(SUBMODULE)
    assert span(d) == (21, 16, 21, 59)
    assert d.message == (
        "`context.float()` is float32 (upcast to float32 by `.float()` at line 21) and "
        "`self.output` hands it to `self.dense` at line 11, which runs in the model's dtype, "
        "half when the model runs in half precision; cast it back before this call"
        " (latent: raises if `Attention` runs in half without autocast)"
    )
    upcast, inside = d.related
    assert (upcast.start.row, upcast.start.column) == (21, 28)
    assert (inside.start.row, inside.message) == (
        11,
        "`self.dense` gets `context.float()` in float32 here",
    )
    assert d.fix is not None and d.fix.applicability == "unsafe"
    fixed, n = apply_fixes(HEADER + textwrap.dedent(SUBMODULE), [d], unsafe=True)
    assert n == 1
    assert (
        "return self.output(context.float().to(self.output.dense.weight.dtype), hidden_states)"
        in fixed
    )


def test_a_module_that_casts_its_argument_back_is_quiet() -> None:
    body = SUBMODULE.replace(
        "self.dense(hidden_states)", "self.dense(hidden_states.to(input_tensor.dtype))"
    )
    assert findings(body) == []


def test_diffusers_timesteps_output_into_a_timestep_embedding() -> None:
    body = """
        from diffusers.models.embeddings import TimestepEmbedding, Timesteps

        class UNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.time_proj = Timesteps(32, True, 0)
                self.class_embedding = TimestepEmbedding(32, 128)

            def forward(self, sample, class_labels):
                class_labels = self.time_proj(class_labels)
                ok = self.class_embedding(class_labels.to(sample.dtype))
                return ok + self.class_embedding(class_labels)
        """
    (d,) = findings(body)
    assert span(d) == (16, 21, 16, 55)
    assert d.message.startswith(
        "`class_labels` is float32 (returned in float32 by `self.time_proj`, a diffusers "
        "`Timesteps`, at line 14) but `self.class_embedding` has the model's weights"
    )
    assert d.fix is None  # a TimestepEmbedding has no `.weight` of its own


def test_an_einsum_without_contraction_promotes_and_is_quiet() -> None:
    """``"d,bthw->dbthw"`` is a broadcast product (measured: it returns float32, no error)."""
    body = """
        class Rotary(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("freqs", torch.ones(4), persistent=False)

            def forward(self, pos, x):
                outer = torch.einsum("d,bthw->dbthw", self.freqs, pos.float())
                inner = torch.einsum("bij,bjk->bik", x, pos.float())
                return outer, inner
        """
    (d,) = findings(body)
    assert span(d) == (12, 17, 12, 61)


def test_addmm_with_an_out_dtype_takes_a_float32_bias() -> None:
    """DeepSpeed: ``torch.addmm(bias.float(), a, b, out_dtype=torch.float32)`` is by design."""
    body = """
        class Head(nn.Module):
            def forward(self, x, w, bias):
                wide = torch.addmm(bias.float(), x, w, out_dtype=torch.float32)
                return wide + torch.addmm(bias.float(), x, w)
        """
    (d,) = findings(body)
    assert d.start.row == 8


def test_an_integer_tensor_made_float_is_converted_not_upcast() -> None:
    body = """
        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear_t = nn.Linear(1, 8)

            def forward(self, x, timesteps):
                return x + self.linear_t(timesteps[:, None].float())
        """
    (d,) = findings(body)
    assert d.message.startswith(
        "`timesteps[:, None].float()` is float32 (converted to float32 by `.float()` at line 11)"
    )


@pytest.mark.parametrize("decorator", ["@staticmethod", ""])
def test_a_staticmethod_called_on_self_binds_every_argument(decorator: str) -> None:
    """``self._rotate(w, h)`` of a ``@staticmethod _rotate(w, h)``: ``w`` is the first
    argument (no ``self`` to skip); named ``w``, the upcast one is reported, not ``h``."""
    first = "w, h" if decorator else "self, w, h"
    body = f"""
        class Experts(nn.Module):
            {decorator}
            def _rotate({first}):
                return w @ h

            def forward(self, q, h):
                w = q.float()
                return self._rotate(w, h)
        """
    (d,) = findings(body)
    assert d.start.row == 8 and d.message.startswith("`w` is float32"), d.message


@pytest.mark.parametrize(
    ("returned", "reported"),
    [
        ('torch.autocast("cpu", dtype=torch.bfloat16)', False),
        ('torch.autocast("cpu", dtype=torch.bfloat16) if on else contextlib.nullcontext()', False),
        ('contextlib.nullcontext() if on else torch.autocast("cuda")', False),
        ("contextlib.nullcontext()", True),
        ("helper_context(on)", True),  # a helper's helper is not followed
    ],
)
def test_a_helper_that_returns_an_autocast_context_opens_its_region(
    returned: str, reported: bool
) -> None:
    """``with amp_context(on):`` of a function of the file that only returns a context: the
    autocast it returns, possibly on (a condition chooses it), or none."""
    body = f"""
        import contextlib

        def amp_context(on=True):
            return {returned}

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x):
                with amp_context():
                    return self.proj(x.float())
        """
    assert [d.start.row for d in findings(body)] == ([17] if reported else [])


@pytest.mark.parametrize("method", ["patchify", "unpatchify", "pack_latents", "forward"])
def test_a_models_rearranging_helper_is_no_pass_over_its_weights(method: str) -> None:
    """``transformer.patchify(latents)`` reshapes its input; ``transformer.forward`` runs it."""
    body = f"""
        from diffusers import HiDreamImageTransformer2DModel

        def step(latents):
            transformer = HiDreamImageTransformer2DModel.from_pretrained(
                "m", torch_dtype=torch.bfloat16
            )
            return transformer.{method}(latents.float())
        """
    assert len(findings(body)) == (method == "forward")


@pytest.mark.parametrize(
    ("table", "reported"),
    [
        ('{"bf16": torch.autocast("cpu", dtype=torch.bfloat16), "fp32": nullcontext()}', False),
        ('{"bf16": torch.autocast("cpu"), "fp16": torch.autocast("cuda")}', False),
        ('{"bf16": torch.autocast("cpu"), "off": torch.autocast("cpu", enabled=False)}', True),
        ('{"fp32": nullcontext()}', True),
        ('{"bf16": torch.autocast("cpu"), **more}', True),
    ],
)
def test_a_context_picked_from_a_table_opens_its_autocast(table: str, reported: bool) -> None:
    """``ctx = {...}[precision]``, ``with ctx:``: the region of whichever autocast the key
    picks (one of several dtypes: a region in a dtype not known), a float32 run where it
    picks ``nullcontext()``; a region turning autocast off covers nothing."""
    body = f"""
        from contextlib import nullcontext

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x, precision):
                ctx = {table}[precision]
                with ctx:
                    return self.proj(x.float())
        """
    assert [d.start.row for d in findings(body)] == ([15] if reported else [])


@pytest.mark.parametrize(
    ("entered", "reported"),
    [
        ("self.ctx", False),  # bound once in ``__init__``
        ("CTX", False),  # bound once at the module's top level
        ("ctx", True),  # a parameter of the function: its callers decide
        ("self.other", True),  # bound to no context
    ],
)
def test_a_context_held_by_the_class_or_module_opens_its_autocast(
    entered: str, reported: bool
) -> None:
    """``with self.ctx:`` of a context its class binds once, ``with CTX:`` of one the
    module binds once (a function that neither binds nor takes the name reads it there)."""
    body = f"""
        from contextlib import nullcontext

        CTX = torch.autocast("cpu", dtype=torch.bfloat16)

        class Block(nn.Module):
            def __init__(self, amp=True):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.other = nn.Identity()
                self.ctx = torch.autocast("cpu", dtype=torch.bfloat16) if amp else nullcontext()

            def forward(self, x, ctx=None):
                with {entered}:
                    return self.proj(x.float())
        """
    assert [d.start.row for d in findings(body)] == ([18] if reported else [])
