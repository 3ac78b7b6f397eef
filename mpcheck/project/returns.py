"""Which top-level functions return no model: every ``return`` of theirs returns a tensor.

A half cast of what a project function returns (``rand_gumbel(x.size()).to(dtype=x.dtype)``,
``mask = sequence_mask(n, t); mask.to(dtype)``) casts a model only if the function may return
one. ``nn.Module`` has no arithmetic, no indexing, no ``view`` or ``unsqueeze``: a function
whose every ``return`` is a torch function's value (``torch.cat(...)``, ``F.pad(...)``), an
arithmetic or comparison (``a * b``, ``x < n``), an indexed value or a tensor-only method's
value (``mask.unsqueeze(1)``), a number or ``None`` -- directly or through the names its own
body binds so -- returns a tensor, never a model, and a cast of its value is no half path of a
model (:func:`mpcheck.project.models.uses_of_records`). So does one returning the value of a
project function that returns a tensor (``sequence_mask(n, t).to(mask.dtype)``): such a
function is recorded with the functions it depends on (``pkg.f<pkg.g``), which the join of the
records settles across files. A module's parameters read (``layer.weight``, ``.grad``) and its
parameter and state readers (``parameters()``, ``state_dict()``) give tensors; a data library's
function (numpy, PIL, ``cv2``, ``torchaudio.load``), a method of such a value
(``Image.open(p).convert("RGB")``) and a torchvision transform the body builds, called, give an
array, an image or samples: no model either. A parameter is what the caller hands, a model if it
hands one, unless every call uses it as a tensor first (a tensor-only method or ``shape`` in a
statement every call runs before any ``return`` and before it is rebound:
``tensor.uniform_(...)``, ``latents = latents.view(...)``): a module has none, so a call handing
one raises there. Calling a parameter annotated as a torch module (``norm: nn.Module``,
``norm(x)``) runs its ``forward``: activations, no model, unless the body binds it anew. A
nested ``def``'s returns are its own. Anything else (a parameter, a value
built by name, a library call, ``torch.load``) may be a model: unknown.

This reads the blanked code of the record pass (:func:`mpcheck.project.records.blank`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Collection, Mapping, Sequence

from mpcheck.project.brackets import closing, opening, parts
from mpcheck.project.construction import body_end
from mpcheck.project.patterns import compiled

__all__ = [
    "NEEDS",
    "POSITION",
    "annotated_returns",
    "params_of",
    "returned_annotation",
    "tensor_returns",
]

NEEDS = "<"  # ``pkg.f<pkg.g,pkg.h``: ``f`` returns tensors if ``g`` and ``h`` do
# ``pkg.f#1``: the second item of the tuple ``f`` returns is no project model (``pkg.f#``: its
# whole value), the same ``<`` needs after it
POSITION = "#"

# Methods of a tensor that ``nn.Module`` lacks: their value is a tensor (or a number).
_TENSOR_METHODS = frozenset(
    """unsqueeze squeeze view reshape permute transpose contiguous clone detach flatten repeat
    expand narrow flip roll masked_fill masked_fill_ sum mean exp log pow sqrt rsqrt clamp
    clamp_ abs sin cos softmax log_softmax sigmoid tanh long int bool numel type_as view_as
    expand_as repeat_interleave cumsum cumprod max min argmax argmin norm std var round floor
    ceil neg reciprocal unfold gather scatter index_select masked_select matmul mm bmm t
    squeeze_ unsqueeze_ add mul sub div add_ mul_ sub_ div_ fill_ zero_ uniform_ normal_
    exponential_ bernoulli to_dense chunk split tolist item triu tril lt gt le ge eq ne
    logical_not logical_and logical_or any all nonzero sort topk""".split()
)
# A module's parameters and buffers read (``layer.weight``, ``w.grad``) are tensors; its
# parameter, buffer and state readers return iterators or dicts of tensors: none is a model.
_PARAMETER_READS = frozenset({b"weight", b"bias", b"data", b"grad"})
_PARAMETER_METHODS = frozenset(
    {"parameters", "named_parameters", "buffers", "named_buffers", "state_dict"}
)
# Data libraries' functions: an array, an image, audio samples or a number, never a module
# (``np.load``, ``PIL.Image.open``, ``cv2.imread``, ``torchaudio.load``, a torchvision
# transform's function).
_DATA_CALLS = (
    "numpy.",
    "PIL.",
    "cv2.",
    "imageio.",
    "soundfile.",
    "librosa.",
    "torchaudio.load",
    "torchaudio.functional.",
    "torchvision.io.",
    "torchvision.transforms.functional.",
)
# A use of a name (``%s``) only a tensor or an array has: a tensor-only method, its shape.
# Where transforms live: an instance called gives a tensor or an image.
_TRANSFORMS = ("torchvision.transforms.", "torchaudio.transforms.")
_CALLEE = re.compile(rb"[ \t]*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)[ \t]*\(")
_TENSOR_USE = (
    rb"(?<![\w.])%s\s*\.\s*(?:(?:"
    + b"|".join(sorted(m.encode() for m in _TENSOR_METHODS))
    + rb")\s*\(|(?:shape|ndim)\b)"
)
# Methods a module has too and that return the receiver: their value is the receiver's.
_SELF_METHODS = frozenset({"to", "float", "half", "bfloat16", "double", "cuda", "cpu"})
# ... and those only a module has (``model.eval()``, ``model.requires_grad_(False)``)
_MODULE_SELF = _SELF_METHODS | {"eval", "train", "requires_grad_"}
_MODULE_SELF_TEXT = b"|".join(sorted(m.encode() for m in _MODULE_SELF))
# torch's own tensor functions (``torch.cat``, ``torch.nn.functional.pad``): not ``torch.load``
# or ``torch.compile`` (a model's), nor anything of ``torch.nn`` but its functional ops.
_TENSOR_FUNCTION = re.compile(
    r"torch\.(?:(?:nn\.functional|fft|linalg|special)\.)?(?!load\b|compile\b)[a-z_]\w*\Z"
)
_NAME = re.compile(rb"[A-Za-z_]\w*\Z")
_NUMBER = re.compile(rb"-?\s*(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[jJ]?\Z")
_DOTTED = re.compile(rb"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\Z")
# (The look-behind after the first letter: a pattern led by one is tried at every offset,
# one led by a letter only where that letter is, four to ten times faster.)
_RETURN = re.compile(rb"r(?<![\w.]r)eturn\b[ \t]*")
_NESTED = re.compile(rb"^([ \t]+)(?:async[ \t]+)?(?:def|class)[ \t]+\w", re.MULTILINE)
_YIELD = re.compile(rb"\byield\b")
_STATEMENT = re.compile(rb"^([ \t]+)\S", re.MULTILINE)
# What makes the rest of a line run only on some runs (``if c: x.view()``, ``c and x.view()``)
_CONDITIONAL = re.compile(
    rb"^\s*(?:if|elif|else|while|for|try|except|finally|match|case)\b|\s(?:if|and|or|lambda)\s"
)
# An operator outside brackets: arithmetic, comparison, bitwise, matmul (``**`` too).
_OPERATOR = re.compile(rb"[-+*/%@<>&|^~]|==|!=")
_KEYWORD_OPS = re.compile(rb"\s(?:if|else|and|or|not|in|is|lambda)\s")
_DEPTH = 4
_LITERAL_OPERAND = re.compile(rb"(?:^|[-+*/%@<>&|^~=!])[ \t]*[\[({]")
_BRACKET = re.compile(rb"[()\[\]{}]")
_ASSIGN = re.compile(
    rb"^[ \t]+([A-Za-z_]\w*)[ \t]*([-+*/@%&|^]|\*\*|//|>>|<<)?=(?!=)", re.MULTILINE
)
_WORDS = re.compile(rb"(?<![\w.])[A-Za-z_]\w*")
_IDENTIFIER = re.compile(rb"[A-Za-z_]\w*")
_ARROW = re.compile(rb"\s*->\s*")
_OPTIONAL = re.compile(rb"^(?:typing\.)?Optional\[\s*(.*)\s*\]$", re.S)
_OR_NONE = re.compile(rb"\s*\|\s*None\b|\bNone\s*\|\s*")
_TUPLE = re.compile(rb"(?:typing\.)?(?:tuple|Tuple)\[(.*)\]", re.S)
# Types whose values are no module (with every ``...Tensor`` name of torch)
_NO_MODEL_TYPES = frozenset(
    "None Optional Union Tuple tuple List list Sequence Dict dict Mapping int float bool str "
    "bytes complex ndarray typing torch np numpy".split()
)
_TARGET = re.compile(rb"([^=]*?)(?:[-+*/@%&|]|\*\*|//)?=(?!=)")  # (an assignment's targets)


def tensor_returns(
    code: bytes,
    headers: Sequence[re.Match[bytes]],
    module: str,
    imports: Mapping[str, str],
    libraries: Collection[str] = (),
) -> tuple[str, ...]:
    """The qualified top-level functions of the file (``headers``: its ``def`` matches, the
    indent in group 1 and the name in group 2) every ``return`` of which returns a tensor
    (see the module docstring), each with the project functions it needs to return tensors
    too, if any (``pkg.f<pkg.g,pkg.h``: the names as this file's imports spell them).
    ``libraries``: import roots that are no project's (with torch's and the standard
    library's): a value of theirs other than torch's tensor functions is unknown here (a
    model, for ``torch.load``), not a need for the join."""
    foreign = frozenset({"torch", *libraries}) | sys.stdlib_module_names
    tops = [h for h in headers if not h.group(1)]
    local = {
        h.group(2).decode(): f"{module}.{h.group(2).decode()}" if module else h.group(2).decode()
        for h in tops
    }
    out = []
    for header in tops:
        name = local[header.group(2).decode()]
        annotated = returned_annotation(code, header.end())
        if annotated is not None and _holds_no_model(annotated, imports):
            out.append(name)  # (its annotation says it returns no model: PEP 484)
            continue
        end = body_end(code, header.end(), 0)
        needs = _returns_tensors(code, header.end(), end, imports, local, foreign)
        if needs is not None:
            needs.discard(name)  # (a recursive call returns what the function returns)
            out.append(f"{name}{NEEDS}{','.join(sorted(needs))}" if needs else name)
            continue
        for index, wanted in _library_positions(code, header.end(), end, imports, local, foreign):
            wanted.discard(name)
            entry = f"{name}{POSITION}{'' if index < 0 else index}"
            out.append(f"{entry}{NEEDS}{','.join(sorted(wanted))}" if wanted else entry)
    return tuple(sorted(out))


def returned_annotation(code: bytes, start: int) -> bytes | None:
    """The return annotation of the ``def`` whose name ends before ``start`` (``-> Tensor``:
    ``Tensor``), None when it has none."""
    open_at = code.find(b"(", start)
    if open_at < 0 or code[start:open_at].strip():
        return None
    close = closing(code, open_at + 1)
    arrow = _ARROW.match(code, close + 1)
    if arrow is None:
        return None
    depth = 0
    for i in range(arrow.end(), min(len(code), arrow.end() + 400)):
        c = code[i]
        if c in b"([{":
            depth += 1
        elif c in b")]}":
            depth -= 1
        elif c == 0x3A and depth == 0:  # (the ``:`` ending the header)
            text = b" ".join(code[arrow.end() : i].split())
            return text or None
    return None


def annotated_returns(annotation: bytes) -> list[tuple[int, bytes]]:
    """The class names a return annotation says a function returns, each with its position
    in the tuple it returns (-1: the whole value): ``Model`` and ``Optional[Model]`` and
    ``Model | None`` give ``[(-1, b"Model")]``, ``tuple[Tokenizer, Model]`` gives
    ``[(0, b"Tokenizer"), (1, b"Model")]``; nothing for anything else (a union of classes,
    a ``list[Model]``)."""
    text = _OPTIONAL.sub(rb"\1", annotation.strip())
    text = _OR_NONE.sub(b"", text).strip()
    if _DOTTED.match(text):
        return [(-1, text)]
    found = _TUPLE.fullmatch(text)
    if found is None:
        return []
    out = []
    for i, (begin, stop) in enumerate(parts(found.group(1), 0, len(found.group(1)))):
        item = found.group(1)[begin:stop]
        item = _OR_NONE.sub(b"", _OPTIONAL.sub(rb"\1", item.strip())).strip()
        if _DOTTED.match(item):
            out.append((i, item))
    return out


def _holds_no_model(annotation: bytes, imports: Mapping[str, str]) -> bool:
    """Whether a return annotation names only types that are no module: tensors, numbers,
    strings, ``None``, numpy arrays and containers of them (``tuple[Tensor, Tensor]``,
    ``Optional[torch.FloatTensor]``). A function annotated so returns no model (PEP 484: the
    annotation is what it returns; a module there would be a lie a type checker reports)."""
    words = [w.decode() for w in _IDENTIFIER.findall(annotation)]
    if not words:
        return False
    return all(
        w in _NO_MODEL_TYPES or (w.endswith("Tensor") and imports.get(w, "torch")[:5] == "torch")
        for w in words
    )


def _returns_tensors(
    code: bytes,
    start: int,
    end: int,
    imports: Mapping[str, str],
    local: Mapping[str, str],
    foreign: frozenset[str],
) -> set[str] | None:
    """The project functions whose returning tensors this function's tensor returns need
    (empty: none), or None when some ``return`` may return anything else."""
    body = _body(code, start, end, imports, local, foreign)
    if body is None or _YIELD.search(code, start, end):  # (a generator)
        return None
    found = False
    for match in _own_returns(code, start, end):
        found = True
        stop = _line_end(code, match.end(), end)
        if not body.tensor(code[match.end() : stop], 0):
            return None
    return body.needs if found else None


def _own_returns(code: bytes, start: int, end: int) -> list[re.Match[bytes]]:
    """The ``return`` statements of the function whose body runs from ``start`` to ``end``:
    a nested ``def`` or ``class`` returns for itself, so its body's are left out."""
    nested = [
        (m.start(), body_end(code, m.end(), len(m.group(1))))
        for m in _NESTED.finditer(code, start, end)
    ]
    return [
        m
        for m in _RETURN.finditer(code, start, end)
        if not any(begin <= m.start() < stop for begin, stop in nested)
    ]


def _library_positions(
    code: bytes,
    start: int,
    end: int,
    imports: Mapping[str, str],
    local: Mapping[str, str],
    foreign: frozenset[str],
) -> list[tuple[int, set[str]]]:
    """The positions of the tuple this function returns (-1: the whole value) that hold no
    project model in every ``return``: a library class's instance (``CLIPTextModel(cfg)``,
    ``AutoencoderKL.from_pretrained(...)``), a tensor, ``None``; each with the project
    functions its tensors need (see :func:`_returns_tensors`)."""
    body = _body(code, start, end, imports, local, foreign)
    if body is None or _YIELD.search(code, start, end):
        return []
    returned: list[list[bytes]] = []
    for match in _own_returns(code, start, end):
        text = code[match.end() : _line_end(code, match.end(), end)].strip().rstrip(b";")
        text = text.strip()
        if text[:1] == b"(" and closing(text, 1) == len(text) - 1:
            text = text[1:-1]
        items = [e.strip() for e in _top_level(text, b",")]
        if items and not items[-1]:
            items.pop()  # (a trailing comma)
        returned.append(items)
    if not returned or len({len(items) for items in returned}) != 1:
        return []
    width = len(returned[0])
    out = []
    for index in range(width):
        body.needs = set()  # (each position needs its own functions; the bindings are shared)
        if all(body.no_model(items[index], 0) for items in returned):
            out.append((index if width > 1 else -1, body.needs))
    return out


def _body(
    code: bytes,
    start: int,
    end: int,
    imports: Mapping[str, str],
    local: Mapping[str, str],
    foreign: frozenset[str],
) -> _Body | None:
    """The body of the function whose name ends before ``start``, read with its parameters
    (what both readers of its returns start from); None when its ``def`` cannot be read."""
    params = params_of(code, start)
    if params is None:
        return None
    return _Body(
        code, start, end, params, imports, local, foreign, _module_params(code, start, imports)
    )


def _module_params(code: bytes, start: int, imports: Mapping[str, str]) -> frozenset[bytes]:
    """The parameters of the ``def`` whose name ends before ``start`` annotated as a torch
    module (``layer: nn.Module``, ``norm: torch.nn.LayerNorm``): calling one runs its
    ``forward``, whose value is activations, not a model (PEP 484: the annotation is what the
    callers hand)."""
    open_at = code.find(b"(", start)
    out = set()
    for begin, stop in parts(code, open_at + 1, closing(code, open_at + 1)):
        name, colon, annotation = code[begin:stop].partition(b":")
        annotation = annotation.partition(b"=")[0].strip()
        if not colon or not _DOTTED.match(annotation):
            continue
        first, _, rest = annotation.decode().partition(".")
        found = imports.get(first, "")
        qualified = f"{found}.{rest}" if rest else found
        if qualified == "torch.nn.Module" or qualified.startswith("torch.nn.modules."):
            out.add(name.strip())
        elif qualified.startswith("torch.nn.") and qualified.rpartition(".")[2][:1].isupper():
            out.add(name.strip())
    return frozenset(out)


def params_of(code: bytes, start: int) -> set[bytes] | None:
    """The parameter names of the ``def`` whose name ends before ``start``."""
    open_at = code.find(b"(", start)
    if open_at < 0 or code[start:open_at].strip():
        return None
    close = closing(code, open_at + 1)
    out = set()
    for begin, stop in parts(code, open_at + 1, close):
        text = code[begin:stop].strip().lstrip(b"*")
        name = re.split(rb"[:=]", text, maxsplit=1)[0].strip()
        if name:
            out.add(name)
    return out


def _line_end(code: bytes, at: int, end: int) -> int:
    """Where the logical line from ``at`` ends (brackets and ``\\`` continue it)."""
    depth, i = 0, at
    while i < end:
        nl = code.find(b"\n", i, end)
        stop = end if nl < 0 else nl
        part = code[i:stop]
        depth += sum(part.count(c) for c in (b"(", b"[", b"{"))
        depth -= sum(part.count(c) for c in (b")", b"]", b"}"))
        if nl < 0 or (depth <= 0 and not part.endswith(b"\\")):
            return stop
        i = nl + 1
    return end


class _Body:
    """One function body's names, read through their assignments."""

    def __init__(
        self,
        code: bytes,
        start: int,
        end: int,
        params: set[bytes],
        imports: Mapping[str, str],
        local: Mapping[str, str],
        foreign: frozenset[str],
        modules: frozenset[bytes] = frozenset(),
    ) -> None:
        self.code, self.start, self.end = code, start, end
        self.params, self.imports, self.local = params, imports, local
        self.modules = modules  # (parameters annotated as a torch module: :func:`_module_params`)
        self.foreign = foreign  # (import roots whose functions are no project's)
        self.needs: set[str] = set()  # project functions whose values it returns
        self._assigned: dict[bytes, list[tuple[bytes, int]]] | None = None
        self._otherwise: set[bytes] = set()

    def tensor(self, text: bytes, depth: int) -> bool:
        """Whether the expression ``text`` is a tensor, a number or ``None``."""
        text = text.strip().rstrip(b";").strip()
        if not text or depth > _DEPTH:
            return bool(text == b"") and depth <= _DEPTH
        elements = _top_level(text, b",")
        if len(elements) > 1:
            return all(self.tensor(e, depth) for e in elements if e.strip())
        if text in (b"None", b"True", b"False") or _NUMBER.match(text):
            return True
        if _KEYWORD_OPS.search(_flat(text)):
            if b" if " in _flat(text) and b" else " in _flat(text):
                head, _, other = _flat_split(text, b" else ")
                value = _flat_split(head, b" if ")[0]
                return self.tensor(value, depth + 1) and self.tensor(other, depth + 1)
            return False
        flat = _flat(text)
        if _OPERATOR.search(flat.lstrip(b"-+~ ")):
            # (no module has arithmetic or comparisons; a list's does: ``[model] * 2``)
            return not _literal_operand(text)
        if text[:1] == b"(" and closing(text, 1) == len(text) - 1:
            return self.tensor(text[1:-1], depth + 1)
        if text.endswith(b"]") and text[:1] not in b"[{":
            at = opening(text, len(text) - 1)  # an indexed tensor (not a list of models)
            return at > 0 and self.tensor(text[:at], depth + 1)
        if text.endswith(b")"):
            return self._call(text, depth)
        if _NAME.match(text):
            return self._name(text, depth)
        if _DOTTED.match(text) and text.rpartition(b".")[2] in _PARAMETER_READS:
            return True  # (``layer.weight``: a parameter, a tensor)
        return False

    def no_model(self, text: bytes, depth: int) -> bool:
        """Whether the expression ``text`` is no project model: a tensor, a number, ``None``,
        or an instance of a library's class (its constructor or a loader of it,
        ``CLIPTextModel._from_config(cfg)``, ``AutoencoderKL.from_pretrained(...)``, moved
        or cast: ``.to(device)``), directly or through the names its body binds so. An
        ``Auto`` class or a pipeline builds what a checkpoint names, maybe a project class
        registered with it: unknown."""
        text = text.strip()
        if not text or depth > _DEPTH:
            return False
        if self.tensor(text, depth):
            return True
        if _NAME.match(text):
            return self._name(text, depth, self.no_model)
        call = _split_call(text)
        if call is None:
            return False
        at, head = call
        receiver, dot, method = head.rpartition(b".")
        if dot and method.decode() in _MODULE_SELF and not _DOTTED.match(head):
            return self.no_model(receiver, depth + 1)  # (``CLIPTextModel(cfg).to(device)``)
        if not _DOTTED.match(head):
            return False
        if dot and method.decode() in _MODULE_SELF:
            return self.no_model(receiver, depth + 1)  # (``text_model.to(device)``)
        loader = dot and (method.startswith(b"from_") or method.startswith(b"_from_"))
        if loader:
            head = receiver
        first, _, rest = head.decode().partition(".")
        found = self.imports.get(first, "")
        leaf = (rest or first).rpartition(".")[2]
        if not found or found.partition(".")[0] not in self.foreign or not leaf[:1].isupper():
            return False
        if leaf.startswith("Auto") or leaf.endswith("Pipeline"):
            return False
        # (a loader fills the class from a checkpoint or a configuration; a constructor holds
        # what it is handed, ``nn.Sequential(Block())``, ``DDP(model)``: only data, no module)
        return bool(loader) or self._data_only(text, at, depth)

    def _data_only(self, text: bytes, at: int, depth: int) -> bool:
        """Whether every argument of the call whose ``(`` is at ``at`` is a literal or no
        project model (no splat, no parameter, no value the body does not show)."""
        for begin, stop in parts(text, at + 1, len(text) - 1):
            value = text[begin:stop].strip()
            keyword = re.match(rb"[A-Za-z_]\w*\s*=(?!=)", value)
            value = value[keyword.end() :].strip() if keyword else value
            if not value or value[:1] in b"\"'" or value in (b"True", b"False"):
                continue
            if value.startswith(b"*") or not self.no_model(value, depth + 1):
                return False
        return True

    def _call(self, text: bytes, depth: int) -> bool:
        call = _split_call(text)
        if call is None:
            return False
        head = call[1]
        if head in self.modules and not self._rebinds(head):
            return True  # (``norm(x)`` of ``norm: nn.Module``: its forward's activations)
        if _DOTTED.match(head):  # ``torch.cat(...)``, ``F.pad(...)``: by what it names
            callee = head.decode()
            first, _, rest = callee.partition(".")
            found = self.imports.get(first, first)
            if _TENSOR_FUNCTION.match(f"{found}.{rest}" if rest else found):
                return True
            if not rest and self._transform(head):  # (``transform(image)``: its product)
                return True
            if first in self.local and not rest:  # (a function of this file)
                self.needs.add(self.local[first])
                return True
            if first in self.imports:
                qualified = f"{found}.{rest}" if rest else found
                if qualified.startswith(_DATA_CALLS):  # (an array, an image, a number)
                    return True
                if found.partition(".")[0] in self.foreign:  # (``re.sub``: no tensor method)
                    return False
                self.needs.add(f"{found}.{rest}" if rest else found)  # (settled at the join)
                return True
        receiver, dot, method = head.rpartition(b".")
        if not dot or not receiver.strip() or not _NAME.match(method):
            return False
        if method.decode() in _TENSOR_METHODS or method.decode() in _PARAMETER_METHODS:
            return True
        if self._data(receiver):  # (``Image.open(p).convert("RGB")``: the library's value)
            return True
        if method.decode() in _SELF_METHODS:
            return self.tensor(receiver, depth + 1)
        return False

    def _data(self, text: bytes) -> bool:
        """Whether ``text`` calls a data library's function (``np.load(p)``, ``Image.open(p)``)
        or a method of such a value: an array, an image, samples; their methods are the
        library's code, which builds no model of the project."""
        text = text.strip()
        call = _split_call(text)
        if call is None:
            return False
        at, head = call
        if _DOTTED.match(head):
            first, _, rest = head.decode().partition(".")
            found = self.imports.get(first)
            return bool(found) and f"{found}.{rest}".startswith(_DATA_CALLS)
        receiver, dot, method = head.rpartition(b".")
        return bool(dot) and bool(_NAME.match(method)) and self._data(receiver)

    def _transform(self, name: bytes) -> bool:
        """Whether every binding of ``name`` in the body builds a torchvision or torchaudio
        transform (``transform = T.Compose([...])``): calling one gives a tensor or an
        image, never a model."""
        if self._assigned is None:
            self._read_bindings()
        assert self._assigned is not None
        bindings = self._assigned.get(name)
        if not bindings or name in self.params or name in self._otherwise:
            return False
        for op, at in bindings:
            found = None if op else _CALLEE.match(self.code, at)
            if found is None:
                return False
            first, _, rest = found.group(1).decode().partition(".")
            qualified = f"{self.imports.get(first, '')}.{rest}" if rest else self.imports.get(first)
            if not qualified or not qualified.startswith(_TRANSFORMS):
                return False
        return True

    def _name(
        self, name: bytes, depth: int, value: Callable[[bytes, int], bool] | None = None
    ) -> bool:
        """Whether every binding of ``name`` in the body is a tensor (``value``: a test of
        the value in its stead)."""
        if self._assigned is None:
            self._read_bindings()
        assert self._assigned is not None
        if name in self.params:
            if name in self._otherwise or not self._used_as_tensor(name):
                return False
            if name not in self._assigned:
                return True  # (what the caller hands, a tensor)
        elif name in self._otherwise or name not in self._assigned:
            return False
        test = self.tensor if value is None else value
        bindings = self._assigned[name]
        if value is not None:  # (``te = te.eval()``: the same value, whatever the others are)
            again = compiled(
                rb"[ \t]*" + re.escape(name) + rb"\s*\.\s*(?:" + _MODULE_SELF_TEXT + rb")\s*\("
            )
            bindings = [(op, at) for op, at in bindings if op or not again.match(self.code, at)]
        return bool(bindings) and all(
            (op and value is None)
            or (not op and test(self.code[at : _line_end(self.code, at, self.end)], depth + 1))
            for op, at in bindings
        )

    def _used_as_tensor(self, name: bytes) -> bool:
        """Whether the parameter ``name`` is a tensor (or an array) by its use: a statement
        every call runs (in the body's own block or a ``with`` block of it), before any
        ``return`` and before ``name`` is rebound, calls a tensor-only method of it
        (``x.view(...)``, ``x.uniform_(...)``) or reads its ``shape`` or ``ndim``. A module
        has none of them: a call handing one would raise there, so the function returns what
        it is handed only when that is no model."""
        code, start, end = self.code, self.start, self.end
        assert self._assigned is not None
        limit = end
        bound = self._assigned.get(name)
        if bound:  # (``x = x.view(...)``: the value reads the parameter before it rebinds)
            limit = _line_end(code, bound[0][1], end)
        first = next(iter(_own_returns(code, start, end)), None)
        if first is not None:
            limit = min(limit, first.start())
        used = compiled(_TENSOR_USE % re.escape(name))
        begin = _body_start(code, start)
        base = _body_indent(code, begin, end)
        return base is not None and any(
            _unconditional(code, begin, m.start(), base) for m in used.finditer(code, begin, limit)
        )

    def _rebinds(self, name: bytes) -> bool:
        """Whether the body binds ``name`` anew (then it may hold anything)."""
        if self._assigned is None:
            self._read_bindings()
        return name in self._otherwise or name in (self._assigned or {})

    def _read_bindings(self) -> None:
        """Each name's plain assignments (``x = ...``, ``x += ...``: the operator, where
        the value starts), and the names bound otherwise: a loop, ``as``, a tuple target,
        ``:=``, ``global``."""
        self._assigned = {}
        for match in _ASSIGN.finditer(self.code, self.start, self.end):
            self._assigned.setdefault(match.group(1), []).append((match.group(2), match.end()))
        for line in self.code[self.start : self.end].split(b"\n"):
            text = line.strip()
            if text.startswith((b"for ", b"async for ", b"global ", b"nonlocal ", b"with ")):
                self._otherwise.update(_WORDS.findall(text))
            elif b":=" in text or b" as " in text or b"except" in text:
                self._otherwise.update(_WORDS.findall(text))
            else:
                # (the ``=`` outside brackets: ``f(x, dtype=d)`` binds nothing)
                target = _TARGET.match(_flat(text))
                if target is None:
                    continue
                names = text[: len(target.group(1))]
                if b"," in target.group(1) or names.lstrip().startswith((b"(", b"[")):
                    self._otherwise.update(_WORDS.findall(names))


def _body_start(code: bytes, start: int) -> int:
    """Where the body of the ``def`` whose name ends before ``start`` starts: the line after
    its parameters' closing bracket."""
    open_at = code.find(b"(", start)
    after = closing(code, open_at + 1) if open_at >= 0 else start
    return code.find(b"\n", after) + 1


def _body_indent(code: bytes, begin: int, end: int) -> int | None:
    """The indent of the first statement of the body starting at ``begin``."""
    found = _STATEMENT.search(code, begin, end)
    return None if found is None else len(found.group(1))


def _unconditional(code: bytes, begin: int, at: int, base: int) -> bool:
    """Whether every run of the body (from ``begin``, its statements at ``base``) runs the
    code at ``at``: a simple statement (no condition before ``at`` on its line) in the body's
    own block or in ``with`` blocks of it."""
    line_start = code.rfind(b"\n", 0, at) + 1
    head = code[line_start:at]
    indent = len(head) - len(head.lstrip(b" \t"))
    if _CONDITIONAL.search(b" " + _flat(head.strip()) + b" "):
        return False
    for line in reversed(code[begin:line_start].split(b"\n")):
        text = line.lstrip(b" \t")
        if indent <= base:
            break
        if not text or len(line) - len(text) >= indent:
            continue
        if not text.startswith((b"with ", b"async with ")):
            return False  # (an ``if``, a loop, a ``try``: a block some runs skip)
        indent = len(line) - len(text)
    return indent == base


def _split_call(text: bytes) -> tuple[int, bytes] | None:
    """A call's text split at its argument list: where its ``(`` is, and the callee's text
    (``np.load`` of ``np.load(p)``); None when ``text`` is no call."""
    if not text.endswith(b")"):
        return None
    at = opening(text, len(text) - 1)
    return (at, text[:at].rstrip()) if at > 0 else None


def _literal_operand(text: bytes) -> bool:
    """Whether an operand of ``text``'s top-level operators is a list, dict, set or tuple
    literal (``[model] * 2``, ``(model,) * 2``); a parenthesised expression (``x / (n - 1)``)
    is none."""
    for match in _LITERAL_OPERAND.finditer(_flat(text)):
        at = match.end() - 1
        if text[at : at + 1] != b"(":
            return True
        inner = text[at + 1 : closing(text, at + 1)]
        if not inner.strip() or b"," in _flat(inner):
            return True
        if _OPERATOR.search(_flat(inner)) and _literal_operand(inner):
            return True  # (``(models + [m]) * 2``)
    return False


def _flat(text: bytes) -> bytes:
    """``text`` with what brackets hold blanked (its top-level operators stay)."""
    if not _BRACKET.search(text):
        return text
    out, depth, last = bytearray(), 0, 0
    for match in _BRACKET.finditer(text):
        at = match.start()
        if text[at] in b")]}":
            depth -= 1
            if depth == 0:
                out += b" " * (at - last)
                last = at
        else:
            if depth == 0:
                out += text[last : at + 1]
                last = at + 1
            depth += 1
    out += text[last:] if depth <= 0 else b" " * (len(text) - last)
    return bytes(out)


def _flat_split(text: bytes, word: bytes) -> tuple[bytes, bytes, bytes]:
    at = _flat(text).find(word)
    if at < 0:
        return text, b"", b""
    return text[:at], word, text[at + len(word) :]


def _top_level(text: bytes, sep: bytes) -> list[bytes]:
    flat, out, begin = _flat(text), [], 0
    at = flat.find(sep)
    while at >= 0:
        out.append(text[begin:at])
        begin = at + len(sep)
        at = flat.find(sep, begin)
    out.append(text[begin:])
    return out
