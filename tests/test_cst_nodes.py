"""libcst's node constructors, as mpcheck installs them, build what libcst's own build."""

from __future__ import annotations

import dataclasses
import inspect
import re
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from mpcheck.files.cst_nodes import ORIGINAL_INITS, install_constructors
from mpcheck.files.parsing import parse
from tests.support import every_node

ROOT = Path(__file__).resolve().parent.parent
install_constructors()  # (a run of many files does; idempotent)
SOURCES = [
    *sorted((ROOT / "fixtures").rglob("*.py")),
    *(
        ROOT / "mpcheck" / name
        for name in ("files/cst_nodes.py", "files/parsing.py", "output/noqa.py")
    ),
]
EXTRA = (
    "match p:\n    case [1, *r] if r:\n        pass\n    case {'k': v, **kw}:\n        pass\n"
    "    case A(x=1) | None:\n        pass\n"
    "async def f[T: int, *Ts, **P](a, /, b=1, *c, d, **e) -> T:\n"
    "    async with a as (b, c):\n        await x\n    async for i in y:\n        yield\n"
    "    global g\n    del a[1:2:3], b\n    x @= y; x //= 2; x **= 3; x >>= 1\n"
    "    raise E from F\n    return (lambda q=1, *, r: q)(r=2)\n"
    "type Alias = list[int]\n"
    "try:\n    pass\nexcept* (A, B) as e:\n    pass\n"
    "print(f'{x!r:>{w}} {y=}', b'b' b'c', 'd' 'e', 1j, 1.5, ..., not a, a if b else c)\n"
    "print({*s}, {**d}, [i async for i in j], {k: v for k, v in w if k}, (g for g in h))\n"
)


def _nodes() -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    for text in [p.read_text(encoding="utf-8") for p in SOURCES] + [EXTRA]:
        module = parse(text.encode())
        assert isinstance(module, cst.Module)
        out += every_node(module)  # trivia too: its classes get constructors
    return out


NODES = _nodes()


def _fields(cls: type[cst.CSTNode]) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init]


def test_nearly_every_node_class_gets_the_cheaper_constructor() -> None:
    # Fewer would mean libcst changed how it declares its nodes: see cst_nodes._slot_init.
    assert len(ORIGINAL_INITS) >= 150
    assert cst.Name in ORIGINAL_INITS and cst.Module in ORIGINAL_INITS


def test_the_constructors_take_the_same_parameters_and_defaults() -> None:
    for cls, original in ORIGINAL_INITS.items():
        ours = inspect.signature(cls.__init__).parameters
        theirs = inspect.signature(original).parameters
        assert [(p.name, p.kind) for p in ours.values()] == [
            (p.name, p.kind) for p in theirs.values()
        ], cls
        for name, param in theirs.items():
            assert ours[name].default is param.default, (cls, name)


def test_the_default_factory_marker_passed_explicitly_runs_the_factory() -> None:
    """As dataclasses' constructors do (hypothesis' ``builds`` passes signature defaults)."""
    marker = inspect.signature(cst.Call).parameters["whitespace_after_func"].default
    assert repr(marker) == "<factory>"
    call = cst.Call(func=cst.Name("f"), whitespace_after_func=marker)
    assert call.whitespace_after_func.deep_equals(cst.SimpleWhitespace(""))


def test_every_parsed_node_is_rebuilt_alike_by_both_constructors() -> None:
    seen: set[type[cst.CSTNode]] = set()
    for node in NODES:
        cls = type(node)
        if cls not in ORIGINAL_INITS:
            continue
        seen.add(cls)
        args = {name: getattr(node, name) for name in _fields(cls)}
        theirs, ours, positional = (object.__new__(cls) for _ in range(3))
        ORIGINAL_INITS[cls](theirs, **args)
        cls.__init__(ours, **args)
        cls.__init__(positional, *args.values())
        for name in args:
            assert getattr(ours, name) is getattr(theirs, name), (cls, name)
            assert getattr(positional, name) is getattr(theirs, name), (cls, name)
    assert len(seen) >= 100  # the sources hold most kinds of node


