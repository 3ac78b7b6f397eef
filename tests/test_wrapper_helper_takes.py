"""A wrapper's take of a helper's parameter is what the helper's callers hand (issue 36
item 3: contexts cross files; item 5: evidence of float32 crosses files too).

``def setup_fsdp(model, ...): model = FSDP(model, ...)`` took "a model of unknown class", and
one such take opened the project's world: every class of the project became "may run in
half", a metric built in float32 in another file included. A parameter holds what the
function's callers hand, never the file's other bindings of its name: when every call of the
helper in its own file hands a model of a named class, the wrapper takes those classes. A call
from another file, a starred parameter before it, or a call handing something the file cannot
name leaves the take unknown (a premise the project asks for with ``open-world-premises``: a path
mpcheck cannot follow). The xfile case ``good_wrapper_helper_takes_named_model`` runs
under torch.
"""

from __future__ import annotations

from pathlib import Path

from mpcheck.project.records import record_of
from tests.support import project_findings

METRIC = """\
import torch
from torch import nn


def normalize(x):
    return x / torch.sqrt(torch.sum(x**2, dim=1, keepdim=True))


class Perceptual(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x):
        return normalize(self.lin(x))
"""
GPT = """\
from torch import nn


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        return self.proj(x)


def gpt_small():
    return GPT()


GPT_MODELS = {"small": gpt_small}
"""
TRAIN = """\
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision

from pkg.gpt import GPT_MODELS
from pkg.metric import Perceptual


def setup_fsdp(model, args):
    model = FSDP(model, mixed_precision=MixedPrecision(param_dtype=torch.float16))
    return model


def main(args):
    model = GPT_MODELS["small"]()
    model = setup_fsdp(model, args)
    metric = Perceptual()
    return metric(model(torch.randn(2, 8)))
"""


def test_a_helper_take_names_what_its_callers_hand() -> None:
    record = record_of(TRAIN.encode(), "pkg/train.py")
    assert record.takes == ()
    assert [(lib, f) for lib, f, _ in record.param_takes] == [("torch", "pkg.train.setup_fsdp")]
    assert any(cls.startswith("pkg.gpt.GPT_MODELS") for cls, _, _ in record.wrapped)


def test_a_call_handing_an_unnamed_model_keeps_the_take_unknown() -> None:
    code = TRAIN.replace('model = GPT_MODELS["small"]()', "model = torch.load(args.path)")
    record = record_of(code.encode(), "pkg/train.py")
    assert record.param_takes == ()
    assert len(record.takes) == 1


def test_the_metric_stays_float32_when_every_take_is_named(tmp_path: Path) -> None:
    files = {"pkg/__init__.py": "", "pkg/gpt.py": GPT, "pkg/metric.py": METRIC}
    assert project_findings(tmp_path, {**files, "pkg/train.py": TRAIN}, {"MPC302"}) == set()


def test_a_call_from_another_file_opens_the_take_again(tmp_path: Path) -> None:
    other = "import torch\n\nfrom pkg.train import setup_fsdp\n\n\ndef run(args):\n"
    other += "    return setup_fsdp(torch.load(args.path), args)\n"
    files = {"pkg/__init__.py": "", "pkg/gpt.py": GPT, "pkg/metric.py": METRIC}
    files |= {"pkg/train.py": TRAIN, "pkg/other.py": other}
    assert opened(tmp_path, files) == {("metric.py", 6, "MPC302")}


def opened(tmp_path: Path, files: dict[str, str]) -> set[tuple[str, int, str]]:
    """The findings of a project whose metric only a take of unknown models may make half:
    none by default (a path mpcheck cannot follow, in an application), and those the take's
    premise gives when the project asks for such premises (``open-world-premises``)."""
    assert project_findings(tmp_path / "default", files, {"MPC302"}) == set()
    files = {**files, ".mpcheck.toml": "open-world-premises = true\n"}
    return project_findings(tmp_path / "open", files, {"MPC302"})


def test_a_helper_handed_on_by_name_keeps_the_take_unknown() -> None:
    code = TRAIN + "\n\ndef wrap_all(models, args):\n    return list(map(setup_fsdp, models))\n"
    record = record_of(code.encode(), "pkg/train.py")
    assert record.param_takes == ()
    assert len(record.takes) == 1


def test_a_call_through_the_module_from_another_file_opens_the_take(tmp_path: Path) -> None:
    other = "import torch\n\nimport pkg.train\n\n\ndef run(args):\n"
    other += "    return pkg.train.setup_fsdp(torch.load(args.path), args)\n"
    files = {"pkg/__init__.py": "", "pkg/gpt.py": GPT, "pkg/metric.py": METRIC}
    files |= {"pkg/train.py": TRAIN, "pkg/other.py": other}
    assert opened(tmp_path, files) == {("metric.py", 6, "MPC302")}


def test_the_new_fields_survive_the_cache() -> None:
    import json

    from mpcheck.project.records import ModelRecord

    record = record_of(TRAIN.encode(), "pkg/train.py")
    assert record.param_takes
    owner = "class Pipe(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    owner += (
        "        self.unet = GPT()\n\n    def forward(self, x):\n        return self.unet.go(x)\n"
    )
    held = record_of(("import torch\n\nfrom pkg.gpt import GPT\n\n\n" + owner).encode(), "p.py")
    assert held.part_outside
    for each in (record, held):
        assert ModelRecord.from_plain(json.loads(json.dumps(each.to_plain()))) == each
