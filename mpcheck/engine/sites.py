"""What rules see: places in the code with the dtype facts the engine inferred.

The analysis builds these while it walks a function in statement order, so a
rule reads facts as they hold *at that point* of the program.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import libcst as cst

from mpcheck.engine.evidence import HalfEvidence
from mpcheck.engine.facts import Fact, Kind, Origin, Prec, replace
from mpcheck.knowledge import autocast_ops
from mpcheck.knowledge.torch_api import (
    CASTING_ENCODERS,
    MODEL_CONDITIONING,
    MODEL_INPUTS,
    STRICT_NORMS,
    OpKind,
    autocast_takes,
)
from mpcheck.project.callables import SplitRun
from mpcheck.project.summary import Place


@dataclass(frozen=True)
class Autocast:
    """An autocast region (``with`` block or decorator)."""

    node: cst.CSTNode
    device: str | None  # "cuda", "cpu", ...; None when not known statically
    dtype: str | None  # "float16" / "bfloat16"; None = the device's default (or not known)
    enabled: bool | None  # None when ``enabled=`` is an expression
    # False when ``dtype=`` is given but its value is not known (``dtype=args.amp_dtype``):
    # then the device's default says nothing about it.
    dtype_known: bool = True
    # ``target-torch-version``: whose autocast lists apply (None: the base table, the latest).
    torch_version: tuple[int, int] | None = None
    # Not in the code: the autocast a trainer may wrap around a module's ``forward``
    # (``node`` is the method); see ``mpcheck.engine.ambient``.
    implicit: bool = False
    # True when torch turned this region off because its device's autocast refuses its dtype
    # (``torch.autocast("cpu", dtype=torch.float32)``, or a run-time device read off CUDA):
    # autocast is off inside whatever the caller runs, as with ``enabled=False``, but nobody
    # wrote it off, so it says nothing of what the author meant the weights to be.
    refused: bool = False
    # ``dtype=`` names a variable that is float16 on some path and another dtype on others
    # (``torch.float16 if fp16 else torch.bfloat16``): :attr:`dtype` is None, and float16 is
    # this region's dtype on the runs that pick it (a premise a finding states)
    float16_sometimes: bool = False

    @property
    def active(self) -> bool:
        return self.enabled is not False

    @property
    def off_elsewhere(self) -> bool:
        """Whether only CUDA's autocast runs this region: its device is known only at run time
        (``device_type=x.device.type``) and its dtype is one every other device's autocast
        refuses and turns itself off for (``dtype=torch.float32``). The walk reads it as CUDA's;
        that it is off on CPU and MPS is a premise about the device
        (:mod:`mpcheck.engine.device_reading`)."""
        if self.device not in (None, "") or self.dtype is None or not self.active:
            return False
        return not self.implicit and not autocast_takes("", self.dtype)

    @property
    def low_dtype(self) -> str | None:
        if self.dtype is not None or not self.dtype_known:
            return self.dtype
        return {"cuda": "float16", "cpu": "bfloat16"}.get(self.device or "")

    def recasts(self, aten: str) -> bool:
        """Whether autocast in this region changes the dtypes ``aten`` computes in."""
        if not self.active or not aten:
            return False
        devices = [self.device] if self.device in ("cuda", "cpu") else ["cuda", "cpu"]
        return any(self.policy(aten, d) not in (None, "banned") for d in devices)

    def casts_to_one_dtype(self, aten: str) -> bool:
        """Whether ``aten`` computes in a dtype of autocast's choosing here (its lower-precision
        or float32 list, on every device the region may run on), not its inputs' widest."""
        if not self.active or not aten:
            return False
        devices = [self.device] if self.device in ("cuda", "cpu") else ["cuda", "cpu"]
        policies = {self.policy(aten, d) for d in devices}
        return policies <= {"lower_precision", "fp32"} and len(policies) == 1

    def policy(self, aten: str, device: str | None = None) -> autocast_ops.Policy | None:
        """Autocast's policy for ``aten`` in the target torch, on ``device`` (by default the
        region's, CUDA when that is only known at run time)."""
        return autocast_ops.policy(aten, device or self.device or "cuda", self.torch_version)

    @property
    def premise(self) -> str:
        """How a finding in an implicit region begins: the autocast it assumes."""
        name = self.node.name.value if isinstance(self.node, cst.FunctionDef) else "this method"
        return f"if `{name}` runs under autocast (mixed-precision training of a float32 model)"

    @property
    def cited(self) -> str:
        """``autocast (torch 2.1)`` under a target version, else ``autocast``: for messages."""
        return autocast_ops.cited(self.torch_version)


