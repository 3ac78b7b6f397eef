"""What the engine knows about PyTorch's API: which calls keep, set or mix dtypes.

Names here are the qualified names produced by :mod:`mpcheck.project.names`
(``torch.nn.functional.linear``), or bare tensor-method names (``view``).
"""

from __future__ import annotations

import enum
import re

from mpcheck.knowledge.ops import METHODS, Does, functions_that, methods_that

F = "torch.nn.functional."


class OpKind(enum.Enum):
    """Families of ops whose operands must share a dtype outside autocast."""

    LINEAR = "linear"
    CONV = "conv"
    MATMUL = "matmul"
    ATTENTION = "attention"
    NORM = "norm"
    EMBEDDING = "embedding"
    RECURRENT = "recurrent"
    # A whole model run from a script or a trainer after a cast to half (``unet.to(dtype=
    # weight_dtype)``; ``vae.encode(x)``): its first layer takes the input in its dtype.
    MODEL = "model"


# The keywords a model's main input goes by, when it is not passed first.
MODEL_INPUTS = ("sample", "x", "input", "hidden_states", "pixel_values", "inputs_embeds", "latents")
# Methods that, called as a statement (result discarded), only make sense on an nn.Module:
# ``vae.to(device, dtype=weight_dtype)`` casts in place, a tensor's ``.to`` returns a copy.
MODULE_STATEMENTS = frozenset({"to", "half", "bfloat16", "float", "cuda", "eval", "train"})

# ``nn.Module`` methods that return the module itself: a cast at the end of a chain of them
# (``self.gpt.eval().half()``) casts the chain's receiver (``to`` only without a dtype).
MODULE_RETURNS_SELF = frozenset({"eval", "train", "requires_grad_", "cuda", "cpu", "float", "to"})
# Methods of a model that do not run it (no activation is computed): a call of any other
# (``forward``, ``generate``, ``encode``, ``sample``) runs the model where it is made.
MODULE_NOT_RUNNING = frozenset(
    {
        "to", "cuda", "cpu", "eval", "train", "parameters", "named_parameters", "modules",
        "named_modules", "children", "zero_grad", "requires_grad_", "state_dict",
        "load_state_dict", "float", "half", "bfloat16", "double", "type", "apply",
        "register_forward_hook", "register_forward_pre_hook", "register_buffer",
        "num_parameters", "save_pretrained", "push_to_hub", "buffers", "named_buffers",
        "get_submodule", "add_module", "register_module", "enable_gradient_checkpointing",
        "gradient_checkpointing_enable", "set_attn_processor", "tie_weights",
        "resize_token_embeddings", "get_input_embeddings", "get_output_embeddings",
        "share_memory", "compile",
    }
)  # fmt: skip
# Functions that take a model without running it, by the last part of the callee's name
# (``trainer.prepare``, ``self.load`` and ``ema.update`` alike): a model handed to one is not
# run there, inside an autocast region or outside every one. Python's builtins that read an
# object, copies, compilation and wrapping (each returns a model run later, elsewhere),
# saving and loading weights, counting or freezing parameters, an EMA's update, a
# container's insertion, an executor's submission (another thread: autocast's state is
# per thread), an experiment logger's watch.
NOT_RUNNING_TAKERS = frozenset(
    {
        "isinstance", "len", "print", "getattr", "hasattr", "setattr", "id", "type", "str",
        "repr", "vars", "dir", "iter", "list", "tuple", "dict", "set", "zip", "map", "enumerate",
        "sorted", "deepcopy", "copy", "compile", "prepare", "prepare_model", "unwrap_model",
        "wrap", "save", "load", "save_model", "load_model", "load_state_dict",
        "save_state_dict", "count_parameters", "freeze", "unfreeze", "update",
        "update_parameters", "step", "append", "extend", "add", "insert", "add_module",
        "register_module", "watch", "initialize", "get_peft_model", "submit", "apply",
        "to", "cuda", "cpu", "float", "half", "bfloat16", "eval", "train",
    }
)  # fmt: skip
# Copies of a model or tensor (``ema = copy.deepcopy(model)``): a new object in the dtype of
# what was copied, every parameter and buffer included, tied to none of its training links.
DTYPE_KEEPING_COPIES = frozenset({"copy.deepcopy", "copy.copy"})
# Library functions that set a module's named tensor in place, converted to ``dtype=`` when
# given (floating values only; without it each keeps the old tensor's dtype), by the
# position of ``dtype``: accelerate's checkpoint loading over every state-dict key is a
# cast of the whole model.
TENSOR_SETTERS = {
    "accelerate.utils.modeling.set_module_tensor_to_device": 4,
    "accelerate.utils.set_module_tensor_to_device": 4,
}
# Keyword inputs that a whole model feeds to its own layers (cross-attention projections,
# pooled-embedding Linears, a safety checker's CLIP tower), so they must be in its dtype too.
# Timesteps, sigmas and masks are not here: models cast or embed those themselves.
MODEL_CONDITIONING = (
    "encoder_hidden_states",
    "pooled_projections",
    "pooled_prompt_embeds",
    "controlnet_cond",
    "clip_input",
    "image_embeds",
    "text_embeds",
    "prompt_embeds",
)


