"""A tensor's storage replaced by what type promotion made of it (``mpcheck.engine.storage``):
``p.data = p.data * v32`` and ``m.weight = nn.Parameter(m.weight * v32)`` leave that part of a
half model float32 (MPC104), while every explicit cast, a cast back after the product and the
writes that cast (``mul_``, ``copy_``, ``*=``) stay quiet. Also the parts a module's methods
return (``self.get_base_layer()``, ``mpcheck.engine.own_parts``), which the merges write into.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from mpcheck.diagnostics import Diagnostic
from mpcheck.engine.facts import Cause, Fact, Kind, Origin, Prec
from mpcheck.engine.own_parts import own_part
from mpcheck.engine.sites import Scope
from mpcheck.engine.storage import replaced, widened
from tests.support import FIXTURES, check, run_fixed_fixture, span

HEADER = "import torch\nfrom torch import nn\n"  # lines 1-2

TUNER = """
class BaseTunerLayer:
    def get_base_layer(self):
        base_layer = self
        while hasattr(base_layer, "base_layer"):
            base_layer = base_layer.base_layer
        return base_layer


class IA3Layer(BaseTunerLayer):
    adapter_layer_names = ("ia3_l",)

    def __init__(self, base_layer):
        self.base_layer = base_layer
        self.ia3_l = nn.ParameterDict({{}})


class Linear(nn.Module, IA3Layer):
    def __init__(self, base_layer):
        super().__init__()
        IA3Layer.__init__(self, base_layer)
        self.norm = nn.LayerNorm(16)

    def merge(self, name):
        base_layer = self.get_base_layer()
        ia3_l = self.ia3_l[name].data
        orig_dtype = base_layer.weight.dtype
        {merge}
"""  # the merge is line 30
MERGE_ROW = 30


def findings(body: str) -> list[Diagnostic]:
    return [d for d in check(HEADER + textwrap.dedent(body)) if d.code == "MPC104"]


def merged(line: str) -> list[Diagnostic]:
    return findings(TUNER.format(merge=line))


def related(d: Diagnostic) -> list[tuple[int, int, str]]:
    return [(r.start.row, r.start.column, r.message) for r in d.related]


def test_a_merge_that_stores_the_promoted_product_is_reported() -> None:
    (d,) = merged("base_layer.weight.data = torch.mul(base_layer.weight.data, ia3_l)")
    assert span(d) == (MERGE_ROW, 9, MERGE_ROW, 74)
    assert d.message == (
        "`base_layer.weight` is in the model's dtype, but the value stored in it here is "
        "float32: `torch.mul(base_layer.weight.data, ia3_l)` at line 30 is promoted to float32 "
        "by a float32 operand (kept in float32 beside a half base layer by peft "
        "(`adapter_layer_names`) at line 17), and assigning to `.data` does not cast; when the "
        "model runs in half precision, `base_layer.weight` is float32 from here on, apart from "
        "the rest of the model, and a layer holding it refuses the model's half activations; "
        "cast the value back to `base_layer.weight.dtype` (latent: raises if `Linear` runs in "
        "half without autocast)"
    )
    assert related(d) == [
        (30, 34, "promoted to float32 here, by type promotion with a float32 operand"),
        (
            17,
            9,
            "the float32 operand: kept in float32 beside a half base layer by peft "
            "(`adapter_layer_names`)",
        ),
    ]
    assert d.fix is not None and d.fix.applicability == "unsafe"
    assert [e.content for e in d.fix.edits] == [
        "torch.mul(base_layer.weight.data, ia3_l).to(base_layer.weight.dtype)"
    ]


@pytest.mark.parametrize(
    "line",
    [
        "base_layer.weight.data = base_layer.weight.data * ia3_l",
        "base_layer.weight.data = torch.div(base_layer.weight.data, ia3_l + 1e-8)",
        "base_layer.weight.data = (base_layer.weight.data * ia3_l).contiguous()",
        "w = base_layer.weight.data; w = w * ia3_l; base_layer.weight.data = w",
        "base_layer.weight = nn.Parameter(base_layer.weight * ia3_l)",
        "base_layer.bias.data = torch.mul(base_layer.bias.data, ia3_l.flatten())",
        "base_layer.weight.data = base_layer.weight.data + torch.randn(4, 4)",
    ],
)
def test_each_way_of_storing_a_promoted_weight_is_reported(line: str) -> None:
    assert [d.start.row for d in merged(line)] == [MERGE_ROW]


@pytest.mark.parametrize(
    "line",
    [
        "base_layer.weight.data = torch.mul(base_layer.weight.data, ia3_l).to(orig_dtype)",
        "base_layer.weight.data = (base_layer.weight.data * ia3_l).to(base_layer.weight.dtype)",
        "base_layer.weight.data = (base_layer.weight.data * ia3_l).type_as(base_layer.weight)",
        "base_layer.weight.data.mul_(ia3_l)",  # in place: keeps the weight's dtype
        "base_layer.weight.data *= ia3_l",
        "base_layer.weight.data.copy_(base_layer.weight.data * ia3_l)",  # copy_ casts
        "base_layer.weight.data = base_layer.weight.data.float()",  # explicit, on purpose
        "base_layer.weight.data = base_layer.weight.data.to(torch.float32) * ia3_l",
        "base_layer.weight.data = base_layer.weight.data * 0.5",  # a Python number
        "base_layer.weight.data = ia3_l.clone()",  # no promotion: a value of its own
        "self.norm.weight.data = self.norm.weight.data * ia3_l.flatten()",  # a norm runs it
        "self.ia3_l[name].data = self.ia3_l[name].data * 2.0",  # float32 already
    ],
)
def test_a_cast_a_write_that_casts_or_no_promotion_is_quiet(line: str) -> None:
    assert merged(line) == []


SCRIPT = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        {init}

    def forward(self, x):
        return self.proj(x)


def main():
    model = Net(){cast}
    noise = torch.randn(4, 4)
    model.proj.weight.data = model.proj.weight.data + noise
"""  # the store is line 17


