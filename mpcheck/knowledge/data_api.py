"""Loaded data: which values are batches, and what the tensors in them are.

A training script's tensors mostly come from a data loader or a processor, not from torch
factories, and they are float32 as loaded: image transforms end in ``ToTensor()``/
``.float()``, cached embeddings come back from disk in float32, and a processor called with
``return_tensors="pt"`` returns float32 ``pixel_values``. So a batch item that reaches a model
cast to half without a cast of its own raises there, like a factory's tensor does (the
diffusers fixes ``batch["prompt_embeds"].to(dtype=weight_dtype)``, ``ae.encode(
batch["images"].to(ae.dtype))``). Token ids, labels and attention masks are int64; sizes and
captions are not float tensors at all. Which is which is known only by name here: the names
below are the ones training code uses, and an item whose name says nothing is float. A batch
cast whole (``processor(...).to(device, torch.float16)``: transformers' ``BatchFeature`` casts
its floating tensors) holds float items of that dtype.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst

from mpcheck.engine.facts import UNKNOWN, Cause, Fact, Kind, Origin, Prec
from mpcheck.knowledge.sources import (
    ARRAY_OF,
    NUMPY_DTYPES,
    PICTURE_MAKERS,
    PICTURE_METHODS,
    SOURCES,
)
from mpcheck.project.names import dotted

# The last part of a name that holds a data loader: ``train_dataloader``, ``val_loader``,
# ``self.data_loader``, ``loader``.
_LOADER = re.compile(r"(?:^|_)(?:data_?)?loader$", re.IGNORECASE)
# Calls that yield what a loader yields (``enumerate`` adds a counter in front).
_PASS_ITEMS = frozenset({"iter", "tqdm", "skip_first_batches"})
# Words in an item's name that make it an integer tensor.
_INT_WORDS = frozenset(
    {
        "id",
        "ids",
        "idx",
        "index",
        "indices",
        "label",
        "labels",
        "token",
        "tokens",
        "length",
        "lengths",
        "len",
        "lens",
        "position",
        "positions",
        "class",
        "classes",
        "step",
        "steps",
        "timestep",
        "timesteps",
    }
)
# Words that make it no float tensor of the model: sizes, captions, paths, weights of a
# loss, a diffusion target or a mask that the loss alone reads.
_OTHER_WORDS = frozenset(
    {
        "size",
        "sizes",
        "shape",
        "shapes",
        "coords",
        "left",
        "lefts",
        "crop",
        "crops",
        "resolution",
        "height",
        "width",
        "caption",
        "captions",
        "prompt",
        "prompts",
        "text",
        "texts",
        "path",
        "paths",
        "name",
        "names",
        "target",
        "targets",
        "weight",
        "weights",
        "loss",
    }
)


# Names of pictures and videos as an input pipeline holds them: tensors once moved with
# ``.to(device, dtype=...)`` (a model moved so is named for what it is: ``vae``, ``unet``).
_PICTURE_WORDS = frozenset({"image", "images", "img", "imgs", "video", "videos", "pixels"})


def picture(name: str) -> bool:
    """``image``, ``init_image``, ``video``, ``pixel_values``: a name for a picture."""
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w and not w.isdigit()]
    return bool(words) and (words[-1] in _PICTURE_WORDS or name.endswith("pixel_values"))


def picture_cast(func: cst.BaseExpression) -> bool:
    """``image.to`` of ``image.to(device, dtype=...)`` on a picture of unknown type, or on what
    an image or video processor's ``preprocess`` made of one: a tensor being cast."""
    receiver = func.value if isinstance(func, cst.Attribute) else None
    if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute):
        holder = (dotted(receiver.func.value) or "").rsplit(".", 1)[-1]
        return receiver.func.attr.value == "preprocess" and holder.endswith("processor")
    return isinstance(receiver, cst.Name) and picture(receiver.value)


def loader_items(node: cst.BaseExpression) -> tuple[str, bool] | None:
    """``for batch in X``: the loader's name when X yields a data loader's batches, and
    whether each item comes with a counter in front (``enumerate(train_dataloader)``)."""
    counted = False
    while isinstance(node, cst.Call) and node.args:
        leaf = (dotted(node.func) or "").rsplit(".", 1)[-1]
        if leaf == "enumerate" and not counted:
            counted = True
        elif leaf not in _PASS_ITEMS:
            return None
        node = node.args[0].value
    name = dotted(node)
    if name is None or not _LOADER.search(name.rsplit(".", 1)[-1]):
        return None
    return name, counted