# --- tensor methods ----------------------------------------------------------

# What each method does to dtypes is a row of :data:`mpcheck.knowledge.ops.METHODS`; these
# are the views of it the engine asks.
SAME_DTYPE_METHODS = methods_that(Does.SAME)
# Shape methods whose result has at least one dimension, even from a 0-dim tensor:
# ``alphas_cumprod[t].flatten().reshape(-1, 1, 1, 1)`` promotes the latents it multiplies
# (a 0-dim tensor would not), so the float32 table value now decides their dtype.
DIMENSIONING_METHODS = methods_that(Does.KEEPS_DIMS)
# ``x.reshape(-1, 1, 1, 1)`` / ``x.view(b, 1)``: dimensioned unless given an empty shape.
RESHAPE_METHODS = methods_that(Does.RESHAPES)
# Binary elementwise methods: the result promotes the receiver with the tensor argument.
# (Not ``lerp``: it requires ``end`` in the receiver's dtype, see DTYPE_STRICT_WRITES.)
PROMOTING_METHODS = methods_that(Does.PROMOTED)
MATMUL_METHODS = methods_that(Does.MATCHED)
# Elementwise functions/methods whose result is floating even for an integer input:
# ``torch.exp(torch.arange(n))`` is float32 (the default dtype).
FLOAT_VALUED = methods_that(Does.FLOATING)
# Methods that return (values, indices) when given a dim.
VALUES_INDICES_METHODS = methods_that(Does.VALUES_INDICES)
SPLIT_METHODS = methods_that(Does.SPLIT)
INT_METHODS = methods_that(Does.INTEGER)
BOOL_METHODS = methods_that(Does.BOOL)
NON_TENSOR_METHODS = methods_that(Does.NOT_TENSOR)
NON_TENSOR_ATTRS = frozenset(
    "shape ndim device is_cuda requires_grad names layout is_leaf grad_fn itemsize".split()
)
# The cast methods and the dtype they force.
CAST_METHODS = {name: row.casts_to for name, row in METHODS.items() if row.casts_to}
NEW_METHODS = methods_that(Does.NEW)

# --- torch.* functions -----------------------------------------------------------

# What each torch function does to dtypes is a row of :data:`mpcheck.knowledge.ops.FUNCTIONS`.
# Factories that make float32 (the default dtype) unless given dtype=.
FLOAT_FACTORIES = functions_that(Does.DEFAULT_DTYPE)
INT_FACTORIES = functions_that(Does.INTEGER_FACTORY)
# Every factory whose dtype a ``dtype=`` argument would set.
FACTORIES = functions_that(Does.DTYPE_KEYWORD)
# Factories whose first argument is the shape: ``torch.full((), v)`` is 0-dim.
SHAPE_FACTORIES = functions_that(Does.SHAPE_FIRST)
# Reductions that reduce every dim when called without ``dim``: ``x.mean()`` is 0-dim.
FULL_REDUCTIONS = methods_that(Does.REDUCES_ALL)
LIKE_FACTORIES = functions_that(Does.LIKE)
# Factories that take a ``dtype=`` keyword (``torch.where``, ``torch.Tensor(n)`` do not).
TAKES_DTYPE = (
    FLOAT_FACTORIES
    | INT_FACTORIES
    | LIKE_FACTORIES
    | frozenset(f"torch.{n}" for n in "full arange tensor as_tensor".split())
)
CONCAT = functions_that(Does.CONCAT)
INT_FUNCTIONS = functions_that(Does.INTEGER)
BOOL_FUNCTIONS = functions_that(Does.BOOL)
NON_TENSOR_FUNCTIONS = functions_that(Does.NOT_TENSOR)
SPLIT_FUNCTIONS = functions_that(Does.SPLIT)
# ``torch.var_mean(x)``, ``torch.std_mean(x)``: (a statistic, the mean), each in x's dtype.
STATISTIC_MEAN_FUNCTIONS = functions_that(Does.STATISTIC_MEAN)
# Functions of two floating tensors whose result has the first one's dtype (``grid_sample``
# refuses a mismatched ``grid``), or whose other tensors are indices or placeholders.
INPUT_DTYPE_FUNCTIONS = functions_that(Does.FIRST_INPUT)
# ``torch.broadcast_tensors(a, b)``: each tensor again, broadcast, in its own dtype.
EACH_OWN_FUNCTIONS = functions_that(Does.EACH_OWN)
# Functions whose result has dims even from a 0-dim tensor (``torch.broadcast_to(s, (4,))``).
DIMENSIONING_FUNCTIONS = functions_that(Does.KEEPS_DIMS)

