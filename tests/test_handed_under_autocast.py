"""A model handed to a function or method inside an autocast region runs under it (issue 36
item 3: contexts cross files).

Autocast's state belongs to the thread: whatever runs while a ``with torch.autocast(...)``
block is open runs under it, including a sampler in another file that calls the model it is
handed. The record pass counted only calls written in the region (``model(x)``,
``model.generate(...)``); it now counts a hand-off there too (``diffusion.sample(model=
self.unet)``), never a constructor's argument (held for later) nor a builtin that reads
the object. A name bound to a model's chain of self-returning methods (``self.unet =
unet.half()``) holds that model. A class run outside every region no longer taints a part
whose every run is in a region its own body opens, and a base class whose every deriving
class is so covered is covered too. The xfile cases ``good_model_handed_to_sampler_under_
autocast`` and ``bad_model_handed_to_sampler_outside_autocast`` prove both sides under torch.
"""

from __future__ import annotations

import pytest

from mpcheck.project.models import Reach, _bases_under_autocast
from mpcheck.project.records import record_of
from mpcheck.project.summary import Place

HEAD = "import torch\n\nfrom pkg.unet import UNet\nfrom pkg.sampler import Diffusion\n\n\n"


def _calls(body: str) -> set[tuple[str, bool]]:
    """(class, whether under a region) of each run the record keeps."""
    record = record_of((HEAD + body).encode(), "pkg/run.py")
    return {(cls, region is not None) for cls, region in record.calls}


def test_a_model_handed_inside_a_region_runs_there() -> None:
    body = (
        "class Runner:\n"
        "    def __init__(self):\n"
        "        unet = UNet()\n"
        "        self.unet = unet.half()\n"
        "        self.diffusion = Diffusion()\n\n"
        "    def run(self, x):\n"
        "        with torch.autocast('cuda'):\n"
        "            return self.diffusion.sample(\n"
        "                noise=x,\n"
        "                model=self.unet,\n"
        "            )\n"
    )
    assert ("pkg.unet.UNet", True) in _calls(body)


@pytest.mark.parametrize(
    "call",
    [
        "holder = Pipeline(unet=model)",  # a constructor holds it for later
        "print(model)",  # a builtin reads it
        "size = count_parameters(model)",
        "copy = deepcopy(model)",
    ],
)
def test_a_hand_off_that_runs_nothing_is_no_run(call: str) -> None:
    body = (
        "def main(x):\n"
        "    model = UNet().half()\n"
        "    with torch.autocast('cuda'):\n"
        f"        {call}\n"
    )
    assert not {c for c, inside in _calls(body) if inside}


def test_a_hand_off_outside_every_region_runs_outside() -> None:
    # (the callee runs the model there as much as a call written there would)
    body = "def main(x):\n    model = UNet().half()\n    return sample(model, x)\n"
    record = record_of((HEAD + body).encode(), "pkg/run.py")
    assert "pkg.unet.UNet" in record.outside


def test_a_hand_off_after_the_region_undoes_its_cover() -> None:
    body = (
        "def main(x):\n"
        "    model = UNet().half()\n"
        "    with torch.autocast('cuda'):\n"
        "        y = sample(model, x)\n"
        "    return sample(model, y)\n"
    )
    record = record_of((HEAD + body).encode(), "pkg/run.py")
    assert ("pkg.unet.UNet", True) in _calls(body)
    assert "pkg.unet.UNet" in record.outside


@pytest.mark.parametrize(
    "call",
    ["ema.update(model)", "pool.submit(run, model)", "for m in (model, x):\n            pass"],
)
def test_an_update_a_submission_or_a_loop_is_no_run(call: str) -> None:
    body = "def main(x):\n    model = UNet().half()\n    with torch.autocast('cuda'):\n"
    body += f"        {call}\n"
    assert not {c for c, inside in _calls(body) if inside}


def test_an_alias_through_self_returning_methods_holds_the_model() -> None:
    body = (
        "class Runner:\n"
        "    def __init__(self):\n"
        "        unet = UNet()\n"
        "        self.unet = unet.to('cuda').eval()  # the module itself\n\n"
        "    def run(self, x):\n"
        "        with torch.autocast('cuda'):\n"
        "            return self.unet(x)\n"
    )
    assert ("pkg.unet.UNet", True) in _calls(body)


def test_a_part_run_outside_regions_of_its_owner_is_recorded() -> None:
    body = (
        "class Runner(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.unet = UNet()\n\n"
        "    def forward(self, x):\n"
        "        return self.unet.decode(x)\n"
    )
    record = record_of((HEAD + body).encode(), "pkg/run.py")
    assert "pkg.unet.UNet" in record.part_outside


def _reach() -> Reach:
    return Reach("autocast", Place("run.py", 3, 5, "every call runs under `with autocast()`"))


def test_a_base_is_covered_when_every_deriving_class_is() -> None:
    under = {"pkg.Sub": _reach()}
    _bases_under_autocast(under, {"pkg.Base": {"pkg.Sub"}}, ())
    assert under["pkg.Base"].via == ("Sub",)


@pytest.mark.parametrize(
    ("derived", "cast", "ran"),
    [
        ({"pkg.Sub", "pkg.Other"}, (), ()),  # another deriving class is not covered
        ({"pkg.Sub"}, ("pkg.Base",), ()),  # the base is cast itself
        ({"pkg.Sub"}, (), ("pkg.Base",)),  # the base runs on its own
    ],
)
def test_a_base_run_another_way_is_not_covered(
    derived: set[str], cast: tuple[str, ...], ran: tuple[str, ...]
) -> None:
    under = {"pkg.Sub": _reach()}
    _bases_under_autocast(under, {"pkg.Base": derived}, {*cast, *ran})
    assert "pkg.Base" not in under
