"""The weight reparametrisations of ``MODULE_WRAPPERS`` return the module they are given, and
a cast of the model casts what they add: the layer keeps the model's dtype (torch 2.13)."""

from __future__ import annotations

import importlib
import warnings

import pytest

from mpcheck.knowledge.torch_api import MODULE_WRAPPERS

torch = pytest.importorskip("torch")


def _function(qual: str) -> object:
    module, _, name = qual.rpartition(".")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("qual", sorted(MODULE_WRAPPERS))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_wrapped_module_is_the_module_and_casts_with_it(qual: str, dtype: str) -> None:
    wrap = _function(qual)
    layer = torch.nn.Linear(4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # (the legacy weight_norm)
        wrapped = wrap(layer)  # type: ignore[operator]
    assert wrapped is layer
    half = getattr(torch, dtype)
    model = torch.nn.Sequential(wrapped).to(half)
    assert {p.dtype for p in model.parameters()} == {half}
    assert model(torch.randn(2, 4, dtype=half)).dtype == half
    with pytest.raises(RuntimeError):
        model(torch.randn(2, 4))  # float32 into the cast layer
