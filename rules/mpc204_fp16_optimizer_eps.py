"""MPC204: an Adam-style optimizer steps float16 parameters with an eps float16 cannot hold."""

from __future__ import annotations

import libcst as cst

from mpcheck.diagnostics import Severity
from mpcheck.rule import Rule
from mpcheck.training import FP16_TINY, Action, TrainingSite, can_be_fp16


class Fp16OptimizerEps(Rule):
    code = "MPC204"
    name = "fp16-optimizer-eps"
    severity = Severity.WARNING
    summary = (
        "Adam/AdamW/RMSprop/Adagrad (torch.optim) updates float16 parameters in place with an "
        "`eps` below float16's smallest subnormal (6e-8), which rounds to zero."
    )
    why = """
        Without fp32 master weights the optimizer's state and update are computed in the
        parameters' dtype: `exp_avg_sq.sqrt() + eps` is a float16 sum, and the default
        `eps=1e-8` (1e-10 for Adagrad) is below float16's smallest subnormal, 2**-24 ≈ 6e-8,
        so it adds nothing. With small gradients the second moment underflows to zero too,
        and the update divides by zero. (`fused=True` computes in float32, and
        bitsandbytes' 8-bit optimizers do too, so they are not reported; a GradScaler
        stepping float16 parameters raises first, see MPC201.)
        """
    symptom = """
        No error: measured, float16 Adam with `eps=1e-8` and gradients around 1e-4 turns
        the parameters into `-inf` within 5 steps (for-loop and foreach implementations).
        """
    how_to_fix = """
        Keep the trainable parameters in float32 (train under autocast, or upcast them after
        a `.half()`), or pass an `eps` float16 can hold (`eps=1e-4` is common for pure fp16
        training), or use `fused=True`.
        """
    bad = """
        model = Net().half()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)  # eps=1e-8 is 0 in fp16
        for x, y in loader:
            loss = F.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        """
    good = """
        model = Net().half()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-4)
        """

    def check_training(self, site: TrainingSite) -> None:
        if site.action is not Action.STEP:
            return
        if site.scaler is not None and site.scaler.raises_on_fp16:
            return  # a GradScaler refuses float16 gradients first (MPC201)
        for use in site.optimizers:
            optimizer = use.optimizer
            eps = optimizer.eps
            if eps is None or eps >= FP16_TINY or optimizer.fused is not False:
                continue
            half = next((p for p in use.params if can_be_fp16(p)), None)
            if half is None:
                continue
            cls = optimizer.names[0].rsplit(".", 1)[-1] if optimizer.names else "the optimizer"
            given = "" if optimizer.eps_node is not None else " (the default)"
            paths = "" if half.dtype == "float16" and not half.maybe else " on some paths"
            where = self.where(half)
            source = f" ({where})" if where else ""
            message = (
                f"{cls} updates float16 parameters{paths}{source} with eps={eps:g}{given}, "
                f"which is below float16's smallest subnormal (6e-8) and rounds to 0: with "
                f"small gradients the update divides by zero and the parameters become "
                f"inf/NaN; keep the trainable parameters in float32 or pass eps=1e-4"
            )
            related: list[tuple[cst.CSTNode, str]] = []
            if half.origin is not None:
                related.append((half.origin.node, f"the parameters are {half.origin.text}"))
            if optimizer.eps_node is not None:
                related.append((optimizer.eps_node, "eps is set here"))
            related.append((site.node, "the step that updates them"))
            self.report(optimizer.node, message, related=related)
