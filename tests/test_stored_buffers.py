"""Tensors stored into a module's registered buffers, and when the module's cast reaches them.

``Module.__setattr__`` stores into a buffer any value assigned to a name registered as one
(``register_buffer("pe", None)`` too), and ``model.half()`` casts every floating buffer:
what construction stores there is half once the model is cast, what ``forward`` stores after
the cast is what it made. A plain attribute is never cast. Each test pairs the pattern with
its near miss.
"""

from __future__ import annotations

import textwrap

import pytest

from mpcheck.diagnostics import Diagnostic
from tests.support import check

HEADER = "import torch\nfrom torch import nn\n"  # lines 1-2

STORED = """
    class Net(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.proj = nn.Linear(n, n)
            {register}
            self.fill(n)

        def fill(self, n):
            table = torch.zeros(n, n)
            self.table = table

        def forward(self, x):
            {refill}
            return self.proj(x) @ self.table


    def main():
        model = Net(8).half()
        return model(torch.randn(2, 8).half())
    """


def codes(body: str, **fields: str) -> list[tuple[str, int]]:
    found: list[Diagnostic] = check(HEADER + textwrap.dedent(body).format(**fields))
    return [(d.code, d.start.row) for d in found]


@pytest.mark.parametrize(
    "register",
    [
        'self.register_buffer("table", None)',
        'self.register_buffer("table", None, persistent=False)',
        'self.register_buffer("table", torch.ones(n, n))',
    ],
)
def test_a_table_construction_stores_into_a_buffer_is_cast_with_the_model(register: str) -> None:
    assert codes(STORED, register=register, refill="pass") == []


def test_a_table_stored_as_a_plain_attribute_stays_float32() -> None:
    assert codes(STORED, register="pass", refill="pass") == [("MPC102", 12)]


def test_a_table_forward_stores_after_the_cast_stays_float32() -> None:
    register = 'self.register_buffer("table", None)'
    refill = "self.fill(x.shape[-1])"
    assert codes(STORED, register=register, refill=refill) == [("MPC102", 12)]


ONE_PATH = """
    class Net(nn.Module):
        def __init__(self, n, coef=None):
            super().__init__()
            self.proj = nn.Linear(n, n)
            if coef is None:
                coef = torch.rand(n)
            else:
                coef = torch.from_numpy(coef)
            {store}

        def forward(self, x):
            h = self.proj(x)
            return torch.div(h, self.coef.expand(h.shape))


    def main():
        model = Net(8).half()
        return model(torch.randn(2, 8).half())
    """


def test_a_buffer_float32_on_one_path_is_cast_with_the_model() -> None:
    store = 'self.register_buffer("coef", coef.unsqueeze(0))'
    assert codes(ONE_PATH, store=store) == []


def test_a_plain_attribute_float32_on_one_path_stays_so() -> None:
    assert codes(ONE_PATH, store="self.coef = coef.unsqueeze(0)") == [("MPC102", 9)]


ROTARY = """
    class Rotary(nn.Module):
        def __init__(self, dim):
            super().__init__()
            {register}
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
            self.inv_freq = inv_freq

        def forward(self, x):
            t = torch.arange(x.shape[1], device=x.device).type_as(self.inv_freq)
            freqs = torch.outer(t, self.inv_freq)
            return freqs.cos()


    def main():
        model = Rotary(8).to(torch.bfloat16)
        return model(torch.randn(1, 3000, 4, dtype=torch.bfloat16))
    """


def test_frequencies_stored_into_a_buffer_are_cast_into_half_phases() -> None:
    register = 'self.register_buffer("inv_freq", None, persistent=False)'
    assert codes(ROTARY, register=register) == [("MPC303", 13)]


def test_frequencies_kept_as_a_plain_attribute_stay_float32() -> None:
    assert codes(ROTARY, register="pass") == []
