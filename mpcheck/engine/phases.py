"""Which values hold positions, timesteps or rotary frequencies, and where phases are made.

Half precision holds integers exactly only up to 2048 (float16) and 256 (bfloat16), so a
position, a timestep (0..1000) or a phase ``position * inv_freq`` loses whole units once it is
rounded to half: measured on torch 2.13 (../shared/reference/torch-truth.md), float16 phases
are 0.8 rad off at position 2000 and bfloat16 phases off by pi by position 1000. The dtype
facts cannot tell these values from activations, so this part names them from how code
writes them: what a value is called (``position_ids``, ``timesteps``, ``inv_freq``) and what
builds it (``torch.arange``). A rule asks two questions of a call site: is it the product of
positions by frequencies (:func:`phase_product`), and is it a timestep cast to another
tensor's or a half dtype (:func:`timestep_cast`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import libcst as cst

from mpcheck.engine.facts import Kind, Prec
from mpcheck.engine.sites import CallSite, Operand
from mpcheck.engine.timestep_uses import code_under, only_mixed, stored_under
from mpcheck.knowledge.ranges import DISTINCT_POSITIONS
from mpcheck.project.names import children

__all__ = ["PhaseProduct", "TimestepCast", "phase_product", "reaching_value", "timestep_cast"]

# Names of a tensor of positions (or of a timestep grid multiplied like one).
_POSITIONS = re.compile(
    r"(?:^|_)(?:pos|poss|position|positions|position_ids|pos_ids|seq|t|ts|grid|coords?|"
    r"timesteps?|indices|idx)(?:_|$)"
)
# Names of the rotary/sinusoidal frequencies ``1 / base ** (arange(0, dim, 2) / dim)``.
_FREQUENCIES = re.compile(
    r"(?:^|_)(?:inv_freqs?|freqs?|freqs_base|omega|frequencies|inv_timescales|exponent)(?:_|$)",
    re.IGNORECASE,
)
# Frequencies or phases by their whole name, for a cast: ``t_freq`` (DiT's sinusoidal
# embedding, cos/sin values that half holds to 3 digits) and ``freqs_cis`` are not.
_CAST_FREQUENCIES = re.compile(r"^(?:inv_freqs?|freqs|freqs_base|omega|phases?|angles)$")
# Short names that are a timestep only when bound to one (``for i, t in enumerate(timesteps)``,
# a ``forward(self, x, t)`` parameter), not an image in ``[t.to(dtype) for t in images]``.
_SHORT = frozenset({"t", "ts"})
# A tensor of timesteps (or the guidance scale that Flux embeds the same way): what a
# diffusion model's sinusoidal timestep projection turns into phases.
_TIMESTEPS = re.compile(
    r"^(?:t|ts|timesteps?|current_t|t_cur|guidance|time_steps?|sigma_t|t_in|t_input)$",
    re.IGNORECASE,
)
# What a value of timesteps or noise levels is named by (``timesteps``, ``timestep_start``,
# ``sigmas``): a short name bound from, or looping over, such a value is a timestep.
_NAMED_TIMESTEPS = re.compile(r"timestep|sigma")
# Calls and methods that keep a tensor what it holds (its shape or dtype changes only).
_KEEPS = frozenset(
    {
        "float",
        "double",
        "to",
        "type",
        "type_as",
        "unsqueeze",
        "expand",
        "expand_as",
        "repeat",
        "reshape",
        "view",
        "flatten",
        "permute",
        "transpose",
        "contiguous",
        "clone",
        "detach",
        "squeeze",
        "half",
        "bfloat16",
    }
)
# Products that turn positions and frequencies into phases. Which of them autocast runs in
# half is autocast's own table; a product of two half operands is half anyway.
_PRODUCTS = frozenset({"einsum", "matmul", "mm", "bmm", "outer", "ger", "mul"})
_CASTS = frozenset({"to", "type", "type_as", "half", "bfloat16"})
# float16 holds every integer of magnitude up to 2**11 exactly (its significand has 11 bits).
_FLOAT16_EXACT = 2048.0


@dataclass(frozen=True)
class PhaseProduct:
    """``positions x frequencies`` at a call: the two operands, as the call has them."""

    positions: Operand
    frequencies: Operand

    @property
    def in_float64(self) -> bool:
        """Whether the phases are computed in float64 whatever autocast does: autocast never
        casts a float64 operand (``cached_cast`` skips ``kDouble``; measured on torch 2.13
        CPU autocast, a float64 ``matmul`` stays float64 while the float32 one turns
        bfloat16), and a product with float64 frequencies promotes the positions to float64
        (``einsum``/``outer``/``*``; ``matmul`` of float32 by float64 raises instead). The
        positions alone may still be rounded to half by CUDA autocast, which loses nothing on
        integer positions up to 256 (bfloat16) or 2048 (float16); float64 positions with
        float32 frequencies are no such case (CUDA autocast rounds the frequencies)."""
        return _float64(self.frequencies) and self.positions.fact.prec is not Prec.HALF

    def distinct(self, dtype: str | None) -> bool:
        """Whether the positions are integers bounded so that, rounded to ``dtype`` (None:
        either half type, so bfloat16's coarser grid), each keeps a phase of its own at every
        frequency (``knowledge.ranges.DISTINCT_POSITIONS``): ``arange(n)`` for a literal or
        default ``n`` up to 128 (bfloat16) or 1024 (float16)."""
        bound = self.positions.fact.position_bound()
        limit = DISTINCT_POSITIONS.get(dtype or "", DISTINCT_POSITIONS["bfloat16"])
        return bound is not None and bound <= limit


def _float64(operand: Operand) -> bool:
    """A float64 tensor: ``torch.arange(..., dtype=torch.float64)``, ``.double()``, numpy's
    default float (``torch.from_numpy(np.linspace(...))``)."""
    return operand.fact.is_tensor and operand.fact.dtype == "float64"


@dataclass(frozen=True)
class TimestepCast:
    """A timestep cast away from float32: ``t.to(latents.dtype)``, ``timestep.half()``; or
    frequencies (phases) cast so before the product or the cos/sin: ``freqs.to(q)``."""

    timestep: Operand
    frequencies: bool  # ``timestep`` holds frequencies or phases, not a timestep
    # The target is known to be half (``.half()``, ``torch.bfloat16``, a half dtype variable),
    # not only another tensor's or a dtype variable's dtype (half when the model is).
    known_half: bool
    target: cst.BaseExpression | None  # the dtype or tensor argument, None for ``.half()``


def _root(node: cst.BaseExpression) -> cst.BaseExpression:
    """What ``node`` holds before shape and dtype changes: ``pos`` of
    ``pos.unsqueeze(2).float()[None]``, ``t`` of ``t / scale``."""
    while True:
        node = _stripped(node)
        if isinstance(node, cst.Attribute) and node.attr.value in ("T", "mT"):
            node = node.value
        elif isinstance(node, cst.BinaryOperation) and isinstance(
            node.operator, (cst.Divide, cst.Multiply)
        ):
            # ``t / interpolation_factor``: positions scaled are positions
            node = node.left
        else:
            return node


def _name(node: cst.BaseExpression) -> str | None:
    """The last name of ``self.inv_freq`` / ``inv_freq``; a string key of ``batch["t"]``."""
    root = _root(node)
    if isinstance(root, cst.Name):
        return root.value
    if isinstance(root, cst.Attribute):
        return root.attr.value
    return None


def _subscript_key(node: cst.BaseExpression) -> str | None:
    """``timesteps`` of ``batch["timesteps"]`` (the outermost string key on the way down)."""
    while True:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if node.func.attr.value not in _KEEPS:
                return None
            node = node.func.value
        elif isinstance(node, cst.Subscript):
            first = node.slice[0].slice if node.slice else None
            if isinstance(first, cst.Index) and isinstance(first.value, cst.SimpleString):
                return str(first.value.evaluated_value)
            node = node.value
        else:
            return None


def _names_dtype(node: cst.BaseExpression) -> bool:
    """``dtype``, ``weight_dtype``, ``self.config.weight_dtype``, ``x.dtype``."""
    name = node.value if isinstance(node, cst.Name) else None
    if isinstance(node, cst.Attribute):
        name = node.attr.value
    return name is not None and name.endswith("dtype")


def _weight_dtype(node: cst.BaseExpression) -> bool:
    """``layer.weight.dtype``: a layer that takes the timestep as its input (a ``Linear`` of
    the timestep) needs it in its own dtype, or raises; the rounding is that layer's."""
    return (
        isinstance(node, cst.Attribute)
        and node.attr.value == "dtype"
        and isinstance(node.value, cst.Attribute)
        and node.value.attr.value == "weight"
    )


def _matched_to_frequencies(node: cst.BaseExpression) -> bool:
    """``freqs.dtype`` / ``self.inv_freq``: a cast target that is the frequencies' dtype."""
    if isinstance(node, cst.Attribute) and node.attr.value == "dtype":
        node = node.value
    name = _name(node)
    return name is not None and _FREQUENCIES.search(name) is not None


# complex dtypes of single or double precision: a pair of float32 (float64) numbers
_WIDE_COMPLEX = frozenset({"complex64", "cfloat", "complex128", "cdouble"})


def _wide_complex(node: cst.BaseExpression) -> bool:
    """``torch.complex64`` / ``torch.cdouble``: a cast target that holds no half number."""
    return isinstance(node, cst.Attribute) and node.attr.value in _WIDE_COMPLEX


def _is_arange(node: cst.BaseExpression) -> bool:
    root = _root(node)
    return (
        isinstance(root, cst.Call)
        and isinstance(root.func, (cst.Attribute, cst.Name))
        and (root.func.attr if isinstance(root.func, cst.Attribute) else root.func).value
        == "arange"
    )


def holds_positions(operand: Operand) -> bool:
    """A tensor of positions: ``torch.arange(n)``, ``position_ids``, ``pos``, ``t``."""
    if not operand.fact.is_tensor and operand.fact.kind is not Kind.OTHER:
        return False
    if _is_arange(operand.node):
        return True
    name = _name(operand.node)
    return name is not None and _POSITIONS.search(name) is not None


def holds_frequencies(operand: Operand) -> bool:
    """A tensor of rotary or sinusoidal frequencies: ``inv_freq``, ``freqs``, ``omega``."""
    if not operand.fact.is_tensor and operand.fact.kind is not Kind.OTHER:
        return False
    name = _name(operand.node)
    return name is not None and _FREQUENCIES.search(name) is not None


def builds_frequencies(operand: Operand, call: CallSite) -> bool:
    """Frequencies by what builds them, whatever they are called: a geometric ladder over
    an index range, ``1 / base ** (arange(0, d, 2) / d)``, ``exp(-log(base) * arange(h) / h)``,
    ``torch.pow(base, -arange(...) / d)`` -- the operand itself, or the value its local name
    was bound to (one binding back, and one more for the exponent: ``freqs =
    torch.exp(exponent)`` after ``exponent = ... arange(...)``)."""
    if not operand.fact.is_tensor and operand.fact.kind is not Kind.OTHER:
        return False
    return _ladder(_stripped(operand.node), call, depth=2)


def builds_positions(operand: Operand, call: CallSite) -> bool:
    """Positions by what builds them: a local name bound to ``torch.arange(n)`` (cast or
    reshaped, ``torch.arange(n).type_as(x)``), whatever it is called."""
    if not operand.fact.is_tensor and operand.fact.kind is not Kind.OTHER:
        return False
    bound = _bound(_stripped(operand.node), call)
    return bound is not None and _is_arange(bound) and not _ladder(bound, call, depth=0)


def _stripped(node: cst.BaseExpression) -> cst.BaseExpression:
    """``node`` without the subscripts, reshapes and casts that keep what it holds."""
    while True:
        if isinstance(node, cst.Subscript):
            node = node.value
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in _KEEPS
        ):
            node = node.func.value
        else:
            return node


