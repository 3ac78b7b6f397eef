"""Which functions outside a class run as a module's code, decided from the project's call
sites (:mod:`mpcheck.project.callers`): the working-dtype belief (a cast to a dtype the code
does not spell is the run's working dtype) holds in scripts, trainers and samplers and in the
functions only they call, not in a function a module's method calls."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mpcheck import cli
from mpcheck.project.callers import callers_of
from mpcheck.project.models import uses_of_sources
from mpcheck.project.records import ModelRecord, blank, record_of


def dedent(text: str) -> bytes:
    return textwrap.dedent(text).encode()


def test_a_files_pass_names_each_callee_by_its_qualified_name() -> None:
    code = blank(
        dedent(
            """\
            import numpy as np
            import torch
            from torch import nn
            from . import ops
            from .ops import rms_norm

            def helper(x):
                return ops.scale(np.mean(torch.mean(x)))

            class Block(nn.Module):
                def forward(self, x):
                    def inner(y):
                        return rms_norm(y)
                    return inner(helper(x)) + self.proj(x)
            """
        )
    )
    imports = {"np": "numpy", "torch": "torch", "nn": "torch.nn", "ops": "pkg.ops"}
    imports["rms_norm"] = "pkg.ops.rms_norm"
    defined, methods, functions, _ = callers_of(code, "pkg.model", imports, stars=False)
    assert defined == ("pkg.model.helper",)
    # (a nested helper's calls are its method's; ``self.proj`` and torch's are no helpers)
    assert methods == (
        ("pkg.model.helper", "pkg.model.Block"),
        ("pkg.ops.rms_norm", "pkg.model.Block"),
    )
    assert functions == (("pkg.ops.scale", "pkg.model.helper"),)


SOURCES = {
    "pkg/__init__.py": "from .ops import rms_norm\n",
    "pkg/ops.py": """\
        def rms_norm(x):
            return x

        def outer(x):
            return rms_norm(x)

        def prepare(mask):
            return mask

        def unused(x):
            return x
        """,
    "pkg/base.py": """\
        from torch import nn

        class Base(nn.Module):
            pass
        """,
    "pkg/model.py": """\
        import pkg
        from .base import Base
        from . import ops

        class Net(Base):
            def forward(self, x):
                return ops.outer(x)

        class Other(Base):
            def forward(self, x):
                return pkg.rms_norm(x)
        """,
    "pkg/sampler.py": """\
        from .ops import prepare

        class Sampler:
            def sample(self, mask):
                return prepare(mask)
        """,
}


def uses(sources: dict[str, str]) -> dict[str, bool]:
    data = {path: dedent(text) for path, text in sources.items()}
    found = uses_of_sources(data).at("pkg.ops")
    return {
        name: found.runs_in_modules(name) for name in ("rms_norm", "outer", "prepare", "unused")
    }


def test_a_function_a_modules_method_calls_is_module_code_directly_or_through_another() -> None:
    """``Net`` is a module through its project base; ``outer`` is called from its forward and
    calls ``rms_norm``; the sampler's ``prepare`` and the uncalled ``unused`` are no module's."""
    assert uses(SOURCES) == {"rms_norm": True, "outer": True, "prepare": False, "unused": False}


def test_a_reexported_function_is_found_through_the_package() -> None:
    only = {**SOURCES, "pkg/model.py": SOURCES["pkg/model.py"].replace("ops.outer(x)", "x")}
    assert uses(only)["rms_norm"] is True  # (``pkg.rms_norm`` in ``Other.forward``)
    gone = {**only, "pkg/model.py": only["pkg/model.py"].replace("pkg.rms_norm(x)", "x")}
    assert uses(gone)["rms_norm"] is False


def test_the_pass_survives_the_records_cache() -> None:
    record = record_of(dedent(SOURCES["pkg/model.py"]), "pkg/model.py")
    assert record.callers[1]  # (the module's calls were recorded)
    assert ModelRecord.from_plain(json.loads(json.dumps(record.to_plain()))) == record


KERNELS = """\
    from dataclasses import dataclass

    import torch
    from torch import nn


    @dataclass
    class Config:
        train_dtype: torch.dtype


    def erode(mask, config):
        mask = mask.to(dtype=config.train_dtype)
        kernel = nn.Conv2d(1, 1, 5, bias=False, padding=2)
        return kernel(mask)
    """

SCRIPT_CALLER = """\
    import torch

    from .kernels import Config, erode


    def sample(mask):
        return erode(mask, Config(torch.float16))


    if __name__ == "__main__":
        sample(torch.rand(1, 1, 8, 8))
    """

MODULE_CALLER = """\
    import torch
    from torch import nn

    from .kernels import Config, erode


    class Inpaint(nn.Module):
        def forward(self, mask):
            return erode(mask, Config(torch.float32))
    """


def check(tmp_path: Path, capsys: pytest.CaptureFixture[str], caller: str) -> list[str]:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "kernels.py").write_text(textwrap.dedent(KERNELS))
    (pkg / "caller.py").write_text(textwrap.dedent(caller))
    rc = cli.main(["check", "--no-cache", "--output-format", "json", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc in (0, 1), err
    return [
        f"{d['code']}:{Path(d['filename']).name}:{d['location']['row']}" for d in json.loads(out)
    ]


def test_a_helper_only_a_script_calls_casts_to_the_working_dtype(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check(tmp_path, capsys, SCRIPT_CALLER) == ["MPC102:kernels.py:14"]


def test_the_same_helper_called_from_a_modules_forward_casts_to_its_own_dtype(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check(tmp_path, capsys, MODULE_CALLER) == []


def outside(sources: dict[str, str], module: str, names: tuple[str, ...]) -> dict[str, bool]:
    data = {path: dedent(text) for path, text in sources.items()}
    found = uses_of_sources(data).at(module)
    return {name: found.runs_outside_modules(name) for name in names}


def test_a_function_only_scripts_and_plain_classes_call_runs_outside_modules() -> None:
    """``prepare`` is called by a plain class only: what it is handed is no activation (a
    sampler's call would hand it a model's outputs); ``rms_norm`` and ``outer`` are module
    code, ``unused`` is called by nothing."""
    plain = {**SOURCES, "pkg/sampler.py": SOURCES["pkg/sampler.py"].replace("Sampler", "Prompts")}
    found = outside(plain, "pkg.ops", ("rms_norm", "outer", "prepare", "unused"))
    assert found == {"rms_norm": False, "outer": False, "prepare": True, "unused": False}
    assert outside(SOURCES, "pkg.ops", ("prepare",)) == {"prepare": False}


AUDIO = {
    "app/module/__init__.py": "",
    "app/module/mel.py": """\
        def spectrogram(y):
            return y
        """,
    "app/module/data.py": """\
        from module.mel import spectrogram

        class Clips:
            def __getitem__(self, index):
                return spectrogram(self.load(index))
        """,
}


def test_an_import_from_the_scripts_directory_names_the_projects_function() -> None:
    """``from module.mel import spectrogram`` in a project run from ``app/``: the callee is
    ``app.module.mel.spectrogram``, the one project function of that dotted tail."""
    assert outside(AUDIO, "app.module.mel", ("spectrogram",)) == {"spectrogram": True}
    model = """\
        from torch import nn
        from module.mel import spectrogram

        class Net(nn.Module):
            def forward(self, y):
                return spectrogram(y)
        """
    both = {**AUDIO, "app/module/net.py": model}
    assert outside(both, "app.module.mel", ("spectrogram",)) == {"spectrogram": False}


def test_a_function_a_pipeline_calls_is_handed_a_models_outputs() -> None:
    """A pipeline's CFG helper gets the transformer's noise predictions (half when the model
    is), through another function too: no data; the dataset's helper is."""
    sources = {
        "pkg/__init__.py": "",
        "pkg/guidance.py": """\
            def optimized_scale(pos, neg):
                return (pos * neg).sum() / (neg**2).sum()

            def cfg_zero_star(pos, neg):
                return optimized_scale(pos, neg) * neg

            def normalize(wav):
                return wav
            """,
        "pkg/pipeline.py": """\
            from diffusers import DiffusionPipeline
            from .guidance import cfg_zero_star, normalize

            class VideoPipeline(DiffusionPipeline):
                def __call__(self, latents):
                    return cfg_zero_star(self.transformer(latents), latents)

            class Clips:
                def __getitem__(self, index):
                    return normalize(self.load(index))
            """,
    }
    names = ("optimized_scale", "cfg_zero_star", "normalize")
    found = outside(sources, "pkg.guidance", names)
    assert found == {"optimized_scale": False, "cfg_zero_star": False, "normalize": True}


