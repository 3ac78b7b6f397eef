"""MPC303: positions, phases or timesteps computed in half precision."""

from __future__ import annotations

from mpcheck.api import (
    CallSite,
    Cause,
    Fact,
    Operand,
    PhaseProduct,
    Prec,
    Rule,
    Severity,
    autocast_policy,
    phase_product,
    timestep_cast,
)


def _half(operand: Operand) -> bool:
    return operand.fact.is_tensor and operand.fact.prec is Prec.HALF


def _with_model(operand: Operand) -> bool:
    """In the model's dtype: a buffer or parameter (or a value matched to one by
    ``.type_as``) that a model cast casts."""
    return operand.fact.is_tensor and operand.fact.prec is Prec.MODEL


def _handed(operand: Operand) -> bool:
    """An input of the function whose dtype nothing here decides (not cast, not upcast)."""
    fact = operand.fact
    origin = fact.origin
    return (
        fact.is_tensor
        and fact.prec in (Prec.UNKNOWN, Prec.MODEL, Prec.INT)
        and origin is not None
        and origin.cause is Cause.ACTIVATION
        and bool(fact.params)
    )


def _made_like(operand: Operand) -> bool:
    """Made in another tensor's dtype (``torch.arange(half, dtype=x.dtype)``, ``.to(x)``),
    not a buffer a model cast reaches."""
    return operand.fact.cause is Cause.SAME_AS