def _bound(node: cst.BaseExpression, call: CallSite) -> cst.BaseExpression | None:
    """The value the local name ``node`` was last bound to before ``call`` (None: no local
    name, a parameter, or unsure)."""
    function = call.scope.function
    if function is None or not isinstance(node, cst.Name):
        return None
    return bound_before(function, call.node, node.value)


# Calls that raise a base to the powers of an index range (``torch.exp`` of ``-log(b) * i``).
_POWERS = frozenset({"pow", "exp", "exp2", "float_power"})
_RANGES = frozenset({"arange", "linspace"})


def _ladder(node: cst.BaseExpression, call: CallSite, depth: int) -> bool:
    """Whether ``node`` raises a base to powers of an index range: a ``**`` or a pow/exp call
    whose operands hold ``arange``/``linspace`` (or a local name bound to one, ``depth``
    bindings back)."""
    if isinstance(node, cst.Name) and depth > 0:
        bound = _bound(node, call)
        return bound is not None and _ladder(_stripped(bound), call, depth - 1)
    for sub in _walk(node):
        exponent = _exponent(sub)
        if exponent is not None and _ranged(exponent, call, depth):
            return True
    return False


def _exponent(node: cst.CSTNode) -> cst.CSTNode | None:
    """The exponent of a power (``b ** e``, ``torch.pow(b, e)``, ``b.pow(e)``, ``torch.exp(e)``,
    ``e.exp()``): a ladder's index range is there, not in the base (``x.pow(2)`` of positions
    squares them)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Power):
        return node.right
    if not isinstance(node, cst.Call) or _called(node) not in _POWERS:
        return None
    args = node.args
    if _called(node) in ("exp", "exp2"):
        if args:
            return args[0].value
        return node.func.value if isinstance(node.func, cst.Attribute) else None
    if len(args) >= 2:
        return args[1].value
    return args[0].value if args and isinstance(node.func, cst.Attribute) else None


def _called(node: cst.Call) -> str | None:
    func = node.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None


def _ranged(node: cst.CSTNode, call: CallSite, depth: int) -> bool:
    """Whether ``node`` holds an index range, or a local name bound to one ``depth`` back."""
    for sub in _walk(node):
        if isinstance(sub, cst.Call) and _called(sub) in _RANGES:
            return True
        if isinstance(sub, cst.Name) and depth > 0:
            bound = _bound(sub, call)
            if bound is not None and _ranged(bound, call, depth - 1):
                return True
    return False


def _tensor_operands(call: CallSite) -> list[Operand]:
    operands = [call.receiver] if call.method is not None and call.receiver is not None else []
    operands += [a for a in call.args if not isinstance(a.node, cst.SimpleString)]
    return operands


def phase_product(call: CallSite) -> PhaseProduct | None:
    """``torch.einsum("i,j->ij", t, inv_freq)``, ``inv_freq @ pos``, ``torch.outer(t, freqs)``,
    ``t[:, None] * inv_freq[None, :]``: positions multiplied by frequencies, else None."""
    if call.aten not in _PRODUCTS:
        return None
    if call.qualname is not None and not call.qualname.startswith(("torch.", "einops.")):
        return None  # ``np.einsum``: numpy computes in float64 (einops: torch's einsum)
    operands = _tensor_operands(call)
    if len(operands) != 2:
        return None
    a, b = operands
    if holds_positions(a) and holds_frequencies(b) and not holds_frequencies(a):
        return PhaseProduct(a, b)
    if holds_positions(b) and holds_frequencies(a) and not holds_frequencies(b):
        return PhaseProduct(b, a)
    # (by what builds them: asked only beside a side its name or an ``arange`` already says,
    # since every ``*`` of a forward is a candidate and the binding walk costs)
    for positions, frequencies in ((a, b), (b, a)):
        if holds_frequencies(positions) or builds_frequencies(positions, call):
            continue
        if holds_positions(positions) and builds_frequencies(frequencies, call):
            return PhaseProduct(positions, frequencies)
        if holds_frequencies(frequencies) and builds_positions(positions, call):
            return PhaseProduct(positions, frequencies)
    return None


def _stored_as_timestep(call: CallSite) -> bool:
    """Whether the cast's value is handed on under a timestep's name whatever the local was
    called: ``inp["timesteps"] = t.to(dtype)`` (the model reads it as ``model(**inp)``),
    ``model(x, timestep=s.to(dtype))``. Where a value goes names what it is, as its own
    name does."""
    function = call.scope.function
    if function is None:
        return False
    key = stored_under(call.node, function)
    return key is not None and _TIMESTEPS.match(key) is not None


def _is_timestep(name: str, call: CallSite) -> bool:
    if _TIMESTEPS.match(name) is None:
        return False
    if name not in _SHORT:
        return True
    function = call.scope.function
    if function is None:
        return False
    finder = _Bindings(name, call.node)
    # (the visitor's own dispatch, by exact class, over the function's code nodes: the walk
    # the timestep's uses share, at a fraction of libcst's visitor, which rebuilds each node)
    for node in code_under(function):
        visit = _BINDING_VISITS.get(type(node))
        if visit is not None:
            visit(finder, node)
    return bool(finder.found) and all(finder.found)


class _Bindings(cst.CSTVisitor):
    """Whether each binding of a short name in a function binds a timestep: a parameter, a
    loop over timesteps or sigmas, an assignment from a timestep (``t = t.to(...)`` aside)."""

    def __init__(self, name: str, call: cst.CSTNode) -> None:
        self.name = name
        self.call = call
        self.found: list[bool] = []

    def _binds(self, target: cst.BaseExpression) -> bool:
        return any(isinstance(n, cst.Name) and n.value == self.name for n in _names_in(target))

    def _iterates_timesteps(self, iterable: cst.BaseExpression) -> bool:
        text = cst.Module([]).code_for_node(iterable)
        return _NAMED_TIMESTEPS.search(text) is not None

    def visit_Parameters(self, node: cst.Parameters) -> None:
        # ``forward(self, x, t)``, ``step(model, x, t)``: a time beside the values it
        # conditions; a helper of ``t`` alone (``def conv_fp16(t): return t.half()``)
        # converts whatever tensor it is handed
        params = [*node.posonly_params, *node.params, *node.kwonly_params]
        if any(p.name.value == self.name for p in params):
            others = [p for p in params if p.name.value not in (self.name, "self", "cls")]
            self.found.append(bool(others))

    def visit_For(self, node: cst.For) -> None:
        if self._binds(node.target):
            self.found.append(self._iterates_timesteps(node.iter))

    def _comprehension(self, node: cst.ListComp | cst.SetComp | cst.GeneratorExp) -> None:
        # a comprehension's variable lives in the comprehension: it binds the call's name
        # only when the call is inside it
        inside = _contains(node, self.call)
        comp: cst.CompFor | None = node.for_in
        while comp is not None:
            if self._binds(comp.target) and inside:
                self.found.append(self._iterates_timesteps(comp.iter))
            comp = comp.inner_for_in

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._comprehension(node)

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._comprehension(node)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._comprehension(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Name) and target.target.value == self.name:
                # a timestep (``t = timesteps[i]``) or a value named for timesteps or sigmas
                # (``t = timestep_start / 1000.0``), as a loop over one binds a timestep
                root = _name(node.value)
                if root != self.name:
                    named = root is not None and (
                        _TIMESTEPS.match(root) is not None
                        or _NAMED_TIMESTEPS.search(root) is not None
                    )
                    self.found.append(named)
            elif self._binds(target.target):
                self.found.append(False)  # ``t, dtype = x.float(), x.dtype``


# What ``_Bindings`` visits, by node class (libcst's visitor calls ``visit_<class name>``).
_BINDING_VISITS: dict[type[cst.CSTNode], Callable[[_Bindings, Any], None]] = {
    cst.Parameters: _Bindings.visit_Parameters,
    cst.For: _Bindings.visit_For,
    cst.ListComp: _Bindings.visit_ListComp,
    cst.SetComp: _Bindings.visit_SetComp,
    cst.GeneratorExp: _Bindings.visit_GeneratorExp,
    cst.Assign: _Bindings.visit_Assign,
}


def _contains(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Whether ``node`` is ``root`` or one of its descendants."""
    found = False

    class _Find(cst.CSTVisitor):
        def on_visit(self, candidate: cst.CSTNode) -> bool:
            nonlocal found
            found = found or candidate is node
            return not found

    root.visit(_Find())
    return found


