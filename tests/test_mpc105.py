"""MPC105 mixed-dtype-write: exact positions, messages, fixes, and the writes torch casts."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from mpcheck.diagnostics import Diagnostic
from mpcheck.output.fixes import apply_fixes
from tests.support import check, span

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3

HALF = "has the model's dtype, half when the model runs in half precision"


def source(body: str) -> str:
    return HEADER + textwrap.dedent(body)


def findings(body: str) -> list[Diagnostic]:
    return [d for d in check(source(body)) if d.code == "MPC105"]


def fixed_line(body: str, d: Diagnostic) -> str:
    """The finding's first line after applying its (safe) fix."""
    out, applied = apply_fixes(source(body), [d], unsafe=False)
    assert applied == 1
    cst.parse_module(out)
    return out.splitlines()[d.start.row - 1].strip()


CACHE = """
class KVCache(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.register_buffer("keys", torch.zeros(n, d), persistent=False)

    def update(self, k, cache_position):
        {write}
"""


def cache_findings(write: str) -> list[Diagnostic]:
    return findings(CACHE.format(write=write))


def test_index_copy_into_a_buffer_names_the_buffer_and_fixes_the_source() -> None:
    body = CACHE.format(write="self.keys.index_copy_(0, cache_position, k.float())")
    (d,) = findings(body)
    assert span(d) == (11, 9, 11, 60)
    assert d.message == (
        "`k.float()` is float32 but `self.keys` (a buffer of the model at line 8) " + HALF + ": "
        "`index_copy_` does not cast its `source` argument, and autocast never touches "
        "in-place ops; cast it to `self.keys.dtype`"
        " (latent: raises if `KVCache` runs in half without autocast)"
    )
    (note,) = d.related
    assert (note.start.row, note.start.column, note.message) == (
        8,
        9,
        "`self.keys` is a buffer of the model",
    )
    assert d.fix is not None and d.fix.applicability == "safe"
    assert d.fix.message == "Cast `k.float()` to `self.keys.dtype`"
    assert fixed_line(body, d) == "self.keys.index_copy_(0, cache_position, k.to(self.keys.dtype))"


def test_advanced_index_assignment_is_index_put() -> None:
    body = CACHE.format(write="self.keys[cache_position] = k.float()")
    (d,) = findings(body)
    assert span(d) == (11, 9, 11, 46)
    assert d.message == (
        "`k.float()` is float32 but `self.keys` (a buffer of the model at line 8) " + HALF + ": "
        "assigning through the advanced index `cache_position` runs `index_put_`, which does "
        "not cast the value, with or without autocast; cast it to `self.keys.dtype`"
        " (latent: raises if `KVCache` runs in half without autocast)"
    )
    assert fixed_line(body, d) == "self.keys[cache_position] = k.to(self.keys.dtype)"


def test_list_and_mask_indices_are_advanced_too() -> None:
    (listed,) = cache_findings("self.keys[[0, 2]] = torch.ones(2, 4)")
    assert span(listed) == (11, 9, 11, 45)
    assert "advanced index `[0, 2]`" in listed.message
    assert listed.message.startswith(
        "`torch.ones(2, 4)` is float32 but `self.keys` (a buffer of the model at line 8)"
    )
    (masked,) = cache_findings("self.keys[self.keys.isnan()] = torch.zeros(3)")
    assert span(masked) == (11, 9, 11, 54)
    assert "advanced index `self.keys.isnan()`" in masked.message


@pytest.mark.parametrize(
    "write",
    [
        "self.keys[0:2] = k.float()",  # slice assignment copies with a cast
        "self.keys[:, 1] = k.float()[:, 0]",  # ints and slices: basic indexing
        "self.keys[cache_position] += k.float()",  # read, add_ (casts), write back
        "self.keys.copy_(k.float())",
        "self.keys.add_(k.float())",
        "self.keys.mul_(0.5).add_(k.float(), alpha=0.5)",
        "self.keys += k.float()",
        "self.keys.index_copy_(0, cache_position, k.float().to(self.keys.dtype))",
        "self.keys.index_copy_(0, cache_position, k.float().type_as(self.keys))",
        "self.keys[cache_position] = k",  # the model's dtype on both sides
        "self.keys[cache_position] = 0.0",  # a Python scalar is cast
        "self.keys.index_fill_(0, cache_position, -1.0)",
        "self.keys.scatter_(0, cache_position[:, None], value=1.0)",
        "self.keys[self.keys.isnan()] = torch.tensor(0.0)",  # one element via a mask: masked_fill_
        "self.keys.lerp_(k, torch.tensor(0.1))",  # a 0-dim weight is used as a scalar
    ],
)
def test_writes_that_cast_are_silent(write: str) -> None:
    assert cache_findings(write) == []


def test_zero_dim_source_through_an_integer_index_raises() -> None:
    (d,) = cache_findings("self.keys[cache_position] = torch.tensor(0.0)")
    assert span(d) == (11, 9, 11, 54)
    assert d.message.startswith("`torch.tensor(0.0)` is float32 but `self.keys`")


