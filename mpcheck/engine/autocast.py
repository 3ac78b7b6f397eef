"""Autocast regions: the region a ``with`` or decorator opens, and what an op computes in it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import cast

import libcst as cst

from mpcheck.engine.base import Walk
from mpcheck.engine.facts import Cause, Fact, Kind, Origin, Prec
from mpcheck.engine.frames import Frame
from mpcheck.engine.sites import Autocast
from mpcheck.knowledge import autocast_ops
from mpcheck.knowledge import torch_api as T
from mpcheck.project.names import children, dotted

# ``if torch.is_autocast_enabled():``: the branch that runs with autocast on
AUTOCAST_TESTS = frozenset({"torch.is_autocast_enabled", "torch.is_autocast_cpu_enabled"})
# The full dtypes a region may be given (only CUDA's autocast runs in them), by their names.
FULL_DTYPES = {
    "torch.float32": "float32",
    "torch.float": "float32",
    "torch.float64": "float64",
    "torch.double": "float64",
}
_FULL = frozenset(FULL_DTYPES.values())
_REGION_DTYPES = frozenset({"float16", "bfloat16", *_FULL})
AUTOCAST_NAMES = {
    "torch.autocast": None,
    "torch.cuda.amp.autocast": "cuda",
    "torch.cpu.amp.autocast": "cpu",
    "torch.cuda.amp.autocast_mode.autocast": "cuda",
}


_TORCH_POSITIONAL = ("device_type", "dtype", "enabled")
_BOUND_POSITIONAL = ("enabled", "dtype")


class Regions:
    """The part that knows ``torch.autocast``: resolves regions and recasts op results."""

    def __init__(self, file: Walk) -> None:
        self.file = file

    def autocast_result(self, node: cst.CSTNode, aten: str, region: Autocast, result: Fact) -> Fact:
        # An unknown device (``accelerator.autocast()``, ``device_type=x.device.type``):
        # the result is known when every device's policy agrees.
        devices = [region.device] if region.device in ("cuda", "cpu") else ["cuda", "cpu"]
        policies = {region.policy(aten, d) for d in devices}
        if policies == {"lower_precision"}:
            low = region.low_dtype
            if low in _FULL:  # (CUDA autocast given ``dtype=torch.float32``)
                text = f"computed in {low} by {region.cited}"
                return Fact(Kind.TENSOR, Prec.FULL, low, Origin(node, Cause.AUTOCAST, text))
            text = f"computed in {low or 'half precision'} by {region.cited}"
            return Fact(Kind.TENSOR, Prec.HALF, low, Origin(node, Cause.AUTOCAST, text))
        if policies == {"fp32"}:
            text = f"computed in float32 by {region.cited}"
            return Fact(Kind.TENSOR, Prec.FULL, "float32", Origin(node, Cause.AUTOCAST, text))
        return (
            replace(result, prec=Prec.UNKNOWN, origin=None)
            if result.kind is Kind.TENSOR
            else result
        )

    def caller_result(self, node: cst.CSTNode, aten: str, frame: Frame, result: Fact) -> Fact:
        """What ``aten`` computes in code that opens no region of its own but that every
        run of which is under its callers' autocast, in any file (``HalfEvidence.
        caller_autocast``): an op on autocast's float32 list returns float32 whatever its
        input (``x.pow(2)``, ``x.norm()``, ``x.softmax(-1)`` on CUDA), as in a region the
        function opens. The list is the device's: CUDA's, and the CPU's as well where a
        region written for the CPU runs the class (its list holds neither ``pow`` nor
        ``sum``). Only that list: what the lower-precision list computes is half as the
        model's dtype already says."""
        target = self.file.target_torch
        if not result.is_tensor or not frame.scope.caller_float32(aten, target):
            return result
        cited = autocast_ops.cited(target)
        text = f"computed in float32 by the {cited} its callers run it under"
        origin = Origin(node, Cause.AUTOCAST, text)
        return replace(result, prec=Prec.FULL, dtype="float32", origin=origin, mixed=None)

    def torch_in_region(
        self, node: cst.CSTNode, qual: str, aten: str | None, frame: Frame, result: Fact
    ) -> Fact:
        """What torch function ``qual`` computes in the region it runs in: an op of a known
        family (``aten``) when autocast recasts it, any other on autocast's lower or fp32 list
        (``torch.softmax`` on CUDA: float32); ``result`` outside a region."""
        region = frame.scope.autocast
        if region is None:
            return self._caller_torch(node, qual, aten, frame, result)
        if aten is not None:
            return (
                self.autocast_result(node, aten, region, result) if region.recasts(aten) else result
            )
        known = T.AUTOCAST_NAMES.get(qual, qual.rpartition(".")[2])
        if qual.startswith("torch.") and region.casts_to_one_dtype(known):
            return self.autocast_result(node, known, region, result)
        return result

    def _caller_torch(
        self, node: cst.CSTNode, qual: str, aten: str | None, frame: Frame, result: Fact
    ) -> Fact:
        """:meth:`caller_result` of the torch function ``qual`` (by its op, or its name)."""
        if not qual.startswith("torch."):
            return result
        known = aten or T.AUTOCAST_NAMES.get(qual, qual.rpartition(".")[2])
        return self.caller_result(node, known, frame, result)

    @staticmethod
    def disabled_input(fact: Fact) -> Fact:
        """An input of a function decorated with ``autocast(enabled=False)``. The decorator
        does something only when the caller runs under autocast, so what the caller hands
        over is what autocast computed (a linear, conv or matmul output: half), not the
        model's float32: an activation becomes autocast's half, when it is called so."""
        if fact.kind is not Kind.TENSOR or fact.prec is not Prec.MODEL or fact.origin is None:
            return fact
        text = "an input of a function that turns autocast off (half when called under it)"
        return replace(fact, origin=Origin(fact.origin.node, Cause.AUTOCAST, text))

    def autocast_region(
        self, node: cst.BaseExpression, frame: Frame | None = None, *, helpers: bool = True
    ) -> Autocast | None:
        """The region ``node`` opens; ``frame`` resolves ``dtype=amp_dtype`` (a variable)."""
        if isinstance(node, (cst.Name, cst.Attribute)) and frame is not None and helpers:
            held = self._held_context(node, frame)  # ``ctx = torch.autocast(...)``; ``with ctx:``
            region = self.autocast_region(held[0], frame, helpers=False) if held else None
            if region is not None and held is not None and isinstance(node, cst.Attribute):
                region = self._dtype_where_built(region, held[0], frame)
            if region is not None and held is not None:
                if held[2]:  # (a table of autocasts of several dtypes)
                    region = replace(region, device=None, dtype=None, dtype_known=False)
                return replace(region, enabled=None) if held[1] else region
            if isinstance(node, cst.Name):
                return None
            # (``with self.autocast:`` holding no region this file shows: read by its name)
        call = node if isinstance(node, cst.Call) else None
        func = call.func if call else node
        helper = self._helper_context(call) if helpers else None
        if helper is not None:  # ``with amp_context(args):``, a function of this file
            returned, chosen = helper
            region = self.autocast_region(returned, helpers=False)
            return replace(region, node=node, enabled=None) if region and chosen else region
        bound = self._partial(call, frame) if helpers and call and frame else None
        if bound is not None:  # ``amp = functools.partial(torch.autocast, ...)``; ``with amp():``
            region = self.autocast_region(bound, frame, helpers=False)
            return replace(region, node=node) if region is not None else None
        qual = self.file.imports.resolve(func)
        device: str | None
        if qual in AUTOCAST_NAMES:
            device = AUTOCAST_NAMES[qual]
        elif isinstance(func, cst.Attribute) and func.attr.value == "autocast" and qual is None:
            device = None  # accelerator.autocast()
        else:
            return None
        dtype: str | None = None
        dtype_known = True
        sometimes = False
        enabled: bool | None = True
        args = call.args if call else ()
        # (positional parameters: ``torch.autocast(device_type, dtype, enabled)``, the
        # device-bound ``torch.cuda.amp.autocast(enabled, dtype)``; ``accelerator.autocast()``
        # takes none of them)
        positional: tuple[str, ...] = ()
        if qual == "torch.autocast":
            positional = _TORCH_POSITIONAL
        elif qual in AUTOCAST_NAMES:
            positional = _BOUND_POSITIONAL
        for i, arg in enumerate(args):
            if arg.keyword:
                key: str | None = arg.keyword.value
            else:
                key = positional[i] if i < len(positional) else None
            if key == "device_type":
                if isinstance(arg.value, cst.SimpleString) and isinstance(
                    arg.value.evaluated_value, str
                ):
                    device = arg.value.evaluated_value.split(":")[0]
            elif key == "dtype":
                name = dotted(arg.value) or ""
                leaf = name.rsplit(".", 1)[-1]
                dtype = {"float16": "float16", "half": "float16", "bfloat16": "bfloat16"}.get(leaf)
                dtype = dtype or FULL_DTYPES.get(self.file.imports.resolve(arg.value) or "")
                if dtype is None:
                    dtype = self._region_dtype(arg.value, frame)
                    dtype_known = dtype is not None
                    sometimes = dtype is None and self._float16_sometimes(arg.value, frame)
            elif key == "enabled":
                if isinstance(arg.value, cst.Name) and arg.value.value in ("True", "False"):
                    enabled = arg.value.value == "True"
                else:
                    enabled = None
        region = Autocast(node, device, dtype, enabled, dtype_known, self.file.target_torch)
        if sometimes:
            region = replace(region, float16_sometimes=True)
        return _ignored(region) if dtype in _FULL else region

    def _helper_context(self, call: cst.Call | None) -> tuple[cst.Call, bool] | None:
        """What a function of this file that only returns a context returns: the call, and
        whether a condition chooses it (``torch.autocast(...) if on else nullcontext()``)."""
        fn = (
            self.file.functions.get(call.func.value)
            if call and isinstance(call.func, cst.Name)
            else None
        )
        body = fn.body.body if fn is not None and isinstance(fn.body, cst.IndentedBlock) else ()
        if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine):
            return None
        ret = body[0].body[0]
        value = ret.value if isinstance(ret, cst.Return) else None
        if isinstance(value, cst.Call):
            return value, False
        if isinstance(value, cst.IfExp):
            calls = [v for v in (value.body, value.orelse) if isinstance(v, cst.Call)]
            found = next((c for c in calls if self.autocast_region(c, helpers=False)), None)
            return (found, True) if found is not None else None
        return None

    def _held_context(
        self, name: cst.Name | cst.Attribute, frame: Frame
    ) -> tuple[cst.Call, bool, bool] | None:
        """What a variable bound once to a context holds -- of the function, of the module
        when the function neither binds nor takes it (nanoGPT's module-level ``ctx``), or
        ``self.ctx`` of the class -- the call, whether it was chosen against
        ``nullcontext()`` (``torch.autocast(..., enabled=False) if device in (...) else
        nullcontext()``: off wherever autocast is on at all, since a device without
        autocast has nothing to turn off), and whether it was picked among autocasts of
        several dtypes (:meth:`_keyed_context`)."""
        values = self._bound_values(name, frame)
        calls = [v for v in values if isinstance(v, cst.Call)]
        if len(values) == 2 and len(calls) == 2 and any(map(_nullcontext, calls)):
            # (``self.ctx = nullcontext()``, then ``self.ctx = torch.autocast(...)`` under a
            # test: the region on the runs that take it, as a conditional expression's)
            found = [c for c in calls if not _nullcontext(c)]
            region = self.autocast_region(found[0], helpers=False) if len(found) == 1 else None
            if region is not None and region.active:
                return found[0], True, False
        if len(values) != 1:
            return None
        value = values[0]
        if isinstance(value, cst.Call):
            return value, False, False
        if isinstance(value, cst.IfExp):
            branches = [v for v in (value.body, value.orelse) if isinstance(v, cst.Call)]
            found = [c for c in branches if self.autocast_region(c, helpers=False)]
            others = [c for c in branches if c not in found]
            if len(found) == 1 and len(others) == 1 and _nullcontext(others[0]):
                region = self.autocast_region(found[0], helpers=False)
                return found[0], not (region is not None and region.enabled is False), False
        if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Dict):
            return self._keyed_context(value.value)
        return None

    def _bound_values(
        self, name: cst.Name | cst.Attribute, frame: Frame
    ) -> list[cst.BaseExpression]:
        """The values assigned to ``name`` where it is bound (see :meth:`_held_context`)."""
        fn = frame.scope.function
        if isinstance(name, cst.Attribute):
            owner = self.file.classes.get(frame.scope.class_name or "")
            on_self = isinstance(name.value, cst.Name) and name.value.value == "self"
            if owner is None or not on_self:
                return []
            return _assigned(owner.node, name, inside_functions=True)
        if fn is not None:
            values = _assigned(fn, name, inside_functions=False)
            taken = {p.name.value for p in _parameters(fn.params)}
            if values or name.value in taken:
                return values
        return _assigned(self.file.module, name, inside_functions=False)

    def _partial(self, call: cst.Call, frame: Frame) -> cst.Call | None:
        """``amp()`` of a name bound once to ``functools.partial(torch.autocast, *args,
        **kwargs)``: the autocast call it makes, its bound arguments first."""
        if not isinstance(call.func, cst.Name):
            return None
        values = self._bound_values(call.func, frame)
        made = values[0] if len(values) == 1 and isinstance(values[0], cst.Call) else None
        if made is None or not made.args or made.args[0].keyword is not None:
            return None
        if self.file.imports.resolve(made.func) != "functools.partial":
            return None
        target = made.args[0].value
        if self.file.imports.resolve(target) not in AUTOCAST_NAMES:
            return None
        return cst.Call(func=target, args=(*made.args[1:], *call.args))

    def _keyed_context(self, table: cst.Dict) -> tuple[cst.Call, bool, bool] | None:
        """``{"bf16": torch.autocast(...), "fp32": nullcontext()}[precision]``: an enabled
        autocast among the table's contexts, the rest autocasts too or ``nullcontext()``
        (float32 runs), chosen by its key as a condition chooses between two; and whether
        the autocasts differ in device or dtype."""
        values = [e.value for e in table.elements if isinstance(e, cst.DictElement)]
        if len(values) != len(table.elements) or not values:
            return None
        calls = [v for v in values if isinstance(v, cst.Call)]
        regions = {c: self.autocast_region(c, helpers=False) for c in calls}
        found = [c for c, region in regions.items() if region is not None and region.active]
        others = [c for c in calls if c not in found]
        if len(calls) != len(values) or not found or not all(map(_nullcontext, others)):
            return None
        lowers = {(r.device, r.low_dtype) for c in found if (r := regions[c]) is not None}
        # (several autocasts: the region is on whichever is picked, in a dtype not known)
        return found[0], bool(others) or len(lowers) > 1, len(lowers) > 1

    def tested_region(self, test: cst.BaseExpression, went: bool) -> Autocast | None:
        """The autocast region a branch of ``if torch.is_autocast_enabled():`` (or of ``if not
        ...``) runs in, when that branch is the one autocast is on in."""
        negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
        call = test.expression if isinstance(test, cst.UnaryOperation) and negated else test
        qual = self.file.imports.resolve(call.func) if isinstance(call, cst.Call) else None
        if qual not in AUTOCAST_TESTS or went == negated:
            return None
        device = "cpu" if qual == "torch.is_autocast_cpu_enabled" else None
        return Autocast(test, device, None, True, torch_version=self.file.target_torch)

    def _region_dtype(self, node: cst.BaseExpression, frame: Frame | None) -> str | None:
        """``dtype=amp_dtype``: the half dtype (or float32, float64) the variable holds on
        every path, if one."""
        if frame is None or not isinstance(node, (cst.Name, cst.Attribute)):
            return None
        fact = self.file.expr(node, frame)
        if fact.kind is Kind.DTYPE and fact.prec in (Prec.HALF, Prec.FULL) and not fact.maybe:
            return fact.dtype if fact.dtype in _REGION_DTYPES else None
        return None

    def _dtype_where_built(self, region: Autocast, call: cst.Call, frame: Frame) -> Autocast:
        """``self.ctx = torch.autocast(..., dtype=amp_dtype)`` in another method: a ``dtype``
        variable the method using ``self.ctx`` cannot read is read from the class's plain
        assignments of that name, as written (``amp_dtype = torch.float16`` in one branch,
        ``torch.bfloat16`` in another: float16 on the runs that pick it)."""
        if region.dtype is not None or region.float16_sometimes:
            return region
        arg = next((a for a in call.args if a.keyword and a.keyword.value == "dtype"), None)
        owner = self.file.classes.get(frame.scope.class_name or "")
        if arg is None or not isinstance(arg.value, cst.Name) or owner is None:
            return region
        written = set()
        for value in _assigned(owner.node, arg.value, inside_functions=True):
            leaf = (dotted(value) or "").rpartition(".")[2]
            written.add({"float16": "float16", "half": "float16"}.get(leaf, leaf))
        if "float16" not in written:
            return region
        if written == {"float16"}:
            return replace(region, dtype="float16", dtype_known=True)
        return replace(region, float16_sometimes=True)

    def _float16_sometimes(self, node: cst.BaseExpression, frame: Frame | None) -> bool:
        """``dtype=amp_dtype`` of a variable that holds float16 on some path, another dtype
        on the others (half joined with half: dtype None; float16 or float32: ``maybe``)."""
        if frame is None or not isinstance(node, (cst.Name, cst.Attribute)):
            return False
        fact = self.file.expr(node, frame)
        return (
            fact.kind is Kind.DTYPE and fact.prec is Prec.HALF and fact.dtype in (None, "float16")
        )

    @staticmethod
    def off_reading(region: Autocast) -> Autocast:
        """What ``region`` is on a device whose autocast refuses its dtype (a region only
        CUDA runs, ``Autocast.off_elsewhere``, read off CUDA): torch turns autocast off in
        it, as :func:`_ignored` reads a region written for such a device."""
        return _off(region)