def _names_in(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _names_in(el.value)]
    return [target]


def timestep_cast(call: CallSite) -> TimestepCast | None:
    """A timestep (``t``, ``timestep``, ``batch["timesteps"]``, ``t.expand(n)``) cast to a half
    dtype or to another tensor's dtype; None when the target is float32, float64 or an integer
    dtype, or the call is no cast of a timestep. (What the cast is asks only the call, so it
    is asked first: whether its receiver is a timestep walks the function, and most casts,
    ``x.to(device)``, ``x.float()``, cast nothing to half.)"""
    if call.method not in _CASTS or call.receiver is None or not isinstance(call.node, cst.Call):
        return None
    receiver = call.receiver
    name = _subscript_key(receiver.node) or _name(receiver.node)
    if name is None:
        return None
    frequencies = _CAST_FREQUENCIES.match(name) is not None
    found = _half_cast(call, receiver, frequencies)
    if found is None or frequencies:
        return found
    if not _is_timestep(name, call) and not _stored_as_timestep(call):
        return None
    function = call.scope.function
    if function is not None and only_mixed(call.node, function):
        return None  # a noise scaling or a loss weighting: no timestep is embedded
    if call.module_calls and reaching_value(call) in call.module_calls:
        return None  # ``t = self.timesteps_proj(t)``: the name holds the module's features
    if _exact_in_float16(receiver, call):
        return None
    return found


