"""``from module import *`` of a project module (mpcheck/project/exports.py, the store's
``module.*`` lookups, mpcheck/engine/starred.py): what it binds, through chains and cycles,
and what the importing file then depends on."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from mpcheck.engine.starred import bind_starred
from mpcheck.pipeline.one_file import Options, check_source
from mpcheck.project.exports import exported, exported_of_source
from mpcheck.project.names import ImportTable
from mpcheck.project.store import CYCLE
from mpcheck.project.summarise import forget, summaries_for
from mpcheck.project.summary import ClassSummary, Exports, ModuleSummary
from mpcheck.ruleset.rule import all_rules


@pytest.fixture(autouse=True)
def fresh() -> None:
    forget()


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def star(root: Path, importer: str, module: str, level: int = 0) -> dict[str, str | None]:
    summaries, _ = summaries_for(str(root), True)
    found = summaries.lookup(root / importer, f"{module}.*" if module else "*", level)
    assert isinstance(found, Exports)
    return dict(found.names)


UTILS = textwrap.dedent(
    """
    import os
    import torch
    import torch.nn as nn
    from torch.nn import functional as F

    SCALE = 2

    def helper(x):
        return x

    def _private(x):
        return x

    class Block(nn.Module):
        def forward(self, x):
            return x

    if os.name == "nt":
        WINDOWS = True