def _ignored(region: Autocast) -> Autocast:
    """A region given a dtype its device's autocast does not take (``dtype=torch.float32``
    off CUDA, :data:`~mpcheck.knowledge.torch_api.AUTOCAST_DTYPES`): torch turns autocast off
    in it, whatever region is around it (:func:`_off`). Where
    the device is known only at run time (``device_type=x.device.type``) it is CUDA's region,
    which computes its list in that dtype: "off on CPU and MPS" is a premise about the device,
    not evidence, so no error rests on it (what the region read as off gives is a warning
    stating that premise: ``Autocast.off_elsewhere``, :mod:`mpcheck.engine.device_reading`)."""
    if region.device in (None, "", "cuda") or region.dtype is None:
        return region
    if T.autocast_takes(region.device or "", region.dtype):
        return region
    return _off(region)


def _off(region: Autocast) -> Autocast:
    """A region autocast turns itself off in. ``autocast.__init__`` sets ``enabled = False``
    and ``__enter__`` calls ``torch.set_autocast_enabled(device, False)`` until it ends, so
    autocast is off inside whatever region an outer ``with`` or a caller opened: a disabled
    region, marked ``refused`` (torch's doing, not an ``enabled=False`` the author wrote)."""
    return replace(region, enabled=False, refused=True)