Flags = tuple[tuple[str, bool], ...]  # plain flags known on a path: ``(name, value)``


@dataclass(frozen=True)
class Scope:
    """Where a piece of code runs."""

    function: cst.FunctionDef | None
    class_name: str | None
    in_module: bool  # a method of an nn.Module subclass: may run in half precision
    autocast: Autocast | None  # innermost autocast region, enabled or not
    # A method of a noise scheduler or sampler: its ``sample``/``model_output`` are the
    # model's activations, and what it returns goes back into the model.
    sampler: bool = False
    # Inside a branch taken only in bfloat16 mode (``elif mixed_precision == "bf16":``): the
    # comparison that says so. A GradScaler made there never has float16 to scale.
    bf16_mode: cst.BaseExpression | None = None
    # A LightningModule step (or a method it calls): the step. Under
    # ``Trainer(precision="16-mixed")`` Lightning runs it in CUDA autocast, an implicit region.
    lightning_step: cst.FunctionDef | None = None
    # Inside a branch a half-precision run never takes (``if x.dtype == torch.float32:``,
    # ``x`` in the model's dtype): the test. Float16's range is no concern there.
    full_precision: cst.BaseExpression | None = None
    # The plain flags known on this path of the function, as ``(name, value)``: inside
    # ``if args.train_text_encoder:`` it is ``("args.train_text_encoder", True)``.
    flags: Flags = ()
    # Why this code may run in half (``mpcheck.engine.evidence``): None outside a module's
    # code, where half comes only from explicit casts (facts of their own).
    evidence: HalfEvidence | None = None
    # A function outside a class that the project calls from a module's code
    # (:mod:`mpcheck.project.callers`): it runs with the module's values, no script's.
    module_code: bool = False
    # The project never turns autocast on (no enabled region, no trainer that may, no
    # package its users run as they like): a premise "if this runs under autocast" is false.
    no_autocast: bool = False
    # An FSDP mixed-precision policy of the project casts the floating inputs of its models'
    # forward to a half ``param_dtype`` (torch's ``cast_forward_inputs``): the policy, quoted.
    input_cast: str | None = None

    @property
    def constructing(self) -> bool:
        """A class's ``__init__``: it runs where the class is built, once, not in the forward
        a training or inference step runs under autocast."""
        function = self.function
        in_init = function is not None and function.name.value == "__init__"
        return self.class_name is not None and in_init

    @property
    def script(self) -> bool:
        """A script, trainer or sampler (or a function only they call): where a cast to a
        dtype the code does not spell is a cast to the run's working dtype."""
        return not self.in_module and not self.module_code

    def caller_float32(self, aten: str, target: autocast_ops.TorchVersion | None) -> bool:
        """Whether ``aten`` returns float32 here by the callers' autocast: the code opens no
        region of its own, every run of it is under an enabled region in its callers
        (``HalfEvidence.caller_autocast``), and ``aten`` is on the float32 list of each
        device those regions may run on: CUDA's, and the CPU's too where a region written
        for the CPU runs the class (``HalfEvidence.autocast_cpu``)."""
        evidence = self.evidence
        if self.autocast is not None or evidence is None or not aten:
            return False
        if evidence.caller_autocast is None:
            return False
        devices = ("cuda", "cpu") if evidence.autocast_cpu else ("cuda",)
        return all(autocast_ops.policy(aten, d, target) == "fp32" for d in devices)


