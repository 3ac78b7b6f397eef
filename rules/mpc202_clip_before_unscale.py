"""MPC202: gradients are clipped while still multiplied by the GradScaler's loss scale."""

from __future__ import annotations

import libcst as cst

from mpcheck.api import Action, Rule, Severity, TrainingSite, dotted


class ClipBeforeUnscale(Rule):
    code = "MPC202"
    name = "clip-before-unscale"
    severity = Severity.WARNING
    summary = (
        "`clip_grad_norm_`/`clip_grad_value_` runs after a scaled backward "
        "(`scaler.scale(loss).backward()`, `accelerator.backward(loss)`) and before the "
        "gradients were unscaled, so it clips gradients multiplied by the loss scale."
    )
    why = """
        `scaler.scale(loss).backward()` leaves every gradient multiplied by the loss scale
        (65536 by default, and growing). `scaler.step(opt)` divides it out, but only at the
        step: a clip in between measures the scaled norm, so a `max_norm` of 1.0 is always
        exceeded and clipping shrinks the true gradients by the scale. Training runs, with a
        learning rate effectively divided by tens of thousands. `scaler.unscale_(opt)`
        before the clip divides the scale out first (and `step` then does not do it twice).
        The same holds for torch's `clip_grad_norm_` after `accelerator.backward(loss)`
        with fp16 mixed precision; `accelerator.clip_grad_norm_` unscales first and is right.
        A clip where an optional scaler is None (the `else` of `if scaler is not None:`, or
        `if not scaler:`) follows a plain backward and is not reported.
        """
    symptom = """
        No error. Measured with fp32 parameters and `GradScaler('cpu')`: true gradient norm
        0.084, `max_norm=1.0`, effective gradient norm at the step 1.5e-5 (a ratio of
        1.8e-4): the model barely trains.
        """
    how_to_fix = """
        Call `scaler.unscale_(optimizer)` right before the clip (once per step), or use
        `accelerator.clip_grad_norm_` with accelerate.
        """
    bad = """
        def train(model, optimizer, loader):
            scaler = torch.amp.GradScaler("cuda")
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = F.mse_loss(model(x), y)
                scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # scaled gradients
                scaler.step(optimizer)
                scaler.update()
        """
    good = """
        def train(model, optimizer, loader):
            scaler = torch.amp.GradScaler("cuda")
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = F.mse_loss(model(x), y)
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
        """

    def check_training(self, site: TrainingSite) -> None:
        scaler = site.scaler
        if site.action is not Action.CLIP or site.via != "torch" or scaler is None:
            return
        if not scaler.may_scale or site.scaled is False or site.unscaled is not False:
            return
        call = self.ctx.code(site.node)
        if scaler.via == "accelerate":
            fix = "use `accelerator.clip_grad_norm_`, which unscales first"
            when = "" if scaler.enabled else " when its mixed precision is fp16"
            what = f"the GradScaler of {scaler.text}{when}"
        else:
            fix = "call `scaler.unscale_(optimizer)` before it"
            what = f"the GradScaler {scaler.text}"
        paths = "" if site.scaled else " on some paths"
        if _clips_values(site.node):
            effect = (
                "the threshold applies to the scaled gradients, so once unscaled they are "
                "clamped to the threshold divided by the scale (65536 by default)"
            )
        else:
            effect = (
                "the threshold applies to the scaled norm, so the true gradients are shrunk "
                "by the scale (65536 by default)"
            )
        message = (
            f"`{call}` clips gradients that are still multiplied by the loss scale of {what}"
            f"{paths}: {effect}; {fix}"
        )
        related: list[tuple[cst.CSTNode, str]] = []
        if site.backward is not None:
            related.append((site.backward, "the scaled backward is here"))
        if isinstance(scaler.node, cst.Param):
            related.append((scaler.node, "the GradScaler comes in as this argument"))
        else:
            related.append((scaler.node, f"{scaler.text} is made here"))
        self.report(site.node, message, related=related)


def _clips_values(call: cst.Call) -> bool:
    """``clip_grad_value_(...)`` or timm's ``dispatch_clip_grad(..., mode="value")``."""
    name = dotted(call.func) or ""
    if name.rsplit(".", 1)[-1] in ("clip_grad_value_", "clip_grad_value"):
        return True
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "mode":
            return isinstance(arg.value, cst.SimpleString) and arg.value.evaluated_value == "value"
    return False