def _exact_in_float16(timestep: Operand, cast: CallSite) -> bool:
    """Whether the cast writes an integer timestep to float16 as written (``.half()``,
    ``torch.float16``), which holds every integer up to 2048 exactly: a diffusion timestep
    drawn as an integer (``torch.randint(0, num_train_timesteps)``, a long tensor) loses
    nothing there. The rule takes a diffusion timestep for one of 0..1000 (its bfloat16
    claims rest on that too) unless the code shows a larger count: a bound the engine knows
    above 2048 (``randint(0, 4000)``, an ``n`` defaulting to 4000, as improved DDPM's
    schedules) keeps the finding, as do bfloat16 (integers exact up to 256), a fractional
    timestep, and a cast to another tensor's or module's dtype (``.to(transformer.dtype)``),
    which is bfloat16 wherever its user loads the model so. A parameter is integral as the
    engine believes its name (``timesteps``, ``t``: :data:`~mpcheck.knowledge.torch_api.
    INT_PARAM_NAMES`) unless its callers show otherwise."""
    fact = timestep.fact
    if not fact.is_tensor or not (_float16_written(cast) or _model_float16(cast)):
        return False
    if fact.prec is not Prec.INT and not fact.integral:
        return False
    return fact.bound is None or fact.bound <= _FLOAT16_EXACT


