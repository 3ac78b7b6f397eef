"""What each torch function and tensor method does to dtypes: one line per callable.

The engine (:mod:`mpcheck.engine.tensors`) reads these tables through the sets
:mod:`mpcheck.knowledge.torch_api` derives from them. A row names a callable and the behaviours
(:class:`Does`) that hold for it; ``tests/test_ops_table.py`` calls every row under torch on
float16 and bfloat16 inputs and checks its claim. To teach the engine one more callable, add
its line (CONTRIBUTING, "Teaching the engine one more torch function").

What autocast does to an op is not here: its lists come from torch itself
(``mpcheck/data/autocast_ops.json``, ``tools/gen_autocast_ops.py``). What a table cannot say
stays code in :mod:`mpcheck.engine.tensors`: ``torch.full``'s dtype from its fill value,
``torch.arange``'s from its bounds, ``torch.where``'s Python-number branches, an ``einsum``
that contracts, a norm's or embedding's output following its weight.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Does(enum.Enum):
    """One thing a call does to the dtype (or the dims) of what it returns."""

    SAME = "has its input's dtype (a tensor method: the receiver's)"
    PROMOTED = "promotes its input with its tensor arguments"
    MATCHED = "needs its tensor operands in one dtype and returns it (a matmul)"
    FLOATING = "is floating even from an integer input (the default dtype then)"
    INTEGER = "returns an integer tensor"
    BOOL = "returns a bool tensor"
    NOT_TENSOR = "returns no tensor (a size, a Python value, a context)"
    VALUES_INDICES = "returns (values in the input's dtype, int64 indices) given a dim"
    STATISTIC_MEAN = "returns (a statistic, the mean), both in the input's dtype"
    SPLIT = "returns pieces in the input's dtype"
    NEW = "has the receiver's dtype unless ``dtype=`` says (``x.new_zeros``)"
    DTYPE_KEYWORD = "makes a tensor whose dtype ``dtype=`` decides"
    DEFAULT_DTYPE = "makes the default dtype (float32) without ``dtype=``"
    INTEGER_FACTORY = "makes int64 without ``dtype=``"
    LIKE = "makes the dtype of the tensor it is like, unless ``dtype=`` says"
    CONCAT = "promotes across the tensors of its sequence"
    FIRST_INPUT = "has its first input's dtype, whatever the others (no promotion)"
    EACH_OWN = "returns each of its tensors (broadcast), each in its own dtype (no promotion)"
    KEEPS_DIMS = "has at least one dim, even from a 0-dim tensor (so it promotes)"
    RESHAPES = "has at least one dim unless given an empty shape"
    REDUCES_ALL = "is 0-dim when called without ``dim``"
    SHAPE_FIRST = "takes the shape first (``torch.ones(())`` is 0-dim)"


@dataclass(frozen=True)
class Op:
    """A row's behaviours, and the dtype a cast method forces."""

    does: frozenset[Does]
    casts_to: str | None = None


def op(*does: Does, casts_to: str | None = None) -> Op:
    """A row of a table: ``op(SAME, KEEPS_DIMS)``."""
    return Op(frozenset(does), casts_to)


SAME, PROMOTED, MATCHED, FLOATING = Does.SAME, Does.PROMOTED, Does.MATCHED, Does.FLOATING
INTEGER, BOOL, NOT_TENSOR = Does.INTEGER, Does.BOOL, Does.NOT_TENSOR
VALUES_INDICES, SPLIT, NEW = Does.VALUES_INDICES, Does.SPLIT, Does.NEW
STATISTIC_MEAN = Does.STATISTIC_MEAN
DTYPE_KEYWORD, DEFAULT_DTYPE, INTEGER_FACTORY = (
    Does.DTYPE_KEYWORD,
    Does.DEFAULT_DTYPE,
    Does.INTEGER_FACTORY,
)
LIKE, CONCAT, FIRST_INPUT, EACH_OWN = Does.LIKE, Does.CONCAT, Does.FIRST_INPUT, Does.EACH_OWN
KEEPS_DIMS, RESHAPES, REDUCES_ALL, SHAPE_FIRST = (
    Does.KEEPS_DIMS,
    Does.RESHAPES,
    Does.REDUCES_ALL,
    Does.SHAPE_FIRST,
)

