"""Classes across files: a module class of another project file built as a submodule, used
as a base or run from a script gives the findings it gives when defined in the same file;
module-level dtypes cross files too. Checked in-process with the project phase on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mpcheck.pipeline.one_file import Options, check_source
from mpcheck.project import summarise
from mpcheck.project.summarise import FileSummariser
from mpcheck.ruleset.rule import all_rules
from tests.support import FP32_NORM_SOURCE

NORMS = (
    FP32_NORM_SOURCE
    + """

class Router(nn.Module):
    _keep_in_fp32_modules = ["gate"]

    def __init__(self, dim):
        super().__init__()
        self.gate = nn.Linear(dim, 4)
        self.norm = RMSNormFp32(dim)
        self.scale = nn.LayerNorm(dim, dtype=torch.float32)
        self.proj = nn.Linear(dim, dim)
        self.proj.float()

    def forward(self, x):
        return self.gate(x)
"""
)

BLOCK = """
import torch
from torch import nn
{imports}


class Block(nn.Module):
    def __init__(self, dim, dtype=None):
        super().__init__()
        self.norm = RMSNormFp32(dim)
        self.mlp = nn.Linear(dim, dim, dtype=dtype)

    def forward(self, h):
        return self.mlp(self.norm(h))
"""

SUBCLASS = """
import torch
from torch import nn
{imports}


class Block(Router):
    def __init__(self, dim):
        super().__init__(dim)
        self.mlp = nn.Linear(dim, dim)

    def forward(self, h):
        return self.mlp(self.norm(h))
