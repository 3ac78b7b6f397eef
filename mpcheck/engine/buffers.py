"""``self.register_buffer(...)`` / ``register_parameter``: the dtype of what was registered.

``model.half()``/``.to(dtype)`` casts every floating buffer (persistent or not), so a float
buffer has the model's dtype whatever it was built with, and an integer or bool buffer keeps
its own. One exception matters in practice: ``from_pretrained(torch_dtype=...)`` loads the
checkpoint in that dtype without casting the module, so a non-persistent buffer (not in the
checkpoint) keeps the dtype it was built with.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from mpcheck.engine.facts import UNKNOWN, Cause, Fact, Kind, Origin, Prec
from mpcheck.engine.promotion import cast_method
from mpcheck.engine.sites import Operand
from mpcheck.knowledge import torch_api as T


def registered(
    node: cst.Call,
    method: str,
    args: tuple[Operand, ...],
    kwargs: dict[str, Operand],
    in_module: bool,
    pretrained: bool,
    kept: str | None = None,
) -> tuple[str, Fact] | None:
    """The attribute ``register_buffer("name", t)`` binds and its fact, or None if unclear.

    ``pretrained``: the class is one that ``from_pretrained`` loads (``T.PRETRAINED_SUFFIXES``)
    under a half dtype. ``kept``: the FSDP wrapper that is the only cast of the class and
    casts its parameters only; a buffer built float32 stays float32 under it (one built in
    the default dtype too, unless a load builds the class under a half one).
    """
    name = args[0] if args else kwargs.get("name")
    if name is None or not isinstance(name.node, cst.SimpleString):
        return None
    attr = name.node.evaluated_value
    if not isinstance(attr, str) or not attr.isidentifier():
        return None
    tensor = args[1] if len(args) > 1 else kwargs.get("tensor", kwargs.get("param"))
    if tensor is not None and not tensor.fact.is_tensor:
        # ``helper(...).float().unsqueeze(0)``: a buffer is a tensor, so its last cast holds
        tensor = replace(tensor, fact=_cast_chain(tensor.node))
    if tensor is None or not tensor.fact.is_tensor:
        return None  # ``None`` or unknown: leave ``self.name`` as it was
    value = tensor.fact
    if not (value.floating and in_module):
        return attr, value
    kind = "buffer" if method == "register_buffer" else "parameter"
    built = value.prec is Prec.FULL and value.dtype in ("float32", "float64")
    if kind == "buffer" and kept and built and not (pretrained and value.default_float32):
        text = (
            f"a {value.dtype} buffer, which {kept} does not cast (FSDP casts the "
            "parameters; a buffer only to FSDP1's `buffer_dtype=`)"
        )
        fact = Fact(Kind.TENSOR, Prec.FULL, value.dtype, Origin(node, Cause.BUFFER, text))
        return attr, fact
    if kind == "buffer" and pretrained and _left_float32(value, args, kwargs):
        text = (
            "a float32 non-persistent buffer, which `from_pretrained(torch_dtype=...)` "
            "does not cast (it is not in the checkpoint)"
        )
        return attr, Fact(Kind.TENSOR, Prec.FULL, "float32", Origin(node, Cause.BUFFER, text))
    origin = Origin(node, Cause.PARAMETER, f"a {kind} of the model")
    return attr, Fact(Kind.TENSOR, Prec.MODEL, None, origin)


def as_built(model: Fact, args: tuple[Operand, ...], kwargs: dict[str, Operand]) -> Fact | None:
    """What ``self.name`` holds when ``__init__`` reads it back after registering it: the
    tensor registered, when its dtype was spelled (``.float()``, ``dtype=torch.float32``).

    No cast of the module can run between two statements of ``__init__``: ``model.half()``
    and ``.to(dtype)`` come after construction, and ``from_pretrained(torch_dtype=...)``
    only changes the default dtype while building, which an explicit dtype ignores. So phases
    built in ``__init__`` from a buffer just registered with ``.float()`` are float32 there
    (a cos/sin cache); a buffer made in the default dtype may be half under such a loader,
    and keeps the model's dtype (``model``). None when nothing differs.
    """
    if model.prec is not Prec.MODEL:
        return None
    tensor = args[1] if len(args) > 1 else kwargs.get("tensor", kwargs.get("param"))
    if tensor is None:
        return None
    value = tensor.fact if tensor.fact.is_tensor else _cast_chain(tensor.node)
    explicit = value.prec is Prec.FULL and value.dtype in ("float32", "float64")
    return value if explicit and not value.default_float32 else None


def _left_float32(value: Fact, args: tuple[Operand, ...], kwargs: dict[str, Operand]) -> bool:
    """An explicitly float32 buffer kept out of the checkpoint (``persistent=False``).

    (transformers builds a model with ``torch_dtype`` as the default dtype, so a buffer made
    by a factory without ``dtype=`` follows it: only an explicit float32 is left behind.)
    """
    flag = args[2] if len(args) > 2 else kwargs.get("persistent")
    if flag is None or not (isinstance(flag.node, cst.Name) and flag.node.value == "False"):
        return False
    return value.prec is Prec.FULL and value.dtype == "float32" and not value.default_float32


def _cast_chain(node: cst.BaseExpression) -> Fact:
    """The dtype of a tensor expression ending in a cast and shape methods, whatever the cast
    was applied to: ``emb.float().unsqueeze(0)`` is float32."""
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        method = node.func.attr.value
        if method in T.CAST_METHODS and not node.args:
            return cast_method(method, node)
        if method not in T.SAME_DTYPE_METHODS:
            break
        node = node.func.value
    return UNKNOWN
