"""MPC201 scaler-fp16-params: exact positions, messages, related locations and silences."""

from __future__ import annotations

import textwrap

import pytest

from mpcheck.diagnostics import Diagnostic, Severity
from tests.support import check, span

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3


def findings(body: str, code: str = "MPC201") -> list[Diagnostic]:
    return [d for d in check(HEADER + textwrap.dedent(body)) if d.code == code]


def related(d: Diagnostic) -> list[tuple[int, int, str]]:
    return [(r.start.row, r.start.column, r.message) for r in d.related]


def test_half_model_stepped_by_a_grad_scaler() -> None:
    (d,) = findings(
        """
        def train(loader):
            model = nn.Linear(8, 1).half()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("cuda")
            for x, y in loader:
                loss = F.mse_loss(model(x).float(), y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
        """
    )
    assert span(d) == (12, 9, 12, 31)
    assert d.message == (
        '`scaler.step(optimizer)` unscales float16 gradients and raises "Attempting to unscale '
        'FP16 gradients.": the optimizer built at line 7 trains parameters that are float16 '
        "(cast to float16 by `.half()` at line 6) and were not upcast to float32"
    )
    assert related(d) == [
        (6, 13, "the trainable parameters are cast to float16 by `.half()`"),
        (7, 17, "the optimizer `torch.optim.SGD(model.parameters(), lr=0.1)` is built here"),
        (8, 14, 'the GradScaler `torch.amp.GradScaler("cuda")` is made here'),
    ]


def test_reported_once_at_unscale_before_clip_and_step() -> None:
    (d,) = findings(
        """
        def train(x, y):
            model = nn.Linear(8, 1)
            model.to(dtype=torch.float16)
            optimizer = torch.optim.AdamW(model.parameters())
            scaler = torch.cuda.amp.GradScaler()
            scaler.scale(F.mse_loss(model(x).float(), y)).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
        """
    )
    assert span(d) == (11, 5, 11, 31)
    assert "parameters that are float16 (cast by `.to(dtype=torch.float16)`" not in d.message
    assert "float16 (cast by `.to(torch.float16)` at line 7)" in d.message
    assert [r.start.row for r in d.related] == [7, 8, 9]


LORA_SCRIPT = """
from accelerate import Accelerator
from diffusers import UNet2DConditionModel
from peft import LoraConfig

def main(args, loader):
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    unet = UNet2DConditionModel.from_pretrained(args.model, subfolder="unet")
    weight_dtype = torch.float32
    if accelerator.mixed_precision == "fp16":
        weight_dtype = torch.float16
    elif accelerator.mixed_precision == "bf16":
        weight_dtype = torch.bfloat16
    unet.requires_grad_(False)
    unet.to(accelerator.device, dtype=weight_dtype)
    unet.add_adapter(LoraConfig(r=4))
    {upcast}
    params = [p for p in unet.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    unet, optimizer, loader = accelerator.prepare(unet, optimizer, loader)
    for batch in loader:
        loss = F.mse_loss(unet(batch).float(), batch.float())
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad()
"""  # lines 4-29


def test_a_round_that_skips_the_step_after_its_clip_still_raises_in_the_first_round() -> None:
    """``if not isfinite(grad_norm): continue`` brings the next round to the unscale with the
    gradients unscaled; the first round does not, and raises there (reported once)."""
    (d,) = findings(
        """
        def train(loader):
            model = nn.Linear(8, 1).half()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("cuda")
            for x, y in loader:
                scaler.scale(F.mse_loss(model(x).float(), y)).backward()
                scaler.unscale_(optimizer)
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if not torch.isfinite(norm):
                    optimizer.zero_grad()
                    continue
                scaler.step(optimizer)
                scaler.update()
        """
    )
    assert span(d)[:2] == (11, 9)


