"""A torch (or library) class is never a project class of the same leaf name: the module
``nn.Embedding(...)`` builds runs torch's forward, whatever the file calls its own class, and
a cast of ``torch.nn.Linear`` says nothing of the project's ``Linear``."""

from __future__ import annotations

import textwrap

from mpcheck.project.models import uses_of_sources
from tests.support import XFILE, check

OWN_EMBEDDING = """\
    import torch
    from torch import nn


    class Embedding(nn.Module):
        def forward(self, t):
            return t[:, None].float() * torch.arange(4, dtype=torch.float32)[None]


    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = {tok}
            self.proj = nn.Linear(4, 4)

        def forward(self, ids):
            return self.proj({call})


    model = Model().half()
    """


def codes(tok: str, call: str = "self.tok(ids)") -> list[str]:
    source = textwrap.dedent(OWN_EMBEDDING.format(tok=tok, call=call))
    return [d.code for d in check(source)]


def test_torchs_layer_runs_torchs_forward_beside_a_same_named_class() -> None:
    assert codes("nn.Embedding(10, 4)") == []


def test_a_container_of_torchs_layers_and_a_part_read_back_stay_torchs() -> None:
    assert codes("nn.Sequential(nn.Embedding(10, 4))") == []
    source = textwrap.dedent(OWN_EMBEDDING.format(tok="nn.Embedding(10, 4)", call="ids"))
    source += "out = model.proj(model.tok(torch.tensor([[1]])))\n"
    assert [d.code for d in check(source)] == []


def test_the_files_own_class_still_runs_its_forward() -> None:
    assert codes("Embedding()") == ["MPC101"]


def test_a_cast_of_torchs_class_reaches_no_project_class_of_its_name() -> None:
    case = XFILE / "good_torch_class_named_like_project_class"
    sources = {p.relative_to(case).as_posix(): p.read_bytes() for p in sorted(case.rglob("*.py"))}
    uses = uses_of_sources(sources)
    assert uses.opening("lora.layers.Linear") is None
    # (an unresolved name of the project's class's leaf still may be it)
    sources["probe.py"] = sources["probe.py"].replace(b"nn.Linear(8, 8)", b"Linear(8, 8)")
    sources["probe.py"] = sources["probe.py"].replace(
        b"from torch import nn", b"from torch import nn\nfrom somewhere import *"
    )
    assert uses_of_sources(sources).opening("lora.layers.Linear") is not None
