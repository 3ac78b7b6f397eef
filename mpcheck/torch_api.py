"""What the engine knows about PyTorch's API: which calls keep, set or mix dtypes.

Names here are the qualified names produced by :mod:`mpcheck.names`
(``torch.nn.functional.linear``), or bare tensor-method names (``view``).
"""

from __future__ import annotations

import enum

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


# --- tensor methods ----------------------------------------------------------

# Methods whose result has the receiver's dtype (shape ops, elementwise unary, reductions).
SAME_DTYPE_METHODS = frozenset(
    """view reshape view_as reshape_as transpose transpose_ permute contiguous unsqueeze
    unsqueeze_ squeeze squeeze_ flatten unflatten expand expand_as repeat repeat_interleave
    clone detach detach_ narrow select index_select gather roll flip fliplr flipud t t_
    masked_fill masked_fill_ fill_ zero_ clamp clamp_ clip clip_ abs abs_ neg neg_ exp exp_
    log log_ log1p expm1 sqrt sqrt_ rsqrt rsqrt_ sigmoid sigmoid_ tanh tanh_ relu relu_ sin
    cos sum mean nansum nanmean amax amin norm square cumsum cumprod tril triu tril_ triu_
    cpu cuda to_dense pin_memory requires_grad_ retain_grad softmax log_softmax sign floor
    ceil round trunc frac reciprocal erf std var prod logsumexp diagonal diag movedim
    moveaxis swapaxes swapdims as_strided unfold flatten_ copy_ scatter scatter_ div_ mul_
    add_ sub_ pow_ logit nan_to_num nan_to_num_ type_as_ data_ptr_ half_ float_ normal_
    uniform_ bernoulli_ exponential_ clamp_min clamp_max masked_select take broadcast_to
    sum_to_size tile index_fill index_fill_ mean_ share_memory_ align_to rename refine_names
    resize_ resize_as_ set_ storage_offset_ coalesce to_sparse gelu silu""".split()
)
# Binary elementwise methods: the result promotes the receiver with the tensor argument.
PROMOTING_METHODS = frozenset(
    """add sub mul div true_divide floor_divide pow maximum minimum fmod remainder atan2
    hypot logaddexp addcmul addcdiv where lerp rsub xlogy copysign""".split()
)
MATMUL_METHODS = frozenset("matmul mm bmm baddbmm addmm addbmm mv dot inner".split())
# Methods that return (values, indices) when given a dim.
VALUES_INDICES_METHODS = frozenset("max min topk sort median mode kthvalue cummax cummin".split())
SPLIT_METHODS = frozenset("chunk split unbind tensor_split split_with_sizes hsplit vsplit".split())
INT_METHODS = frozenset("argmax argmin argsort nonzero long int short byte char count_nonzero".split())
BOOL_METHODS = frozenset(
    """eq ne lt le gt ge isnan isinf isfinite isneginf isposinf logical_and logical_or
    logical_not logical_xor bool any all isclose signbit equal""".split()
)
NON_TENSOR_METHODS = frozenset(
    """size dim numel item tolist stride is_contiguous data_ptr element_size get_device
    is_floating_point is_complex nelement ndimension storage_offset __len__ numpy
    register_hook backward untyped_storage""".split()
)
NON_TENSOR_ATTRS = frozenset(
    "shape ndim device is_cuda requires_grad names layout is_leaf grad_fn itemsize".split()
)
# The cast methods and the dtype they force.
CAST_METHODS = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "bfloat16": "bfloat16",
    "long": "int64",
    "int": "int32",
    "short": "int16",
    "byte": "uint8",
    "char": "int8",
    "bool": "bool",
}
NEW_METHODS = frozenset("new_zeros new_ones new_full new_empty new_tensor".split())

# --- torch.* functions -----------------------------------------------------------

# Factories that make float32 (the default dtype) unless given dtype=.
FLOAT_FACTORIES = frozenset(
    f"torch.{n}" for n in "ones zeros empty rand randn linspace logspace eye empty_strided".split()
)
INT_FACTORIES = frozenset(f"torch.{n}" for n in "randint randperm".split())
LIKE_FACTORIES = frozenset(
    f"torch.{n}_like" for n in "ones zeros empty rand randn full randint randn_like".split()
)
CONCAT = frozenset(
    f"torch.{n}" for n in "cat concat concatenate stack hstack vstack dstack column_stack".split()
)
INT_FUNCTIONS = frozenset(
    f"torch.{n}" for n in "argmax argmin argsort nonzero bucketize searchsorted".split()
)
BOOL_FUNCTIONS = frozenset(
    f"torch.{n}"
    for n in """eq ne lt le gt ge isnan isinf isfinite logical_and logical_or logical_not
    logical_xor isin isclose""".split()
)
NON_TENSOR_FUNCTIONS = frozenset(
    f"torch.{n}"
    for n in """is_tensor numel finfo iinfo device Size get_default_dtype is_floating_point
    is_autocast_enabled get_autocast_gpu_dtype get_autocast_dtype manual_seed no_grad
    inference_mode enable_grad set_grad_enabled compile jit.script""".split()
)
SPLIT_FUNCTIONS = frozenset(f"torch.{n}" for n in "chunk split unbind tensor_split".split())

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
PASS_THROUGH_LAYERS = frozenset(
    """Dropout Dropout1d Dropout2d Dropout3d AlphaDropout ReLU ReLU6 GELU SiLU Tanh Sigmoid
    Softmax LogSoftmax Identity Flatten Unflatten MaxPool1d MaxPool2d MaxPool3d AvgPool1d
    AvgPool2d AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d
    AdaptiveMaxPool1d AdaptiveMaxPool2d Upsample PixelShuffle PixelUnshuffle Mish Hardswish
    Hardsigmoid LeakyReLU ELU SELU CELU Softplus Softsign ZeroPad2d ConstantPad2d
    ReflectionPad2d ReplicationPad2d GLU Tanhshrink Hardtanh ParameterFreeNorm""".split()
)
CONTAINER_LAYERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})

MODULE_BASES = frozenset(
    {"torch.nn.Module", "torch.nn.modules.module.Module", "torch.nn.Sequential"}
)
# Argument names that hold integer or boolean tensors, not activations.
INT_PARAM_NAMES = frozenset(
    """input_ids ids token_ids position_ids positions labels label targets target indices
    index idx timestep timesteps t seq_len seqlen cu_seqlens cu_seqlens_q cu_seqlens_k
    max_seqlen lengths token_type_ids cache_position step steps class_labels""".split()
)
MASK_PARAM_HINTS = ("mask", "bias")


def op_name(qualname: str) -> str:
    """The aten op name autocast dispatches on for a qualified function name."""
    if qualname in ATEN_NAMES:
        return ATEN_NAMES[qualname]
    return qualname.rsplit(".", 1)[-1]
