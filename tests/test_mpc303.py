"""MPC303 half-positions: phases and timesteps computed in half are reported, with the
premise when half is not proven; phases in float32 and timesteps kept float32 are not."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpcheck.cli import main
from tests.support import check, project_findings

ROTARY = """
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, position_ids):
        inv_freq = self.inv_freq[:, None].float()
        pos = position_ids[None, :].float()
{body}
"""


def _found(source: str) -> list[tuple[int, str]]:
    return [(d.start.row, d.severity.name) for d in check(source) if d.code == "MPC303"]


def test_phase_product_reported_with_the_autocast_premise() -> None:
    source = ROTARY.format(body="        return inv_freq @ pos")
    assert _found(source) == [(14, "WARNING")]
    message = next(d.message for d in check(source) if d.code == "MPC303")
    assert message.startswith("if this runs under autocast")


def test_phase_product_under_autocast_disabled_is_quiet() -> None:
    body = (
        '        with torch.autocast("cuda", enabled=False):\n'
        "            freqs = inv_freq @ pos\n"
        "        return freqs.cos()"
    )
    assert _found(ROTARY.format(body=body)) == []


def test_phase_product_inside_an_active_autocast_is_an_error() -> None:
    body = (
        '        with torch.autocast("cuda", dtype=torch.bfloat16):\n'
        "            freqs = inv_freq @ pos\n"
        "        return freqs.cos()"
    )
    assert _found(ROTARY.format(body=body)) == [(15, "ERROR")]


def test_buffer_cast_with_the_model_is_named_in_the_premise() -> None:
    body = (
        "        t = position_ids.type_as(self.inv_freq)\n"
        "        return torch.outer(t, self.inv_freq)"
    )
    found = [d for d in check(ROTARY.format(body=body)) if d.code == "MPC303"]
    assert [(d.start.row, d.severity.name) for d in found] == [(15, "WARNING")]
    assert "cast every floating buffer" in found[0].message


def test_products_of_other_tensors_are_quiet() -> None:
    assert _found(ROTARY.format(body="        return inv_freq @ self.inv_freq.T")) == []
    assert _found(ROTARY.format(body="        return pos @ pos.T")) == []


SAMPLER = """
import torch


def sample(transformer, scheduler, latents, dtype):
    for i, t in enumerate(scheduler.timesteps):
        timestep = t.expand(latents.shape[0]).to({target})
        latents = transformer(latents, timestep=timestep)
    return latents
