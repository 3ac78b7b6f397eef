"""MPC202: gradients are clipped while still multiplied by the GradScaler's loss scale."""

from __future__ import annotations

import libcst as cst

from mpcheck.api import Action, Rule, RuleContext, Severity, TrainingSite, dotted


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
        A trainer may scale in one method and clip in another: `forward` returns
        `self.scaler.scale(loss)` for the caller to backward, and `update` clips, then
        `self.scaler.step(opt)`. An enabled scaler's `step` raises unless `scale` ran in that
        iteration, and it divides the gradients by the scale: they were scaled. So a clip
        followed on its path by the step of a scaler that came in as an argument, or that the
        object holds (made in another method of a class that never unscales), in a function
        that neither backwards nor unscales itself, is reported too; scalers kept under
        computed names (`setattr(self, f"scaler{i}", ...)`, read back with `getattr`) count.
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

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        # Functions that scale or unscale themselves: the main path judges their clips.
        self.settled: set[int] = set()
        self.reported: set[int] = set()  # clips reported before a step (one step may follow)

    def check_training(self, site: TrainingSite) -> None:
        self.check_passed_scaler(site)
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
        effect = _effect(site.node)
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

    def check_passed_scaler(self, site: TrainingSite) -> None:
        """``def step(self, scaler): clip_grad_norm_(...); scaler.step(opt)`` with the scaled
        backward in another method, or the same with ``self.scaler`` made in ``__init__``
        (in a class that never unscales): the clip still sees scaled gradients."""
        key = id(site.scope.function)
        if site.action in (Action.BACKWARD, Action.UNSCALE):
            self.settled.add(key)  # this function scales or unscales itself: not our case
            return
        scaler, clip = site.scaler, site.clip
        if site.action is not Action.STEP or scaler is None or clip is None:
            return
        if key in self.settled or site.unscaled is not False or not scaler.may_scale:
            return
        if isinstance(scaler.node, cst.Param):
            name = scaler.node.name.value
            what = f"the GradScaler `{name}`, which comes in as an argument and"
            made = "the GradScaler comes in as this argument"
        elif site.held is not None:
            func = site.node.func
            name = self.ctx.code(func.value) if isinstance(func, cst.Attribute) else "scaler"
            of = "of " if scaler.via == "accelerate" else ""
            held = f"`{site.held.name.value}`"
            what = f"the GradScaler {of}{scaler.text}, made in {held} and kept on `self`, which"
            made = f"{scaler.text} is made here"
        else:
            return
        if id(clip) in self.reported:
            return
        self.reported.add(id(clip))
        if scaler.via == "accelerate":
            fix = "use `accelerator.clip_grad_norm_`, which unscales first"
            unscale = "`accelerator.unscale_gradients()`"
        else:
            fix = f"call `{name}.unscale_(optimizer)` before the clip"
            unscale = f"`{name}.unscale_(...)`"
        message = (
            f"`{self.ctx.code(clip)}` clips gradients that are still multiplied by the loss "
            f"scale of {what} steps at {self.line(site.node)} with no {unscale} before the "
            f"clip: the scaled backward ran elsewhere; {_effect(clip)}; {fix}"
        )
        self.report(clip, message, related=[(scaler.node, made), (site.node, "it steps here")])


def _effect(node: cst.Call) -> str:
    if _clips_values(node):
        return (
            "the threshold applies to the scaled gradients, so once unscaled they are "
            "clamped to the threshold divided by the scale (65536 by default)"
        )
    return (
        "the threshold applies to the scaled norm, so the true gradients are shrunk "
        "by the scale (65536 by default)"
    )


def _clips_values(call: cst.Call) -> bool:
    """``clip_grad_value_(...)`` or timm's ``dispatch_clip_grad(..., mode="value")``."""
    name = dotted(call.func) or ""
    if name.rsplit(".", 1)[-1] in ("clip_grad_value_", "clip_grad_value"):
        return True
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "mode":
            return isinstance(arg.value, cst.SimpleString) and arg.value.evaluated_value == "value"
    return False
