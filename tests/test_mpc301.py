"""MPC301 fp16-overflow-constant: constants beyond float16's range written into half tensors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from mpcheck.diagnostics import Diagnostic
from mpcheck.output.fixes import apply_fixes
from tests.support import FIXTURES, check, run_fixed_fixture, span

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3
RAISES = '"value cannot be converted to type c10::Half without overflow"'
NAN = "and -inf becomes NaN where it fills a softmax row or meets a zero (`0 * inf`)"


def source(body: str) -> str:
    return HEADER + textwrap.dedent(body)


def findings(body: str) -> list[Diagnostic]:
    return [d for d in check(source(body)) if d.code == "MPC301"]


def fixed(body: str) -> str:
    text = source(body)
    assert apply_fixes(text, findings(body), unsafe=False)[1] == 0  # never a safe fix
    out, applied = apply_fixes(text, findings(body), unsafe=True)
    assert applied
    cst.parse_module(out)
    return out[len(HEADER) :]


ATTENTION = """
class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qk = nn.Linear(16, 32)

    def forward(self, x, padding):
        q, k = self.qk(x).chunk(2, dim=-1)
        scores = q @ k.transpose(-1, -2)
        scores = scores.masked_fill(padding, -1e9)
        return scores.softmax(-1)
"""


def test_masked_fill_in_a_module_raises_in_float16() -> None:
    (d,) = findings(ATTENTION)
    assert span(d) == (13, 46, 13, 50)
    # a file alone: only the premise that the module may run in half (a warning saying so)
    assert d.severity.value == "warning"
    assert d.message == (
        "`-1e9` is beyond float16's range (±65504), though within bfloat16's: "
        f"`scores.masked_fill(padding, -1e9)` raises {RAISES} when the model runs in "
        "float16; use `torch.finfo(scores.dtype).min` (latent: if `Attention` runs in float16)"
    )
    assert d.fix is not None and d.fix.applicability == "unsafe"
    assert "scores = scores.masked_fill(padding, torch.finfo(scores.dtype).min)" in fixed(ATTENTION)


def test_float32_min_overflows_bfloat16_too() -> None:
    (d,) = findings(
        """
        class Attention(nn.Module):
            def forward(self, scores, causal):
                min_value = torch.finfo(torch.float32).min
                return scores.masked_fill(causal, min_value)
        """
    )
    assert span(d) == (8, 43, 8, 52)
    assert d.message == (
        "`min_value` (-3.40282e+38) is beyond the range of float16 (±65504) and of bfloat16 "
        f"(±3.38953e+38): `scores.masked_fill(causal, min_value)` raises {RAISES} when the "
        "model runs in float16 or bfloat16 (c10::BFloat16 in bfloat16); "
        "use `torch.finfo(scores.dtype).min` (latent: if `Attention` runs in half)"
    )
    assert [(r.start.row, r.start.column, r.message) for r in d.related] == [
        (7, 21, "-3.40282e+38 comes from `torch.finfo(torch.float32)`"),
    ]


def test_explicit_bfloat16_reports_only_what_overflows_it() -> None:
    (d,) = findings(
        """
        def rerank(q, docs, valid):
            sim = (q @ docs.T).to(torch.bfloat16)
            sim = sim.masked_fill(~valid, -1e9)
            return sim.masked_fill(~valid, torch.finfo(torch.float32).min)
        """
    )
    assert span(d) == (8, 36, 8, 66)
    assert d.message == (
        "`torch.finfo(torch.float32).min` (-3.40282e+38) is beyond bfloat16's range "
        "(±3.38953e+38): `sim.masked_fill(~valid, torch.finfo(torch.float...` raises "
        '"value cannot be converted to type c10::BFloat16 without overflow" because the '
        "tensor is bfloat16 (cast to bfloat16 by `torch.bfloat16` at line 6); "
        "use `torch.finfo(sim.dtype).min`"
    )
    assert [(r.start.row, r.message) for r in d.related] == [
        (6, "bfloat16 here: cast to bfloat16 by `torch.bfloat16`")
    ]


def test_fp16_autocast_scores_in_float32_code() -> None:
    # torch-truth c04c: float32 code whose scores come out of an fp16-autocast matmul.
    (d,) = findings(
        """
        def attend(q, k, mask):
            q, k = q.float(), k.float()
            with torch.autocast("cpu", dtype=torch.float16):
                scores = q @ k.transpose(-1, -2)
                return scores.masked_fill(mask, -1e9).softmax(-1)
        """
    )
    assert span(d) == (9, 41, 9, 45)
    assert (
        f"raises {RAISES} because the tensor is float16 (computed in float16 by autocast "
        "at line 8)" in d.message
    )


def test_silent_forms_say_they_give_inf() -> None:
    where, setitem, product, added = findings(
        """
        class Scores(nn.Module):
            def forward(self, scores, keep, attention_mask):
                a = torch.where(keep, scores, -1e9)
                scores[~keep] = -1e9
                ext = attention_mask[:, None, None, :].to(scores.dtype)
                b = scores + (1.0 - ext) * -1e9
                return a + b + 1e10
        """
    )
    assert span(where)[:2] == (7, 39)
    assert where.message == (
        "`-1e9` is beyond float16's range (±65504), though within bfloat16's: "
        "`torch.where(keep, scores, -1e9)` silently gives -inf when the model runs in "
        f"float16, {NAN}; use `torch.finfo(scores.dtype).min` (latent: if `Scores` runs in "
        "float16)"
    )
    assert span(setitem)[:2] == (8, 25)
    assert "`scores[~keep] = -1e9` silently gives -inf" in setitem.message
    assert span(product)[:2] == (10, 36)
    assert (
        "`(1.0 - ext) * -1e9` silently gives -inf when the model runs in float16 wherever "
        "the other factor exceeds 6.6e-05 in magnitude" in product.message
    )
    assert product.fix is None  # ``(1.0 - ext)`` is no plain name to take the dtype of
    assert span(added)[:2] == (11, 24)
    assert "`a + b + 1e10` silently gives inf" in added.message
    assert added.message.endswith(
        "use `torch.finfo(<tensor>.dtype).max` (latent: if `Scores` runs in float16)"
    )


def test_checked_ops_and_factories() -> None:
    body = """
    class Block(nn.Module):
        def forward(self, x, idx):
            a = x.fill_(-1e10)
            b = torch.full_like(x, -100000.0)
            c = x.new_full((2, 2), -1e9)
            d = torch.full((2, 2), -1e9, dtype=x.dtype)
            e = F.pad(x, (1, 1), value=-1e9)
            f = x.index_fill(1, idx, -70000.0)
            return a, b, c, d, e, f
    """
    found = findings(body)
    assert [span(d)[:2] for d in found] == [(7, 21), (8, 32), (9, 32), (10, 32), (11, 36), (12, 34)]
    assert all(f"raises {RAISES}" in d.message for d in found)
    out = fixed(body)
    assert "a = x.fill_(torch.finfo(x.dtype).min)" in out
    assert "b = torch.full_like(x, torch.finfo(x.dtype).min)" in out
    assert "c = x.new_full((2, 2), torch.finfo(x.dtype).min)" in out
    assert "d = torch.full((2, 2), torch.finfo(x.dtype).min, dtype=x.dtype)" in out
    assert "e = F.pad(x, (1, 1), value=torch.finfo(x.dtype).min)" in out
    assert "f = x.index_fill(1, idx, torch.finfo(x.dtype).min)" in out


def test_clamp_bounds_get_advice_but_no_fix() -> None:
    low, high = findings(
        """
        class FF(nn.Module):
            def forward(self, h):
                return torch.clamp(h, min=-1e5, max=1e5)
        """
    )
    assert span(low) == (7, 35, 7, 39)
    assert span(high) == (7, 45, 7, 48)
    premise = " (latent: if `FF` runs in float16)"
    assert low.message.endswith(f"use a bound that fits, e.g. `torch.finfo(h.dtype).min`{premise}")
    assert high.message.endswith(f"use a bound that fits, e.g. `torch.finfo(h.dtype).max`{premise}")
    assert low.fix is None and high.fix is None


def test_no_fix_unless_the_tensor_is_a_plain_name() -> None:
    (d,) = findings(
        """
        class Attention(nn.Module):
            def forward(self, q, k, mask):
                return (q @ k.transpose(-1, -2)).masked_fill(mask, -1e9)
        """
    )
    assert span(d)[:2] == (7, 60)
    assert d.fix is None
    assert d.message.endswith(
        "use `torch.finfo(<tensor>.dtype).min` (latent: if `Attention` runs in float16)"
    )


def test_float32_constant_tensor_cast_to_the_model_dtype() -> None:
    # diffusers' T5FilmDecoder: where() of two Python numbers is float32; the cast makes -inf.
    body = """
    class DecoderLayer(nn.Module):
        def forward(self, hidden_states, encoder_hidden_states, encoder_attention_mask):
            ext = torch.where(encoder_attention_mask > 0, 0, -1e10).to(
                encoder_hidden_states.dtype
            )
            big = torch.tensor(-1e9).half()
            return hidden_states + ext + big
    """
    cast, half = findings(body)
    assert span(cast) == (7, 58, 7, 63)
    assert cast.message == (
        "`-1e10` is beyond float16's range (±65504), though within bfloat16's: "
        "`.to(encoder_hidden_states.dtype)` casts the float32 tensor holding it to the "
        "model's dtype, silently giving -inf when the model runs in float16, "
        f"{NAN}; use `torch.finfo(encoder_hidden_states.dtype).min` "
        "(latent: if `DecoderLayer` runs in float16)"
    )
    assert span(half)[:2] == (10, 28)
    assert "`.half()` casts the float32 tensor holding it to float16, silently giving -inf" in (
        half.message
    )
    out = fixed(body)
    assert "torch.where(encoder_attention_mask > 0, 0, torch.finfo(encoder_hidden_states" in out
    assert "big = torch.tensor(torch.finfo(torch.float16).min).half()" in out


def test_tensor_literal_in_a_half_dtype() -> None:
    (d,) = findings(
        """
        class Attention(nn.Module):
            def forward(self, scores, mask):
                fill = torch.tensor(-1e9, dtype=scores.dtype)
                return torch.where(mask, scores, fill)
        """
    )
    assert span(d)[:2] == (7, 29)
    assert "`torch.tensor(-1e9, dtype=scores.dtype)` silently gives -inf" in d.message


@pytest.mark.parametrize(
    "body",
    [
        # the tensor's own dtype, fitting constants, -inf fills
        """
        class Attention(nn.Module):
            def forward(self, scores, mask, attention_mask, dtype):
                a = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
                b = scores.masked_fill(mask, -1e4)
                c = scores.masked_fill(mask, float("-inf"))
                d = scores.masked_fill(mask, -65504.0)
                ext = attention_mask[:, None, None, :].to(dtype=scores.dtype)
                e = scores + (1.0 - ext) * -10000.0
                f = scores + (1.0 - ext) * torch.finfo(dtype).min
                g = torch.full((4, 4), torch.finfo(dtype).min, dtype=dtype)
                h = scores.clamp(min=-torch.finfo(scores.dtype).max + 1000)
                return a + b + c + d + e + f + g + h
        """,
        # float32 scores in a half model
        """
        class Head(nn.Module):
            def forward(self, scores, keep, v):
                s = scores.float().masked_fill(~keep, -1e9)
                s = torch.where(keep, s, -1e9)
                side = torch.where(keep, 0.0, -1e10)
                return (s + side).softmax(-1).to(v.dtype) @ v
        """,
        # bfloat16 holds -1e9; float32 scripts and float32 beam scores
        """
        def script(x, valid):
            sim = x.to(torch.bfloat16)
            sim = sim.masked_fill(~valid, -1e9)
            sim[:, 0] = -1e9
            beam_scores = torch.full((2, 3), fill_value=-1e9, dtype=torch.float)
            beam_scores[:, 1:] = -1e9
            return torch.randn(4, 4).masked_fill(valid, -1e9), beam_scores
        """,
        # integer arithmetic against a tensor only assumed to be in the model's dtype
        """
        def rgb_to_id(color):
            return color[..., 0] + 256 * color[..., 1] + 256 * 256 * color[..., 2]

        class Block(nn.Module):
            def forward(self, x):
                return x.half() * 2
        """,
        # a constant tensor cast to a dtype that holds it; a small product
        """
        class Block(nn.Module):
            def forward(self, x, mask):
                a = torch.where(mask > 0, 0.0, -1e4).to(x.dtype)
                b = torch.where(mask > 0, 0.0, -1e10).float()
                c = torch.where(mask > 0, 0.0, -1e9).to(torch.bfloat16)
                return x * 1e-9 + a + b + c
        """,
    ],
)
def test_silent_for_correct_idioms(body: str) -> None:
    assert not findings(body)


FIXED_FIXTURES = [
    "bad_hf_attention_masked_fill_half.py",
    "bad_llama_finfo_float32_bf16.py",
    "bad_t5film_where_mask_cast.py",
]


@pytest.mark.parametrize("name", FIXED_FIXTURES)
def test_fix_makes_the_bad_fixture_run(name: str, tmp_path: Path) -> None:
    """The unsafe fix is not cosmetic: the fixed program runs and its outputs are finite."""
    pytest.importorskip("torch")
    run_fixed_fixture("MPC301", FIXTURES / "mpc301" / name, tmp_path)


def test_in_place_writes_of_a_tensor_holding_the_constant() -> None:
    body = """
        class LocalAttention(nn.Module):
            def forward(self, hidden_states, key_mask, position_bias):
                scores = self.q(hidden_states) @ self.k(hidden_states).transpose(-1, -2)
                mask = torch.where(key_mask > 0, 0.0, -1e10)
                position_bias = position_bias + mask
                scores += position_bias
                scores -= 1e9
                return scores
        """
    held, direct = findings(body)
    assert span(held) == (8, 47, 8, 52)
    assert held.message == (
        "`-1e10` is beyond float16's range (±65504), though within bfloat16's: "
        "`scores += position_bias` writes the float32 tensor holding it into a tensor in the "
        f"model's dtype in place, silently giving -inf when the model runs in float16, {NAN}; "
        "use `torch.finfo(scores.dtype).min` (latent: if `LocalAttention` runs in float16)"
    )
    assert held.fix is None  # ``scores`` may not exist where the mask is built
    assert held.severity.value == direct.severity.value == "warning"  # silently wrong
    assert span(direct) == (11, 19, 11, 22)
    assert "`scores -= 1e9` silently gives inf" in direct.message


def test_in_place_writes_that_fit_or_stay_float32_are_quiet() -> None:
    body = """
        class LocalAttention(nn.Module):
            def forward(self, hidden_states, key_mask):
                scores = self.q(hidden_states) @ self.k(hidden_states).transpose(-1, -2)
                scores += torch.where(key_mask > 0, 0.0, -1e4)
                wide = scores.float()
                wide += torch.where(key_mask > 0, 0.0, -1e10)
                wide -= 1e9
                return wide.softmax(-1).type_as(scores)
        """
    assert findings(body) == []


def test_a_mask_added_on_one_path_is_still_followed_into_the_in_place_write() -> None:
    """LongT5's local attention: the -1e10 mask is added only when a mask is given."""
    body = """
        class LocalAttention(nn.Module):
            def forward(self, hidden_states, mask, position_bias):
                scores = self.q(hidden_states) @ self.k(hidden_states).transpose(-1, -2)
                if mask is not None:
                    mask = torch.where(mask > 0, 0.0, -1e10)
                    position_bias = position_bias + mask
                scores += position_bias
                return scores
        """
    (d,) = findings(body)
    assert span(d) == (9, 47, 9, 52)
    assert "`scores += position_bias` writes the float32 tensor holding it" in d.message