def test_defaults_and_default_factories_are_applied_alike() -> None:
    required: dict[type[cst.CSTNode], dict[str, object]] = {}
    for node in NODES:
        cls = type(node)
        if cls in ORIGINAL_INITS and cls not in required:
            fields = [f for f in dataclasses.fields(cls) if f.init]
            required[cls] = {
                f.name: getattr(node, f.name)
                for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            }
    for cls, args in required.items():
        theirs, ours = object.__new__(cls), object.__new__(cls)
        try:
            ORIGINAL_INITS[cls](theirs, **args)
        except cst.CSTValidationError as exc:  # (a Try needs a handler: no default gives one)
            with pytest.raises(cst.CSTValidationError, match=re.escape(str(exc))):
                cls.__init__(ours, **args)
            continue
        cls.__init__(ours, **args)
        assert ours.deep_equals(theirs), cls


def test_nodes_built_outside_the_parse_thread_are_validated() -> None:
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")
    with pytest.raises(cst.CSTValidationError):
        cst.Call(func=cst.Name("f"), lpar=[cst.LeftParen()])  # unbalanced parentheses


_RUN = (
    "import sys\n"
    "from pathlib import Path\n"
    "from mpcheck.files import cst_nodes\n"
    "from mpcheck.pipeline import pool as runner\n"
    "from mpcheck.pipeline.one_file import Options\n"
    "from mpcheck.ruleset.rule import all_rules\n"
    "root = Path(sys.argv[1])\n"
    "options = Options(project_root=str(root), cache_dir=str(root / 'cache'))\n"
    "paths = sorted(root.glob('*.py'))\n"
    "runner.check_files([(p, tuple(all_rules()), options) for p in paths], processes=1)\n"
    "print(len(cst_nodes.ORIGINAL_INITS))\n"
)


def _installed_by_a_run(root: Path) -> bool:
    done = subprocess.run(
        [sys.executable, "-c", _RUN, str(root)], capture_output=True, text=True, check=True
    )
    return int(done.stdout) > 0


def test_a_run_of_many_files_installs_them_and_others_do_not(tmp_path: Path) -> None:
    """Installing costs 25 ms: a one-file check, or a run that finds every file in the
    cache (it parses nothing), would not get that back."""
    one, many = tmp_path / "one", tmp_path / "many"
    for root, files in ((one, 1), (many, 8)):
        root.mkdir()
        for i in range(files):
            (root / f"m{i}.py").write_text("import torch\nx = torch.ones(3)\n")
    assert not _installed_by_a_run(one)
    assert _installed_by_a_run(many)  # cold
    assert not _installed_by_a_run(many)  # warm


def test_a_process_that_wants_them_installs_them_at_its_first_parse() -> None:
    script = (
        "from mpcheck.files import cst_nodes, parsing\n"
        "cst_nodes.want_constructors()\n"
        "print(len(cst_nodes.ORIGINAL_INITS))\n"
        "parsing.parse(b'x = 1\\n')\n"
        "print(len(cst_nodes.ORIGINAL_INITS))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    before, after = map(int, done.stdout.split())
    assert before == 0 and after > 0


def test_type_checks_answer_by_the_hierarchy_as_abcmeta_did() -> None:
    # cst_nodes._PlainChecks: the node classes' checks run in C, with ABCMeta's answers
    from abc import ABCMeta

    from mpcheck.files.cst_nodes import _node_classes

    classes = [cst.CSTNode, *_node_classes()]
    assert all(type(cls).__name__ == "_PlainChecks" for cls in classes)
    concrete = [cls for cls in classes if cls in ORIGINAL_INITS]
    for sub in concrete:
        for sup in classes:
            assert issubclass(sub, sup) == ABCMeta.__subclasscheck__(sup, sub), (sub, sup)
    name, stmt = cst.Name("x"), cst.Pass()
    for sup in classes:
        assert isinstance(name, sup) == ABCMeta.__instancecheck__(sup, name), sup
        assert isinstance(stmt, sup) == ABCMeta.__instancecheck__(sup, stmt), sup
    assert not isinstance(1, cst.CSTNode) and isinstance(name, cst.BaseExpression)
