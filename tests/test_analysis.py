"""The provenance pass: where each value's dtype comes from, through real code shapes.

Each snippet calls ``probe.at(x)``; the test reads the fact the engine holds for
``x`` at that point of the program.
"""

from __future__ import annotations

import textwrap
from typing import ClassVar

import libcst as cst

from mpcheck.engine.facts import Cause, Fact, Kind, Prec
from mpcheck.engine.sites import CallSite
from mpcheck.pipeline.one_file import Options, check_source
from mpcheck.ruleset.rule import Rule

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"


class Probe(Rule):
    """A rule that records the fact of ``x`` at each ``probe.at(x)``."""

    code = "MPC999"
    name = "probe"
    summary = "test probe"
    seen: ClassVar[list[Fact]] = []

    def check_call(self, call: CallSite) -> None:
        receiver = call.receiver.node if call.receiver else None
        if call.method == "at" and isinstance(receiver, cst.Name) and receiver.value == "probe":
            self.seen.append(call.args[0].fact)


def probe(body: str, module_half_capable: bool = True) -> list[Fact]:
    Probe.seen = []
    options = Options(module_half_capable=module_half_capable)
    diags = check_source(HEADER + textwrap.dedent(body), "t.py", [Probe], options)
    assert not diags, diags
    return Probe.seen


def one(body: str) -> Fact:
    facts = probe(body)
    assert len(facts) == 1, facts
    return facts[0]


