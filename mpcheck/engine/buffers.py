"""``self.register_buffer(...)`` / ``register_parameter``: the dtype of what was registered.

``model.half()``/``.to(dtype)`` casts every floating buffer (persistent or not), so a float
buffer has the model's dtype whatever it was built with, and an integer or bool buffer keeps
its own. One exception matters in practice: ``from_pretrained(torch_dtype=...)`` loads the
checkpoint in that dtype without casting the module, so a non-persistent buffer (not in the
checkpoint) keeps the dtype it was built with.

A buffer is also whatever is later assigned to its name (``Module.__setattr__`` stores into
``_buffers`` for a name registered there, ``register_buffer("pe", None)`` included): stored
while the model is built, it is cast with the others; stored by ``forward``, after the cast,
it keeps the dtype it was made in (see ``Modules.stored``).
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from mpcheck.engine.facts import (
    UNKNOWN,
    UNKNOWN_TENSOR,
    Cause,
    Fact,
    Kind,
    Origin,
    Prec,
    float32_on_a_path,
)
from mpcheck.engine.promotion import cast_method
from mpcheck.engine.sites import Operand
from mpcheck.knowledge import torch_api as T
from mpcheck.project.names import descendants, dotted


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
    kind = "buffer" if method == "register_buffer" else "parameter"
    transient = _transient(args, kwargs)
    return attr, held(node, tensor.fact, kind, in_module, pretrained, kept, transient)


def held(
    node: cst.CSTNode,
    value: Fact,
    kind: str,
    in_module: bool,
    pretrained: bool,
    kept: str | None = None,
    transient: bool = False,
) -> Fact:
    """What a module's ``kind`` (buffer or parameter) made of ``value`` holds once the module
    is built and cast: the model's dtype when floating (see :func:`registered`).

    A value float32 on one path only (``coef = torch.rand(n) if c is None else load(c)``)
    is a floating buffer on that path, cast with the module like any other, and whatever the
    other path made on the other: its float32 is not kept (unless FSDP keeps it). A
    ``transient`` buffer is registered ``persistent=False``.
    """
    if in_module and float32_on_a_path(value) and not (kind == "buffer" and kept):
        return UNKNOWN_TENSOR
    if not (value.floating and in_module):
        return value
    built = value.prec is Prec.FULL and value.dtype in ("float32", "float64")
    if kind == "buffer" and kept and built and not (pretrained and value.default_float32):
        text = (
            f"a {value.dtype} buffer, which {kept} does not cast (FSDP casts the "
            "parameters; a buffer only to FSDP1's `buffer_dtype=`)"
        )
        return Fact(Kind.TENSOR, Prec.FULL, value.dtype, Origin(node, Cause.BUFFER, text))
    if kind == "buffer" and pretrained and transient and _explicit_float32(value):
        text = (
            "a float32 non-persistent buffer, which `from_pretrained(torch_dtype=...)` "
            "does not cast (it is not in the checkpoint)"
        )
        return Fact(Kind.TENSOR, Prec.FULL, "float32", Origin(node, Cause.BUFFER, text))
    origin = Origin(node, Cause.PARAMETER, f"a {kind} of the model")
    return Fact(Kind.TENSOR, Prec.MODEL, None, origin)


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
    tensor = args[1] if len(args) > 1 else kwargs.get("tensor", kwargs.get("param"))
    if tensor is None:
        return None
    return read_back(model, tensor.fact if tensor.fact.is_tensor else _cast_chain(tensor.node))


def read_back(model: Fact, value: Fact) -> Fact | None:
    """:func:`as_built` of the tensor ``value`` a buffer was given: ``value`` when its dtype
    was spelled float32 and the buffer is otherwise the model's (``model``), else None."""
    if model.prec is not Prec.MODEL:
        return None
    explicit = value.prec is Prec.FULL and value.dtype in ("float32", "float64")
    return value if explicit and not value.default_float32 else None


def buffer_names(node: cst.ClassDef) -> dict[str, bool]:
    """The buffers a class registers by name (``self.register_buffer("pe", ...)`` in any of
    its methods), each with whether it is ``persistent=False``.

    Assigning to such a name (``self.pe = pe``) stores into the buffer, as
    ``Module.__setattr__`` does for any name in ``_buffers`` (one registered as ``None``
    too), so what is assigned is cast with the module like the buffer it replaces.
    """
    found: dict[str, bool] = {}
    for child in descendants(node.body):
        if not (
            isinstance(child, cst.Call)
            and isinstance(child.func, cst.Attribute)
            and child.func.attr.value == "register_buffer"
            and dotted(child.func.value) == "self"
        ):
            continue
        args = [a for a in child.args if a.keyword is None and not a.star]
        named = {a.keyword.value: a.value for a in child.args if a.keyword is not None}
        name = args[0].value if args else named.get("name")
        if not isinstance(name, cst.SimpleString):
            continue
        attr = name.evaluated_value
        if isinstance(attr, str) and attr.isidentifier():
            flag = args[2].value if len(args) > 2 else named.get("persistent")
            transient = isinstance(flag, cst.Name) and flag.value == "False"
            found[attr] = found.get(attr, True) and transient
    return found


def _transient(args: tuple[Operand, ...], kwargs: dict[str, Operand]) -> bool:
    """``register_buffer(..., persistent=False)``: kept out of the checkpoint."""
    flag = args[2] if len(args) > 2 else kwargs.get("persistent")
    return flag is not None and isinstance(flag.node, cst.Name) and flag.node.value == "False"


def _explicit_float32(value: Fact) -> bool:
    """An explicitly float32 tensor (``.float()``, ``dtype=torch.float32``).

    (transformers builds a model with ``torch_dtype`` as the default dtype, so a buffer made
    by a factory without ``dtype=`` follows it: only an explicit float32 is left behind.)
    """
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
