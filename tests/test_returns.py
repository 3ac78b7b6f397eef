"""Which project functions return tensors only (:mod:`mpcheck.project.returns`): a cast of
their value casts no model."""

from __future__ import annotations

import re

from mpcheck.project.records import blank
from mpcheck.project.returns import tensor_returns

_DEF = re.compile(rb"^([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE)
IMPORTS = {"torch": "torch", "F": "torch.nn.functional"}


def returning(source: str) -> tuple[str, ...]:
    code = blank(source.encode())
    return tensor_returns(code, list(_DEF.finditer(code)), "m", IMPORTS)


def test_torch_values_arithmetic_comparisons_and_tensor_methods_are_tensors() -> None:
    source = """
import torch
import torch.nn.functional as F

def gumbel(shape):
    u = torch.rand(shape) * 0.99998 + 0.00001
    return -torch.log(-torch.log(u))

def timing(length, channels):
    signal = torch.cat([torch.sin(p), torch.cos(p)], 0)
    signal = F.pad(signal, [0, 0, 0, channels % 2])
    return signal.view(1, channels, length)

def mask(length, max_length=None):
    if max_length is None: return None
    x = torch.arange(max_length)
    return x.unsqueeze(0) < length.unsqueeze(1)

def causal(n):
    return torch.tril(torch.ones(n, n))[None].to(torch.float16), 2 * n
"""
    assert returning(source) == ("m.causal", "m.gumbel", "m.mask", "m.timing")


def test_what_may_be_a_model_is_unknown() -> None:
    source = """
import torch

def instantiate_from_config(config):
    return get_obj_from_str(config["target"])(**config.get("params", dict()))

def make(cfg):
    return cfg.cls()

def passthrough(model):
    return model.to("cuda")

def first(models):
    return models[0]

def loaded(path):
    m = torch.load(path)
    return m

def looped(xs):
    out = torch.zeros(1)
    for out in xs:
        pass
    return out

def maybe(x):
    if x: return x
    return torch.zeros(1)

def nested():
    def inner():
        return model
    return torch.zeros(1)

def compiled(model):
    return torch.compile(model)

def listed(a):
    return [a]
"""
    assert returning(source) == ()


def test_a_list_of_models_has_arithmetic_too() -> None:
    assert returning("def pair(model):\n    return [model] * 2\n") == ()
    assert returning("def pair(m):\n    x = m.parts\n    return (x + [m]) * 2\n") == ()


def test_a_parenthesised_operand_is_no_literal_but_a_tuple_is() -> None:
    """``x / (n - 1)`` is arithmetic on a tensor; ``(model,) * 2`` and ``[model] * 2`` repeat
    a sequence of models."""
    source = """
import torch

def scale(n):
    emb = torch.log(torch.tensor(10000.0)) / (n - 1)
    return emb

def pair(model):
    return (model,) * 2

def many(model):
    return [model] * 2
"""
    assert returning(source) == ("m.scale",)


def test_a_library_value_is_unknown_and_a_project_value_a_need() -> None:
    """What a function of another project module returns is settled at the join (a need);
    a value of the standard library or of a named library is no project function's, so the
    function is unknown here and its record carries nothing for it."""
    source = """
import json

def parsed(s):
    return json.loads(s)

def page(x):
    return render(x)

def masked(n, t):
    return commons.sequence_mask(n, t)

def array(x):
    return np.asarray(x)
"""
    imports = {
        **IMPORTS,
        "json": "json",
        "render": "flask.render_template",
        "commons": "pkg.commons",
        "np": "numpy",
    }
    code = blank(source.encode())
    found = tensor_returns(code, list(_DEF.finditer(code)), "m", imports, ("numpy",))
    assert found == ("m.masked<pkg.commons.sequence_mask", "m.page<flask.render_template")


def test_a_library_function_is_no_tensor_method_of_its_module() -> None:
    """``re.sub(...)`` and ``np.sqrt(...)`` call a module's function, not the tensor methods
    ``sub`` and ``sqrt``: unknown (a string, an array), as before they were needs."""
    source = """
import re
import numpy as np

def collapse(text):
    return re.sub(r"\\s+", " ", text)

def energy(x):
    return np.sqrt(np.mean(x**2))
"""
    imports = {**IMPORTS, "re": "re", "np": "numpy"}
    code = blank(source.encode())
    assert tensor_returns(code, list(_DEF.finditer(code)), "m", imports, ("numpy",)) == ()
