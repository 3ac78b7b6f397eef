"""The engine's reading of parts built float32 beside a half base: peft's adapter containers,
layers subclassing a bitsandbytes quantized layer, and ``if torch.is_autocast_enabled():``.

Each test pairs the pattern with its near miss, so a guard that stops working fails here.
"""

from __future__ import annotations

import textwrap

import pytest

from mpcheck.diagnostics import Diagnostic
from tests.support import check

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3


def codes(body: str) -> list[tuple[str, int, int]]:
    found: list[Diagnostic] = check(HEADER + textwrap.dedent(body))
    return [(d.code, d.start.row, d.start.column) for d in found]


TUNER = """
    class Layer(nn.Module):
        adapter_layer_names = {names}

        def __init__(self, base_layer):
            super().__init__()
            self.base_layer = base_layer
            self.lora_A = {container}
            self.lora_dropout = nn.ModuleDict({{}})

        def update_layer(self, name):
            self.lora_A[name] = nn.Parameter(torch.randn(4, 16))

        def forward(self, x, name):
            result = self.base_layer(x)
            return result + F.linear({input}, self.lora_A[name]).sum()
    """
PLAIN = {
    "names": '("lora_A",)',
    "container": "nn.ParameterDict({})",
    "input": "self.lora_dropout[name](x)",
}


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"input": "x"},
        {"names": '("lora_B",)'},  # not named, but a dict of per-adapter parameters
        {"container": "BufferDict({})"},
    ],
)
def test_a_peft_adapter_fed_the_model_s_activations_is_reported(change: dict[str, str]) -> None:
    assert codes(TUNER.format(**{**PLAIN, **change})) == [("MPC104", 19, 25)]


@pytest.mark.parametrize(
    "change",
    [
        {"input": "x.to(self.lora_A[name].dtype)"},
        {"input": "self.lora_dropout[name](x.float())"},
        {"names": "()"},  # no tuner layer: its parameters follow the model
    ],
)
def test_an_adapter_given_its_own_dtype_or_no_tuner_layer_is_quiet(change: dict[str, str]) -> None:
    assert codes(TUNER.format(**{**PLAIN, **change})) == []


QUANTIZED = """
    import bitsandbytes as bnb


    class Lora({base}):
        def __init__(self, n):
            super().__init__(n, n)
            self.lora_A = nn.Linear(n, 4, bias=False{dtype})

        def forward(self, x):
            result = super().forward(x)
            {body}
            return result
    """
QPLAIN = {"base": "bnb.nn.Linear8bitLt", "dtype": "", "body": "result += self.lora_A(x).sum()"}


def test_an_adapter_built_beside_a_quantized_base_layer_is_float32() -> None:
    assert codes(QUANTIZED.format(**QPLAIN)) == [("MPC104", 15, 19)]


@pytest.mark.parametrize(
    "change",
    [
        {"base": "nn.Linear"},  # built with the model: follows its dtype
        {"body": "result += self.lora_A(x.float()).sum()"},
        {"body": "if torch.is_autocast_enabled():\n                result += self.lora_A(x).sum()"},
    ],
)
def test_an_adapter_beside_a_quantized_layer_cast_or_under_autocast_is_quiet(
    change: dict[str, str],
) -> None:
    assert codes(QUANTIZED.format(**{**QPLAIN, **change})) == []


def test_the_branch_where_autocast_is_off_is_still_checked() -> None:
    body = "if not torch.is_autocast_enabled():\n                result += self.lora_A(x).sum()"
    assert codes(QUANTIZED.format(**{**QPLAIN, "body": body})) == [("MPC104", 16, 23)]


WRAPPER = """
    class Wrapper(nn.Module):
        def __init__(self, {init_params}):
            super().__init__()
            self.backbone = {backbone}
            {init_body}

        def reset_head(self, n):
            self.head = nn.Linear(n, 2)

        def score(self, x):
            return self.head(self.backbone(x))
    """
WPLAIN = {"init_params": "backbone", "backbone": "backbone", "init_body": "pass"}


def test_a_head_built_after_the_wrapped_model_is_float32() -> None:
    assert codes(WRAPPER.format(**WPLAIN)) == [("MPC104", 15, 16)]


@pytest.mark.parametrize(
    "change",
    [
        {"init_params": "n", "backbone": "nn.Linear(n, n)"},  # builds its own model (timm)
        {"init_body": "self.reset_head(8)"},  # built while the wrapper is built
    ],
)
def test_a_head_of_a_model_built_here_or_built_by_init_is_quiet(change: dict[str, str]) -> None:
    assert codes(WRAPPER.format(**{**WPLAIN, **change})) == []


