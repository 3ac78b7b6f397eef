"""Severity follows evidence (issue 36, items 1-3): a dtype-flow finding in a module's code
is an error only when the project makes that module half (a cast anywhere in the project,
a library base), a warning that states its premise when nothing does, and nothing when the
project only builds it in float32 or calls it under autocast every time.

Driven through the CLI on the multi-file cases of ``fixtures/xfile/`` (whose expectations
and runtime proofs ``tests/test_xfile.py`` checks), and through ``uses_of_sources`` for the
project scan itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mpcheck.project.models import uses_of_sources
from tests.support import XFILE


def findings(case: Path, *extra: str) -> list[Any]:
    cmd = [sys.executable, "-m", "mpcheck", "check", "--output-format", "json", *extra, "."]
    done = subprocess.run(cmd, cwd=case, capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), done.stderr
    found: list[Any] = json.loads(done.stdout)
    return found


def test_a_cast_in_another_file_makes_the_block_an_error_naming_the_cast() -> None:
    case = XFILE / "bad_cast_reaches_block"
    (finding,) = findings(case, "--no-cache")
    assert finding["severity"] == "error"
    assert "`DiT` is cast to half by `DiT(8, 2).half()` at dit/sample.py:11" in finding["message"]
    # and as a related location in the script's file: the cast resolved to this module's
    # class (PR mode counts a finding whose related locations touch the change as introduced)
    there = [
        (Path(r["filename"]).as_posix().rsplit("/", 2)[-2:], r["location"]["row"])
        for r in finding["related"]
        if "filename" in r
    ]
    assert (["dit", "sample.py"], 11) in there


def test_the_related_notes_say_each_link_once() -> None:
    """The class's note names the link in its own file (built in ``DiT``); the place's note
    says what happens there, without repeating its own location: no two notes say the same
    words."""
    for case, there in (
        ("bad_cast_reaches_block", "`DiT` is cast to half by `DiT(8, 2).half()`"),
        ("bad_library_model_part", "`DiT` is a `ModelMixin`, which its users run in half"),
    ):
        (finding,) = findings(XFILE / case, "--no-cache")
        notes = [r["message"] for r in finding["related"]]
        assert "`Block` is built in `DiT`" in notes
        assert there in notes
        assert len(set(notes)) == len(notes)
        assert not any(".py:" in n for n in notes)


def test_a_block_nothing_casts_is_a_warning_stating_the_premise() -> None:
    (finding,) = findings(XFILE / "warn_uncast_block", "--no-cache")
    assert finding["severity"] == "warning"
    premise = "(latent: raises if `Block` runs in half without autocast; the project builds no "
    assert finding["message"].endswith(f"{premise}model itself: its users build them)")


def test_a_premise_names_what_opens_the_world_at_its_place() -> None:
    """Issue 36: every half belief carries its evidence. A cast of a model whose class the
    engine cannot name (``getattr(blocks, name)(8).half()``) opens the closed world: the
    premise says so, and the cast is a related location in its file (JSON and SARIF)."""
    case = XFILE / "warn_loose_cast_names_its_support"
    (finding,) = findings(case, "--no-cache")
    row = next(
        i
        for i, line in enumerate((case / "net" / "run.py").read_text().splitlines(), 1)
        if ".half()" in line
    )
    assert finding["severity"] == "warning"
    assert finding["message"].endswith(
        "(latent: raises if `Block` runs in half without autocast; a model of unknown class "
        f"is cast at net/run.py:{row})"
    )
    there = [r for r in finding["related"] if r.get("filename", "").endswith("run.py")]
    assert [(r["location"]["row"], r["message"]) for r in there] == [
        (row, "a model of unknown class is cast")
    ]
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", "--output-format", "sarif"]
    done = subprocess.run([*cmd, "."], cwd=case, capture_output=True, text=True, check=False)
    (result,) = json.loads(done.stdout)["runs"][0]["results"]
    uris = [r["physicalLocation"]["artifactLocation"]["uri"] for r in result["relatedLocations"]]
    assert any(uri.endswith("net/run.py") for uri in uris)


def test_the_opening_of_a_world_is_its_first_reason() -> None:
    """What opens the world, in order: no application (its users build its classes), a
    changed default dtype, a wrapper that may cast what it is handed (with its place); a
    closed world says, per class a half path reaches, which path (None: none reaches it)."""
    from mpcheck.knowledge.wrappers import UNKNOWN
    from mpcheck.project.closed import Configured, Opening, closed_world, opened_by
    from mpcheck.project.summary import Place

    wrapper = Place("train.py", 9, 5, "`Trainer(precision=p)` at train.py:9")

    def world(**kw: object) -> tuple[Any, ...]:
        args: dict[str, Any] = {
            "application": True,
            "package": False,
            "defaults": False,
            "deepspeed": False,
            "wrappers": {},
            "takes": {},
            "loose": [],
            "roots": {"m.Model": Opening("reached", "a use of `Model` may cast it")},
            "casts": (),
            "reach": (),
            "bodies": {"m.Model": {"m.Block"}},
            "subclasses": {},
            "classes": {"m.Model": "m.py", "m.Block": "m.py", "m.Other": "m.py"},
            "sites": {},
            "shown": (),
            "side": [],
            "configured": Configured([], (), ()),
            "where": lambda path, line: f"{path}:{line}",
        }
        args.update(kw)
        return closed_world(**args)

    def opened(**kw: object) -> dict[str, Opening]:
        return dict(world(**kw)[2])

    assert opened(application=False)[""].kind == "no application"
    kinds = world(defaults=True, application=False)[3]
    assert kinds == ("no application", "default dtype")  # (each that opens it, first first)
    assert opened(defaults=True)[""].kind == "default dtype"
    found = opened(wrappers={"lightning": [(UNKNOWN, wrapper)]})[""]  # (no take of it seen)
    text = "the models handed to a wrapper may be cast by `Trainer(precision=p)` at train.py:9"
    assert (found.kind, found.text, found.place) == ("wrapper", text, Place("train.py", 9, 5, text))
    # a wrapper casts only what it is handed: a model of unknown class handed opens the world,
    # takes that all name their classes leave it closed (those classes are its roots)
    taken = Place("train.py", 12, 17, "")
    found = opened(wrappers={"lightning": [(UNKNOWN, wrapper)]}, takes={"lightning": [taken]})[""]
    assert found.text == f"{text}, and it is handed a model of unknown class at train.py:12"
    named = opened(wrappers={"lightning": [(UNKNOWN, wrapper)]}, takes={"lightning": []})
    assert "" not in named and opened_by(named, "m.Other") is None
    # (accelerate prepares what DeepSpeed casts in a project that names DeepSpeed)
    prepared = Place("train.py", 5, 1, "`Accelerator()` at train.py:5")
    autocast = {"accelerate": [("autocast", prepared)]}
    assert "" not in opened(wrappers=autocast, takes={"accelerate": [taken]})
    assert opened(wrappers=autocast, deepspeed=True, takes={"accelerate": [taken]})[""].place
    assert "" not in opened(wrappers=autocast, deepspeed=True, takes={"accelerate": []})
    closed = opened()
    assert opened_by(closed, "m.Other") is None
    assert opened_by(closed, "m.Model") == Opening("reached", "a use of `Model` may cast it")
    block = opened_by(closed, "m.Block")
    assert block is not None and block.text == "it runs in `Model`; a use of `Model` may cast it"


def test_a_library_models_part_is_an_error_through_the_library_base() -> None:
    (finding,) = findings(XFILE / "bad_library_model_part", "--no-cache")
    assert finding["severity"] == "error"
    assert "`DiT` is a `ModelMixin`, which its users run in half" in finding["message"]


def test_float32_only_and_autocast_at_every_call_give_nothing() -> None:
    assert findings(XFILE / "good_float32_only_block", "--no-cache") == []
    assert findings(XFILE / "good_autocast_every_call", "--no-cache") == []


def test_a_cast_added_in_another_file_reaches_a_cached_run(tmp_path: Path) -> None:
    """The cache keys findings on the project's casts: an edit to the script alone turns
    the block's silence (the model only ever built and called in float32) into an error on
    the next (cached) run."""
    case = tmp_path / "case"
    shutil.copytree(XFILE / "bad_cast_reaches_block", case)
    script = case / "dit" / "sample.py"
    script.write_text(script.read_text().replace("DiT(8, 2).half()", "DiT(8, 2)"))
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert [f["severity"] for f in findings(case, *cache)] == []
    script.write_text(script.read_text().replace("DiT(8, 2)", "DiT(8, 2).to(torch.bfloat16)"))
    assert [f["severity"] for f in findings(case, *cache)] == ["error"]


def test_a_load_added_in_another_file_reaches_a_cached_run(tmp_path: Path) -> None:
    """Which classes a half load builds (``from_pretrained(torch_dtype=...)``) is part of the
    evidence the cache keys on: a second load added to the script, the first cast unchanged,
    turns the float32 non-persistent buffer into an error on the next (cached) run."""
    case = tmp_path / "case"
    shutil.copytree(XFILE / "good_cast_after_load_buffer", case)
    script = case / "video" / "sample.py"
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert findings(case, *cache) == []
    cast = "    model = VideoTransformer.from_pretrained(state).to(torch.float16)\n"
    load = "    VideoTransformer.from_pretrained(state, torch_dtype=torch.float16)\n"
    script.write_text(script.read_text().replace(cast, cast + load))
    assert [f["code"] for f in findings(case, *cache)] == ["MPC102"]


def test_the_scan_follows_containment_and_prefers_a_cast() -> None:
    uses = uses_of_sources(
        {
            "blocks.py": b"class Block(nn.Module):\n    pass\n",
            "model.py": b"from blocks import Block\nclass Model(ModelMixin):\n"
            b"    def __init__(self):\n        self.blocks = [Block() for _ in range(2)]\n",
            "other.py": b"class Block(nn.Module):\n    pass\n",
            "train.py": b"from model import Model\nweight_dtype = torch.float32\nif bf16:\n"
            b"    weight_dtype = torch.bfloat16\nmodel = Model()\nmodel.to(weight_dtype)\n",
        }
    )
    block = uses.at("blocks").of("Block")
    assert block is not None and block.kind == "cast" and block.via == ("Model",)
    assert block.place.path == "train.py" and block.place.line == 6
    assert uses.at("other").of("Block") is None  # same name, another module: not built


def test_a_float32_dtype_is_no_cast_and_a_disabled_autocast_covers_nothing() -> None:
    uses = uses_of_sources(
        {
            "model.py": b"class Model(nn.Module):\n    pass\n",
            "run.py": b"m = Model().to(torch.float32)\n"
            b"with torch.autocast('cuda', enabled=False):\n    m(x)\n# bf16 elsewhere\n",
        }
    )
    assert uses.at("model").of("Model") is None


def test_a_model_a_plain_class_holds_follows_its_attribute_and_helpers() -> None:
    """``self.decoder = Decoder(8)`` in a plain class (nothing casting the holder casts what
    it holds), aliased, compared and handed to a helper of its file that casts nothing: only
    float32. The same helper casting it to half makes it a warning (its premise)."""
    assert findings(XFILE / "good_plain_holder_model", "--no-cache") == []
    (finding,) = findings(XFILE / "warn_plain_holder_cast_in_helper", "--no-cache")
    assert finding["severity"] == "warning"
    assert "latent: raises if `Decoder` runs in half" in finding["message"]


def test_a_librarys_class_built_only_by_its_examples_runs_as_they_show(tmp_path: Path) -> None:
    """The example builds it in float32 and nothing of the library names half: its users
    run it so, and the -1e10 fill is fine. A library whose users run every module in half
    says so (``models-run-in-half``): then the fill overflows in half (proven under torch)."""
    case = tmp_path / "case"
    shutil.copytree(XFILE / "good_library_demo_build", case)
    assert findings(case, "--no-cache") == []
    pyproject = case / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n[tool.mpcheck]\nmodels-run-in-half = true\n")
    (finding,) = findings(case, "--no-cache")
    assert finding["code"] == "MPC301"
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(case))
    try:
        from attn.attention import CausalAttention  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(case))
    CausalAttention(8)(torch.randn(2, 4, 8))  # float32: fine
    with pytest.raises(RuntimeError, match="without overflow"):
        CausalAttention(8).half()(torch.randn(2, 4, 8).half())


MODEL = b"class Model(nn.Module):\n    pass\n"
HALF = b"head = torch.nn.Linear(2, 2).half()\n"  # (a project that never says half builds in fp32)


def _kind(run: bytes, **extra: bytes) -> str | None:
    sources = {"pkg/__init__.py": b"", "pkg/model.py": MODEL, "run.py": HALF + run}
    found = uses_of_sources({**sources, **extra}).at("pkg.model").of("Model")
    return None if found is None else found.kind


def test_uses_that_keep_a_models_dtype() -> None:
    head = b"from pkg.model import Model\nmodel = Model(use_fp16=False)\n"
    assert _kind(head + b"if model is None:\n    pass\nm = model\nm.generate(x).cpu()\n") == (
        "float32"
    )
    assert _kind(head + b"torch.onnx.export(model, x, 'm.onnx')\n") == "float32"
    assert _kind(head + b"def run(m, x):\n    return m(x)\nrun(model, x)\n") == "float32"
    # what might cast it: a helper that casts, a method naming half, an alias returned
    assert _kind(head + b"def run(m, x):\n    return m.half()(x)\nrun(model, x)\n") is None
    assert _kind(head + b"model.enable_half()\n") is None
    assert _kind(head + b"model.configure(dtype=torch.float16)\n") is None
    assert _kind(head + b"def f():\n    m = model\n    return m\n") is None
    # an alias handed to a wrapper: the wrapper's effect (accelerate: autocast) is the model's
    acc = b"from accelerate import Accelerator\nacc = Accelerator()\nm = model\nacc.prepare(m)\n"
    assert _kind(head + acc) == "autocast"


def test_a_packages_main_demo_is_no_float32_evidence() -> None:
    """In an installable project, the package module's own ``__main__`` demo (or the
    package's ``__main__.py``) builds a class for show; a script at the root is the
    application's own build."""
    demo = b"from pkg.model import Model\nif __name__ == '__main__':\n    Model()(x)\n"
    sources = {"pkg/__init__.py": HALF, "pkg/model.py": MODEL, "pkg/demo.py": demo}
    assert uses_of_sources(sources, installable=True).at("pkg.model").of("Model") is None
    found = uses_of_sources(sources).at("pkg.model").of("Model")
    assert found is not None and found.kind == "float32"
    sources["train.py"] = demo
    found = uses_of_sources(sources, installable=True).at("pkg.model").of("Model")
    assert found is not None and found.kind == "float32"