DTYPE_GUARDED = """
class Attention(nn.Module):
    def forward(self, x, mask):
        {body}
        return x.masked_fill(mask, fill)
"""


def guarded(body: str) -> str:
    """The class above with ``body`` (written at no indentation) in its method."""
    return DTYPE_GUARDED.format(body=textwrap.indent(body, " " * 8).lstrip())


@pytest.mark.parametrize(
    "body",
    [
        # fairseq's fix: the float32 constant only where the tensor is float32
        "fill = -1e8 if x.dtype == torch.float32 else -1e4",
        "fill = -1e4 if x.dtype != torch.float32 else -1e9",
        "fill = -1e4 if mask.dtype in (torch.float16, torch.bfloat16) else -1e9",
        "if x.dtype == torch.float32:\n    fill = -1e9\nelse:\n    fill = -1e4",
        "fill = -1e9\nif x.dtype in (torch.float16, torch.bfloat16):\n    fill = -1e4",
        "if x.dtype != torch.float:\n    raise ValueError('float32 only')\nfill = -1e9",
        "fill = -1e4\nif x.dtype is torch.float32:\n    x = x.masked_fill(mask, -1e9)",
    ],
)
def test_a_dtype_test_keeps_the_float32_constant_from_half_runs(body: str) -> None:
    """The engine follows the path a half-precision run takes through a dtype test."""
    assert not findings(guarded(body))