FACTORS = """
    class Hadamard(torch.autograd.Function):
        @staticmethod
        def forward(ctx, w1, w2, scale=torch.tensor(1)):
            ctx.save_for_backward(w1, w2, scale)
            return torch.einsum("ir,rj->ij", w1, w2) * scale

        @staticmethod
        def backward(ctx, grad):
            return grad, grad, None


    class Layer(nn.Module):
        adapter_layer_names = ("w1", "w2")

        def __init__(self, base_layer):
            super().__init__()
            self.base_layer = base_layer
            self.w1 = nn.ParameterDict({{}})
            self.w2 = nn.ParameterDict({{}})

        def get_delta_weight(self, name):
            weight = {delta}
            return weight.reshape(self.base_layer.weight.shape)

        def forward(self, x, name):
            return self.base_layer(x) + self._delta(name, x)


    class Linear(Layer):
        def _delta(self, name, x):
            delta_weight = self.get_delta_weight(name)
            return F.linear({input}, delta_weight)
    """
FPLAIN = {
    "delta": "Hadamard.apply(self.w1[name], self.w2[name], torch.tensor(2.0))",
    "input": "x",
}


@pytest.mark.parametrize(
    "change",
    [
        {},  # a custom autograd Function's ``apply`` returns what its ``forward`` computes
        {"delta": "self.w1[name] @ self.w2[name]"},
    ],
)
def test_a_delta_weight_from_a_base_class_method_is_float32(change: dict[str, str]) -> None:
    """``self.get_delta_weight`` defined by a base class of the file: its return is followed."""
    assert codes(FACTORS.format(**{**FPLAIN, **change})) == [("MPC104", 36, 16)]


@pytest.mark.parametrize(
    "change",
    [
        {"input": "x.to(delta_weight.dtype)"},
        {"delta": "torch.randn(4, 4, dtype=torch.float16)"},  # not the adapter's factors
    ],
)
def test_a_delta_weight_given_the_input_s_dtype_is_quiet(change: dict[str, str]) -> None:
    assert codes(FACTORS.format(**{**FPLAIN, **change})) == []


SHARED = """
    class BufferDict(nn.Module):
        pass


    class TunerLayer:
        adapter_layer_names = ()
        other_param_names = ()


    def cast_adapter_dtype(model, name):
        for module in model.modules():
            for sub in module.modules():
                if isinstance(sub, {casts}) and name in sub:
                    sub[name].data = sub[name].data.float()


    class VeraLayer(nn.Module, TunerLayer):
        adapter_layer_names = ("vera_lambda_d",)
        other_param_names = ({moved},)

        def __init__(self, base_layer):
            super().__init__()
            self.base_layer = base_layer
            self.vera_lambda_d = nn.ParameterDict({{}})
            self.vera_A: Optional[BufferDict] = None

        def update_layer(self, name, vera_A: BufferDict):
            self.vera_lambda_d[name] = nn.Parameter(torch.ones(4))
            self.vera_A = vera_A

        def forward(self, x, name):
            x = x.to(self.vera_lambda_d[name].dtype)
            return self.base_layer(x) + F.linear(x, self.vera_A[name]).sum()
    """
SPLAIN = {"casts": "(nn.ModuleDict, nn.ParameterDict)", "moved": '"vera_A"'}


def test_a_buffer_dict_the_project_s_cast_skips_follows_the_base_layer() -> None:
    """Before peft's PR #1874, ``cast_adapter_dtype`` upcast ``ParameterDict`` entries only: the
    shared ``BufferDict`` stays in the base layer's dtype, and meets the upcast input."""
    found = codes("from typing import Optional\n" + textwrap.dedent(SHARED.format(**SPLAIN)))
    assert found == [("MPC101", 38, 37)]


@pytest.mark.parametrize(
    "change",
    [
        {"casts": "(nn.ModuleDict, nn.ParameterDict, BufferDict)"},  # released peft
        {"casts": "SomeLayer"},  # a cast that names no adapter dict: peft's default belief
        {"moved": '"r"'},  # not one of the layer's per-adapter containers
    ],
)
def test_a_buffer_dict_that_is_cast_or_no_adapter_container_is_quiet(
    change: dict[str, str],
) -> None:
    source = "from typing import Optional\n" + textwrap.dedent(
        SHARED.format(**{**SPLAIN, **change})
    )
    assert codes(source) == []