# Functional and torch-level ops with operands that must match, and which operands those are.
OPS: dict[str, OpKind] = {
    F + "linear": OpKind.LINEAR,
    F + "bilinear": OpKind.LINEAR,
    F + "conv1d": OpKind.CONV,
    F + "conv2d": OpKind.CONV,
    F + "conv3d": OpKind.CONV,
    F + "conv_transpose1d": OpKind.CONV,
    F + "conv_transpose2d": OpKind.CONV,
    F + "conv_transpose3d": OpKind.CONV,
    F + "layer_norm": OpKind.NORM,
    F + "group_norm": OpKind.NORM,
    F + "batch_norm": OpKind.NORM,
    F + "instance_norm": OpKind.NORM,
    F + "rms_norm": OpKind.NORM,
    F + "embedding": OpKind.EMBEDDING,
    F + "scaled_dot_product_attention": OpKind.ATTENTION,
    "torch.matmul": OpKind.MATMUL,
    "torch.mm": OpKind.MATMUL,
    "torch.bmm": OpKind.MATMUL,
    "torch.baddbmm": OpKind.MATMUL,
    "torch.addmm": OpKind.MATMUL,
    "torch.addbmm": OpKind.MATMUL,
    "torch.mv": OpKind.MATMUL,
    "torch.dot": OpKind.MATMUL,
    "torch.tensordot": OpKind.MATMUL,
    "torch.einsum": OpKind.MATMUL,
    "einops.einsum": OpKind.MATMUL,  # torch.einsum underneath, the pattern last
    "torch.chain_matmul": OpKind.MATMUL,
    "torch.linalg.multi_dot": OpKind.MATMUL,
    "flash_attn.flash_attn_func": OpKind.ATTENTION,
    "flash_attn.flash_attn_varlen_func": OpKind.ATTENTION,
    "flash_attn.flash_attn_interface.flash_attn_func": OpKind.ATTENTION,
    "flash_attn.flash_attn_interface.flash_attn_varlen_func": OpKind.ATTENTION,
    "xformers.ops.memory_efficient_attention": OpKind.ATTENTION,
    "xformers.ops.fmha.memory_efficient_attention": OpKind.ATTENTION,
}
# The aten op autocast sees for each call, where the name differs from the last component.
ATEN_NAMES = {
    "flash_attn.flash_attn_func": "",
    "flash_attn.flash_attn_varlen_func": "",
    "xformers.ops.memory_efficient_attention": "",
}

# torch.nn layers: the op each runs, or None for layers without parameters (pass-through).
LAYERS: dict[str, tuple[OpKind | None, str]] = {
    "Linear": (OpKind.LINEAR, "linear"),
    "LazyLinear": (OpKind.LINEAR, "linear"),
    "Bilinear": (OpKind.LINEAR, "bilinear"),
    "Conv1d": (OpKind.CONV, "conv1d"),
    "Conv2d": (OpKind.CONV, "conv2d"),
    "Conv3d": (OpKind.CONV, "conv3d"),
    "ConvTranspose1d": (OpKind.CONV, "conv_transpose1d"),
    "ConvTranspose2d": (OpKind.CONV, "conv_transpose2d"),
    "ConvTranspose3d": (OpKind.CONV, "conv_transpose3d"),
    "LayerNorm": (OpKind.NORM, "layer_norm"),
    "GroupNorm": (OpKind.NORM, "group_norm"),
    "RMSNorm": (OpKind.NORM, "rms_norm"),
    "BatchNorm1d": (OpKind.NORM, "batch_norm"),
    "BatchNorm2d": (OpKind.NORM, "batch_norm"),
    "BatchNorm3d": (OpKind.NORM, "batch_norm"),
    "SyncBatchNorm": (OpKind.NORM, "batch_norm"),
    "Embedding": (OpKind.EMBEDDING, "embedding"),
    "MultiheadAttention": (OpKind.LINEAR, "linear"),
    "LSTM": (OpKind.RECURRENT, "lstm"),
    "GRU": (OpKind.RECURRENT, "gru"),
    "RNN": (OpKind.RECURRENT, "rnn"),
    "LSTMCell": (OpKind.RECURRENT, "lstm_cell"),
    "GRUCell": (OpKind.RECURRENT, "gru_cell"),
    "RNNCell": (OpKind.RECURRENT, "rnn_tanh_cell"),
    "PReLU": (OpKind.LINEAR, "prelu"),
}
# apex's fused norms (their CUDA kernels run in the input's dtype and cast the input and
# weights to the autocast dtype themselves: ``layer_norm`` is on CUDA autocast's list).
LAYERS["TimestepEmbedding"] = LAYERS["Linear"]
LAYERS["FusedLayerNorm"] = (OpKind.NORM, "layer_norm")
LAYERS["FusedRMSNorm"] = (OpKind.NORM, "layer_norm")
# Norms that refuse a half input with float32 weights, unlike torch's: apex's kernels read
# the weights as the input's dtype (``gamma->data_ptr<scalar_t_out>()``), which raises
# "expected scalar type Half but found Float". Its ``MixedFused*`` norms accept the mix and
# return the weights' dtype, like any layer (no LAYERS entry: the output follows them).
STRICT_NORMS = frozenset({"FusedLayerNorm", "FusedRMSNorm"})
# Layer classes outside ``torch.nn``, by qualified name: the name they go by in LAYERS.
EXTERNAL_LAYERS: dict[str, str] = {
    f"apex.normalization.{path}{name}": name
    for path in ("", "fused_layer_norm.")
    for name in ("FusedLayerNorm", "FusedRMSNorm", "MixedFusedLayerNorm", "MixedFusedRMSNorm")
}