def test_lora_adapters_added_after_casting_to_weight_dtype() -> None:
    (d,) = findings(LORA_SCRIPT.format(upcast="pass"))
    assert span(d) == (27, 9, 27, 49)
    assert d.message == (
        "`accelerator.clip_grad_norm_(params, 1.0)` unscales float16 gradients and raises "
        '"Attempting to unscale FP16 gradients.": the optimizer built at line 22 trains '
        "parameters that are float16 on some paths (cast by `.to(weight_dtype)` at line 18; "
        "`weight_dtype` is `torch.float16` at line 14) and were not upcast to float32"
    )
    assert related(d) == [
        (18, 5, "the trainable parameters are cast by `.to(weight_dtype)`"),
        (14, 24, "`weight_dtype` is `torch.float16` here"),
        (22, 17, "the optimizer `torch.optim.AdamW(params, lr=1e-4)` is built here"),
        (
            10,
            19,
            "`Accelerator(mixed_precision=args.mixed_precision)` runs a GradScaler when "
            "mixed_precision is fp16",
        ),
    ]


def test_prepared_optimizer_step_without_a_clip() -> None:
    body = LORA_SCRIPT.format(upcast="pass").replace(
        "        accelerator.clip_grad_norm_(params, 1.0)\n", ""
    )
    (d,) = findings(body)
    assert span(d) == (27, 9, 27, 25)
    assert d.message.startswith("`optimizer.step()` unscales float16 gradients")


@pytest.mark.parametrize(
    "upcast",
    [
        # diffusers' helper, imported, or a copy of it under the same name
        "from diffusers.training_utils import cast_training_params; "
        "cast_training_params(unet, dtype=torch.float32)",
        "from train_utils import cast_training_params; cast_training_params([unet])",
        # by hand
        "for p in unet.parameters(): p.data = p.data.float()",
        "for p in unet.parameters(): p.data = p.data.to(torch.float32)",
        # the whole model back to float32
        "unet.float()",
    ],
)
def test_silent_when_trainable_params_are_upcast(upcast: str) -> None:
    lines = upcast.split("; ")
    text = LORA_SCRIPT.format(upcast=lines[-1])
    if len(lines) == 2:
        text = lines[0] + "\n" + text
    assert findings(text) == []


def test_silent_with_a_local_copy_of_cast_training_params() -> None:
    helper = """
    def cast_training_params(model, dtype=torch.float32):
        if not isinstance(model, list):
            model = [model]
        for m in model:
            for param in m.parameters():
                if param.requires_grad:
                    param.data = param.to(dtype)
    """
    text = textwrap.dedent(helper) + LORA_SCRIPT.format(upcast="cast_training_params(unet)")
    assert findings(text) == []


@pytest.mark.parametrize(
    "setup",
    [
        "model = nn.Linear(8, 8).to(torch.bfloat16)",  # GradScaler accepts bfloat16
        "model = nn.Linear(8, 8)",  # float32 master weights
        "model = nn.Linear(8, 8).half(); model.float()",
        "model = get_peft_model(nn.Linear(8, 8).half(), config)",  # adapters kept float32
    ],
)
def test_silent_for_non_fp16_params(setup: str) -> None:
    body = "from peft import get_peft_model\n\ndef train(x, config):\n"
    body += "".join(f"    {s}\n" for s in setup.split("; "))
    body += textwrap.indent(
        textwrap.dedent(
            """
            optimizer = torch.optim.AdamW(model.parameters())
            scaler = torch.amp.GradScaler()
            scaler.scale(model(x).float().sum()).backward()
            scaler.step(optimizer)
            """
        ),
        "    ",
    )
    assert findings(body) == []


def test_silent_when_the_scaler_is_off() -> None:
    body = """
        from accelerate import Accelerator

        def train(x):
            model = nn.Linear(8, 8).half()
            optimizer = torch.optim.AdamW(model.parameters())
            scaler = torch.amp.GradScaler(enabled=False)
            scaler.scale(model(x).float().sum()).backward()
            scaler.step(optimizer)
            accelerator = Accelerator(mixed_precision="bf16")
            model, optimizer = accelerator.prepare(model, optimizer)
            accelerator.backward(model(x).float().sum())
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        """
    assert findings(body) == []


