"""How a fix spells the dtype of a module: only with attributes that module has.

A cast written as ``self.head.weight.dtype`` raises AttributeError when ``self.head`` is an
``nn.Sequential``, and ``next(m.parameters())`` raises StopIteration on an ``nn.Identity``;
a fix that cannot be spelled for what the receiver is, is not offered.
"""

from __future__ import annotations

from mpcheck.knowledge.torch_api import CONTAINER_LAYERS, PASS_THROUGH_LAYERS

__all__ = ["WEIGHTED_LAYERS", "module_dtype"]

# Layers with a ``.weight`` tensor. A norm's is None without affine weights, but then it
# takes float32 input from a half model without complaint, so nothing reports it there.
WEIGHTED_LAYERS = frozenset(
    """Linear Bilinear LazyLinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d
    ConvTranspose3d LazyConv1d LazyConv2d LazyConv3d Embedding EmbeddingBag PReLU LayerNorm
    GroupNorm RMSNorm BatchNorm1d BatchNorm2d BatchNorm3d SyncBatchNorm InstanceNorm1d
    InstanceNorm2d InstanceNorm3d""".split()
)


def module_dtype(
    code: str, layer: str | None, *, whole: bool = False, container: bool = False
) -> str | None:
    """An expression for the dtype of the module ``code``, valid for what it is: ``.weight``
    only on a layer that has one, ``next(....parameters())`` on a model or a container
    (``whole``); None for a module without parameters (``nn.Identity``) or of unknown kind
    (a fix offered there could raise AttributeError)."""
    whole = whole or container  # (a container's ``layer`` is its first part's)
    if layer in WEIGHTED_LAYERS and not whole:
        return f"{code}.weight.dtype"
    if layer in PASS_THROUGH_LAYERS:
        return None
    if whole or layer in CONTAINER_LAYERS or layer in WEIGHTED_LAYERS:
        return f"next({code}.parameters()).dtype"
    return None
