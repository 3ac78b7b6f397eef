"""What makes rows of a tensor exactly 0, and what keeps them so (mpcheck.engine.zero_rows).

A guard that vanishes in float16 (``F.normalize``'s ``eps=1e-12``) only fails where the value
it guards is exactly 0: these rows say where the code itself makes such values -- by
construction, not by the luck of random data -- and which ops carry a zero row to a zero row.
"""

from __future__ import annotations

# Factories of zeros, when built right in a join (``torch.cat([x, torch.zeros(n, d)])``): the
# rows they add are exactly 0. (Bound to a name first, such a tensor is often a buffer filled
# in place, ``out.index_add_(...)``, which the walk does not follow: not a source then.)
ZEROS = frozenset({"zeros", "zeros_like", "new_zeros"})
# Zero padding: ``F.pad(x, pad)`` fills with 0 unless ``value=`` or ``mode=`` says otherwise.
PADS = frozenset({"torch.nn.functional.pad"})
# A masked fill: the positions ``mask`` selects become ``value`` (0 makes zero rows).
FILLS = frozenset({"masked_fill", "masked_fill_"})
# Joins: a zero row of any item is a row of the result.
CONCATS = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.stack"})
# Ops that map a zero row of their first operand to a zero row: layout changes, casts, a
# zero-preserving activation (f(0) = 0), and the reductions whose value on a zero row is 0.
KEEPS = frozenset(
    (
        "view reshape view_as reshape_as transpose permute contiguous unsqueeze squeeze flatten "
        "unflatten expand expand_as repeat roll movedim swapaxes clone detach to float half "
        "bfloat16 double type type_as cpu cuda relu gelu silu tanh abs neg square norm sum "
        "mean amax"
    ).split()
)
KEEPS_FUNCTIONS = frozenset(
    {
        "torch." + name
        for name in (
            "reshape transpose permute unsqueeze squeeze flatten roll "
            "movedim relu tanh abs neg square norm sum mean amax"
        ).split()
    }
    | {
        "torch.linalg.vector_norm",
        "torch.linalg.norm",
        "torch.nn.functional.relu",
        "torch.nn.functional.gelu",
        "torch.nn.functional.silu",
        "torch.nn.functional.dropout",
    }
)
# Products: a zero row times anything finite is a zero row (``x * mask``, ``x @ w``: only the
# left operand's rows are the result's rows in a matmul).
PRODUCTS = frozenset({"mul", "mul_", "torch.mul"})
MATMULS = frozenset({"matmul", "torch.matmul", "torch.nn.functional.linear"})
# Layers that map a zero row to a zero row when built without a bias (``bias=False``), or
# always (an activation with f(0) = 0).
BIASED_LAYERS = frozenset({"Linear", "LazyLinear"})
ZERO_LAYERS = frozenset({"ReLU", "GELU", "SiLU", "Tanh", "Identity", "Dropout"})