@pytest.mark.parametrize(
    "body",
    [
        "fill = -1e4\nif x.dtype == torch.float16:\n    fill = -1e9",
        "fill = -1e9 if x.dtype != torch.float32 else -1e4",
        "fill = -1e9 if x.dtype == torch.float32 else -1e4\nfill = fill * 10",
        # a float16-only test does not decide a bfloat16 run: the first path is kept
        "fill = -1e9 if x.dtype == torch.float16 else -1e4",
    ],
)
def test_the_half_path_of_a_dtype_test_is_still_checked(body: str) -> None:
    text = guarded(body)
    (d,) = findings(text)
    assert source(text).splitlines()[span(d)[0] - 1].strip() == "return x.masked_fill(mask, fill)"


def test_a_product_with_a_bounded_factor_that_fits_is_quiet() -> None:
    """``t * 1e5`` gives inf only where |t| > 0.655: a factor the engine bounds below that
    (a scaled ``sigmoid``) never reaches it; one bounded by 1 (a mask) still does."""
    body = """
        class Gate(nn.Module):
            def forward(self, x):
                x = x.half()
                small = torch.sigmoid(x) * 0.5
                fits = small * 1e5
                mask = torch.sigmoid(x)
                over = mask * -1e9
                return fits, over
        """
    assert [d.start.row for d in findings(body)] == [11]