"""


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    summarise.forget()
    yield
    summarise.forget()


def findings(root: Path, name: str, project: bool = True) -> set[tuple[int, str]]:
    path = root / name
    options = Options(project_root=str(root) if project else None)
    found = check_source(path.read_text(), str(path), all_rules(), options)
    return {(d.start.row, d.code) for d in found if not d.suppressed}


def package(root: Path, files: dict[str, str]) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    for name, text in files.items():
        (root / "pkg" / name).write_text(text)


def same_file(root: Path, main: str) -> set[tuple[str, str]]:
    """The findings ``main`` gives with ``NORMS`` pasted above it in one file, as the text
    of their line and their code (the classes' own findings left out)."""
    single = root / "single.py"
    single.write_text(NORMS + main.format(imports=""))
    own = NORMS.count("\n")
    return lines(single, {(r, c) for r, c in findings(root, "single.py", False) if r > own})


def lines(path: Path, found: set[tuple[int, str]]) -> set[tuple[str, str]]:
    text = path.read_text().splitlines()
    return {(text[row - 1].strip(), code) for row, code in found}


def test_class_summary_holds_parts_kinds_and_kept_parts(tmp_path: Path) -> None:
    package(tmp_path, {"norms.py": NORMS})
    summary = FileSummariser(tmp_path).summarise(tmp_path / "pkg" / "norms.py", lambda *a: None)
    assert summary is not None
    norm, router = summary.classes["RMSNormFp32"], summary.classes["Router"]
    assert norm.is_module and norm.keep_fp32
    assert norm.methods["forward"].returns.prec == "full"
    assert norm.methods["forward"].returns.origin is not None
    assert norm.methods["forward"].returns.origin.path == "pkg/norms.py"
    assert router.bases == ("torch.nn.Module",)
    assert router.submodules == {
        "gate": "layer",
        "norm": "keep-fp32",
        "scale": "norm",
        "proj": "layer",
    }
    assert router.keep_patterns == ("gate",)
    # listed, built with dtype=torch.float32, cast in ``__init__``
    assert set(router.keep_fp32_attrs) == {"gate", "scale", "proj"}
    assert not router.keep_fp32


def test_submodule_of_another_file_gives_the_same_finding(tmp_path: Path) -> None:
    package(
        tmp_path,
        {"norms.py": NORMS, "block.py": BLOCK.format(imports="from .norms import RMSNormFp32")},
    )
    across = findings(tmp_path, "pkg/block.py")
    assert across and lines(tmp_path / "pkg" / "block.py", across) == same_file(tmp_path, BLOCK)


def test_absolute_import_and_module_alias_reach_the_class(tmp_path: Path) -> None:
    block = BLOCK.replace("RMSNormFp32(dim)", "norms.RMSNormFp32(dim)")
    package(
        tmp_path, {"norms.py": NORMS, "block.py": block.format(imports="import pkg.norms as norms")}
    )
    assert {code for _, code in findings(tmp_path, "pkg/block.py")} == {"MPC101"}


def test_base_class_of_another_file_gives_its_parts(tmp_path: Path) -> None:
    package(
        tmp_path,
        {"norms.py": NORMS, "sub.py": SUBCLASS.format(imports="from .norms import Router")},
    )
    across = findings(tmp_path, "pkg/sub.py")
    assert across and lines(tmp_path / "pkg" / "sub.py", across) == same_file(tmp_path, SUBCLASS)


def test_keep_in_fp32_names_of_a_base_keep_a_subclass_part(tmp_path: Path) -> None:
    sub = SUBCLASS.replace("self.mlp = nn.Linear(dim, dim)", "self.gate = nn.Linear(dim, 4)")
    sub = sub.replace("return self.mlp(self.norm(h))", "return self.gate(h)")
    package(
        tmp_path, {"norms.py": NORMS, "sub.py": sub.format(imports="from .norms import Router")}
    )
    across = findings(tmp_path, "pkg/sub.py")
    assert across and lines(tmp_path / "pkg" / "sub.py", across) == same_file(tmp_path, sub)


def test_module_level_dtype_of_another_file(tmp_path: Path) -> None:
    run = """
import torch
from torch import nn

from . import config
from .config import DTYPE


def main():
    head = nn.Linear(8, 2).to(DTYPE)
    x = torch.randn(4, 8, dtype=torch.float16).float()
    head(x)
    other = nn.Linear(8, 2).to(config.DTYPE)
    other(x)
"""
    package(tmp_path, {"config.py": "import torch\n\nDTYPE = torch.float16\n", "run.py": run})
    assert findings(tmp_path, "pkg/run.py") == {(12, "MPC101"), (14, "MPC101")}
    summary = FileSummariser(tmp_path).summarise(tmp_path / "pkg" / "config.py", lambda *a: None)
    assert summary is not None and summary.constants["DTYPE"].dtype == "float16"


def test_model_cast_at_the_top_level_of_another_file(tmp_path: Path) -> None:
    models = (
        "import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n"
        "    def __init__(self, dim):\n        super().__init__()\n"
        "        self.proj = nn.Linear(dim, dim)\n\n    def forward(self, x):\n"
        "        return self.proj(x)\n\n\nmodel = Net(8).half()\n"
    )
    run = "import torch\n\nfrom .models import model\n\n\ndef main():\n"
    run += "    x = torch.randn(2, 8)\n    model(x)\n\n\nif __name__ == '__main__':\n    main()\n"
    package(tmp_path, {"models.py": models, "run.py": run})
    assert findings(tmp_path, "pkg/run.py") == {(7, "MPC102")}
    summary = FileSummariser(tmp_path).summarise(tmp_path / "pkg" / "models.py", lambda *a: None)
    assert summary is not None
    assert (summary.constants["model"].dtype, summary.constants["model"].layer) == (
        "float16",
        "Net",
    )


CACHE = """
import torch
from torch import nn


class KVCache(nn.Module):
    def __init__(self, n, dim, dtype=torch.float32):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(1, n, dim, dtype=dtype))

    def update(self, k):
        self.k_cache[:, : k.shape[1]] = k
        return self.k_cache[:, : k.shape[1]]
"""

CACHED_ATTENTION = """
import torch
import torch.nn.functional as F
from torch import nn
{imports}


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.q = nn.Linear(dim, dim)
        self.cache = KVCache({args})

    def forward(self, x):
        k = self.cache.update(x)
        return F.scaled_dot_product_attention(self.q(x), k, k)
"""


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ("16, dim", {(16, "MPC103")}),  # the constructor's float32 default holds
        ("16, dim, torch.bfloat16", set()),  # passed by position
        ("16, dim, dtype=torch.bfloat16", set()),  # passed by name
        ("*shape", set()),  # may pass it: nothing is assumed
    ],
)
def test_constructor_float32_default_across_files_and_in_one(
    tmp_path: Path, args: str, expected: set[tuple[int, str]]
) -> None:
    attention = CACHED_ATTENTION.replace("{args}", args)
    imports = "from .cache import KVCache"
    package(tmp_path, {"cache.py": CACHE, "attention.py": attention.format(imports=imports)})
    assert findings(tmp_path, "pkg/attention.py") == expected
    single = tmp_path / "single.py"
    single.write_text(CACHE + attention.format(imports=""))
    own = CACHE.count("\n")
    assert {(r - own, c) for r, c in findings(tmp_path, "single.py", False)} == expected


def test_class_summary_holds_its_float32_dtype_default(tmp_path: Path) -> None:
    package(tmp_path, {"cache.py": CACHE})
    summary = FileSummariser(tmp_path).summarise(tmp_path / "pkg" / "cache.py", lambda *a: None)
    assert summary is not None
    default = summary.classes["KVCache"].dtype_default
    assert default is not None
    index, place, dtype, guards = default
    assert (index, place.path, place.line, place.text) == (2, "pkg/cache.py", 7, "torch.float32")
    assert (dtype, guards) == ("float32", ())
    again = type(summary).from_json(summary.to_json())
    assert again is not None and again.classes["KVCache"].dtype_default == default


def test_method_origin_decided_in_a_helper_above_the_class_has_its_line(tmp_path: Path) -> None:
    """``Timesteps.forward`` returns what ``get_timestep_embedding`` (defined above the class)
    made float32: the summary points at that line, not at line 0."""
    helper = (
        "import torch\nfrom torch import nn\n\n\ndef embed(t):\n    return t.float() * 2\n\n\n"
        "class Timesteps(nn.Module):\n    def forward(self, t):\n        return embed(t)\n"
    )
    package(tmp_path, {"emb.py": helper})
    summary = FileSummariser(tmp_path).summarise(tmp_path / "pkg" / "emb.py", lambda *a: None)
    assert summary is not None
    origin = summary.classes["Timesteps"].methods["forward"].returns.origin
    assert origin is not None and (origin.line, origin.column) == (6, 12)


