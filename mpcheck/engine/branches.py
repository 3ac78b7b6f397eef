"""Values float32 on one path of an ``if``: a real path, unless the test picks a precision.

After ``if self.kv_cache is not None: k, v = self.kv_cache.update(...)`` the keys are float32
whenever a cache is attached, and the half ``q`` meets them in attention: the branch is
chosen by something that has nothing to do with precision, so the float32 path is taken in
a half model as often as in a float32 one. When the test is about precision or the device
(``if upcast:``, ``if x.dtype == torch.float16:``, ``if device.type == "mps":``,
``if args.mixed_precision == "no":``), the float32 path goes with a float32 model, so the
join stays unknown, as before.
"""

from __future__ import annotations

import re
from dataclasses import replace

import libcst as cst

from mpcheck.engine.facts import Fact, Origin, Prec
from mpcheck.engine.guards import fp16_run_kept

# identifier words (split at ``_``, ``.`` and other non-alphanumerics) that tie a branch to
# a precision, a device or a model's loading mode
_PRECISION_WORDS = frozenset(
    """
    dtype dtypes float float16 float32 float64 half fp16 fp32 fp64 bf16 bfloat16 bfloat
    double precision amp autocast upcast downcast cast mixed mps cpu cuda device xla npu
    xpu hpu gpu tpu quantized quantize quant int8 int4 fp8 8bit 4bit onnx jit tracing
    scripting compile compiling
    """.split()
)
# word beginnings that say the same (``needs_upcasting``, ``is_quantized``, ``halfprec``)
_PRECISION_STEMS = ("upcast", "downcast", "autocast", "precision", "dtype", "quant", "half")
_WORD = re.compile(r"[a-z0-9]+")


def about_precision(test_code: str) -> bool:
    """Whether a branch test may choose a precision (so its paths are correlated with it)."""
    words = _WORD.findall(test_code.lower())
    return not _PRECISION_WORDS.isdisjoint(words) or any(
        w.startswith(_PRECISION_STEMS) for w in words
    )


def float32_path(then: Fact, other: Fact, in_module: bool) -> tuple[Fact, bool] | None:
    """The float32 side of ``then`` and ``other`` (the paths of an ``if``) when the other
    side is not float32 itself, and whether it is the ``then`` side; None otherwise.

    The float32 path is float32 whenever it runs, whatever the other path holds: the model's
    activations, or a tensor the function makes in a dtype it computes
    (``torch.ones(..., dtype=self.train_dtype)``). Outside a model's methods the other path
    must not be an argument: a helper's ``image`` may be anything its caller passed (``if not
    isinstance(image, list): image = preprocess(image).float()`` says nothing of the tensor
    path).
    """
    for taken, low, is_then in ((then, other, True), (other, then, False)):
        first = _float32(taken) and (_low(low) or _made_here(low))
        # already float32 on a path of its own, whatever this ``if``'s other path holds: the
        # enclosing test only decides whether that path is reached
        nested = _on_a_path(taken) and low.is_tensor and low.prec is not Prec.FULL
        if not (first or nested) or taken.origin is None:
            continue
        if not in_module and not _made_here(low):
            if low.origin is None or isinstance(low.origin.node, cst.Param):
                continue
        return taken, is_then
    return None


def fp16_run_path(then: Fact, other: Fact) -> tuple[Fact, bool] | None:
    """The side of an ``if`` that a float16 run leaves float16 (``elif x.dtype ==
    torch.bfloat16: x = x.float()``, :func:`~mpcheck.engine.guards.bf16_upcast`) when the
    other side is float32, and whether it is the ``then`` side: the float16 run reaches the
    code after on that path in float16 (FreeU's filter upcasts sizes that are no power of two,
    and of the half dtypes only bfloat16). None otherwise."""
    for kept, full, is_then in ((then, other, True), (other, then, False)):
        if fp16_run_kept(kept) and full.is_tensor and full.prec is Prec.FULL:
            return kept, is_then
    return None


def on_path(taken: Fact, condition: str) -> Fact:
    """``taken`` after the ``if``: float32 on the path where ``condition`` holds, said so."""
    origin = taken.origin
    assert origin is not None
    if _ON_PATH in origin.text:  # an ``if`` around the one that chose the path: both hold
        head, _, inner = origin.text.partition(_ON_PATH)
        text = f"{head}{_ON_PATH}`{condition}` and {inner}"
    else:
        text = f"{origin.text.rstrip(',')}{_ON_PATH}`{condition}`"  # no ",,"
    return replace(taken, origin=Origin(origin.node, origin.cause, text, origin.via), maybe=True)


_ON_PATH = ", on the path where "


def _on_a_path(fact: Fact) -> bool:
    """Float32 on some path only, not chosen by precision (:func:`on_path`, or a helper's
    default joined with the activations it was given)."""
    return fact.is_tensor and fact.prec is Prec.FULL and fact.maybe and not fact.zero_dim


def _float32(fact: Fact) -> bool:
    # a factory's float32 on one path (``if state is None: state = torch.zeros(...)``, or
    # mixed in by ``torch.cat([h, pad])``) has MPC102's own one-path policy
    return (
        fact.is_tensor
        and fact.prec is Prec.FULL
        and not fact.maybe
        and not fact.zero_dim
        and not fact.default_float32
    )


def _made_here(fact: Fact) -> bool:
    """A tensor the function makes in a dtype the engine cannot read
    (``torch.zeros(..., dtype=self.model.train_dtype.torch_dtype())``), not an argument."""
    return (
        fact.is_tensor
        and fact.prec is Prec.UNKNOWN
        and fact.origin is None
        and not fact.maybe
        and not fact.zero_dim
    )


def _low(fact: Fact) -> bool:
    return fact.is_tensor and fact.prec in (Prec.MODEL, Prec.HALF) and not fact.zero_dim