def test_a_part_handed_to_a_constructor_and_a_base_follow_their_users() -> None:
    """A model handed to a project module's constructor is its part (cast with it); a base
    class runs in the classes deriving it, so its evidence is theirs."""
    model = (
        b"class Rope(nn.Module):\n    pass\n"
        b"class Base(nn.Module):\n    def __init__(self):\n        self.rope = Rope()\n"
        b"class Enc(Base):\n    pass\n"
        b"class Part(nn.Module):\n    pass\n"
        b"class Wrap(nn.Module):\n    def __init__(self, part):\n        self.part = part\n"
    )
    run = HALF + b"from pkg.model import Base, Enc, Part, Wrap\nenc = Enc()\nenc(x)\n"
    run += b"part = Part()\nw = Wrap(part)\nw(x)\n"
    sources = {"pkg/__init__.py": b"", "pkg/model.py": model, "run.py": run}

    def kinds() -> list[str | None]:
        uses = uses_of_sources(sources).at("pkg.model")
        found = [uses.of(name) for name in ("Rope", "Base", "Part")]
        return [None if f is None else f.kind for f in found]

    assert kinds() == ["float32", "float32", "float32"]
    sources["run.py"] = run + b"w.half()\n"
    assert kinds() == ["float32", "float32", "cast"]
    sources["run.py"] = run + b"class Dec(Base):\n    pass\nDec().half()\n"
    assert kinds()[:2] == [None, None]  # a subclass is cast: the base's code runs in half