@dataclass(frozen=True)
class Operand:
    """An expression a site involves, with its fact."""

    node: cst.BaseExpression
    fact: Fact

    @property
    def number(self) -> float | None:
        """The Python number the operand holds, when the engine knows it."""
        return self.fact.value if self.fact.kind is Kind.SCALAR else None

    @property
    def spelled(self) -> bool:
        """``-1e9``, ``1e-8``: the number itself is written here (nothing to explain)."""
        node = self.node
        while isinstance(node, cst.UnaryOperation):
            node = node.expression
        return isinstance(node, (cst.Float, cst.Integer))


@dataclass(frozen=True)
class CallSite:
    """A call (or ``a @ b``, or ``t += v`` as ``t.add_(v)``) with the facts of its operands."""

    node: cst.Call | cst.BinaryOperation | cst.AugAssign
    qualname: str | None  # resolved through imports: "torch.nn.functional.linear"
    method: str | None  # "masked_fill" for ``x.masked_fill(...)`` on a non-import receiver
    receiver: Operand | None  # ``x`` in ``x.method(...)``, or the module being called
    args: tuple[Operand, ...]
    kwargs: Mapping[str, Operand]
    op: OpKind | None  # family of ops whose operands must share a dtype
    aten: str  # the op autocast dispatches on ("" when none)
    scope: Scope
    result: Fact
    module_path: str | None = None  # "self.proj" / "model.block" for module calls
    extra: Mapping[str, object] = field(default_factory=dict)
    # A matmul that is one of attention's products (see mpcheck.engine.attention):
    # "scores" for q @ k.transpose(-2, -1), "values" for softmax(...) @ v; else None.
    attention: str | None = None
    # A module call on a dotted path (``model.head(x)``): the nearest enclosing module bound
    # at this point (``model``), so a rule can tell a submodule cast apart from its model.
    owner: Owner | None = None
    # Calling a module whose class is in this file while parts of it were cast apart
    # (``model.half(); model.head.float(); model(x)``): the calls its method makes whose
    # dtypes differ from the all-one-dtype module's, walked with the caller's facts.
    inner: tuple[InnerCall, ...] = ()
    # Calling a module whose class is in this file with a float32 argument
    # (``self.output(context.float(), x)``): the calls its method makes whose dtypes differ
    # from a walk with the model's dtype for every argument, walked with the call's facts.
    through: tuple[InnerCall, ...] = ()
    # Calling a model of this file that the project keeps float32 with a half argument (a
    # script's ``vae(latents)`` of a half denoiser's latents): the calls of its ``forward``,
    # walked with the call's facts, where a layer with float32 weights gets the half value.
    fed_half: tuple[InnerCall, ...] = ()
    # The same for a model of another project file (its class's summary says which layer
    # of the method run gets the argument as it came: ``ClassSummary.feeds``)
    fed_elsewhere: FedElsewhere | None = None
    # ``setattr(module, name, part)`` putting a part built in its class's fixed low default
    # dtype where the routine's other replacements follow the child's (mpcheck.engine.replacements)
    replacement: Replacement | None = None
    # ``Model.from_pretrained(..., torch_dtype=half)`` of a class keeping a part float32 whose
    # output joins the residual stream ahead of a fused norm (mpcheck.engine.kept_residual)
    kept_residual: KeptResidualLoad | None = None
    # Calling a parameter the project hands a lambda that runs a module whose input
    # embeddings are cast apart, with no autocast here nor where it was handed
    # (mpcheck.project.callables)
    handed_split: SplitRun | None = None
    # An EMA keeper built here (``EMAModel(unet.parameters())``, a project class stepping an
    # average it copied): the average it holds, its dtype and where that came from
    # (:func:`mpcheck.engine.averages.kept_average`); None for any other call
    average: Fact | None = None
    # Calling a module of another project file whose ``forward`` hands more than its first
    # input to its own layers (``ClassSummary.fed_inputs``): those further arguments
    fed: tuple[Operand, ...] = ()
    # The calls of a module (``self.timesteps_proj(t)``: a receiver whose fact is a module)
    # the walk has shown so far in this file: a name bound to one holds that module's output
    # (:func:`mpcheck.engine.phases.timestep_cast`). The walk's own set, shared by its sites.
    module_calls: Collection[cst.CSTNode] = ()

    @property
    def is_attention(self) -> bool:
        """Fused attention (SDPA, flash-attn, xformers) or a hand-written attention matmul."""
        return self.op is OpKind.ATTENTION or self.attention is not None

    @property
    def is_module_call(self) -> bool:
        return self.receiver is not None and self.method is None and self.qualname is None

    def arg(self, index: int | None, keyword: str | None = None) -> Operand | None:
        """Positional ``index`` or keyword ``keyword``, whichever the call used."""
        if keyword is not None and keyword in self.kwargs:
            return self.kwargs[keyword]
        if index is not None and index < len(self.args):
            return self.args[index]
        return None

    def model_inputs(self) -> tuple[Operand, ...]:
        """The tensors a whole model (``unet(x, t, encoder_hidden_states=e)``) runs through
        its own layers: its input and its conditioning keywords, not timesteps or masks."""
        if self.op is not OpKind.MODEL:
            return ()
        first, _ = self.operands()
        named = [self.kwargs[k] for k in MODEL_CONDITIONING if k in self.kwargs]
        named += [o for o in self.fed if all(o is not n for n in (first, *named))]
        return tuple(o for o in (first, *named) if o is not None and o.fact.is_tensor)

    def operands(self) -> tuple[Operand | None, tuple[Operand, ...]]:
        """``(input, parameters)`` of an op whose operands must share a dtype.

        For a layer call the parameters are the layer itself (its weights'
        dtype); for ``F.linear``/``F.conv*``/norms they are the weight and bias
        arguments; for matmuls every tensor operand after the first.
        """
        if self.op is None or self.aten == "rms_norm":
            return None, ()  # rms_norm: fp32 input with low weight runs (returns float32)
        if self.is_module_call:
            module = self.receiver
            assert module is not None
            weights = Operand(module.node, replace(module.fact, kind=Kind.TENSOR, layer=None))
            first = self.arg(0, "input")
            if first is None and self.op is OpKind.MODEL:
                first = next((self.kwargs[k] for k in MODEL_INPUTS if k in self.kwargs), None)
            return first, (weights,)
        if self.op is OpKind.NORM:
            slots = {"batch_norm": (3, 4)}.get(self.aten, (2, 3))
            params = [self.arg(slots[0], "weight"), self.arg(slots[1], "bias")]
            if self.aten == "batch_norm":
                params += [self.arg(1, "running_mean"), self.arg(2, "running_var")]
            return self.arg(0, "input"), tuple(p for p in params if p and p.fact.is_tensor)
        tensors = [r for r in (self.receiver,) if self.method and r and r.fact.is_tensor]
        for a in self.args:
            tensors += [a] if a.fact.is_tensor else [i for i in items(a) if i.fact.is_tensor]
        tensors += [o for k, o in self.kwargs.items() if o.fact.is_tensor and k != "out"]
        if not tensors:
            return None, ()
        return tensors[0], tuple(tensors[1:])

    @property
    def norm_keeps_low_input(self) -> bool:
        """A norm that runs a half input with float32 parameters (and returns the input's dtype).

        torch's LayerNorm/GroupNorm/BatchNorm/RMSNorm do (measured); apex's fused norms do
        not: their CUDA kernels raise "expected scalar type Half but found Float".
        """
        if self.op is not OpKind.NORM:
            return False
        module = self.receiver if self.is_module_call else None
        return module is None or module.fact.layer not in STRICT_NORMS

    @property
    def casts_pixel_values(self) -> bool:
        """A transformers encoder of a pipeline (``pipe.image_encoder``, ``safety_checker``):
        its vision embeddings cast ``pixel_values`` to its own dtype, so a processor's
        float32 output may go in as it is."""
        return self.module_path in CASTING_ENCODERS

    def autocast_split(self) -> tuple[Operand, Operand] | None:
        """``(half, full)``: an operand autocast made half and one that stays float32 under
        it (weights, buffers, a softmax autocast ran in float32), or None."""
        operands = [self.receiver] if self.receiver is not None else []
        operands += [*self.args, *self.kwargs.values()]
        half = next((o for o in operands if o.fact.autocast_half), None)
        wide = [o for o in operands if o.fact.float32_under_autocast]
        if half is None or not wide:
            return None
        # the surest float32 first: forced float32, then weights and what is made from them,
        # then an input of the method (the model's dtype as the caller passed it)
        return half, min(wide, key=lambda o: (o.fact.prec is not Prec.FULL, o.fact.from_input))

    @property
    def recast_by_autocast(self) -> bool:
        auto = self.scope.autocast
        return auto is not None and auto.recasts(self.aten)

    def tensor_op(self) -> TensorOp | None:
        """``x.name(a, ...)`` and ``torch.name(x, a, ...)`` alike, as ``(name, x, a, ...)``."""
        if self.method is not None and self.receiver is not None:
            return TensorOp(self.method, self.receiver, self.args, self.kwargs)
        qual = self.qualname or ""
        if isinstance(self.node, cst.Call) and qual.startswith("torch.") and qual.count(".") == 1:
            first = self.args[0] if self.args else self.kwargs.get("input")
            if first is not None:
                rest = self.args[1:] if self.args else self.args
                kwargs = {k: v for k, v in self.kwargs.items() if k != "input"}
                return TensorOp(qual[6:], first, rest, kwargs)
        return None