def test_module_level_aliases_of_imported_names_are_reexported(tmp_path: Path) -> None:
    """``BatchNorm2d = torch.nn.BatchNorm2d`` is followed like an import; a name bound twice
    (in a ``try`` block too), to a call or by a class of its own is not (which binding a
    lookup meets is unknown)."""
    source = (
        "import torch\nfrom torch import nn\n\n"
        "BatchNorm2d = torch.nn.BatchNorm2d\n"
        "Linear = nn.Linear\n"
        "Twice = nn.Linear\nTwice = nn.Conv2d\n"
        "Made = nn.Linear(2, 2)\n"
        "Conv = nn.Conv2d\n\n\nclass Conv(nn.Module):\n    pass\n\n\n"
        "Norm = nn.LayerNorm\ntry:\n    from apex.normalization import FusedLayerNorm\n"
        "except ImportError:\n    pass\nelse:\n    Norm = FusedLayerNorm\n"
        "Act = nn.GELU\ntry:\n    from apex import Act\nexcept ImportError:\n    pass\n"
    )
    package(tmp_path, {"wrappers.py": source})
    path = tmp_path / "pkg" / "wrappers.py"
    summary = FileSummariser(tmp_path).summarise(path, lambda *a: None)
    assert summary is not None
    assert summary.reexports["BatchNorm2d"] == ("torch.nn.BatchNorm2d", 0, "")
    assert summary.reexports["Linear"] == ("torch.nn.Linear", 0, "")
    assert {"Twice", "Made", "Conv", "Norm"}.isdisjoint(summary.reexports)
    assert summary.reexports["Act"] == ("apex.Act", 0, "")  # the import's, as before


TUNERS = """
import torch
from torch import nn


class BufferDict(nn.Module):
    pass


class TunerLayer:
    adapter_layer_names = ()


class Tuner:
    def _cast_adapter_dtype(self, name):
        for sub in self.model.modules():
            if isinstance(sub, TunerLayer):
                continue
            if isinstance(sub, (nn.ModuleDict, nn.ParameterDict)) and name in sub:
                sub[name].data = sub[name].data.float()
"""
LYCORIS = """
from .tuners import TunerLayer


class LycorisLayer(TunerLayer):
    pass
"""


def test_the_adapter_dicts_peft_casts_are_read_and_inherited_across_files(
    tmp_path: Path,
) -> None:
    """The dict classes ``_cast_adapter_dtype`` tests for, read where it is defined, reach a
    tuner layer two files away through its bases' summaries."""
    package(tmp_path, {"tuners.py": TUNERS, "lycoris.py": "import torch\n" + LYCORIS})
    summariser = FileSummariser(tmp_path)
    tuners = summariser.summarise(tmp_path / "pkg" / "tuners.py", lambda *a: None)
    assert tuners is not None
    assert tuners.classes["TunerLayer"].adapter_casts == ("ModuleDict", "ParameterDict")

    def lookup(_: Path, dotted: str, level: int) -> object:
        return (
            tuners.classes.get(dotted.rpartition(".")[2]) if dotted.startswith("tuners") else None
        )

    lycoris = summariser.summarise(tmp_path / "pkg" / "lycoris.py", lookup)  # type: ignore[arg-type]
    assert lycoris is not None
    assert lycoris.classes["LycorisLayer"].adapter_casts == ("ModuleDict", "ParameterDict")
    plain = summariser.summarise(tmp_path / "pkg" / "lycoris.py", lambda *a: None)
    assert plain is not None and plain.classes["LycorisLayer"].adapter_casts is None


def test_a_half_load_through_super_names_no_class_and_checks_cleanly() -> None:
    """``super().from_pretrained(..., torch_dtype=torch.bfloat16)`` in a loader override
    names no class whose kept parts could be read: no finding, and no crash (the class name
    was once parsed from an empty string)."""
    source = (
        "import torch\nfrom transformers import PreTrainedModel\n\n\n"
        "class Wrapper(PreTrainedModel):\n    @classmethod\n"
        "    def from_pretrained(cls, path, **kwargs):\n"
        "        return super().from_pretrained(path, torch_dtype=torch.bfloat16, **kwargs)\n"
    )
    found = check_source(source, "wrapper.py", all_rules())
    assert [d.code for d in found] == []


def test_the_files_guard_reports_an_error_whose_own_message_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An error raised inside the engine becomes MPC002 on its file even when rendering it
    raises (as a libcst parser error about a snippet does): the run goes on."""
    from mpcheck.pipeline import one_file

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise IndexError("list index out of range")

    def fail(*args: object, **kwargs: object) -> object:
        raise Unprintable

    monkeypatch.setattr(one_file, "_run_rules", fail)
    found = check_source("import torch\n", "model.py", all_rules())
    assert [d.code for d in found] == ["MPC002"]
    assert "Unprintable raised while describing itself" in found[0].message