def test_a_cast_of_what_a_factory_returns_reaches_the_block_as_an_error() -> None:
    """``load_dit(8).half()`` in the script casts the DiT the loader of another file builds
    and returns: the block's upcast is an error naming that cast."""
    (finding,) = findings(XFILE / "bad_factory_cast_model", "--no-cache")
    assert finding["severity"] == "error"
    cast = "`DiT` (returned by `load_dit()`) is cast to half by `load_dit(8).half()`"
    assert f"{cast} at dit/sample.py:12" in finding["message"]


def test_a_model_a_factory_returns_and_its_callers_keep_is_float32() -> None:
    """The loader returns ``(model, settings)``; the script binds the model (declared
    ``global``), moves and calls it: only ever float32, so the block gives nothing."""
    assert findings(XFILE / "good_factory_float32_model", "--no-cache") == []


FACTORY = (
    b"from pkg.model import Model, Head\n"
    b"def load(d):\n    model = Model()\n    model.eval()\n    return model, Head()\n"
)


def _factory_kinds(run: bytes, installable: bool = False) -> list[str | None]:
    model = MODEL + b"class Head(nn.Module):\n    pass\n"
    sources = {"pkg/__init__.py": b"", "pkg/model.py": model, "pkg/load.py": FACTORY}
    sources["run.py"] = HALF + run
    uses = uses_of_sources(sources, installable=installable).at("pkg.model")
    found = [uses.of(name) for name in ("Model", "Head")]
    return [None if f is None else f.kind for f in found]


def test_a_factorys_callers_decide_what_it_returns_by_position() -> None:
    call = b"from pkg.load import load\n"
    assert _factory_kinds(call + b"m, h = load(8)\nm(x)\nh.to(torch.bfloat16)\n") == [
        "float32",
        "cast",
    ]
    assert _factory_kinds(call + b"m, h = load(8)\nprepare(m)\nh(x)\n") == [None, "float32"]
    # what no call of an application binds might be cast; an installable package's users
    # run what its factories return as the package shows it run (here: in float32)
    assert _factory_kinds(b"") == [None, None]
    kinds = _factory_kinds(call + b"m, h = load(8)\nm(x)\nh(x)\n", installable=True)
    assert kinds == ["float32", "float32"]


def test_a_non_persistent_buffer_is_cast_with_a_model_cast_after_its_load() -> None:
    """``from_pretrained(torch_dtype=...)`` builds under that dtype and leaves a buffer the
    checkpoint lacks as built; a model loaded without it and cast by ``.to(torch.float16)``
    has every floating buffer cast. The project shows its loads: only the first is a bug."""
    (finding,) = findings(XFILE / "bad_dtype_load_buffer", "--no-cache")
    assert finding["code"] == "MPC102" and finding["severity"] == "error"
    assert findings(XFILE / "good_cast_after_load_buffer", "--no-cache") == []


