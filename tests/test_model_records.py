"""Each file's model record (issue 36, step 3 of the pipeline): classes named by module and
class through the file's imports, strings and comments never counted, records cached by
content so a warm run derives none. Driven through the CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mpcheck.cli import main
from mpcheck.project import models
from mpcheck.project.models import uses_of_sources
from mpcheck.project.records import blank, record_of
from tests.support import XFILE


def findings(case: Path, *extra: str) -> list[Any]:
    cmd = [sys.executable, "-m", "mpcheck", "check", "--output-format", "json", *extra, "."]
    done = subprocess.run(cmd, cwd=case, capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), done.stderr
    found: list[Any] = json.loads(done.stdout)
    return found


def severities(case: Path, *extra: str) -> dict[str, str]:
    return {
        Path(f["filename"]).as_posix().rsplit("/", 2)[-2]: f["severity"]
        for f in findings(case, *extra)
    }


def test_a_same_named_class_in_another_module_gets_no_evidence() -> None:
    """``dit/sample.py`` casts ``dit``'s ``DiT`` (which builds ``dit.blocks.Block``); the
    ``Block`` of ``tools/blocks.py`` is another class: the cast is no evidence about it. (It
    was a latent warning; since every half path of this application names its class, no
    half path reaches it and it runs in float32: issue 36.)"""
    found = severities(XFILE / "bad_same_named_block", "--no-cache")
    assert found == {"dit": "error"}


@pytest.mark.parametrize(
    "script",
    [
        "import dit.model as m\n\nmodel = m.DiT(8, 2)\nmodel.half()\n",
        "from dit import DiT\n\nDiT(8, 2).to(torch.bfloat16)\n",
        "from dit.model import DiT as Net\n\n"
        "net = Net.from_pretrained('x', torch_dtype=torch.float16)\n",
    ],
)
def test_casts_resolve_through_imports_aliases_and_reexports(tmp_path: Path, script: str) -> None:
    case = tmp_path / "case"
    shutil.copytree(XFILE / "warn_uncast_block", case)
    (case / "dit" / "__init__.py").write_text("from .model import DiT\n")
    (case / "run.py").write_text(f"import torch\n\n{script}")
    assert severities(case, "--no-cache") == {"dit": "error"}


def test_a_cast_in_a_docstring_comment_or_string_is_no_evidence(tmp_path: Path) -> None:
    case = tmp_path / "case"
    shutil.copytree(XFILE / "warn_uncast_block", case)
    # (``serve(model)`` hands the model to code mpcheck cannot follow: a premise it states
    # only when the project asks for such premises)
    (case / ".mpcheck.toml").write_text("open-world-premises = true\n")
    (case / "run.py").write_text(
        'import torch\n\nfrom dit.model import DiT\n\n"""model = DiT(8, 2)\nmodel.half()\n"""\n'
        "# DiT(8, 2).half()\ntext = 'DiT(8, 2).half()'\nmodel = DiT(8, 2)\nserve(model)\n"
        "noise = torch.zeros(2, dtype=torch.bfloat16)\n"
    )
    assert severities(case, "--no-cache") == {"dit": "warning"}


def test_blank_keeps_offsets_and_lines() -> None:
    data = b'x = "a#b"  # c\ns = """\nDiT().half()\n"""\ny = 1\n'
    out = blank(data)
    assert len(out) == len(data) and out.count(b"\n") == data.count(b"\n")
    assert b"half" not in out and b"y = 1" in out


def test_a_record_names_classes_by_module(tmp_path: Path) -> None:
    record = record_of(
        b"from ..blocks import Block\nfrom . import layers as L\n"
        b"class Net(ModelMixin):\n    def __init__(self):\n        self.b = Block()\n"
        b"        self.n = L.Norm()\n",
        "pkg/sub/net.py",
    )
    (net,) = record.classes
    assert net.name == "pkg.sub.net.Net"
    assert net.builds == ("pkg.blocks.Block", "pkg.sub.layers.Norm")


def test_a_warm_run_derives_no_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    case = tmp_path / "case"
    shutil.copytree(XFILE / "bad_cast_reaches_block", case)
    cache = str(tmp_path / "cache")
    args = ["check", "-j", "1", "--cache-dir", cache, "--output-format", "json", str(case)]
    monkeypatch.chdir(case)
    assert main(args) == 1
    models.forget_uses()
    models._RECORDS.clear()  # (this process's own memo: only the cache is left)

    def derive(data: bytes, path: str) -> object:
        raise AssertionError(f"{path} derived again")

    monkeypatch.setattr(models, "record_of", derive)
    assert main(args) == 1


def test_a_model_the_project_only_builds_in_float32_gives_nothing() -> None:
    """The VAE is built, moved, set to eval and called; another model is cast to bfloat16
    (the project mentions half): the VAE's block is float32 all the same."""
    assert findings(XFILE / "good_float32_only_model", "--no-cache") == []