# Tensor methods, by the name they are called as (``x.view(...)``). FLOATING, VALUES_INDICES
# and REDUCES_ALL hold for ``torch.<name>(x, ...)`` too.
METHODS: dict[str, Op] = {
    "view": op(SAME, RESHAPES),
    "reshape": op(SAME, RESHAPES),
    "view_as": op(SAME, KEEPS_DIMS),
    "reshape_as": op(SAME, KEEPS_DIMS),
    "transpose": op(SAME),
    "transpose_": op(SAME),
    "permute": op(SAME),
    "contiguous": op(SAME),
    "unsqueeze": op(SAME, KEEPS_DIMS),
    "unsqueeze_": op(SAME),
    "squeeze": op(SAME),
    "squeeze_": op(SAME),
    "flatten": op(SAME, KEEPS_DIMS),
    "unflatten": op(SAME),
    "expand": op(SAME, KEEPS_DIMS),
    "expand_as": op(SAME, KEEPS_DIMS),
    "repeat": op(SAME, KEEPS_DIMS),
    "repeat_interleave": op(SAME),
    "clone": op(SAME),
    "detach": op(SAME),
    "detach_": op(SAME),
    "narrow": op(SAME),
    "select": op(SAME),
    "index_select": op(SAME),
    "gather": op(SAME),
    "roll": op(SAME),
    "flip": op(SAME),
    "fliplr": op(SAME),
    "flipud": op(SAME),
    "t": op(SAME),
    "t_": op(SAME),
    "masked_fill": op(SAME),
    "masked_fill_": op(SAME),
    "fill_": op(SAME),
    "zero_": op(SAME),
    "clamp": op(SAME),
    "clamp_": op(SAME),
    "clip": op(SAME),
    "clip_": op(SAME),
    "abs": op(SAME),
    "abs_": op(SAME),
    "neg": op(SAME),
    "neg_": op(SAME),
    "exp": op(SAME, FLOATING),
    "exp_": op(SAME),
    "log": op(SAME, FLOATING),
    "log_": op(SAME),
    "log1p": op(SAME, FLOATING),
    "expm1": op(SAME, FLOATING),
    "sqrt": op(SAME, FLOATING),
    "sqrt_": op(SAME),
    "rsqrt": op(SAME, FLOATING),
    "rsqrt_": op(SAME),
    "sigmoid": op(SAME, FLOATING),
    "sigmoid_": op(SAME),
    "tanh": op(SAME, FLOATING),
    "tanh_": op(SAME),
    "relu": op(SAME),
    "relu_": op(SAME),
    "sin": op(SAME, FLOATING),
    "cos": op(SAME, FLOATING),
    "sum": op(SAME, REDUCES_ALL),
    "mean": op(SAME, REDUCES_ALL),
    "nansum": op(SAME, REDUCES_ALL),
    "nanmean": op(SAME, REDUCES_ALL),
    "amax": op(SAME, REDUCES_ALL),
    "amin": op(SAME, REDUCES_ALL),
    "norm": op(SAME, REDUCES_ALL),
    "square": op(SAME),
    "cumsum": op(SAME),
    "cumprod": op(SAME),
    "tril": op(SAME),
    "triu": op(SAME),
    "tril_": op(SAME),
    "triu_": op(SAME),
    "cpu": op(SAME),
    "cuda": op(SAME),
    "to_dense": op(SAME),
    "pin_memory": op(SAME),
    "requires_grad_": op(SAME),
    "retain_grad": op(SAME),
    "softmax": op(SAME),
    "log_softmax": op(SAME),
    "sign": op(SAME),
    "floor": op(SAME),
    "ceil": op(SAME),
    "round": op(SAME),
    "trunc": op(SAME),
    "frac": op(SAME),
    "reciprocal": op(SAME, FLOATING),
    "erf": op(SAME, FLOATING),
    "std": op(SAME, REDUCES_ALL),
    "var": op(SAME, REDUCES_ALL),
    "prod": op(SAME, REDUCES_ALL),
    "logsumexp": op(SAME),
    "diagonal": op(SAME),
    "diag": op(SAME),
    "movedim": op(SAME),
    "moveaxis": op(SAME),
    "swapaxes": op(SAME),
    "swapdims": op(SAME),
    "as_strided": op(SAME),
    "unfold": op(SAME),
    "flatten_": op(SAME),
    "copy_": op(SAME),
    "scatter": op(SAME),
    "scatter_": op(SAME),
    "div_": op(SAME),
    "mul_": op(SAME),
    "add_": op(SAME),
    "sub_": op(SAME),
    "pow_": op(SAME),
    "logit": op(SAME),
    "nan_to_num": op(SAME),
    "nan_to_num_": op(SAME),
    "type_as_": op(SAME),
    "data_ptr_": op(SAME),
    "half_": op(SAME),
    "float_": op(SAME),
    "normal_": op(SAME),
    "uniform_": op(SAME),
    "bernoulli_": op(SAME),
    "exponential_": op(SAME),
    "clamp_min": op(SAME),
    "clamp_max": op(SAME),
    "masked_select": op(SAME),
    "take": op(SAME),
    "broadcast_to": op(SAME, KEEPS_DIMS),
    "sum_to_size": op(SAME),
    "tile": op(SAME, KEEPS_DIMS),
    "index_fill": op(SAME),
    "index_fill_": op(SAME),
    "mean_": op(SAME),
    "share_memory_": op(SAME),
    "align_to": op(SAME),
    "rename": op(SAME),
    "refine_names": op(SAME),
    "resize_": op(SAME),
    "resize_as_": op(SAME),
    "set_": op(SAME),
    "storage_offset_": op(SAME),
    "coalesce": op(SAME),
    "to_sparse": op(SAME),
    "gelu": op(SAME),
    "silu": op(SAME),
    "exp2": op(FLOATING),
    "log2": op(FLOATING),
    "log10": op(FLOATING),
    "tan": op(FLOATING),
    "sinh": op(FLOATING),
    "cosh": op(FLOATING),
    "asin": op(FLOATING),
    "acos": op(FLOATING),
    "atan": op(FLOATING),
    "erfc": op(FLOATING),
    "add": op(PROMOTED),
    "sub": op(PROMOTED),
    "mul": op(PROMOTED),
    "div": op(PROMOTED),
    "true_divide": op(PROMOTED),
    "floor_divide": op(PROMOTED),
    "pow": op(PROMOTED),
    "maximum": op(PROMOTED),
    "minimum": op(PROMOTED),
    "fmod": op(PROMOTED),
    "remainder": op(PROMOTED),
    "atan2": op(PROMOTED),
    "hypot": op(PROMOTED),
    "logaddexp": op(PROMOTED),
    "addcmul": op(PROMOTED),
    "addcdiv": op(PROMOTED),
    "where": op(PROMOTED),
    "rsub": op(PROMOTED),
    "xlogy": op(PROMOTED),
    "copysign": op(PROMOTED),
    "matmul": op(MATCHED),
    "mm": op(MATCHED),
    "bmm": op(MATCHED),
    "baddbmm": op(MATCHED),
    "addmm": op(MATCHED),
    "addbmm": op(MATCHED),
    "mv": op(MATCHED),
    "dot": op(MATCHED),
    "inner": op(MATCHED),
    "max": op(VALUES_INDICES, REDUCES_ALL),
    "min": op(VALUES_INDICES, REDUCES_ALL),
    "topk": op(VALUES_INDICES),
    "sort": op(VALUES_INDICES),
    "median": op(VALUES_INDICES, REDUCES_ALL),
    "mode": op(VALUES_INDICES),
    "kthvalue": op(VALUES_INDICES),
    "cummax": op(VALUES_INDICES),
    "cummin": op(VALUES_INDICES),
    "chunk": op(SPLIT),
    "split": op(SPLIT),
    "unbind": op(SPLIT),
    "tensor_split": op(SPLIT),
    "split_with_sizes": op(SPLIT),
    "hsplit": op(SPLIT),
    "vsplit": op(SPLIT),
    "argmax": op(INTEGER, REDUCES_ALL),
    "argmin": op(INTEGER, REDUCES_ALL),
    "argsort": op(INTEGER),
    "nonzero": op(INTEGER),
    "multinomial": op(INTEGER),
    "float": op(casts_to="float32"),
    "double": op(casts_to="float64"),
    "half": op(casts_to="float16"),
    "bfloat16": op(casts_to="bfloat16"),
    "long": op(INTEGER, casts_to="int64"),
    "int": op(INTEGER, casts_to="int32"),
    "short": op(INTEGER, casts_to="int16"),
    "byte": op(INTEGER, casts_to="uint8"),
    "char": op(INTEGER, casts_to="int8"),
    "count_nonzero": op(INTEGER),
    "eq": op(BOOL),
    "ne": op(BOOL),
    "lt": op(BOOL),
    "le": op(BOOL),
    "gt": op(BOOL),
    "ge": op(BOOL),
    "isnan": op(BOOL),
    "isinf": op(BOOL),
    "isfinite": op(BOOL),
    "isneginf": op(BOOL),
    "isposinf": op(BOOL),
    "logical_and": op(BOOL),
    "logical_or": op(BOOL),
    "logical_not": op(BOOL),
    "logical_xor": op(BOOL),
    "bool": op(BOOL, casts_to="bool"),
    "any": op(BOOL),
    "all": op(BOOL),
    "isclose": op(BOOL),
    "signbit": op(BOOL),
    "equal": op(BOOL),
    "size": op(NOT_TENSOR),
    "dim": op(NOT_TENSOR),
    "numel": op(NOT_TENSOR),
    "item": op(NOT_TENSOR),
    "tolist": op(NOT_TENSOR),
    "stride": op(NOT_TENSOR),
    "is_contiguous": op(NOT_TENSOR),
    "data_ptr": op(NOT_TENSOR),
    "element_size": op(NOT_TENSOR),
    "get_device": op(NOT_TENSOR),
    "is_floating_point": op(NOT_TENSOR),
    "is_complex": op(NOT_TENSOR),
    "nelement": op(NOT_TENSOR),
    "ndimension": op(NOT_TENSOR),
    "storage_offset": op(NOT_TENSOR),
    "__len__": op(NOT_TENSOR),
    "numpy": op(NOT_TENSOR),
    "register_hook": op(NOT_TENSOR),
    "backward": op(NOT_TENSOR),
    "untyped_storage": op(NOT_TENSOR),
    "new_zeros": op(NEW),
    "new_ones": op(NEW),
    "new_full": op(NEW),
    "new_empty": op(NEW),
    "new_tensor": op(NEW),
}

