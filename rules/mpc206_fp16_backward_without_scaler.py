"""MPC206: the backward of a float16 autocast forward runs without loss scaling."""

from __future__ import annotations

from mpcheck.api import Action, Autocast, Rule, RuleContext, Severity, TrainingSite


class Fp16BackwardWithoutScaler(Rule):
    code = "MPC206"
    name = "fp16-backward-without-scaler"
    severity = Severity.WARNING
    summary = (
        "`loss.backward()` runs on a loss whose forward ran under float16 autocast, and nothing "
        "scales the loss: small gradients flush to zero."
    )
    why = """
        Under float16 autocast the forward's matmuls and convolutions run in float16, and
        so does the backward through them: each gradient flowing into such an op is a
        float16 tensor. float16 has no value below 2**-24 (6e-8) and only a few bits of
        precision below 2**-14 (6.1e-5), and activation gradients often live there (a mean
        over a large batch, a weighted auxiliary loss, a deep network's early layers): they
        round to zero, and the parameters they feed stop learning. A GradScaler multiplies
        the loss before `backward()` (by 65536 at first, adjusted as training goes) and
        divides the float32 parameter gradients again before the step, so the backward's
        float16 values stay in range. bfloat16 has float32's exponent range and needs no
        scaler (MPC203 reports one that is kept).

        Measured under torch 2.13 (CPU float16 autocast, a two-layer MLP, a loss weighted
        1e-6): without scaling every parameter gradient is exactly zero; with
        `GradScaler("cpu")` they match float32's to a relative error of 7e-4.

        Reported at the `backward()` of a loss computed in a `with` block of float16
        autocast (`dtype=torch.float16`, or CUDA's default), read from the names the
        function binds in that block, when no GradScaler exists on that path and nothing in
        the file names loss scaling (`GradScaler`, a `scaler`, `loss_scale`, apex's
        `scale_loss`), which may be the author's other path. Not reported: bfloat16
        autocast, a dtype the code leaves to the run (`dtype=amp_dtype`), accelerate's
        `accelerator.backward(loss)`, Lightning, DeepSpeed's `engine.backward(loss)` and
        fairseq-style `optimizer.backward(loss)`, which scale the loss themselves. With
        `enabled=` an expression the message says the finding holds when it is true; with
        `dtype=` a variable that is float16 on some runs only (`torch.float16 if fp16 else
        torch.bfloat16`) it says the finding holds on those runs. A GradScaler made with
        `enabled=False` scales nothing (`scale(loss)` returns the loss as it is): its
        `scaler.scale(loss).backward()` is reported as a plain backward, naming the scaler.
        A context held in an attribute (`with self.ctx:`) is the region `__init__` binds it
        to: bound to `nullcontext()` and, under a test, to an autocast, it is that region on
        the runs that turn it on, with a `dtype=` variable read from the class's assignments.
        """
    symptom = """
        Nothing raises. Some layers (often the first ones, or an auxiliary head) stop
        learning, the loss plateaus early, or float16 training underperforms float32
        training for no visible reason.
        """
    how_to_fix = """
        Scale the loss: make `scaler = torch.amp.GradScaler("cuda")` once, then
        `scaler.scale(loss).backward()`, `scaler.step(optimizer)` and `scaler.update()` in
        place of `loss.backward()` and `optimizer.step()` (call `scaler.unscale_(optimizer)`
        before clipping gradients). Or run autocast in bfloat16
        (`torch.autocast("cuda", dtype=torch.bfloat16)`), which needs no scaler.
        """
    bad = """
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(model(x), y)
            loss.backward()  # float16 gradients below 6e-8 flush to zero
            optimizer.step()
            optimizer.zero_grad()
        """
    good = """
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
        """

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        self.seen: set[int] = set()  # backward calls reported (a loop is walked twice)

    def check_training(self, site: TrainingSite) -> None:
        if site.action is not Action.PLAIN_BACKWARD or site.scaling_in_file:
            return
        if id(site.node) in self.seen or self.never_runs(site.scope):
            return
        regions = [r for r in site.regions if _float16(r)]
        regions += [r for r in site.regions if _float16_sometimes(r)]
        if not regions:
            return
        self.seen.add(id(site.node))
        region = regions[0]
        written = self.ctx.code(region.node)
        if region.float16_sometimes:
            default = ", float16 on the runs whose `dtype=` picks it"
        elif region.dtype is None:
            default = ", CUDA autocast's default dtype"
        else:
            default = ""
        when = " on the runs that turn it on" if region.enabled is None else ""
        related = [(region.node, "float16 autocast entered here")]
        scaling = "with no loss scaling"
        disabled = site.scaler
        if disabled is not None:  # ``GradScaler(enabled=False)``: ``scale`` is the identity
            scaling = (
                f"with no loss scaling (the GradScaler made at {self.line(disabled.node)} is "
                "made with `enabled=False`: its `scale` returns the loss unchanged)"
            )
            related.append((disabled.node, "the GradScaler is made disabled here"))
        message = (
            f"`{self.ctx.code(site.node)}` runs the backward of a loss computed under float16 "
            f"autocast (`{written}` at {self.line(region.node)}{default}){when} {scaling}: "
            "float16 gradients below 6e-8 flush to zero; scale the loss with a "
            "GradScaler (`scaler.scale(loss).backward()`, `scaler.step(optimizer)`, "
            "`scaler.update()`) or use bfloat16"
        )
        self.report(site.node, message, related=related)


def _float16_sometimes(region: Autocast) -> bool:
    """A region whose ``dtype=`` variable is float16 on some runs only."""
    usable = region.active and not region.implicit and not region.refused
    return usable and region.float16_sometimes


def _float16(region: Autocast) -> bool:
    """A region that runs its forward in float16 on the device it names."""
    if not region.active or region.implicit or region.refused:
        return False
    return region.low_dtype == "float16"