"""


def test_timestep_cast_to_the_latents_dtype_is_a_warning() -> None:
    assert _found(SAMPLER.format(target="latents.dtype")) == [(7, "WARNING")]
    assert _found(SAMPLER.format(target="dtype")) == [(7, "WARNING")]


def test_timestep_cast_to_half_is_an_error() -> None:
    assert _found(SAMPLER.format(target="torch.bfloat16")) == [(7, "ERROR")]


def test_timestep_kept_float32_or_integer_is_quiet() -> None:
    for target in ("torch.float32", "dtype=torch.float32", "torch.long", "latents.device"):
        assert _found(SAMPLER.format(target=target)) == [], target


def test_positions_matched_to_the_frequencies_are_not_a_timestep() -> None:
    body = (
        '        with torch.autocast("cuda", enabled=False):\n'
        "            t = position_ids.type(inv_freq.dtype)\n"
        '            return torch.einsum("i,j->ij", t, inv_freq)'
    )
    assert _found(ROTARY.format(body=body)) == []


def test_cli_reports_the_timestep_cast(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sampler.py"
    path.write_text(SAMPLER.format(target="latents.dtype"))
    code = main(
        ["check", "--select", "MPC303", "--no-cache", "--output-format", "concise", str(path)]
    )
    assert code == 1
    assert f"{path}:7:20: MPC303" in capsys.readouterr().out


def test_timesteps_of_a_batch_cast_to_the_weight_dtype() -> None:
    source = (
        "import torch\n\n\n"
        "def step(prepared_batch, weight_dtype):\n"
        '    t = prepared_batch["timesteps"].to(device="cuda", dtype=weight_dtype) / 1000.0\n'
        "    return t\n"
    )
    assert _found(source) == [(5, "WARNING")]
    assert _found(source.replace("dtype=weight_dtype", "dtype=torch.float32")) == []


def test_frequencies_cast_to_the_activations_dtype() -> None:
    source = (
        "import torch\n\n\n"
        "def rotate(freqs, q: torch.Tensor):\n"
        "    q = q.half()\n"
        "    freqs = freqs.type_as(q)\n"
        "    return q * freqs.cos()\n"
    )
    assert _found(source) == [(6, "ERROR")]
    assert _found(source.replace("freqs.type_as(q)", "freqs.float()")) == []
    assert _found(source.replace("freqs", "freqs_cis")) == []


def test_a_short_name_is_a_timestep_only_when_bound_to_one() -> None:
    source = (
        "import torch\n\n\n"
        "def sample(vae, transformer, images, timesteps, latents):\n"
        "    encoded = [vae.encode(t.to(vae.dtype)) for t in images]\n"
        "    for i, t in enumerate(timesteps):\n"
        "        latents = transformer(latents, t.expand(2).to(latents.dtype))\n"
        "    return encoded, latents\n"
    )
    assert [row for row, _ in _found(source)] == [7]


def test_a_short_name_bound_from_a_value_named_for_timesteps_is_one() -> None:
    """``t = timestep_start / 1000.0`` binds a timestep, as a loop over timesteps does; an
    image handed in as ``t`` still does not make the loop's ``t`` one."""
    source = (
        "import torch\n\n\n"
        "def sample(transformer, timesteps, latents, dit_dtype):\n"
        "    timestep_start = timesteps[0]\n"
        "    t = timestep_start / 1000.0\n"
        "    for i, t in enumerate(timesteps):\n"
        "        latents = transformer(latents, t.repeat(2).to(dtype=dit_dtype))\n"
        "    return latents\n"
    )
    assert [row for row, _ in _found(source)] == [8]
    image = source.replace("t = timestep_start / 1000.0", "t = latents[0]")
    assert _found(image) == []


def test_a_cast_stored_under_a_timestep_key_is_a_timestep() -> None:
    """Where the value goes names it: ``inp["timesteps"] = t.to(dtype)`` for ``model(**inp)``,
    a ``timestep=`` keyword; the same cast stored under another key is no timestep."""
    source = (
        "import torch\n\n\n"
        "def step(model, x, bs, dtype):\n"
        "    t = torch.sigmoid(torch.randn(bs))\n"
        "    inp = {}\n"
        '    inp["timesteps"] = t.to(dtype)\n'
        "    return model(x, **inp)\n"
    )
    assert [row for row, _ in _found(source)] == [7]
    assert _found(source.replace('"timesteps"', '"weights"')) == []
    keyword = source.replace('inp["timesteps"] = t.to(dtype)', "inp = dict(timestep=t.to(dtype))")
    assert [row for row, _ in _found(keyword)] == [7]


def test_the_sinusoidal_output_cast_to_the_mlp_dtype_is_quiet() -> None:
    source = (
        "import torch\n\n\n"
        "def embed(mlp, t, timestep_embedding):\n"
        "    t_freq = timestep_embedding(t, 256)\n"
        "    return mlp(t_freq.to(mlp[0].weight.dtype))\n"
    )
    assert _found(source) == []


def test_numpy_products_are_quiet() -> None:
    source = (
        "import numpy as np\nimport torch\n\n\n"
        "def table(pos, omega):\n"
        '    return np.einsum("m,d->md", pos, omega)\n'
    )
    assert _found(source) == []
    assert _found(source.replace("np.einsum", "torch.einsum")) == [(6, "WARNING")]


