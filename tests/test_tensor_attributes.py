"""A parameter handed on is not the module (issue 36, evidence of float32).

A model's attribute read off it (``model.emb.weight``, ``model.encoder``) is a part or a tensor
of it, never the model: no part holds the module holding it. So whatever is done with the
value read reaches that part at most, and a tensor (a parameter or buffer) reaches no module:
writing ``model.emb.weight`` in an optimizer's parameter groups, appending it to a list, using
it as a dict key or comparing it with ``is`` casts no class, and ``p.data = p.data.bfloat16()``
casts that one parameter. An annotated binding binds as a plain one; only a bare name aliases
the model, and a slice of a part (``layers = model.blocks[:2]``) stands for that part, whose
cast casts the classes it holds. The runtime proofs: the table below is checked against torch's
own layers, and the xfile cases ``good_parameter_groups_keep_the_model`` (its parameters stay
float32 under torch) and ``bad_slice_of_blocks_cast`` (the cast through the slice raises).
"""

from __future__ import annotations

import pytest

from mpcheck.knowledge.torch_api import TENSOR_ATTRIBUTES, TENSOR_ONLY_ATTRIBUTES, tensor_attribute
from mpcheck.project.held_parts import TENSOR
from mpcheck.project.models import ModelUses, uses_of_sources
from mpcheck.project.records import record_of

torch = pytest.importorskip("torch")
nn = torch.nn


def _registered() -> set[str]:
    """The parameter and buffer names torch's own layers register (a spread of layers)."""
    layers = [
        nn.Linear(4, 4),
        nn.Bilinear(4, 4, 4),
        nn.Conv2d(4, 4, 3),
        nn.ConvTranspose2d(4, 4, 3),
        nn.Embedding(10, 4),
        nn.LayerNorm(4),
        nn.GroupNorm(2, 4),
        nn.RMSNorm(4),
        nn.BatchNorm2d(4),
        nn.PReLU(),
        nn.MultiheadAttention(4, 2),
        nn.MultiheadAttention(4, 2, kdim=3, vdim=3, add_bias_kv=True),
        nn.RNNCell(4, 4),
        nn.LSTM(4, 4, num_layers=2, bidirectional=True, proj_size=2),
        nn.GRU(4, 4),
    ]
    with pytest.warns(FutureWarning):  # (the legacy reparametrisation: ``weight_g``, ``weight_v``)
        layers.append(nn.utils.weight_norm(nn.Linear(2, 2)))
    layers.append(nn.utils.spectral_norm(nn.Linear(2, 2)))  # ``weight_orig``, ``weight_u``
    out: set[str] = set()
    for layer in layers:
        out.update(name for name, _ in layer.named_parameters(recurse=False))
        out.update(name for name, _ in layer.named_buffers(recurse=False))
    return out


def test_each_tensor_attribute_is_registered_by_a_torch_layer() -> None:
    registered = _registered()
    assert TENSOR_ATTRIBUTES <= registered, TENSOR_ATTRIBUTES - registered
    # every name those layers register is known as a tensor (an RNN's per layer, by pattern)
    assert all(tensor_attribute(name) for name in registered), sorted(
        n for n in registered if not tensor_attribute(n)
    )
    assert not tensor_attribute("encoder") and not tensor_attribute("blocks")


def test_data_and_grad_are_a_tensors_own_and_no_modules() -> None:
    layer = nn.Linear(2, 2)
    layer(torch.randn(3, 2)).sum().backward()
    for name in TENSOR_ONLY_ATTRIBUTES:
        assert isinstance(getattr(layer.weight, name), torch.Tensor)
        assert not hasattr(layer, name)


def test_handing_a_parameter_on_casts_no_module_and_data_casts_that_tensor_only() -> None:
    """Under torch: parameter groups, a list, a dict key and ``is`` keep every dtype; a cast of
    a parameter's ``data`` changes that one tensor, not the module's others."""
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 4))
    groups = [{"params": [model[0].weight], "lr": 1e-3}, {"params": model[1].parameters()}]
    keys = {model[0].weight: 0.0}
    rest = [p for p in model.parameters() if p is not model[0].weight]
    torch.optim.AdamW(groups)
    assert len(keys) == 1 and len(rest) == 2
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    model[1].bias.data = model[1].bias.data.bfloat16()
    assert model[1].bias.dtype == torch.bfloat16 and model[1].weight.dtype == torch.float32
    assert model[0].weight.dtype == torch.float32


_MODEL = b"""import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(8, 8)
        self.scale = nn.Parameter(torch.ones(8))
        self.register_buffer("pos", torch.zeros(8), persistent=False)


class GPT(nn.Module):
    def __init__(self, given=None):
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.encoder = Encoder()
        self.blocks = nn.ModuleList([Block() for _ in range(2)])
        self.given = given
        self.head = nn.Linear(8, 8)
"""
# (a factory: defined only where a script calls it, since one nothing calls might hand its
# model to code that casts it)
_LOAD = b"\n\ndef load():\n    model = GPT()\n    return model\n"
_OTHER = (
    b"def cast_all(module):\n    return module.half()\n\n\ndef keep(module):\n    return module\n"
)
_CLASSES = ("GPT", "Encoder", "Block")