def _assigned(
    root: cst.CSTNode, name: cst.Name | cst.Attribute, *, inside_functions: bool
) -> list[cst.BaseExpression]:
    """The values of the plain assignments to ``name`` (``ctx``, ``self.ctx``) in ``root``:
    in the functions nested in it too when ``inside_functions`` (a class's methods), else
    only in its own body (a function's, or a module's top level).

    An assignment is a statement, so only statements and what holds them are walked, never
    an expression (libcst's visitor over every node of a module, asked per context name, was
    4 % of a profiled diffusers run)."""
    found: list[cst.BaseExpression] = []
    stack: list[cst.CSTNode] = [root]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.SimpleStatementLine or kind is cst.SimpleStatementSuite:
            for small in cast(cst.SimpleStatementLine | cst.SimpleStatementSuite, node).body:
                if type(small) is cst.Assign and len(small.targets) == 1:
                    target = small.targets[0].target
                    if type(target) is type(name) and name.deep_equals(target):
                        found.append(small.value)
            continue
        if (kind is cst.FunctionDef or kind is cst.ClassDef) and node is not root:
            if not inside_functions:
                continue
        stack.extend(c for c in children(node) if _holds_statements(type(c)))
    return found


_STATEMENT_HOLDERS: dict[type, bool] = {}
_HOLDERS: tuple[type[cst.CSTNode], ...] = (cst.BaseStatement, cst.BaseSuite, cst.Else)
_HOLDERS += (cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)