def test_lerp_checks_end_and_a_full_size_weight() -> None:
    (end,) = cache_findings("self.keys.lerp_(k.float(), 0.1)")
    assert span(end) == (11, 9, 11, 40)
    assert "`lerp_` does not cast its `end` argument, and autocast never touches" in end.message
    (weight,) = cache_findings("self.keys.lerp_(k, torch.full((4,), 0.1))")
    assert span(weight) == (11, 9, 11, 50)
    assert weight.message.startswith("`torch.full((4,), 0.1)` is float32 but `self.keys`")
    assert "`lerp_` does not cast its `weight` argument" in weight.message


def test_masked_scatter_names_the_upcast_in_a_helper_method() -> None:
    (d,) = findings(
        """
        class Llava(nn.Module):
            def get_image_features(self, pixel_values):
                feats = self.vision_tower(pixel_values)
                return F.interpolate(feats.float(), size=(3, 3), mode="bicubic").flatten(2)

            def forward(self, input_ids, pixel_values):
                inputs_embeds = self.embed_tokens(input_ids)
                image_features = self.get_image_features(pixel_values)
                mask = (input_ids == 7).unsqueeze(-1).expand_as(inputs_embeds)
                return inputs_embeds.masked_scatter(mask, image_features)
        """
    )
    assert span(d) == (14, 16, 14, 66)
    assert d.message == (
        "`image_features` is float32 (upcast to float32 by `.float()` at line 8) but "
        "`inputs_embeds` " + HALF + ": `masked_scatter` does not cast its `source` argument, "
        "even under autocast; cast it to `inputs_embeds.dtype`"
        " (latent: raises if `Llava` runs in half without autocast)"
    )
    (note,) = d.related
    assert (note.start.row, note.start.column) == (8, 30)
    assert note.message == "`image_features` upcast to float32 by `.float()`"


def test_moe_index_add_of_float32_routing_weights() -> None:
    body = """
        class MoE(nn.Module):
            def forward(self, hidden_states, top_x, idx):
                routing_weights = F.softmax(self.gate(hidden_states), dim=1, dtype=torch.float)
                final = torch.zeros_like(hidden_states)
                current = self.expert(hidden_states[top_x]) * routing_weights[top_x, idx, None]
                final.index_add_(0, top_x, current)
                return final
        """
    (d,) = findings(body)
    assert span(d) == (10, 9, 10, 44)
    assert d.message == (
        "`current` is float32 (made float32 by `dtype=torch.float` at line 7) but `final` "
        + HALF
        + ": `index_add_` does not cast its `source` argument, and autocast never touches "
        "in-place ops; cast it to `final.dtype`"
        " (latent: raises if `MoE` runs in half without autocast)"
    )
    assert fixed_line(body, d) == "final.index_add_(0, top_x, current.to(final.dtype))"


def test_explicit_half_destination_says_which_half() -> None:
    (d,) = findings(
        """
        def scatter_counts(labels):
            counts = torch.zeros(10, dtype=torch.float16)
            counts.scatter_add_(0, labels, torch.ones(labels.shape[0]))
            return counts
        """
    )
    assert span(d) == (7, 5, 7, 64)
    assert d.message == (
        "`torch.ones(labels.shape[0])` is float32 but `counts` (cast to float16 by "
        "`torch.float16` at line 6) is float16: `scatter_add_` does not cast its `src` argument, "
        "and autocast never touches in-place ops; cast it to `counts.dtype`"
    )
    (note,) = d.related
    assert (note.start.row, note.start.column) == (6, 14)
    assert note.message == "`counts` cast to float16 by `torch.float16`"


def test_torch_function_spelling_and_keyword_sources() -> None:
    found = findings(
        """
        class Block(nn.Module):
            def forward(self, x, index):
                a = torch.index_add(x, 0, index, torch.ones(2, 4))
                b = x.index_put_((index,), values=x.double())
                c = torch.lerp(x, end=x.float(), weight=0.5)
                return a, b, c
        """
    )
    assert [(span(d)[:2], d.message.split(" is ")[0]) for d in found] == [
        ((7, 13), "`torch.ones(2, 4)`"),
        ((8, 13), "`x.double()`"),
        ((9, 13), "`x.float()`"),
    ]
    assert found[1].message.startswith("`x.double()` is float64 but `x`")


def test_in_place_writes_raise_under_autocast_too() -> None:
    (d,) = findings(
        """
        class Block(nn.Module):
            def forward(self, x, index):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    x.index_copy_(0, index, torch.zeros(2, 4))
                return x
        """
    )
    assert span(d) == (8, 13, 8, 55)
    assert "and autocast never touches in-place ops" in d.message


AUTOCAST = """
class Block(nn.Module):
    def forward(self, x, index, positions):
        with torch.autocast({device}, dtype=torch.bfloat16):
            y = {op}
        return y
"""