# Loss modules: no weights of their own (the loss follows its inputs); the aten op each runs.
LOSS_LAYERS: dict[str, str] = {
    "BCELoss": "binary_cross_entropy",
    "BCEWithLogitsLoss": "binary_cross_entropy_with_logits",
    "CrossEntropyLoss": "cross_entropy_loss",
    "NLLLoss": "nll_loss",
    "MSELoss": "mse_loss",
    "L1Loss": "l1_loss",
    "SmoothL1Loss": "smooth_l1_loss",
    "HuberLoss": "huber_loss",
    "KLDivLoss": "kl_div",
    "PoissonNLLLoss": "poisson_nll_loss",
    "SoftMarginLoss": "soft_margin_loss",
    "MarginRankingLoss": "margin_ranking_loss",
    "HingeEmbeddingLoss": "hinge_embedding_loss",
    "CosineEmbeddingLoss": "cosine_embedding_loss",
    "TripletMarginLoss": "triplet_margin_loss",
    "MultiMarginLoss": "multi_margin_loss",
    "MultiLabelMarginLoss": "multilabel_margin_loss",
}
# Functional losses: 0-dim with their default ``reduction="mean"``.
LOSS_FUNCTIONS = frozenset(
    F + n
    for n in """cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss huber_loss kl_div
    binary_cross_entropy binary_cross_entropy_with_logits poisson_nll_loss gaussian_nll_loss
    soft_margin_loss margin_ranking_loss hinge_embedding_loss cosine_embedding_loss
    triplet_margin_loss multi_margin_loss multilabel_margin_loss multilabel_soft_margin_loss
    ctc_loss""".split()
)
PASS_THROUGH_LAYERS = frozenset(
    """Dropout Dropout1d Dropout2d Dropout3d AlphaDropout ReLU ReLU6 GELU SiLU Tanh Sigmoid
    Softmax LogSoftmax Identity Flatten Unflatten MaxPool1d MaxPool2d MaxPool3d AvgPool1d
    AvgPool2d AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d
    AdaptiveMaxPool1d AdaptiveMaxPool2d Upsample PixelShuffle PixelUnshuffle Mish Hardswish
    Hardsigmoid LeakyReLU ELU SELU CELU Softplus Softsign ZeroPad2d ConstantPad2d
    ReflectionPad2d ReplicationPad2d GLU Tanhshrink Hardtanh ParameterFreeNorm""".split()
)
CONTAINER_LAYERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})
# The parameters and buffers torch's own layers register (``nn.Linear.weight``, a batch norm's
# ``running_mean``, an RNN's ``weight_ih_l0``, ``weight_norm``'s ``weight_g``): reading one
# off a module gives a tensor, not a module, so handing it on (an optimizer's parameter
# group, ``list.append``, a dict key) casts no module (``tests/test_tensor_attributes.py``
# finds each registered by a torch layer).
TENSOR_ATTRIBUTES = frozenset(
    """weight bias running_mean running_var num_batches_tracked in_proj_weight in_proj_bias
    q_proj_weight k_proj_weight v_proj_weight bias_k bias_v weight_ih weight_hh bias_ih bias_hh
    weight_g weight_v weight_orig weight_u""".split()
)
# (an RNN's per-layer parameters: ``weight_ih_l1``, ``bias_hh_l0_reverse``, ``weight_hr_l0``)
RNN_PARAMETER = re.compile(r"(?:weight|bias)_(?:ih|hh|hr)_l\d+(?:_reverse)?")
# Attributes only a tensor has (its storage and its gradient): what holds one is a tensor.
TENSOR_ONLY_ATTRIBUTES = frozenset({"data", "grad"})
# Plain values a model exposes (``nn.Module.training``; diffusers' ``ModelMixin`` and
# transformers' ``PreTrainedModel`` properties ``dtype`` and ``device``): reading one hands on
# a dtype, a device or a flag, never the model nor a part of it (``x.to(model.dtype)``).
MODEL_VALUE_ATTRIBUTES = frozenset({"dtype", "device", "training"})