def _holds_statements(kind: type) -> bool:
    """Whether a node of ``kind`` is a statement or holds statements (a block, ``else:``,
    ``except:``, ``finally:``, ``case``); an expression never does."""
    found = _STATEMENT_HOLDERS.get(kind)
    if found is None:
        found = _STATEMENT_HOLDERS[kind] = issubclass(kind, _HOLDERS)
    return found


def _parameters(params: cst.Parameters) -> list[cst.Param]:
    star = [params.star_arg] if isinstance(params.star_arg, cst.Param) else []
    extra = [params.star_kwarg] if params.star_kwarg is not None else []
    return [*params.posonly_params, *params.params, *star, *params.kwonly_params, *extra]


def _nullcontext(call: cst.Call) -> bool:
    """``nullcontext()`` / ``contextlib.nullcontext()``."""
    func = call.func
    leaf = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
    return leaf == "nullcontext"


def named_autocast(
    fn: cst.FunctionDef, node: cst.CSTNode, code: Callable[[cst.CSTNode], str]
) -> bool:
    """Whether ``node`` runs inside a ``with`` of ``fn`` whose context names autocast: a
    stored context (``with model.autocast_context:``) as much as ``torch.autocast(...)``,
    unless it says ``enabled=False``."""

    class _Find(cst.CSTVisitor):
        def __init__(self) -> None:
            self.open: list[bool] = []
            self.found = False

        def visit_With(self, stmt: cst.With) -> None:
            texts = [code(item.item) for item in stmt.items]
            self.open.append(
                any("autocast" in t and "enabled=False" not in t.replace(" ", "") for t in texts)
            )

        def leave_With(self, original_node: cst.With) -> None:
            self.open.pop()

        def on_visit(self, visited: cst.CSTNode) -> bool:
            if visited is node:
                self.found = any(self.open)
                return False
            return not self.found and super().on_visit(visited)

    finder = _Find()
    fn.visit(finder)
    return finder.found
