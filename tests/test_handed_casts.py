"""A model cast by the helper it is handed to, and training objects made by helpers of other
files, checked through the CLI on small projects.

``nn.Module.to`` (and accelerate's ``set_module_tensor_to_device(model, name, ...,
dtype=dtype)`` over a state dict's keys) changes the module itself, so the caller's model is
cast too; Python runs a list comprehension's element and a loop's body once per item, so a
half model among unknown ones stays half; an ``Accelerator`` or an optimizer returned by a
helper of another file is still one. The whole case, proven under torch, is
``fixtures/xfile/*_helper_casts_handed_model`` (tests/test_xfile.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mpcheck.project.summary import Function, ModuleSummary, Value
from tests.support import project_findings as findings

LOADER = """
import torch
from accelerate.utils.modeling import set_module_tensor_to_device
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x)


def load_state(model, state_dict, device, dtype=None):
    for key in list(state_dict.keys()):
        set_module_tensor_to_device(model, {name}, device, value=state_dict.pop(key), dtype=dtype)
    return "ok"
"""

BUILD = """
def load(state_dict, dtype=None):
    unet = Net()
    {load}
    return unet
"""

TRAIN = """
import torch

from loader import load


def train(args, state_dict):
    weight_dtype = torch.float16 if args.mixed_precision == "fp16" else torch.float32
    unet = load(state_dict, dtype=weight_dtype)
    {models}
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    loss = unet(torch.randn(2, 4, dtype=weight_dtype)).float().mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""

PARAMS = "params = list(unet.parameters())"
LOAD = 'load_state(unet, state_dict, "cpu", dtype=dtype)'


def step_row(text: str) -> int:
    lines = textwrap.dedent(text).lstrip().splitlines()
    return next(i for i, line in enumerate(lines, 1) if "scaler.step(" in line)


def project(*, name: str = "key", load: str = LOAD, apart: bool = False, models: str = PARAMS):
    """loader.py (and weights.py when the tensor setter lives ``apart``) and train.py."""
    loader = LOADER.format(name=name)
    build = BUILD.format(load=load)
    files = {"train.py": TRAIN.format(models=models)}
    if apart:
        files["weights.py"] = loader
        files["loader.py"] = "import torch\nfrom weights import Net, load_state\n" + build
    else:
        files["loader.py"] = loader + build
    return files


@pytest.mark.parametrize("apart", [False, True], ids=["same-file", "other-file"])
def test_a_model_cast_by_the_helper_it_is_handed_is_cast(tmp_path: Path, apart: bool) -> None:
    files = project(apart=apart)
    row = step_row(files["train.py"])
    assert findings(tmp_path, files) == {("train.py", row, "MPC201")}


@pytest.mark.parametrize(
    ("name", "load"),
    [
        ("key", 'load_state(unet, state_dict, "cpu")'),  # no dtype: each tensor keeps its own
        ("key", 'load_state(unet, state_dict, "cpu", dtype=None)'),
        ('"proj.weight"', LOAD),  # one named tensor, not the model
    ],
    ids=["dtype-not-passed", "dtype-none", "one-tensor"],
)
def test_a_helper_that_casts_nothing_leaves_the_model(tmp_path: Path, name: str, load: str) -> None:
    assert findings(tmp_path, project(name=name, load=load)) == set()


@pytest.mark.parametrize(
    "models",
    [
        # a comprehension over a list display keeps each item (DDP unwrapping)
        "encoder, unet = [m.module if hasattr(m, 'module') else m for m in [make(), unet]]\n"
        "    params = list(unet.parameters())",
        # a loop over models, one of them unknown, runs its body for each
        "params = []\n    for m in [make(), unet]:\n        params.extend(m.parameters())",
    ],
    ids=["comprehension", "loop"],
)
def test_a_half_model_beside_an_unknown_one_stays_half(tmp_path: Path, models: str) -> None:
    files = project(models=models)
    files["train.py"] = files["train.py"].replace(
        "from loader import load", "from loader import load\nfrom zoo import make"
    )
    row = step_row(files["train.py"])
    assert findings(tmp_path, files) == {("train.py", row, "MPC201")}


ACCELERATE = """
import torch

from loader import load
from setup import get_optimizer, make_accelerator


def train(args, state_dict):
    accelerator = make_accelerator(args)
    unet = load(state_dict, dtype=torch.float16)
    _, optimizer = get_optimizer(args, trainable_params=list(unet.parameters()))
    unet, optimizer = accelerator.prepare(unet, optimizer)
    loss = unet(torch.randn(2, 4, dtype=torch.float16)).float().mean()
    accelerator.backward(loss)
    accelerator.clip_grad_norm_(unet.parameters(), 1.0)
    optimizer.step()
"""

SETUP = """
import torch
from accelerate import Accelerator


def make_accelerator(args):
    {plugin}
    return Accelerator(mixed_precision={mode}, deepspeed_plugin=plugin)


def get_optimizer(args, trainable_params):
    return "AdamW", torch.optim.AdamW(trainable_params, lr=args.lr)
"""