def _world(body: str, build: str = "model = GPT()") -> ModelUses:
    script = "import torch\nfrom app.model import GPT\nfrom app.other import cast_all, keep\n"
    if "load()" in build:
        script += "from app.model import load\n"
    script += "head = torch.nn.Linear(2, 2).half()  # (the project says half)\n\n"
    script += f"def main(x):\n    {build}\n"
    script += "".join(f"    {line}\n" for line in body.splitlines())
    script += "    return model(x)\n"
    sources = {
        "app/__init__.py": b"",
        "app/model.py": _MODEL + (_LOAD if "load()" in build else b""),
        "app/other.py": _OTHER,
        "run.py": script.encode(),
    }
    return uses_of_sources(sources).at("app.model")


def _state(uses: ModelUses, name: str) -> str:
    found = uses.of(name)
    if found is not None and found.kind == "cast":
        return "cast"
    if uses.float32_text(name) is not None:
        return "float32"
    opening = uses.opening(name)
    return "may" if opening is not None and "may cast it" in opening.text else "half"


@pytest.mark.parametrize(
    "body",
    [
        # an optimizer's parameter groups: parameters of parts in list and dict literals
        'opt = torch.optim.AdamW([{"params": [model.embed.weight], "lr": 1e-4},\n'
        '    {"params": model.encoder.parameters(), "lr": 1e-3}])',
        "ps = [model.head.weight, model.head.bias]\nopt = torch.optim.SGD(ps, lr=0.1)",
        "ps = []\nps.append(model.encoder.layer.weight)\nps.append(model.blocks[0].proj.bias)",
        "decay = {model.embed.weight: 0.0, model.encoder.scale: 1.0}",
        "rest = [p for p in model.parameters() if p is not model.embed.weight]",
        "rest = [p for p in model.parameters() if model.embed.weight is not p]",
        # a parameter or a buffer the class registers, handed even to a function that casts
        "cast_all(model.encoder.pos)\ncast_all(model.encoder.scale)\ncast_all(model.head.weight)",
        "cast_all([model.given.weight])",  # (a torch parameter name past an unnamed part)
        # ``.data`` belongs to a tensor: its cast casts that one parameter
        "model.encoder.scale.data = model.encoder.scale.data.bfloat16()",
        "model.embed.weight.data = model.embed.weight.data.half()",
    ],
)
def test_a_tensor_read_off_a_model_casts_no_class(body: str) -> None:
    uses = _world(body)
    assert {n: _state(uses, n) for n in _CLASSES} == dict.fromkeys(_CLASSES, "float32")


@pytest.mark.parametrize("build", ["model: GPT = GPT()", "model: GPT = load()"])
def test_an_annotated_binding_binds_as_a_plain_one(build: str) -> None:
    uses = _world("model.eval()", build)
    assert {n: _state(uses, n) for n in _CLASSES} == dict.fromkeys(_CLASSES, "float32")
    uses = _world("model.half()", build)
    assert {n: _state(uses, n) for n in _CLASSES} == dict.fromkeys(_CLASSES, "cast")


@pytest.mark.parametrize(
    ("body", "states"),
    [
        # a slice or an item of a part stands for that part: its cast casts what it holds
        ("layers = model.blocks[:1]\nlayers.half()", ("float32", "float32", "cast")),
        ("model.blocks[0].half()", ("float32", "float32", "cast")),
        ("enc = model.encoder\nenc.half()", ("float32", "cast", "float32")),
        # a part handed to a function that casts: that part's classes may be cast
        ("cast_all(model.blocks)", ("float32", "float32", "may")),
        ("cast_all(model.encoder)", ("float32", "may", "float32")),
        ("layers = model.blocks[:1]\ncast_all(layers)", ("float32", "float32", "may")),
        ("keep(model.encoder)", ("float32", "float32", "float32")),
        # the model itself handed on, aliased or cast: as before
        ("cast_all([model])", ("may", "may", "may")),
        ("alias = model\ncast_all(alias)", ("may", "may", "may")),
        ("model.to(torch.float16)", ("cast", "cast", "cast")),
        ("cast_all(model.given)", ("may", "may", "may")),  # (a part no record names)
    ],
)
def test_a_part_read_off_a_model_reaches_that_part_only(
    body: str, states: tuple[str, str, str]
) -> None:
    uses = _world(body)
    assert tuple(_state(uses, n) for n in _CLASSES) == states


def test_a_class_record_names_the_tensors_it_registers() -> None:
    """``register_buffer``/``register_parameter`` bind a tensor under the name they spell (the
    held part :data:`~mpcheck.project.held_parts.TENSOR`), which holds no class."""
    record = record_of(
        b"import torch\nfrom torch import nn\n\nclass Rope(nn.Module):\n"
        b"    def __init__(self, d):\n        super().__init__()\n"
        b"        self.register_buffer(\n            'inv_freq', torch.ones(d), persistent=False\n"
        b'        )\n        self.register_parameter("gain", nn.Parameter(torch.ones(d)))\n',
        "pkg/rope.py",
    )
    (rope,) = record.classes
    assert rope.parts == (("inv_freq", (TENSOR,)), ("gain", (TENSOR,)))