def test_forward_inputs_and_submodule_outputs_are_model_dtype() -> None:
    facts = probe(
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
            def forward(self, x, input_ids, attention_mask=None):
                h = self.proj(x)
                probe.at(x); probe.at(h); probe.at(input_ids); probe.at(attention_mask)
        """
    )
    assert [f.prec for f in facts] == [Prec.MODEL, Prec.MODEL, Prec.INT, Prec.UNKNOWN]


def test_upcasts_and_casts_record_where_they_happened() -> None:
    facts = probe(
        """
        def f(x):
            a = x.float()
            b = x.to(torch.float32)
            c = x.to(dtype=torch.float)
            d = x.type(torch.float32)
            e = x.half()
            g = x.to(torch.bfloat16)
            probe.at(a); probe.at(b); probe.at(c); probe.at(d); probe.at(e); probe.at(g)
        """
    )
    assert [(f.prec, f.dtype) for f in facts] == [(Prec.FULL, "float32")] * 4 + [
        (Prec.HALF, "float16"),
        (Prec.HALF, "bfloat16"),
    ]
    assert facts[0].cause is Cause.UPCAST and "`.float()`" in facts[0].origin.text  # type: ignore[union-attr]


def test_factories_default_to_float32_unless_given_a_dtype() -> None:
    facts = probe(
        """
        def f(x):
            probe.at(torch.ones(2, 3))
            probe.at(torch.zeros(2, dtype=x.dtype))
            probe.at(torch.ones_like(x))
            probe.at(x.new_zeros(3))
            probe.at(torch.arange(10))
            probe.at(torch.arange(10) * 0.5)
            probe.at(torch.tensor(1.0))
            probe.at(torch.full((2,), True))
        """
    )
    precs = [f.prec for f in facts]
    assert precs == [
        Prec.FULL,
        Prec.MODEL,
        Prec.MODEL,
        Prec.MODEL,
        Prec.INT,
        Prec.FULL,
        Prec.FULL,
        Prec.BOOL,
    ]
    assert facts[0].cause is Cause.FACTORY and facts[5].cause is Cause.INT_FLOAT
    assert facts[6].zero_dim


def test_same_as_casts_follow_the_other_tensor() -> None:
    facts = probe(
        """
        def f(x, y):
            s = torch.softmax(x.float(), dim=-1).to(x.dtype)
            t = y.float().type_as(x)
            u = y.float().to(x)
            probe.at(s); probe.at(t); probe.at(u)
        """
    )
    assert all(f.prec is Prec.MODEL and f.cause is Cause.SAME_AS for f in facts)


def test_shape_ops_unpacking_and_promotion() -> None:
    facts = probe(
        """
        def f(x):
            q, k, v = x.float().chunk(3, dim=-1)
            q = q.view(2, -1).transpose(0, 1).contiguous()
            mixed = torch.cat([x, torch.ones(2)], dim=0)
            scaled = x * 0.5 + 1
            probe.at(q); probe.at(v); probe.at(mixed); probe.at(scaled)
        """
    )
    assert [f.prec for f in facts] == [Prec.FULL, Prec.FULL, Prec.FULL, Prec.MODEL]
    assert facts[2].cause is Cause.FACTORY


def test_branches_join_and_loops_reach_a_fixpoint() -> None:
    facts = probe(
        """
        def f(x, flag):
            if flag:
                h = x.float()
            else:
                h = x
            probe.at(h)
            g = x
            for _ in range(3):
                g = g.float()
            probe.at(g)
        """
    )
    assert facts[0].prec is Prec.UNKNOWN  # float32 on one path only: not asserted either way
    assert facts[1].prec is Prec.UNKNOWN


def test_functions_in_the_file_are_summarised_per_call() -> None:
    facts = probe(
        """
        def rotate_half(x):
            a, b = x.chunk(2, dim=-1)
            return torch.cat((-b, a), dim=-1)

        def upcast(x):
            return x.float()

        def g(x):
            probe.at(rotate_half(x)); probe.at(rotate_half(x.float())); probe.at(upcast(x))
        """
    )
    assert [f.prec for f in facts] == [Prec.MODEL, Prec.FULL, Prec.FULL]


def test_module_casts_and_submodule_splits_in_scripts() -> None:
    facts = probe(
        """
        def main():
            model = nn.Linear(4, 4)
            probe.at(model(torch.randn(2, 4)))
            model.half()
            probe.at(model(x))
            model.to(torch.float32)
            probe.at(model.weight)
        """
    )
    assert [(f.prec, f.dtype) for f in facts] == [
        (Prec.FULL, "float32"),
        (Prec.HALF, "float16"),
        (Prec.FULL, "float32"),
    ]


def test_weight_dtype_that_may_be_half_is_half_on_some_paths() -> None:
    facts = probe(
        """
        def main(args):
            weight_dtype = torch.float32
            if args.mixed_precision == "fp16":
                weight_dtype = torch.float16
            unet = load()
            latents = torch.randn(2, 4).to(dtype=weight_dtype)
            probe.at(latents)
        """
    )
    assert (facts[0].prec, facts[0].dtype, facts[0].maybe) == (Prec.HALF, "float16", True)


def test_autocast_regions_mark_lowered_outputs() -> None:
    facts = probe(
        """
        def f(a, b):
            a = a.float(); b = b.float()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                c = a @ b
                d = torch.softmax(c, -1)
            probe.at(c); probe.at(d)
        """
    )
    assert (facts[0].prec, facts[0].dtype, facts[0].cause) == (
        Prec.HALF,
        "bfloat16",
        Cause.AUTOCAST,
    )
    assert facts[1].prec is Prec.HALF  # softmax is not on the CPU autocast lists


def test_an_autocast_given_a_dtype_it_does_not_take_recasts_nothing() -> None:
    """Autocast off CUDA takes float16 and bfloat16 only and turns itself off for any other
    dtype (written, or held by a variable); CUDA's computes its list in the dtype given, and so
    does a region whose device is known only at run time (it may be CUDA's)."""
    facts = probe(
        """
        def f(a, b, x):
            a = a.half(); b = b.float()
            full = torch.float32
            with torch.autocast("cpu", dtype=torch.float32):
                c = a @ b
            with torch.autocast(device_type=x.device.type, dtype=full):
                d = a @ b
            with torch.autocast("cuda", dtype=torch.float32):
                e = a @ b
            with torch.autocast("cpu", dtype=torch.bfloat16):
                with torch.autocast("cpu", dtype=torch.float64):
                    g = a @ b
            probe.at(c); probe.at(d); probe.at(e); probe.at(g)
        """
    )
    for fact in (facts[0], facts[3]):  # (promoted as without autocast)
        assert fact.cause is not Cause.AUTOCAST
    # (a device known only at run time may be CUDA, whose region computes in float32)
    for fact in (facts[1], facts[2]):
        assert (fact.prec, fact.dtype, fact.cause) == (Prec.FULL, "float32", Cause.AUTOCAST)


def test_an_autocasts_positional_arguments_are_its_parameters() -> None:
    """``torch.autocast(device_type, dtype, enabled)`` and the device-bound
    ``torch.cuda.amp.autocast(enabled, dtype)``: a dtype or a switch given by position is read
    as the keyword it stands for (``torch.autocast(x.device.type, torch.float32)`` is a
    float32 region, not a default half one)."""
    facts = probe(
        """
        def f(a, b, x):
            a = a.half(); b = b.float()
            with torch.autocast(x.device.type, torch.float32):
                c = a @ b
            with torch.autocast("cuda", torch.bfloat16):
                d = a @ b
            with torch.autocast("cuda", torch.float16, False):
                e = a @ b
            with torch.cuda.amp.autocast(True, torch.bfloat16):
                g = a @ b
            probe.at(c); probe.at(d); probe.at(e); probe.at(g)
        """
    )
    assert (facts[0].prec, facts[0].dtype, facts[0].cause) == (Prec.FULL, "float32", Cause.AUTOCAST)
    for fact in (facts[1], facts[3]):
        assert (fact.prec, fact.dtype, fact.cause) == (Prec.HALF, "bfloat16", Cause.AUTOCAST)
    assert facts[2].cause is not Cause.AUTOCAST  # (``enabled=False`` by position)


def test_a_region_only_cuda_runs_is_read_again_as_off_under_a_device_premise() -> None:
    """The region above whose device is known only at run time stays CUDA's (its facts are
    float32), and every other device's autocast turns itself off for float32: what the code
    gives with the region read as off, and not read as CUDA's, is a warning that states that
    premise, with the region as a related location. Never an error; a region on a written
    device is not read again (CPU: off, an error; CUDA: float32, nothing)."""
    from mpcheck.diagnostics import Severity
    from mpcheck.engine.sites import Autocast
    from mpcheck.ruleset.rule import all_rules

    node = cst.parse_expression("torch.autocast(device_type=x.device.type, dtype=torch.float32)")
    assert Autocast(node, None, "float32", True).off_elsewhere
    assert Autocast(node, None, "float64", None).off_elsewhere  # (``enabled=`` an expression)
    for region in (
        Autocast(node, "cuda", "float32", True),
        Autocast(node, "cpu", "float32", True),
        Autocast(node, None, "bfloat16", True),  # (every device's autocast takes it)
        Autocast(node, None, "float32", False),  # (off everywhere)
        Autocast(node, None, None, True),  # (``accelerator.autocast()``)
    ):
        assert not region.off_elsewhere, region
    source = HEADER + textwrap.dedent(
        """
        class Embed(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
            def anywhere(self, t):
                with torch.autocast(device_type=t.device.type, dtype=torch.float32):
                    return self.proj(t.float())
            def on_cpu(self, t):
                with torch.autocast("cpu", dtype=torch.float32):
                    return self.proj(t.float())
            def on_cuda(self, t):
                with torch.autocast("cuda", dtype=torch.float32):
                    return self.proj(t.float())

        model = Embed().half()
        """
    )
    found = {d.start.row: d for d in check_source(source, "t.py", all_rules())}
    assert sorted(found) == [11, 14], found
    premised, written = found[11], found[14]
    assert (premised.code, premised.severity) == ("MPC101", Severity.WARNING)
    assert premised.message.endswith(
        "(latent: when this runs off CUDA: `torch.autocast(device_type=t.device.type, "
        "dtype=torch.float32)` turns itself off on CPU/MPS, whose autocast takes no float32)"
    )
    assert (10, 14) in {(r.start.row, r.start.column) for r in premised.related}
    assert (written.code, written.severity) == ("MPC101", Severity.ERROR)
    assert "off CUDA" not in written.message


def test_a_region_torch_turns_off_is_off_whatever_runs_around_it() -> None:
    """A region whose device refuses its dtype (``autocast("cpu", dtype=torch.float32)``, or a
    run-time device read off CUDA) is off inside, as torch's ``__enter__`` disables the
    device's autocast until it ends: a disabled region, not none at all (which would let a
    caller's autocast in), and marked as torch's doing rather than a written
    ``enabled=False`` (which MPC101 reads as float32 on purpose)."""
    from mpcheck.engine.autocast import Regions
    from mpcheck.engine.sites import Autocast

    node = cst.parse_expression("torch.autocast(x.device.type, torch.float32)")
    off = Regions.off_reading(Autocast(node, None, "float32", True))
    assert (off.enabled, off.refused, off.active) == (False, True, False)
    # (a caller's autocast stays out: fixtures/mpc303/good_phases_in_run_time_device_float32_region)


def test_a_result_made_in_a_dtype_parameter_has_the_dtype_each_call_hands() -> None:
    facts = probe(
        """
        def prep(n, dtype=None, latents=None):
            if latents is not None:
                return latents.to(dtype=dtype)
            return torch.randn(n, 4, dtype=dtype)

        def run(n, flag):
            x = prep(n, torch.float32)
            y = prep(n, dtype=torch.bfloat16)
            z = prep(n, torch.float32 if flag else None)
            probe.at(x); probe.at(y); probe.at(z)
        """
    )
    assert (facts[0].prec, facts[0].dtype, facts[0].cause) == (Prec.FULL, "float32", Cause.UPCAST)
    assert facts[0].origin is not None
    assert facts[0].origin.text == "made float32 by `prep`, handed `torch.float32`"
    assert (facts[1].prec, facts[1].dtype, facts[1].cause) == (Prec.HALF, "bfloat16", Cause.CAST)
    assert facts[2].cause is not Cause.UPCAST  # (float32 on one path only)


def test_keep_in_fp32_modules_run_in_float32() -> None:
    facts = probe(
        """
        class TimeEmbedding(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = nn.Linear(4, 4)
            def forward(self, t):
                probe.at(self.linear(t))
                return t

        class Model(nn.Module):
            _keep_in_fp32_modules = ["time_embedding"]
            def __init__(self):
                super().__init__()
                self.time_embedding = TimeEmbedding()
                self.proj = nn.Linear(4, 4)
            def forward(self, x):
                probe.at(self.proj(x))
        """
    )
    assert [f.prec for f in facts] == [Prec.FULL, Prec.MODEL]


def test_module_half_capable_switch() -> None:
    body = """
        class Net(nn.Module):
            def forward(self, x):
                probe.at(x)
        """
    assert probe(body)[0].prec is Prec.MODEL
    assert probe(body, module_half_capable=False)[0].prec is not Prec.MODEL


def test_dtype_objects() -> None:
    fact = one(
        """
        def f(x):
            probe.at(x.dtype)
        """
    )
    assert fact.kind is Kind.DTYPE and fact.prec is Prec.MODEL


def test_registered_buffers_follow_the_model_dtype() -> None:
    # ``model.half()`` casts every floating buffer; integer buffers and plain attributes stay.
    facts = probe(
        """
        class Rotary(nn.Module):
            def __init__(self, dim):
                super().__init__()
                inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)
                self.register_buffer("position_ids", torch.arange(dim))
                self.register_buffer(name="scale", tensor=torch.ones(1))
                self.plain = torch.zeros(dim)
            def forward(self, x):
                probe.at(self.inv_freq); probe.at(self.position_ids)
                probe.at(self.scale); probe.at(self.plain)
        """
    )
    assert [(f.kind, f.prec) for f in facts] == [
        (Kind.TENSOR, Prec.MODEL),
        (Kind.TENSOR, Prec.INT),
        (Kind.TENSOR, Prec.MODEL),
        (Kind.TENSOR, Prec.FULL),
    ]
    assert facts[0].cause is Cause.PARAMETER and facts[0].origin is not None
    assert facts[0].origin.text == "a buffer of the model"


def test_ops_that_keep_their_input_dtype() -> None:
    # grid_sample and the dtype-strict writes raise rather than promote; topk gives indices.
    facts = probe(
        """
        class Net(nn.Module):
            def forward(self, x, index):
                grid = torch.zeros(1, 2, 2, 2)
                probe.at(F.grid_sample(x, grid, align_corners=True))
                probe.at(torch.index_add(x, 0, index, torch.ones(2, 4)))
                probe.at(x.lerp(torch.ones(4), 0.5))
                values, indices = torch.topk(x.float(), 2, dim=-1)
                probe.at(values); probe.at(indices)
                probe.at(torch.max(x, torch.ones(4)))
        """
    )
    assert [f.prec for f in facts] == [
        Prec.MODEL,
        Prec.MODEL,
        Prec.MODEL,
        Prec.FULL,
        Prec.INT,
        Prec.FULL,  # elementwise max with a tensor promotes
    ]


def test_broadcasting_keeps_each_tensor_in_its_own_dtype() -> None:
    # torch 2.13: broadcast_tensors(half, float32) is (half, float32); broadcast_to and
    # expand keep their input's dtype; a 0-dim tensor broadcast with a dimensioned one has
    # dims after (and promotes then); broadcast_shapes makes no tensor.
    facts = probe(
        """
        class Net(nn.Module):
            def forward(self, x):
                h, s = torch.broadcast_tensors(x, torch.ones(4, 1))
                probe.at(h); probe.at(s)
                h, s = torch.broadcast_tensors(x, torch.tensor(2.0))
                probe.at(s)
                probe.at(torch.broadcast_to(torch.ones(4), (2, 4)))
                probe.at(torch.broadcast_to(x, (2, 4)))
                probe.at(x.expand(2, 4))
                probe.at(torch.broadcast_to(torch.tensor(2.0), (4,)))
                probe.at(torch.broadcast_shapes(x.shape, (2, 1)))
        """
    )
    assert [f.prec for f in facts[:6]] == [Prec.MODEL, Prec.FULL, Prec.FULL] + [
        Prec.FULL,
        Prec.MODEL,
        Prec.MODEL,
    ]
    assert facts[1].cause is Cause.FACTORY and not facts[1].mixed
    assert not facts[2].zero_dim and not facts[6].zero_dim
    assert facts[7].kind is not Kind.TENSOR


def test_torch_functional_spelling_is_torchs_row() -> None:
    # ``torch.functional.broadcast_tensors is torch.broadcast_tensors`` (torch 2.13)
    facts = probe(
        """
        import torch.functional

        class Net(nn.Module):
            def forward(self, x):
                h, s = torch.functional.broadcast_tensors(x, torch.ones(4, 1))
                probe.at(h); probe.at(s)
        """
    )
    assert [f.prec for f in facts] == [Prec.MODEL, Prec.FULL]


def test_autocast_promoting_a_strict_write_promotes_its_result() -> None:
    fact = one(
        """
        class Net(nn.Module):
            def forward(self, x, index):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    probe.at(torch.index_copy(x, 0, index, torch.zeros(2, 4)))
        """
    )
    assert fact.prec is Prec.FULL


def test_parameter_containers_hold_parameters() -> None:
    fact = one(
        """
        class Adapter(nn.Module):
            def __init__(self):
                super().__init__()
                self.lora_A = nn.ParameterDict({"a": nn.Parameter(torch.randn(4, 4))})
            def forward(self, x):
                probe.at(self.lora_A["a"].to(torch.float32) * 0.5)
        """
    )
    assert (fact.kind, fact.prec, fact.cause) == (Kind.TENSOR, Prec.FULL, Cause.UPCAST)


def test_a_helper_is_walked_with_the_float32_arguments_of_its_first_call() -> None:
    facts = probe(
        """
        class Adapter(nn.Module):
            def _delta(self, factor):
                probe.at(factor)
                return factor
            def forward(self, x):
                probe.at(x)
                return self._delta(x.float())
        """
    )
    (in_forward, in_helper) = facts
    assert in_forward.prec is Prec.MODEL
    assert (in_helper.prec, in_helper.cause) == (Prec.FULL, Cause.UPCAST)


def test_a_helper_never_called_in_the_file_keeps_model_dtype_parameters() -> None:
    fact = one(
        """
        class Adapter(nn.Module):
            def _delta(self, factor):
                probe.at(factor)
        """
    )
    assert fact.prec is Prec.MODEL


def test_an_unseen_helper_handed_a_dtype_returns_an_unknown_dtype() -> None:
    fact = one(
        """
        class Adapter(BaseTunerLayer, nn.Module):
            def forward(self, x):
                probe.at(self._cast_input_dtype(x, torch.float32))
        """
    )
    assert (fact.kind, fact.prec) == (Kind.TENSOR, Prec.UNKNOWN)


def test_a_class_named_fp32_keeps_float32_parameters() -> None:
    fact = one(
        """
        class LayerNormFp32(nn.LayerNorm):
            def forward(self, x):
                probe.at(self.weight)
        """
    )
    assert fact.prec is not Prec.MODEL


def test_what_a_helper_returns_still_follows_each_caller() -> None:
    """The first call passes float32; the second passes the model's dtype and gets it back."""
    first, second = probe(
        """
        def rotate_half(x):
            a, b = x.chunk(2, dim=-1)
            return torch.cat((-b, a), dim=-1)

        class Rotary(nn.Module):
            def forward(self, q, k):
                probe.at(rotate_half(q.float()))
                probe.at(rotate_half(k))
        """
    )
    assert first.prec is Prec.FULL
    assert second.prec is Prec.MODEL


def test_diffusers_timesteps_return_float32_through_relative_imports() -> None:
    """Inside diffusers, ``from ..embeddings import Timesteps``: the output is float32."""
    module, function = probe(
        """
        from ..embeddings import Timesteps, get_timestep_embedding

        class UNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.time_proj = Timesteps(32, True, 0)
            def forward(self, sample, timestep):
                probe.at(self.time_proj(timestep))
                probe.at(get_timestep_embedding(timestep, 32))
        """
    )
    for fact in (module, function):
        assert (fact.prec, fact.cause) == (Prec.FULL, Cause.UPCAST)
    assert module.origin is not None
    assert module.origin.text == "returned in float32 by `self.time_proj`, a diffusers `Timesteps`,"


def test_a_relative_import_of_a_torch_like_name_is_not_torch() -> None:
    """``from .ops import ones``: a project's own helper, not ``torch.ones``."""
    fact = one(
        """
        from .ops import ones

        class Net(nn.Module):
            def forward(self, x):
                probe.at(ones(3))
        """
    )
    assert fact.cause is not Cause.FACTORY