PIPELINE_LOOP = """
class ValPipeline:
    @classmethod
    def from_pretrained(cls, name, unet=None, torch_dtype=None):
        return cls()

def validate(pipeline, dtype):
    pipeline = pipeline.to("cuda", dtype=dtype)

def train(model, loader, steps):
    optimizer = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(steps):
        for x in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(x).float().mean()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        {validation}
"""


def test_validation_pipeline_recast_in_the_loop_is_reported_at_the_cast() -> None:
    body = PIPELINE_LOOP.replace(
        "{validation}",
        'validate(ValPipeline.from_pretrained("m", unet=model), torch.float16)',
    )
    found = [d for d in check(HEADER + body) if d.code == "MPC201"]
    (d,) = found
    assert span(d) == (11, 16, 11, 48)
    assert "the next `scaler.step(optimizer)` (line 21)" in d.message


def test_recast_after_training_or_without_a_shared_model_is_quiet() -> None:
    after = PIPELINE_LOOP.replace("{validation}", "pass") + (
        '    validate(ValPipeline.from_pretrained("m", unet=model), torch.float16)\n'
    )
    loaded = PIPELINE_LOOP.replace(
        "{validation}",
        'validate(ValPipeline.from_pretrained("m", torch_dtype=torch.float16), torch.float16)',
    )
    moved = PIPELINE_LOOP.replace(
        "{validation}",
        'ValPipeline.from_pretrained("m", unet=model, torch_dtype=torch.float16).to("cuda")',
    )
    for body in (after, loaded, moved):
        assert not [d for d in check(HEADER + body) if d.code == "MPC201"], body


def test_pipeline_returned_by_a_helper_still_shares_the_model() -> None:
    body = PIPELINE_LOOP.replace("{validation}", "validate(build(model), torch.float16)") + (
        "\ndef build(model):\n"
        '    return ValPipeline.from_pretrained("m", unet=model, torch_dtype=torch.float16)\n'
    )
    (d,) = [d for d in check(HEADER + body) if d.code == "MPC201"]
    assert span(d) == (11, 16, 11, 48)


CORRELATED = """
def train(args, loader):
    model = nn.Linear(8, 1)
    text_encoder = nn.Linear(8, 8)
    groups = [{{"params": model.parameters()}}]
    if {taken}:
        groups.append({{"params": text_encoder.parameters()}})
    optimizer = torch.optim.SGD(groups, lr=0.1)
    if {cast}:
        text_encoder.to(dtype=torch.float16)
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        loss = F.mse_loss(model(text_encoder(x)).float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
"""


@pytest.mark.parametrize(
    ("taken", "cast"),
    [
        ("args.train_text_encoder", "not args.train_text_encoder"),
        ("not args.freeze", "args.freeze"),
        ("train_te", "not train_te"),
    ],
)
def test_params_taken_under_a_flag_the_cast_is_not_under_are_quiet(taken: str, cast: str) -> None:
    # diffusers' amused script: the text encoder trains only under the flag and is cast to
    # the working dtype only without it, so no float16 parameter ever reaches the optimizer
    assert findings(CORRELATED.format(taken=taken, cast=cast)) == []


@pytest.mark.parametrize(
    ("taken", "cast", "half"),
    [
        # the same paths: wherever the text encoder is trained, it was cast
        ("args.train_text_encoder", "args.train_text_encoder", "float16 (cast"),
        ("True", "not args.train_text_encoder", "float16 on some paths"),  # always trained
        ("args.train_text_encoder", "not args.other", "float16 on some paths"),  # unrelated flags
    ],
)
def test_params_taken_where_the_cast_may_have_happened_are_reported(
    taken: str, cast: str, half: str
) -> None:
    (d,) = findings(CORRELATED.format(taken=taken, cast=cast))
    assert span(d) == (18, 9, 18, 31)
    assert f"trains parameters that are {half}" in d.message


