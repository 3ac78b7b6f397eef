"""MPC403: in ``autocast(enabled=False)``, an autocast-made tensor meets float32 uncast."""

from __future__ import annotations

import libcst as cst

from mpcheck.api import (
    CallSite,
    Cause,
    Edit,
    Fact,
    Fix,
    Operand,
    OpKind,
    Prec,
    Rule,
    Severity,
)

# Op families that refuse operands of different floating dtypes once autocast is off.
_STRICT = frozenset({OpKind.LINEAR, OpKind.CONV, OpKind.MATMUL, OpKind.ATTENTION, OpKind.RECURRENT})
# Losses whose kernels refuse an input and target of different dtypes (most others promote).
_STRICT_LOSSES = frozenset({"binary_cross_entropy"})
_ATOMIC = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)
# Layers with a ``.weight`` whose dtype the input must match.
_WEIGHTED = frozenset(
    """Linear LazyLinear Bilinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d
    ConvTranspose3d""".split()
)


class AutocastDisabledWithoutCast(Rule):
    code = "MPC403"
    name = "autocast-disabled-without-cast"
    summary = (
        "Inside `autocast(..., enabled=False)`, a tensor computed under the enclosing autocast "
        "(half precision) reaches float32 weights or a float32 operand without `.float()`."
    )
    why = """
        `with torch.autocast(..., enabled=False):` is how code runs a numerically sensitive
        part (a loss head, a norm, a projection) in float32 inside a mixed-precision region.
        But turning autocast off does not convert anything: tensors computed before, under
        the enabled region, are still float16/bfloat16, and now no op recasts them. A Linear,
        conv, matmul or attention with float32 weights or a float32 operand then sees two
        dtypes and raises; so does `F.binary_cross_entropy` with a float32 target. (Elementwise
        ops only promote, and a norm accepts a half input with float32 parameters, so those
        are not reported.) Measured with torch 2.13 on CPU autocast (torch-truth `c06b`).

        The float32 side may be autocast's own: ops on its float32 list (`softmax`,
        `log_softmax`, `layer_norm`, `sum`, `pow` under CUDA autocast; `cdist`, `prod`, the
        losses under CPU autocast) return float32 even from half inputs. Such a value meeting
        a half one in a `matmul`, `bmm` or `einsum` inside the disabled region raises too
        ("expected m1 and m2 to have the same dtype, but got: float != c10::BFloat16"), and
        the message names the op whose policy made it float32.

        mpcheck follows the autocast-produced tensor across the `with` boundary (names keep
        their facts) and reports it when it meets a float32 module, an explicit float32
        operand (`.float()`, a factory without `dtype=`), or the model's own weights or
        inputs: a model that uses autocast keeps its parameters in float32.

        A function decorated with `autocast(..., enabled=False)` (a quantizer's or a loss
        head's `forward`) changes nothing unless its caller runs under autocast, so its
        inputs are what that caller computed: half. When such an input reaches the module's
        float32 weights or buffers uncast, the finding is a warning that states this premise
        (lucidrains' LFQ and FSQ quantizers raised so until they cast on entry).
        """
    symptom = """
        `RuntimeError: mat1 and mat2 must have the same dtype, but got Half and Float` (also
        `expected scalar type Float but found Half`, `Input type (c10::Half) and bias type
        (float) should be the same`, `Found dtype Float but expected Half` from
        `binary_cross_entropy`), only when the enclosing autocast is on: the code passes when
        it is run without AMP.
        """
    how_to_fix = """
        Cast what comes from the autocast region when it enters the disabled one:
        `head(h.float())`, `F.binary_cross_entropy(probs.float(), target)`. mpcheck's fix adds
        `.float()` to the autocast-produced operand when the other side is known to be float32
        (a module built in float32, an explicit float32 tensor), and casts it to the weights'
        own dtype (`h.to(self.head.weight.dtype)`) when the other side is the model's
        weights, which are float32 unless the model itself was cast to half. Either way the
        op then runs in the dtype it would have run in without autocast, so the fix is safe.
        """
    bad = """
        class Detector(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(16, 32)
                self.head = nn.Linear(32, 4)

            def forward(self, images):
                with torch.autocast("cuda"):
                    feats = self.backbone(images)  # float16
                    with torch.autocast("cuda", enabled=False):
                        return self.head(feats)  # float32 weights: raises
        """
    good = """
        class Detector(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(16, 32)
                self.head = nn.Linear(32, 4)

            def forward(self, images):
                with torch.autocast("cuda"):
                    feats = self.backbone(images)
                    with torch.autocast("cuda", enabled=False):
                        return self.head(feats.float())
        """
    fixable = True

    def check_call(self, call: CallSite) -> None:
        region = call.scope.autocast
        if region is None or region.enabled is not False:
            return
        if call.aten in _STRICT_LOSSES:
            pairs = [(call.arg(0, "input"), call.arg(1, "target"))]
        elif call.op in _STRICT:
            first, params = call.operands()
            operands = [o for o in (first, *params) if o is not None]
            pairs = [(a, b) for a in operands for b in operands if a is not b]
        else:
            return
        for low, wide in pairs:
            if low is None or wide is None or not _wide(wide.fact):
                continue
            # a half value of any origin (``v.half()``) against autocast's own float32
            half = low.fact.is_tensor and low.fact.prec is Prec.HALF
            if not _from_autocast(low.fact) and not (half and _policy_op(wide.fact)):
                continue
            self.report_pair(call, low, wide)
            return

    def report_pair(self, call: CallSite, low: Operand, wide: Operand) -> None:
        region = call.scope.autocast
        assert region is not None
        what = self.ctx.code(low.node)
        name = f"`{self.ctx.code(wide.node)}`"
        policy = _policy_op(wide.fact)
        if wide.fact.prec is Prec.MODEL:
            whose = "weights" if call.is_module_call else "dtype"
            other = f"{name} has the model's {whose} (float32 under autocast)"
        elif policy is not None and wide.fact.origin is not None:
            line = self.line(wide.fact.origin.node)
            other = f"{name} is float32: `{policy}` runs in float32 under autocast ({line})"
        elif wide.fact.origin is not None:
            other = f"{name} is {self.where(wide.fact)}"
        else:
            other = f"{name} is float32"
        fix = self.fix(call, low, wide)
        cast = fix.message.rsplit(" with ", 1)[-1] if fix else "`.float()`"
        if low.fact.from_input and low.fact.origin is not None:
            # the premise: turning autocast off matters only to a caller that runs under it
            message = (
                f"`{what}` is an input ({self.line(low.fact.origin.node)}) of a function that "
                f"turns autocast off ({self.line(region.node)}), which matters only when its "
                f"caller runs under autocast, and there `{what}` is half; nothing casts it: "
                f"{other}; cast it with {cast} (latent: raises when called under autocast)"
            )
            severity: Severity | None = Severity.WARNING
        else:
            message = (
                f"`{what}` is {self.where(low.fact)}, and autocast is off here "
                f"({self.line(region.node)}), so nothing casts it: {other}; cast it with {cast}"
            )
            severity = None
        related = self.related_for(what, low.fact) + [(region.node, "autocast is disabled here")]
        self.report(call.node, message, related=related, fix=fix, severity=severity)

    def fix(self, call: CallSite, low: Operand, wide: Operand) -> Fix | None:
        """``.float()`` against known float32; the weights' own dtype against the model's."""
        code = self.ctx.module.code_for_node(low.node)
        base = code if isinstance(low.node, _ATOMIC) else f"({code})"
        if wide.fact.prec is Prec.FULL:
            if wide.fact.dtype != "float32":
                return None
            cast = ".float()"
        elif not isinstance(wide.node, (cst.Name, cst.Attribute)):
            return None
        elif call.is_module_call:
            layer = call.receiver.fact.layer if call.receiver else None
            if layer not in _WEIGHTED:
                return None
            cast = f".to({self.ctx.module.code_for_node(wide.node)}.weight.dtype)"
        else:
            cast = f".to({self.ctx.module.code_for_node(wide.node)}.dtype)"
        return Fix(
            f"Cast `{self.ctx.code(low.node)}` with `{cast}`", (Edit(low.node, base + cast),)
        )


def _policy_op(fact: Fact) -> str | None:
    """``cdist`` when ``fact`` is float32 because autocast's policy runs that op in float32
    (its float32 list: ``softmax``, ``layer_norm``, ``sum``, ``pow`` on CUDA; ``cdist``,
    ``prod``, the losses on CPU), None otherwise."""
    origin = fact.origin
    if fact.prec is not Prec.FULL or origin is None or origin.cause is not Cause.AUTOCAST:
        return None
    node = origin.node
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute):
            return func.attr.value
        if isinstance(func, cst.Name):
            return func.value
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Power):
        return "pow"
    return None


def _from_autocast(fact: Fact) -> bool:
    """Computed in half precision by an enclosing autocast (or by a model under it)."""
    return fact.is_tensor and fact.cause is Cause.AUTOCAST and fact.prec in (Prec.HALF, Prec.MODEL)


def _wide(fact: Fact) -> bool:
    """float32 once autocast is off: explicit float32, or the model's own weights/inputs."""
    if not fact.is_tensor or fact.zero_dim:
        return False
    if fact.prec is Prec.FULL:
        return True
    return fact.prec is Prec.MODEL and fact.cause is not Cause.AUTOCAST