def test_autograd_functions_and_attention_processors_hand_activations() -> None:
    """``torch.autograd.Function.forward`` runs inside a model's forward and an attention
    processor gets the attention's hidden states: what they hand a helper is no data."""
    sources = {
        "pkg/__init__.py": "",
        "pkg/ops.py": """\
            import torch

            def hashing(query, key):
                return torch.randn(query.size(0), 4) @ key

            def calc_mean_std(feat):
                return feat.mean(-2), (feat.var(dim=-2) + 1e-5).sqrt()

            def normalize(wav):
                return wav

            class Cumulation(torch.autograd.Function):
                @staticmethod
                def forward(ctx, query, key):
                    return hashing(query, key)

            class SharedAttnProcessor:
                def __call__(self, attn, hidden_states):
                    return calc_mean_std(hidden_states)

            class Clips:
                def __getitem__(self, index):
                    return normalize(self.load(index))
            """,
    }
    names = ("hashing", "calc_mean_std", "normalize")
    found = outside(sources, "pkg.ops", names)
    assert found == {"hashing": False, "calc_mean_std": False, "normalize": True}


def _handed(source: str, imports: dict[str, str]) -> dict[str, set[tuple[str, ...]]]:
    raw = dedent(source)
    *_, handed = callers_of(blank(raw), "pkg.run", imports, stars=False, raw=raw)
    found: dict[str, set[tuple[str, ...]]] = {}
    for callee, args, _ in handed:
        found.setdefault(callee, set()).add(args)
    return found