def test_a_gradient_hook_unscaling_does_not_stand_for_the_loops_own_unscale() -> None:
    """A hook defined in the training function runs during ``backward`` on the runs that
    register it; the loop's own unscale, on the other runs, raises too and is reported too
    (even where an earlier round that skipped the step leaves it unscaled on some paths)."""
    found = findings(
        """
        def train(args, model, loader):
            model = model.half()
            optimizer = torch.optim.AdamW(model.parameters())
            scaler = torch.amp.GradScaler("cpu")
            if args.fused:

                def hook(param):
                    scaler.unscale_(optimizer)
                    scaler.step(optimizer)
                    scaler.update()

                for p in model.parameters():
                    p.register_post_accumulate_grad_hook(hook)
            for x in loader:
                loss = model(x).float().mean()
                scaler.scale(loss).backward()
                if not args.fused:
                    scaler.unscale_(optimizer)
                    if args.sync:
                        scaler.step(optimizer)
                        scaler.update()
        """
    )
    assert [span(d)[0] for d in found] == [12, 22]


def test_a_gradient_hook_defined_before_the_upcast_runs_after_it() -> None:
    """A hook is walked where it is defined, but runs in the loop's ``backward``: after the
    model was upcast to float32 there, its unscale takes float32 gradients, as the loop's."""
    found = findings(
        """
        def train(args, model, loader):
            model = model.half()
            optimizer = torch.optim.AdamW(model.parameters())
            scaler = torch.amp.GradScaler("cpu")
            if args.fused:

                def hook(param):
                    scaler.unscale_(optimizer)
                    scaler.step(optimizer)
                    scaler.update()

                for p in model.parameters():
                    p.register_post_accumulate_grad_hook(hook)
            model.float()
            for x in loader:
                loss = model(x).float().mean()
                scaler.scale(loss).backward()
                if not args.fused:
                    scaler.unscale_(optimizer)
                    scaler.step(optimizer)
                    scaler.update()
        """
    )
    assert found == []


@pytest.mark.parametrize(("flag", "reported"), [("False", False), ("args.train_te", True)])
def test_a_local_bound_only_to_false_never_takes_its_branch(flag: str, reported: bool) -> None:
    """``train_te = False`` then ``if train_te:`` (HunyuanDiT's trainer): the half encoder
    never joins the trained parameters."""
    found = findings(
        f"""
        def train(args, loader):
            model = nn.Linear(8, 1)
            te = nn.Linear(8, 8).half()
            train_te = {flag}
            params = list(model.parameters())
            if train_te:
                params.extend(te.parameters())
            optimizer = torch.optim.SGD(params, lr=0.1)
            scaler = torch.amp.GradScaler("cuda")
            for x, y in loader:
                loss = F.mse_loss(model(x).float(), y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
        """
    )
    assert bool(found) is reported


TRAINER = "from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"  # line 4


def trainer_findings(body: str, code: str = "MPC201") -> list[Diagnostic]:
    return [d for d in check(HEADER + TRAINER + textwrap.dedent(body)) if d.code == code]


def test_a_trainer_with_fp16_steps_a_model_loaded_in_float16() -> None:
    (d,) = trainer_findings(
        """
        def main(data):
            model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)
            args = TrainingArguments(output_dir="out", fp16=True)
            trainer = Trainer(model=model, args=args, train_dataset=data)
            trainer.train()
        """
    )
    assert span(d) == (10, 5, 10, 20)
    assert "the optimizer built at line 9 trains parameters that are float16" in d.message
    assert related(d)[-1] == (
        8,
        12,
        '`TrainingArguments(output_dir="out", fp16=True)` makes the Trainer step through a '
        "GradScaler",
    )


