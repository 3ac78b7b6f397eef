"""Import resolution of the whole-project phase, on small trees built per test."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from mpcheck.project.index import ModuleIndex, Target
from mpcheck.project.names import ImportTable


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root.resolve()


@pytest.fixture
def pkg(tmp_path: Path) -> Path:
    return tree(
        tmp_path,
        {
            "pkg/__init__.py": "from .layers.rope import apply_rope\n",
            "pkg/utils.py": "",
            "pkg/layers/__init__.py": "NORM_EPS = 1e-6\n",
            "pkg/layers/rope.py": "",
            "pkg/layers/attention.py": "",
        },
    )


def test_module_names_follow_the_init_chain(pkg: Path) -> None:
    index = ModuleIndex()
    assert index.module_name(pkg / "pkg/layers/rope.py") == "pkg.layers.rope"
    assert index.module_name(pkg / "pkg/layers/__init__.py") == "pkg.layers"
    assert index.import_root(pkg / "pkg/layers/rope.py") == pkg


@pytest.mark.parametrize(
    ("module", "level", "expected"),
    [
        ("rope", 1, Target("pkg.layers.rope", Path("pkg/layers/rope.py"))),
        ("rope.apply_rope", 1, Target("pkg.layers.rope", Path("pkg/layers/rope.py"), "apply_rope")),
        ("utils", 2, Target("pkg.utils", Path("pkg/utils.py"))),
        ("NORM_EPS", 1, Target("pkg.layers", Path("pkg/layers/__init__.py"), "NORM_EPS")),
        ("", 2, Target("pkg", Path("pkg/__init__.py"))),
        ("pkg.layers.rope", 0, Target("pkg.layers.rope", Path("pkg/layers/rope.py"))),
        ("pkg.layers", 0, Target("pkg.layers", Path("pkg/layers/__init__.py"))),
        ("pkg.apply_rope", 0, Target("pkg", Path("pkg/__init__.py"), "apply_rope")),
    ],
)
def test_imports_from_inside_a_package(
    pkg: Path, module: str, level: int, expected: Target
) -> None:
    found = ModuleIndex().resolve(pkg / "pkg/layers/attention.py", module, level)
    assert found == Target(expected.module, pkg / expected.path, expected.attr)


def test_modules_outside_the_project_are_not_resolved(pkg: Path) -> None:
    index = ModuleIndex()
    importer = pkg / "pkg/layers/attention.py"
    assert index.resolve(importer, "torch.nn.functional") is None
    assert index.resolve(importer, "missing", level=3) is None  # above the import root


def test_an_unknown_relative_name_is_left_to_the_package_summary(pkg: Path) -> None:
    found = ModuleIndex().resolve(pkg / "pkg/layers/attention.py", "missing", level=1)
    assert found == Target("pkg.layers", pkg / "pkg/layers/__init__.py", "missing")


def test_a_script_imports_its_siblings(tmp_path: Path) -> None:
    root = tree(tmp_path, {"scripts/train.py": "", "scripts/helpers.py": ""})
    found = ModuleIndex().resolve(root / "scripts/train.py", "helpers.make_mask")
    assert found == Target("helpers", root / "scripts/helpers.py", "make_mask")


def test_src_layout_through_a_configured_root(tmp_path: Path) -> None:
    root = tree(tmp_path, {"train.py": "", "src/mypkg/__init__.py": "", "src/mypkg/model.py": ""})
    importer = root / "train.py"
    assert ModuleIndex().resolve(importer, "mypkg.model.Net") is None
    found = ModuleIndex(roots=(root / "src",)).resolve(importer, "mypkg.model.Net")
    assert found == Target("mypkg.model", root / "src/mypkg/model.py", "Net")


def test_namespace_packages_resolve_to_their_modules(tmp_path: Path) -> None:
    root = tree(tmp_path, {"main.py": "", "ns/sub/mod.py": ""})
    index = ModuleIndex()
    found = index.resolve(root / "main.py", "ns.sub.mod.f")
    assert found == Target("ns.sub.mod", root / "ns/sub/mod.py", "f")
    assert index.resolve(root / "main.py", "ns.sub") is None  # no code of its own


def test_a_module_file_wins_over_a_same_named_attribute(tmp_path: Path) -> None:
    root = tree(tmp_path, {"p/__init__.py": "rope = None\n", "p/rope.py": "", "p/a.py": ""})
    found = ModuleIndex().resolve(root / "p/a.py", "rope", level=1)
    assert found == Target("p.rope", root / "p/rope.py")


def test_the_import_table_locates_names_for_the_index(pkg: Path) -> None:
    source = (
        "from . import rope\n"
        "from ..utils import helper as h\n"
        "import pkg.layers.rope as r\n"
        "from pkg import apply_rope\n"
    )
    table = ImportTable.of(cst.parse_module(source))
    importer = pkg / "pkg/layers/attention.py"
    index = ModuleIndex()
    rope = pkg / "pkg/layers/rope.py"

    def where(code: str) -> Target | None:
        located = table.locate(cst.parse_expression(code))
        return None if located is None else index.resolve(importer, *located)

    assert where("rope.apply") == Target("pkg.layers.rope", rope, "apply")
    assert where("h") == Target("pkg.utils", pkg / "pkg/utils.py", "helper")
    assert where("r.apply") == Target("pkg.layers.rope", rope, "apply")
    assert where("apply_rope") == Target("pkg", pkg / "pkg/__init__.py", "apply_rope")
    assert where("local_name") is None


def test_files_are_found_by_directory_listing(tmp_path: Path) -> None:
    """Candidates are looked up in one listing per directory: a symlinked module is a
    module, a directory named like a module file is not, and a name's case must match."""
    root = tree(tmp_path, {"main.py": "", "real/impl.py": "", "fake.py/x": "", "Upper.py": ""})
    (root / "linked.py").symlink_to(root / "real/impl.py")
    index = ModuleIndex()
    main = root / "main.py"
    assert index.resolve(main, "linked.f") == Target("linked", root / "linked.py", "f")
    assert index.resolve(main, "fake.f") is None
    assert index.resolve(main, "upper.f") is None
    assert index.resolve(main, "Upper.f") == Target("Upper", root / "Upper.py", "f")


def test_each_module_file_is_one_path_object(pkg: Path) -> None:
    """Imports from many directories share their answers' paths (memory on big trees)."""
    index = ModuleIndex()
    one = index.resolve(pkg / "pkg/layers/attention.py", "pkg.utils.helper")
    two = index.resolve(pkg / "pkg/__init__.py", "pkg.utils.other")
    assert one is not None and two is not None
    assert one.path is two.path
    assert index.resolve(pkg / "pkg/layers/rope.py", "pkg.utils.helper") is one