def test_a_model_handed_to_a_helper_is_no_float32_evidence() -> None:
    """The helper casts it (a use mpcheck does not follow): the premise stands, a warning."""
    assert severities(XFILE / "warn_model_escapes_to_helper", "--no-cache") == {"vae": "warning"}


@pytest.mark.parametrize(
    ("use", "kept"),
    [
        (
            "model = model.to(device)\nmodel.eval()\nopt = Adam(model.parameters())\ny = model(x)",
            True,
        ),
        ("model = torch.compile(model)\nmodel = DDP(model, device_ids=[0])\nmodel.cuda()", True),
        ("model = convert(model)", False),
        ("other = model", True),  # an alias: its uses decide (none here)
        ("if model is not None:\n        y = model.generate(x)", True),
        ("helper(model)", False),  # (a function of another file: it might cast it)
        # a cast of one part casts that part (recorded as its cast), not the model; so does a
        # cast of an item of a part, and another casting method of a part reaches that part
        # at most (the project says what it holds); a casting method of the model may cast it
        ("model.encoder.half()", True),
        ("model.encoder.to(torch.float16)", True),
        ("model.encoder.layers.half()", True),
        ("model.blocks[0].half()", True),
        ("model.encoder.double()", True),
        ("model.double()", False),
        ("model[0].half()", False),  # (an item of the model itself: anything it holds)
        # a parameter of a part is a tensor: handed on, it casts no module (the project
        # resolves what the attribute holds, tests/test_tensor_attributes.py)
        ('opt = Adam([{"params": [model.emb.weight], "lr": 1e-4}])', True),
        ("ps = []\nps.append(model.encoder.layer.bias)", True),
        ("rest = [p for p in model.parameters() if p is not model.emb.weight]", True),
        ("model.emb.weight.data = model.emb.weight.data.bfloat16()", True),
        ("everything = [model]", False),  # (the model itself in a container: anything)
        # sizes and tests read off the model: a tensor factory or a builtin takes numbers
        ("z = torch.randn(2, model.in_channels, 8)\nn = len(model.blocks)", True),
        ("ok = isinstance(model, nn.Module) and hasattr(model, 'blocks')", True),
        # (an attribute handed to an unknown callee: the project decides whether it is a
        # bound method, tests/test_model_escapes.py; the file keeps it)
        ("z = helper(2, model.in_channels)", True),
    ],
)
def test_only_dtype_keeping_uses_leave_a_build_float32(use: str, kept: bool) -> None:
    source = "import torch\nfrom torch import nn\nfrom net import Net\n\n"
    source += "def main(x, device):\n    model = Net()\n"
    source += "".join(f"    {line}\n" for line in use.splitlines())
    (build,) = record_of(source.encode(), "run.py").builds
    assert build[0] == "net.Net" and build[2] is kept