def tensor_attribute(name: str) -> bool:
    """Whether ``name`` read off a torch layer (or off anything, for a tensor's own ``data``
    and ``grad``) is a tensor."""
    return (
        name in TENSOR_ATTRIBUTES
        or name in TENSOR_ONLY_ATTRIBUTES
        or RNN_PARAMETER.fullmatch(name) is not None
    )


# Functions that reparametrise a module's weight and return that same module: a cast of the
# model casts its new parameters (``weight_g``, ``weight_v``, ``original0``) with the rest,
# so the layer keeps the model's dtype (``tests/test_module_wrappers.py`` checks it under torch).
MODULE_WRAPPERS = frozenset(
    {
        "torch.nn.utils.weight_norm",
        "torch.nn.utils.spectral_norm",
        "torch.nn.utils.parametrizations.weight_norm",
        "torch.nn.utils.parametrizations.spectral_norm",
        "torch.nn.utils.parametrizations.orthogonal",
    }
)


# Every ``torch.<name>`` that is a dtype object.
DTYPE_NAMES = frozenset(
    """float16 half bfloat16 float32 float float64 double bool uint8 int8 int16 short int32 int
    int64 long uint16 uint32 uint64 complex32 chalf complex64 cfloat complex128 cdouble
    float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz float8_e8m0fnu
    float4_e2m1fn_x2 qint8 quint8 qint32 quint4x2""".split()
)

MODULE_BASES = frozenset(
    {"torch.nn.Module", "torch.nn.modules.module.Module", "torch.nn.Sequential"}
)
# A base class whose name ends so is taken for a module's (a project's ``TransformerBlock``).
MODULE_BASE_SUFFIXES = (
    "Module",
    "Model",
    "ModelMixin",
    "Layer",
    "Block",
    "Attention",
    "Encoder",
    "Decoder",
    "Embedding",
    "Embeddings",
    "MLP",
)
# Argument names that hold integer or boolean tensors, not activations.
INT_PARAM_NAMES = frozenset(
    """input_ids ids token_ids position_ids positions labels label targets target indices
    index idx timestep timesteps t seq_len seqlen cu_seqlens cu_seqlens_q cu_seqlens_k
    max_seqlen lengths token_type_ids cache_position step steps class_labels pos ids""".split()
)
MASK_PARAM_HINTS = ("mask", "bias")
# Argument names that hold a model: ``def training_step(unet, latents)`` calls ``unet(...)``.
MODEL_PARAM_NAMES = frozenset(
    """model unet vae net network backbone encoder decoder transformer text_encoder
    text_encoder_2 controlnet generator discriminator denoiser prior""".split()
)
MODEL_PARAM_SUFFIXES = ("_model", "_unet", "_net", "_encoder", "_decoder", "_transformer")
# Annotations that allow a floating tensor (``lengths: torch.LongTensor`` does not).
FLOAT_TENSOR_TYPES = frozenset(
    "Tensor FloatTensor HalfTensor BFloat16Tensor DoubleTensor Any".split()
)

# The bases of a custom autograd Function: its ``apply`` runs its static ``forward``.
AUTOGRAD_FUNCTIONS = frozenset(
    {"torch.autograd.Function", "torch.autograd.function.InplaceFunction"}
)

# The model components of a diffusers-style pipeline (``self.vae`` in a ``...Pipeline``
# class): users load pipelines with ``torch_dtype=torch.float16``, so each may be half.
PIPELINE_MODELS = frozenset(
    """unet vae transformer transformer_2 text_encoder text_encoder_2 text_encoder_3
    controlnet safety_checker image_encoder prior decoder depth_estimator movq vqvae
    audio_vae vocoder unet_2 brushnet adapter""".split()
)

# Pipeline components that are transformers encoders: their vision embeddings cast
# ``pixel_values`` to their own dtype (CLIP, SigLIP, Qwen-VL), so a processor's float32
# pixel values may go in as they are.
CASTING_ENCODERS = frozenset(
    f"{holder}.{name}"
    for holder in ("self", "pipe", "pipeline", "components")
    for name in (
        "text_encoder",
        "text_encoder_2",
        "text_encoder_3",
        "image_encoder",
        "safety_checker",
    )
) | {"text_encoder", "text_encoder_2", "image_encoder", "safety_checker"}


def helper_method(name: str) -> bool:
    """``decoder.create_attention_mask(...)``, ``model.get_input_embeddings()``,
    ``transformer.patchify(latents)``: a method that builds, fetches or rearranges something,
    not a pass of the model over its inputs."""
    return any(word in name for word in _HELPER_WORDS) or name.startswith(
        ("get_", "create_", "prepare_", "build_", "make_", "set_", "compute_", "_")
    )