@dataclass(frozen=True)
class Replacement:
    """A model's child replaced (``setattr(module, name, part)``) by a part its class builds
    in a fixed half-precision default (``dtype=torch.half``, not passed), while a replacement
    of the same child in the same routine is built in the dtype it reads from the model
    (``dtype=child.weight.dtype``): the routine serves models of other dtypes."""

    part: Operand  # the new part, as ``setattr`` is given it: its fact says the dtype
    built: cst.Call  # the part's constructor call, where ``dtype=`` is missing
    sibling: cst.Call  # the replacement of the same child built in the dtype read
    read: cst.BaseExpression  # what that replacement is given: ``child.weight.dtype``


@dataclass(frozen=True)
class KeptResidualLoad:
    """A model loaded in half whose class keeps ``kept`` float32; that part's output turns the
    residual stream float32 ahead of a norm that ``norm`` (a norm refusing a float32 input
    with half weights) is, or replaces when importable. ``evidence``: related nodes of this
    file and their words (a node pointed at another file carries no words of its own)."""

    model: str  # ``T5EncoderModel``
    kept: str  # ``wo``
    norm: str  # ``FusedRMSNorm``
    substituted: bool  # the library swaps ``norm`` in at import time, when it is importable
    fused: bool  # apex's fused norm (it refuses the mix in its CUDA kernel), not torch's
    cast: Operand  # the ``torch_dtype=`` given
    evidence: tuple[tuple[cst.CSTNode, str], ...]


