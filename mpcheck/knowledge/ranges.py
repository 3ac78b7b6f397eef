"""What torch calls do to a tensor's magnitude: the value-range rows next to the op table.

The engine (:mod:`mpcheck.engine.ranges`) carries an upper bound on ``|x|`` with each tensor
fact, as interval analysis does (DEBAR, FSE 2020), kept coarse: a rule only has to tell a
waveform in [-1, 1] or a pixel in [0, 255] from an activation nothing bounds. A row states a
semantic of torch (``softmax`` is a probability), never of one repository's names. What a
data source's library states of its range (a waveform in [-1, 1]) is a column of its row in
:mod:`mpcheck.knowledge.sources`, not a row here.
"""

from __future__ import annotations

from mpcheck.knowledge.sources import bounded

# Callables whose every output element lies in [-1, 1] whatever the input: probabilities,
# squashing functions, periodic functions, unit vectors. By method name and qualified name.
UNIT_METHODS = frozenset(
    {"softmax", "sigmoid", "sigmoid_", "tanh", "tanh_", "sin", "sin_", "cos", "cos_", "erf"}
)
UNIT_FUNCTIONS = frozenset(
    {
        "torch.softmax",
        "torch.sigmoid",
        "torch.tanh",
        "torch.sin",
        "torch.cos",
        "torch.erf",
        "torch.special.expit",
        "torch.nn.functional.softmax",
        "torch.nn.functional.sigmoid",
        "torch.nn.functional.tanh",
        "torch.nn.functional.normalize",  # each element of a unit vector
        "torch.nn.functional.cosine_similarity",
        "torch.nn.functional.gumbel_softmax",
        "torch.rand",  # uniform on [0, 1)
        "torch.rand_like",
        "torchvision.transforms.v2.functional.to_dtype",
        # torch's window functions: every element in [0, 1] (torch 2.13, periodic or not)
        "torch.hann_window",
        "torch.hamming_window",
        "torch.blackman_window",
        "torch.bartlett_window",
        "torch.kaiser_window",
    }
) | bounded(1.0)  # data sources whose library states [-1, 1] or [0, 1] (knowledge.sources)
# Layers (``Fact.layer``, the torch.nn class name) whose output is in [-1, 1].
UNIT_MODULES = frozenset({"Softmax", "Sigmoid", "Tanh", "Hardtanh", "Softsign"})
# Ops whose output elements are elements of the input (or 0): shape-only, selection, casts,
# and reductions that do not grow a magnitude (a mean of bounded values is bounded by it).
KEEPS_METHODS = frozenset(
    {
        *(
            "view reshape view_as reshape_as transpose permute contiguous unsqueeze squeeze "
            "flatten unflatten expand expand_as repeat repeat_interleave clone detach narrow "
            "select index_select gather roll flip fliplr flipud t movedim swapaxes chunk split "
            "unbind to float half bfloat16 double type type_as cpu cuda abs neg relu mean "
            "nanmean amax amin max min median"
        ).split()
    }
)
KEEPS_FUNCTIONS = frozenset(
    {
        "torch." + name
        for name in (
            "reshape transpose permute unsqueeze squeeze flatten flip roll narrow select "
            "index_select gather abs neg relu mean nanmean amax amin movedim chunk split unbind"
        ).split()
    }
    | {"torch.nn.functional.relu", "torch.nn.functional.dropout", "torch.view_as_real"}
)
# Of those, the ops whose result holds integers when their input does (casts to a floating
# dtype keep integers integral; a mean does not).
INTEGRAL_METHODS = KEEPS_METHODS - {"mean", "nanmean", "median"}
INTEGRAL_FUNCTIONS = KEEPS_FUNCTIONS - {
    "torch.mean",
    "torch.nanmean",
    "torch.nn.functional.dropout",
}
# Joins of their sequence's tensors: the largest bound.
CONCATS = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.stack"})
# ``clamp(min, max)``/``clip``: bounded by the larger of |min|, |max| when both are given.
CLAMPS = frozenset({"clamp", "clamp_", "clip", "clip_", "torch.clamp", "torch.clip"})
# Factories from their bounds: ``arange(n)`` holds 0..n-1, ``linspace(a, b)`` a..b.
RANGES = frozenset({"torch.arange", "torch.linspace"})
# ``torch.randint(high, size)``, ``torch.randint(low, high, size)``: integers in [low, high).
RANDINTS = frozenset({"torch.randint"})
# ``torch.arange(start, end, step)``'s numbers by keyword.
ARANGE_KEYWORDS = ("start", "end", "step")
# Integer positions below these (2**(p-1), p the significand's bits: 8 for bfloat16, 11 for
# float16) keep a phase of their own at every frequency when the phases ``t * f`` are rounded
# to that dtype: two positions differ by at least f, and the rounding step of ``t * f`` is at
# most ``t * f * 2**(1-p)``, which is below f while t <= 2**(p-1). Measured on torch 2.13
# (autocast matmul of ``arange(n)`` by a 64-dim rotary's ``inv_freq``): no two neighbouring
# positions share a phase up to 128 (bfloat16) and 1024 (float16); they do at 256 and 2048.
DISTINCT_POSITIONS = {"bfloat16": 128.0, "float16": 1024.0}
# A variance of values within [-b, b]: the population variance is at most b² (Popoviciu), and
# torch's default, the unbiased one (``correction=1``), is n/(n-1) times it, at most 2b² (two
# values ±b; measured on torch 2.13: ``tensor([200., -200.]).half().var()`` is inf while b² is
# 40000). ``unbiased=False`` or ``correction=0`` keeps b², as does a ``False`` passed in
# ``unbiased``'s place (``x.var(0, False)``, ``torch.var(x, False)``).
VARIANCES = frozenset({"var", "torch.var"})
# Calls that return a tuple of tensors, and what bounds each item: ``VARIANCE`` as a variance
# above; ``DEVIATION`` its root (b with ``unbiased=False``, else sqrt(2)·b: measured on torch
# 2.13, ``torch.std_mean`` of float16 ``[60000, -60000, 60000]`` gives inf, past 65504 though
# every value fits); ``MEAN`` the input's bound (a mean of values within b is within b).
VARIANCE, DEVIATION, MEAN = "variance", "deviation", "mean"
ITEMS: dict[str, tuple[str, ...]] = {
    "torch.var_mean": (VARIANCE, MEAN),
    "torch.std_mean": (DEVIATION, MEAN),
}
# ``x.square()``, ``torch.square(x)``: the bound squared.
SQUARES = frozenset({"square", "square_"})
# The short-time Fourier transform (``torch.stft(x, n_fft, ..., window=w)``, ``x.stft(...)``):
# each bin is a windowed sum over one frame, |X| = |sum_n w[n] x[n] e^(-i...)| <= sum |w| max|x|
# <= n_fft * max|w| * max|x| (a window is at most ``n_fft`` long; without one it is all ones).
# A full-scale sine at a bin's centre reaches sum(w) * 1/2: 256 for a 1024-point Hann
# window, whose square (65536) is already past float16's range.
STFTS = frozenset({"torch.stft", "stft"})