@pytest.mark.parametrize(
    ("device", "op", "reported"),
    [
        # CPU autocast promotes index_copy; CUDA's lists promote index_put and scatter_add.
        ('"cpu"', "torch.index_copy(x, 0, index, torch.zeros(2, 4))", False),
        ('"cuda"', "torch.index_copy(x, 0, index, torch.zeros(2, 4))", True),
        ('"cuda"', "x.index_put((index,), torch.zeros(2, 4))", False),
        ('"cpu"', "x.index_put((index,), torch.zeros(2, 4))", True),
        ('"cuda"', "x.scatter_add(0, positions, torch.zeros(2, 4))", False),
        ('"cpu"', "x.scatter_add(0, positions, torch.zeros(2, 4))", True),
        ("device_type", "x.scatter_add(0, positions, torch.zeros(2, 4))", False),
        ('"cpu"', "x.index_add(0, index, torch.zeros(2, 4))", True),  # promoted nowhere
        ('"cuda"', "x.masked_scatter(x > 0, torch.zeros(2, 4))", True),
    ],
)
def test_out_of_place_writes_follow_the_autocast_lists(
    device: str, op: str, reported: bool
) -> None:
    found = findings(AUTOCAST.format(device=device, op=op))
    assert [span(d)[:2] for d in found] == ([(8, 17)] if reported else [])


def test_out_of_place_write_says_when_autocast_would_promote_it() -> None:
    (promotable, never) = findings(
        """
        class Block(nn.Module):
            def forward(self, x, index):
                a = x.index_put((index,), torch.zeros(2, 4))
                b = x.index_add(0, index, torch.zeros(2, 4))
                return a, b
        """
    )
    assert "`index_put` does not cast its `values` argument, outside an autocast region " in (
        promotable.message
    )
    assert "`index_add` does not cast its `source` argument, even under autocast" in never.message


def test_float32_only_code_is_silent() -> None:
    assert (
        findings(
            """
            def histogram(labels, num_classes):
                counts = torch.zeros(num_classes)
                counts.index_add_(0, labels, torch.ones(labels.shape[0]))
                table = torch.zeros(num_classes, num_classes)
                table[labels] = F.one_hot(labels, num_classes).float()
                return counts, table
            """
        )
        == []
    )


def test_plain_tensor_attribute_is_not_cast_with_the_model() -> None:
    # ``self.stats = torch.zeros(n)`` is no buffer: ``model.half()`` leaves it float32.
    assert (
        findings(
            """
            class Tracker(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.stats = torch.zeros(n)

                def forward(self, x, index):
                    self.stats.index_add_(0, index, x.float().sum(-1))
                    return x
            """
        )
        == []
    )


def test_integer_buffer_is_not_half() -> None:
    assert (
        findings(
            """
            class Counter(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.register_buffer("hits", torch.zeros(n, dtype=torch.long))

                def forward(self, x, index):
                    self.hits.index_add_(0, index, torch.ones(index.shape[0]))
                    return x
            """
        )
        == []
    )


def test_no_fix_when_the_destination_has_a_call() -> None:
    (d,) = findings(
        """
        class Cache(nn.Module):
            def update(self, k, cache_position):
                self.layer(0).keys.index_copy_(0, cache_position, k.float())
        """
    )
    assert d.fix is None


def test_subscripted_destination_is_fixed_in_place() -> None:
    body = """
        class Cache(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("keys", torch.zeros(2, 4, 8))

            def update(self, layer_idx, k, cache_position):
                self.keys[layer_idx].index_copy_(0, cache_position, k.float())
        """
    (d,) = findings(body)
    assert span(d) == (11, 9, 11, 71)
    assert fixed_line(body, d) == (
        "self.keys[layer_idx].index_copy_(0, cache_position, k.to(self.keys[layer_idx].dtype))"
    )


PADDED = """
class Fusion(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, idx, frames):
        fused = self.proj(x)
        local = fused[idx]
        if local.size(-1) < frames:
            pad = {pad}
            local = torch.cat([local, pad], dim=-1)[..., :8]
        {write}
        return fused
"""


def test_a_source_float32_on_one_path_raises_when_that_path_runs() -> None:
    body = PADDED.format(pad="torch.zeros(local.size(0), 2)", write="fused[idx] = local")
    (d,) = findings(body)
    assert span(d)[:2] == (16, 9)
    assert "`local` is float32 on one path (made float32" in d.message
    assert fixed_line(body, d) == "fused[idx] = local.to(fused.dtype)"


def test_a_one_path_source_of_index_copy_too() -> None:
    body = PADDED.format(
        pad="torch.zeros(local.size(0), 2)", write="fused.index_copy_(0, idx, local)"
    )
    (d,) = findings(body)
    assert "float32 on one path" in d.message


def test_a_one_path_source_made_like_the_activations_is_silent() -> None:
    body = PADDED.format(pad="local.new_zeros(local.size(0), 2)", write="fused[idx] = local")
    assert findings(body) == []