@dataclass(frozen=True)
class TensorOp:
    """A tensor method call in its method spelling: ``tensor.name(*args, **kwargs)``."""

    name: str  # "masked_fill_", "index_add", ...
    tensor: Operand  # ``self`` of the op
    args: tuple[Operand, ...]
    kwargs: Mapping[str, Operand]

    def arg(self, index: int | None, keyword: str | None = None) -> Operand | None:
        """Positional ``index`` (after ``self``) or keyword ``keyword``, whichever was used."""
        if keyword is not None and keyword in self.kwargs:
            return self.kwargs[keyword]
        if index is not None and index < len(self.args):
            return self.args[index]
        return None


@dataclass(frozen=True)
class Owner:
    """The module a called submodule belongs to, as bound where it is called."""

    path: str  # "model" for ``model.head(x)``, "self" for ``self.proj(x)``
    fact: Fact


@dataclass(frozen=True)
class FedElsewhere:
    """A model of another project file that the project only builds in float32, handed a
    half value with no autocast (``decoder.decode(latents)``): the argument, and the layer
    of that file whose float32 weights get it as it came (``self.post_quant_conv``, as the
    method writes it, at ``place``)."""

    operand: Operand
    layer: str
    place: Place


@dataclass(frozen=True)
class InnerCall:
    """A call inside a called module, re-walked because part of that module was cast apart.

    ``site`` has the facts with the submodules' dtypes as they are at the outer call;
    ``unsplit`` is the same call with the whole module in the caller's one dtype (None
    when that walk did not reach it), so a rule can tell what the split changed.
    """

    site: CallSite
    unsplit: CallSite | None


