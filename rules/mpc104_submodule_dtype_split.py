"""MPC104: part of a model is cast apart from the rest and then fed the other dtype."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from mpcheck.api import (
    DEFAULT_FLOAT32,
    CallSite,
    Cause,
    Edit,
    Fact,
    Fix,
    InnerCall,
    KeptResidualLoad,
    Operand,
    OpKind,
    Owner,
    Prec,
    Replacement,
    Rule,
    RuleContext,
    Severity,
    SplitRun,
    StoreSite,
    dotted,
    module_dtype,
)


class SubmoduleDtypeSplit(Rule):
    code = "MPC104"
    name = "submodule-dtype-split"
    summary = (
        "A submodule cast apart from its model (`model.half(); model.head.float()`) is "
        "called with activations in the model's other dtype, with no cast at the call; or a "
        "half weight's storage is replaced by its float32 promotion (`w.data = w.data * v32`); "
        "or a model kept float32 is handed another model's half output."
    )
    why = """
        `model.half()` / `model.to(torch.float16)` casts every parameter; casting one part back
        (`model.head.float()`, `model.block.to(torch.float32)`, or the reverse on a float32
        model, `model.block.half()`) leaves a model with two dtypes. Its activations stay in
        the dtype of the layers that produced them, so the first Linear or conv of the split
        part receives the other dtype and refuses it: torch never casts a layer's input to
        the layer's weights. The same happens when the split part is reached through the
        model's own `forward` (`model(x)` calling `self.head(h)`), when the rest of the model
        is fed the split part's output, when a part built in float32 is attached after the
        cast (`model.head = nn.Linear(...)`), and with parts kept in one dtype inside a model
        that is made half at construction: `_keep_in_fp32_modules`, or a layer built with a
        literal `dtype=torch.float32` (`from_pretrained(torch_dtype=torch.float16)` sets the
        default dtype while `__init__` runs, which leaves an explicit `dtype=` alone; a cast of
        the built model, `model.half()`, casts that layer with the rest). Adapters
        are such parts too: a tuner layer's per-adapter dicts (`lora_A`, `lora_B`, named in
        `adapter_layer_names`) kept float32 beside a half base layer, and the adapters a
        subclass of a quantized layer (bitsandbytes' `Linear8bitLt`) builds in float32 after
        the model was loaded; a functional `F.linear(x, self.lora_A[name])` refuses the half
        `x` as a float32 `nn.Linear` does, and so does one given a delta weight built from
        such factors (in a base class of the layer, or through a custom autograd Function).
        So is a head that a wrapper of a model it was handed (`self.pretrained_model =
        pretrained_model`) builds later, in a method its `__init__` does not call: float32,
        while the wrapped model may have been loaded in half. So is a part a loader builds in
        place of a model's child (`setattr(module, name, LinearLayer(shape))`, meta-device
        checkpoint loading, layer injection) from a class whose `__init__` builds its weights
        in a fixed `dtype=torch.half` default, not passed, while the same routine rebuilds
        that child's other replacements in the dtype it reads from the model
        (`dtype=child.weight.dtype`): in a bfloat16 or float32 model that part alone is
        float16. So are the parts a partial conversion leaves: a model's own method that
        casts some of its parts (`self.input_blocks.apply(convert_module_to_f16)`, guided
        diffusion's `convert_to_fp16`), when nothing casts the model whole, leaves the others
        (`time_embed`, `out`) float32, so a float32 value fed to them is right and a half one
        is refused. Norm
        layers are the exception: torch's float32 LayerNorm/GroupNorm/BatchNorm/RMSNorm accept
        a half input and return its dtype, so keeping them in float32 is fine -- but a float32
        input into a half norm raises, and apex's `FusedLayerNorm`/`FusedRMSNorm` read their
        weights in the input's dtype, so a float32 apex norm refuses half inputs. Under
        `torch.autocast`, Linear/conv/matmul recast their inputs, so mpcheck stays quiet there.

        Two models of one program split the same way. A sampler that runs its denoiser in
        half and keeps its decoder in float32 (`decoder = Decoder()`, never cast) must cast the
        latents before `decoder.decode(latents)`: the decoder's first convolution gets them
        as they are and raises "Input type (c10::Half) and bias type (float) should be the
        same". mpcheck reports the call when the project only ever builds the decoder's
        class in float32, this value of it was built in float32, the input is half by a cast
        or a half model's output, and no autocast covers the call. With the class in the
        same file, the method it runs (`forward`, `decode`, ...) is walked with those dtypes
        to find the first Linear, conv or RNN that gets the half value (a norm takes it);
        with the class in another project file (`from models.vae import Decoder`), that
        file's summary says which layer each public method hands its inputs to as they came
        (directly, or through a module of a class of that file whose `forward` does), and
        the finding points there. A method that casts its input first (`z.to(self.dtype)`,
        `.float()`) takes any dtype.

        A kept part can also split the residual stream. T5 keeps its feed-forward output
        projection `wo` float32 (`_keep_in_fp32_modules = ["wo"]`); loaded with
        `torch_dtype=torch.float16`, its block adds `wo`'s float32 output to the half stream
        (`h = h + self.dropout(ff(x))`), which is float32 from then on and reaches the next
        layer's half norm. T5's own `T5LayerNorm` upcasts and casts back to its weight's dtype,
        so it runs; torch's `nn.LayerNorm`/`nn.GroupNorm` (and a norm calling `F.layer_norm`
        with its own weight) refuse a float32 input with half weights, an error; apex's
        `FusedRMSNorm`, which transformers' modeling file puts in T5LayerNorm's place when apex
        is importable, refuses it too, a warning whose premise is apex. mpcheck reads this from
        the model's class, in the project or, with `follow-imports = "site"`, in an installed
        library, and reports the `from_pretrained` that loads it in half.

        A part is also split off through its own weights: `p.data = value` (and `m.weight =
        nn.Parameter(value)`) replaces a parameter's tensor as it is, dtype included, where
        `p.copy_(value)`, `p.data *= value` and `p.mul_(value)` cast. A merge that multiplies a
        half weight by a float32 operand (an adapter kept float32, `base_layer.weight.data =
        torch.mul(base_layer.weight.data, scale)`; a mask or noise made without `dtype=`)
        stores what type promotion made of them, float32, and from then on that layer refuses
        the model's half activations. mpcheck reports the assignment
        when the value is float32 by such an implicit promotion of a value in the model's dtype
        (or a half one) and the weight is in that dtype; an explicit cast is deliberate and
        stays quiet (`p.data = p.data.float()` upcasts trainable parameters for a GradScaler),
        and so does a cast back after the product (`.to(orig_dtype)`) or a torch norm's weight.

        A model's input embeddings cast on their own (`enc.get_input_embeddings().to(
        dtype=embedding_dtype)`, to train them in float32) split it the same way: its first
        layer takes the embeddings' output. A lambda handed to a helper
        (`make(cfg, lambda t: model.encode_text(t))`) runs where the helper calls it, so a
        helper calling it with no autocast there nor around the call that handed it runs the
        encoder split: under CUDA autocast `layer_norm` runs in float32 and Linear recasts,
        without it the first layer refuses the other dtype. mpcheck reports the helper's call,
        a warning whose premise is that the two dtypes differ (both are often settings).

        Where the half side is only the model's dtype (a class's own code, walked as if the
        model ran in half), a finding is an error when the project casts or loads that model
        in half, and otherwise a warning that states the premise ("latent: raises if `X` runs
        in half without autocast").
        """
    symptom = """
        `RuntimeError: mat1 and mat2 must have the same dtype, but got Half and Float`
        (a float32 head fed half activations, or a layer a merge left float32), `mixed dtype
        (CPU): expect parameter to have scalar type of Float` (a float32 activation into a half
        norm), `expected m1 and m2 to have the same dtype, but got: c10::BFloat16 !=
        c10::Half` (a float16 part replacing a child of a bfloat16 model), `Input type
        (c10::Half) and bias type (float) should be the same` (convolutions), `expected
        scalar type Half but found Float` (an apex fused norm kept in float32, on CUDA).
        """
    how_to_fix = """
        Cast at the boundary of the split part: `model.head(h.float())`, or generally
        `model.head(h.to(model.head.weight.dtype))`, and cast its output back if later layers
        are half. Inside a model, cast where `forward` calls the part
        (`self.head(h.to(self.head.weight.dtype))`). Or drop the partial cast and run the whole
        model in one dtype under `torch.autocast`. mpcheck's fix, for a direct call of the
        split part, casts the input to the part's weights' dtype (an unsafe fix: it changes
        the precision the call runs in). A part built in place of a child: pass it the dtype
        the routine reads from the model (`dtype=child.weight.dtype`), as its siblings do.
        A weight's new storage: cast it back to the weight's dtype before storing it
        (`torch.mul(w.data, v).to(w.dtype)`, what mpcheck's fix writes), or update the weight
        in place (`w.data.mul_(v)`), which casts.
        """
    bad = """
        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(16, 32)
                self.head = nn.Linear(32, 10)


        def predict(images):
            model = Classifier().half()
            model.head.float()  # the head is float32, the backbone half
            feats = model.backbone(images.half())
            return model.head(feats)  # half features into a float32 Linear
        """
    good = """
        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(16, 32)
                self.head = nn.Linear(32, 10)


        def predict(images):
            model = Classifier().half()
            model.head.float()
            feats = model.backbone(images.half())
            return model.head(feats.float())
        """
    fixable = True
    fix_applicability = "unsafe"  # it changes a precision: --unsafe-fixes

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        # Calls of parts cast apart from their model (``model.backbone(x)``), by node: their
        # outputs have the part's dtype, which the rest of the model refuses.
        self._split_outputs: dict[int, tuple[str, Fact, Owner]] = {}

    def check_call(self, call: CallSite) -> None:
        if call.handed_split is not None:
            self._handed_split(call, call.handed_split)
            return
        if call.replacement is not None:
            self._replaced(call, call.replacement)
            return
        if call.kept_residual is not None:
            self._kept_residual(call, call.kept_residual)
            return
        if self._found_apart(call):
            return
        if (call.fed_half or call.fed_elsewhere) and self._half_into_float32(call):
            return
        if not call.is_module_call or call.receiver is None:
            self._functional(call)
            return
        if self._direct(call) or self._split_output(call):
            return
        inner = list(_flatten(call.inner))
        for item in inner:
            if self._through_forward(call, item, _split_casts(inner)):
                return

    # -- ``model.head(feats)`` -------------------------------------------------------
    def _direct(self, call: CallSite) -> bool:
        """A split part called directly with the other dtype."""
        assert call.receiver is not None
        module, owner = call.receiver.fact, call.owner
        if owner is None or module.cause not in SPLIT_CAUSES or not _apart(module, owner.fact):
            return False
        sub = self.ctx.code(call.receiver.node)
        self._split_outputs[id(call.node)] = (sub, module, owner)
        pair = _clash(call)
        if pair is None:
            return False
        x, _ = pair
        if x.fact.cause in FORCED_FP32 and module.prec is not Prec.FULL:
            return False  # a float32 value forced by an upcast or a factory: MPC101/MPC102
        what = self.ctx.code(x.node)
        if owner.fact.prec is Prec.MODEL and x.fact.prec is Prec.MODEL:
            # Inside the model's own code: a part built or kept in a fixed dtype.
            # (an explicit dtype survives a model built or loaded in half; a part built after
            # the model, or beside a quantized layer, was never made half in the first place)
            explicit = module.origin is not None and "(the default)" not in module.origin.text
            why = " (built or loaded with a half dtype, which leaves a part's explicit dtype alone)"
            message = (
                f"`{sub}` is {_dtype(module)}{self._from(module)} while the rest of "
                f"`{owner.path}` follows the model's dtype, and so does `{what}` passed to "
                f"it{self._from(x.fact)}: when the model runs in half precision"
                f"{why if explicit else ''}, {_consequence(call, x.fact)}"
            )
        else:
            message = (
                f"`{sub}` is {_dtype(module)}{self._from(module)} while `{owner.path}` is "
                f"{_dtype(owner.fact)}{self._from(owner.fact)}, but `{what}` passed to it is "
                f"{_dtype(x.fact)}{self._from(x.fact)}; {_consequence(call, x.fact)}"
            )
        related = self._split_related(sub, module) + self._input_related(what, x.fact)
        related += self._owner_related(owner.path, owner.fact)
        self.report_evidenced(
            call.node,
            message,
            call.scope,
            x.fact,
            related=_unique(related),
            fix=self._fix(x, sub, call.receiver.fact),
            op=call,
        )
        return True

    # -- ``vae(latents)``: a model kept float32 handed another model's half output ----------
    def _half_into_float32(self, call: CallSite) -> bool:
        """A model the project only builds in float32, called where no autocast covers it
        with a half value: the first layer of its ``forward`` that gets it raises."""
        if not call.fed_half:
            return self._half_into_imported(call)
        site = call.fed_half[0].site
        first, _ = site.operands()
        outer = next(
            (
                o
                for o in (*call.args, *call.kwargs.values())
                if first is not None and o.fact.origin is not None and o.fact == first.fact
            ),
            None,
        ) or next(
            (o for o in (*call.args, *call.kwargs.values()) if o.fact.prec is Prec.HALF), None
        )
        if outer is None or call.receiver is None:
            return False
        what, model = self.ctx.code(outer.node), self.ctx.code(call.receiver.node)
        inner = site.receiver.node if site.is_module_call and site.receiver else site.node
        inner_text = self.ctx.code(inner.func if isinstance(inner, cst.Call) else inner)
        weights = call.receiver.fact
        node = call.node
        runs = self.ctx.code(node.func) if isinstance(node, cst.Call) else model
        message = self._refused(outer, model, weights, runs, inner_text, self.line(site.node))
        related = self._input_related(what, outer.fact)
        if weights.origin is not None:
            related.append((weights.origin.node, f"`{model}` {weights.origin.text}"))
        related.append((site.node, f"`{inner_text}` gets `{what}` in half precision here"))
        self.report(call.node, message, related=_unique(related))
        return True

    def _refused(
        self, outer: Operand, model: str, weights: Fact, runs: str, layer: str, at: str
    ) -> str:
        """The message of a half input handed to a float32 model's ``layer`` (at ``at``)."""
        what = self.ctx.code(outer.node)
        return (
            f"`{what}` is {_dtype(outer.fact)}{self._from(outer.fact)} but `{model}` is "
            f"float32{self._from(weights)} and the project never casts its class: "
            f"`{runs}` hands `{what}` to `{layer}` at {at}, whose float32 weights refuse a "
            "half input; cast the input to the model's dtype at this call, or cast the model "
            "with the other"
        )

    def _half_into_imported(self, call: CallSite) -> bool:
        """:meth:`_half_into_float32` for a model of another project file: its class's
        summary names the layer that gets the half value, in that file."""
        fed = call.fed_elsewhere
        if fed is None or call.receiver is None or not isinstance(call.node, cst.Call):
            return False
        outer = fed.operand
        what, model = self.ctx.code(outer.node), self.ctx.code(call.receiver.node)
        weights = call.receiver.fact
        runs = self.ctx.code(call.node.func)
        at = f"{fed.place.path}:{fed.place.line}"
        message = self._refused(outer, model, weights, runs, fed.layer, at)
        related = self._input_related(what, outer.fact)
        if weights.origin is not None:
            related.append((weights.origin.node, f"`{model}` {weights.origin.text}"))
        related.append((call.node.func, ""))  # (the layer, in the other file)
        self.report(call.node, message, related=_unique(related))
        return True

    # -- ``base_layer.weight.data = torch.mul(base_layer.weight.data, ia3_l)`` ---------------
    def check_store(self, site: StoreSite) -> None:
        """A weight's storage replaced by what type promotion made of it and a float32
        operand: that part of the model is float32 from here on, the rest half."""
        met = site.widened
        if met is None:
            return
        tensor, value = site.target, site.value.fact
        name = self.ctx.code(tensor.node)
        before = tensor.fact
        if before.prec is Prec.HALF:
            was, when = f"{_dtype(before)}{self._from(before)}", ""
        else:
            was, when = "in the model's dtype", "when the model runs in half precision, "
        how = "assigning to `.data`" if site.data else "a new `nn.Parameter`"
        message = (
            f"`{name}` is {was}, but the value stored in it here is float32: "
            f"`{self.ctx.code(met.node)}` at {self.line(met.node)} is promoted to float32 by a "
            f"float32 operand{self._from(value)}, and {how} does not cast; {when}`{name}` is "
            "float32 from here on, apart from the rest of the model, and a layer holding it "
            f"refuses the model's half activations; cast the value back to `{name}.dtype`"
        )
        related: list[tuple[cst.CSTNode, str]] = [
            (met.node, "promoted to float32 here, by type promotion with a float32 operand")
        ]
        if value.origin is not None:
            related.append((value.origin.node, f"the float32 operand: {value.origin.text}"))
        related += _via(value)
        fix = self._cast_back(site)
        self.report_evidenced(
            site.node, message, site.scope, before, related=_unique(related), fix=fix
        )

    def _cast_back(self, site: StoreSite) -> Fix | None:
        """``.to(<tensor>.dtype)`` after the stored value (read before the store runs)."""
        name = self.ctx.exact(site.target.node)
        value = site.value.node
        if name is None or not all(p.isidentifier() for p in name.split(".")):
            return None
        if self.ctx.exact(value) is None:
            return None
        cast = f"{self.ctx.atom(value)}.to({name}.dtype)"
        return Fix(f"Cast the stored value to `{name}.dtype`", (Edit(value, cast),), "unsafe")

    # -- ``setattr(module, name, HalfLinear(shape))`` beside ``dtype=child.weight.dtype`` ----
    def _kept_residual(self, call: CallSite, found: KeptResidualLoad) -> None:
        """A model loaded in half whose class keeps a part float32 that turns the residual
        stream float32 ahead of a norm that a fused one is (or replaces): a warning with its
        premise, since torch's own norms accept the mix."""
        cast = f"torch_dtype={self.ctx.code(found.cast.node)}"
        story = (
            f"`{found.model}` keeps `{found.kept}` float32 (`_keep_in_fp32_modules`) while "
            f"`{cast}` loads the rest in half, so the residual stream is float32 after "
            f"`{found.kept}` and the next layer's half norm gets a float32 input"
        )
        if not found.fused:  # torch's own norm: it raises wherever the model runs
            message = (
                f"{story}; `{found.norm}` refuses it (`mixed dtype (CPU): expect parameter to "
                f"have scalar type of Float`); cast the stream to the norm's dtype before it, "
                f"or load in float32 and run under `torch.autocast`"
            )
            self.report(call.node, message, related=found.evidence)
            return
        premise = (
            f"raises if apex is installed (`{found.norm}` then replaces the model's norm)"
            if found.substituted
            else f"raises where `{found.norm}` runs its fused kernel (CUDA)"
        )
        message = (
            f"latent: {premise}: {story}; `{found.norm}` refuses it (`expected scalar type "
            f"Float but found Half`), where torch's norm would cast it back; load in float32 "
            f"and run under `torch.autocast`, or cast the stream to the norm's dtype"
        )
        self.report(call.node, message, related=found.evidence, severity=Severity.WARNING)

    def _replaced(self, call: CallSite, found: Replacement) -> None:
        """A model's child replaced by a part built in its class's fixed half default while
        the same routine rebuilds the child in the dtype it reads from the model."""
        part = found.part.fact
        built, read = self.ctx.code(found.built), self.ctx.code(found.read)
        how = part.origin.text if part.origin is not None else f"built in {_dtype(part)}"
        message = (
            f"`{built}` is {how}, and takes the place of a child of the model "
            f"(`{self.ctx.code(call.node)}` at {self.line(call.node)}), while this routine "
            f"builds the same child's other replacement in the dtype it reads from the model "
            f"(`dtype={read}` at {self.line(found.sibling)}): in a model of any other dtype "
            f"(bfloat16, float32) this part alone is {_dtype(part)}, and the first layer that "
            f"meets the model's activations refuses them; pass `dtype={read}` here too"
        )
        related = [
            (found.built, f"`{built}` {how}"),
            (call.node, "the part takes the child's place in the model here"),
            (found.sibling, f"`{self.ctx.code(found.sibling)}`: the child rebuilt in `{read}`"),
        ]
        self.report(found.built, message, related=related)

    def _handed_split(self, call: CallSite, found: SplitRun) -> None:
        """A parameter called here runs a lambda the project hands it, and that lambda runs a
        module whose input embeddings were cast apart from its layers, with no autocast here
        nor around the call that handed it: the first layer gets the embeddings' dtype."""
        path, line, called = found.handed
        where, row, _, cast = found.split
        via = "" if called == found.module else f" (through `{called}`)"
        callee = self.ctx.code(getattr(call.node, "func", call.node))
        message = (
            f"`{callee}` runs the lambda handed to it at {path}:{line}, "
            f"which runs `{found.module}`{via}, whose input embeddings are cast apart from its "
            f"layers (`{cast}` at {where}:{row}); with no autocast here nor around the call "
            f"that handed it, latent: raises if that dtype differs from `{found.module}`'s "
            "layers (its first norm or Linear refuses the embeddings' dtype: `expected scalar "
            "type Float but found Half`); run this call under the model's autocast, or cast "
            "the embeddings' output to the layers' dtype"
        )
        self.report(call.node, message, severity=Severity.WARNING)

    # -- ``elif latents.dtype != self.vae.dtype:`` fixed on one platform only ---------------
    def _found_apart(self, call: CallSite) -> bool:
        """A model called with a tensor whose dtype the code itself found different from the
        model's, with a cast (of either) on some paths only: on the others the model raises."""
        module = call.receiver
        if module is None or module.fact.kind.value != "module" or call.recast_by_autocast:
            return False
        name = None  # (the model's source: read only when some input was found apart)
        for x in (*call.args, *call.kwargs.values()):
            apart = x.fact.apart if x.fact.is_tensor else None
            if apart is None:
                continue
            name = self.ctx.code(module.node) if name is None else name
            if apart[0] != name:
                continue
            what, tested = self.ctx.code(x.node), apart[1]
            message = (
                f"`{what}` reaches `{name}` with a dtype {tested.text} at {self.line(tested.node)}"
                f", and on some path since neither `{what}` nor `{name}` is cast; the model "
                "refuses mismatched dtypes, so cast the input to the model's dtype before this call"
            )
            related = [(tested.node, f"`{what}` and `{name}` are found to differ here")]
            self.report(call.node, message, related=related)  # (a whole model has no .weight)
            return True
        return False

    # -- ``F.linear(x, self.lora_A[name])`` with a part's parameter kept apart ------------
    def _functional(self, call: CallSite) -> None:
        """A functional layer (``F.linear``/``F.conv2d``) given a parameter the model keeps in
        float32 (``_keep_in_fp32_modules``, a peft adapter) and the model's activations."""
        if call.op not in (OpKind.LINEAR, OpKind.CONV) or not call.scope.in_module:
            return
        pair = _clash(call)
        if pair is None:
            return
        x, weight = pair
        kept = weight.fact
        if not kept.kept_float32:
            return
        if x.fact.prec is not Prec.MODEL or x.fact.cause in FORCED_FP32:
            return
        what, param = self.ctx.code(x.node), self.ctx.code(weight.node)
        message = (
            f"`{param}` is {_dtype(kept)}{self._from(kept)} while `{what}` passed with it "
            f"follows the model's dtype{self._from(x.fact)}: when the model runs in half "
            f"precision, {_consequence(call, x.fact)}"
        )
        related = self._split_related(param, kept) + self._input_related(what, x.fact)
        self.report_evidenced(
            call.node, message, call.scope, x.fact, related=_unique(related), op=call
        )

    # -- ``model.head(model.backbone(x))`` with the backbone cast apart --------------------
    def _split_output(self, call: CallSite) -> bool:
        """The rest of a model called with the output of a part cast apart from it."""
        assert call.receiver is not None
        pair = _clash(call)
        if pair is None or call.owner is None:
            return False
        x, _ = pair
        origin = x.fact.origin
        split = self._split_outputs.get(id(origin.node)) if origin is not None else None
        if split is None or _apart(call.receiver.fact, call.owner.fact):
            return False
        part, module, owner = split
        if owner.path != call.owner.path:
            return False
        sub = self.ctx.code(call.receiver.node)
        what = self.ctx.code(x.node)
        message = (
            f"`{what}` is {_dtype(x.fact)}, the output of `{part}`, which is "
            f"{_dtype(module)}{self._from(module)} unlike the rest of `{owner.path}`; `{sub}` has "
            f"`{owner.path}`'s weights, {_dtype(call.receiver.fact)}"
            f"{self._from(call.receiver.fact)}; {_consequence(call, x.fact)}"
        )
        related = self._split_related(part, module)
        related += self.related_for(what, x.fact)
        related += self._owner_related(owner.path, owner.fact)
        self.report_evidenced(
            call.node,
            message,
            call.scope,
            _half_side(x.fact, call.receiver.fact),
            related=_unique(related),
            fix=self._fix(x, sub, call.receiver.fact),
            op=call,
        )
        return True

    # -- ``model(x)`` whose forward calls the split part --------------------------------
    def _through_forward(self, call: CallSite, inner: InnerCall, splits: list[Fact]) -> bool:
        """``model(x)`` whose own code reaches the split part with the other dtype."""
        site = inner.site
        pair = _clash(site)
        if pair is None or (inner.unsplit is not None and _clash(inner.unsplit) is not None):
            return False  # no clash, or one the split did not cause (another rule's)
        if not splits or call.receiver is None:
            return False
        x, weights = pair
        split_side = weights if _changed(weights, inner.unsplit, site) else x
        other = x if split_side is weights else weights
        first = splits[0]
        assert first.origin is not None
        cast = first.origin.node
        part = _cast_target(cast)
        model = _common_path(self.ctx.code(call.receiver.node), part)
        verb = "cast" if part is not None else f"built {_dtype(first)}"
        called = self.ctx.code(site.node)
        message = (
            f"`{self.ctx.code(call.node)}` runs `{called}` ({self.line(site.node)}) with "
            f"`{self.ctx.code(x.node)}` {_dtype(x.fact)}{self._from(x.fact)} and "
            f"`{self.ctx.code(weights.node)}` {_dtype(weights.fact)}"
            f"{self._from(weights.fact)}: `{self.ctx.code(cast)}` at "
            f"{self.line(cast)} {verb} part of `{model}` apart from the rest; "
            f"{_consequence(site, x.fact, inside=True)}"
        )
        related: list[tuple[cst.CSTNode, str]] = [
            (site.node, f"`{called}` in the model's code is where the two dtypes meet")
        ]
        related += [(f.origin.node, f"the split: {f.origin.text}") for f in splits if f.origin]
        for side in (split_side, other):
            if not isinstance(side.fact.origin.node if side.fact.origin else None, cst.Param):
                related += self.related_for(self.ctx.code(side.node), side.fact)
            if side.fact.origin is not None and side.fact.origin.via is not None:
                via = side.fact.origin.via
                related.append((via.node, via.text))
        half = _half_side(x.fact, weights.fact)
        self.report_evidenced(
            call.node, message, call.scope, half, related=_unique(related), op=call
        )
        return True

    # -- helpers ---------------------------------------------------------------------
    def _from(self, fact: Fact) -> str:
        where = self.where(fact)
        return f" ({where})" if where else ""

    def _split_related(self, sub: str, module: Fact) -> list[tuple[cst.CSTNode, str]]:
        if module.origin is None:
            return []
        return [(module.origin.node, f"`{sub}` {module.origin.text}: the split")] + _via(module)

    def _input_related(self, what: str, x: Fact) -> list[tuple[cst.CSTNode, str]]:
        """Where the input's dtype came from: not for a plain input of the function."""
        if isinstance(x.origin.node if x.origin else None, cst.Param):
            return []
        return self.related_for(what, x)

    def _owner_related(self, path: str, owner: Fact) -> list[tuple[cst.CSTNode, str]]:
        if owner.origin is None or owner.cause not in SPLIT_CAUSES:
            return []
        return [(owner.origin.node, f"`{path}` {owner.origin.text}")] + _via(owner)

    def _fix(self, x: Operand, sub: str, part: Fact) -> Fix | None:
        dtype_of = module_dtype(sub, part.layer, container=part.container)
        if dtype_of is None or len(dtype_of) > 60:
            return None
        if "\n" in sub or not all(p.isidentifier() for p in sub.split(".")):
            return None
        what = self.ctx.code(x.node)
        return Fix(
            f"Cast `{what}` to `{dtype_of}`",
            (Edit(x.node, f"{self.ctx.atom(x.node)}.to({dtype_of})"),),
            applicability="unsafe",
        )