@pytest.mark.parametrize(
    ("cast", "part"),
    [
        ("model.encoder.half()", "net.Net@encoder"),
        ("model.encoder.to(torch.float16)", "net.Net@encoder"),
        ("model.encoder.to(torch.half)", "net.Net@encoder"),
        ("model.embed.bfloat16()", "net.Net@embed"),
        ("model.encoder.eval().half()", "net.Net@encoder"),  # (``eval`` returns the part)
        ("self.net.encoder.half()", "net.Net@encoder"),
        ("other.encoder.half()", None),  # (no model of the file: nothing is known of it)
        ("model.encoder.layers.half()", "net.Net@encoder@layers"),  # (a part of a part)
        ("model.blocks[0].half()", "net.Net@blocks"),  # (an item of a part: held by it)
        ("model.blocks[0].eval().half()", "net.Net@blocks"),
        ("model[0].half()", None),  # (an item of the model itself: not followed)
        ("layers = model.blocks[:2]\n        layers.half()", "net.Net@blocks"),
        ("enc = model.encoder\n        enc.layers.half()", "net.Net@encoder@layers"),
    ],
)
def test_a_cast_of_one_part_is_recorded_as_that_parts_cast(cast: str, part: str | None) -> None:
    """``nn.Module.half()`` walks its receiver's submodules only: ``model.encoder.half()``
    casts the part ``encoder`` of a ``Net`` (which class that is, the project decides:
    :mod:`mpcheck.project.held_parts`), never the model itself."""
    source = "import torch\nfrom net import Net\n\nclass Run:\n    def go(self, other):\n"
    source += "        model = Net()\n        self.net = Net()\n"
    source += f"        {cast}\n"
    casts = record_of(source.encode(), "run.py").casts
    assert [c[0] for c in casts] == ([part] if part else [])


def test_a_class_record_names_what_each_part_holds() -> None:
    """``self.<attr> = Call(...)``: the callee (and those of the calls inside), resolved as
    ``builds``; a value no call names, or a container handed a variable, is unnamed."""
    record = record_of(
        b"from torch import nn\nfrom .blocks import Block\n\nclass Net(nn.Module):\n"
        b"    def __init__(self, enc, d):\n        self.embed = nn.Embedding(10, d)\n"
        b"        self.block = Block(d)\n"
        b"        self.blocks = nn.ModuleList([Block(d) for _ in range(2)])\n"
        b"        self.seq = nn.Sequential(enc, nn.Identity())\n        self.enc = enc\n"
        b"        self.cache = None\n",
        "pkg/net.py",
    )
    (net,) = record.classes
    assert net.parts == (
        ("embed", ("torch.nn.Embedding",)),
        ("block", ("pkg.blocks.Block",)),
        ("blocks", ("torch.nn.ModuleList", "pkg.blocks.Block")),
        ("seq", ("?", "torch.nn.Identity")),
        ("enc", ("?",)),
    )


@pytest.mark.parametrize(
    ("cast", "cast_at"),
    [
        ("model.eval().half()", True),
        ("self.net.eval().half()", True),
        ("Net().to(device).requires_grad_(False).half()", True),
        ("model.to(memory_format=torch.channels_last).train(False).bfloat16()", True),
        ("model.cuda().to(torch.float16)", True),
        ("model.to(torch.half)", True),  # (``torch.half`` is ``torch.float16``)
        ("model.eval().to(device)", False),  # (no half dtype at the end of the chain)
        ("model.to(torch.float16).eval()", True),  # (the cast is the chain's first call)
        ("model.generate(x).half()", False),  # a method's result: not the module
    ],
)
def test_a_cast_after_module_methods_returning_self_casts_the_module(
    cast: str, cast_at: bool
) -> None:
    """``nn.Module.eval``, ``train``, ``requires_grad_``, ``cuda``, ``cpu`` and a ``to``
    without a dtype return the module itself: a cast at the end of a chain of them casts
    the chain's receiver."""
    source = "import torch\nfrom net import Net\n\nclass Run:\n    def go(self, device, x):\n"
    source += "        model = Net()\n        self.net = Net()\n"
    source += f"        {cast}\n"
    casts = record_of(source.encode(), "run.py").casts
    assert bool(casts) is cast_at
    assert all(c[0] == "net.Net" for c in casts)


@pytest.mark.parametrize(
    ("use", "outside"),
    [
        ("y = model(x)", True),
        ("y = model.generate(x)", True),  # a method that runs the model
        ("y = model.encoder.encode(x)", True),  # (a part's method)
        ("with torch.autocast('cuda'):\n        y = model(x)\n        z = model.sample(y)", False),
        ("model.eval()\nmodel.requires_grad_(False)\nn = model.parameters()", False),
    ],
)
def test_a_run_outside_every_autocast_region_is_recorded(use: str, outside: bool) -> None:
    """Whether the file runs the model outside an autocast region: a call or any method but
    those that do not run it (``eval``, ``parameters``, a cast)."""
    source = "import torch\nfrom net import Net\n\ndef main(x):\n    model = Net()\n"
    source += "".join(f"    {line}\n" for line in use.splitlines())
    assert record_of(source.encode(), "run.py").outside == (("net.Net",) if outside else ())