@pytest.mark.parametrize(
    ("model", "arguments"),
    [
        # float32 master weights under fp16 autocast: what fp16=True is for
        ('AutoModelForCausalLM.from_pretrained("m")', "fp16=True"),
        # bfloat16 weights and bf16 autocast: no GradScaler runs
        ('AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.bfloat16)', "bf16=True"),
        # no mixed precision asked for: no GradScaler runs
        ('AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)', "fp16=False"),
        # DeepSpeed scales the loss itself
        (
            'AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)',
            'fp16=True, deepspeed="ds.json"',
        ),
        # FSDP's sharded scaler takes float16 gradients
        (
            'AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)',
            'fp16=True, fsdp="full_shard"',
        ),
    ],
)
def test_a_trainer_that_runs_no_scaler_on_float16_is_quiet(model: str, arguments: str) -> None:
    assert not trainer_findings(
        f"""
        def main(data):
            model = {model}
            args = TrainingArguments(output_dir="out", {arguments})
            Trainer(model=model, args=args, train_dataset=data).train()
        """
    )


def test_a_trainer_of_a_peft_model_trains_float32_adapters() -> None:
    assert not trainer_findings(
        """
        from peft import LoraConfig, get_peft_model

        def main(data):
            model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)
            model = get_peft_model(model, LoraConfig(r=8))
            args = TrainingArguments(output_dir="out", fp16=True)
            Trainer(model=model, args=args, train_dataset=data).train()
        """
    )


def test_a_trainer_handed_its_optimizer_trains_what_that_optimizer_holds() -> None:
    (d,) = trainer_findings(
        """
        def main(data):
            model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)
            optimizer = torch.optim.AdamW(model.parameters(), fused=True)
            args = TrainingArguments(output_dir="out", fp16=True)
            trainer = Trainer(model=model, args=args, optimizers=(optimizer, None))
            trainer.train()
        """
    )
    assert "the optimizer built at line 8 trains" in d.message
    assert not trainer_findings(
        """
        def main(data):
            model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)
            head = [p for n, p in model.named_parameters() if "head" in n]
            for p in head:
                p.data = p.data.float()
            optimizer = torch.optim.AdamW(head, fused=True)
            args = TrainingArguments(output_dir="out", fp16=True)
            trainer = Trainer(model=model, args=args, optimizers=(optimizer, None))
            trainer.train()
        """
    )


def test_a_trainer_whose_fp16_follows_a_flag_says_so() -> None:
    (d,) = trainer_findings(
        """
        def main(data, flags):
            model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)
            args = TrainingArguments(output_dir="out", fp16=flags.fp16)
            Trainer(model=model, args=args, train_dataset=data).train()
        """
    )
    assert related(d)[-1][2].endswith("step through a GradScaler when fp16 is set")


def test_a_trainer_whose_arguments_come_from_the_command_line() -> None:
    (d,) = trainer_findings(
        """
        from transformers import HfArgumentParser

        def main(data):
            parser = HfArgumentParser((ModelArguments, TrainingArguments))
            model_args, training_args = parser.parse_args_into_dataclasses()
            model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)
            Trainer(model=model, args=training_args, train_dataset=data).train()
        """
    )
    assert related(d)[-1][2].endswith("step through a GradScaler when fp16 is set")
    assert not trainer_findings(
        """
        from transformers import HfArgumentParser

        def main(data):
            parser = HfArgumentParser((ModelArguments, TrainingArguments))
            model_args, training_args = parser.parse_args_into_dataclasses()
            model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.bfloat16)
            Trainer(model=model, args=training_args, train_dataset=data).train()
        """
    )


def test_training_arguments_spread_from_a_config_may_set_fp16() -> None:
    (d,) = trainer_findings(
        """
        def main(data, config: dict):
            model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)
            args = TrainingArguments(output_dir="out", **config)
            Trainer(model=model, args=args, train_dataset=data).train()
        """
    )
    assert related(d)[-1][2].endswith("step through a GradScaler when fp16 is set")


def test_training_arguments_handed_to_a_function_may_set_fp16() -> None:
    (d,) = trainer_findings(
        """
        def train(data, training_args: TrainingArguments):
            model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)
            Trainer(model=model, args=training_args, train_dataset=data).train()
        """
    )
    assert "raises" in d.message


