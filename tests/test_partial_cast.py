"""A partial half conversion (:mod:`mpcheck.engine.partial_cast`) and factory kwargs
(:mod:`mpcheck.engine.factory_kwargs`): what casts a part, what reaches a parameter."""

from __future__ import annotations

import textwrap

import libcst as cst

from mpcheck.engine.factory_kwargs import hands_dtype
from mpcheck.engine.partial_cast import casts_to_half, converted_parts


def _fn(code: str) -> cst.FunctionDef:
    stmt = cst.parse_module(textwrap.dedent(code)).body[0]
    assert isinstance(stmt, cst.FunctionDef)
    return stmt


def _methods(code: str) -> dict[str, cst.FunctionDef]:
    cls = cst.parse_module(textwrap.dedent(code)).body[0]
    assert isinstance(cls, cst.ClassDef)
    return {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}


def test_a_converter_casts_its_argument_in_place() -> None:
    assert casts_to_half(
        _fn(
            """
            def convert_module_to_f16(l):
                if isinstance(l, (nn.Conv1d, nn.Conv2d)):
                    l.weight.data = l.weight.data.half()
            """
        )
    )
    assert casts_to_half(_fn("def f(m):\n    m.to(torch.bfloat16)\n"))
    assert not casts_to_half(_fn("def f(m):\n    m.weight.data = m.weight.data.float()\n"))
    assert not casts_to_half(_fn("def f(m, x):\n    x.half()\n"))  # (not its first argument)
    assert not casts_to_half(_fn("def f(m):\n    y = m.weight.half()\n"))  # a copy


def test_a_method_converting_some_parts_names_them() -> None:
    methods = _methods(
        """
        class UNet(nn.Module):
            def __init__(self):
                self.blocks.half()
            def convert_to_fp16(self):
                self.input_blocks.apply(convert_module_to_f16)
                self.middle_block.apply(convert_module_to_f16)
                self.out.apply(init_weights)
        """
    )

    def halves(expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Name) and expr.value == "convert_module_to_f16"

    assert converted_parts(methods, halves) == (
        "convert_to_fp16",
        ("input_blocks", "middle_block"),
    )


def test_a_method_converting_the_whole_module_is_no_partial_conversion() -> None:
    methods = _methods(
        """
        class UNet(nn.Module):
            def to_half(self):
                self.blocks.half()
                self.half()
        """
    )
    assert converted_parts(methods, lambda expr: False) is None


def test_factory_kwargs_are_a_dtype_parameter_handed_on() -> None:
    assert hands_dtype(
        _fn(
            """
            def __init__(self, d, device=None, dtype=None):
                factory_kwargs = {"device": device, "dtype": dtype}
                self.proj = nn.Linear(d, d, **factory_kwargs)
            """
        )
    )
    assert not hands_dtype(_fn("def __init__(self, d, dtype=None):\n    self.d = d\n"))
    assert not hands_dtype(_fn("def forward(self, x, dtype=None):\n    return x.to(dtype)\n"))


def test_another_method_casting_the_whole_module_wins() -> None:
    methods = _methods(
        """
        class UNet(nn.Module):
            def convert_to_fp16(self):
                self.blocks.half()
            def to_half(self):
                self.to(torch.float16)
        """
    )
    assert converted_parts(methods, lambda expr: False) is None


def test_a_dtype_only_kept_is_not_handed() -> None:
    kept = "def __init__(self, d, dtype=None):\n    self.dtype = dtype\n"
    assert not hands_dtype(_fn(kept))
    assert hands_dtype(
        _fn("def __init__(self, d, dtype=None):\n    self.p = nn.Linear(d, d, dtype=dtype)\n")
    )
