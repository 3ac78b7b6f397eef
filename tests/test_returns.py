"""Which project functions return tensors only (:mod:`mpcheck.project.returns`): a cast of
their value casts no model."""

from __future__ import annotations

import re

from mpcheck.project.records import blank
from mpcheck.project.returns import annotated_returns, returned_annotation, tensor_returns

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
    function is unknown here and its record carries nothing for it; a data library's value
    (numpy's: an array) is no model."""
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
    assert found == (
        "m.array",
        "m.masked<pkg.commons.sequence_mask",
        "m.page<flask.render_template",
    )


def test_a_library_function_is_no_tensor_method_of_its_module() -> None:
    """``re.sub(...)`` and ``np.sqrt(...)`` call a module's function, not the tensor methods
    ``sub`` and ``sqrt``: ``re``'s is unknown (a string), as before they were needs; numpy's
    is an array, no model."""
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
    found = tensor_returns(code, list(_DEF.finditer(code)), "m", imports, ("numpy",))
    assert found == ("m.energy",)


def test_a_return_annotation_naming_no_module_is_a_tensor_function() -> None:
    """PEP 484: the annotation says what it returns, whatever the body returns it from."""
    source = """
import torch
from typing import Optional, Tuple

def mask(x) -> Optional[torch.Tensor]:
    return helper(x)

def pair(x) -> Tuple[torch.FloatTensor, Tuple[dict, dict], Optional[int]]:
    return helper(x)

def gate(x: torch.Tensor) -> torch.Tensor | None:
    return x if x is not None else other()

def model(x) -> torch.nn.Module:
    return helper(x)

def made(x) -> Net:
    return helper(x)

def loose(x):
    return helper(x)
"""
    assert returning(source) == ("m.gate", "m.mask", "m.pair")


def test_annotated_returns_name_the_returned_classes_by_position() -> None:
    assert annotated_returns(b"Net") == [(-1, b"Net")]
    assert annotated_returns(b"Optional[models.Net]") == [(-1, b"models.Net")]
    assert annotated_returns(b"Net | None") == [(-1, b"Net")]
    assert annotated_returns(b"tuple[Tokenizer, Optional[Net]]") == [
        (0, b"Tokenizer"),
        (1, b"Net"),
    ]
    assert annotated_returns(b"Tuple[Dict[str, int], Net]") == [(1, b"Net")]
    assert annotated_returns(b"list[Net]") == []
    assert annotated_returns(b"Union[Net, Other]") == []


def test_the_return_annotation_is_read_across_lines() -> None:
    code = b"def load(\n    path,\n    dtype=(1, 2),\n) -> tuple[\n    Net, Vae\n]:\n    pass\n"
    header = next(_DEF.finditer(code))
    assert returned_annotation(code, header.end()) == b"tuple[ Net, Vae ]"
    assert returned_annotation(b"def f(x):\n    pass\n", 5) is None


def test_an_item_built_of_a_library_class_is_no_project_model() -> None:
    source = """
import torch
from torch import nn
from transformers import CLIPTextModel, AutoModel
from app.unet import UNet

def load(path, cfg):
    with init_empty_weights():
        te = CLIPTextModel._from_config(cfg)
    head = nn.Linear(4, 4).to("cpu")
    te = te.eval()
    return te, head, UNet(), torch.ones(1), None

def auto(path, cfg):
    return AutoModel.from_pretrained(path), CLIPTextModel.from_config(cfg)

def whole(path):
    return CLIPTextModel.from_pretrained(path).eval()

def mixed(flag, model):
    if flag:
        return model, CLIPTextModel.from_config(flag)
    return CLIPTextModel.from_config(flag), None

def held(model, cfg):
    return nn.Sequential(model, nn.SiLU()), nn.Sequential(nn.Conv2d(5, 4, 3)), CLIPTextModel(cfg)
"""
    imports = {
        **IMPORTS,
        "nn": "torch.nn",
        "CLIPTextModel": "transformers.CLIPTextModel",
        "AutoModel": "transformers.AutoModel",
        "UNet": "app.unet.UNet",
    }
    code = blank(source.encode())
    found = tensor_returns(code, list(_DEF.finditer(code)), "m", imports, ("transformers",))
    # (a project class's build is no tensor either: ``UNet`` is a need the join never meets;
    # a library class's constructor holds what it is handed: data only, no module)
    assert set(found) == {
        "m.load#0",
        "m.load#1",
        "m.load#2<app.unet.UNet",
        "m.load#3",
        "m.load#4",
        "m.auto#1",
        "m.whole#",
        "m.mixed#1",
        "m.held#1",
    }


def test_a_nested_function_returns_for_itself() -> None:
    """``return model`` in a nested ``def`` is the nested function's; the outer function's
    own returns say what it returns."""
    source = """
import torch

def outer():
    def inner():
        return model
    return torch.zeros(1)

def handing():
    def inner():
        return torch.zeros(1)
    return inner
"""
    assert returning(source) == ("m.outer",)


def test_a_parameter_used_as_a_tensor_before_it_is_returned_is_a_tensor() -> None:
    """A function returning what its caller hands it returns a model if the caller hands
    one; a parameter the body first uses as a tensor, in a statement every call runs
    (``tensor.uniform_(...)``, ``x.view(...)``, ``B, T = x.shape``), is a tensor or an
    array: a module has none of those, so a call handing one raises there. (A keyword
    argument, ``dtype=torch.bool``, binds no name of the body.)"""
    source = """
import math
import torch

def trunc_normal_(tensor, mean, std):
    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
    with torch.no_grad():
        tensor.uniform_(-1, 1)
        tensor.erfinv_()
        return tensor

def pack(latents, rows):
    latents = latents.view(rows, -1)
    latents = latents.permute(1, 0)
    return latents

def crop(x, length):
    B, T = x.shape
    if T < length:
        return torch.zeros(B, length), x
    return x[:, :length], torch.ones((B, length), dtype=torch.bool)
"""
    assert returning(source) == ("m.crop", "m.pack", "m.trunc_normal_")


def test_a_parameter_some_runs_use_as_a_tensor_may_be_a_model() -> None:
    """A tensor use under a condition, after an early return, in a short circuit or only
    after the parameter is rebound says nothing of what every caller hands."""
    source = """
import torch

def branched(value):
    if isinstance(value, torch.Tensor):
        value.contiguous()
    return value

def early(x):
    if isinstance(x, torch.nn.Module):
        return x
    x.view(-1)
    return x

def short(x, flat):
    flat and x.view(-1)
    return x

def rebound(x):
    x = x.prepare()
    x.view(-1)
    return x

def plain(model):
    model.eval()
    return model
"""
    assert returning(source) == ()


def test_parameter_reads_and_data_library_values_are_no_model() -> None:
    """A module's parameters read (``layer.weight``, ``.bias``, ``.data``, ``.grad``) are
    tensors, its parameter and state readers return tensors' iterators and dicts; what a data
    library returns (numpy, PIL, torchaudio's loader) is an array, an image or samples, and
    so is what a torchvision transform the body builds makes of its input, and what their
    values' methods return (``Image.open(p).convert("RGB")``)."""
    source = """
import numpy as np
import torchaudio
from PIL import Image

def lora_weights(layer):
    W = layer.weight
    return W, layer.lora_A.weight, layer.bias

def state(model):
    return model.state_dict()

def image(path):
    if path.startswith("http"):
        picture = Image.open(fetch(path)).convert("RGB")
    else:
        picture = Image.open(path).convert("RGB")
    return picture

def audio(path):
    return torchaudio.load(path)

def array(path):
    return np.load(path)

def resized(samples, size):
    transform = T.Compose([T.Resize(size), T.CenterCrop(size)])
    return transform(samples)

def built(samples, cfg):
    transform = build_transform(cfg)
    return transform(samples)
"""
    imports = {
        **IMPORTS,
        "np": "numpy",
        "torchaudio": "torchaudio",
        "Image": "PIL.Image",
        "T": "torchvision.transforms",
        "build_transform": "timm.data.create_transform",
    }
    code = blank(source.encode())
    found = tensor_returns(code, list(_DEF.finditer(code)), "m", imports, ("numpy", "timm"))
    assert found == ("m.array", "m.audio", "m.image", "m.lora_weights", "m.resized", "m.state")


def test_calling_a_parameter_annotated_as_a_torch_module_gives_activations() -> None:
    """``norm(x)`` of ``norm: nn.Module`` runs its ``forward``: activations (a tensor or a
    tuple of them), never a model; an unannotated parameter may be a factory, and one the
    body binds anew may hold anything."""
    source = """
import torch
from torch import nn

def through(norm: nn.Module, x: torch.Tensor, cond=None):
    if cond is not None:
        return norm(x, cond=cond)
    return norm(x)

def typed(norm: torch.nn.LayerNorm, x):
    return norm(x)

def factory(make, x):
    return make(x)

def rebound(norm: nn.Module, x):
    norm = pick(norm)
    return norm(x)

def project(block: Block, x):
    return block(x)
"""
    code = blank(source.encode())
    imports = {**IMPORTS, "nn": "torch.nn"}
    assert tensor_returns(code, list(_DEF.finditer(code)), "m", imports) == ("m.through", "m.typed")