def test_project_subclasses_of_the_trainer_and_its_arguments_are_built_as_their_bases() -> None:
    (d,) = trainer_findings(
        """
        from dataclasses import dataclass

        class LossTrainer(Trainer):
            def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
                return model(**inputs).loss

        @dataclass
        class MyArguments(TrainingArguments):
            horizon: int = 8

        def main(data):
            model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)
            args = MyArguments(output_dir="out", fp16=True)
            LossTrainer(model=model, args=args, train_dataset=data).train()
        """
    )
    assert span(d)[0] == 19


@pytest.mark.parametrize(
    ("dtype", "reported"),
    [
        ("torch.float16", True),
        ("torch.float32", False),
        ("torch.bfloat16", False),  # (bfloat16 gradients: the scaler takes them)
    ],
)
def test_the_projects_loader_forwards_its_keywords_to_from_pretrained(
    dtype: str, reported: bool
) -> None:
    found = trainer_findings(
        f"""
        def load_model(path, **kwargs):
            return AutoModelForCausalLM.from_pretrained(path, **kwargs)

        def main(data):
            model = load_model("m", torch_dtype={dtype}, attn_implementation="eager")
            args = TrainingArguments(output_dir="out", fp16=True)
            Trainer(model=model, args=args, train_dataset=data).train()
        """
    )
    assert bool(found) is reported
    if found:
        assert "loaded by `load_model` in the dtype handed to it" in found[0].message


def test_a_loader_whose_keywords_are_rebound_forwards_nothing_it_was_handed() -> None:
    assert not trainer_findings(
        """
        def load_model(path, **kwargs):
            kwargs = {"low_cpu_mem_usage": True}
            return AutoModelForCausalLM.from_pretrained(path, **kwargs)

        def main(data):
            model = load_model("m", torch_dtype=torch.float16)
            args = TrainingArguments(output_dir="out", fp16=True)
            Trainer(model=model, args=args, train_dataset=data).train()
        """
    )


def test_a_loader_given_its_dtype_parameter_loads_in_what_each_call_hands() -> None:
    found = trainer_findings(
        """
        def load(path, torch_dtype=None):
            return AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch_dtype)

        def half(data):
            args = TrainingArguments(output_dir="out", fp16=True)
            Trainer(model=load("m", torch.float16), args=args, train_dataset=data).train()

        def full(data):
            args = TrainingArguments(output_dir="out", fp16=True)
            Trainer(model=load("m", torch.float32), args=args, train_dataset=data).train()
        """
    )
    assert [span(d)[0] for d in found] == [11]


@pytest.mark.parametrize(
    ("default", "reported"), [("torch.float16", True), ("torch.float32", False)]
)
def test_a_dtype_or_default_of_a_constructor_argument_is_the_default_when_none(
    default: str, reported: bool
) -> None:
    found = trainer_findings(
        f"""
        class Embedder:
            def __init__(self, name, torch_dtype=None):
                self.backbone = AutoModelForCausalLM.from_pretrained(
                    name, torch_dtype=torch_dtype or {default}
                )

            def fit(self, data):
                args = TrainingArguments(output_dir="out", fp16=True)
                Trainer(model=self.backbone, args=args, train_dataset=data).train()
        """
    )
    assert bool(found) is reported
    if found:
        assert "float16 on some paths" in found[0].message


def test_a_trainer_class_picked_by_a_flag_is_built_as_either() -> None:
    (d,) = trainer_findings(
        """
        class A(Trainer):
            pass

        class B(A):
            pass

        def main(data, contrastive):
            model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)
            args = TrainingArguments(output_dir="out", fp16=True)
            trainer_class = B if contrastive else A
            trainer_class(model=model, args=args, train_dataset=data).train()
        """
    )
    assert span(d)[0] == 16


def test_a_peft_model_keeps_its_float32_adapters_in_another_method() -> None:
    assert not trainer_findings(
        """
        from peft import LoraConfig, get_peft_model

        class Tuner:
            def __init__(self, name):
                model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16)
                self.model = get_peft_model(model, LoraConfig(r=8))

            def fit(self, data):
                args = TrainingArguments(output_dir="out", fp16=True)
                Trainer(model=self.model, args=args, train_dataset=data).train()
        """
    )