_HELPER_WORDS = ("mask", "patchify", "pack", "rearrange", "reshape")


# Components no other kind of model has: ``model.vae`` / ``model.unet`` of a trainer's model
# holder (OneTrainer's ``StableDiffusionModel``) are a diffusion pipeline's models too.
DIFFUSION_ONLY_MODELS = frozenset("unet vae vqvae movq unet_2 brushnet".split())


def holds_models(holder: str, attr: str = "") -> bool:
    """``pipe``, ``self.pipeline``, ``components``, ``sd_pipe``: a name whose ``.unet``,
    ``.vae`` & co. are a diffusion pipeline's models (not ``model``: a GPT has a
    ``.transformer`` too; but only a diffusion model holder has a ``.vae``)."""
    leaf = holder.rsplit(".", 1)[-1].lower()
    if attr in DIFFUSION_ONLY_MODELS:
        return True
    return leaf in ("pipe", "pipeline", "components") or leaf.endswith(("_pipe", "pipeline"))


# A scheduler's or sampler's class (``DDIMScheduler``, ``KarrasSampler``, bases like
# ``SchedulerMixin``), and the parameters of its methods that hold the model's activations.
# Activation checkpointing runs ``fn(*args)``: ``checkpoint(block, h, temb, use_reentrant=False)``
# and transformers'/diffusers' ``self._gradient_checkpointing_func(block, h, ...)``.
CHECKPOINT_FUNCTIONS = frozenset(
    {"torch.utils.checkpoint.checkpoint", "deepspeed.checkpointing.checkpoint"}
)
CHECKPOINT_METHODS = frozenset({"_gradient_checkpointing_func", "gradient_checkpointing_func"})
CHECKPOINT_KEYWORDS = frozenset(
    {"use_reentrant", "preserve_rng_state", "context_fn", "determinism_check", "debug"}
)
SAMPLER_SUFFIXES = ("Scheduler", "SchedulerMixin", "Sampler")
# Bases whose ``from_pretrained(torch_dtype=...)`` loads the checkpoint's tensors in that dtype
# but does not cast the module: a non-persistent buffer (not in the checkpoint) keeps the
# dtype it was built with. (transformers builds under ``torch_dtype`` as default dtype, so
# only an explicitly float32 buffer is left behind there; diffusers leaves every one.)
PRETRAINED_SUFFIXES = ("ModelMixin", "PreTrainedModel", "PretrainedModel")
# A sampler's record of the model's past outputs (``self.model_outputs[-1]`` of a multistep
# solver): tensors in the model's dtype, whatever ``__init__`` filled the list with.
SAMPLER_HISTORY = frozenset({"model_outputs"})
# bitsandbytes' quantized layers: a subclass (an old peft LoRA layer) replaces a layer of an
# already loaded model, so what its ``__init__`` builds without ``dtype=`` is float32 while
# the activations it gets are the half model's (8-bit matmuls take float16 activations).
QUANTIZED_LAYERS = frozenset({"Linear8bitLt", "Linear4bit", "LinearFP4", "LinearNF4"})
SAMPLE_PARAMS = frozenset(
    "sample samples model_output model_outputs latents x x_t denoised noise_pred".split()
)

# A diffusers scheduler's noise tables: 1-D float32 tensors, whatever the model runs in.
SCHEDULER_TABLES = frozenset(
    """alphas alphas_cumprod betas sigmas sqrt_alphas_cumprod sqrt_one_minus_alphas_cumprod
    alphas_cumprod_prev""".split()
)


# Linear algebra has no half kernels (torch-truth: ``linalg.inv: Low precision dtypes not
# supported``), so its float32 result is where a cast back belongs.
def is_linalg(qual: str) -> bool:
    return qual.startswith("torch.linalg.") or qual in ("torch.inverse", "torch.cholesky_solve")


def is_scheduler(holder: str | None) -> bool:
    """``noise_scheduler``, ``self.pipeline.scheduler``: a diffusers-style noise scheduler."""
    return "scheduler" in (holder or "").rsplit(".", 1)[-1].lower()


# Scheduler methods that return their sample in its own dtype (diffusers casts its float32
# tables to the sample's dtype), by the position and name of that sample argument.
SCHEDULER_SAMPLES = {
    "scale_model_input": (0, "sample"),
    "add_noise": (0, "original_samples"),
    "step": (2, "sample"),
}

