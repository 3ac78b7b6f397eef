"""What torch, accelerate, diffusers and peft offer for training: the names we recognise.

Gradient scalers, accelerators, optimizers and their ``eps`` defaults, gradient clipping
functions and helpers that cast trainable parameters. :mod:`mpcheck.engine.training_loop`
looks calls up here; :mod:`mpcheck.engine.training` holds what it learns about them.
"""

from __future__ import annotations

# GradScaler classes: (device when not given, index of a positional ``enabled``, device arg?)
SCALER_CLASSES: dict[str, tuple[str, int, bool]] = {
    "torch.amp.GradScaler": ("cuda", 5, True),
    "torch.GradScaler": ("cuda", 5, True),
    "torch.cuda.amp.GradScaler": ("cuda", 4, False),
    "torch.cuda.amp.grad_scaler.GradScaler": ("cuda", 4, False),
    "torch.cpu.amp.GradScaler": ("cpu", 4, False),
    "torch.cpu.amp.grad_scaler.GradScaler": ("cpu", 4, False),
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler": ("cuda", 5, True),
    "torch.distributed.fsdp.ShardedGradScaler": ("cuda", 5, True),
}
# ShardedGradScaler unscales float16 gradients (FSDP may train in fp16): no raise.
FP16_TOLERANT_SCALERS = frozenset(
    {
        "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
        "torch.distributed.fsdp.ShardedGradScaler",
    }
)
# Library EMA helpers that keep their average in the dtype of what they are given and update
# it in place in that dtype, with what each keeps (MPC207): diffusers clones the parameters,
# timm, ema_pytorch and torch's AveragedModel deep-copy the model.
_DEEP_COPY = "a deep copy of the model, in its dtype"
EMA_KEEPERS: dict[str, str] = {
    "diffusers.training_utils.EMAModel": "clones of the parameters, in their dtype",
    "timm.utils.ModelEma": _DEEP_COPY,
    "timm.utils.ModelEmaV2": _DEEP_COPY,
    "timm.utils.ModelEmaV3": _DEEP_COPY,
    "timm.utils.model_ema.ModelEma": _DEEP_COPY,
    "timm.utils.model_ema.ModelEmaV2": _DEEP_COPY,
    "timm.utils.model_ema.ModelEmaV3": _DEEP_COPY,
    "ema_pytorch.EMA": _DEEP_COPY,
    "ema_pytorch.ema_pytorch.EMA": _DEEP_COPY,
    "torch.optim.swa_utils.AveragedModel": _DEEP_COPY,
}
ACCELERATORS = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})
# accelerate's DeepSpeed plugin: an Accelerator given one scales nothing itself
DEEPSPEED_PLUGINS = (
    "accelerate.utils.DeepSpeedPlugin",
    "accelerate.DeepSpeedPlugin",
    "accelerate.utils.dataclasses.DeepSpeedPlugin",
)
OPTIMIZER_PACKAGES = (
    "torch.optim.",
    "bitsandbytes.optim.",
    "transformers.optimization.",
    "timm.optim.",
    "apex.optimizers.",
    "torchao.optim.",
)
NOT_OPTIMIZERS = ("lr_scheduler", "swa_utils", "Schedule", "Lookahead")
OPTIMIZER_FACTORIES = frozenset(
    {
        "timm.optim.create_optimizer_v2",
        "timm.optim.create_optimizer",
        "timm.optim.optim_factory.create_optimizer_v2",
        "timm.optim.optim_factory.create_optimizer",
        "timm.optim._optim_factory.create_optimizer_v2",
    }
)
# torch.optim optimizers whose for-loop/foreach update adds ``eps`` in the parameters'
# dtype: default eps and the positional index of ``eps``. (``fused=True`` computes in
# float32; bitsandbytes' 8-bit optimizers do too, in their kernels.)
EPS_OPTIMIZERS: dict[str, tuple[float, int]] = {
    "Adam": (1e-8, 3),
    "AdamW": (1e-8, 3),
    "Adamax": (1e-8, 3),
    "NAdam": (1e-8, 3),
    "RAdam": (1e-8, 3),
    "SparseAdam": (1e-8, 3),
    "RMSprop": (1e-8, 3),
    "Adagrad": (1e-10, 5),
}
CLIP_FUNCTIONS = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad_norm",
        "torch.nn.utils.clip_grad_value_",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
        "torch.nn.utils.clip_grad.clip_grad_norm",
        "torch.nn.utils.clip_grad.clip_grad_value_",
        "torch.nn.utils.clip_grads_with_norm_",  # scales by max_norm / a norm computed apart
        "torch.nn.utils.clip_grad.clip_grads_with_norm_",
        "timm.utils.dispatch_clip_grad",
        "timm.utils.clip_grad.dispatch_clip_grad",
    }
)
# Clip helpers known by their name where the import table cannot resolve them: inside
# their own package (timm's ``from .clip_grad import dispatch_clip_grad``).
CLIP_NAMES = frozenset({"dispatch_clip_grad"})
# transformers' Trainer (and the trainers deriving it) builds an optimizer over the model's
# trainable parameters unless handed ``optimizers=``, and with ``TrainingArguments(fp16=True)``
# steps it through accelerate's GradScaler at every ``trainer.train()`` step (not under
# DeepSpeed, which scales losses itself; FSDP's sharded scaler takes float16 gradients).
HF_TRAINERS = frozenset(
    {
        "transformers.Trainer",
        "transformers.trainer.Trainer",
        "transformers.Seq2SeqTrainer",
        "transformers.trainer_seq2seq.Seq2SeqTrainer",
        "trl.SFTTrainer",
        "trl.trainer.SFTTrainer",
        "trl.trainer.sft_trainer.SFTTrainer",
    }
)
HF_TRAINING_ARGUMENTS = frozenset(
    {
        "transformers.TrainingArguments",
        "transformers.training_args.TrainingArguments",
        "transformers.Seq2SeqTrainingArguments",
        "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
        "trl.SFTConfig",
        "trl.trainer.SFTConfig",
        "trl.trainer.sft_config.SFTConfig",
    }
)
# ... and by their class's name where a parameter's annotation names them
HF_TRAINING_ARGUMENT_NAMES = frozenset(
    {"TrainingArguments", "Seq2SeqTrainingArguments", "SFTConfig"}
)
# Parsers that fill TrainingArguments from the command line or a file: ``fp16`` is then
# decided at run time (``--fp16``). Their parse methods return one object per class given.
HF_ARGUMENT_PARSERS = frozenset(
    {"transformers.HfArgumentParser", "transformers.hf_argparser.HfArgumentParser", "trl.TrlParser"}
)
HF_PARSE_METHODS = frozenset(
    {
        "parse_args_into_dataclasses",
        "parse_dict",
        "parse_json_file",
        "parse_yaml_file",
        "parse_args_and_config",
    }
)
# Helpers that cast the trainable (``requires_grad``) parameters of models in place.
TRAINABLE_CASTS = frozenset({"diffusers.training_utils.cast_training_params"})
# ... also by name: training scripts copy diffusers' helper into their own utilities (its
# ``if not isinstance(model, list): model = [model]`` defeats following its body).
TRAINABLE_CAST_NAMES = frozenset({"cast_training_params"})
PEFT_WRAPPERS = frozenset(
    {"peft.get_peft_model", "peft.mapping.get_peft_model", "peft.mapping_func.get_peft_model"}
)
# peft's loaders of saved adapters onto a base model: the adapters they add are trainable
# with ``is_trainable=True`` and, as ``get_peft_model``'s, kept in float32 for a half base
# (``autocast_adapter_dtype``, peft 0.12 on); ``torch_dtype=`` loads nothing here.
PEFT_ADAPTER_LOADERS = frozenset(
    {
        "peft.PeftModel.from_pretrained",
        "peft.peft_model.PeftModel.from_pretrained",
        "peft.PeftModelForCausalLM.from_pretrained",
        "peft.PeftModelForFeatureExtraction.from_pretrained",
        "peft.PeftModelForSequenceClassification.from_pretrained",
        "peft.PeftModelForSeq2SeqLM.from_pretrained",
    }
)
# peft's preparation of a quantized model for training: it freezes every parameter and casts
# the float16/bfloat16 ones that are not quantized to float32, and returns the model.
PEFT_KBIT_PREPARERS = frozenset(
    {
        "peft.prepare_model_for_kbit_training",
        "peft.utils.prepare_model_for_kbit_training",
        "peft.utils.other.prepare_model_for_kbit_training",
        "peft.prepare_model_for_int8_training",
        "peft.utils.prepare_model_for_int8_training",
        "peft.utils.other.prepare_model_for_int8_training",
    }
)
SCALER_PARAM_NAMES = frozenset({"scaler", "grad_scaler", "amp_scaler", "gradient_scaler"})


def is_optimizer_class(qual: str) -> bool:
    if qual in ("transformers.Adafactor", "transformers.AdamW"):
        return True
    if not qual.startswith(OPTIMIZER_PACKAGES):
        return False
    leaf = qual.rsplit(".", 1)[-1]
    if not leaf[:1].isupper() or any(n in qual for n in NOT_OPTIMIZERS):
        return False
    return leaf not in ("Optimizer", "ParamGroup")