def test_a_part_its_owner_runs_is_not_run_outside_autocast() -> None:
    """``self.block(x)`` in the body of the class that binds ``self.block`` runs wherever
    that class runs (under the autocast of its callers); a plain class's ``self.net(x)`` is
    a run of its own."""
    source = (
        "from torch import nn\nfrom net import Block\n\n"
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.block = Block()\n\n    def forward(self, x):\n"
        "        return self.block(x)\n\n"
        "class Runner:\n    def __init__(self):\n        self.net = Block()\n\n"
        "    def go(self, x):\n        return self.net(x)\n"
    )
    assert record_of(source.encode(), "run.py").outside == ("net.Block",)
    owned = source.replace("class Runner:", "class Runner(nn.Module):")
    assert record_of(owned.encode(), "run.py").outside == ()


@pytest.mark.parametrize(
    ("use", "made"),
    [
        ("return model", (("run.main", -1, "net.Net"),)),
        ("other = model\nreturn other", (("run.main", -1, "net.Net"),)),
        ("return model, cfg", (("run.main", 0, "net.Net"),)),
        ("return (\n        cfg,\n        model,\n    )", (("run.main", 1, "net.Net"),)),
        ("return model.half()", ()),
        ("return wrap(model)", ()),
    ],
)
def test_a_returned_model_is_a_factory_product_its_callers_decide(
    use: str, made: tuple[tuple[str, int, str], ...]
) -> None:
    """A top-level function that returns a model it builds is a factory: the build stays
    float32 here when nothing else might cast it, and the record says which position of
    the returned value holds which class (the callers' uses decide, across files)."""
    source = "from net import Net\n\ndef main(x, device):\n    model = Net()\n"
    source += "".join(f"    {line}\n" for line in use.splitlines())
    record = record_of(source.encode(), "run.py")
    assert record.factories == made
    assert record.builds[0][2] is bool(made)


def test_a_method_returning_a_model_lets_it_escape() -> None:
    """A method's callers are not named by the file: its returned model might be cast."""
    source = b"from net import Net\n\nclass Loader:\n    def make(self):\n"
    source += b"        model = Net()\n        return model\n"
    record = record_of(source, "run.py")
    assert record.factories == () and record.unsafe == ("net.Net",)


def test_a_class_nothing_builds_imports_or_names_gives_nothing() -> None:
    """A vendored block that nothing in the project builds, subclasses, imports, exports or
    names is never run: its upcast is no finding (issue 36 item 4)."""
    assert findings(XFILE / "good_unbuilt_vendored_block", "--no-cache") == []


@pytest.mark.parametrize(
    ("where", "text"),
    [
        ("vendor/config.py", 'BLOCKS = ["LegacyBlock"]\n'),  # a string naming it
        ("vendor/__init__.py", '__all__ = ["LegacyBlock"]\n'),  # an export
        # an import, in a file the project runs (the package ``__init__`` imports it)
        ("vendor/use.py", "from .legacy import LegacyBlock\n"),
        ("vendor/more.py", "from .legacy import *\n\nclass Big(LegacyBlock):\n    pass\n"),
    ],
)
def test_a_class_the_project_names_stays_reachable(tmp_path: Path, where: str, text: str) -> None:
    case = tmp_path / "case"
    shutil.copytree(XFILE / "good_unbuilt_vendored_block", case)
    (case / where).write_text(text)
    if where.endswith(("use.py", "more.py")):
        (case / "vendor" / "__init__.py").write_text(f"from . import {Path(where).stem}\n")
    # (reached, yet silent: the only half path, ``Head().to(torch.bfloat16)``, names its
    # class, so no half path reaches the block and it runs in float32 -- issue 36)
    sources = {p.relative_to(case).as_posix(): p.read_bytes() for p in case.rglob("*.py")}
    assert uses_of_sources(sources).at("vendor.legacy").reached("LegacyBlock")
    assert severities(case, "--no-cache") == {}