def items(operand: Operand) -> tuple[Operand, ...]:
    """The elements of a literal list/tuple operand (``torch.einsum(eq, [a, b])``), with facts."""
    node, fact = operand.node, operand.fact
    if fact.kind is not Kind.SEQ or fact.items is None:
        return ()
    if not isinstance(node, (cst.List, cst.Tuple)) or len(node.elements) != len(fact.items):
        return ()
    return tuple(Operand(el.value, f) for el, f in zip(node.elements, fact.items, strict=True))


@dataclass(frozen=True)
class SetItemSite:
    """``target[index] = value`` (also ``target[index] += value``)."""

    node: cst.CSTNode
    target: Operand
    index: cst.BaseSlice | None
    value: Operand
    scope: Scope
    # The first index that makes this advanced indexing (an int/bool tensor, a mask, a list):
    # torch then runs ``index_put_``, which does not cast ``value``. None for basic indexing
    # (ints, slices, ``...``, ``None``, 0-dim tensors), which copies with a cast, or unknown.
    advanced: Operand | None = None

    @property
    def augmented(self) -> bool:
        """``t[i] += v``: read, update in place (which casts), write back the same dtype."""
        return isinstance(self.node, cst.AugAssign)


@dataclass(frozen=True)
class StoreSite:
    """``p.data = value`` or ``m.weight = nn.Parameter(value)``: a tensor's storage replaced,
    dtype and all (nothing casts ``value``, unlike ``p.copy_(value)`` or ``p.data *= value``)."""

    node: cst.CSTNode  # the assignment
    target: Operand  # the tensor replaced (``p`` of ``p.data``, ``m.weight``), as it was
    value: Operand  # what it holds from now on (the argument of ``nn.Parameter``)
    scope: Scope
    # Where ``value`` became float32 by type promotion of a value in the target's dtype (the
    # model's, half when the model runs in half precision, or an explicit half) with one
    # forced to float32, replacing a tensor in that dtype: from here on the target is float32
    # apart from the rest of the model (see ``mpcheck.engine.storage``). None otherwise.
    widened: Origin | None = None
    data: bool = False  # ``p.data = value`` (else ``m.weight = nn.Parameter(value)``)


@dataclass(frozen=True)
class ClassSite:
    """A class definition, with its base names resolved."""

    node: cst.ClassDef
    bases: tuple[str, ...]  # qualified (or bare) base names
    is_module: bool


@dataclass(frozen=True)
class Decorator:
    """One decorator of a function, resolved through the file's imports."""

    node: cst.Decorator
    qualname: str | None  # resolved ("torch.cuda.amp.custom_fwd") or bare ("staticmethod")
    call: cst.Call | None  # the call for ``@f(...)``; None for a bare ``@f``


@dataclass(frozen=True)
class FunctionSite:
    """A function or method definition, reached once when the analysis walks it."""

    node: cst.FunctionDef
    decorators: tuple[Decorator, ...]
    scope: Scope  # the function's own scope (autocast from its decorators included)


@dataclass(frozen=True)
class ReturnSite:
    """``return value``: what leaves a function (a module's ``forward`` output feeds the next
    layer, which the analysis does not see when the caller loops over an ``nn.ModuleList``)."""

    node: cst.Return
    value: Operand
    scope: Scope