def test_an_explicitly_half_model_says_its_dtype_and_where_it_was_cast() -> None:
    (d,) = findings(SCRIPT.format(init="", cast=".half()"))
    assert span(d)[:2] == (17, 5)
    assert d.message.startswith(
        "`model.proj.weight` is float16 (cast to float16 by `.half()` at line 15), but the "
        "value stored in it here is float32: `model.proj.weight.data + noise` at line 17 is "
        "promoted to float32 by a float32 operand (made float32 (the default dtype) by "
        "`torch.randn` without `dtype=` at line 16), and assigning to `.data` does not cast; "
        "`model.proj.weight` is float32 from here on"
    )


@pytest.mark.parametrize(
    "init, cast",
    [
        ("", ""),  # a float32 model: float32 plus float32 changes nothing
        ("", ".float()"),
        ("self.proj.weight.data = self.proj.weight.data * torch.rand(4, 4)", ""),  # building
    ],
)
def test_a_float32_model_or_one_being_built_is_quiet(init: str, cast: str) -> None:
    assert findings(SCRIPT.format(init=init, cast=cast)) == []


def test_parameters_upcast_on_purpose_for_a_grad_scaler_are_quiet() -> None:
    body = """
    def upcast(model):
        for p in model.parameters():
            if p.requires_grad:
                p.data = p.data.float()
                p.data = p.to(torch.float32)
    """
    assert findings(body) == []


def test_every_parameter_scaled_by_a_float32_mask_is_reported() -> None:
    body = """
    def perturb(model):
        for p in model.parameters():
            p.data = p.data * torch.rand(p.shape)
    """
    assert [span(d)[:2] for d in findings(body)] == [(6, 9)]


# -- the engine's parts ---------------------------------------------------------------------
NODE = cst.Name("x")
SCOPE = Scope(None, None, True, None)
PARAM = Fact(Kind.TENSOR, Prec.MODEL)
MIXED = Origin(NODE, Cause.ACTIVATION, "a tensor in the model's dtype")
PROMOTED = Fact(
    Kind.TENSOR,
    Prec.FULL,
    "float32",
    Origin(NODE, Cause.FACTORY, "made float32 (the default dtype) by `torch.rand`"),
    mixed=MIXED,
)


def test_widened_needs_a_half_run_target_and_a_promoted_float32_value() -> None:
    assert widened(PARAM, PROMOTED, SCOPE) is MIXED
    half = Fact(Kind.TENSOR, Prec.HALF, "float16")
    assert widened(half, PROMOTED, SCOPE) is MIXED
    assert widened(Fact(Kind.TENSOR, Prec.FULL, "float32"), PROMOTED, SCOPE) is None
    assert widened(PARAM, Fact(Kind.TENSOR, Prec.FULL, "float32"), SCOPE) is None  # cast
    assert widened(PARAM, PROMOTED, SCOPE, "LayerNorm") is None
    init = cst.parse_statement("def __init__(self): pass")
    assert isinstance(init, cst.FunctionDef)
    assert widened(PARAM, PROMOTED, Scope(init, "Net", True, None)) is None


@pytest.mark.parametrize(
    "source, tensor, value",
    [
        ("p.data = v", "p", "v"),
        ("m.weight = nn.Parameter(v)", "m.weight", "v"),
        ("m.weight = torch.nn.Parameter(data=v, requires_grad=False)", "m.weight", "v"),
        ("m.weight = v", None, None),
        ("m.weight = nn.Parameter(*vs)", None, None),
    ],
)
def test_replaced_finds_the_tensor_and_its_new_storage(
    source: str, tensor: str | None, value: str | None
) -> None:
    module = cst.parse_module("import torch\nfrom torch import nn\n" + source)
    stmt = module.body[-1]
    assert isinstance(stmt, cst.SimpleStatementLine)
    assign = stmt.body[0]
    assert isinstance(assign, cst.Assign)

    def resolve(node: cst.BaseExpression) -> str | None:
        text = module.code_for_node(node)
        return {"nn.Parameter": "torch.nn.Parameter"}.get(text, text)

    found = replaced(assign.targets[0].target, assign.value, resolve)
    shown = None if found is None else tuple(module.code_for_node(n) for n in found)
    assert shown == (None if tensor is None else (tensor, value))


def test_a_module_a_method_returns_is_a_part_in_the_callers_dtype() -> None:
    owner = Fact(Kind.MODULE, Prec.MODEL)
    assert own_part(Fact(Kind.MODULE), owner).prec is Prec.MODEL
    built = Fact(Kind.MODULE, Prec.FULL, "float32", Origin(NODE, Cause.LITERAL, "built"))
    assert own_part(built, owner) is built  # a module it builds keeps its own dtype
    assert own_part(Fact(Kind.MODULE), Fact(Kind.MODULE)).prec is Prec.UNKNOWN
    assert own_part(Fact(Kind.OTHER), owner).kind is Kind.OTHER


@pytest.mark.parametrize(
    "name", ["bad_ia3_merge_into_base_weight.py", "bad_weight_noise_widens_half_model.py"]
)
def test_the_fix_casts_back_and_the_model_runs(name: str, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    run_fixed_fixture("MPC104", FIXTURES / "mpc104" / name, tmp_path)