# torch functions, by qualified name (as :mod:`mpcheck.project.names` resolves them), and other
# libraries' functions that keep their input's dtype.
FUNCTIONS: dict[str, Op] = {
    "torch.empty": op(DEFAULT_DTYPE, DTYPE_KEYWORD, SHAPE_FIRST),
    "torch.empty_strided": op(DEFAULT_DTYPE, DTYPE_KEYWORD),
    "torch.eye": op(DEFAULT_DTYPE, DTYPE_KEYWORD),
    "torch.linspace": op(DEFAULT_DTYPE, DTYPE_KEYWORD),
    "torch.logspace": op(DEFAULT_DTYPE, DTYPE_KEYWORD),
    "torch.ones": op(DEFAULT_DTYPE, DTYPE_KEYWORD, SHAPE_FIRST),
    "torch.rand": op(DEFAULT_DTYPE, DTYPE_KEYWORD, SHAPE_FIRST),
    "torch.randn": op(DEFAULT_DTYPE, DTYPE_KEYWORD, SHAPE_FIRST),
    "torch.zeros": op(DEFAULT_DTYPE, DTYPE_KEYWORD, SHAPE_FIRST),
    "torch.randint": op(INTEGER_FACTORY),
    "torch.randperm": op(INTEGER_FACTORY),
    "torch.FloatTensor": op(DTYPE_KEYWORD),
    "torch.Tensor": op(DTYPE_KEYWORD),
    "torch.arange": op(DTYPE_KEYWORD),
    "torch.as_tensor": op(DTYPE_KEYWORD),
    "torch.full": op(DTYPE_KEYWORD, SHAPE_FIRST),
    "torch.tensor": op(DTYPE_KEYWORD),
    "torch.empty_like": op(LIKE),
    "torch.full_like": op(LIKE),
    "torch.ones_like": op(LIKE),
    "torch.rand_like": op(LIKE),
    "torch.randint_like": op(LIKE),
    "torch.randn_like": op(LIKE),
    "torch.zeros_like": op(LIKE),
    "torch.cat": op(CONCAT),
    "torch.column_stack": op(CONCAT),
    "torch.concat": op(CONCAT),
    "torch.concatenate": op(CONCAT),
    "torch.dstack": op(CONCAT),
    "torch.hstack": op(CONCAT),
    "torch.stack": op(CONCAT),
    "torch.vstack": op(CONCAT),
    "torch.argmax": op(INTEGER),
    "torch.argmin": op(INTEGER),
    "torch.argsort": op(INTEGER),
    "torch.bucketize": op(INTEGER),
    "torch.multinomial": op(INTEGER),
    "torch.nonzero": op(INTEGER),
    "torch.searchsorted": op(INTEGER),
    "torch.eq": op(BOOL),
    "torch.ge": op(BOOL),
    "torch.gt": op(BOOL),
    "torch.isclose": op(BOOL),
    "torch.isfinite": op(BOOL),
    "torch.isin": op(BOOL),
    "torch.isinf": op(BOOL),
    "torch.isnan": op(BOOL),
    "torch.le": op(BOOL),
    "torch.logical_and": op(BOOL),
    "torch.logical_not": op(BOOL),
    "torch.logical_or": op(BOOL),
    "torch.logical_xor": op(BOOL),
    "torch.lt": op(BOOL),
    "torch.ne": op(BOOL),
    "torch.Size": op(NOT_TENSOR),
    "torch.autocast": op(NOT_TENSOR),
    "torch.compile": op(NOT_TENSOR),
    "torch.cpu.amp.autocast": op(NOT_TENSOR),
    "torch.cuda.amp.autocast": op(NOT_TENSOR),
    "torch.device": op(NOT_TENSOR),
    "torch.enable_grad": op(NOT_TENSOR),
    "torch.finfo": op(NOT_TENSOR),
    "torch.get_autocast_dtype": op(NOT_TENSOR),
    "torch.get_autocast_gpu_dtype": op(NOT_TENSOR),
    "torch.get_default_dtype": op(NOT_TENSOR),
    "torch.iinfo": op(NOT_TENSOR),
    "torch.inference_mode": op(NOT_TENSOR),
    "torch.is_autocast_enabled": op(NOT_TENSOR),
    "torch.is_floating_point": op(NOT_TENSOR),
    "torch.is_tensor": op(NOT_TENSOR),
    "torch.jit.script": op(NOT_TENSOR),
    "torch.manual_seed": op(NOT_TENSOR),
    "torch.no_grad": op(NOT_TENSOR),
    "torch.numel": op(NOT_TENSOR),
    "torch.set_grad_enabled": op(NOT_TENSOR),
    "torch.chunk": op(SPLIT),
    "torch.split": op(SPLIT),
    "torch.tensor_split": op(SPLIT),
    "torch.unbind": op(SPLIT),
    "torch.var_mean": op(STATISTIC_MEAN),  # (variance, mean)
    "torch.std_mean": op(STATISTIC_MEAN),  # (standard deviation, mean)
    # Its other tensors are indices (``torch.gather(x, 1, idx)``), or it requires the second
    # floating tensor to match the first (``grid_sample`` on CPU, torch 2.13: "expected scalar
    # type Half but found Float"), or they are unused placeholders (``F.multi_head_attention_
    # forward``'s ``in_proj_weight=torch.empty([0])`` next to ``q_proj_weight=``).
    "torch.gather": op(FIRST_INPUT),
    "torch.index_select": op(FIRST_INPUT),
    "torch.nn.functional.grid_sample": op(FIRST_INPUT),
    "torch.nn.functional.multi_head_attention_forward": op(FIRST_INPUT),
    "torch.take_along_dim": op(FIRST_INPUT),
    # Broadcasting changes shapes, never dtypes: ``broadcast_tensors(half, float32)`` returns
    # (half, float32) views (torch 2.13), ``broadcast_to`` is ``x.broadcast_to``, and
    # ``broadcast_shapes`` computes a ``torch.Size`` from shapes alone.
    "torch.broadcast_tensors": op(EACH_OWN),
    "torch.broadcast_to": op(SAME, KEEPS_DIMS),
    "torch.broadcast_shapes": op(NOT_TENSOR),
    "einops.rearrange": op(SAME),
    "einops.repeat": op(SAME),
}


def methods_that(does: Does) -> frozenset[str]:
    """The methods of :data:`METHODS` with behaviour ``does``."""
    return frozenset(name for name, row in METHODS.items() if does in row.does)


def functions_that(does: Does) -> frozenset[str]:
    """The functions of :data:`FUNCTIONS` with behaviour ``does``."""
    return frozenset(name for name, row in FUNCTIONS.items() if does in row.does)
