"""The statement walk: assignments, branches, loops, ``with`` blocks, nested functions.

The environment is copied at branches and joined after them; a loop body is walked
twice (the first pass muted) so facts bound late in it reach its start.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property, partial

import libcst as cst

from mpcheck.engine.autocast import Regions
from mpcheck.engine.base import CallRecord, Walk, shorten
from mpcheck.engine.branches import about_precision, float32_path, fp16_run_path, on_path
from mpcheck.engine.exits import close_loop, leave, merge_paths, settle
from mpcheck.engine.expressions import Expressions
from mpcheck.engine.facts import (
    SCALAR,
    UNKNOWN,
    UNKNOWN_TENSOR,
    Cause,
    Fact,
    Kind,
    Origin,
    Prec,
    defaulted,
    element,
    join,
    none_literal,
    none_tested,
    promote,
    replace,
    seq_of,
    settled,
    tensor_or_none,
)
from mpcheck.engine.frames import Frame
from mpcheck.engine.functions import Definitions
from mpcheck.engine.guards import (
    aligned,
    complete,
    dtypes_tested,
    forget,
    found_apart,
    guard_of,
    half_path,
    model_rebound,
    narrowed,
    remember,
    remember_optional,
    runs_take,
    split_by_run,
)
from mpcheck.engine.handed import cast_each, param_cast
from mpcheck.engine.keep_fp32 import ADAPTER_DICTS
from mpcheck.engine.placeholders import placeholder
from mpcheck.engine.promotion import is_advanced_index, iterate
from mpcheck.engine.reachability import (
    bound_names,
    eager_only,
    export_only,
    never_taken,
)
from mpcheck.engine.sites import Operand, ReturnSite, SetItemSite, StoreSite
from mpcheck.engine.storage import replaced, widened
from mpcheck.engine.switches import (
    chosen_by_precision,
    has_new_part,
    remember_parts,
    remember_switched,
    switch_of,
)
from mpcheck.engine.training import bf16_when
from mpcheck.knowledge import data_api
from mpcheck.knowledge import torch_api as T
from mpcheck.project.names import descendants, dotted


class Statements:
    """The part that walks statements in order."""

    def __init__(
        self, file: Walk, regions: Regions, definitions: Definitions, expressions: Expressions
    ) -> None:
        self.file = file
        self.regions = regions
        self.definitions = definitions
        self.expressions = expressions

    def block(
        self, body: Sequence[cst.BaseStatement | cst.BaseSmallStatement], frame: Frame
    ) -> None:
        outer = self.file.script
        if frame.scope.function is None and frame.scope.class_name is None:
            # the top level, or a branch of it (``if __name__ == "__main__":``): what a
            # function called from here sees as the module's models
            self.file.script = frame
        try:
            for stmt in body:
                if isinstance(stmt, cst.BaseSmallStatement):
                    self.small(stmt, frame)
                else:
                    self.statement(stmt, frame)
        finally:
            self.file.script = outer
        fn = frame.scope.function
        if fn is not None and isinstance(fn.body, cst.IndentedBlock) and body is fn.body.body:
            settle(frame)  # a function's end: the paths that returned meet the one that got here

    @cached_property
    def bound(self) -> frozenset[str]:
        """The names this file binds (a builtin it shadows is no builtin)."""
        return bound_names(self.file.module)

    def false_local(self, fn: cst.FunctionDef, name: str) -> bool:
        """Whether ``name`` is one of ``fn``'s false locals (:mod:`body_uses`, from the walk
        of its body the definitions keep). A parameter never is (most ``if name:`` tests
        test one), and then the body is not walked for it."""
        params = fn.params
        if any(p.name.value == name for p in (*params.params, *params.kwonly_params)):
            return False
        return name in self.definitions.uses(fn).false_locals

    def unset_flag(self, test: cst.BaseExpression, frame: Frame) -> bool:
        """Whether ``test`` is ``self.flag`` (alone or joined by ``and``) for a constructor
        flag of the method's class that nothing sets (:mod:`mpcheck.project.flags`)."""
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            return self.unset_flag(test.left, frame) or self.unset_flag(test.right, frame)
        owner = frame.scope.class_name
        return (
            owner is not None
            and isinstance(test, cst.Attribute)
            and isinstance(test.value, cst.Name)
            and test.value.value == "self"
            and self.file.flag_unset(owner, test.attr.value)
        )

    def statement(self, stmt: cst.BaseStatement, frame: Frame) -> None:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                self.small(small, frame)
        elif isinstance(stmt, cst.If):
            fn = frame.scope.function
            local_false = (
                isinstance(stmt.test, cst.Name)
                and fn is not None
                and self.false_local(fn, stmt.test.value)
            )  # ``train_te = False`` earlier in the function
            resolve = self.file.imports.resolve
            switch = self.file.options.value(stmt.test)  # ``if args.flag:``, never turned off
            if switch is True or eager_only(stmt.test, resolve):  # (``else`` never runs)
                self.block(stmt.body.body, frame)
                return
            if (
                switch is False
                or local_false
                or never_taken(stmt.test, lambda: self.bound)  # ``if False:``
                or export_only(stmt.test, resolve)  # ``if torch.jit.is_tracing():``
                or self.unset_flag(stmt.test, frame)  # ``if self.use_checkpoint:``, never set
            ):
                if isinstance(stmt.orelse, cst.If):
                    self.statement(stmt.orelse, frame)
                elif stmt.orelse is not None:
                    self.block(stmt.orelse.body.body, frame)
                return
            self.expressions.expr(stmt.test, frame)
            # ``if x.dtype == torch.float32:``: a branch a half-precision run never takes;
            # ``if x.dtype == torch.float16:``: a branch only the float16 run takes
            half, fp16 = runs_take(stmt.test, partial(self.expressions.expr, frame=frame))
            # each branch knows which way the test went (``if scaler is not None:``)
            on, off = self.narrowed(frame, stmt.test, True), self.narrowed(frame, stmt.test, False)
            if half is not None:
                full = replace(frame.scope, full_precision=stmt.test)
                on, off = (
                    (on, Frame(off.env, full, off.returns))
                    if half
                    else (Frame(on.env, full, on.returns), off)
                )
            then = self.branch(stmt.body, on, (stmt.test, True))
            other = (
                self.branch(stmt.orelse, off, (stmt.test, False))
                if stmt.orelse
                else self.file.training.assume(stmt.test, False, Frame(off.env, off.scope))
            )
            if then.dead or other.dead:  # the code after it follows the other path only
                self.merge(frame, then, other)
                if half is not None:
                    half_path(stmt, frame, half, then, other)
                if not then.dead:  # what the test chose there (``else: raise ValueError``)
                    self.switched_paths(stmt, frame, then, other)
                return
            before = frame.env
            tested = none_tested(stmt.test, negated=False)  # ``if x is None: x = zeros(...)``
            if tested is not None and tested in then.env and tested in other.env:
                kept = tensor_or_none(other.env[tested], then.env[tested], state=frame.in_init)
                other = Frame({**other.env, tested: kept}, other.scope, other.returns)
            self.merge(frame, then, other)
            if half is not None:
                half_path(stmt, frame, half, then, other)
            elif fp16 is not None:  # ``if x.dtype == torch.float16: x = x.float()``
                fp16_env, bf16_env = (then.env, other.env) if fp16 else (other.env, then.env)
                split_by_run(frame.env, fp16_env, bf16_env, stmt.test)
            self.one_path(stmt.test, frame, then, other)
            self.switched_paths(stmt, frame, then, other)
            remember_optional(frame.env, then.env, other.env)
            guard = guard_of(stmt.test)
            if guard is not None and stmt.orelse is None:  # ``if cache: vae = load()`` ...
                complete(before, frame.env, then.env, guard)  # ... ``if not cache: ...``
                remember(before, frame.env, then.env, guard)
            elif guard is not None:  # ``if full_fp16: ... elif full_bf16: ...``: the runs
                remember(other.env, frame.env, then.env, guard)  # without the flag took the else
            if tested is not None and tested in frame.env:
                frame.env[tested] = defaulted(frame.env[tested])
            converted = self.converted(stmt)
            if converted is not None and then.env.get(converted, UNKNOWN).is_tensor:
                # ``if not isinstance(image, torch.Tensor): image = preprocess(image)``: a
                # tensor made from a picture or a list, the one path whose dtype is known
                frame.env[converted] = then.env[converted]
        elif isinstance(stmt, (cst.For, cst.While)):
            self.loop(stmt, frame)
        elif isinstance(stmt, cst.With):
            self.with_stmt(stmt, frame)
        elif isinstance(stmt, cst.Try):
            self.block(stmt.body.body, frame)
            branches = [self.branch(h.body, frame) for h in stmt.handlers]
            for b in branches:
                self.merge(frame, Frame(frame.env, frame.scope), b)
            if stmt.orelse:
                self.block(stmt.orelse.body.body, frame)
            if stmt.finalbody:
                self.block(stmt.finalbody.body.body, frame)
        elif isinstance(stmt, cst.FunctionDef):
            if frame.scope.function is not None:
                self.nested_function(stmt, frame)
            else:  # also under ``if __name__ == "__main__":``, where scripts define helpers
                self.file.functions.setdefault(stmt.name.value, stmt)
            # a module-level def is summarised on its own, with its params as inputs
        elif isinstance(stmt, cst.ClassDef):
            info = self.file.classes.get(stmt.name.value)
            if info is None or info.node is not stmt:  # a later ``class X`` rebinds ``X``
                info = self.file.classes[stmt.name.value] = self.definitions.register_class(stmt)
            self.definitions.analyse_class(info)
        elif isinstance(stmt, cst.Match):
            for case in stmt.cases:
                self.merge(frame, Frame(frame.env, frame.scope), self.branch(case.body, frame))
        else:
            body = getattr(stmt, "body", None)
            if isinstance(body, cst.IndentedBlock):
                self.block(body.body, frame)

    def one_path(self, test: cst.BaseExpression, frame: Frame, then: Frame, other: Frame) -> None:
        """Keep a float32 value of one path, or a float16 run's (:func:`fp16_run_path`), where
        the test is not about precision (the test's source is read only when some value is
        float32 on one path)."""
        found = []
        for name in frame.env:
            a, b = then.env.get(name), other.env.get(name)
            if a is not None and b is not None and a is not b:
                side = fp16_run_path(a, b) or float32_path(a, b, frame.scope.in_module)
                if side is not None:
                    found.append((name, *side))
        if not found:
            return
        source = self.file.module.code_for_node(test)
        if about_precision(source):
            return
        shown = shorten(source)
        for name, taken, is_then in found:
            frame.env[name] = on_path(taken, shown if is_then else f"not ({shown})")

    def switched_paths(self, stmt: cst.If, frame: Frame, then: Frame, other: Frame) -> None:
        """Parts of ``self`` built, and values made float32, under a config switch
        (``if class_embed_type == "timestep":``; see :mod:`mpcheck.engine.switches`)."""
        switch = switch_of(stmt.test)
        values = [
            (name, fact)
            for name, fact in then.env.items()
            if switch is not None
            and fact.is_tensor
            and fact.prec is Prec.FULL
            and not fact.zero_dim
            and fact.origin is not None
            and other.env.get(name) is not fact
        ]
        if not values and not has_new_part(then.env, other.env):
            return
        source = self.file.module.code_for_node(stmt.test)
        if about_precision(source):
            chosen_by_precision(frame.env, then.env, other.env)
            return
        remember_parts(frame.env, then.env, other.env, switch, source)
        if switch is not None:
            for name, fact in values:
                assert fact.origin is not None
                text = fact.origin.text.rstrip(",")  # ``returned in float32 by ...,``
                fact = replace(fact, origin=replace(fact.origin, text=text))
                remember_switched(frame.env, name, on_path(fact, shorten(source)), switch)

    def narrowed(self, frame: Frame, test: cst.BaseExpression, polarity: bool) -> Frame:
        """``frame`` for a branch of ``if x is not None:``: ``x`` is the tensor it may be."""
        env = narrowed(frame.env, test, polarity)
        tested = dtypes_tested(test)
        if tested is not None:
            sides = [(dotted(n), self.expressions.expr(n, frame)) for n in tested[:2]]
            if tested[2] is polarity:  # the branch where the dtypes differ
                env = found_apart(env, sides, test, f"found different by `{self.file.code(test)}`")
            else:  # equal to the dtype it is compared with now: the code aligns them
                env = aligned(env, sides)
        return frame if env is frame.env else Frame(env, frame.scope, frame.returns)

    def converted(self, stmt: cst.If) -> str | None:
        """``x`` of ``if not isinstance(x, torch.Tensor): x = ...`` (without ``else``)."""
        test = stmt.test
        if stmt.orelse is not None or not isinstance(test, cst.UnaryOperation):
            return None
        call = test.expression
        if not (isinstance(test.operator, cst.Not) and isinstance(call, cst.Call)):
            return None
        if dotted(call.func) != "isinstance" or len(call.args) != 2:
            return None
        name, kind = call.args[0].value, call.args[1].value
        if not isinstance(name, cst.Name) or self.file.imports.resolve(kind) != "torch.Tensor":
            return None
        return name.value

    def branch(
        self, node: cst.CSTNode, frame: Frame, guard: tuple[cst.BaseExpression, bool] | None = None
    ) -> Frame:
        """Walk ``node`` on a copy of ``frame``; ``guard``: the test and the way it went."""
        sub = Frame(dict(frame.env), frame.scope)
        if guard is not None:
            flag = guard_of(guard[0])
            if flag is not None:  # ``if not args.train_text_encoder:``: known on this path
                known = (flag[0], flag[1] == guard[1])
                sub.scope = replace(sub.scope, flags=(*sub.scope.flags, known))
            sub = self.file.training.assume(*guard, sub)
            region = self.regions.tested_region(*guard)
            if region is not None:
                sub.scope = replace(sub.scope, autocast=region)
        if isinstance(node, cst.If):
            self.statement(node, sub)
        elif isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            self.block(node.body, sub)
        else:
            inner = getattr(node, "body", None)
            if isinstance(inner, cst.CSTNode):
                return self.branch(inner, frame, guard)
        return sub

    def merge(self, frame: Frame, a: Frame, b: Frame) -> None:
        merge_paths(frame, a, b)

    def loop(self, stmt: cst.For | cst.While, frame: Frame) -> None:
        if isinstance(stmt, cst.For):
            items = self.expressions.expr(stmt.iter, frame)
            loaded = data_api.loader_items(stmt.iter)
            if loaded is not None:  # ``for step, batch in enumerate(train_dataloader)``
                name, counted = loaded
                batch = data_api.batch_of(stmt.iter, f"a batch of `{name}`")
                items = Fact(Kind.SEQ, elem=seq_of((SCALAR, batch)) if counted else batch)
            models = items.items if items.kind is Kind.SEQ and items.items else ()
            if (
                1 < len(models) <= 8
                and all(m.kind is Kind.MODULE or m == UNKNOWN for m in models)
                and any(m.kind is Kind.MODULE for m in models)
            ):
                # ``for model in [unet, text_encoder]: ...param.data = param.float()``: what
                # the body does to each model, kept apart (a joined model is neither; nor is
                # a half model joined with one the walk does not know)
                with self.file.reporting.muted():
                    for model in models:
                        self.bind(stmt.target, model, frame)
                        close_loop(frame, self.branch(stmt.body, frame))
            self.bind(stmt.target, iterate(items), frame)
        else:
            self.expressions.expr(stmt.test, frame)
        with self.file.reporting.muted():  # the first pass only carries facts round the loop
            first = self.branch(stmt.body, frame)
        close_loop(frame, first)
        last = self.branch(stmt.body, frame)
        if isinstance(stmt, cst.For) and isinstance(stmt.target, cst.Name):
            name = stmt.target.value
            for end in (last, frame):  # (each object the loop goes over is cast)
                cast_each(stmt, iterate(items), last.env.get(name), items, end)
        close_loop(frame, last)
        if stmt.orelse:
            self.block(stmt.orelse.body.body, frame)

    def with_stmt(self, stmt: cst.With, frame: Frame) -> None:
        region = None
        for item in stmt.items:
            found = self.regions.autocast_region(item.item, frame)
            if found is not None:
                region = found
                self.expressions.expr(
                    item.item, frame
                )  # the autocast call itself is a call site too
            else:
                value = self.expressions.expr(item.item, frame)
                if item.asname is not None:
                    self.bind(item.asname.name, value, frame)
        body = stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else []
        if region is None:
            self.block(body, frame)
            return
        saved = frame.scope
        frame.scope = replace(saved, autocast=region)
        self.file.training.enter_region(frame, region, stmt)
        # (a region only CUDA runs is read again as off: from the facts at its start)
        again = region.off_elsewhere and self.file.reporting.reads_again
        entry = Frame(dict(frame.env), frame.scope) if again else None
        try:
            self.block(body, frame)
        finally:
            frame.scope = saved
        if entry is not None:
            walk = partial(self.block, body)
            self.definitions.device_readings.read(region, entry, walk)

    def nested_function(self, fn: cst.FunctionDef, frame: Frame) -> None:
        sub = self.definitions.function_frame(fn, None, frame)
        self.definitions.function_site(fn, sub)
        with self.file.reporting.unmuted():
            if isinstance(fn.body, cst.IndentedBlock):
                self.definitions.walk_body(fn, fn.body.body, sub, frame.scope.autocast)
        self.definitions.summaries[fn] = settled(sub.returns)
        frame.env[fn.name.value] = Fact(Kind.OTHER)
        self.file.functions.setdefault(fn.name.value, fn)

    def small(self, stmt: cst.BaseSmallStatement, frame: Frame) -> None:
        if isinstance(stmt, cst.Assign):
            value = self.expressions.expr(stmt.value, frame)
            for target in stmt.targets:
                self.store(target.target, value, stmt.value, frame, stmt)
        elif isinstance(stmt, cst.AnnAssign):
            if stmt.value is not None:
                self.store(
                    stmt.target, self.expressions.expr(stmt.value, frame), stmt.value, frame, stmt
                )
        elif isinstance(stmt, cst.AugAssign):
            value = self.expressions.expr(stmt.value, frame)
            if isinstance(stmt.target, cst.Subscript):
                self.store(stmt.target, value, stmt.value, frame, stmt)
                return
            current = self.expressions.expr(stmt.target, frame)
            if current.kind is Kind.TENSOR:  # in-place: the tensor keeps its dtype
                method = T.INPLACE_OPERATORS.get(type(stmt.operator).__name__)
                if method is not None:
                    tensor = Operand(stmt.target, current)
                    args = (Operand(stmt.value, value),)
                    self.file.emit(
                        CallRecord(stmt, current, args, method=method, receiver=tensor), frame
                    )
                return
            self.bind(stmt.target, promote([current, value], stmt), frame)
        elif isinstance(stmt, cst.Expr):
            self.module_by_use(stmt.value, frame)
            self.expressions.expr(stmt.value, frame)
        elif isinstance(stmt, cst.Return):
            returned = stmt.value
            if isinstance(returned, cst.Name) and returned.value == "None":
                fact = none_literal(returned)  # (joined with a dtype: that dtype on some paths)
            elif returned is not None:
                fact = self.expressions.expr(returned, frame)
            else:
                fact = UNKNOWN
            frame.returns = fact if frame.returns is None else join(frame.returns, fact)
            if stmt.value is not None and self.file.reporting.takes("returns"):
                self.file.reporting.listener.deliver(
                    "returns", ReturnSite(stmt, Operand(stmt.value, fact), frame.scope)
                )
            leave(stmt, frame)
        elif isinstance(stmt, (cst.Raise, cst.Continue, cst.Break)):
            leave(stmt, frame)
        elif isinstance(stmt, cst.Assert):
            self.expressions.expr(stmt.test, frame)
            mode = bf16_when(stmt.test, True)  # ``assert args.mixed_precision == "bf16"``:
            if mode is not None:  # the rest of this path runs only in bfloat16 mode
                frame.scope = replace(frame.scope, bf16_mode=mode)

    def module_by_use(self, call: cst.BaseExpression, frame: Frame) -> None:
        """``ae.to(device, dtype=weight_dtype)`` or ``ae.eval()`` as a statement: only a
        module changes in place that way (a tensor's ``.to`` returns a copy), so an ``ae``
        that a helper of unknown kind returned is a model from here on."""
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)):
            return
        method = call.func.attr.value
        if method not in T.MODULE_STATEMENTS or (method == "to" and not call.args):
            return
        if method == "to":  # ``model.to(device, dtype=dtype)`` of two of the function's
            # parameters: what a call from another file does to the model it hands
            dtype = next(
                (a.value for a in call.args if a.keyword and a.keyword.value == "dtype"), None
            )
            fn = frame.scope.function
            found = param_cast(fn, call.func.value, dtype) if dtype is not None else None
            if found is not None and fn is not None:
                self.file.param_casts.setdefault(fn, set()).add(found)
        key = dotted(call.func.value)
        if key is not None and self.expressions.expr(call.func.value, frame) == UNKNOWN:
            text = f"a model (`{key}.{method}(...)` changes it in place)"
            frame.env[key] = Fact(Kind.MODULE, origin=Origin(call, Cause.LITERAL, text))

    def store(
        self,
        target: cst.BaseAssignTargetExpression,
        value: Fact,
        value_node: cst.BaseExpression,
        frame: Frame,
        stmt: cst.CSTNode,
    ) -> None:
        if isinstance(target, cst.Subscript):
            base = self.expressions.expr(target.value, frame)
            key = data_api.item_key(target)
            if base.kind is Kind.BATCH and key is not None:
                frame.env[key] = value  # ``batch["pixel_values"] = batch[...].to(dtype=...)``
                return
            advanced = self.advanced_index(target, frame)
            if self.file.reporting.takes("setitems"):
                index = target.slice[0].slice if len(target.slice) == 1 else None
                site = SetItemSite(
                    stmt,
                    Operand(target.value, base),
                    index,
                    Operand(value_node, value),
                    frame.scope,
                    advanced=advanced,
                )
                self.file.shown((base, value))
                self.file.reporting.listener.deliver("setitems", site)
            return
        if isinstance(target, cst.Attribute) and target.attr.value == "data":
            self.file.training.store_data(target, value, frame)  # ``p.data = p.data.float()``
        if isinstance(target, cst.Attribute) and self.file.reporting.takes("stores"):
            self.storage(target, value, value_node, frame, stmt)
        if isinstance(target, cst.Attribute):
            value = self.expressions.modules.stored(  # a named buffer
                target.value, target.attr.value, target, value, frame
            )
            value = self._placeholder(target, value, value_node, frame)
        annotation = stmt.annotation if isinstance(stmt, cst.AnnAssign) else None
        container = self._adapter_container(target, value_node, frame, annotation)
        if container is not None:
            kind = container or None
            if self.file.keep.upcast(frame.scope.class_name, kind):
                value = adapter_fp32(value, target, kind in TENSOR_DICTS)
            elif self.file.keep.listed(frame.scope.class_name, (dotted(target) or "")[5:]):
                value = adapter_in_base_dtype(target, kind or "")
            # (an unlisted dict peft does not cast was not moved either: its own dtype)
        self.bind(target, value, frame)

    def _placeholder(
        self, target: cst.Attribute, value: Fact, value_node: cst.BaseExpression, frame: Frame
    ) -> Fact:
        """``self.pe = torch.zeros(0, d)`` in ``__init__``, rebuilt whenever a size test finds
        it too small: its own dtype never meets the data (:mod:`placeholders`)."""
        if not (frame.in_init and value.is_tensor and dotted(target.value) == "self"):
            return value
        info = self.file.classes.get(frame.scope.class_name or "")
        if info is None:
            return value
        found = placeholder(info.node, target.attr.value, value_node, self.file.imports.resolve)
        return UNKNOWN_TENSOR if found else value

    def storage(
        self,
        target: cst.Attribute,
        value: Fact,
        value_node: cst.BaseExpression,
        frame: Frame,
        stmt: cst.CSTNode,
    ) -> None:
        """``p.data = value``, ``m.weight = nn.Parameter(v)``: a tensor's storage replaced
        (:mod:`mpcheck.engine.storage`), with the tensor's fact as it was."""
        found = replaced(target, value_node, self.file.imports.resolve)
        if found is None:
            return
        tensor, new = found
        holder = tensor.value if isinstance(tensor, cst.Attribute) else None
        with self.file.reporting.muted():  # read for their facts (a Parameter's argument again)
            before = self.expressions.expr(tensor, frame)
            stored = value if new is value_node else self.expressions.expr(new, frame)
            owner = self.expressions.expr(holder, frame) if holder is not None else UNKNOWN
        if before.is_tensor:
            layer = owner.layer if owner.kind is Kind.MODULE else None
            grown = widened(before, stored, frame.scope, layer)
            site = StoreSite(
                stmt,
                Operand(tensor, before),
                Operand(new, stored),
                frame.scope,
                grown,
                data=new is value_node,
            )
            self.file.shown((before, stored))
            self.file.reporting.listener.deliver("stores", site)

    def _adapter_container(
        self,
        target: cst.BaseExpression,
        value: cst.BaseExpression,
        frame: Frame,
        annotation: cst.Annotation | None,
    ) -> str | None:
        """``self.lora_A = nn.ParameterDict()`` in a peft tuner layer: named in its
        ``adapter_layer_names``, or any dict of per-adapter parts (peft casts the items keyed
        by the adapter's name to float32), or a dict named in its ``other_param_names``
        (``self.vera_A = vera_A`` of a ``vera_A: BufferDict``, or ``self.vera_A:
        Optional[BufferDict] = None``). The dict's class, "" when unknown; None when it is no
        adapter container."""
        key = dotted(target)
        if key is None or not key.startswith("self.") or key.count(".") != 1:
            return None
        owner, attr = frame.scope.class_name, key[5:]
        kind = _dict_class(value, frame.scope.function, annotation)
        if self.file.keep.adapter(owner, attr):
            return kind or ""
        if kind is None:
            return None
        if self.file.keep.adapters.get(owner or "") or attr in self.file.keep.moved.get(
            owner or "", ()
        ):
            return kind
        return None

    def advanced_index(self, target: cst.Subscript, frame: Frame) -> Operand | None:
        """Evaluate ``target``'s indices; the first that makes it advanced indexing, if any."""
        found: Operand | None = None
        for el in target.slice:
            part = el.slice
            if isinstance(part, cst.Index):
                fact = self.expressions.expr(part.value, frame)
                if found is None and is_advanced_index(part.value, fact):
                    found = Operand(part.value, fact)
            elif isinstance(part, cst.Slice):
                for bound in (part.lower, part.upper, part.step):
                    if bound is not None:
                        self.expressions.expr(bound, frame)
        return found

    def bind(
        self, target: cst.BaseExpression, value: Fact, frame: Frame, key: str | None = None
    ) -> None:
        if isinstance(target, (cst.Tuple, cst.List)) and value.kind is Kind.BATCH:
            for el in target.elements:  # ``for images, labels in loader``: named by name
                key = dotted(el.value)
                name = key.rsplit(".", 1)[-1] if key else None
                self.bind(el.value, data_api.item(value, name, el.value), frame)
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            starred = any(isinstance(e, cst.StarredElement) for e in elements)
            for i, el in enumerate(elements):
                if isinstance(el, cst.StarredElement):
                    self.bind(el.value, Fact(Kind.SEQ, elem=element(value)), frame)
                else:
                    self.bind(el.value, element(value, None if starred else i), frame)
            return
        key = key or dotted(target)
        if key is None:
            return
        attr = key.rsplit(".", 1)[-1]
        if (
            value.kind in (Kind.MODULE, Kind.TENSOR)
            and key.startswith("self.")
            and (
                attr in self.file.keep.names
                or self.file.keep.param_kept(frame.scope.class_name, attr)
            )
        ):
            text = "kept in float32 by `_keep_in_fp32_modules`"
            value = replace(
                value,
                prec=Prec.FULL,
                dtype="float32",
                origin=Origin(target, Cause.MODEL_CAST, text),
            )
        if (
            value.kind is Kind.MODULE
            and value.cause is Cause.LITERAL
            and frame.scope.in_module
            and key.startswith("self.")
        ):
            # ``self.stem = conv_bn(...)``, ``self.text_model = AutoModel.from_config(...)``:
            # built in the default dtype by a helper, but a part of this model all the same.
            value = replace(value, prec=Prec.MODEL, dtype=None, origin=None)
        old = frame.env.get(key)
        frame.env[key] = value
        if value is not old or value.kind is not Kind.MODULE:
            # (``model = accelerator.prepare(model)``: the same module object, so what the
            # ``if`` statements before said of the name still holds)
            forget(frame.env, key)
        if value.kind is Kind.MODULE:
            model_rebound(frame.env, key)
        if old is not None and old.kind is Kind.MODULE:  # children of a rebound module
            prefix = key + "."
            for k in [k for k in frame.env if k.startswith(prefix)]:
                del frame.env[k]