# Library modules and functions that return float32 whatever the model's dtype, with what
# to call them. Matched on the dotted tail, so diffusers' own relative imports count too.
FP32_OUTPUT_MODULES = {"embeddings.Timesteps": "a diffusers `Timesteps`"}
# Library modules that open with a torch layer: to its input, diffusers' ``TimestepEmbedding``
# is a ``Linear`` (its ``linear_1``). They have no ``.weight`` of their own.
LIBRARY_LAYERS = {"embeddings.TimestepEmbedding": "TimestepEmbedding"}
FP32_OUTPUT_FUNCTIONS = {
    "embeddings.get_timestep_embedding": "diffusers' `get_timestep_embedding`",
}


def library_fp32(name: str, table: dict[str, str]) -> str | None:
    """What to call ``name`` if it is in ``table`` (``diffusers.models.embeddings.Timesteps``)."""
    for tail, text in table.items():
        if name == tail or name.endswith("." + tail):
            return text
    return None


# ``t += v`` on a tensor is ``t.add_(v)``: it writes into ``t`` and keeps its dtype.
INPLACE_OPERATORS = {
    "AddAssign": "add_",
    "SubtractAssign": "sub_",
    "MultiplyAssign": "mul_",
    "DivideAssign": "div_",
}

# Arithmetic operators on tensors and the torch function each one is (libcst operator class).
ARITHMETIC_OPERATORS = {
    "Add": "add",
    "Subtract": "sub",
    "Multiply": "mul",
    "Divide": "div",
    "FloorDivide": "floor_divide",
    "Modulo": "remainder",
    "Power": "pow",
}

# Writes that require their source tensors to have ``self``'s dtype: they never cast them
# (unlike ``copy_``, ``add_`` or slice assignment), and autocast leaves in-place ops alone.
# Method name (``x.name(...)`` spelling) -> (positional index, keyword) of each such source.
# Measured on torch 2.13: "Index put requires the source and destination dtypes match".
_SOURCE = {
    "index_put": ((1, "values"),),
    "index_add": ((2, "source"),),
    "index_copy": ((2, "source"),),
    "index_reduce": ((2, "source"),),
    "scatter": ((2, "src"),),
    "scatter_add": ((2, "src"),),
    "scatter_reduce": ((2, "src"),),
    "masked_scatter": ((1, "source"),),
    "put": ((1, "source"),),
    "lerp": ((0, "end"), (1, "weight")),
}
DTYPE_STRICT_WRITES: dict[str, tuple[tuple[int, str], ...]] = {
    **_SOURCE,
    **{f"{name}_": slots for name, slots in _SOURCE.items()},
}

# Ops that convert a Python scalar to ``self``'s dtype with an overflow check: a value
# beyond the dtype's range raises "value cannot be converted to type c10::Half without
# overflow". Method name -> (positional index, keyword) of each such scalar.
_CHECKED = {
    "masked_fill": ((1, "value"),),
    "fill": ((0, "value"),),
    "index_fill": ((2, "value"),),
    "scatter": ((2, "value"),),
    "clamp": ((0, "min"), (1, "max")),
    "clip": ((0, "min"), (1, "max")),
    "clamp_min": ((0, "min"),),
    "clamp_max": ((0, "max"),),
    "new_full": ((1, "fill_value"),),
}
CHECKED_SCALAR_WRITES: dict[str, tuple[tuple[int, str], ...]] = {
    **_CHECKED,
    **{f"{name}_": slots for name, slots in _CHECKED.items() if name != "new_full"},
}
# Factories whose fill value is checked against the dtype they create: qualname -> slot.
CHECKED_FILL_FACTORIES = {
    "torch.full": (1, "fill_value"),
    "torch.full_like": (1, "fill_value"),
    F + "pad": (3, "value"),
}
# Elementwise ops that combine a Python scalar with ``self`` in ``self``'s dtype, unchecked:
# an out-of-range scalar silently yields inf. Method name -> (positional index, keyword).
_UNCHECKED = {"add": ((0, "other"),), "sub": ((0, "other"),), "mul": ((0, "other"),)}
UNCHECKED_SCALAR_OPS: dict[str, tuple[tuple[int, str], ...]] = {
    **_UNCHECKED,
    **{f"{name}_": slots for name, slots in _UNCHECKED.items()},
    "where": ((1, "other"),),
}


def einsum_contracts(spec: str) -> bool:
    """Whether an einsum sums over an index (``"bij,bjk->bik"``): then it runs as a bmm, which
    refuses mixed dtypes. Without one (``"d,bthw->dbthw"``) it is a broadcast product, which
    promotes like ``*``. Implicit-output and malformed equations count as contracting."""
    text = spec.replace(" ", "").replace("...", "")
    if "->" not in text:
        return True
    inputs, out = text.split("->", 1)
    return any(ch not in out for ch in inputs.replace(",", "") if ch.isalpha())