class HalfPositions(Rule):
    code = "MPC303"
    name = "half-positions"
    severity = Severity.WARNING
    summary = "Positions, phases or timesteps computed in half precision."
    why = """
        float16 holds integers exactly only up to 2048 and bfloat16 only up to 256; above
        that, neighbouring positions or timesteps round onto one value. A rotary or sinusoidal
        embedding multiplies positions by frequencies (`torch.einsum("i,j->ij", t, inv_freq)`,
        `inv_freq @ position_ids`) and takes cos/sin of the product: measured on torch 2.13,
        phases computed in float16 are 0.8 rad off at position 2000 and in bfloat16 off by
        pi by position 1000. Autocast runs `matmul`/`mm`/`bmm` (and on CUDA `einsum`) in half
        even when both operands are float32, so a rotary embedding that a mixed-precision
        trainer calls under autocast computes its phases in half unless it opens
        `torch.autocast(..., enabled=False)` around the product. A diffusion timestep
        (0..1000) cast to the latents' bfloat16 dtype before the timestep projection is
        rounded to a multiple of 4 above 512, so the model sees another timestep than the
        scheduler meant. PyTorch's FSDP does the same without any autocast: a policy with a
        half `param_dtype` casts the floating inputs of the model's forward to it
        (`MixedPrecisionPolicy(cast_forward_inputs=True)`, FSDP2's default, at each
        `fully_shard`-ed module; `MixedPrecision` at the root), so positions or timesteps
        handed in as float32 reach the product rounded (integer tensors and buffers are
        not cast). Not reported: products with float64 frequencies (Flux's `rope`),
        which autocast never casts (its `cached_cast` skips float64; the product promotes to
        float64), and timesteps cast only to scale noise or weight a loss (once mixed with
        another tensor they are a sample or a weight, rounded relatively like any activation),
        and phases `__init__` computes from a buffer it has just registered with a spelled
        dtype (`.float()`): no cast of the module runs between two statements of `__init__`,
        and a loader's half default dtype (`from_pretrained(torch_dtype=...)`) does not
        change an explicit float32, so that cos/sin cache is made from float32 phases.
        Not reported either: integer positions few enough to keep a phase each
        (`arange(n)` of a literal or constructor-default `n` up to 128 for bfloat16, 1024
        for float16: two positions differ by at least one frequency `f`, and rounding
        `t * f` moves it by at most `t * f * 2**-7` in bfloat16, less than `f` while
        `t <= 128`; measured, neighbours share a phase from 256 and 2048), and products in
        `__init__` under a premise of autocast (the model is built before a step opens its
        region). Positions divided by a number (interpolated) are no longer whole and stay
        reported. An integer timestep (`torch.randint(0, num_train_timesteps)`, a long
        tensor, `arange`) cast to a float16 written at the cast (`.half()`,
        `torch.float16`) is not reported either: float16 holds every
        integer up to 2048 exactly, so a 0..1000 timestep reaches the projection unchanged
        (measured on torch 2.13: all of 0..2048 survive `.half()`); cast to bfloat16, or
        fractional, or drawn below a count the code shows above 2048 (`randint(0, 4000)`,
        improved DDPM's 4000 steps), it is rounded and reported; so is a cast to a module's
        or tensor's dtype (`.to(transformer.dtype)`), bfloat16 wherever the model is loaded so,
        unless the project shows every half its class is given and each writes float16 down
        (`.half()`, `torch_dtype=torch.float16`; no bfloat16, no `.to(weight_dtype)`, no
        model of unknown class cast): there the model's dtype is float16 wherever it is half.
        Positions and frequencies are known by their names (`position_ids`, `inv_freq`) or
        by what builds them: frequencies are a ladder of powers over an index range
        (`1 / base ** (arange(0, d, 2) / d)`, `exp(-log(base) * arange(h) / h)`), positions
        a name bound to `arange(n)`. Positions made in another tensor's dtype
        (`arange(n).type_as(x)`) are rounded before any product, as such frequencies are.
        A finding whose frequencies (or a timestep's cast target) follow the model's dtype
        says why that is half here (the cast of the class or of a model that builds it, or
        its library base), with the cast as a related location, or states its premise
        ("latent: if `X` is cast to half").
        """
    symptom = """
        Nothing raises. Long sequences degrade (positions far apart share phases), generated
        images come out flat or blurred, and inference in half disagrees with float32.
        Frequencies built in the activations' dtype (`torch.arange(half, dtype=x.dtype)`)
        are rounded before any product: measured, the phases are 0.6-1.4 rad off at
        position 1000 in bfloat16 (0.3 rad in float16) even when the product runs in float32.
        """
    how_to_fix = """
        Compute phases in float32 and cast only their cos/sin: `.float()` on positions and
        frequencies, the product under `with torch.autocast(device_type, enabled=False):`
        (or `@torch.autocast(..., enabled=False)` on the method, or a variable bound once to
        that region, also against `nullcontext()` for devices without autocast), then
        `emb.cos().to(x.dtype)`. Keep timesteps float32 up to the timestep projection
        (`t.to(torch.float32)`). Under an FSDP policy, hand integer positions (not cast) or
        set `cast_forward_inputs=False` where the inputs must stay float32. mpcheck offers
        no fix: a layer that takes the timestep as
        its input (a `Linear` of the timestep) needs it in its own dtype, and raises on
        float32.
        """
    bad = """
        def sample(transformer, scheduler, latents):
            for i, t in enumerate(scheduler.timesteps):
                timestep = t.expand(latents.shape[0]).to(latents.dtype)
                latents = transformer(latents, timestep=timestep)
            return latents
        """
    good = """
        def sample(transformer, scheduler, latents):
            for i, t in enumerate(scheduler.timesteps):
                timestep = t.expand(latents.shape[0]).to(torch.float32)
                latents = transformer(latents, timestep=timestep)
            return latents
        """

    def check_call(self, call: CallSite) -> None:
        """Report phase products that run in half and timesteps cast away from float32."""
        if self.never_runs(call.scope):
            return  # (code nothing runs, whatever it casts: no hazard of the program)
        excused = self.against_half(call.scope, call.result)  # only ever float32, or unbuilt
        product = phase_product(call)
        if product is not None:
            if not excused:
                self._product(call, product)
            return
        cast = timestep_cast(call)
        if cast is None or (excused and not cast.known_half):
            return
        what = self.ctx.module.code_for_node(cast.timestep.node)
        target = (
            f".{call.method}()"
            if cast.target is None
            else self.ctx.module.code_for_node(cast.target)
        )
        if cast.frequencies:
            message = (
                f"`{what}` (frequencies or phases) is cast to "
                f"{'half' if cast.known_half else f'`{target}`'} before the phases are "
                "taken: positions past 256 (bfloat16) or 2048 (float16) then share rounded "
                "phases; keep the phases float32 and cast their cos/sin"
            )
        elif cast.known_half:
            message = (
                f"timestep `{what}` is cast to half (`{target}`): float16 holds integers "
                "exactly only up to 2048 and bfloat16 only up to 256, so the timestep "
                "projection sees a rounded timestep; keep it float32"
            )
        else:
            message = (
                f"timestep `{what}` is cast to `{target}`: when that is bfloat16 (float16) the "
                "timestep is rounded to a multiple of 4 (0.5) above 512 before the timestep "
                "projection; keep it float32"
            )
        if cast.known_half:
            self.report(call.node, message, severity=Severity.ERROR)
        else:  # (a dtype that follows the model's: why that is half here, or the premise)
            self._evidenced(call, message, call.result)

    def _evidenced(self, call: CallSite, message: str, half: Fact) -> None:
        """A warning whose half side follows the model's dtype, saying why that is half here
        (the cast or library base that makes the class half), or its premise."""
        premise = "if `{subject}` is cast to half"
        message, related, _ = self.with_evidence(message, call.scope, half, premise=premise)
        self.report(call.node, message, related=related)

    def _product(self, call: CallSite, product: PhaseProduct) -> None:
        positions, frequencies = product.positions, product.frequencies
        pos = self.ctx.module.code_for_node(positions.node)
        freq = self.ctx.module.code_for_node(frequencies.node)
        half = next((o for o in (positions, frequencies) if _half(o)), None)
        if product.distinct(half.fact.dtype if half is not None else None):
            return  # integer positions few enough to keep a phase each, in either half type
        if half is not None:
            which = self.ctx.module.code_for_node(half.node)
            where = self.where(half.fact)
            message = (
                f"phases `{pos}` x `{freq}` are computed in half: `{which}` is "
                f"{half.fact.dtype or 'half'}{f' ({where})' if where else ''}; positions "
                "past 256 (bfloat16) or 2048 (float16) round onto shared phases. Multiply "
                "`.float()` operands and cast the cos/sin"
            )
            self.report(call.node, message, severity=Severity.ERROR)
            return
        if product.in_float64:
            return  # float64 frequencies: autocast casts neither them nor the phases
        if self._in_region(call, product, pos, freq):
            return
        cast = next((o for o in (frequencies, positions) if _with_model(o)), None)
        if cast is not None and _made_like(cast):
            self._evidenced(
                call, self._rounded_before(cast, cast is frequencies, pos, freq), cast.fact
            )
            return
        if cast is not None and not self.autocast_only(call.scope):  # (else never cast)
            which = self.ctx.module.code_for_node(cast.node)
            message = (
                f"phases `{pos}` x `{freq}` are computed in the model's dtype: when the model "
                "is cast to half (`model.half()` and `.to(torch.bfloat16)` cast every "
                "floating buffer, persistent or not; a `torch_dtype=` load only those built "
                f"without an explicit float32 dtype), `{which}` is half and "
                "positions past 256 (bfloat16) or 2048 (float16) round onto shared phases; "
                "multiply `.float()` operands (or recompute the frequencies in float32)"
            )
            self._evidenced(call, message, cast.fact)
            return
        self._autocast_premise(call, product, pos, freq)

    def _rounded_before(self, cast: Operand, frequencies: bool, pos: str, freq: str) -> str:
        """Frequencies or positions made in another tensor's dtype: rounded with it before
        any product, whatever dtype the product runs in."""
        which = self.ctx.module.code_for_node(cast.node)
        made = f"`{which}` are made in another tensor's dtype ({self.where(cast.fact)})"
        if frequencies:
            return (
                f"frequencies {made}: when that is half they are rounded, and the phases "
                f"`{pos}` x `{which}` are off by 0.6-1.4 rad (bfloat16) or 0.3 rad (float16) "
                "at position 1000 even when the product runs in float32; build the "
                "frequencies in float32 (`dtype=torch.float32`) and cast only the cos/sin"
            )
        return (
            f"positions {made}: when that is half, positions past 256 (bfloat16) or 2048 "
            f"(float16) are rounded onto their neighbours before the phases `{pos}` x "
            f"`{freq}` are taken, even when the product runs in float32; build the positions "
            "in float32 (or as integers) and cast only the cos/sin"
        )

    def _in_region(self, call: CallSite, product: PhaseProduct, pos: str, freq: str) -> bool:
        """An autocast region of the code around the product: an error where it lowers it
        (True: the region decides, reported or not)."""
        auto = call.scope.autocast
        if auto is None:
            return False
        if not auto.active or not auto.casts_to_one_dtype(call.aten):
            return True
        if auto.policy(call.aten) != "lower_precision" or product.distinct(auto.low_dtype):
            return True
        if auto.low_dtype in ("float32", "float64"):
            return True  # (``autocast(dtype=torch.float32)``: its list computes in float32)
        message = (
            f"phases `{pos}` x `{freq}` are computed in half: {auto.cited} runs "
            f"`{call.aten}` in {auto.low_dtype or 'half'} here even on float32 operands, "
            "so positions past 256 (bfloat16) or 2048 (float16) round onto shared "
            "phases; compute them under `torch.autocast(..., enabled=False)`"
        )
        self.report(call.node, message, severity=Severity.ERROR)
        return True

    def _autocast_premise(self, call: CallSite, product: PhaseProduct, pos: str, freq: str) -> None:
        """A product autocast lowers, in code an autocast of its callers may run. Not in
        ``__init__``: autocast is a state its ``with`` block turns on around the steps that
        run the model, and a model is built before them (building one inside a region, which
        would lower these phases, is not seen)."""
        if call.scope.function is None or autocast_policy(call.aten, "cuda") != "lower_precision":
            return
        if call.scope.constructing:
            return
        if call.scope.no_autocast:
            self._input_cast(call, product)
            return  # the project never turns autocast on: the premise cannot hold
        message = (
            f"if this runs under autocast (mixed-precision training or inference), "
            f"`{call.aten}` of the positions `{pos}` and frequencies `{freq}` runs in half "
            "even on float32 operands, and positions past 256 (bfloat16) or 2048 (float16) "
            "round onto shared phases; compute the phases under "
            "`torch.autocast(..., enabled=False)`"
        )
        self.report(call.node, message)

    def _input_cast(self, call: CallSite, product: PhaseProduct) -> None:
        """Phases of a model's code in a project whose FSDP policy casts the models' floating
        forward inputs to a half ``param_dtype`` (FSDP2's ``cast_forward_inputs``, FSDP1's
        root): positions or timesteps handed in reach the product in half, no autocast
        needed. FSDP casts neither int tensors nor buffers, so a position believed int (by its
        name) counts only when the frequencies are of no known dtype (made in its dtype: the
        code takes it for floating)."""
        policy = call.scope.input_cast
        if policy is None or not (call.scope.in_module or call.scope.module_code):
            return
        positions, frequencies = product.positions, product.frequencies
        handed = next((o for o in (positions, frequencies) if _handed(o)), None)
        if handed is None:
            return
        other = frequencies if handed is positions else positions
        if handed.fact.prec is Prec.INT and other.fact.prec is not Prec.UNKNOWN:
            return  # (int positions by float32 or buffer frequencies: FSDP casts neither)
        which = self.ctx.module.code_for_node(handed.node)
        pos = self.ctx.module.code_for_node(positions.node)
        freq = self.ctx.module.code_for_node(frequencies.node)
        message = (
            f"phases `{pos}` x `{freq}` are computed in the dtype of `{which}`, handed in: "
            f"when the model's floating inputs carry it, {policy} casts them to its "
            "`param_dtype` before the forward (FSDP's `cast_forward_inputs`; no autocast "
            "involved), and in half positions past 256 (bfloat16) or 2048 (float16) round "
            "onto shared phases; multiply `.float()` operands"
        )
        self.report(call.node, message)
