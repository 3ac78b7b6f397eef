"""MPC103 attention-dtype-mismatch: exact positions, messages, related locations and fixes."""

from __future__ import annotations

import textwrap

import pytest

from mpcheck.diagnostics import Diagnostic
from mpcheck.output.fixes import apply_fixes
from tests.support import check, span

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3


def findings(body: str, code: str = "MPC103") -> list[Diagnostic]:
    return [d for d in check(HEADER + textwrap.dedent(body)) if d.code == code]


def fixed_line(body: str, d: Diagnostic) -> str:
    source, n = apply_fixes(HEADER + textwrap.dedent(body), [d], unsafe=True)
    assert n == 1
    return source.splitlines()[d.start.row - 1].strip()


def attention(line: str, prelude: str = "") -> str:
    """A half-capable attention module whose forward ends with ``line``."""
    return f"""
        class Attn(nn.Module):
            def forward(self, x, q, k, v, cos):
                {prelude or "pass"}
                return {line}
        """


def test_sdpa_with_an_upcast_query() -> None:
    body = attention("F.scaled_dot_product_attention(q, k, v)", "q = (q.float() * cos)")
    (d,) = findings(body)
    assert span(d) == (8, 16, 8, 55)
    assert d.message == (
        "`q` is float32 (upcast to float32 by `.float()` at line 7) but `k` and `v` have the "
        "model's dtype; `F.scaled_dot_product_attention` needs one dtype for all of them and "
        "raises when the model runs in half precision"
        " (latent: raises if `Attn` runs in half without autocast)"
    )
    (note,) = d.related
    assert (note.start.row, note.start.column, note.message) == (
        7,
        14,
        "`q` upcast to float32 by `.float()`",
    )
    assert d.fix is not None and d.fix.applicability == "unsafe"
    assert d.fix.message == "Cast `q` to `k.dtype`"
    assert fixed_line(body, d) == "return F.scaled_dot_product_attention(q.to(k.dtype), k, v)"


@pytest.mark.parametrize(
    "imports, call",
    [
        ("", "torch.nn.functional.scaled_dot_product_attention(q, k, v)"),
        ("", "F.scaled_dot_product_attention(query=q, key=k, value=v)"),
        (
            "from torch.nn.functional import scaled_dot_product_attention as sdpa\n",
            "sdpa(q, k, v, is_causal=True)",
        ),
        ("from flash_attn import flash_attn_func\n", "flash_attn_func(q, k, v, causal=True)"),
        ("import xformers.ops as xops\n", "xops.memory_efficient_attention(q, k, v)"),
        ("import xformers.ops\n", "xformers.ops.memory_efficient_attention(q, k, v)"),
    ],
)
def test_every_spelling_of_fused_attention(imports: str, call: str) -> None:
    body = imports + textwrap.dedent(attention(call, "k = k.to(torch.float32)"))
    (d,) = findings(body)
    assert d.start.row == 8 + imports.count("\n")
    assert d.message.startswith("`k` is float32 (upcast to float32 by `.to(torch.float32)` at ")
    assert "but `q` and `v` have the model's dtype" in d.message


def test_hand_written_scores() -> None:
    (scores,) = findings(
        """
        class Attn(nn.Module):
            def forward(self, q, k, v):
                k = k.float()
                scores = q @ k.transpose(-2, -1)
                probs = scores.softmax(dim=-1)
                probs = F.dropout(probs, p=0.1)
                return torch.matmul(probs, v)
        """
    )
    assert span(scores) == (8, 18, 8, 41)
    assert scores.message.startswith("`k` is float32 (upcast to float32 by `.float()` at line 7)")
    assert "but `q` has the model's dtype; the attention matmul `q @ k.transpose(-2, -1)`" in (
        scores.message
    )
    assert scores.fix is not None
    assert scores.fix.edits[0].content == "k.transpose(-2, -1).to(q.dtype)"
    # the engine takes the scores to follow `q` (the model's dtype) past the mismatch, so
    # `probs @ v` is not reported a second time


@pytest.mark.parametrize(
    "line",
    [
        "torch.matmul(q, k.mT)",
        "torch.bmm(q, k.transpose(1, 2))",
        "torch.baddbmm(x, q, k.transpose(1, 2))",
        "q.matmul(k.permute(0, 1, 3, 2))",
        'torch.einsum("bhqd,bhkd->bhqk", q, k)',
        "torch.matmul(q, torch.transpose(k, -1, -2))",
    ],
)
def test_score_matmul_spellings(line: str) -> None:
    (d,) = findings(attention(line, "k = k.float()"))
    assert d.start.row == 8
    assert d.message.startswith("`k` is float32 (upcast to float32 by `.float()` at line 7)")


