"""MPC203: a GradScaler scales a loss computed in bfloat16."""

from __future__ import annotations

import libcst as cst

from mpcheck.api import (
    Action,
    CallSite,
    Origin,
    Rule,
    RuleContext,
    Scaler,
    Severity,
    TrainingSite,
    never_fp16,
)


class ScalerWithBf16(Rule):
    code = "MPC203"
    name = "scaler-with-bf16"
    severity = Severity.WARNING
    summary = "A GradScaler is used with bfloat16 autocast or bfloat16 parameters: it is useless."
    why = """
        Loss scaling exists because float16's exponent range is small: gradients below
        6e-8 underflow to zero unless the loss is multiplied first. bfloat16 has float32's
        exponent range, so nothing underflows and there is nothing to scale. A GradScaler
        around a bfloat16 forward costs a multiply, an unscale, an inf/NaN check and a
        host sync every step, and it tells the reader the model trains in float16 when it
        does not. Usually it is left over from switching `dtype=torch.float16` to
        `torch.bfloat16`. Measured (CPU, bfloat16 autocast): training with and without the
        scaler ends at the same weights. The rule also fires when the dtype is bfloat16 on
        some paths and float32 on the others (`torch.bfloat16 if bf16 else torch.float32`):
        float16 is never used, so the scaler never has work.
        """
    symptom = "No error: slower steps, and code that says fp16 where it runs bf16."
    how_to_fix = """
        Drop the scaler for bfloat16 (`loss.backward(); optimizer.step()`), or build it
        with `enabled=(amp_dtype == torch.float16)` so it only runs for float16.
        """
    bad = """
        scaler = torch.amp.GradScaler("cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        """
    good = """
        scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16)
        with torch.autocast("cuda", dtype=amp_dtype):
            loss = model(x)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        """

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        self.seen: set[int] = set()  # scalers reported (one finding each)

    def check_call(self, call: CallSite) -> None:
        """A GradScaler made in a branch only bfloat16 mode takes (``elif mp == "bf16":``)."""
        scaler = call.result.train
        if not isinstance(scaler, Scaler) or scaler.bf16_mode is None or not scaler.may_scale:
            return
        if id(scaler.node) in self.seen or scaler.via != "torch":
            return
        self.seen.add(id(scaler.node))
        test = scaler.bf16_mode
        message = (
            f"{scaler.text} is made only when `{self.ctx.code(test)}` ({self.line(test)}): "
            "bfloat16 has float32's range, so loss scaling does "
            "nothing but cost time; make the scaler only for float16"
        )
        self.report(call.node, message, related=[(test, "only bfloat16 runs in this branch")])

    def check_training(self, site: TrainingSite) -> None:
        scaler = site.scaler
        if scaler is None or scaler.via != "torch" or scaler.enabled is not True:
            return  # accelerate only makes a scaler for fp16; `enabled=` gates it already
        if id(scaler.node) in self.seen:
            return  # one finding per scaler: the first of its calls that shows it
        found = self.evidence(site)
        if found is None:
            return
        node, what, sometimes, via = found
        self.seen.add(id(scaler.node))
        runs = "in bfloat16 or float32, never float16" if sometimes else "in bfloat16"
        clause, decided = self.decided(via)  # ``.to(weight_dtype)``: where it was decided
        where = f"{what} at {self.line(node)}{clause}"
        related = [(node, what), *decided]
        message = (
            f"`{self.ctx.code(site.node)}` goes through the GradScaler {scaler.text} (made at "
            f"{self.line(scaler.node)}), but the training runs {runs} ({where}): bfloat16 "
            "has float32's range, so loss scaling does nothing but cost time; drop the "
            "scaler or enable it only for float16"
        )
        related.append((scaler.node, "the GradScaler is made here"))
        self.report(site.node, message, related=related)

    @staticmethod
    def evidence(site: TrainingSite) -> tuple[cst.CSTNode, str, bool, Origin | None] | None:
        """What shows no float16 reaches the scaler.

        (where, what, bfloat16 on some paths only, where a dtype variable was decided).
        """
        if site.action is Action.BACKWARD:
            regions = [r for r in site.regions if r.active]
            if regions and all(r.low_dtype == "bfloat16" for r in regions):
                return regions[-1].node, "the loss is computed under bfloat16 autocast", False, None
            loss = site.loss
            if loss is not None and never_fp16(loss) and loss.origin is not None:
                origin = loss.origin
                return origin.node, f"the loss is {origin.text}", loss.maybe, origin.via
            return None
        if site.action not in (Action.UNSCALE, Action.STEP):
            return None
        params = [p for use in site.optimizers for p in use.params]
        if not params or not all(never_fp16(p) for p in params):
            return None
        first = next((p for p in params if p.origin is not None), None)
        if first is None or first.origin is None:
            return None
        maybe = any(p.maybe for p in params)
        origin = first.origin
        return origin.node, f"the parameters are {origin.text}", maybe, origin.via