def test_what_each_call_hands_is_read_off_its_text_and_its_names_assignments() -> None:
    imports = {"torch": "torch", "torchaudio": "torchaudio", "np": "numpy"}
    imports |= {"spec": "pkg.mel.spec", "mel": "pkg.mel"}
    found = _handed(
        """\
        def load(path, model):
            wav, sr = torchaudio.load(path)
            wav = wav.unsqueeze(0).to(model.device)
            a = spec(wav, 1024)
            b = mel.spec(torch.from_numpy(np.zeros(3)), n_fft=512)
            c = spec(model(wav).half(), 1024)
            d = spec(model(wav), hop=model.hop)
            e = spec(torch.randn(3, dtype=torch.bfloat16), *sizes)
            return spec
        """,
        imports,
    )
    assert found["pkg.mel.spec"] == {
        ("f", "n"),
        ("f", "n_fft=n"),
        ("h", "n"),
        ("?", "hop=?"),
        ("h", "*"),
        ("!",),  # (``return spec``: handed on, so anything may call it)
    }


def test_a_parameter_every_call_hands_full_precision_is_no_activation(tmp_path: Path) -> None:
    from mpcheck.project.callers import ModuleCode

    passes = {
        "pkg.mel": (("pkg.mel.spec",), (), (), ()),
        "pkg.run": (
            (),
            (),
            (),
            (
                ("pkg.mel.spec", ("f", "n"), (3, 5)),
                ("pkg.mel.spec", ("f", "n_fft=n", "x=?"), (4, 5)),
            ),
        ),
    }
    code = ModuleCode(passes, {}, lambda _: None, lambda _: None)
    assert code.full_inputs("pkg.mel.spec", ("y", "n_fft", "x")) == {"y": "f", "n_fft": "n"}
    passes["pkg.run"] = (
        (),
        (),
        (),
        (("pkg.mel.spec", ("f", "n"), (3, 5)), ("pkg.mel.spec", ("!",), (9, 12))),
    )
    code = ModuleCode(passes, {}, lambda _: None, lambda _: None)
    assert code.full_inputs("pkg.mel.spec", ("y", "n_fft", "x")) == {}


def test_integer_and_bool_tensors_a_call_hands_are_read_off_its_text() -> None:
    """Indices, integer casts, comparisons, int64 factories and token ids carry no floating
    dtype; a concatenation of upcasts is full precision."""
    imports = {"torch": "torch", "spec": "pkg.mel.spec"}
    found = _handed(
        """\
        def run(model, x, tok, outs, n):
            enc = tok(["a"], return_tensors="pt")
            a = spec(x.argmax(-1), x.topk(3).indices, x.topk(3)[1], torch.max(x, -1)[1])
            b = spec(x.long(), x.to(torch.bool), x > 0, torch.nonzero(x), torch.multinomial(x, 1))
            c = spec(torch.arange(n), torch.randint(0, 9, (2,)), torch.tensor([len(outs)]))
            d = spec(enc["input_ids"], enc.input_ids, enc["attention_mask"], enc.attention_mask)
            e = spec(torch.stack([o.float() for o in outs]), torch.cat([x.float(), x.double()]))
            f = spec(torch.arange(0, n, 2).float(), torch.arange(n * 0.5), x.topk(3)[0], x)
            g = spec(model.out["attention_mask"], x if n > 0 else outs, torch.cat([x.float(), x]))
        """,
        imports,
    )
    assert found["pkg.mel.spec"] == {
        ("i", "i", "i", "i"),
        ("i", "i", "i", "i", "i"),
        ("i", "i", "i"),
        ("i", "i", "i", "i"),
        ("f", "f"),
        ("f", "?", "?", "?"),
        ("?", "?", "?"),
    }


