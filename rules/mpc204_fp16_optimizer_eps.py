"""MPC204: an Adam-style optimizer steps float16 parameters with an eps float16 cannot hold."""

from __future__ import annotations

import libcst as cst

from mpcheck.api import (
    FP16_MIN_NORMAL,
    FP16_TINY,
    Action,
    Fact,
    Optimizer,
    Rule,
    RuleContext,
    Severity,
    TrainingSite,
    can_be_fp16,
    to_fp16,
)

# Optimizers whose denominator is a running root of squared gradients (stored in the
# parameters' dtype, so it underflows in float16) plus eps. Adamax divides by a running
# max of |grad| + eps instead: nothing underflows, only eps rounding to 0 hurts it.
SQUARED_STATE = frozenset({"Adam", "AdamW", "NAdam", "RAdam", "RMSprop", "Adagrad", "SparseAdam"})
# ``fused=True`` computes in float32, so eps survives, but Adam/AdamW still store the second
# moment in float16; fused Adagrad (a plain sum of squares) measured fine.
FUSED_AFFECTED = frozenset({"Adam", "AdamW"})


class Fp16OptimizerEps(Rule):
    code = "MPC204"
    name = "fp16-optimizer-eps"
    severity = Severity.WARNING
    summary = (
        "Adam/AdamW/RMSprop/Adagrad (torch.optim) update float16 parameters with an `eps` "
        "float16 cannot hold: the default 1e-8 rounds to 0, anything below 6.1e-5 is subnormal."
    )
    why = """
        Without float32 master weights the optimizer keeps its state and computes its
        update in the parameters' dtype. Its second moment (`exp_avg_sq`, RMSprop's
        `square_avg`, Adagrad's `state_sum`) holds squared gradients: in float16 anything
        below 3e-8 rounds to 0, so with Adam's `1 - beta2 = 0.001` every gradient below 5.5e-3
        leaves it at 0, and the denominator `sqrt(exp_avg_sq) + eps` is eps alone. The
        default `eps=1e-8` (1e-10 for Adagrad) rounds to 0 in float16, so the update divides
        by zero. A larger eps that is still subnormal (below 6.1e-5, e.g. 1e-6) avoids the
        division by zero, but the step becomes about `lr * grad / eps`, far larger than the
        float32 step. `fused=True` adds eps in float32, but Adam/AdamW still store the second
        moment in float16. (A GradScaler stepping float16 parameters raises first, see
        MPC201.)
        """
    symptom = """
        No error. Measured on a small MLP kept in float16: Adam, AdamW, NAdam, RMSprop and
        Adagrad with their default eps make the parameters inf/NaN at the first step (RAdam
        at the sixth); with `eps=1e-6` the weights grow to 39 where float32 keeps them
        at 0.26 and the loss ends 70x higher; fused AdamW with the default eps ends with a
        loss 3000x higher.
        """
    how_to_fix = """
        Keep the trainable parameters in float32 (train under autocast, or upcast them after
        a `.half()`), or pass an `eps` that is a normal float16 number (`eps=1e-4` is the
        usual choice for pure float16 training).
        """
    bad = """
        def train(loader):
            model = nn.Linear(16, 1).half()
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)  # eps=1e-8 is 0 in fp16
            for x, y in loader:
                loss = F.mse_loss(model(x.half()), y.half())
                loss.backward()
                optimizer.step()
        """
    good = """
        def train(loader):
            model = nn.Linear(16, 1).half()
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-4)
            for x, y in loader:
                loss = F.mse_loss(model(x.half()), y.half())
                loss.backward()
                optimizer.step()
        """

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        self.seen: set[int] = set()  # optimizers reported (one finding each)

    def check_training(self, site: TrainingSite) -> None:
        if site.action is not Action.STEP:
            return
        if site.scaler is not None and site.scaler.raises_on_fp16:
            return  # a GradScaler refuses float16 gradients first (MPC201)
        for use in site.optimizers:
            optimizer = use.optimizer
            if id(optimizer.node) in self.seen:
                continue
            consequence = _consequence(optimizer)
            half = next((p for p in use.params if can_be_fp16(p)), None)
            if consequence is None or half is None:
                continue
            self.seen.add(id(optimizer.node))
            self._report(site, optimizer, half, consequence)

    def _report(
        self, site: TrainingSite, optimizer: Optimizer, half: Fact, consequence: str
    ) -> None:
        eps = optimizer.eps
        assert eps is not None
        given = "" if optimizer.eps_node is not None else " (the default)"
        paths = "" if half.dtype == "float16" and not half.maybe else " on some paths"
        clause, decided = self.decided(half.origin.via if half.origin is not None else None)
        where = self.where(half) + clause
        source = f" ({where})" if where else ""
        message = (
            f"{_class(optimizer)} updates float16 parameters{paths}{source} with "
            f"eps={eps:g}{given}, {consequence}; keep the trainable parameters in float32 "
            "or pass eps=1e-4"
        )
        related: list[tuple[cst.CSTNode, str]] = []
        if half.origin is not None:
            related.append((half.origin.node, f"the parameters are {half.origin.text}"))
        related += decided
        if optimizer.eps_node is not None:
            related.append((optimizer.eps_node, "eps is set here"))
        related.append((site.node, "the step that updates them"))
        self.report(optimizer.node, message, related=related)


def _class(optimizer: Optimizer) -> str:
    return optimizer.names[0].rsplit(".", 1)[-1] if optimizer.names else "the optimizer"


def _consequence(optimizer: Optimizer) -> str | None:
    """What ``optimizer``'s eps does to float16 parameters; None when it is harmless."""
    eps = optimizer.eps
    if eps is None or eps >= FP16_MIN_NORMAL:
        return None
    cls = _class(optimizer)
    if optimizer.fused is not False:  # fused (or maybe): eps is added in float32
        if cls not in FUSED_AFFECTED or eps >= FP16_TINY:
            return None
        return (
            "which the fused kernel keeps in float32, but the second moment is stored in "
            "float16 and underflows to 0 for small gradients, so those steps are about "
            "lr*grad/eps and the weights blow up"
        )
    if to_fp16(eps) == 0.0:
        zero = "zero gradients"
        if cls in SQUARED_STATE:
            zero += ", or small ones whose square underflows float16"
        return (
            f"which rounds to 0 in float16: where the denominator is 0 before eps ({zero}) "
            "the update divides by zero and the parameters become inf/NaN"
        )
    if cls not in SQUARED_STATE:
        return None
    return (
        "which is a float16 subnormal (below 6.1e-5): the second moment is stored in "
        "float16 and underflows to 0 for small gradients, leaving eps as the whole "
        "denominator, so those steps are about lr*grad/eps, up to 1000x the float32 step, "
        "and the weights blow up"
    )