def _model_float16(cast: CallSite) -> bool:
    """``t.to(self.dtype)`` in a class whose every half path the project shows writes float16
    down (``Model.from_pretrained(..., torch_dtype=torch.float16)``, ``model.half()``; no
    bfloat16, no ``.to(weight_dtype)``, in an application that names the classes each cast
    reaches): the model's dtype is float16 wherever it is half. A library's contract, an
    unknown dtype or a world a cast of unknown class opens are no such evidence."""
    target = cast.arg(None, "dtype") or next(
        (a for a in cast.args if a.fact.kind is Kind.DTYPE), None
    )
    if target is None or target.fact.kind is not Kind.DTYPE or target.fact.prec is not Prec.MODEL:
        return False
    evidence = cast.scope.evidence
    if evidence is None or evidence.float16_only is None:
        return False
    # (``self.dtype`` reads the weights; ``x.dtype`` an activation, which an autocast region
    # of the project may have lowered to another dtype)
    return _self_rooted(target.node) or evidence.float16_activations


def _self_rooted(node: cst.BaseExpression) -> bool:
    """``self.dtype``, ``self.unet.dtype``: an attribute chain read off ``self``."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name) and node.value == "self"


def _float16_written(cast: CallSite) -> bool:
    """``t.half()``, ``t.to(torch.float16)``, ``t.to(dtype=torch.half)``: float16 spelled at
    the cast, not a dtype read off another tensor or module."""
    if cast.method == "half":
        return True
    target = cast.arg(None, "dtype") or next(
        (a for a in cast.args if a.fact.kind is Kind.DTYPE), None
    )
    node = target.node if target is not None else None
    return isinstance(node, cst.Attribute) and node.attr.value in ("float16", "half")


def _half_cast(call: CallSite, receiver: Operand, frequencies: bool) -> TimestepCast | None:
    """The cast ``call`` makes of ``receiver`` when it may round to half: to a half dtype,
    or to a target that is not float32, float64 nor an integer dtype (None otherwise)."""
    if call.method in ("half", "bfloat16"):
        return TimestepCast(receiver, frequencies, True, None)
    target = call.arg(None, "dtype")
    if target is None:
        target = next((a for a in call.args if a.fact.kind in (Kind.DTYPE, Kind.TENSOR)), None)
    if target is None and call.method == "type_as":
        target = call.arg(0, "other")
    if target is None:
        # ``t.to(dtype)`` of a parameter the engine knows nothing of: a dtype by its name
        target = next((a for a in call.args if _names_dtype(a.node)), None)
    if target is None:
        return None
    if _weight_dtype(target.node):
        return None  # ``t.to(self.time.weight.dtype)``: the input a half layer requires
    if _matched_to_frequencies(target.node):
        return None  # ``t.type(freqs.dtype)``: positions for a phase product, not a timestep
    if _wide_complex(target.node):
        return None  # ``freqs.to(torch.complex64)``: two float32s, nothing rounded to half
    prec = call.result.prec
    if prec in (Prec.FULL, Prec.INT, Prec.BOOL) or call.result.dtype in ("float32", "float64"):
        return None
    if target.fact.kind is Kind.DTYPE and target.fact.prec in (Prec.FULL, Prec.INT, Prec.BOOL):
        return None
    if target.fact.kind is Kind.TENSOR and target.fact.prec in (Prec.FULL, Prec.INT, Prec.BOOL):
        return None
    return TimestepCast(receiver, frequencies, prec is Prec.HALF, target.node)


def reaching_value(cast: CallSite) -> cst.BaseExpression | None:
    """What the cast's receiver name was last bound to before the cast on the path through its
    function's blocks: ``self.timesteps_proj(timestep)`` for the ``timestep.to(dtype)`` after
    ``timestep = self.timesteps_proj(timestep)``. Rebindings that only reshape or cast the
    name itself (``timestep = timestep.unflatten(...)``) are looked through; None when the
    name is a parameter, or a block before the cast may rebind it to something else."""
    function = cast.scope.function
    receiver = cast.receiver
    if function is None or receiver is None or not isinstance(_root(receiver.node), cst.Name):
        return None
    name = _name(receiver.node)
    return None if name is None else bound_before(function, cast.node, name)


def bound_before(
    function: cst.FunctionDef, at: cst.CSTNode, name: str
) -> cst.BaseExpression | None:
    """The value ``name`` was last bound to before ``at`` in ``function`` (see
    :func:`reaching_value`), None when a parameter or unsure."""
    path = _path_to(function.body, at)
    if path is None:
        return None
    frames: list[tuple[list[cst.BaseStatement], int]] = []
    for node, inner in zip(path, path[1:], strict=False):
        if isinstance(node, cst.IndentedBlock):
            statements = list(node.body)
            index = next((i for i, s in enumerate(statements) if s is inner), None)
            if index is None:
                return None
            frames.append((statements, index))
    for statements, index in reversed(frames):
        for statement in reversed(statements[:index]):
            found = _rebinding_under_root(statement, name)
            if found is _ITSELF:
                continue
            return found if isinstance(found, cst.BaseExpression) else None
    return None


def _path_to(root: cst.CSTNode, at: cst.CSTNode) -> list[cst.CSTNode] | None:
    """The nodes from ``root`` down to ``at`` (both included), None when ``at`` is not under
    ``root``: one walk over the code nodes, where asking each block's statements whether
    they hold ``at`` walked each of them again with libcst's visitor.

    The walk of the last root asked is kept where it stopped, with the parents it found: a
    function's casts are asked one after another, and each walked the body again from its
    top (2 % of a profiled diffusers run); the path to a node is the same whichever walk
    finds it (a tree holds each node once)."""
    global _walked
    if _walked is None or _walked[0] is not root:
        _walked = (root, {}, [root])
        _rebound.clear()
    _, up, stack = _walked
    key = id(at)
    if at is not root and key not in up:
        while stack and key not in up:
            node = stack.pop()
            for child in children(node):
                up[id(child)] = node
                stack.append(child)
        if key not in up:
            return None
    path = [at]
    while path[-1] is not root:
        path.append(up[id(path[-1])])
    return path[::-1]


# The root :func:`_path_to` last walked, the parent of each node it reached (by id), and
# the nodes whose children it has not looked at yet.
_walked: tuple[cst.CSTNode, dict[int, cst.CSTNode], list[cst.CSTNode]] | None = None


# What ``_rebinding`` said of each compound statement under the root ``_path_to`` last walked
# and a name, by the statement's id (the root keeps them alive): each cast of a function
# asks about the statements before it again, and a compound one is walked whole each time.
_rebound: dict[tuple[int, str], object] = {}


def _rebinding_under_root(statement: cst.BaseStatement, name: str) -> object:
    """``_rebinding`` of a statement under the root :func:`_path_to` last walked."""
    if isinstance(statement, cst.SimpleStatementLine):
        return _rebinding(statement, name)
    key = (id(statement), name)
    found = _rebound.get(key)
    if found is None:
        found = _rebound[key] = _rebinding(statement, name)
    return found


# What ``_rebinding`` says of a statement that rebinds a name only to a reshape or cast of
# itself, or not at all: look further back.
_ITSELF = object()
_UNKNOWN = object()


def _rebinding(statement: cst.BaseStatement, name: str) -> object:
    """The value ``statement`` last binds ``name`` to (a simple statement's plain assignment),
    ``_ITSELF`` when it leaves the name what it was, ``_UNKNOWN`` when it may rebind it
    otherwise (in a branch, a loop, an augmented assignment)."""
    if isinstance(statement, cst.SimpleStatementLine):
        for small in reversed(statement.body):
            if isinstance(small, (cst.Assign, cst.AnnAssign)):
                targets = (
                    [t.target for t in small.targets]
                    if isinstance(small, cst.Assign)
                    else [small.target]
                )
                if any(isinstance(t, cst.Name) and t.value == name for t in targets):
                    value = small.value
                    if value is None:
                        return _ITSELF
                    return _ITSELF if _of_itself(value, name) else value
                if any(_binds_name(t, name) for t in targets):
                    return _UNKNOWN
            elif isinstance(small, cst.AugAssign) and _binds_name(small.target, name):
                return _UNKNOWN
        return _ITSELF
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return _ITSELF
    # a compound statement: its rebindings of the name, if any, must keep what it holds
    for node in _walk(statement):
        if isinstance(node, cst.SimpleStatementLine):
            if _rebinding(node, name) is not _ITSELF:
                return _UNKNOWN
        elif isinstance(node, (cst.For, cst.With)) and _binds_name(
            node.target if isinstance(node, cst.For) else cst.Name("_"), name
        ):
            return _UNKNOWN
    return _ITSELF


def _of_itself(value: cst.BaseExpression, name: str) -> bool:
    """``timestep.unflatten(0, (-1, n))``, ``t[None].to(x)``: methods and subscripts of the
    name itself, which derive from what it held."""
    while True:
        if isinstance(value, cst.Subscript):
            value = value.value
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            value = value.func.value
        else:
            return isinstance(value, cst.Name) and value.value == name


def _binds_name(target: cst.BaseExpression, name: str) -> bool:
    return any(isinstance(n, cst.Name) and n.value == name for n in _names_in(target))


def _walk(root: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [root]
    while stack:
        node = stack.pop()
        found.append(node)
        if not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(children(node))
    return found