TENSOR_DICTS = frozenset({"ParameterDict", "BufferDict"})
ADAPTER_TEXT = "kept in float32 beside a half base layer by peft (`adapter_layer_names`)"


def adapter_fp32(value: Fact, target: cst.BaseExpression, tensors: bool) -> Fact:
    """A peft adapter container (``self.lora_A = nn.ModuleDict()``): its modules, or the
    tensors of a ``ParameterDict``/``BufferDict`` (``tensors``), are float32 whatever the
    base layer runs in. One handed in (``self.vblora_vector_bank = vector_bank``) too."""
    origin = Origin(target, Cause.MODEL_CAST, ADAPTER_TEXT)
    if value.kind is Kind.MODULE and not tensors:
        return replace(value, prec=Prec.FULL, dtype="float32", origin=origin, maybe=False)
    return Fact(Kind.SEQ, elem=Fact(Kind.TENSOR, Prec.FULL, "float32", origin))


def adapter_in_base_dtype(target: cst.BaseExpression, kind: str) -> Fact:
    """A peft adapter dict whose class the project's ``cast_adapter_dtype`` does not test
    for: peft moved its entries to the base layer's dtype and leaves them there."""
    text = (
        f"kept in the base layer's dtype by peft (it moves the entries there, and its "
        f"`cast_adapter_dtype` leaves `{kind}` entries alone)"
    )
    entry = Fact(Kind.TENSOR, Prec.MODEL, None, Origin(target, Cause.MODEL_CAST, text))
    return Fact(Kind.SEQ, elem=entry) if kind in TENSOR_DICTS else replace(entry, kind=Kind.MODULE)


def _dict_class(
    value: cst.BaseExpression, fn: cst.FunctionDef | None, annotation: cst.Annotation | None
) -> str | None:
    """The adapter dict class ``value`` is: built here (``nn.ParameterDict({})``), declared
    by the assignment's annotation, or a parameter of ``fn`` annotated so (``vera_A:
    BufferDict``); None when none says."""
    if isinstance(value, cst.Call):
        leaf = (dotted(value.func) or "").rsplit(".", 1)[-1]
        return leaf if leaf in ADAPTER_DICTS else None
    if annotation is None and isinstance(value, cst.Name) and fn is not None:
        params = (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)
        annotation = next((p.annotation for p in params if p.name.value == value.value), None)
    if annotation is None:
        return None
    found = {n.value for n in descendants(annotation) if isinstance(n, cst.Name)}
    kinds = sorted(found & ADAPTER_DICTS)
    return kinds[0] if len(kinds) == 1 else None