FORCED_FP32 = (Cause.UPCAST, *DEFAULT_FLOAT32)
# How a part comes to differ from its model: cast on its own (``model.head.float()``, built
# with ``dtype=``), or built in the default float32 and attached to a half model.
SPLIT_CAUSES = (Cause.MODEL_CAST, Cause.CONTRACT, Cause.LITERAL)
MODULE_CASTS = frozenset({"float", "half", "bfloat16", "double", "to", "type"})


def _via(fact: Fact) -> list[tuple[cst.CSTNode, str]]:
    """``.to(weight_dtype)``: where ``weight_dtype`` got the dtype of the cast."""
    via = fact.origin.via if fact.origin is not None else None
    return [(via.node, via.text)] if via is not None else []


def _cast_target(node: cst.CSTNode) -> str | None:
    """``vae.decoder`` for the cast ``vae.decoder.float()``; None for anything else."""
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
        return None
    if node.func.attr.value not in MODULE_CASTS:
        return None
    return dotted(node.func.value)


def _common_path(called: str, part: str | None) -> str:
    """The model both paths are in: ``vae`` for ``vae.decode`` and ``vae.decoder``."""
    if part is None:
        return called
    a, b = called.split("."), part.split(".")
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return ".".join(a[:n]) or called


def _flatten(inner: tuple[InnerCall, ...]) -> Iterator[InnerCall]:
    """Every re-walked call, those inside nested module calls included."""
    for item in inner:
        yield item
        yield from _flatten(item.site.inner)