def test_a_parameter_every_call_hands_integers_is_an_integer_tensor() -> None:
    from mpcheck.project.callers import ModuleCode

    passes = {
        "pkg.mel": (("pkg.mel.spec",), (), (), ()),
        "pkg.run": (
            (),
            (),
            (),
            (
                ("pkg.mel.spec", ("i", "i", "i"), (3, 5)),
                ("pkg.mel.spec", ("i", "f", "h"), (7, 9)),
                ("pkg.mel.spec", ("i", "f", "?"), (5, 9)),
            ),
        ),
    }
    code = ModuleCode(passes, {}, lambda _: None, lambda _: None, {"pkg.run": "pkg/run.py"})
    params = ("ids", "x", "y")
    assert code.full_inputs("pkg.mel.spec", params) == {"ids": "i", "x": "f"}
    # (``y``: one call hands it integers, two others may hand it half: the half cast is named)
    assert code.half_call("pkg.mel.spec", params, "y") == ("pkg/run.py", 7, 9, True)
    assert code.half_call("pkg.mel.spec", params, "x") is None


def test_a_function_runs_with_the_module_classes_whose_code_calls_it() -> None:
    """``norm`` runs in ``Block`` (through ``helper``); a half value handed to it, a name
    handed on without a call or a pipeline's call leaves its values unknown (None)."""
    from mpcheck.project.callers import ModuleCode

    classes = {"pkg.nets.Block": ("torch.nn.Module",), "pkg.data.Clips": ()}
    passes = {
        "pkg.ops": (
            ("pkg.ops.helper", "pkg.ops.norm"),
            (),
            (("pkg.ops.norm", "pkg.ops.helper"),),
            (),
        ),
        "pkg.nets": ((), (("pkg.ops.helper", "pkg.nets.Block"),), (), ()),
        "pkg.data": ((), (("pkg.ops.norm", "pkg.data.Clips"),), (), ()),
    }
    code = ModuleCode(passes, classes, lambda n: n if n in classes else None, lambda _: None)
    assert code.runs_with("pkg.ops.norm") == {"pkg.nets.Block"}
    assert code.runs_with("pkg.ops.helper") == {"pkg.nets.Block"}
    assert code.runs_with("pkg.nets.other") is None  # (no project function)
    halved = {**passes, "pkg.run": ((), (), (), (("pkg.ops.norm", ("h",), (1, 1)),))}
    assert (
        ModuleCode(halved, classes, lambda _: None, lambda _: None).runs_with("pkg.ops.norm")
        is None
    )
    escaped = {**passes, "pkg.run": ((), (), (), (("pkg.ops.norm", ("!",), (1, 1)),))}
    assert (
        ModuleCode(escaped, classes, lambda _: None, lambda _: None).runs_with("pkg.ops.norm")
        is None
    )
    piped = {**passes, "pkg.pipe": ((), (("pkg.ops.helper", "pkg.pipe.SpeechPipeline"),), (), ())}
    assert (
        ModuleCode(piped, classes, lambda _: None, lambda _: None).runs_with("pkg.ops.norm") is None
    )


def test_a_helper_only_float32_modules_run_is_float32_in_a_closed_world(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same helper, called by a module the script never casts and by one it casts to
    half: only the second gives the premise, and it names the cast that supports it."""
    (tmp_path / "spec.py").write_text(
        "import torch\n\n\ndef rms(frames):\n    return torch.sqrt(frames.pow(2).sum(-1) + 1e-6)\n"
    )
    run = (
        "import torch\nfrom torch import nn\n\nfrom spec import rms\n\n\n"
        "class Scorer(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.proj = nn.Linear(8, 8)\n\n    def forward(self, x):\n"
        "        return rms(self.proj(x))\n\n\n"
        "class Decoder(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.proj = nn.Linear(8, 8)\n\n    def forward(self, x):\n"
        "        return self.proj(x)\n\n\n"
        "if __name__ == '__main__':\n    Scorer()(torch.randn(2, 8))\n"
        "    {model}(torch.randn(2, 8).half())\n"
    )
    (tmp_path / "run.py").write_text(run.format(model="Decoder().half()"))
    assert cli.main(["check", "--no-cache", "--output-format", "concise", str(tmp_path)]) == 0
    capsys.readouterr()
    (tmp_path / "run.py").write_text(run.format(model="Scorer().half()"))
    assert cli.main(["check", "--no-cache", "--output-format", "concise", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "MPC302" in out and "it runs in `Scorer`; `Scorer` is cast to half" in out