def test_a_peft_path_joined_with_a_float16_path_keeps_the_float16_one() -> None:
    (d,) = trainer_findings(
        """
        from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

        class Tuner:
            def __init__(self, name, lora):
                if lora:
                    model = AutoModelForCausalLM.from_pretrained(name, load_in_4bit=True)
                    model = prepare_model_for_kbit_training(model)
                    model = get_peft_model(model, LoraConfig(r=8))
                else:
                    model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16)
                self.model = model

            def fit(self, data):
                args = TrainingArguments(output_dir="out", fp16=True)
                Trainer(model=self.model, args=args, train_dataset=data).train()
        """
    )
    assert "float16 on some paths (loaded with torch.float16 at line 15)" in d.message


# -- severity: an error when the code shows both sides, a warning stating the premise else --


@pytest.mark.parametrize(
    ("body", "severity", "premise"),
    [
        (  # a load in float16 on every run, fp16=True: the code shows both
            """
            def main(data):
                model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)
                args = TrainingArguments(output_dir="out", fp16=True)
                Trainer(model=model, args=args, train_dataset=data).train()
            """,
            Severity.ERROR,
            None,
        ),
        (  # fp16 parsed from the command line: the run decides
            """
            from transformers import HfArgumentParser

            def main(data):
                parser = HfArgumentParser((ModelArguments, TrainingArguments))
                model_args, training_args = parser.parse_args_into_dataclasses()
                model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)
                Trainer(model=model, args=training_args, train_dataset=data).train()
            """,
            Severity.WARNING,
            "when the run sets fp16:",
        ),
        (  # ... but a dtype decided by that very option goes with the scaler on every run
            """
            from transformers import HfArgumentParser

            def main(data):
                parser = HfArgumentParser((ModelArguments, TrainingArguments))
                model_args, training_args = parser.parse_args_into_dataclasses()
                dtype = torch.float16 if training_args.fp16 else torch.float32
                model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=dtype)
                Trainer(model=model, args=training_args, train_dataset=data).train()
            """,
            Severity.ERROR,
            None,
        ),
        (  # fp16 from a spread configuration
            """
            def main(data, config: dict):
                model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)
                Trainer(
                    model=model, args=TrainingArguments(output_dir="out", **config)
                ).train()
            """,
            Severity.WARNING,
            "when the run sets fp16:",
        ),
        (  # an annotated TrainingArguments parameter
            """
            def train(data, training_args: TrainingArguments):
                model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)
                Trainer(model=model, args=training_args, train_dataset=data).train()
            """,
            Severity.WARNING,
            "when the run sets fp16:",
        ),
        (  # the dtype from another option than the one fp16 follows
            """
            def main(data, args):
                dtype = torch.float16 if args.precision == "fp16" else torch.float32
                model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=dtype)
                training = TrainingArguments(output_dir="out", fp16=args.use_amp)
                Trainer(model=model, args=training, train_dataset=data).train()
            """,
            Severity.WARNING,
            "when the run sets fp16 (`fp16=args.use_amp`) and makes the trained parameters "
            "float16:",
        ),
        (  # the checkpoint's own dtype
            """
            def main(data):
                model = AutoModelForCausalLM.from_pretrained("m", torch_dtype="auto")
                args = TrainingArguments(output_dir="out", fp16=True)
                Trainer(model=model, args=args, train_dataset=data).train()
            """,
            Severity.WARNING,
            "when the run loads a checkpoint stored in float16:",
        ),
    ],
)
def test_a_trainers_finding_is_an_error_only_on_the_codes_evidence(
    body: str, severity: Severity, premise: str | None
) -> None:
    (d,) = trainer_findings(body)
    assert d.severity is severity
    if premise is None:
        assert " when the run " not in d.message
    else:
        assert premise in d.message


