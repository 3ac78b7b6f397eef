"""Ops with no float16/bfloat16 kernel: what each raises on a half tensor, and where.

Fourier transforms, linear-algebra decompositions and quantiles are computed by libraries
(pocketfft/MKL, cuFFT, LAPACK/cuSOLVER/MAGMA) that have no half-precision routines, so torch
checks the dtype and raises instead of running them. Measured on torch 2.13 (CPU, see
``../shared/reference/torch-truth.md``); the CUDA behaviour is torch's documented contract:
cuFFT computes float16 transforms only when every transformed size is a power of two (and
bfloat16 ones not at all before cuFFT's bfloat16 types), and the linear-algebra and quantile
checks are made before any device's kernel is chosen. ``Tensor.numpy()`` is the one row for
bfloat16 only: numpy has no bfloat16 type (float16 converts to ``numpy.float16``).

One row per op: the qualified name (``torch.fft.rfft``) or, for a tensor method, its name
(``stft``), with the op autocast dispatches on (CPU autocast runs these in float32; CUDA
autocast lists none of them, so they see the dtype they are given) and where the transform
size is passed, for the FFTs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["FFT", "NO_HALF_KERNEL", "NUMPY", "SOLVER", "QUANTILE", "Kernelless", "kernelless"]

FFT, SOLVER, QUANTILE = "a Fourier transform", "a linear-algebra routine", "a quantile"
NUMPY = "a conversion to numpy"
HALF_DTYPES = frozenset({"float16", "bfloat16"})


@dataclass(frozen=True)
class Kernelless:
    """``family``: what the op is; ``aten``: what autocast dispatches on; ``message``: torch's
    message for a float16 input (CPU); ``size``: (position, keyword) of the transform size
    (an FFT's ``n``/``n_fft``, or ``s`` for the n-dimensional ones), None when it has none;
    ``dtypes``: the half dtypes it has no kernel for."""

    family: str
    aten: str
    message: str
    size: tuple[int, str] | None = None
    dtypes: frozenset[str] = HALF_DTYPES


# torch's messages for a half input, measured on CPU (``{low}``: Half or BFloat16)
_FFT_MESSAGE = "Unsupported dtype {low}"
_STFT_MESSAGE = "MKL FFT doesn't support tensors of type: {low}"
_QUANTILE = "quantile() input tensor must be either float or double dtype"
_PINV = "linalg.pinv({low}...): expected a tensor with 2 or more dimensions of float, double, ..."


def _fft(aten: str, keyword: str = "n", message: str = _FFT_MESSAGE) -> Kernelless:
    return Kernelless(FFT, aten, message, (1, keyword))


def _solver(aten: str, message: str) -> Kernelless:
    return Kernelless(SOLVER, aten, message)


def _low(name: str) -> str:
    return f"{name}: Low precision dtypes not supported. Got {{low}}"


def _kernel(name: str) -> str:
    return f"\"{name}\" not implemented for '{{low}}'"


NO_HALF_KERNEL: Mapping[str, Kernelless] = {
    "torch.fft.fft": _fft("fft_fft"),
    "torch.fft.ifft": _fft("fft_ifft"),
    "torch.fft.rfft": _fft("fft_rfft"),
    "torch.fft.irfft": _fft("fft_irfft"),
    "torch.fft.hfft": _fft("fft_hfft"),
    "torch.fft.ihfft": _fft("fft_ihfft"),
    "torch.fft.fft2": _fft("fft_fft2", "s"),
    "torch.fft.ifft2": _fft("fft_ifft2", "s"),
    "torch.fft.rfft2": _fft("fft_rfft2", "s"),
    "torch.fft.irfft2": _fft("fft_irfft2", "s"),
    "torch.fft.fftn": _fft("fft_fftn", "s"),
    "torch.fft.ifftn": _fft("fft_ifftn", "s"),
    "torch.fft.rfftn": _fft("fft_rfftn", "s"),
    "torch.fft.irfftn": _fft("fft_irfftn", "s"),
    "torch.stft": _fft("stft", "n_fft", _STFT_MESSAGE),
    "torch.istft": _fft("istft", "n_fft", _STFT_MESSAGE),
    "stft": Kernelless(FFT, "stft", _STFT_MESSAGE, (0, "n_fft")),
    "istft": Kernelless(FFT, "istft", _STFT_MESSAGE, (0, "n_fft")),
    "torch.linalg.inv": _solver("linalg_inv", _low("linalg.inv")),
    "torch.linalg.inv_ex": _solver("linalg_inv_ex", _low("linalg.inv")),
    "torch.inverse": _solver("inverse", _low("linalg.inv")),
    "inverse": _solver("inverse", _low("linalg.inv")),
    "torch.logdet": _solver("logdet", _low("logdet")),
    "logdet": _solver("logdet", _low("logdet")),
    "torch.linalg.slogdet": _solver("linalg_slogdet", _low("linalg.slogdet")),
    "torch.slogdet": _solver("slogdet", _low("linalg.slogdet")),
    "torch.linalg.solve": _solver("linalg_solve", _kernel("lu_cpu")),
    "torch.linalg.lu_factor": _solver("linalg_lu_factor", _kernel("lu_cpu")),
    "torch.linalg.det": _solver("linalg_det", _kernel("lu_cpu")),
    "torch.det": _solver("det", _kernel("lu_cpu")),
    "det": _solver("det", _kernel("lu_cpu")),
    "torch.linalg.cholesky": _solver("linalg_cholesky", _kernel("cholesky_cpu")),
    "torch.cholesky": _solver("cholesky", _kernel("cholesky_cpu")),
    "torch.linalg.eigh": _solver("linalg_eigh", _kernel("linalg_eigh_cpu")),
    "torch.linalg.eigvalsh": _solver("linalg_eigvalsh", _kernel("linalg_eigh_cpu")),
    "torch.linalg.svd": _solver("linalg_svd", _kernel("linalg_svd_cpu")),
    "torch.linalg.svdvals": _solver("linalg_svdvals", _kernel("linalg_svd_cpu")),
    "torch.svd": _solver("svd", _kernel("linalg_svd_cpu")),
    "torch.linalg.qr": _solver("linalg_qr", _kernel("geqrf_cpu")),
    "torch.linalg.pinv": _solver(
        "linalg_pinv", "linalg.pinv({low}...): expected a tensor of float"
    ),
    "torch.pinverse": _solver("pinverse", "linalg.pinv({low}...): expected a tensor of float"),
    "torch.linalg.lstsq": _solver(
        "linalg_lstsq", "This function doesn't handle types other than float and double"
    ),
    "torch.quantile": Kernelless(QUANTILE, "quantile", _QUANTILE),
    "torch.nanquantile": Kernelless(QUANTILE, "nanquantile", _QUANTILE),
    "quantile": Kernelless(QUANTILE, "quantile", _QUANTILE),
    "nanquantile": Kernelless(QUANTILE, "nanquantile", _QUANTILE),
    # ``x.numpy()`` (``force=True`` too): TypeError, measured on torch 2.13 CPU
    "numpy": Kernelless(
        NUMPY, "", "Got unsupported ScalarType {low}", dtypes=frozenset({"bfloat16"})
    ),
}


def kernelless(qualname: str | None, method: str | None) -> Kernelless | None:
    """The row of a call: a torch function by its qualified name, a tensor method by its
    name (``x.stft(...)``)."""
    if qualname is not None:
        return NO_HALF_KERNEL.get(qualname)
    return NO_HALF_KERNEL.get(method) if method is not None else None
