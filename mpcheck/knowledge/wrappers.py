"""What training libraries' mixed-precision wrappers do to a model: one line per wrapper.

A wrapper's precision setting either runs the model's ``forward`` under autocast and keeps
its weights float32 (``AUTOCAST``: accelerate's native mixed precision, Lightning's
``"16-mixed"``, transformers' ``TrainingArguments(fp16=True)``), casts the weights to half
(``CAST``: Lightning's ``"bf16-true"``, DeepSpeed's ``"bf16": {"enabled": true}``,
``fp16_full_eval``, an FSDP policy's half ``param_dtype``), or does neither (``FULL``).
:mod:`mpcheck.project.records` reads these lines: a model only built in float32 and handed
to an autocasting wrapper stays float32-built and runs under autocast; one handed to a
casting wrapper is half.

To teach one more wrapper, add its line to :data:`WRAPPERS` (qualified class or function
name -> the settings that decide its precision) and, if it takes the model by a method of its
value or a call, to :data:`TAKING_METHODS` or :data:`TAKING_CALLS`, with the arguments that
hand it a model in :data:`HANDING` (a wrapper casts only those: a take handing a model of
unknown class is what lets it reach any class of the project).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "ACCELERATE_PLACING",
    "AUTOCAST",
    "BUFFERS",
    "CAST",
    "FSDP_POLICIES",
    "FSDP_WRAPPERS",
    "FULL",
    "HANDING",
    "KEYED",
    "SHIPPED_DEEPSPEED",
    "NOT_MODELS",
    "TAKING_CALLS",
    "TAKING_METHODS",
    "UNKNOWN",
    "WRAPPERS",
    "AUTOCASTING",
    "Policy",
    "Setting",
    "autocasting",
    "effect",
    "placing",
    "library_of",
    "policy_effect",
]

AUTOCAST, CAST, FULL, UNKNOWN = "autocast", "cast", "full", "unknown"
# An unknown setting read under a configuration key (``unknown:precision``): the project's
# configuration files may say which values it takes (:mod:`mpcheck.project.models`).
KEYED = ":"
_STRENGTH = (CAST, UNKNOWN, AUTOCAST, FULL)  # a call's effect: the first of its settings'


@dataclass(frozen=True, slots=True)
class Setting:
    """One argument deciding a wrapper's precision. ``values``: the literal as written
    (``"16-mixed"``, ``True``) -> its effect; ``absent``: when the call does not give it;
    ``other``: an expression whose value is unknown here (``args.mixed_precision``)."""

    keyword: str
    values: Mapping[str, str] = field(default_factory=dict)
    absent: str = FULL
    other: str = UNKNOWN
    position: int | None = None  # its index when passed positionally


_TRUE = MappingProxyType({"True": AUTOCAST, "False": FULL})
_CAST_IF_TRUE = MappingProxyType({"True": CAST, "False": FULL})
# accelerate: native mixed precision wraps each prepared model's forward in autocast and keeps
# its parameters (Accelerator.prepare_model); unset, the launch configuration decides (may)
_ACCELERATE = (
    Setting(
        "mixed_precision",
        {"fp16": AUTOCAST, "bf16": AUTOCAST, "fp8": AUTOCAST, "no": FULL},
        absent=AUTOCAST,
        other=AUTOCAST,
        position=2,
    ),
)
# Lightning: "*-mixed" runs the steps under torch.autocast with float32 weights; "*-true"
# converts the module to half (MixedPrecision / HalfPrecision precision plugins)
_LIGHTNING_PRECISION = {
    "16-mixed": AUTOCAST, "bf16-mixed": AUTOCAST, "16": AUTOCAST, "bf16": AUTOCAST,
    "16-true": CAST, "bf16-true": CAST, "half": CAST,
    "32": FULL, "32-true": FULL, "64": FULL, "64-true": FULL,
}  # fmt: skip
_LIGHTNING = (Setting("precision", _LIGHTNING_PRECISION, position=None),)
# transformers: fp16/bf16 train under accelerate's autocast with float32 weights; the
# *_full_eval flags cast the model itself for evaluation (Trainer.evaluation_loop)
_TRAINING_ARGUMENTS = (
    Setting("fp16", _TRUE, other=AUTOCAST),
    Setting("bf16", _TRUE, other=AUTOCAST),
    Setting("fp16_full_eval", _CAST_IF_TRUE),
    Setting("bf16_full_eval", _CAST_IF_TRUE),
)
# DeepSpeed's engine casts the module to its config's fp16/bf16 (a config this file writes
# with ``"bf16": {"enabled": True}`` says so; :mod:`mpcheck.project.records` reads it)
_DEEPSPEED = (Setting("config", absent=UNKNOWN), Setting("config_params", absent=UNKNOWN))
# PyTorch's FSDP (torch 2.13, read in torch/distributed/fsdp): a policy's ``param_dtype``
# is the dtype of the unsharded parameters the forward computes with (no autocast; the
# sharded float32 parameters are the optimizer's). Buffers are not cast by FSDP2 at all,
# and by FSDP1 only to a ``buffer_dtype``. Floating forward inputs are cast to
# ``param_dtype``: FSDP2 before each ``fully_shard``-ed module's forward
# (``cast_forward_inputs``, default True), FSDP1 at the root (``cast_root_forward_inputs``,
# default True; every wrapped module with ``cast_forward_inputs=True``). No policy, or a
# ``param_dtype`` of None or float32, keeps the model float32 (:mod:`mpcheck.project.records`
# reads the policy, in the call or built in its file, by :data:`FSDP_POLICIES`).
# coqui-ai/Trainer (the ``trainer`` package, v0.0.36, trainer/trainer.py): its config's
# ``mixed_precision`` and ``precision`` run each step under torch.autocast (or apex O1, which
# patches functions, or accelerate's native mixed precision) with a GradScaler, and leave the
# weights of the model it takes as they were built: it never casts it.
_COQUI_TRAINER = (Setting("config", absent=AUTOCAST, other=AUTOCAST, position=1),)
_FSDP1 = (Setting("mixed_precision", absent=FULL),)
_FSDP2 = (Setting("mp_policy", absent=FULL),)

WRAPPERS: Mapping[str, tuple[Setting, ...]] = MappingProxyType(
    {
        "accelerate.Accelerator": _ACCELERATE,
        "accelerate.accelerator.Accelerator": _ACCELERATE,
        "lightning.Trainer": _LIGHTNING,
        "lightning.pytorch.Trainer": _LIGHTNING,
        "pytorch_lightning.Trainer": _LIGHTNING,
        "lightning.Fabric": _LIGHTNING,
        "lightning.fabric.Fabric": _LIGHTNING,
        "transformers.TrainingArguments": _TRAINING_ARGUMENTS,
        "transformers.Seq2SeqTrainingArguments": _TRAINING_ARGUMENTS,
        "transformers.training_args.TrainingArguments": _TRAINING_ARGUMENTS,
        "deepspeed.initialize": _DEEPSPEED,
        "trainer.Trainer": _COQUI_TRAINER,
        "trainer.trainer.Trainer": _COQUI_TRAINER,
        **dict.fromkeys(
            (
                "torch.distributed.fsdp.FullyShardedDataParallel",
                "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
            ),
            _FSDP1,
        ),
        **dict.fromkeys(
            (
                "torch.distributed.fsdp.fully_shard",
                "torch.distributed.fsdp._fully_shard.fully_shard",
                "torch.distributed.fsdp._fully_shard._fully_shard.fully_shard",
                "torch.distributed._composable.fsdp.fully_shard",
                "torch.distributed._composable.fsdp.fully_shard.fully_shard",
            ),
            _FSDP2,
        ),
    }
)

FSDP_WRAPPERS = frozenset(name for name in WRAPPERS if name.startswith("torch.distributed."))


@dataclass(frozen=True, slots=True)
class Policy:
    """An FSDP mixed-precision policy class: which of its keywords cast the forward's
    floating inputs to ``param_dtype``, and their defaults (torch 2.13); ``buffers``: it
    takes a ``buffer_dtype`` (FSDP1), the only way FSDP casts a buffer."""

    inputs: tuple[tuple[str, bool], ...]
    buffers: bool = False


# FSDP1's policy casts the root's inputs by default, FSDP2's every sharded module's. FSDP1
# casts every buffer, persistent or not, to a ``buffer_dtype`` given (none: left as built);
# FSDP2 has no such setting and never casts a buffer (torch 2.13: ``_runtime_utils.
# _cast_buffers_to_dtype_and_device``; ``_fully_shard`` manages parameters only).
_FSDP1_POLICY = Policy(
    (("cast_root_forward_inputs", True), ("cast_forward_inputs", False)), buffers=True
)
_FSDP2_POLICY = Policy((("cast_forward_inputs", True),))
# The suffix of a casting FSDP wrapper's effect, as records keep it, when its policy also
# casts the buffers (FSDP1's ``buffer_dtype`` in half or unknown); without it the cast
# reaches parameters only and every buffer keeps the dtype it was built with.
BUFFERS = "+buffers"
FSDP_POLICIES: Mapping[str, Policy] = MappingProxyType(
    {
        "torch.distributed.fsdp.MixedPrecision": _FSDP1_POLICY,
        "torch.distributed.fsdp.api.MixedPrecision": _FSDP1_POLICY,
        "torch.distributed.fsdp.fully_sharded_data_parallel.MixedPrecision": _FSDP1_POLICY,
        "torch.distributed.fsdp.MixedPrecisionPolicy": _FSDP2_POLICY,
        "torch.distributed.fsdp._fully_shard.MixedPrecisionPolicy": _FSDP2_POLICY,
        "torch.distributed.fsdp._fully_shard._fsdp_api.MixedPrecisionPolicy": _FSDP2_POLICY,
        "torch.distributed._composable.fsdp.MixedPrecisionPolicy": _FSDP2_POLICY,
    }
)
# A policy's ``param_dtype`` as written: half casts, these keep float32, anything else (a
# variable, a config lookup) is unknown here.
HALF_DTYPES = frozenset(
    {"torch.float16", "torch.half", "torch.bfloat16", "float16", "bfloat16", "half"}
)
FULL_DTYPES = frozenset({"torch.float32", "torch.float", "float32", "None"})


def policy_effect(dtype: str | None) -> str:
    """A policy's effect from its ``param_dtype`` as written (None: not given)."""
    if dtype is None or dtype in FULL_DTYPES:
        return FULL
    return CAST if dtype in HALF_DTYPES else UNKNOWN


