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

import libcst as cst

from mpcheck.engine.facts import UNKNOWN, Cause, Fact, Kind, Origin, Prec
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


# Functions that load or convert data, by qualified name: the dtype of what they return and,
# for a tuple, which item is the tensor (``wav, sr = torchaudio.load(p)``). A decoder gives
# float32 whatever the model runs in: a waveform or a picture is not an activation of the
# model, so it is float32 where it meets ops, never "half when the model runs in half".
LOADERS: dict[str, tuple[str, int | None]] = {
    "torchaudio.load": ("float32", 0),  # (waveform, sample_rate): float32 in [-1, 1]
    "torchaudio.load_with_torchcodec": ("float32", 0),
    "torchvision.transforms.functional.to_tensor": ("float32", None),  # PIL -> [0, 1]
}
# Transforms whose instances turn a picture into a float32 tensor when called
# (``transforms.ToTensor()(img)``); a ``Compose`` holding one ends in float32 too (the
# ``Normalize`` after it keeps the dtype).
TO_TENSOR_TRANSFORMS = frozenset({"ToTensor"})
TRANSFORM = "data-transform"  # the ``layer`` of a fact holding such a transform


def loaded(name: str, node: cst.CSTNode) -> Fact | None:
    """What ``name(...)`` returns when it is a known loader, or None."""
    if name not in LOADERS:
        return None
    dtype, index = LOADERS[name]
    return _loaded_value(node, dtype, index, f"`{name.rsplit('.', 1)[-1]}`")


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
    """The output of a to-tensor transform called on a picture."""
    return _loaded_value(node, "float32", None, f"`{code}`")


def _loaded_value(node: cst.CSTNode, dtype: str, index: int | None, what: str) -> Fact:
    text = f"{dtype} as loaded by {what} (data, not the model's activation)"
    tensor = Fact(Kind.TENSOR, Prec.FULL, dtype, Origin(node, Cause.DATA, text))
    if index is None:
        return tensor
    items = tuple(tensor if i == index else UNKNOWN for i in range(2))
    return Fact(Kind.SEQ, items=items)