def test_a_registered_class_stays_reachable() -> None:
    """``@register("legacy")``: a config builds it by name."""
    assert severities(XFILE / "warn_registered_vendored_block", "--no-cache") == {
        "vendor": "warning"
    }


def test_a_build_from_a_half_part_is_no_float32_build() -> None:
    """``LoraLinear(base)`` with ``base`` cast to bfloat16 holds a half part."""
    source = (
        "import torch\nfrom torch import nn\nfrom net import LoraLinear\n\n"
        "def main(x):\n    base = nn.Linear(4, 4).to(torch.bfloat16)\n"
        "    layer = LoraLinear(base)\n    return layer(x)\n"
    )

    def kept(text: str) -> bool:
        builds = record_of(text.encode(), "run.py").builds
        (build,) = [b for b in builds if b[0] == "net.LoraLinear"]
        return build[2]

    assert kept(source) is False
    assert kept(source.replace(".to(torch.bfloat16)", "")) is True


BLOCKS = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x.float())


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return self.block(x)
"""


def test_reachability_needs_a_project_that_builds_its_models(tmp_path: Path) -> None:
    """A module file nothing builds is as reachable as its users make it (a warning); once a
    script builds its model, a part that model builds in the same file is reached too, and a
    class nothing builds is not."""
    (tmp_path / "pyproject.toml").write_text("[tool.mpcheck]\nopen-world-premises = true\n")
    (tmp_path / "blocks.py").write_text(BLOCKS)
    assert severities(tmp_path, "--no-cache") == {tmp_path.name: "warning"}
    script = (
        "import torch\nfrom blocks import Model\n\nmodel = Model()\nconvert(model, torch.float16)\n"
    )
    (tmp_path / "run.py").write_text(script)
    assert severities(tmp_path, "--no-cache") == {tmp_path.name: "warning"}
    (tmp_path / "run.py").write_text("from blocks import Block\n\nprint(Block)\n")
    (tmp_path / "blocks.py").write_text(BLOCKS.replace("class Model", "class Unused"))
    (tmp_path / "other.py").write_text(
        "import blocks\n\nb = blocks.Block()\nimport torch\nconvert(b, torch.float16)\n"
    )
    assert severities(tmp_path, "--no-cache") == {tmp_path.name: "warning"}


def test_blank_spaces_every_byte_of_a_string_or_comment_but_its_newlines() -> None:
    data = "s = '''é\r\n\tx'''  # ü\r\nt = 'a'\n".encode()
    expected = b"s = " + b" " * 6 + b"\n" + b" " * 5 + b"  " + b" " * 5 + b"\nt =    \n"
    assert blank(data) == expected


def test_the_wrapper_gate_answers_as_the_wrapper_regex() -> None:
    """The bare names looked for first change no answer of ``_WRAPPER_NAMES``."""
    from mpcheck.project import records

    assert records._WRAPPER_LEAVES
    for leaf in records._WRAPPER_LEAVES:
        spelled = (leaf + b"(x)", b"a = m." + leaf + b" (", b"my" + leaf + b"(x)", leaf + b" = 1")
        for code in spelled:
            expected = records._WRAPPER_NAMES.search(code) is not None
            assert records._names_wrapper(code) is expected
        assert records._names_wrapper(leaf + b"(x)")
    assert not records._names_wrapper(b"model = Model()\nmodel.half()\n")


def test_a_factory_in_a_file_with_windows_line_ends() -> None:
    """``return Net.from_pretrained(...)`` followed by ``\\r\\n`` still returns the model."""
    source = b"from net import Net\r\n\r\ndef load(p):\r\n    return Net.from_pretrained(p)\r\n"
    assert record_of(source, "run.py").factories == (("run.load", -1, "net.Net"),)


@pytest.mark.parametrize(
    ("literal", "members"),
    [
        ('{"s": small, "l": Large}', ("nets.small", "nets.Large")),
        ("[small, ext.build]", ("nets.small", "ext.build")),
        ('{"s": small, "n": 3}', None),  # (a value that is no name: data, not a registry)
        ('{"s": small, **more}', None),
        ('{"s": lambda: Large}', None),
        ('{"s": torch.compile}', None),  # (a library's functions only)
    ],
)
def test_a_module_level_literal_of_project_callables_is_a_registry(
    literal: str, members: tuple[str, ...] | None
) -> None:
    """A module-level dict, list or tuple every value of which names a project function or
    class is a registry: calling one of its values runs one of them."""
    source = "import torch\nimport ext\n\nclass Large:\n    pass\n\ndef small():\n"
    source += f"    return Large()\n\n\nMODELS = {literal}\n"
    found = record_of(source.encode(), "nets.py").registries
    assert found == ((("nets.MODELS", members),) if members else ())


@pytest.mark.parametrize(
    "use",
    [
        "model = MODELS[name](depth=2)",
        'model = MODELS.get("s")()',
        "build = MODELS[name]\n    model = build()",
    ],
)
def test_a_registry_call_binds_what_its_values_return(use: str) -> None:
    """``MODELS[key](...)``, ``MODELS.get(key)(...)`` and a name bound to ``MODELS[key]`` then
    called: the value is what the registry's values return, and its uses are theirs."""
    source = f"from nets import MODELS\n\ndef main(name, x):\n    {use}\n    model.to('cpu')\n"
    record = record_of(source.encode(), "run.py")
    assert record.builds[-1][0] == "nets.MODELS()#" and record.builds[-1][2] is True