# Where a wrapper takes the model: a method of its value, by library (``accelerator.prepare
# (model)``, ``trainer.fit(model)``), or a call's ``model`` keyword or first argument
# (``Trainer(model=model)``, ``deepspeed.initialize(model=model)``). The model takes the
# effect of that library's wrappers in the project (the call's own for ``deepspeed``). A
# library an application's own module shadows (its ``trainer.py``) is none of these
# (:func:`mpcheck.project.models.uses_of_records` knows the project's modules).
TAKING_METHODS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "accelerate": ("prepare", "prepare_model", "unwrap_model"),
        "lightning": ("fit", "validate", "test", "predict", "setup", "setup_module"),
        "pytorch_lightning": ("fit", "validate", "test", "predict", "setup"),
    }
)
TAKING_CALLS: Mapping[str, str] = MappingProxyType(
    {
        "transformers.Trainer": "transformers",
        "transformers.Seq2SeqTrainer": "transformers",
        "transformers.trainer.Trainer": "transformers",
        "deepspeed.initialize": "deepspeed",
        "trainer.Trainer": "trainer",
        "trainer.trainer.Trainer": "trainer",
        **dict.fromkeys(FSDP_WRAPPERS, "torch"),
    }
)
# Which arguments of a take hand the wrapper a model: (keywords, position), by the qualified
# call of :data:`TAKING_CALLS` or ``library.method`` of :data:`TAKING_METHODS`; position
# None: every positional argument may be one (accelerate's ``prepare(*args)`` takes models,
# optimizers, data loaders and schedulers alike and casts none of them itself); -1: none
# (``unwrap_model`` returns what ``prepare`` was handed). A wrapper casts only the models
# handed to it (and the parts they build): the other arguments (Lightning's
# ``datamodule=``, ``Fabric.setup``'s optimizers after the module, DeepSpeed's
# ``optimizer=``) are no model. ``model_init`` builds the model: what it returns is handed.
HANDING: Mapping[str, tuple[tuple[str, ...], int | None]] = MappingProxyType(
    {
        "accelerate.prepare": ((), None),
        "accelerate.prepare_model": (("model",), 0),
        "accelerate.unwrap_model": ((), -1),
        **dict.fromkeys(
            ("lightning.fit", "lightning.validate", "lightning.test", "lightning.predict"),
            (("model",), 0),
        ),
        "lightning.setup": (("module",), 0),
        "lightning.setup_module": (("module",), 0),
        **dict.fromkeys(
            (
                "transformers.Trainer",
                "transformers.Seq2SeqTrainer",
                "transformers.trainer.Trainer",
            ),
            (("model", "model_init"), 0),
        ),
        "deepspeed.initialize": (("model",), 1),
        **dict.fromkeys(("trainer.Trainer", "trainer.trainer.Trainer"), (("model",), -1)),
        **dict.fromkeys(FSDP_WRAPPERS, (("module",), 0)),
    }
)
# What a callee's last name says it builds when it is no model: an optimizer, a learning-rate
# scheduler, a data loader, dataset or sampler (``get_scheduler``, ``optimizer_cls``,
# ``build_dataloader``): a take handing its value hands no model.
NOT_MODELS = ("optim", "adam", "sgd", "schedul", "loader", "dataset", "sampler")