def _split_casts(inner: list[InnerCall]) -> list[Fact]:
    """The parts cast apart (``model.head.float()``) that the re-walked calls reach."""
    out: list[Fact] = []
    for item in inner:
        now, before = item.site.receiver, item.unsplit.receiver if item.unsplit else None
        if now is None or now.fact.kind.value != "module" or now.fact.cause not in SPLIT_CAUSES:
            continue
        if before is not None and before.fact.prec is now.fact.prec:
            continue
        if all(f.origin is not now.fact.origin for f in out):
            out.append(now.fact)
    return out


def _low(prec: Prec) -> bool:
    return prec in (Prec.MODEL, Prec.HALF)


def _half_side(a: Fact, b: Fact) -> Fact | None:
    """The side of a clash that is half, for its evidence: an explicit half (its own
    evidence) before one that is half only when the model runs in half."""
    return next((f for f in (a, b) if f.prec is Prec.HALF), None) or next(
        (f for f in (a, b) if f.prec is Prec.MODEL), None
    )


def _apart(part: Fact, owner: Fact) -> bool:
    """One is float32 and the other half (or the model's dtype): the part was cast apart."""
    return (part.prec is Prec.FULL and _low(owner.prec)) or (
        _low(part.prec) and owner.prec is Prec.FULL
    )


