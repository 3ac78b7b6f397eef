"""``einops.einsum`` is ``torch.einsum`` with the pattern last and axes named by words: the
engine reads its pattern in torch's spelling (:func:`einops_equation`), and torch bears out
what the spelling predicts (a contraction refuses mixed dtypes, a broadcast product promotes)."""

from __future__ import annotations

import pytest

from mpcheck.knowledge.torch_api import einops_equation, einsum_contracts


@pytest.mark.parametrize(
    ("pattern", "equation", "contracts"),
    [
        ("b i d, b j d -> b i j", "abc,adc->abd", True),
        ("batch head i d, batch head j d -> batch head i j", "abcd,abed->abce", True),
        ("i, j -> i j", "a,b->ab", False),
        ("... i d, d -> ... i d", "...ab,b->...ab", False),
        ("b i d, d e -> b i e", "abc,cd->abd", True),
    ],
)
def test_einops_patterns_in_torch_spelling(pattern: str, equation: str, contracts: bool) -> None:
    assert einops_equation(pattern) == equation
    assert einsum_contracts(equation) is contracts


def test_too_many_axes_is_no_equation() -> None:
    assert einops_equation(" ".join(f"a{i}" for i in range(53)) + " -> a0") is None


@pytest.mark.parametrize("pattern", ["b i d, b j d -> b i j", "i, j -> i j"])
def test_torch_bears_the_spelling_out(pattern: str) -> None:
    torch = pytest.importorskip("torch")
    einops = pytest.importorskip("einops")
    equation = einops_equation(pattern)
    assert equation is not None
    dims = [len(side.split()) for side in pattern.split("->")[0].split(",")]
    half = torch.randn(*[3] * dims[0], dtype=torch.float16)
    full = torch.randn(*[3] * dims[1])
    if einsum_contracts(equation):
        with pytest.raises(RuntimeError):
            einops.einsum(half, full, pattern)
    else:
        assert einops.einsum(half, full, pattern).dtype == torch.float32
    assert torch.equal(
        einops.einsum(half.float(), full, pattern), torch.einsum(equation, half.float(), full)
    )