def test_a_library_or_a_pipeline_load_keeps_the_buffer_exception() -> None:
    """Users of an installable package, or a library pipeline loading its parts by name
    under a dtype, may load any class that way: the exception holds."""
    model = b"from torch import nn\nclass Net(ModelMixin):\n    pass\n"
    run = b"import torch\nfrom pkg.model import Net\nnet = Net.from_pretrained('p').half()\n"
    sources = {"pkg/__init__.py": b"", "pkg/model.py": model, "run.py": run}
    assert not uses_of_sources(sources).at("pkg.model").loaded_under_dtype("Net")
    assert uses_of_sources(sources, installable=True).at("pkg.model").loaded_under_dtype("Net")
    loaded = b"pipe = DiffusionPipeline.from_pretrained('p', torch_dtype=torch.float16)\n"
    sources["run.py"] = run + b"from diffusers import DiffusionPipeline\n" + loaded
    assert uses_of_sources(sources).at("pkg.model").loaded_under_dtype("Net")
    sources["run.py"] = run + b"n2 = Net.from_pretrained('p', torch_dtype=torch.bfloat16)\n"
    assert uses_of_sources(sources).at("pkg.model").loaded_under_dtype("Net")


def test_a_model_handed_to_a_function_of_another_file_follows_that_function() -> None:
    """A weight loader of another file that casts nothing keeps the VAE float32 (the block
    gives nothing); one that casts what it is given leaves the premise, a warning."""
    assert findings(XFILE / "good_helper_elsewhere_keeps_model", "--no-cache") == []
    (finding,) = findings(XFILE / "warn_helper_elsewhere_casts_model", "--no-cache")
    assert finding["severity"] == "warning"


def test_a_function_of_another_file_keeps_a_model_only_if_it_casts_nothing() -> None:
    util = b"import torch\ndef load(m, p):\n    m.load_state_dict(torch.load(p))\n    return m\n"
    util += b"def to_half(m):\n    return m.half()\n"
    head = b"from pkg.model import Model\nmodel = Model()\n"

    def kind(run: bytes) -> str | None:
        sources = {"pkg/__init__.py": b"", "pkg/model.py": MODEL, "pkg/util.py": util}
        sources["run.py"] = HALF + head + run
        found = uses_of_sources(sources).at("pkg.model").of("Model")
        return None if found is None else found.kind

    assert kind(b"from pkg.util import load\nmodel = load(model, 'p')\nmodel(x)\n") == "float32"
    assert kind(b"from pkg import util\nutil.load(model, 'p')\nmodel(x)\n") == "float32"
    assert kind(b"from pkg.util import to_half\nto_half(model)\nmodel(x)\n") is None
    assert kind(b"from other import fiddle\nfiddle(model)\nmodel(x)\n") is None  # not ours


def test_a_numerics_warning_names_the_cast_that_makes_its_class_half() -> None:
    """MPC302 (and MPC301, MPC303) say why the model's dtype is float16 here, as MPC101
    does: the class, the class that builds it, and the cast in the script's file."""
    case = XFILE / "bad_cast_reaches_norm_square"
    (finding,) = findings(case, "--no-cache")
    assert finding["code"] == "MPC302"
    assert finding["message"].endswith(
        "(half: `RMSNorm` is built in `DiT`; `DiT` is cast to half by `DiT(8).half()` at "
        "dit/sample.py:14)"
    )
    there = [
        (Path(r["filename"]).name, r["location"]["row"])
        for r in finding["related"]
        if "filename" in r
    ]
    assert ("sample.py", 14) in there


