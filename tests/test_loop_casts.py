"""``for model in models: model.half()``: a module's cast changes the object the loop holds,
so each model the loop goes over (a literal tuple's names, or a list, also one handed to a
helper that loops over it) is cast afterwards."""

from __future__ import annotations

from tests.support import check

HEAD = """
import copy
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        return self.proj(x)

"""


def codes(body: str) -> list[str]:
    return [d.code for d in check(HEAD + body)]


def test_each_model_of_a_literal_tuple_is_cast() -> None:
    body = """
def main():
    a, b = Net(), Net()
    for m in (a, b):
        m.half()
    return b(torch.randn(2, 8))
"""
    assert codes(body) == ["MPC102"]
    assert codes(body.replace("m.half()", "m.float()")) == []


def test_a_copy_made_in_the_loop_is_another_object() -> None:
    body = """
def main():
    a, b = Net(), Net()
    for m in (a, b):
        m = copy.deepcopy(m)
        m.half()
    return b(torch.randn(2, 8))
"""
    assert codes(body) == []


def test_a_helper_that_casts_each_model_of_the_list_it_is_handed() -> None:
    body = """
def optimize_models(fp16, models):
    for model in models:
        if fp16:
            model.half()


def main(fp16):
    models = [Net(), Net()]
    optimize_models(fp16, models)
    x = torch.randn(2, 8)
    return models[0](x)


main(True)
"""
    assert codes(body) == ["MPC102"]
    assert codes(body.replace("model.half()", "model.eval()")) == []
