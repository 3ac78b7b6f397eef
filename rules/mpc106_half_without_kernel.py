"""MPC106: a Fourier transform, a linear-algebra routine or a quantile gets a half tensor, or
``.numpy()`` a bfloat16 one."""

from __future__ import annotations

import libcst as cst

from mpcheck.api import (
    FFT,
    NUMPY,
    SOLVER,
    CallSite,
    Fact,
    Kernelless,
    Kind,
    Operand,
    Prec,
    Rule,
    Severity,
    fp16_run_kept,
    kernelless,
)


class HalfWithoutKernel(Rule):
    code = "MPC106"
    name = "half-without-kernel"
    severity = Severity.ERROR
    summary = (
        "A Fourier transform (`torch.fft.*`, `torch.stft`), a linear-algebra routine "
        "(`torch.linalg.inv`, `solve`, `svd`, `cholesky`, ...) or a quantile gets a tensor "
        "that is float16 or bfloat16, and torch has no kernel for it; or `.numpy()` gets a "
        "bfloat16 tensor, which numpy has no type for."
    )
    why = """
        FFTs, matrix decompositions and quantiles are computed by libraries that have no
        half-precision routines (pocketfft/MKL and cuFFT; LAPACK, cuSOLVER and MAGMA), so
        torch checks the dtype and raises instead of running them. Autocast does not help on
        a GPU: CUDA autocast lists none of these ops, so they see the dtype they are given,
        and an FFT of a `Linear` or conv output computed under autocast gets float16.
        (CPU autocast runs them in float32: a CPU-only region is not reported.)

        On CPU every one of them raises for float16 and bfloat16. On CUDA the linear-algebra
        routines and quantiles raise too, and cuFFT computes float16 transforms only when
        every transformed size is a power of two: an STFT with `n_fft=1024` of a float16
        signal runs, one with `n_fft=400` or `1280` raises, as does an FFT over a
        sequence or image whose length is not a power of two. So a transform whose size the
        code writes down as a power of two is not reported, one whose size is written as
        another number is an error, and one whose size depends on the data (no `n`/`s`,
        or a variable) is a warning that says so.

        Only a tensor the project shows to be half is reported: one the code casts or
        creates in half, an output autocast lowers, or what a layer computes in a model whose
        half cast, load or library base mpcheck can name (said in the message). A layer
        with half weights computes in half; what a function is handed is in its caller's
        dtype, which the code there does not show: an STFT of a method's `wav` input, an
        inverse of a `weight` argument, are not reported on the model's dtype alone, nor is
        anything in a module only the premise says runs in half. Such inputs are most often
        signals and statistics of data, which is float32. One test is the code's own word
        that half tensors come: an upcast of bfloat16 only (`elif x.dtype == torch.bfloat16:
        x = x.float()`, FreeU's filter before its fix) leaves a float16 run's tensor as it
        came, so the op gets float16 there: a warning that says it holds in float16.

        `Tensor.numpy()` is the bfloat16-only case: numpy has no bfloat16 type, so converting
        a bfloat16 tensor raises on every device (a float16 one becomes `numpy.float16`). A
        model's output handed to numpy (a predictor returning scores) is reported as an error
        where the code shows it bfloat16 (made so, an autocast output on CPU, or a layer of a
        model the project casts with `.to(torch.bfloat16)`), as a warning saying it holds in
        bfloat16 where a cast names no dtype (`.to(weight_dtype)`), and not at all where every
        cast writes float16.
        """
    symptom = """
        `RuntimeError: Unsupported dtype Half` (`torch.fft.*` on CPU), `RuntimeError: MKL FFT
        doesn't support tensors of type: Half` (`torch.stft` on CPU), `RuntimeError: cuFFT only
        supports dimensions whose sizes are powers of two when computing in half precision,
        but got a signal size of[1280]` (CUDA), `linalg.inv: Low precision dtypes not
        supported. Got Half`, `"linalg_svd_cpu" not implemented for 'Half'`, `quantile() input
        tensor must be either float or double dtype`, `TypeError: Got unsupported ScalarType
        BFloat16` (`.numpy()`) -- often only once mixed precision or a
        `.half()` model is switched on, since the float32 run is fine.
        """
    how_to_fix = """
        Compute the transform or the decomposition in float32 and cast its result back where
        the model needs it: `torch.fft.rfft(x.float())`, `torch.linalg.inv(cov.float())`,
        `torch.stft(wav.float(), n_fft, window=window.float(), ...)`, `scores.float().numpy()`.
        Inside an autocast region, the `.float()` input is enough: autocast leaves these ops
        alone. No fix is offered: the result is complex64 or float32 afterwards, and where it
        must be cast back depends on what uses it.
        """
    bad = """
        class SpectralMix(nn.Module):
            def forward(self, x):
                h = self.proj(x)
                return torch.fft.rfft(h, n=1000, dim=1).abs()


        model = SpectralMix().half()
        """
    good = """
        class SpectralMix(nn.Module):
            def forward(self, x):
                h = self.proj(x)
                return torch.fft.rfft(h.float(), n=1000, dim=1).abs().to(h.dtype)


        model = SpectralMix().half()
        """

    def check_call(self, call: CallSite) -> None:
        row = kernelless(call.qualname, call.method)
        if row is None or not isinstance(call.node, cst.Call):
            return
        if call.method and row.family == SOLVER and call.args:
            return  # (``Tensor.inverse()`` takes no argument: ``stft.inverse(mag, phase)`` is
            # another object's method)
        subject = call.receiver if call.method else call.arg(0, "input")
        if subject is None or not self._half(call, subject.fact):
            return
        if row.family == NUMPY:
            self._numpy(call, subject, row)
            return
        region = call.scope.autocast
        if region is not None and region.active and region.policy(row.aten) == "fp32":
            return  # (CPU autocast runs it in float32)
        size = _size(call, row)
        if row.family == FFT and size is True:
            return  # cuFFT computes float16 transforms at power-of-two sizes
        self._report(call, subject, row, size)

    def _half(self, call: CallSite, fact: Fact) -> bool:
        """Whether ``fact`` is half on evidence: the code made it half, or it follows a
        model that evidence (not the premise) says runs in half."""
        if not fact.is_tensor or fact.kind is not Kind.TENSOR:
            return False
        if call.scope.full_precision is not None or self.against_half(call.scope, fact):
            return False
        if fact.prec is Prec.HALF:
            return True
        evidence = call.scope.evidence
        if fact.prec is not Prec.MODEL or evidence is None:
            return False
        if evidence.latent or evidence.float32:
            return False  # (only the premise says the module runs in half)
        # A layer of a half model computes in half; what the function is handed is in its
        # caller's dtype (a waveform, a statistic of data), which the code here does not show.
        return not fact.from_input

    def _report(self, call: CallSite, subject: Operand, row: Kernelless, size: bool | None) -> None:
        fact = subject.fact
        low = "BFloat16" if fact.dtype == "bfloat16" else "Half"
        if fact.prec is Prec.HALF:
            dtype = {"float16": "float16", "bfloat16": "bfloat16"}.get(fact.dtype or "", "half")
        else:
            dtype = "in the model's dtype"
        assert isinstance(call.node, cst.Call)  # (:meth:`check_call` reports calls only)
        callee = self.ctx.code(call.node.func)
        raised = row.message.format(low=low)
        text = self.ctx.code(subject.node)
        upcast = f"{text}.float()" if _atomic(subject.node) else f"({text}).float()"
        if row.family == FFT:
            where = (
                "on CPU, and on CUDA too: cuFFT computes half transforms only at power-of-two "
                "sizes, and this size is not one"
                if size is False
                else "on CPU, and on CUDA unless every transformed size is a power of two "
                "(cuFFT's only half transforms)"
            )
        else:
            where = "on every device (no half routine exists for it)"
        message = (
            f"`{text}` is {dtype} here, and {row.family} has no half kernel: `{callee}` raises "
            f"`{raised}` {where}; compute it on `{upcast}` and cast the result back"
        )
        related = [(fact.origin.node, fact.origin.text)] if fact.origin is not None else []
        message, more, _ = self.with_evidence(message, call.scope, fact, related)
        premise = fp16_run_kept(fact)  # float16 only in a float16 run, which the code may not make
        if premise:
            message += "; this holds if it runs in float16 (the code converts only bfloat16)"
        severity = Severity.WARNING if premise or (row.family == FFT and size is None) else None
        self.report(call.node, message, related=more, severity=severity)

    def _numpy(self, call: CallSite, subject: Operand, row: Kernelless) -> None:
        """``x.numpy()`` of a bfloat16 tensor: numpy has no bfloat16 (float16 converts). An
        error where the code shows bfloat16, a warning naming that premise where it shows
        only half (the model's dtype), silent where it shows float16."""
        fact = subject.fact
        written = {d for d, _ in call.scope.evidence.written} if call.scope.evidence else set()
        if fact.prec is Prec.MODEL and fact.dtype is None and written:
            shown = bool(written & row.dtypes)  # (a cast of the project writes the dtype down)
            if not shown:
                return  # (every such cast writes float16: ``numpy.float16``)
        elif fact.dtype is not None and fact.dtype not in row.dtypes:
            return  # (float16: ``numpy.float16``)
        else:
            shown = fact.dtype in row.dtypes
        text = self.ctx.code(subject.node)
        upcast = f"{text}.float()" if _atomic(subject.node) else f"({text}).float()"
        dtype = "bfloat16" if fact.dtype in row.dtypes else "in the model's dtype"
        message = (
            f"`{text}` is {dtype} here, and numpy has no bfloat16: `.numpy()` raises "
            f"`TypeError: {row.message.format(low='BFloat16')}`; convert `{upcast}` instead"
        )
        related = [(fact.origin.node, fact.origin.text)] if fact.origin is not None else []
        message, more, _ = self.with_evidence(message, call.scope, fact, related)
        if not shown:
            message += "; this holds if it is bfloat16 (float16 converts)"
        severity = None if shown else Severity.WARNING
        self.report(call.node, message, related=more, severity=severity)


def _atomic(node: cst.BaseExpression) -> bool:
    """Whether ``.float()`` appended to ``node``'s code applies to all of it."""
    return isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript))


def _size(call: CallSite, row: Kernelless) -> bool | None:
    """Whether the transform size the code writes down is a power of two (None: it is not
    written down, or not as numbers)."""
    if row.size is None:
        return None
    index, keyword = row.size
    given = call.arg(index, keyword)
    if given is None:
        return None
    numbers = [given.number] if given.fact.kind is Kind.SCALAR else _items(given)
    if not numbers or any(n is None for n in numbers):
        return None
    return all(_power_of_two(n) for n in numbers if n is not None)


def _items(given: Operand) -> list[float | None]:
    """The numbers of a sequence written in the call (``s=(64, 64)``)."""
    items = given.fact.items
    if items is None:
        return []
    return [item.value if item.kind is Kind.SCALAR else None for item in items]


def _power_of_two(number: float) -> bool:
    whole = int(number)
    return whole == number and whole > 0 and whole & (whole - 1) == 0