def processor_output(node: cst.Call) -> bool:
    """``processor(images, return_tensors="pt")``: a tokenizer's or processor's batch."""
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "return_tensors":
            value = arg.value
            return isinstance(value, cst.SimpleString) and value.evaluated_value == "pt"
    return False


def item_name(node: cst.Subscript) -> str | None:
    """``"pixel_values"`` for ``batch["pixel_values"]``; None for ``batch[0]`` and the like."""
    index = node.slice[0].slice if len(node.slice) == 1 else None
    value = index.value if isinstance(index, cst.Index) else None
    name = value.evaluated_value if isinstance(value, cst.SimpleString) else None
    return name if isinstance(name, str) else None


def item_key(node: cst.Subscript) -> str | None:
    """The environment key of a named item of a batch held in a name: ``batch["x"]``."""
    base, name = dotted(node.value), item_name(node)
    return f"{base}[{name!r}]" if base is not None and name is not None else None


def batch_of(node: cst.CSTNode, text: str) -> Fact:
    """A batch of loaded data, where ``text`` says where it was loaded."""
    return Fact(Kind.BATCH, origin=Origin(node, Cause.DATA, text))


def item(batch: Fact, name: str | None, node: cst.CSTNode) -> Fact:
    """The fact of ``batch[name]`` / ``batch.name`` / a name unpacked from the batch, judged
    by the last word of its name."""
    if name is None:
        return Fact(Kind.TENSOR)  # ``batch[0]``: images or labels, nobody can tell
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w and not w.isdigit()]
    last = words[-1] if words else ""  # ``prompt_embeds`` are embeddings, ``input_ids_2`` ids
    if last in _INT_WORDS or name.lower().endswith("attention_mask"):
        return Fact(Kind.TENSOR, Prec.INT, "int64", Origin(node, Cause.DATA, "loaded ids"))
    if last in _OTHER_WORDS or not last:
        return UNKNOWN
    if batch.elem is not None:  # ``processor(...).to(device, dtype)``: its floating items cast
        return batch.elem
    where = batch.origin.text if batch.origin else "loaded data"
    text = f"float32 as loaded ({where}, float32 unless cast)"
    return Fact(Kind.TENSOR, Prec.FULL, "float32", Origin(node, Cause.DATA, text))


# Transforms whose instances turn a picture into a float32 tensor when called
# (``transforms.ToTensor()(img)``); a ``Compose`` holding one ends in float32 too (the
# ``Normalize`` after it keeps the dtype).
TO_TENSOR_TRANSFORMS = frozenset({"ToTensor"})
TRANSFORM = "data-transform"  # the ``layer`` of a fact holding such a transform
PICTURE = "picture"  # the ``layer`` of a fact holding a PIL image (uint8 pixels)


def loaded(
    name: str,
    node: cst.Call,
    args: tuple[Fact, ...],
    keywords: dict[str, cst.BaseExpression],
    resolve: Callable[[cst.BaseExpression], str | None],
) -> Fact | None:
    """What ``name(...)`` returns when it is a data source of
    :data:`~mpcheck.knowledge.sources.SOURCES` (or makes an array of a picture), else None."""
    if name in PICTURE_MAKERS:
        return Fact(Kind.OTHER, layer=PICTURE)
    chosen = keywords.get("dtype")
    dtype = numpy_dtype(chosen, resolve) if chosen is not None else None
    if name in ARRAY_OF:  # ``np.array(Image.open(p))``: its pixels, uint8
        picture = bool(args) and args[0].kind is Kind.OTHER and args[0].layer == PICTURE
        if dtype is None and not picture:
            return None
        return _loaded_value(node, dtype or "uint8", None, f"`{dotted(node.func)}`")
    source = SOURCES.get(name)
    if source is None:
        return None
    if chosen is not None and source.keyword is not None:
        if dtype is None:
            return None  # a dtype we cannot read: nothing is known
    else:
        dtype = source.dtype
    what = f"`{dotted(node.func) or name}`"
    return _loaded_value(node, dtype, source.item, what, source.bound, source.what)