@pytest.mark.parametrize(
    "held",
    [
        'torch.autocast("cuda", enabled=False)',
        'torch.autocast("cuda", enabled=False) if pos.is_cuda else nullcontext()',
    ],
)
def test_a_disabled_region_held_in_a_variable_is_quiet(held: str) -> None:
    """``ctx = torch.autocast(..., enabled=False)``; ``with ctx:`` is the same region as the
    ``with`` written out (musubi-tuner's Ideogram4 MRoPE); against ``nullcontext()`` it is
    off wherever there is an autocast to turn off."""
    body = f"        ctx = {held}\n        with ctx:\n            return inv_freq @ pos"
    source = "from contextlib import nullcontext\n" + ROTARY.format(body=body)
    assert _found(source) == []
    on = source.replace("enabled=False", "dtype=torch.bfloat16")
    assert [severity for _, severity in _found(on)] == ["ERROR"]  # a half region, held


def test_frequencies_built_in_the_activations_dtype_are_named() -> None:
    """``torch.arange(half, dtype=x.dtype)``: the frequencies are rounded before any product
    (measured: 0.6-1.4 rad off at position 1000 in bfloat16), not a buffer a cast reaches."""
    source = (
        "import torch\nfrom torch import nn\n\n\n"
        "class Embedder(nn.Module):\n"
        "    def forward(self, x, timesteps):\n"
        "        freqs = torch.exp(-9.2 * torch.arange(8, dtype=x.dtype) / 8)\n"
        "        return timesteps[:, None].float() * freqs[None]\n"
    )
    (message,) = [d.message for d in check(source) if d.code == "MPC303"]
    assert message.startswith("frequencies `freqs[None]` are made in another tensor's dtype")
    assert "even when the product runs in float32" in message


ROPE = """
import torch


def rope(pos, dim, theta):
    scale = torch.arange(0, dim, 2, dtype={dtype}, device=pos.device) / dim
    omega = 1.0 / (theta**scale)
    out = torch.einsum("...n,d->...nd", {pos}, omega)
    return out.float()
"""


@pytest.mark.parametrize("pos", ["pos", "pos.float()", "pos.double()"])
def test_float64_frequencies_are_never_cast_by_autocast(pos: str) -> None:
    # autocast's cached_cast skips float64: the product promotes to float64 (Flux's rope)
    assert _found(ROPE.format(dtype="torch.float64", pos=pos)) == []


def test_float32_frequencies_keep_the_autocast_premise() -> None:
    assert _found(ROPE.format(dtype="torch.float32", pos="pos")) == [(8, "WARNING")]


def test_float64_positions_with_float32_frequencies_are_still_reported() -> None:
    # CUDA autocast rounds the float32 frequencies before the float64 positions meet them
    assert _found(ROPE.format(dtype="torch.float32", pos="pos.double()")) == [(8, "WARNING")]


def test_half_positions_against_float64_frequencies_are_still_reported() -> None:
    source = ROPE.format(dtype="torch.float64", pos="pos.to(torch.bfloat16)")
    assert _found(source) == [(8, "ERROR")]


LOOP = """
import torch


def step(transformer, scheduler, latents, noise):
    for t in scheduler.timesteps:
        timestep = t.expand(latents.shape[0]).to(latents.dtype)
{body}
"""


@pytest.mark.parametrize(
    "body",
    [
        "        latents = transformer(latents, timestep=timestep / 1000)",
        "        yield timestep",
        "        latents = transformer(latents, timestep=(1 - timestep).view(-1))",
        "        scaled = timestep * 1000\n        latents = transformer(latents, scaled)",
    ],
)
def test_a_timestep_that_reaches_a_call_is_reported(body: str) -> None:
    assert _found(LOOP.format(body=body)) == [(7, "WARNING")]


@pytest.mark.parametrize(
    "body",
    [
        "        latents = latents + noise * timestep[:, None]",
        "        sigma = (1.0 - timestep).unsqueeze(-1)\n        latents = sigma * latents",
        "        w = 1.0 / torch.clamp(timestep, min=0.1) ** 2\n        print((noise * w).mean())",
        "        if timestep.ndim == 0:\n            latents = latents * torch.rand_like(timestep)",
    ],
)
def test_a_timestep_only_mixed_with_other_tensors_is_quiet(body: str) -> None:
    # a noise scaling or a loss weighting: no timestep projection sees the rounded timestep
    assert _found(LOOP.format(body=body)) == []