"""
)


def test_public_names_include_what_the_module_imports(tmp_path: Path) -> None:
    write(tmp_path, {"utils.py": UTILS, "main.py": "from utils import *\n"})
    names = star(tmp_path, "main.py", "utils")
    assert names["torch"] == "torch" and names["nn"] == "torch.nn"
    assert names["F"] == "torch.nn.functional"
    assert names["helper"] is None and names["Block"] is None and names["SCALE"] is None
    assert "WINDOWS" in names and "os" in names
    assert "_private" not in names


def test_a_literal_all_is_what_a_star_import_binds(tmp_path: Path) -> None:
    source = UTILS + '__all__ = ["helper", "torch", "_private"]\n'
    write(tmp_path, {"utils.py": source, "main.py": "from utils import *\n"})
    assert set(star(tmp_path, "main.py", "utils")) == {"helper", "torch", "_private"}


@pytest.mark.parametrize(
    "spelling",
    ["__all__ = list(names)\n", '__all__ = ["helper"]\n__all__.extend(more)\n'],
)
def test_an_all_that_is_not_a_literal_counts_for_nothing(tmp_path: Path, spelling: str) -> None:
    write(tmp_path, {"utils.py": UTILS + spelling, "main.py": "from utils import *\n"})
    names = star(tmp_path, "main.py", "utils")
    assert {"helper", "torch", "Block"} <= set(names)


def test_star_imports_chain_and_a_name_is_found_through_them(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "utils/__init__.py": "",
            "utils/utils.py": UTILS,
            "utils/layers.py": "import torch.nn.functional as G\nfrom utils.utils import *\n",
            # (its ``nn`` comes by two stars; a file that never says ``torch`` is not walked,
            # the prefilter's trade: transformers' ``__init__`` files star-import every model)
            "models.py": (
                "import torch\nfrom utils.layers import *\n\nclass Net(nn.Module):\n    pass\n"
            ),
            "detect.py": "from models import *\n",
        },
    )
    names = star(tmp_path, "detect.py", "models")
    assert names["torch"] == "torch" and names["G"] == "torch.nn.functional"
    assert names["Net"] is None and names["Block"] is None
    summaries, _ = summaries_for(str(tmp_path), True)
    block = summaries.lookup(tmp_path / "detect.py", "models.Block", 0)
    assert isinstance(block, ClassSummary) and block.is_module
    net = summaries.lookup(tmp_path / "detect.py", "models.Net", 0)
    assert isinstance(net, ClassSummary) and net.is_module  # its ``nn`` came by two stars


def test_relative_star_imports(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pkg/__init__.py": "from .utils import *\n",
            "pkg/utils.py": UTILS,
            "pkg/main.py": "from . import *\n",
        },
    )
    assert star(tmp_path, "pkg/main.py", "utils", 1)["torch"] == "torch"
    assert star(tmp_path, "pkg/main.py", "", 1)["torch"] == "torch"


def test_a_star_import_cycle_ends(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "a.py": "import torch\nfrom b import *\n\ndef fa(x):\n    return x\n",
            "b.py": "import numpy\nfrom a import *\n\ndef fb(x):\n    return x\n",
            "main.py": "from a import *\n",
        },
    )
    names = star(tmp_path, "main.py", "a")
    assert {"torch", "fa", "numpy", "fb"} <= set(names)
    summaries, _ = summaries_for(str(tmp_path), True)
    assert summaries.lookup(tmp_path / "main.py", "a.nothing", 0) is None


def test_the_importer_depends_on_each_exporting_summary(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "utils.py": UTILS,
            "models.py": "from utils import *\n",
            "detect.py": "from models import *\n",
        },
    )
    summaries, _ = summaries_for(str(tmp_path), True)
    detect = tmp_path / "detect.py"
    summaries.begin(detect)
    summaries.lookup(detect, "models.*", 0)
    deps = summaries.end(detect, None)
    assert {p.name for p in deps} == {"models.py", "utils.py"}
    assert CYCLE not in deps.values()


def test_the_summary_keeps_the_public_names_and_their_digest_follows_them(
    tmp_path: Path,
) -> None:
    write(tmp_path, {"utils.py": UTILS})
    summaries, _ = summaries_for(str(tmp_path), True)
    before = summaries.of(tmp_path / "utils.py")
    assert isinstance(before, ModuleSummary) and "torch" in before.names
    assert ModuleSummary.from_json(before.to_json()) == before
    forget()
    write(tmp_path, {"utils.py": UTILS + "\ndef added(x):\n    return x\n"})
    summaries, _ = summaries_for(str(tmp_path), True)
    after = summaries.of(tmp_path / "utils.py")
    assert isinstance(after, ModuleSummary) and after.digest != before.digest


def test_both_parsers_agree_on_the_exports() -> None:
    source = UTILS + textwrap.dedent(
        """
        from .sibling import *
        from pkg.other import *
        try:
            import yaml
        except ImportError:
            yaml = None
        for _i, LAST in enumerate(range(2)):
            pass
        with open(__file__) as HANDLE:
            pass
        A, (B, *C) = 1, (2, 3)
        __all__ = ["helper"]
        __all__ += ("Block",)
        """
    )
    found = exported(cst.parse_module(source))
    assert found == exported_of_source(ast.parse(source))
    names, public, stars = found
    assert {"yaml", "LAST", "HANDLE", "A", "B", "C"} <= set(names) and "_i" not in names
    assert public == ("helper", "Block")
    assert stars == (("sibling", 1), ("pkg.other", 0))


def lookup_of(answers: dict[str, Exports]):  # type: ignore[no-untyped-def]
    return lambda dotted, level: answers.get(f"{level}:{dotted}")


def test_the_table_binds_what_stars_bring_and_the_files_own_names_win() -> None:
    module = cst.parse_module(
        "import numpy as np\nfrom models import *\nfrom .utils import *\n"
        "from late import *\n\ndef helper():\n    pass\n"
    )
    table = ImportTable.of(module)
    assert table.stars == [("models", 0), ("utils", 1), ("late", 0)]
    answers = {
        "0:models.*": Exports((("Net", None), ("np", "numpy.fake"), ("torch", "torch"))),
        "1:utils.*": Exports((("helper", None), ("Block", None), ("Net", None))),
        "0:late.*": Exports((("Block", None),)),
    }
    bind_starred(table, module, lookup_of(answers))
    name = cst.parse_expression
    assert table.resolve(name("torch.zeros")) == "torch.zeros"
    assert table.resolve(name("np.ones")) == "numpy.ones"  # its own import wins
    assert table.locate(name("helper")) is None  # its own ``def`` wins
    assert table.locate(name("Net")) == ("utils.Net", 1)  # the later star wins
    assert table.locate(name("Block")) == ("late.Block", 0)


def test_a_script_star_importing_torch_and_its_model_is_checked(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "utils.py": "import torch\nimport torch.nn as nn\n",
            "models.py": (
                "from utils import *\n\nclass Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.conv = nn.Conv2d(3, 8, 3)\n\n"
                "    def forward(self, x):\n        return self.conv(x)\n"
            ),
        },
    )
    source = (
        "from models import *\n\n\ndef main():\n    model = Net()\n    model.half()\n"
        "    return model(torch.zeros(1, 3, 8, 8))\n\n\nmain()\n"  # (a script runs its main)
    )
    (tmp_path / "detect.py").write_text(source)
    options = Options(project_root=str(tmp_path))
    found = check_source(source, str(tmp_path / "detect.py"), all_rules(), options)
    assert [(d.code, d.start.row) for d in found] == [("MPC102", 7)]
    alone = check_source(source, str(tmp_path / "detect.py"), all_rules())
    assert alone == []  # without the project, ``torch`` is nothing known


def test_a_star_import_under_type_checking_binds_nothing(tmp_path: Path) -> None:
    """transformers' package ``__init__`` files star-import every submodule under
    ``if TYPE_CHECKING:`` and bind them lazily: following those cost a cold run twice its CPU."""
    source = (
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .modeling import *\n"
        "else:\n    from .runtime import *\n"
    )
    module = cst.parse_module(source)
    assert ImportTable.of(module).stars == [("runtime", 1)]
    table = ImportTable.of_source(source.encode())
    assert table is not None and table.stars == [("runtime", 1)]
    assert exported(module)[2] == exported_of_source(ast.parse(source))[2] == (("runtime", 1),)