def numpy_dtype(
    node: cst.BaseExpression, resolve: Callable[[cst.BaseExpression], str | None]
) -> str | None:
    """``np.float32``, ``"float32"``, ``float``: the numpy dtype named, or None."""
    if isinstance(node, cst.SimpleString):
        text = node.evaluated_value
        return NUMPY_DTYPES.get(text) if isinstance(text, str) else None
    if isinstance(node, cst.Name) and node.value in ("float", "int", "bool"):
        return NUMPY_DTYPES[node.value]
    qual = resolve(node) or ""
    head, _, leaf = qual.rpartition(".")
    return NUMPY_DTYPES.get(leaf) if head == "numpy" else None


def astype(
    node: cst.Call, receiver: Fact, resolve: Callable[[cst.BaseExpression], str | None]
) -> Fact | None:
    """``arr.astype(np.float32)``: a numpy array of that dtype (torch tensors have no
    ``astype``); None when the dtype is not one numpy names."""
    if not node.args or node.args[0].keyword is not None or not receiver.is_tensor:
        return None
    dtype = numpy_dtype(node.args[0].value, resolve)
    if dtype is None:
        return None
    text = f"a numpy {dtype} array made by `.astype` (data, not the model's activation)"
    prec, cause = _prec(dtype), Cause.DATA
    if prec is Prec.HALF:
        cause, text = Cause.CAST, f"cast to {dtype} by `.astype`"
    return Fact(Kind.TENSOR, prec, dtype, Origin(node, cause, text))


def transform(name: str, args: tuple[Fact, ...]) -> Fact | None:
    """A to-tensor transform built by ``name(...)`` (``ToTensor()``, a ``Compose([...])``
    holding one), or None."""
    if not name.startswith("torchvision.transforms."):
        return None
    leaf = name.rsplit(".", 1)[-1]
    if leaf in TO_TENSOR_TRANSFORMS:
        return Fact(Kind.OTHER, layer=TRANSFORM)
    if leaf == "Compose" and args and args[0].kind is Kind.SEQ:
        items = args[0].items or ((args[0].elem,) if args[0].elem else ())
        if any(f.layer == TRANSFORM for f in items):
            return Fact(Kind.OTHER, layer=TRANSFORM)
    return None


def transformed(node: cst.CSTNode, code: str) -> Fact:
    """The output of a to-tensor transform called on a picture: ``to_tensor``'s row."""
    row = SOURCES["torchvision.transforms.functional.to_tensor"]
    return _loaded_value(node, row.dtype, None, f"`{code}`", row.bound)


def picture_method(receiver: Fact, method: str) -> Fact | None:
    """``img.convert("RGB")``, ``img.resize(...)``: another picture, still of pixels."""
    if receiver.kind is Kind.OTHER and receiver.layer == PICTURE and method in PICTURE_METHODS:
        return receiver
    return None


def _loaded_value(
    node: cst.CSTNode,
    dtype: str,
    index: int | None,
    what: str,
    bound: float | None = None,
    kind: str = "data",
) -> Fact:
    if kind == "array":
        text = f"made {dtype} (numpy's default float) by {what}"
        if dtype != "float64":
            text = f"made {dtype} by {what}"
        origin = Origin(node, Cause.FACTORY, text)
    else:
        text = f"{dtype} as loaded by {what} (data, not the model's activation)"
        origin = Origin(node, Cause.DATA, text)
    prec = _prec(dtype)
    if prec is Prec.HALF:  # ``sf.read(p, dtype="float16")``: half because the code says so
        origin = Origin(node, Cause.CAST, f"loaded as {dtype} by {what}")
    tensor = Fact(Kind.TENSOR, prec, dtype, origin, bound=bound)
    if index is None:
        return tensor
    items = tuple(tensor if i == index else UNKNOWN for i in range(2))
    return Fact(Kind.SEQ, items=items)


def _prec(dtype: str) -> Prec:
    if dtype in ("float16", "bfloat16"):
        return Prec.HALF
    if dtype.startswith("float"):
        return Prec.FULL
    return Prec.BOOL if dtype == "bool" else Prec.INT
