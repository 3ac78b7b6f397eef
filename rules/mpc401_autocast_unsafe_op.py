"""MPC401: an op CUDA autocast refuses (binary cross-entropy) runs in an autocast region."""

from __future__ import annotations

import libcst as cst

from mpcheck.api import (
    Autocast,
    CallSite,
    Edit,
    Fix,
    Rule,
    RuleContext,
    Severity,
    autocast_policy,
    dotted,
)

# The ops autocast refuses, and what to use instead (autocast runs these in float32).
_INSTEAD = {
    "binary_cross_entropy": (
        "torch.nn.functional.binary_cross_entropy_with_logits",
        "F.binary_cross_entropy_with_logits",
        "nn.BCEWithLogitsLoss",
    ),
}
_SIGMOIDS = frozenset({"torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"})


class AutocastUnsafeOp(Rule):
    code = "MPC401"
    name = "autocast-unsafe-op"
    summary = (
        "`F.binary_cross_entropy` / `nn.BCELoss` is called inside a CUDA autocast region, "
        "where autocast refuses to run it."
    )
    why = """
        Autocast runs most ops in float16 and a few in float32, but it bans one outright:
        `aten::binary_cross_entropy` (`F.binary_cross_entropy`, `nn.BCELoss`). Its backward
        is not safe in float16, so the CUDA (and XPU) autocast kernel raises instead of
        running it, whatever the dtypes of the arguments. mpcheck reads this from the autocast
        policy torch registers (`mpcheck/data/autocast_ops.json`, measured per torch release:
        the lists of `target-torch-version` when one is set), not from a list of its own.

        On CPU, autocast runs the op in float32 instead, so a region that is CPU-only is not
        reported. A region whose device is only known at run time (`accelerator.autocast()`,
        `torch.autocast(device_type=x.device.type)`) is reported: such code is written to run
        on a GPU too, and there it raises. A region turned off with `enabled=False` is not
        reported (see MPC403 for what its inputs must be).

        The loss is often inside a loss module (a Dice+BCE `nn.Module`): calling an instance
        of a class from the same file whose `forward` calls BCE, with no autocast region of
        its own, inside a CUDA autocast region is reported at that call. Plain helper
        functions and modules from other files are not followed.
        A `LightningModule`'s steps (`training_step`, `validation_step`, `test_step`,
        `predict_step`, and the methods of the class they call, `forward` included) are an
        implicit region: with `Trainer(precision="16-mixed")` or `"bf16-mixed"` Lightning runs
        each step under CUDA autocast. The Trainer is usually configured elsewhere (or by the
        user), so these are warnings; hooks such as `on_train_epoch_end` run outside it.
        """
    symptom = """
        `RuntimeError: torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe
        to autocast. Many models use a sigmoid layer right before the binary cross entropy
        layer. In this case, combine the two layers using
        torch.nn.functional.binary_cross_entropy_with_logits or torch.nn.BCEWithLogitsLoss.`
        on the first training step on a GPU (CPU runs are fine, which is how it gets past
        tests).
        """
    how_to_fix = """
        Compute the loss from the logits with `F.binary_cross_entropy_with_logits` or
        `nn.BCEWithLogitsLoss` (and drop the sigmoid): autocast runs it in float32, and it is
        more accurate than a sigmoid followed by a log. If you only have probabilities, compute
        the loss in a region with `enabled=False` on `.float()` inputs.

        mpcheck's fix rewrites `F.binary_cross_entropy(torch.sigmoid(z), y)` (also
        `z.sigmoid()`, `F.sigmoid(z)`) into `F.binary_cross_entropy_with_logits(z, y)`; the
        other arguments mean the same in both. It is an unsafe fix: where the sigmoid
        saturates (|z| beyond about 17 in float32) the old loss was clamped and its gradient
        vanished, while the new one is exact, so the numbers change. `nn.BCELoss` modules and
        probabilities computed elsewhere get no fix: the change is not local.
        """
    bad = """
        with torch.autocast("cuda"):
            fake_logits = discriminator(generator(noise))
            loss = F.binary_cross_entropy(torch.sigmoid(fake_logits), real_labels)
        """
    good = """
        with torch.autocast("cuda"):
            fake_logits = discriminator(generator(noise))
            loss = F.binary_cross_entropy_with_logits(fake_logits, real_labels)
        """
    fixable = True
    fix_applicability = "unsafe"  # it changes a precision: --unsafe-fixes

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        # ``forward`` of a local class -> a refused op it calls with no autocast region around
        self.in_forward: dict[str, CallSite] = {}
        # calls of a local module's instance inside an enabled region: (call, its class)
        self.local_calls: list[tuple[CallSite, str]] = []

    def check_call(self, call: CallSite) -> None:
        region = call.scope.autocast
        if call.is_module_call and region is not None and region.active:
            layer = call.receiver.fact.layer if call.receiver else None
            if layer is not None and not call.aten:
                self.local_calls.append((call, layer))
        if not call.aten or not (call.is_module_call or (call.qualname or "").startswith("torch.")):
            return  # not an op, or a function of another library that happens to share the name
        if region is None and call.scope.lightning_step is not None:
            self.lightning(call, call.scope.lightning_step)
        if region is None:
            function = call.scope.function
            if call.scope.class_name and function and function.name.value == "forward":
                if autocast_policy(call.aten, "cuda", self.ctx.target_torch) == "banned":
                    self.in_forward.setdefault(call.scope.class_name, call)
            return
        if not region.active or region.policy(call.aten) != "banned":
            return
        qual, functional, module = _INSTEAD.get(call.aten, ("", "", ""))
        what, instead = _what(self, call, functional, module)
        where = _region_text(self, region)
        message = (
            f'{what} raises inside {where}: {region.cited} refuses it ("torch.nn.functional.'
            f'binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast."); use {instead}'
        )
        related = [(region.node, "the autocast region")]
        self.report(call.node, message, related=related, fix=self.fix(call, qual))

    def lightning(self, call: CallSite, step: cst.FunctionDef) -> None:
        """A refused op in a LightningModule step: Lightning's mixed precision
        (``Trainer(precision="16-mixed")``, ``"bf16-mixed"``) runs the step under CUDA
        autocast, an implicit region. A warning: the Trainer may run in float32."""
        if autocast_policy(call.aten, "cuda", self.ctx.target_torch) != "banned":
            return
        qual, functional, module = _INSTEAD.get(call.aten, ("", "", ""))
        what, instead = _what(self, call, functional, module)
        message = (
            f"{what} raises when the Trainer runs `{step.name.value}` with mixed precision "
            '(`precision="16-mixed"` or `"bf16-mixed"` on a GPU): Lightning runs the step '
            'under CUDA autocast, which refuses it ("torch.nn.functional.binary_cross_entropy '
            f'and torch.nn.BCELoss are unsafe to autocast."); use {instead}'
        )
        related = [(step.name, "Lightning runs this step under autocast with mixed precision")]
        fix = self.fix(call, qual)
        self.report(call.node, message, related=related, fix=fix, severity=Severity.WARNING)

    def finish(self) -> None:
        """A local loss module whose ``forward`` calls BCE, called in an autocast region."""
        for call, layer in self.local_calls:
            inner = self.in_forward.get(layer)
            region = call.scope.autocast
            if inner is None or region is None:
                continue
            if region.policy(inner.aten) != "banned":
                continue
            what, op = _callee(self, call), _callee(self, inner)
            message = (
                f"`{what}` runs `{layer}.forward`, whose `{op}` ({self.line(inner.node)}) raises "
                f"inside {_region_text(self, region)}: {region.cited} refuses binary cross-entropy "
                '("torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to '
                'autocast."); compute it from the logits with '
                "`F.binary_cross_entropy_with_logits` or `nn.BCEWithLogitsLoss`"
            )
            related = [
                (inner.node, "autocast refuses this op"),
                (region.node, "the autocast region"),
            ]
            self.report(call.node, message, related=related)

    def fix(self, call: CallSite, qual: str) -> Fix | None:
        """``F.binary_cross_entropy(torch.sigmoid(z), y)`` -> ``F.b_c_e_with_logits(z, y)``."""
        node = call.node
        if not qual or call.is_module_call or not isinstance(node, cst.Call):
            return None
        first = call.arg(0, "input")
        logits = _sigmoid_of(self, first.node) if first is not None else None
        if first is None or logits is None or any(a.star for a in node.args):
            return None
        func = node.func
        leaf = qual.rsplit(".", 1)[-1]
        if isinstance(func, cst.Attribute):
            edit = Edit(func.attr, leaf)  # keeps the user's spelling: ``F.``, ``nn.functional.``
            shown = f"{self.ctx.code(func.value)}.{leaf}"
        else:
            spelled = self.ctx.imports.spell(qual)
            if spelled is None:
                return None
            edit, shown = Edit(func, spelled), spelled
        logits_code = self.ctx.module.code_for_node(logits)
        message = f"Use `{shown}` on `{self.ctx.code(logits)}` (the logits, without the sigmoid)"
        return Fix(message, (edit, Edit(first.node, logits_code)), applicability="unsafe")