NO_PLUGIN = "plugin = None"
HELPER_PLUGIN = "plugin = prepare_deepspeed_plugin(args)"


@pytest.mark.parametrize(
    ("mode", "plugin", "reported"),
    [
        ("args.mixed_precision", NO_PLUGIN, True),  # set at launch: fp16 on some runs
        ('"fp16"', HELPER_PLUGIN, True),  # DeepSpeed on some runs only
        ('"bf16"', NO_PLUGIN, False),  # no loss scaling in bfloat16
        ('"fp16"', "plugin = DeepSpeedPlugin(zero_stage=2)", False),  # DeepSpeed scales
    ],
    ids=["launch", "plugin-maybe-none", "bf16", "deepspeed"],
)
def test_an_accelerator_and_optimizer_made_in_another_file_still_train(
    tmp_path: Path, mode: str, plugin: str, reported: bool
) -> None:
    files = project()
    files["train.py"] = ACCELERATE
    setup = SETUP.format(mode=mode, plugin=plugin)
    files["setup.py"] = "from accelerate.utils import DeepSpeedPlugin\n" + setup
    lines = textwrap.dedent(ACCELERATE).lstrip().splitlines()
    row = next(i for i, line in enumerate(lines, 1) if "clip_grad_norm_" in line)
    found = findings(tmp_path, files)
    assert found == ({("train.py", row, "MPC201")} if reported else set())


def test_a_summary_keeps_casts_and_accelerator_modes() -> None:
    """``Function.casts`` and ``Value.mode`` survive the summary cache."""
    function = Function(("model", "dtype"), Value("accelerator", mode="fp16+deepspeed"), ((0, 1),))
    summary = ModuleSummary("pkg.loader", "pkg/loader.py", functions={"load": function})
    again = ModuleSummary.from_json(summary.to_json())
    assert again is not None
    assert again.functions["load"] == function


def test_a_helper_binding_its_parameter_to_another_model_leaves_the_callers(
    tmp_path: Path,
) -> None:
    """``model = Model.from_pretrained(..., torch_dtype=weight_dtype)`` in a helper (a final
    validation loading the saved model) is another object: the caller's stays float32."""
    files = project()
    files["loader.py"] = files["loader.py"].replace(
        LOAD, "validate(unet, final=True)"
    ) + textwrap.dedent(
        """

        def validate(model, final):
            if final:
                model = Net().to(dtype=torch.float16)
            return model(torch.randn(1, 4, dtype=torch.float16))
        """
    )
    assert findings(tmp_path, files) == set()


LOADERS = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)


def load_models(state_dict, dtype=None):
    model = Net()
    model.load_state_dict(state_dict)
    model.to(dtype=dtype)
    return model


def match_mixed_precision(args, weight_dtype):
    if args.full_fp16:
        return weight_dtype
    return None
"""

TARGETS = """
import torch

from loaders import load_models, match_mixed_precision


def load_target_model(args, weight_dtype):
    return load_models({}, {target})
"""

TRAINER = """
import torch

from targets import load_target_model


def train(args, loader):
    weight_dtype = torch.float16 if args.fp16 else torch.float32
    model = load_target_model(args, {handed})
    optimizer = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler("cpu")
    for x in loader:
        scaler.scale(model(x).float().mean()).backward()
        scaler.step(optimizer)
        scaler.update()
"""


@pytest.mark.parametrize("same_file", [False, True], ids=["helpers-apart", "helpers-together"])
@pytest.mark.parametrize(
    ("handed", "target", "reported"),
    [
        ("weight_dtype", "weight_dtype", True),  # the working dtype: float16 on fp16 runs
        ("None", "match_mixed_precision(args, weight_dtype)", False),  # None: nothing cast
        # the working dtype on the flag's runs only: no evidence which runs those are
        ("weight_dtype", "match_mixed_precision(args, weight_dtype)", False),
    ],
    ids=["working-dtype", "none", "dtype-or-none"],
)
def test_a_model_returned_cast_to_a_parameters_dtype_follows_the_callers_argument(
    tmp_path: Path, handed: str, target: str, reported: bool, same_file: bool
) -> None:
    """A helper returns the model it loads cast to the dtype its caller hands it, through a
    helper that returns that dtype or None: the working dtype may be float16, None casts
    nothing (sd-scripts' sd3 loader and its fix)."""
    targets = TARGETS.replace("{target}", target)
    files = {"loaders.py": LOADERS, "targets.py": targets}
    if same_file:  # (the summary of a function of the same file, substituted at the call)
        files = {"targets.py": LOADERS + targets.split("\n\n\n", 1)[1]}
    files["train.py"] = TRAINER.format(handed=handed)
    found = findings(tmp_path, files, ("MPC201",))
    assert found == ({("train.py", 13, "MPC201")} if reported else set())
