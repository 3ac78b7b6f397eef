"""The project phase's summaries: plain data that round-trips, made lazily, cycle-safely and
independently of the order files are reached.

The summariser here is a stand-in for the engine, driven by two module-level names in each
test file: ``RETURNS = "full"`` makes its ``f`` return a float32 tensor, ``FOLLOWS = ("rope",
1, "f")`` makes ``f`` return whatever that import's ``f`` returns (unknown when the lookup
finds nothing). Imports come from ``ast``, so the store sees real import statements.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

from mpcheck.project.index import ModuleIndex
from mpcheck.project.store import CYCLE, Lookup, Summaries
from mpcheck.project.summary import ClassSummary, Function, ModuleSummary, Place, Pool, Value

UNKNOWN = Value("tensor")


class FakeEngine:
    def __init__(self) -> None:
        self.summarised: list[str] = []

    def imports(self, path: Path) -> Iterable[tuple[str, int]]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    yield ".".join(p for p in (node.module, alias.name) if p), node.level
            elif isinstance(node, ast.Import):
                yield from ((alias.name, 0) for alias in node.names)

    def summarise(self, path: Path, lookup: Lookup) -> ModuleSummary:
        self.summarised.append(path.name if path.stem != "__init__" else path.parent.name)
        tree = ast.parse(path.read_text())
        names = {
            t.id: ast.literal_eval(n.value)
            for n in tree.body
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        reexports = {
            (a.asname or a.name): (node.module or "", node.level, a.name)
            for node in tree.body
            if isinstance(node, ast.ImportFrom)
            for a in node.names
        }
        functions = {}
        if "RETURNS" in names:
            origin = Place(str(path), 3, 12, "upcast to float32 by `.float()`")
            functions["f"] = Function(
                ("x",), Value("tensor", names["RETURNS"], "float32", "upcast", origin)
            )
        elif "FOLLOWS" in names:
            module, level, attr = names["FOLLOWS"]
            found = lookup(path, f"{module}.{attr}" if module else attr, level)
            functions["f"] = found if isinstance(found, Function) else Function(("x",), UNKNOWN)
        return ModuleSummary("", str(path), functions=functions, reexports=reexports)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def store(root: Path) -> tuple[Summaries, FakeEngine]:
    engine = FakeEngine()
    return Summaries(ModuleIndex(), engine), engine


def test_helper_in_another_module_is_followed_through_a_relative_import(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/rope.py": "RETURNS = 'full'\n",
            "pkg/attention.py": "from .rope import f\nFOLLOWS = ('rope', 1, 'f')\n",
        },
    )
    summaries, _ = store(tmp_path)
    found = summaries.lookup(tmp_path / "pkg/attention.py", "f", 0)
    assert found is None  # ``f`` is not importable as a top-level module
    value = summaries.lookup(tmp_path / "pkg/x.py", "attention.f", 1)
    assert isinstance(value, Function) and value.returns.prec == "full"
    origin = value.returns.origin
    assert origin is not None and origin.path.endswith("rope.py")


def test_only_what_is_looked_up_is_summarised(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\nfrom .c import f\nFOLLOWS = ('c', 1, 'f')\n",
            "pkg/b.py": "RETURNS = 'full'\n",
            "pkg/c.py": "RETURNS = 'full'\n",
            "pkg/unrelated.py": "RETURNS = 'full'\n",
        },
    )
    summaries, engine = store(tmp_path)
    summaries.of(tmp_path / "pkg/a.py")
    assert sorted(engine.summarised) == ["a.py", "c.py"]  # b is imported but never asked
    summaries.of(tmp_path / "pkg/c.py")
    assert engine.summarised.count("c.py") == 1  # each file once


def test_chains_resolve_dependencies_first(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low.py": "RETURNS = 'full'\n",
            "pkg/mid.py": "from .low import f\nFOLLOWS = ('low', 1, 'f')\n",
            "pkg/top.py": "from .mid import f\nFOLLOWS = ('mid', 1, 'f')\n",
        },
    )
    summaries, _ = store(tmp_path)
    top = summaries.of(tmp_path / "pkg/top.py")
    assert top is not None and top.functions["f"].returns.prec == "full"


def test_reexport_through_package_init(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pkg/__init__.py": "from .layers import f as helper\n",
            "pkg/layers/__init__.py": "from .rope import f\n",
            "pkg/layers/rope.py": "RETURNS = 'full'\n",
            "train.py": "from pkg import helper\n",
        },
    )
    summaries, _ = store(tmp_path)
    value = summaries.lookup(tmp_path / "train.py", "pkg.helper", 0)
    assert isinstance(value, Function) and value.returns.prec == "full"


def test_reexport_loops_terminate(tmp_path: Path) -> None:
    write(tmp_path, {"pkg/__init__.py": "from . import f\n", "main.py": "import pkg\n"})
    summaries, _ = store(tmp_path)
    assert summaries.lookup(tmp_path / "main.py", "pkg.f", 0) is None


@pytest.mark.parametrize("first", ["a.py", "b.py"])
def test_import_cycles_terminate_and_do_not_depend_on_order(tmp_path: Path, first: str) -> None:
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from .b import f\nFOLLOWS = ('b', 1, 'f')\n",
            "pkg/b.py": "from .a import f\nFOLLOWS = ('a', 1, 'f')\n",
        },
    )
    summaries, _ = store(tmp_path)
    summaries.of(tmp_path / "pkg" / first)
    for name in ("a.py", "b.py"):
        summary = summaries.of(tmp_path / "pkg" / name)
        assert summary is not None and summary.functions["f"].returns == UNKNOWN


def test_cycle_partners_still_see_modules_outside_the_cycle(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/rope.py": "RETURNS = 'full'\n",
            "pkg/a.py": "from . import b\nfrom .rope import f\nFOLLOWS = ('rope', 1, 'f')\n",
            "pkg/b.py": "from . import a\n",
        },
    )
    summaries, _ = store(tmp_path)
    summary = summaries.of(tmp_path / "pkg/b.py")
    assert summary is not None
    a = summaries.of(tmp_path / "pkg/a.py")
    assert a is not None and a.functions["f"].returns.prec == "full"


def test_summary_round_trips_through_json() -> None:
    rope = Place("pkg/rope.py", 11, 9, "upcast to float32 by `.float()`")
    full = Value("tensor", "full", "float32", "upcast", rope)
    summary = ModuleSummary(
        "pkg.rope",
        "pkg/rope.py",
        functions={
            "apply": Function(
                ("q", "k"), Value("seq", items=(full, Value("tensor", "model", same_as=(1,))))
            )
        },
        classes={
            "Norm": ClassSummary(
                ("torch.nn.Module",),
                True,
                True,
                ("wo",),
                {"weight": "Parameter"},
                {"forward": Function(("x",), full)},
                {"weight": full, "proj": Value("module", "model", layer="Linear")},
                ("router",),
                adapter_casts=("ModuleDict", "ParameterDict"),
            )
        },
        constants={"DTYPE": Value("dtype", "half", "float16")},
        reexports={"helper": ("layers.rope", 1, "apply")},
    )
    again = ModuleSummary.from_json(summary.to_json())
    assert again == summary
    assert again.digest == summary.digest
    changed = ModuleSummary("pkg.rope", "pkg/rope.py", functions={"apply": Function(("q",), full)})
    assert changed.digest != summary.digest


@pytest.mark.parametrize("text", ["", "[]", "{}", '{"format": 0}', '{"format": 1, "module": 1}'])
def test_foreign_or_corrupt_summaries_are_not_read(text: str) -> None:
    assert ModuleSummary.from_json(text) is None


def test_a_package_init_without_torch_still_reexports(tmp_path: Path) -> None:
    """``pkg/__init__.py`` that only re-exports (no ``torch`` in it) leads lookups on."""
    from mpcheck.pipeline.one_file import Options, check_source
    from mpcheck.project import summarise
    from mpcheck.ruleset.rule import all_rules

    write(
        tmp_path,
        {
            "pkg/__init__.py": "from .rope import apply_rope\n",
            "pkg/rope.py": "import torch\n\ndef apply_rope(q, cos):\n    return q.float() * cos\n",
            "model/attention.py": (
                "import torch.nn.functional as F\nfrom torch import nn\n\n"
                "from pkg import apply_rope\n\n\nclass Attention(nn.Module):\n"
                "    def forward(self, q, k, v, cos):\n"
                "        q = apply_rope(q, cos)\n"
                "        return F.scaled_dot_product_attention(q, k, v)\n"
            ),
        },
    )
    summarise.forget()
    path = tmp_path / "model" / "attention.py"
    found = check_source(
        path.read_bytes(), str(path), all_rules(), Options(project_root=str(tmp_path))
    )
    assert [(d.code, d.start.row) for d in found] == [("MPC103", 10)]


def test_a_walk_that_met_an_outer_walks_cycle_is_not_kept_as_a_check(tmp_path: Path) -> None:
    """A module checked while summarised keeps its findings only when its walk saw the
    project as its own check would: not an import cycle left open by the walk around it."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import g\n")  # a -> b at the top level
    (pkg / "b.py").write_text("def g():\n    from pkg.a import f\n")  # b -> a only inside
    (pkg / "c.py").write_text("x = 1\n")

    class Engine:
        def imports(self, path: Path) -> list[tuple[str, int]]:
            return [("pkg.b.g", 0)] if path.name == "a.py" else []

        def summarise(self, path: Path, lookup: object) -> None:
            raise AssertionError("the walker takes every module")

    finished: list[str] = []
    store = Summaries(ModuleIndex((tmp_path,)), Engine())

    def walker(path: Path, lookup: object) -> tuple[ModuleSummary, object]:
        if path.name == "b.py":
            store.of(pkg / "a.py")  # b's function-level import of a, while a is open

        def finish(deps: object, kept: bool) -> None:
            if kept:  # (False: the walk is over but is not kept as a check)
                finished.append(path.name)

        return ModuleSummary("", path.name), finish

    store.walker = walker  # type: ignore[assignment]
    store.begin(pkg / "a.py")
    store.of(pkg / "b.py")
    store.of(pkg / "c.py")
    store.end(pkg / "a.py", None)
    assert finished == ["c.py"]  # b.py saw a.py unknown; its own check would not have