def _what(rule: Rule, call: CallSite, functional: str, module: str) -> tuple[str, str]:
    """What is called (``F.binary_cross_entropy``, a ``nn.BCELoss``) and what to use instead."""
    if call.is_module_call:
        assert call.receiver is not None
        return f"`{rule.ctx.code(call.receiver.node)}` (`nn.BCELoss`)", f"`{module}` on the logits"
    func = call.node.func if isinstance(call.node, cst.Call) else call.node
    return f"`{rule.ctx.code(func)}`", f"`{functional}` on the logits (without the sigmoid)"


def _callee(rule: Rule, call: CallSite) -> str:
    """``F.binary_cross_entropy`` / ``self.criterion``: what is called, without arguments."""
    return rule.ctx.code(call.node.func if isinstance(call.node, cst.Call) else call.node)


def _region_text(rule: Rule, region: Autocast) -> str:
    text = f"`{rule.ctx.code(region.node)}` ({rule.line(region.node)})"
    if region.device is None:
        text += ", which is CUDA autocast when this runs on a GPU"
    return text


def _sigmoid_of(rule: Rule, node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``z`` when ``node`` is ``torch.sigmoid(z)``, ``F.sigmoid(z)`` or ``z.sigmoid()``."""
    if not isinstance(node, cst.Call) or any(a.keyword or a.star for a in node.args):
        return None
    qual = rule.ctx.imports.resolve(node.func)
    if qual in _SIGMOIDS and len(node.args) == 1:
        return node.args[0].value
    func = node.func
    if qual is None and isinstance(func, cst.Attribute) and func.attr.value == "sigmoid":
        if not node.args and dotted(func.value) != "self":
            return func.value
    return None