def einops_equation(pattern: str) -> str | None:
    """torch's spelling of an ``einops.einsum`` pattern, whose axes are words between spaces
    (``"b head i d, b head j d -> b head i j"`` is ``"abcd,abed->abce"``): einops runs
    ``torch.einsum`` with it. None when it has more axes than letters."""
    letters: dict[str, str] = {}
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

    def spelled(side: str) -> str | None:
        out = []
        for axis in side.split():
            if axis == "...":
                out.append("...")
                continue
            if axis not in letters:
                if len(letters) == len(alphabet):
                    return None
                letters[axis] = alphabet[len(letters)]
            out.append(letters[axis])
        return "".join(out)

    inputs, arrow, output = pattern.partition("->")
    sides = [spelled(part) for part in inputs.split(",")]
    result = spelled(output) if arrow else ""
    if result is None or any(side is None for side in sides):
        return None
    return ",".join(side for side in sides if side is not None) + arrow + result


def op_name(qualname: str) -> str:
    """The aten op name autocast dispatches on for a qualified function name."""
    if qualname in ATEN_NAMES:
        return ATEN_NAMES[qualname]
    return qualname.rsplit(".", 1)[-1]


def dropout_named(name: str | None) -> bool:
    """``dropout``, ``self.attn_drop``, ``self.lora_dropout``: a module named as a dropout."""
    leaf = (name or "").rsplit(".", 1)[-1].lower()
    return leaf.endswith(("dropout", "_drop")) or leaf == "drop"


# Functions autocast knows by another name: ``F.interpolate`` dispatches to one of the
# ``upsample_*`` ops by mode and rank, and each list holds all of them or none (CUDA: fp32).
AUTOCAST_NAMES = {
    "torch.nn.functional.interpolate": "upsample_nearest2d",
    "torch.nn.functional.upsample": "upsample_nearest2d",
}

# The dtypes ``torch.autocast(device_type, dtype=...)`` runs in, by device
# (``torch/amp/autocast_mode.py``): every device but CUDA takes float16 and bfloat16 only and
# turns autocast off in the region for any other ("In CPU autocast, but the target dtype is
# not supported. Disabling autocast.", measured on torch 2.13), so a region opened with
# ``dtype=torch.float32`` recasts nothing there. CUDA checks none: its region computes its
# lower-precision list in the dtype given, float32 too.
AUTOCAST_DTYPES: dict[str, frozenset[str]] = {
    "cuda": frozenset({"float16", "bfloat16", "float32", "float64"}),
    "": frozenset({"float16", "bfloat16"}),  # cpu, xpu, mps, hpu, ...: any other device
}


def autocast_takes(device: str, dtype: str) -> bool:
    """Whether autocast on ``device`` (``"cpu"``, ``"cuda"``) runs in ``dtype`` at all."""
    return dtype in AUTOCAST_DTYPES.get(device, AUTOCAST_DTYPES[""])


# Functions that move a tensor's elements around and keep its dtype (einops', and torch's
# ``broadcast_to``).
SAME_DTYPE_FUNCTIONS = functions_that(Does.SAME)

# Packages whose functions are compiled kernels that take their tensors as they come: autocast
# does not recast them (see mpcheck.engine.ambient).
KERNEL_PACKAGES = frozenset({"natten"})


def is_kernel(qualname: str | None) -> bool:
    """A compiled kernel: ``natten.functional.natten2dav``, ``detrex._C.ms_deform_attn_forward``
    (a package's ``_C`` extension module)."""
    if not qualname or qualname.startswith("torch."):
        return False
    parts = qualname.split(".")
    return parts[0] in KERNEL_PACKAGES or "_C" in parts[:-1]


# The methods ``torch.nn.Module`` defines (torch 2.13, dunders aside): torch calls a
# subclass's override of them by name (``extra_repr`` when printed, ``_load_from_state_dict``
# when loaded), so such a method runs though the project never writes its name.
MODULE_METHODS = frozenset(
    """
    T_destination _apply _call_impl _compiled_call_impl _get_backward_hooks
    _get_backward_pre_hooks _get_name _load_from_state_dict _maybe_warn_non_full_backward_hook
    _named_members _register_load_state_dict_pre_hook _register_state_dict_hook
    _replicate_for_data_parallel _save_to_state_dict _slow_forward _version _wrapped_call_impl
    add_module apply bfloat16 buffers call_super_init children compile cpu cuda double
    dump_patches eval extra_repr float forward get_buffer get_extra_state get_parameter
    get_submodule half ipu load_state_dict modules mtia named_buffers named_children
    named_modules named_parameters parameters register_backward_hook register_buffer
    register_forward_hook register_forward_pre_hook register_full_backward_hook
    register_full_backward_pre_hook register_load_state_dict_post_hook
    register_load_state_dict_pre_hook register_module register_parameter
    register_state_dict_post_hook register_state_dict_pre_hook requires_grad_ set_extra_state
    set_submodule share_memory state_dict to to_empty train type xpu zero_grad
    """.split()
)