def test_a_registry_call_cast_to_half_is_a_cast_of_what_it_returns() -> None:
    source = b"from nets import MODELS\n\nmodel = MODELS[name]().half()\n"
    assert [c[0] for c in record_of(source, "run.py").casts] == ["nets.MODELS()#"]


def test_classes_registered_with_a_registry_object_are_its_members() -> None:
    """``@MODELS.register_module(...)`` over a top-level class or function and
    ``MODELS.register_module(module=X)`` register with the registry the name resolves to;
    ``~`` marks a registry object (its build is one of its members). A library's registry
    (mmengine's own ``MODELS``) holds the library's classes, none of these."""
    source = """
from torch import nn
from mmengine.registry import MODELS as ROOT
from pkg.registry import MODELS

@MODELS.register_module()
class Net(nn.Module):
    pass

@MODELS.register_module("net-xl")
def net_xl(**kwargs):
    return Net(**kwargs)

class Head(nn.Module):
    pass

MODELS.register_module(name="head", module=Head)

@ROOT.register_module()
class Other(nn.Module):
    pass
"""
    found = dict(record_of(source.encode(), "pkg/nets.py").registries)
    assert found == {
        "pkg.registry.MODELS": ("pkg.nets.Head", "pkg.nets.Net", "pkg.nets.net_xl", "~")
    }


@pytest.mark.parametrize(
    ("use", "name"),
    [
        ("model = MODELS.build(cfg)\n    model.half()", "pkg.registry.MODELS()#"),
        ("model = MODELS.build(cfg).half()", "pkg.registry.MODELS()#"),
        ("model = build_from_cfg(cfg, MODELS).half()", "pkg.registry.MODELS()#"),
        (
            "model = build_module(cfg, MODELS).half()",
            "pkg.registry.build_module~1~pkg.registry.MODELS()#",
        ),
    ],
)
def test_a_registry_objects_build_names_the_registry(use: str, name: str) -> None:
    """A registry's build returns one of the classes registered with the registry the call
    names: ``MODELS.build(cfg)``, mmengine's ``build_from_cfg(cfg, MODELS)``, and a project
    helper handed the registry (checked against the helper's own record at the join)."""
    source = "from mmengine.registry import build_from_cfg\n"
    source += f"from pkg.registry import MODELS, build_module\n\ndef main(cfg):\n    {use}\n"
    assert [c[0] for c in record_of(source.encode(), "run.py").casts] == [name]


def test_a_function_returning_a_handed_registrys_build_forwards_it() -> None:
    source = """
def build_module(module, builder, **kwargs):
    if isinstance(module, dict):
        return builder.build(module)
    return module
"""
    assert record_of(source.encode(), "pkg/registry.py").registries == (
        ("pkg.registry.build_module", ("~1",)),
    )