def _clash(site: CallSite) -> tuple[Operand, Operand] | None:
    """``(input, parameter)`` whose dtypes make this layer/matmul raise, or None."""
    if (
        site.op in (None, OpKind.ATTENTION, OpKind.EMBEDDING, OpKind.MODEL)
        or site.recast_by_autocast
    ):
        return None
    first, params = site.operands()
    if first is None or not first.fact.floating or first.fact.zero_dim:
        return None
    for param in params:
        if not param.fact.floating or param.fact.zero_dim or not _apart(first.fact, param.fact):
            continue
        if site.norm_keeps_low_input and _low(first.fact.prec):
            continue  # a half input with float32 norm parameters runs (measured)
        return first, param
    return None


def _changed(operand: Operand, unsplit: CallSite | None, site: CallSite) -> bool:
    """Whether ``operand`` of ``site`` had another dtype with the module in one dtype."""
    if unsplit is None:
        return True
    first, params = site.operands()
    before_first, before_params = unsplit.operands()
    pairs = [(first, before_first)] + list(zip(params, before_params, strict=False))
    for now, before in pairs:
        if now is not None and now.node is operand.node:
            return before is None or before.fact.prec is not now.fact.prec
    return False


def _dtype(fact: Fact) -> str:
    if fact.prec is Prec.FULL:
        return fact.dtype or "float32"
    if fact.prec is Prec.HALF:
        name = fact.dtype or "half precision"
        return f"{name} on some paths" if fact.maybe else name
    return "in the model's dtype (half when the model runs in half precision)"


def _consequence(site: CallSite, x: Fact, *, inside: bool = False) -> str:
    kind = "norm" if site.op is OpKind.NORM else "layer"
    if site.op is OpKind.NORM and not site.norm_keeps_low_input:
        kind = "fused norm (its CUDA kernel reads the weights in the input's dtype)"
    if inside:
        return (
            f"the {kind} refuses mismatched dtypes; cast the input where `forward` calls the "
            "part, or keep the model in one dtype"
        )
    target = "its weights' dtype" if x.prec is not Prec.FULL else "the part's dtype"
    return f"the {kind} refuses mismatched dtypes; cast it to {target} at this call"


def _unique(related: list[tuple[cst.CSTNode, str]]) -> list[tuple[cst.CSTNode, str]]:
    seen: set[int] = set()
    out = []
    for node, text in related:
        if id(node) not in seen:
            seen.add(id(node))
            out.append((node, text))
    return out