def test_only_the_walk_that_met_the_open_cycle_is_not_kept(tmp_path: Path) -> None:
    """The walk around the one that met an outer walk's open module sees only the summary
    that walk made, which its own check would see too: its check is kept."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import g\n")  # a -> b -> d at the top level
    (pkg / "b.py").write_text("from pkg.d import h\n")
    (pkg / "d.py").write_text("def h():\n    from pkg.a import f\n")  # d -> a inside only
    tops = {"a.py": [("pkg.b.g", 0)], "b.py": [("pkg.d.h", 0)]}

    class Engine:
        def imports(self, path: Path) -> list[tuple[str, int]]:
            return tops.get(path.name, [])

        def summarise(self, path: Path, lookup: object) -> None:
            raise AssertionError("the walker takes every module")

    finished: list[str] = []
    store = Summaries(ModuleIndex((tmp_path,)), Engine())
    nested = {"b.py": pkg / "d.py", "d.py": pkg / "a.py"}

    def walker(path: Path, lookup: object) -> tuple[ModuleSummary, object]:
        if path.name in nested:
            store.of(nested[path.name])

        def finish(deps: object, kept: bool) -> None:
            if kept:  # (False: the walk is over but is not kept as a check)
                finished.append(path.name)

        return ModuleSummary("", path.name), finish

    store.walker = walker  # type: ignore[assignment]
    store.begin(pkg / "a.py")
    store.of(pkg / "b.py")
    store.end(pkg / "a.py", None)
    assert finished == ["b.py"]  # d.py saw a.py unknown; b.py saw only d.py's summary
    assert store.dependencies(pkg / "d.py") == {pkg / "a.py": CYCLE}
    assert store.dependencies(pkg / "b.py") == {pkg / "d.py": store.digest(pkg / "d.py")}


def test_the_store_keeps_one_copy_of_equal_parts() -> None:
    """Thousands of classes have a ``q_proj`` built the same way: the store keeps one."""

    def module(name: str) -> ModuleSummary:
        built = Value("module", "full", "float32", "literal", Place("m.py", 0, 0, "built"))
        attrs = {"q_proj": built, "k_proj": Value("module", layer="Linear")}
        forward = Function(("hidden_states",), Value("tensor", "full", "float32"))
        classes = {"Attention": ClassSummary(("torch.nn.Module",), True, False, attrs=attrs)}
        classes["Block"] = ClassSummary((), True, False, methods={"forward": forward})
        return ModuleSummary(name, f"{name}.py", classes=classes)

    pool = Pool()
    first, second = module("a"), module("b")
    kept = [pool.summary(first), pool.summary(second)]
    assert kept == [first, second]
    assert [k.digest for k in kept] == [first.digest, second.digest]
    one, two = (k.classes["Attention"] for k in kept)
    assert one.attrs["q_proj"] is two.attrs["q_proj"]
    assert one.attrs["q_proj"].origin is two.attrs["q_proj"].origin
    assert one.bases is two.bases
    forwards = [k.classes["Block"].methods["forward"] for k in kept]
    assert forwards[0] is forwards[1]
    assert pool.summary(first).classes["Attention"].attrs["q_proj"] is one.attrs["q_proj"]


def test_the_shared_modules_are_ordered_each_after_what_it_imports(tmp_path: Path) -> None:
    """Each after the modules it reaches through imports (here ``c -> x -> b -> a``, ``x``
    not among them), and among those free to go, the heaviest chain first: ``a`` (with ``b``
    and ``c`` waiting on it) before ``d``, which weighs more than ``a`` alone, and ``d``
    before ``c``, which weighs less."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    graph = {"a": [], "b": ["a"], "x": ["b"], "c": ["x"], "d": []}
    for name in graph:
        (pkg / f"{name}.py").write_text("")
    weights = {"a": 1, "b": 1, "c": 1, "d": 2, "x": 0}

    class Engine:
        def imports(self, path: Path) -> list[tuple[str, int]]:
            return [(f"pkg.{dep}", 0) for dep in graph[path.stem]]

        def summarise(self, path: Path, lookup: object) -> None:
            return None

    store = Summaries(ModuleIndex((tmp_path,)), Engine())
    chosen = [pkg / f"{name}.py" for name in "dcba"]
    order = store.dependency_order(chosen, lambda p: weights[p.stem])
    # a (chain 3) before d (2); then b and d tie (2: by name), and d before c (1)
    assert [p.stem for p in order] == ["a", "b", "d", "c"]