@pytest.mark.parametrize(
    ("dtype", "enabled", "severity"),
    [
        # one option turns the scaler on and makes the parameters float16
        (
            'torch.float16 if args.mixed_precision == "fp16" else torch.float32',
            'args.mixed_precision == "fp16"',
            Severity.ERROR,
        ),
        ("torch.float16 if args.fp16 else torch.float32", "args.fp16", Severity.ERROR),
        # two options: both must be set
        (
            'torch.float16 if args.precision == "fp16" else torch.float32',
            "args.amp",
            Severity.WARNING,
        ),
        # a scaler on every run, a float16 path the run picks: that path raises
        ('torch.float16 if args.precision == "fp16" else torch.float32', "True", Severity.ERROR),
        # a CUDA scaler on wherever CUDA is, the runs it scales
        ("torch.float16", "torch.cuda.is_available()", Severity.ERROR),
        # a float16 cast on every run, a scaler the run turns on
        ("torch.float16", "args.amp", Severity.WARNING),
        ("torch.float16", "True", Severity.ERROR),
    ],
)
def test_a_grad_scalers_finding_follows_the_options_of_the_run(
    dtype: str, enabled: str, severity: Severity
) -> None:
    (d,) = findings(
        f"""
        def train(args, loader):
            weight_dtype = {dtype}
            model = nn.Linear(8, 1).to(weight_dtype)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("cuda", enabled={enabled})
            for x, y in loader:
                scaler.scale(F.mse_loss(model(x).float(), y)).backward()
                scaler.step(optimizer)
                scaler.update()
        """
    )
    assert d.severity is severity
    assert (" when the run " in d.message) is (severity is Severity.WARNING)


def test_accelerates_scaler_goes_with_a_dtype_its_mixed_precision_decides() -> None:
    found = findings(
        """
        from accelerate import Accelerator

        def train(args, model, loader):
            accelerator = Accelerator(mixed_precision=args.mixed_precision)
            weight_dtype = torch.float32
            if accelerator.mixed_precision == "fp16":
                weight_dtype = torch.float16
            model.to(dtype=weight_dtype)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model, optimizer = accelerator.prepare(model, optimizer)
            for x in loader:
                accelerator.backward(model(x).float().mean())
                optimizer.step()

        def other(args, model, loader):
            accelerator = Accelerator(mixed_precision=args.mixed_precision)
            weight_dtype = torch.float16 if args.dtype == "fp16" else torch.float32
            model.to(dtype=weight_dtype)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model, optimizer = accelerator.prepare(model, optimizer)
            for x in loader:
                accelerator.backward(model(x).float().mean())
                optimizer.step()
        """
    )
    assert [(span(d)[0], d.severity) for d in found] == [
        (17, Severity.ERROR),
        (27, Severity.WARNING),
    ]
    assert (
        "when the run runs accelerate in fp16 mixed precision "
        "(`mixed_precision=args.mixed_precision`) and makes"
    ) in found[1].message


def test_a_loader_handed_no_dtype_loads_float32_as_from_pretrained_without_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """transformers (up to version 4) loads in float32 without a dtype: the project's loader
    called without one loads so too, here and from another file; a parameter defaulting to
    something else than None leaves it unknown."""
    from mpcheck.engine import functions, loads

    seen: list[tuple[str, str | None]] = []

    def spy(*args: object, **kwargs: object) -> object:
        made = loads.loaded_in(*args, **kwargs)  # type: ignore[arg-type]
        seen.append((str(args[1]), made.dtype))
        return made

    monkeypatch.setattr(functions, "loaded_in", spy)
    trainer_findings(
        """
        def by_kwargs(path, **kwargs):
            return AutoModelForCausalLM.from_pretrained(path, **kwargs)

        def by_name(path, torch_dtype=None):
            return AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch_dtype)

        def by_default(path, torch_dtype=torch.float16):
            return AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch_dtype)

        def main(data):
            args = TrainingArguments(output_dir="out", fp16=True)
            for model in (by_kwargs("m"), by_name("m", None), by_default("m")):
                Trainer(model=model, args=args, train_dataset=data).train()
        """
    )
    assert seen == [("`by_kwargs`", "float32"), ("`by_name`", "float32"), ("`by_default`", None)]