def test_probabilities_kept_in_float32_meet_half_values() -> None:
    body = """
        class Mixer(nn.Module):
            def forward(self, scores, v):
                probs = torch.softmax(scores, dim=-1, dtype=torch.float32)
                return torch.bmm(probs, v)
        """
    (d,) = findings(body)
    assert span(d) == (8, 16, 8, 35)
    assert d.message.startswith(
        "`probs` is float32 (made float32 by `dtype=torch.float32` at line 7) but `v` has the "
        "model's dtype; the attention matmul `torch.bmm(probs, v)`"
    )
    assert fixed_line(body, d) == "return torch.bmm(probs.to(v.dtype), v)"
    assert findings(body, "MPC101") == []  # attention matmuls belong to MPC103


def test_kv_cache_allocated_without_dtype() -> None:
    (d,) = findings(
        """
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.cache_k = torch.zeros(1, 2, 16, 4)
            def forward(self, q, k, v, pos: int):
                self.cache_k[:, :, pos] = k
                keys = self.cache_k[:, :, : pos + 1]
                return F.scaled_dot_product_attention(q, keys, v)
        """
    )
    assert span(d) == (12, 16, 12, 58)
    assert "`keys` is float32 (made float32 (the default dtype) by `torch.zeros` without " in (
        d.message
    )
    assert "at line 8) but `q` and `v` have the model's dtype" in d.message
    (note,) = d.related
    assert (note.start.row, note.start.column) == (8, 24)


def test_half_additive_mask_with_float32_query() -> None:
    body = """
        class Encoder(nn.Module):
            def forward(self, q, k, v, attention_mask):
                q, k, v = q.float(), k.float(), v.float()
                mask = (1.0 - attention_mask.half()) * -10000.0
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        """
    (d,) = findings(body)
    assert span(d) == (9, 16, 9, 71)
    assert d.message == (
        "`mask` is float16 (cast to float16 by `.half()` at line 8) but the query `q` is "
        "float32 (upcast to float32 by `.float()` at line 7); an additive attention mask must "
        "be bool, float32 or the query's dtype"
    )
    assert [(n.start.row, n.start.column) for n in d.related] == [(8, 23), (7, 19)]
    assert fixed_line(body, d) == (
        "return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.dtype))"
    )


@pytest.mark.parametrize(
    "prelude, line",
    [
        # cast to one another
        ("k = k.float().to(q.dtype)", "F.scaled_dot_product_attention(q, k, v)"),
        ("k = k.float()", "F.scaled_dot_product_attention(q, k.to(q.dtype), v)"),
        ("k = (k.float() * cos).type_as(q)", "F.scaled_dot_product_attention(q, k, v)"),
        # all three share one provenance
        (
            "q, k, v = q.float(), k.float(), v.float()",
            "F.scaled_dot_product_attention(q, k, v)",
        ),
        # rotary in float32, then `.type_as` on both q and k
        (
            "q, k = (q.float() * cos).type_as(q), (k.float() * cos).type_as(k)",
            "torch.matmul(q, k.transpose(-2, -1))",
        ),
        # masks: bool, float32 with a half query, or the query's dtype
        ("m = x > 0", "F.scaled_dot_product_attention(q, k, v, attn_mask=m)"),
        ("m = x.float()", "F.scaled_dot_product_attention(q, k, v, attn_mask=m)"),
        ("m = x.half().to(q.dtype)", "F.scaled_dot_product_attention(q, k, v, attn_mask=m)"),
        # softmax in float32, cast back before the values
        (
            "p = F.softmax(q @ k.mT, dim=-1, dtype=torch.float32).to(q.dtype)",
            "torch.matmul(p, v)",
        ),
        # a weight, not a key: a plain matmul (MPC101's, not attention)
        ("k = k.float()", "k @ self.weight.transpose(-2, -1)"),
    ],
)
def test_silent_for_correct_idioms(prelude: str, line: str) -> None:
    assert findings(attention(line, prelude)) == []


def test_silent_under_autocast() -> None:
    body = attention(
        "F.scaled_dot_product_attention(q, k, v)",
        'q = q.float()\n                with torch.autocast("cpu", dtype=torch.bfloat16):\n'
        "                    o = F.scaled_dot_product_attention(q, k, v)\n"
        "                    s = q @ k.transpose(-2, -1)",
    )
    assert [d.start.row for d in findings(body)] == [11]  # only the call outside the region


def test_weight_transpose_stays_with_mpc101() -> None:
    body = """
        class Proj(nn.Module):
            def forward(self, x):
                return x.float() @ self.weight.mT
        """
    assert findings(body) == []
    assert [d.start.row for d in findings(body, "MPC101")] == [7]