def test_an_application_s_own_builds_outrank_a_library_base_s_contract(tmp_path: Path) -> None:
    """A library base says its users run the class in half. An application that shows every
    build of its subclass (float32, never cast) is that user: nothing to report. Shipped as
    a package, the same class has users the project does not show: the contract holds."""
    case = XFILE / "good_application_library_subclass"
    assert findings(case, "--no-cache") == []
    package = tmp_path / "package"
    shutil.copytree(case, package)
    (package / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0"\n')
    (finding,) = findings(package, "--no-cache")
    assert finding["code"] == "MPC101" and finding["severity"] == "error"
    assert "(half: `Denoiser` is a `ModelMixin`, which its users run in half)" in finding["message"]


def test_a_cast_names_the_half_dtype_it_writes_down_and_its_parts_follow() -> None:
    """``.to(torch.float16)``, ``.half()``, ``torch_dtype=torch.bfloat16`` each write one half
    dtype down; a dtype variable or a choice between both writes none."""
    model = b"class Up(nn.Module):\n    pass\nclass Dec(nn.Module):\n    def __init__(self):\n"
    model += b"        self.up = Up()\n"
    cases = {
        b"d = Dec().to(torch.float16)\n": ("float16",),
        b"d = Dec()\nd.half()\n": ("float16",),
        b"d = Dec.from_pretrained(p, torch_dtype=torch.bfloat16)\n": ("bfloat16",),
        b"d = Dec().to(weight_dtype)\n": (),
        b"d = Dec().to(torch.bfloat16 if bf16 else torch.float16)\n": (),
        b"d = Dec()\nif cuda:\n    d.to(torch.bfloat16)\nelse:\n    d.to(torch.float16)\n": (
            "float16",
            "bfloat16",
        ),
    }
    for script, written in cases.items():
        uses = uses_of_sources({"model.py": model, "run.py": b"from model import Dec\n" + script})
        for dtype in ("float16", "bfloat16"):
            found = uses.at("model").cast_to("Up", dtype)  # a part of the cast model
            assert (found is not None) == (dtype in written), (script, dtype)
            if found is not None:
                assert found.via == ("Dec",) and found.place.path == "run.py"


def test_a_fixed_half_dtype_meets_the_other_only_where_a_cast_writes_it(tmp_path: Path) -> None:
    """The decoder of ``bad_hardcoded_half_upsample`` cast to a dtype variable, or to the
    bfloat16 its upsampling hard-codes, gives no finding; cast to float16, it does."""
    case = tmp_path / "case"
    shutil.copytree(XFILE / "bad_hardcoded_half_upsample", case)
    script = case / "vq" / "decode.py"
    text = script.read_text()
    assert [f["code"] for f in findings(case, "--no-cache")] == ["MPC101"]
    for cast in ("torch.bfloat16", "weight_dtype"):
        script.write_text(text.replace("torch.float16", cast))
        assert findings(case, "--no-cache") == [], cast


@pytest.mark.parametrize(
    ("case", "premise"),
    [
        ("bad_application_pipeline_contract", "(latent: the pipeline's `vae`, half when"),
        ("bad_application_scheduler_step", "(latent: raises if the model whose outputs"),
    ],
)
def test_a_library_contract_outside_modules_is_a_premise_in_an_application(
    tmp_path: Path, case: str, premise: str
) -> None:
    """A pipeline's models and a sampler's model outputs are half when the library's users
    load the pipeline in half. In an application nothing shows such a load: a warning that
    states that premise. Shipped as a package, its users are the contract: an error."""
    (finding,) = findings(XFILE / case, "--no-cache")
    assert finding["severity"] == "warning" and premise in finding["message"]
    package = tmp_path / "package"
    shutil.copytree(XFILE / case, package)
    (package / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0"\n')
    (finding,) = findings(package, "--no-cache")
    assert finding["severity"] == "error" and "latent" not in finding["message"]


def _sources(case: Path) -> dict[str, bytes]:
    return {p.relative_to(case).as_posix(): p.read_bytes() for p in case.rglob("*.py")}


def test_a_class_no_half_path_reaches_runs_in_float32_when_every_path_resolves() -> None:
    """Weights change dtype only where code casts, loads or hands the model to something
    that does: an application whose every half path names its class (``ModelA(8).half()``)
    runs the class none of them reaches in float32 (issue 36)."""
    case = XFILE / "good_closed_half_paths"
    assert findings(case, "--no-cache") == []
    uses = uses_of_sources(_sources(case)).at("app.models")
    assert uses.float32_text("ModelA") is None or uses.of("ModelA") is not None
    assert uses.float32_text("ModelB") == (
        "no half cast, load or wrapper of the project reaches `ModelB` "
        "(its half paths reach `ModelA`)"
    )


def test_a_cast_of_a_model_picked_by_name_keeps_the_premise() -> None:
    """``getattr(models, name)(8).half()``: the cast's class is unknown, so every class of
    the project may be on it; the hazard stays a warning stating the premise."""
    (finding,) = findings(XFILE / "bad_unresolved_half_cast", "--no-cache")
    assert finding["severity"] == "warning"
    assert "latent: raises if `ModelB` runs in half" in finding["message"]
    uses = uses_of_sources(_sources(XFILE / "bad_unresolved_half_cast")).at("app.models")
    assert uses.float32_text("ModelB") is None


def test_a_cast_of_an_unresolved_factory_or_a_module_variable_keeps_the_premise() -> None:
    """A factory whose product the records cannot follow, or a variable the file uses as a
    module (``.eval()``) bound to no project class, is a half path of unknown target."""
    models = (
        b"from torch import nn\n\nclass A(nn.Module):\n    pass\n\nclass B(nn.Module):\n    pass\n"
    )
    for script in (
        b"from app.models import A\nfrom app.util import make\n\nA()\nm = make(cfg).half()\n",
        b"from app.models import A\nimport registry\n\nA()\nnet = registry.build(cfg)\n"
        b"net.eval()\nnet.half()\n",
    ):
        sources = {
            "app/__init__.py": b"",
            "app/models.py": models,
            "app/util.py": b"def make(cfg):\n    return cfg.cls()\n",
            "run.py": script,
        }
        uses = uses_of_sources(sources).at("app.models")
        assert uses.float32_text("B") is None, script


def test_a_half_free_application_runs_in_float32_and_a_package_as_it_shows(
    tmp_path: Path,
) -> None:
    """An application that never names a half dtype, a cast, autocast or a mixed-precision
    setting runs in float32. An installable package that never does is not half-free: its
    users may run it under autocast of their own, which needs nothing of the package (a
    rotary embedding's phases under a training loop's autocast: real bug
    xtransformers-4adbfc2). Its weights are cast only as it shows (here: never), so a
    float32 value meeting them is silent either way."""
    case = tmp_path / "case"
    shutil.copytree(XFILE / "good_library_demo_build", case)  # (installable)
    sources = _sources(case)
    package = uses_of_sources(sources, installable=True)
    assert not package.half_free and package.autocasts
    text = package.at("attn.attention").float32_text("CausalAttention")
    assert text is not None and "built by the package's users" in text
    assert findings(case, "--no-cache") == []
    (case / "pyproject.toml").unlink()  # the same code as an application: half-free
    assert uses_of_sources(sources).half_free
    assert findings(case, "--no-cache") == []


def test_a_cast_of_what_a_tensor_helper_returns_is_no_half_path_of_a_model() -> None:
    """``sequence_mask(n, t).to(torch.float16)``: every return of the helper is a tensor (a
    comparison), and ``nn.Module`` has no arithmetic, comparison or indexing, so the cast
    reaches no model and the closed world holds; a helper returning a model picked by name
    (``build(name).half()``) keeps every class under the premise."""
    good = XFILE / "good_tensor_helper_cast"
    uses = uses_of_sources(_sources(good)).at("app.models")
    assert uses.float32_text("ModelB") == (
        "no half cast, load or wrapper of the project reaches `ModelB` "
        "(its half paths reach `ModelA`)"
    )
    bad = uses_of_sources(_sources(XFILE / "bad_model_helper_cast")).at("app.models")
    assert bad.float32_text("ModelB") is None
    (finding,) = findings(XFILE / "bad_model_helper_cast", "--no-cache")
    assert "latent: raises if `ModelB` runs in half" in finding["message"]


def test_a_cast_of_the_tensor_a_helper_is_handed_back_is_no_half_path_of_a_model() -> None:
    """``trunc_normal_(torch.empty(2, 8)).to(torch.float16)``: the helper returns the tensor
    it is handed, which it first uses as a tensor (``tensor.uniform_``), so the cast reaches
    no model and the closed world holds; a helper returning what it is handed, used as a
    tensor on one branch only, may hand back a model of any class: the premise stays."""
    good = XFILE / "good_param_tensor_helper_cast"
    uses = uses_of_sources(_sources(good)).at("app.models")
    assert uses.float32_text("ModelB") == (
        "no half cast, load or wrapper of the project reaches `ModelB` "
        "(its half paths reach `ModelA`)"
    )
    assert findings(good, "--no-cache") == []
    bad = XFILE / "bad_param_model_helper_cast"
    assert uses_of_sources(_sources(bad)).at("app.models").float32_text("ModelB") is None
    (finding,) = findings(bad, "--no-cache")
    assert "a model of unknown class is cast at app/run.py:16" in finding["message"]


def test_a_cast_of_unknown_class_in_a_function_nothing_calls_casts_nothing() -> None:
    """A loose cast names the top-level function holding it; a function nothing names never
    runs, so its cast is no half path (the function was named twice over before, and never
    found dead)."""
    models = (
        b"from torch import nn\n\nclass A(nn.Module):\n    pass\n\nclass B(nn.Module):\n    pass\n"
    )
    convert = b"def convert(name):\n    return getattr(models, name)(8).half()\n\n"
    sources = {
        "app/__init__.py": b"",
        "app/models.py": models,
        "run.py": b"from app import models\nfrom app.models import A\n\n"
        + convert
        + b"a = A().half()\nb = getattr(models, 'B')()\n",
    }
    assert uses_of_sources(sources).at("app.models").float32_text("B") is not None
    sources["run.py"] += b"c = convert('B')\n"
    assert uses_of_sources(sources).at("app.models").float32_text("B") is None


def _package_text(case: Path, side: tuple[Path, ...] = ()) -> str | None:
    from mpcheck.project.models import uses_of_records
    from mpcheck.project.records import record_of

    records = {p: record_of(d, p) for p, d in _sources(case).items()}
    uses = uses_of_records(records, installable=True, side=side)
    return uses.at("tinyapp.model").float32_text("Block")


def test_a_package_class_only_its_own_code_builds_runs_as_its_builds_say(
    tmp_path: Path,
) -> None:
    """An installable package's users run its classes as the package shows them run:
    ``Block``, built only inside ``Model``, which only the package's entry point builds (in
    float32), runs in float32 (issue 36); so does a class its documentation, its examples
    or nobody in the package builds, or one its factories hand to users, when no half path
    of the package reaches it. A cast in its example is a half path (the premise is gone,
    the cast is evidence)."""
    case = tmp_path / "case"
    shutil.copytree(XFILE / "good_package_app_builds_model", case)
    text = _package_text(case)
    assert text is not None and "`Block` is built only by the package's own code" in text
    assert "inside `Model`, built at tinyapp/app.py:12" in text
    assert findings(case, "--no-cache") == []
    readme = case / "README.md"
    readme.write_text("```python\nfrom tinyapp.model import Block\nblock = Block(64)\n```\n")
    text = _package_text(case, (readme,))  # (its documentation builds it: its users do)
    assert text is not None and text.startswith("`Block` is built by the package's users, ")
    assert "nothing of the package (its code, examples, tests or documentation)" in text
    # a factory of the package hands its model to users the project does not show
    app = case / "tinyapp" / "app.py"
    text = app.read_text()
    app.write_text(text + "\n\ndef load(dim):\n    model = Model(dim)\n    return model\n")
    assert _package_text(case) is not None
    app.write_text(text.replace("model = Model(8)", "model = make()"))
    assert _package_text(case) is not None  # (no build of ``Model`` left: its users build it)
    examples = case / "examples"
    examples.mkdir()
    (examples / "demo.py").write_text(
        "import torch\nfrom tinyapp.model import Block\nBlock(8).to(torch.float16)\n"
    )
    assert _package_text(case) is None  # (its example casts it: a half path)


def test_a_package_class_its_users_build_runs_as_the_package_shows() -> None:
    """Twin packages whose example builds ``Block``: in float32 its users run it so and the
    upcast before its ``Linear`` is right (silent); in bfloat16 the cast reaches it and the
    clash is an error resting on that cast."""
    good = XFILE / "good_package_users_build_block"
    text = _package_text(good)
    assert text is not None and text.startswith("`Block` is built by the package's users, ")
    assert findings(good, "--no-cache") == []
    (finding,) = findings(XFILE / "bad_package_example_casts_block", "--no-cache")
    assert finding["severity"] == "error" and finding["code"] == "MPC101"
    assert "`Block` is cast to half by `Block(8).to(torch.bfloat16)`" in finding["message"]


def test_a_package_class_its_configuration_names_is_built_by_its_own_loader(
    tmp_path: Path,
) -> None:
    """A class the package's configuration names by import path (``target:
    tinyapp.model.Model``) is built by its own config loader, not by its users only: with no
    half path reaching it, its parts run in float32. Unnamed and unbuilt, its users build it."""
    case = tmp_path / "case"
    shutil.copytree(XFILE / "good_package_app_builds_model", case)
    app = case / "tinyapp" / "app.py"
    loader = "from tinyapp.config import instantiate\n"
    app.write_text(loader + app.read_text().replace("Model(8)", "instantiate('model.yaml')"))
    (case / "tinyapp" / "config.py").write_text(
        "import importlib\n\ndef instantiate(path):\n"
        "    module, _, name = open(path).read().split()[1].rpartition('.')\n"
        "    return getattr(importlib.import_module(module), name)(8)\n"
    )
    assert _package_text(case) is not None  # (its users build ``Model``: as it shows)
    config = case / "model.yaml"
    config.write_text("target: tinyapp.model.Model\n")
    text = _package_text(case, (config,))
    assert text is not None and "(inside `Model`, named by its configuration)" in text


def test_a_configuration_loaders_cast_reaches_only_the_classes_configurations_name() -> None:
    """``instantiate_from_config(config[name]).half()`` builds a class a configuration names
    by import path: the project's configurations name ``ModelA`` only, so ``ModelB`` runs in
    float32; when they name ``ModelB`` too, the premise stays (issue 36)."""
    good = XFILE / "good_config_loader_targets"
    assert findings(good, "--no-cache") == []
    (finding,) = findings(XFILE / "bad_config_loader_targets", "--no-cache")
    assert finding["severity"] == "warning"
    assert "latent: raises if `ModelB` runs in half" in finding["message"]


def test_the_closed_world_narrows_a_loose_cast_only_to_what_configurations_name(
    tmp_path: Path,
) -> None:
    """A loose cast of a configuration loader's product reaches the project classes the
    configurations or strings name, one of a class name the imports do not pin reaches the
    project classes so named; a loose cast of anything else, or a loader whose
    configurations are not in the project, reaches every class (no closed world)."""
    from mpcheck.project.closed import Configured, LoosePath, closed_world
    from mpcheck.project.summary import Place

    config = tmp_path / "model.yaml"
    config.write_text("model:\n  target: app.models.A\n")
    classes = {"app.models.A": "app/models.py", "app.models.B": "app/models.py"}

    def closed(
        source: str,
        side: list[Path],
        strings: tuple[str, ...] = (),
        named: frozenset[str] | None = None,
    ) -> object:
        world, *_ = closed_world(
            application=True,
            package=False,
            defaults=False,
            deepspeed=False,
            wrappers={},
            takes={},
            loose=[LoosePath(Place("run.py", 3, 1, ""), source, named)],
            roots={},
            casts=(),
            reach=(),
            bodies={"app.models.A": {"app.models.Block"}},
            subclasses={},
            classes=classes,
            sites={},
            shown=(),
            side=side,
            configured=Configured(side, strings, classes),
            where=lambda path, line: f"{path}:{line}",
        )
        return world

    narrowed = frozenset({"app.models.A", "app.models.Block"})
    assert closed("app.util.instantiate_from_config", [config]) == (narrowed, ("A",))
    assert closed("hydra.utils.instantiate", [], ("app.models.A",)) == (narrowed, ("A",))
    assert closed("app.util.instantiate_from_config", []) is None  # (no configuration here)
    assert closed("app.util.build_model", [config]) is None  # (what it builds: unknown)
    assert closed("", [config]) is None  # (``getattr(m, name)(8).half()``)
    # ``nn.Linear(...).half()`` in a project with a ``Linear``: at most that class
    assert closed("", [], named=frozenset({"app.models.A"})) == (narrowed, ("A",))
    assert closed("triton.language.load", []) is None  # (a library's value: unknown)


def test_a_cast_of_torchs_class_sharing_a_project_class_name_reaches_no_project_class() -> None:
    """``nn.Linear(8, 8).half()`` in a project defining a ``Linear`` of its own: the imports
    pin the name to torch's class, so it stands for neither the project's ``Linear`` nor
    ``ModelB``, which both stay float32 (a star-imported ``Linear`` still may be the
    project's: ``test_library_layer_names``)."""
    models = (
        b"from torch import nn\n\nclass Linear(nn.Module):\n    pass\n\n"
        b"class ModelA(nn.Module):\n    pass\n\nclass ModelB(nn.Module):\n    pass\n"
    )
    script = (
        b"from torch import nn\nfrom app import models\nfrom app.models import ModelA\n\n"
        b"a = ModelA().half()\nhead = nn.Linear(8, 8).half()\nb = getattr(models, 'ModelB')()\n"
    )
    sources = {"app/__init__.py": b"", "app/models.py": models, "run.py": script}
    uses = uses_of_sources(sources).at("app.models")
    assert uses.float32_text("ModelB") is not None
    assert uses.float32_text("Linear") is not None


def test_a_cast_of_a_library_configuration_loaders_product_is_a_half_path() -> None:
    """``hydra.utils.instantiate(cfg.model).half()`` casts a class a configuration names: with
    no configuration in the project, any class may be it (the premise stays); a tensor the
    loaded model computes (``m(y).half()``) is no model cast."""
    models = (
        b"from torch import nn\n\nclass ModelA(nn.Module):\n    pass\n\n"
        b"class ModelB(nn.Module):\n    pass\n"
    )
    head = b"import hydra\nfrom app.models import ModelA\n\na = ModelA().half()\n"
    for tail, premise in (
        (b"m = hydra.utils.instantiate(cfg.model).half()\n", True),
        (b"m = hydra.utils.instantiate(cfg.model)\nm.half()\n", True),
        (b"m = hydra.utils.instantiate(cfg.model)\nx = m(y).half()\n", False),
    ):
        sources = {"app/__init__.py": b"", "app/models.py": models, "run.py": head + tail}
        uses = uses_of_sources(sources).at("app.models")
        assert (uses.float32_text("ModelB") is None) is premise, tail


def test_a_cast_of_self_reaches_its_class_and_the_classes_deriving_it() -> None:
    """``self.to(torch.float16)`` in a method of ``Encoder``: ``self`` is an ``Encoder`` or
    an instance of a class deriving it. ``Refiner(Encoder)`` runs in half (a premise that
    holds: the bad case raises); ``Head``, no ``Encoder``, runs in float32 (silent)."""
    (finding,) = findings(XFILE / "bad_self_cast_subclass", "--no-cache")
    assert finding["severity"] == "warning"
    assert "latent: raises if `Refiner` runs in half" in finding["message"]
    good = XFILE / "good_self_cast_other_class"
    assert findings(good, "--no-cache") == []
    uses = uses_of_sources(_sources(good)).at("app.models")
    assert uses.float32_text("Head") == (
        "no half cast, load or wrapper of the project reaches `Head` "
        "(its half paths reach `Encoder`)"
    )


def test_the_records_name_the_class_of_a_cast_of_self_and_drop_kernel_values() -> None:
    """A cast of ``self`` names the innermost class around it, unless that class defines a
    method of the cast's name (its own ``to`` runs); outside a class it stays loose. A value
    of a tensor-kernel library (``flash_attn``) is no model: its cast is no half path."""
    from mpcheck.project.records import record_of

    code = (
        b"import torch\nfrom torch import nn\n\n"
        b"class Outer(nn.Module):\n"
        b"    def __init__(self):\n        super().__init__()\n        self.eval()\n"
        b"        self.to(torch.float16)\n\n"
        b"    class Inner(nn.Module):\n        def setup(self):\n"
        b"            self.half()\n\n"
        b"class Batch(nn.Module):\n    def to(self, dtype):\n        return self\n\n"
        b"    def cast(self):\n        self.to(torch.float16)\n\n"
        b"def loose(self):\n    self.to(torch.float16)\n"
    )
    record = record_of(code, "app/models.py")
    assert [(c, s[0]) for c, s in record.owned] == [
        ("app.models.Outer", 8),
        ("app.models.Inner", 12),
    ]
    assert sorted(s[0] for s in record.loose) == [19, 22]
    kernel = (
        b"import torch\nfrom flash_attn import flash_attn_func\n\n"
        b"def attend(q, k, v):\n    out = flash_attn_func(q, k, v)\n"
        b"    return out.to(torch.float16)\n"
    )
    record = record_of(kernel, "app/attention.py")
    assert record.loose == () and record.casts == ()


def test_deepspeed_casting_the_prepared_vocoder_raises_at_its_source_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The premise of ``warn_deepspeed_prepares_handed_model``: accelerate under a DeepSpeed
    bf16 configuration hands the prepared model to DeepSpeed's engine, which casts its module
    to bfloat16 (``module.to(torch.bfloat16)``); the source block's float32 waves then meet
    bfloat16 weights."""
    torch = pytest.importorskip("torch")
    case = XFILE / "warn_deepspeed_prepares_handed_model"
    monkeypatch.syspath_prepend(str(case))
    for name in [m for m in sys.modules if m == "tts" or m.startswith("tts.")]:
        monkeypatch.delitem(sys.modules, name)  # (another case's ``tts``; restored after)
    try:
        from tts.model import Vocoder  # type: ignore[import-not-found]

        vocoder = Vocoder(8).to(torch.bfloat16)  # (what DeepSpeed's engine does to the module)
        with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype"):
            vocoder(torch.rand(2, 8))
    finally:
        for name in [m for m in sys.modules if m == "tts" or m.startswith("tts.")]:
            del sys.modules[name]


_PARTS = (
    b"import torch\nfrom torch import nn\n\nclass Rotary(nn.Module):\n    pass\n\n"
    b"class Encoder(nn.Module):\n    pass\n\nclass GPT(nn.Module):\n"
    b"    def __init__(self, given):\n        super().__init__()\n"
    b"        self.embed = nn.Embedding(10, 8)\n        self.encoder = Encoder()\n"
    b"        self.rotary = Rotary()\n        self.given = given\n"
)


@pytest.mark.parametrize(
    ("cast", "half"),
    [
        ("model.encoder.half()", {"Encoder"}),
        ("model.encoder.to(torch.float16)", {"Encoder"}),
        ("model.embed.bfloat16()", set()),  # a torch layer: no class of the project
        ("model.half()", {"GPT", "Encoder", "Rotary"}),
    ],
)
def test_a_cast_of_one_part_casts_the_class_held_there_not_the_model(
    cast: str, half: set[str]
) -> None:
    """``nn.Module.half()`` and ``.to(dtype)`` walk their receiver and its submodules only:
    ``model.encoder.half()`` casts what ``GPT``'s body binds at ``self.encoder``; the model,
    its rotary module and its other parts stay as built (float32 here)."""
    script = "import torch\nfrom app.model import GPT\n\ndef main(x):\n    model = GPT(None)\n"
    script += f"    {cast}\n    model.eval()\n    return model(x)\n"
    sources = {"app/__init__.py": b"", "app/model.py": _PARTS, "run.py": script.encode()}
    uses = uses_of_sources(sources).at("app.model")
    for name in ("GPT", "Encoder", "Rotary"):
        found = uses.of(name)
        assert (found is not None and found.kind == "cast") == (name in half), (cast, name)
        assert (uses.float32_text(name) is None) == (name in half), (cast, name)
    if cast.startswith("model.encoder"):
        found = uses.of("Encoder")
        assert found is not None and "(held at `GPT.encoder`)" in found.place.text


@pytest.mark.parametrize(
    "cast", ["model.given.half()", "model.encoder.layers.half()", "model.blocks[0].half()"]
)
def test_a_cast_of_a_part_no_record_names_may_cast_the_whole_model(cast: str) -> None:
    """A part bound to a parameter, one its holder's class does not bind (``Encoder`` binds
    no ``layers``) or an item may hold anything: the model and what it builds may be half
    (the premise), none of them is only float32."""
    script = "import torch\nfrom app.model import GPT\n\ndef main(x):\n    model = GPT(None)\n"
    script += f"    {cast}\n    return model(x)\n"
    sources = {"app/__init__.py": b"", "app/model.py": _PARTS, "run.py": script.encode()}
    uses = uses_of_sources(sources).at("app.model")
    for name in ("GPT", "Encoder", "Rotary"):
        assert uses.float32_text(name) is None, (cast, name)
        found = uses.of(name)
        assert found is None or found.kind != "float32", (cast, name)


def test_a_part_a_base_class_binds_is_held_by_its_subclass() -> None:
    """``class Big(Base)`` whose base binds ``self.encoder = Encoder()``: a ``Big``'s
    ``encoder`` is that ``Encoder``."""
    model = _PARTS + b"\nclass Base(nn.Module):\n    def __init__(self):\n"
    model += b"        self.encoder = Encoder()\n\nclass Big(Base):\n    pass\n"
    script = b"from app.model import Big\nmodel = Big()\nmodel.encoder.half()\nmodel(x)\n"
    sources = {"app/__init__.py": b"", "app/model.py": model, "run.py": script}
    uses = uses_of_sources(sources).at("app.model")
    found = uses.of("Encoder")
    assert found is not None and found.kind == "cast"
    assert uses.float32_text("Big") is not None


def test_a_cast_of_a_part_of_a_factorys_model_names_the_class_holding_it() -> None:
    """``model = load()`` returning a ``GPT``: ``model.encoder.half()`` casts the ``Encoder``
    a ``GPT`` holds, and its text names both classes."""
    model = _PARTS + b"\ndef load():\n    model = GPT(None)\n    return model\n"
    script = b"from app.model import load\n\ndef main(x):\n    model = load()\n"
    script += b"    model.encoder.half()\n    return model(x)\n"
    sources = {"app/__init__.py": b"", "app/model.py": model, "run.py": script}
    uses = uses_of_sources(sources).at("app.model")
    found = uses.of("Encoder")
    assert found is not None and found.kind == "cast"
    assert "`Encoder` (held at `GPT.encoder`) is cast to half by" in found.place.text
    assert uses.float32_text("GPT") is not None


def test_a_part_cast_is_an_error_at_its_block_and_a_torch_layers_is_silent() -> None:
    """``model.block.half()`` in a script makes the block's float32 upcast meet its half
    Linear (an error naming the part); ``model.embed.bfloat16()`` of an ``nn.Embedding``
    casts no class of the project, and the rest of the model runs in float32 (silent)."""
    (finding,) = findings(XFILE / "bad_part_cast_reaches_its_block", "--no-cache")
    assert finding["severity"] == "error"
    assert (
        "`Block` (held at `Net.block`) is cast to half by `model.block.half()`"
        in (finding["message"])
    )
    assert findings(XFILE / "good_part_cast_of_a_torch_layer", "--no-cache") == []


def test_a_cast_of_a_part_of_a_part_casts_the_class_held_at_the_end_of_the_chain() -> None:
    """``model.encoder.layers.half()``: ``GPT`` binds ``self.encoder = Encoder()``, which
    binds ``self.layers = nn.ModuleList([Layer() ...])``: the ``Layer`` only is cast."""
    model = b"import torch\nfrom torch import nn\n\nclass Layer(nn.Module):\n    pass\n\n"
    model += b"class Encoder(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    model += b"        self.layers = nn.ModuleList([Layer() for _ in range(2)])\n\n"
    model += b"class GPT(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    model += b"        self.encoder = Encoder()\n        self.head = nn.Linear(8, 8)\n"
    script = b"from app.model import GPT\n\ndef main(x):\n    model = GPT()\n"
    script += b"    model.encoder.layers.half()\n    return model(x)\n"
    sources = {"app/__init__.py": b"", "app/model.py": model, "run.py": script}
    uses = uses_of_sources(sources).at("app.model")
    found = uses.of("Layer")
    assert found is not None and found.kind == "cast"
    assert "`Layer` (held at `GPT.encoder.layers`) is cast to half by" in found.place.text
    assert uses.float32_text("GPT") is not None and uses.float32_text("Encoder") is not None