def test_a_helper_of_one_tensor_named_t_is_no_timestep() -> None:
    # ``def conv_fp16(t): return t.half()`` converts checkpoint tensors
    source = "import torch\n\n\ndef conv_fp16(t):\n    return t.half()\n"
    assert _found(source) == []
    # (bfloat16: an integer timestep of 0..1000 is exact in float16, not in bfloat16)
    timed = "import torch\n\n\ndef embed(x, t):\n    return x, t.bfloat16()\n"
    assert _found(timed) == [(5, "ERROR")]


SHORT = """
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim, max_len={n}):
        super().__init__()
        self.max_len = max_len
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self):
        t = {positions}
        return torch.einsum("i,j->ij", t, self.inv_freq)


def main():
    return Rotary(64).to(torch.bfloat16)()
"""


@pytest.mark.parametrize(
    ("n", "positions", "rows"),
    [
        (128, "torch.arange(self.max_len).type_as(self.inv_freq)", []),  # a phase each
        (256, "torch.arange(self.max_len).type_as(self.inv_freq)", [14]),  # bfloat16 shares
        (128, "(torch.arange(self.max_len) / 4).type_as(self.inv_freq)", [14]),  # 1/4 apart
        (128, "torch.linspace(0, 1, self.max_len).type_as(self.inv_freq)", [14]),
    ],
)
def test_positions_few_enough_to_keep_a_phase_each_are_not_reported(
    n: int, positions: str, rows: list[int]
) -> None:
    found = _found(SHORT.format(n=n, positions=positions))
    assert [row for row, _ in found] == rows


def test_phases_computed_in_init_get_no_autocast_premise() -> None:
    source = ROTARY.format(body="        return inv_freq @ pos").replace(
        "    def forward(self, position_ids):", "    def table(self, position_ids):"
    )
    built = """
import torch
from torch import nn


class Rotary3D(nn.Module):
    def __init__(self, dim, frames, height):
        super().__init__()
        freqs = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        grid = torch.arange(frames * height, dtype=torch.float32)
        self.register_buffer("table", torch.einsum("..., f -> ... f", grid, freqs).cos())

    def forward(self, x):
        return x * self.table


def train(x, frames, height):
    model = Rotary3D(64, frames, height)
    with torch.autocast("cuda"):
        return model(x)
"""
    assert _found(source) == [(14, "WARNING")]  # a method: the autocast premise
    assert _found(built) == []  # built once, before any step opens autocast
    method = built.replace("def __init__(", "def build(")  # the same product in a method
    assert _found(method) == [(11, "WARNING")]


EMBEDDER = """
import torch
from torch import nn


def features(t):
    return t * 2


class Features(nn.Module):
    def forward(self, t):
        return torch.cat([torch.cos(t[:, None]), torch.sin(t[:, None])], dim=-1)


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.timesteps_proj = Features()
        self.linear = nn.Linear(4, 4)

    def forward(self, timestep, hidden):
        timestep = {rebound}
        timestep = timestep.to(hidden.dtype)
        return self.linear(timestep)
"""


def test_a_timestep_rebound_to_a_modules_output_is_no_timestep() -> None:
    """The engine (``timestep_cast``) asks the fact of the call reaching the cast: a module's
    output is its features; a plain function's result of the timestep may be the timestep."""
    assert _found(EMBEDDER.format(rebound="self.timesteps_proj(timestep)")) == []
    assert _found(EMBEDDER.format(rebound="features(timestep)")) == [(23, "WARNING")]


INTEGER_TIMESTEPS = """\
import torch


def step(model, latents, sched, n: int = {n}):
    timesteps = torch.randint(0, {high}, (4,), dtype=torch.long)
    return model(latents, timesteps.{cast}())
"""


@pytest.mark.parametrize(
    ("n", "high", "cast", "found"),
    [
        (1000, "n", "half", []),  # integers below 2048: exact in float16
        (1000, "1000", "half", []),
        (4000, "n", "half", [(6, "ERROR")]),  # improved DDPM's 4000 steps: rounded
        (1000, "sched.config.num_train_timesteps", "half", []),  # the rule's 0..1000
        (1000, "n", "bfloat16", [(6, "ERROR")]),  # bfloat16: exact only up to 256
    ],
)
def test_an_integer_timestep_is_exact_in_float16_below_2048_only(
    n: int, high: str, cast: str, found: list[tuple[int, str]]
) -> None:
    assert _found(INTEGER_TIMESTEPS.format(n=n, high=high, cast=cast)) == found