# Libraries (and trainers) that may run a project's models under autocast, whatever the
# project's own code spells: a file importing one may turn autocast on (Lightning's and
# accelerate's precision may come from a configuration file or the launcher; transformers'
# and trl's trainers from ``TrainingArguments``; apex's O1 patches torch functions; DeepSpeed's
# ``torch_autocast`` section). A project none of whose files does, and that opens no
# enabled autocast region itself, never runs anything under autocast.
AUTOCASTING = (
    "lightning", "pytorch_lightning", "lightning_fabric", "accelerate", "apex", "deepspeed",
    "colossalai", "trl", "transformers.Trainer", "transformers.Seq2SeqTrainer",
    "transformers.TrainingArguments", "transformers.Seq2SeqTrainingArguments",
    "transformers.trainer", "transformers.training_args",
)  # fmt: skip


def autocasting(target: str) -> bool:
    """Whether an import of ``target`` (``lightning.Trainer``, ``accelerate``) brings a trainer
    that may run models under autocast (:data:`AUTOCASTING`)."""
    return any(target == lib or target.startswith(f"{lib}.") for lib in AUTOCASTING)


# accelerate's big-model inference and offloading utilities (accelerate 1.x: ``hooks``,
# ``big_modeling``, ``utils.modeling``, ``utils.offload``): they place, dispatch and load
# weights and build no Accelerator, so a file using only these hands nothing to DeepSpeed,
# whatever it says of DeepSpeed (a vendored ``modeling_utils`` asking
# ``is_deepspeed_zero3_enabled()``).
ACCELERATE_PLACING = (
    "accelerate.hooks", "accelerate.big_modeling", "accelerate.utils.modeling",
    "accelerate.utils.offload", "accelerate.dispatch_model", "accelerate.infer_auto_device_map",
    "accelerate.init_empty_weights", "accelerate.init_on_device", "accelerate.cpu_offload",
    "accelerate.disk_offload", "accelerate.load_checkpoint_and_dispatch",
    "accelerate.utils.check_tied_parameters_on_same_device",
    "accelerate.utils.find_tied_parameters",
    "accelerate.utils.get_balanced_memory", "accelerate.utils.get_max_memory",
    "accelerate.utils.load_offloaded_weights", "accelerate.utils.offload_weight",
    "accelerate.utils.save_offload_index", "accelerate.utils.set_module_tensor_to_device",
    "accelerate.utils.extract_model_from_parallel", "accelerate.utils.get_state_dict_from_offload",
)  # fmt: skip