def test_a_return_annotation_names_what_a_function_returns() -> None:
    """``def load(...) -> Net`` returns a ``Net`` (PEP 484), whatever its body builds it from;
    a library's class or a tensor annotated is no project factory."""
    source = """
import torch
from transformers import CLIPTextModel
from pkg.net import Net, Vae

def load(name) -> Net:
    return getattr(models, name)()

def load_pair(name) -> tuple[CLIPTextModel, Optional[Vae]]:
    return registry[name]()

def mask(n) -> torch.Tensor:
    return helper(n)
"""
    assert record_of(source.encode(), "run.py").factories == (
        ("run.load", -1, "pkg.net.Net"),
        ("run.load_pair", 1, "pkg.net.Vae"),
    )


def test_a_cast_of_what_a_classmethod_builds_of_cls_is_owned_by_its_class() -> None:
    """In a classmethod ``cls`` is the class or one deriving it: ``cls(...)``,
    ``cls.from_config(...)`` and ``skip_init(cls, ...)`` build one of them (not a model of
    unknown class), and a module method returning the module keeps it; a name bound last to
    something else, or in another function, is not."""
    source = """
import torch
from torch import nn

class Net(nn.Module):
    @classmethod
    def load(cls, sd, dtype):
        model = torch.nn.utils.skip_init(
            cls, device="cpu"
        )
        model.load_state_dict(sd)
        model.to(dtype=dtype)
        return model

    @classmethod
    def build(cls, dtype):
        model = cls()
        model = wrap(model)
        model.eval()
        model.to(dtype=dtype)
        return model

    @classmethod
    def make(cls, config, dtype):
        model = cls.from_config(config)
        model = model.requires_grad_(False).to(dtype)
        model.eval()
        model.to(dtype)
        return model

def other(model, dtype):
    model.eval()
    model.to(dtype=dtype)
"""
    record = record_of(source.encode(), "run.py")
    assert record.owned == (
        ("run.Net", (12, 9, "")),
        ("run.Net", (26, 17, "")),
        ("run.Net", (28, 9, "")),
    )
    assert [line for line, _, _ in record.loose] == [20, 33]


def test_a_function_s_own_binding_of_a_name_says_what_its_cast_casts() -> None:
    """A name a function binds is its own variable: the value of a project function bound
    to it in another function is not what its cast casts; a parameter the file never uses as
    a module holds none of the file's bindings; a tuple target keeps them all."""
    source = """
import torch
from pkg.helpers import cat_h, load_vae, encode

def decode(hidden_states, dtype):
    hidden_states = cat_h(hidden_states)
    return hidden_states

def upsample(hidden_states):
    hidden_states = hidden_states.to(torch.float16)
    return hidden_states

def run(dtype):
    vae = load_vae()
    vae = vae.to("cuda")
    vae.to(dtype)
    emb, pooled = encode(vae)
    emb = emb.to(dtype)

def run2(vae, dtype):
    vae.eval()
    vae.to(dtype)

def run3(x, dtype):
    hidden_states = torch.cat([x, x])
    hidden_states = hidden_states.to(dtype)
"""
    record = record_of(source.encode(), "run.py")
    assert record.loose == ()
    assert [(name, spot[0]) for name, spot, _, _ in record.casts] == [
        ("pkg.helpers.load_vae()#", 16),
        ("pkg.helpers.encode()#0", 18),
        ("pkg.helpers.load_vae()#", 22),
    ]


@pytest.mark.parametrize(
    ("use", "handed"),
    [
        ("x = x.to(model.dtype)", False),  # a dtype handed on
        ("x = x.to(model.device)", False),
        ("flag(model.training)", False),
        ("x = x.to(model.encoder.dtype)", False),  # a part's dtype: a value too
        ("keep(model.encoder)", True),  # a part handed on: the callee may cast it
        ("keep(model)", True),  # the model itself
    ],
)
def test_reading_a_models_dtype_or_device_hands_on_no_model(use: str, handed: bool) -> None:
    """``latents.to(unet.dtype)`` reads a value off the model: nothing the call does can cast
    the model or a part, so its class keeps the dtypes its own casts write (issue 36)."""
    source = "from net import Net\n\ndef main(x):\n    model = Net().half()\n"
    source += f"    {use}\n    return model(x)\n"
    record = record_of(source.encode(), "run.py")
    assert bool(record.unsafe or record.held) is handed