def test_an_integer_timestep_cast_to_a_models_dtype_is_reported() -> None:
    # (a module's dtype is bfloat16 wherever its user loads it so: only a written float16
    # is known to hold the integer exactly)
    source = INTEGER_TIMESTEPS.replace("timesteps.{cast}()", "timesteps.to(model.dtype)")
    assert _found(source.format(n=1000, high="n")) != []
    written = INTEGER_TIMESTEPS.replace("timesteps.{cast}()", "timesteps.to(torch.float16)")
    assert _found(written.format(n=1000, high="n")) == []


DENOISER = """\
import torch
from torch import nn


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.time_proj = nn.Linear(1, 8)

    def forward(self, x, t):
        t = t.to(x.dtype)
        return x + self.time_proj(t[:, None])
"""


@pytest.mark.parametrize(
    ("casts", "found", "target"),
    [
        # every half path writes float16 down: the model's dtype is float16 where it is half
        (["model = Denoiser().half()"], set(), "x.dtype"),
        (["model = Denoiser().to(torch.float16)", "x = x.to(model.dtype)"], set(), "x.dtype"),
        # bfloat16 on some path, or a dtype the run picks: rounded above 256
        (["model = Denoiser().half()", "other = Denoiser().to(torch.bfloat16)"], {11}, "x.dtype"),
        (["model = Denoiser().to(args.dtype)"], {11}, "x.dtype"),
        # an autocast region may lower the activations (``x.dtype``) to bfloat16
        (
            [
                "model = Denoiser().half()",
                "with torch.autocast('cuda', dtype=torch.bfloat16): pass",
            ],
            {11},
            "x.dtype",
        ),
        # the weights' own dtype is float16 whatever autocast does
        (
            [
                "model = Denoiser().half()",
                "with torch.autocast('cuda', dtype=torch.bfloat16): pass",
            ],
            set(),
            "self.time_proj.bias.dtype",
        ),
    ],
)
def test_an_integer_timestep_cast_to_a_float16_only_models_dtype_is_exact(
    tmp_path: Path, casts: list[str], found: set[int], target: str
) -> None:
    """``t.to(x.dtype)`` in a class the project only ever casts to float16: its dtype is
    float16 wherever it is half, so an integer timestep (below 2048) is exact. Reading
    ``model.dtype`` in the script hands on a dtype, not the model."""
    script = "\n".join(
        [
            "import torch",
            "from denoiser import Denoiser",
            "x = torch.randn(4, 8)",
            *casts,
            "model(x, torch.randint(0, 1000, (4,)))",
        ]
    )
    files = {"denoiser.py": DENOISER.replace("x.dtype", target), "run.py": script + "\n"}
    rows = {row for name, row, _ in project_findings(tmp_path, files, ("MPC303",))}
    assert rows == found


TIME_EMBEDDER = """
import torch
from torch import nn


class TimeEmbedder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(1, 8)

    def forward(self, t, x):
        return self.proj(t[:, None].to(x.dtype))
{build}
"""


def test_a_timestep_cast_to_the_models_dtype_says_why_that_is_half() -> None:
    # the cast target follows the model's dtype: the message names the cast that makes the
    # model half, or the premise when nothing shows one (a module checked alone)
    def message(build: str) -> str:
        found = [d for d in check(TIME_EMBEDDER.format(build=build)) if d.code == "MPC303"]
        assert [(d.start.row, d.severity.name) for d in found] == [(12, "WARNING")]
        return found[0].message

    assert message("").endswith("keep it float32 (latent: if `TimeEmbedder` is cast to half)")
    cast = message("\nmodel = TimeEmbedder().to(torch.bfloat16)\n")
    assert "(half: `TimeEmbedder` is cast to half by `TimeEmbedder().to(torch.bfloat16)`" in cast
