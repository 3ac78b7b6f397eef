"""The autocast a trainer wraps around a module (mpcheck.engine.ambient): which ops are checked
as if under it, what they see there, and where it stays out of the way."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mpcheck.diagnostics import Diagnostic, Severity
from mpcheck.output.fixes import apply_fixes
from tests.support import FIXTURES, check, run_fixed_fixture, span

HEADER = "import natten\nimport torch\nfrom torch import nn\n"  # lines 1-3

ATTENTION = """
class Attention(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x, cache, pos):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        {write}
        return cache
"""


def findings(body: str, code: str | None = None) -> list[Diagnostic]:
    found = check(HEADER + textwrap.dedent(body))
    return [d for d in found if code is None or d.code == code]


def test_half_projection_written_into_an_input_cache() -> None:
    (d,) = findings(ATTENTION.format(write="cache.index_copy_(1, pos, k)"), "MPC105")
    assert span(d) == (12, 9, 12, 37)
    assert d.severity is Severity.WARNING
    assert d.message.startswith("if `forward` runs under autocast")
    assert "`k` is float16" in d.message and "`cache` keeps the model's float32" in d.message


def test_the_warning_casts_the_source_to_the_destination() -> None:
    body = HEADER + textwrap.dedent(ATTENTION.format(write="cache.index_copy_(1, pos, k)"))
    (d,) = findings(ATTENTION.format(write="cache.index_copy_(1, pos, k)"), "MPC105")
    assert d.fix is not None and d.fix.message == "Cast `k` to `cache.dtype`"
    assert d.fix.applicability == "safe"
    out, applied = apply_fixes(body, [d], unsafe=False)
    assert applied == 1
    assert out == body.replace("pos, k)", "pos, k.to(cache.dtype))")
    assert not findings(out[len(HEADER) :], "MPC105")


def test_cast_write_and_slice_assignment_are_quiet() -> None:
    assert not findings(ATTENTION.format(write="cache.index_copy_(1, pos, k.to(cache.dtype))"))
    assert not findings(ATTENTION.format(write="cache[:, :4] = k"))


def test_out_of_place_index_put_is_promoted_by_cuda_autocast() -> None:
    assert not findings(ATTENTION.format(write="cache = cache.index_put((pos,), k)"), "MPC105")


def test_out_of_place_index_copy_is_not_promoted_on_cuda() -> None:
    (d,) = findings(ATTENTION.format(write="cache = cache.index_copy(1, pos, k)"), "MPC105")
    assert span(d)[0] == 12


def test_a_region_the_method_opens_is_its_own() -> None:
    write = "with torch.autocast('cuda', enabled=False):\n            cache.index_copy_(1, pos, k)"
    assert not findings(ATTENTION.format(write=write), "MPC105")


def test_only_module_methods_and_not_kept_float32_classes() -> None:
    free = """
    def update(cache, pos, layer, x):
        cache.index_copy_(1, pos, layer(x))
    """
    assert not findings(free)
    # (a name saying float32 counts where the code agrees: a layer built in float32)
    kept = (
        ATTENTION.replace("class Attention", "class AttentionFp32")
        .replace("nn.Linear(d, 3 * d)", "nn.Linear(d, 3 * d, dtype=torch.float32)")
        .format(write="cache.index_copy_(1, pos, k)")
    )
    assert not findings(kept, "MPC105")


def test_softmax_weights_into_a_compiled_kernel() -> None:
    body = """
    class Neighborhood(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            a = torch.softmax(natten.functional.natten2dqk(q, k, 7, 1), dim=-1)
            good = natten.functional.natten2dav(a.to(v.dtype), v, 7, 1)
            return natten.functional.natten2dav(a, v, 7, 1)
    """
    (d,) = findings(body, "MPC101")
    assert span(d)[:2] == (14, 16)
    assert "`a` is float32 (computed in float32 by autocast" in d.message
    assert "compiled kernel" in d.message


def test_out_call_mixing_a_weight_and_a_half_output() -> None:
    body = """
    class Head(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.proj = nn.Linear(d, d)
            self.weight = nn.Parameter(torch.randn(d, d))

        def forward(self, x, buf):
            h = self.proj(x)
            torch.mm(h, self.weight, out=buf)
            return buf
    """
    (d,) = findings(body, "MPC101")
    assert span(d)[0] == 13 and "`out=`" in d.message


def test_plain_walk_is_unchanged_without_autocast_blind_ops() -> None:
    body = """
    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.proj = nn.Linear(d, d)
            self.scale = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return torch.softmax(self.proj(x), -1) * self.scale
    """
    assert not findings(body)


def test_softmax_in_an_explicit_cuda_region_is_float32() -> None:
    body = """
    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.proj = nn.Linear(d, d)

        def forward(self, x, cache, pos):
            with torch.autocast("cuda"):
                a = torch.softmax(self.proj(x), -1)
                cache.index_copy_(0, pos, a)
            return cache
    """
    # an explicit region: the plain walk reports it (a float32 softmax into a model-dtype cache)
    (d,) = findings(body, "MPC105")
    assert "computed in float32 by autocast" in d.message


def test_helpers_returning_what_they_were_given() -> None:
    body = """
    from einops import rearrange


    def apply_wd(module):
        return module


    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.proj = apply_wd(nn.Linear(d, d))

        def forward(self, x):
            h = rearrange(x.float(), "b n d -> b n d")
            return self.proj(h)
    """
    (d,) = findings(body, "MPC101")
    assert span(d)[0] == 19


def test_tensor_type_alias_of_a_parameter() -> None:
    body = """
    from typing import Optional, Tuple

    KVCache = Tuple[torch.Tensor, torch.Tensor]


    class Attention(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.kv = nn.Linear(d, 2 * d)

        def forward(self, x, pos, kv_cache: Optional[KVCache] = None):
            k, v = self.kv(x).chunk(2, dim=-1)
            cache_k, cache_v = kv_cache
            return cache_k.index_copy(2, pos, k), cache_v.index_copy(2, pos, v)
    """
    rows = sorted(span(d)[0] for d in findings(body, "MPC105"))
    assert rows == [18, 18]


FUNCTION = """
class Logits(torch.autograd.Function):
    @staticmethod{decorator}
    def forward(ctx, hidden, weight, out):
        w = weight{cast}
        torch.mm(hidden, w.t(), out=out)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None
"""


def test_function_inputs_meeting_in_an_out_matmul() -> None:
    (d,) = findings(FUNCTION.format(decorator="", cast=""), "MPC402")
    assert span(d)[:2] == (9, 9) and d.severity is Severity.WARNING
    assert "hands its inputs `hidden`, `weight` to `torch.mm` with `out=`" in d.message


def test_function_inputs_cast_to_one_dtype_or_forward_in_float32() -> None:
    assert not findings(FUNCTION.format(decorator="", cast=".to(hidden.dtype)"), "MPC402")
    pinned = "\n    @torch.amp.custom_fwd(device_type='cuda', cast_inputs=torch.float32)"
    assert not findings(FUNCTION.format(decorator=pinned, cast=""), "MPC402")


def test_interpolate_is_an_upsample_op_for_autocast() -> None:
    from mpcheck.knowledge import autocast_ops
    from mpcheck.knowledge.torch_api import AUTOCAST_NAMES

    for device in ("cuda", "cpu"):
        kinds = {autocast_ops.policy(op, device, None) for op in _upsample_ops()}
        assert len(kinds) == 1, (device, kinds)  # every upsample_* alike: one name stands for all
    assert set(AUTOCAST_NAMES.values()) <= set(_upsample_ops())
    body = """
    import torch.nn.functional as F


    class Decoder(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.proj = nn.Linear(d, d)

        def forward(self, x, cache, pos):
            with torch.autocast("cuda"):
                up = F.interpolate(self.proj(x), scale_factor=2.0)
                cache.index_copy_(0, pos, up)
            return cache
    """
    (d,) = findings(body, "MPC105")
    assert "computed in float32 by autocast" in d.message


def _upsample_ops() -> list[str]:
    import json
    from pathlib import Path

    import mpcheck

    data = json.loads((Path(mpcheck.__file__).parent / "data" / "autocast_ops.json").read_text())
    return sorted(
        {
            op
            for dev in ("cuda", "cpu")
            for ops in data[dev].values()
            for op in ops
            if op.startswith("upsample")
        }
    )


def test_the_fix_makes_the_bad_kv_cache_fixture_run(tmp_path: Path) -> None:
    """The warning's fix is not cosmetic: under real CPU autocast the fixed program runs."""
    pytest.importorskip("torch")
    path = FIXTURES / "mpc105" / "bad_autocast_kv_cache_index_copy.py"
    run_fixed_fixture("MPC105", path, tmp_path)


@pytest.mark.parametrize(
    "text",
    [
        "x(out=1)",
        "x( \n out =2",
        "dropout=1",
        "(out==1)",
        "f(a, out=b)",
        "_C.foo",
        "a_C.foo",
        "torch._C._nn",
        "index_add_(",
        "xindex_add(",
        "index_adds",
        "input + output",
        "x.put(",
        "natten",
        "nattens.",
        " Fn.apply(",
        "",
        "out=1",
        ",out=",
        "lerp_",
    ],
)
def test_the_text_prefilter_finds_what_one_word_bounded_pattern_finds(text: str) -> None:
    """The file prefilter of the ambient walk searches each name as itself and checks the
    boundary before it by hand: the same answer as the pattern led by ``\\b`` it replaced."""
    import re

    from mpcheck.engine.ambient import _names_blind
    from mpcheck.knowledge import torch_api as T

    names = "|".join(map(re.escape, sorted({*T.DTYPE_STRICT_WRITES, *T.KERNEL_PACKAGES})))
    pattern = rf"\b(?:{names})\b|[(,]\s*out\s*=(?!=)|\.apply\(|\b_C\."
    assert _names_blind(text.encode()) == (re.search(pattern, text) is not None)