def placing(target: str) -> bool:
    """Whether an import of ``target`` is one of accelerate's placing utilities
    (:data:`ACCELERATE_PLACING`), which never hand a model to DeepSpeed."""
    return any(target == name or target.startswith(f"{name}.") for name in ACCELERATE_PLACING)


# A DeepSpeed config key that casts the engine's module when enabled.
DEEPSPEED_HALF_KEYS = ("fp16", "bf16", "bfloat16")
# ``deepspeed.initialize`` in a file that writes no configuration: the configurations the
# checkout ships decide (:mod:`mpcheck.project.deepspeed_configs`).
SHIPPED_DEEPSPEED = f"{UNKNOWN}{KEYED}deepspeed{KEYED}shipped"


def effect(effects: list[str]) -> str:
    """One call's effect from its settings': a cast wins, then unknown (one read under a
    configuration key after any other), then autocast."""
    for kind in _STRENGTH:
        if kind in effects:
            return kind
        keyed = [e for e in effects if e.startswith(UNKNOWN + KEYED)]
        if kind == UNKNOWN and keyed:
            return keyed[0]
    return FULL


def library_of(name: str) -> str:
    """The library whose wrappers decide a model's effect: ``lightning.pytorch.Trainer`` ->
    ``lightning`` (``pytorch_lightning`` is the same library)."""
    root = name.split(".", 1)[0]
    return "lightning" if root == "pytorch_lightning" else root
