"""Diffusers pipelines built around the training model.

``Pipeline.from_pretrained(..., unet=accelerator.unwrap_model(unet))`` does not load or recast
``unet``: the pipeline holds the training module itself. A later ``pipeline.to(device,
dtype=torch.float16)`` (validation code) casts that module in place, the float32 LoRA weights
kept for the GradScaler included, and the next step raises "Attempting to unscale FP16
gradients". The pipeline's fact carries :class:`~mpcheck.engine.training.Shares`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from mpcheck.engine.facts import Fact, Kind, Prec, seq_of
from mpcheck.engine.sites import Operand
from mpcheck.engine.training import Shares, unique

if TYPE_CHECKING:
    from mpcheck.engine.frames import Frame
    from mpcheck.engine.training_loop import Tracker


def shares(kwargs: Mapping[str, Operand]) -> Shares | None:
    """The modules a loaded pipeline is handed by keyword (``unet=unwrap_model(unet)``)."""
    parts = tuple(
        op.fact
        for key, op in kwargs.items()
        if op.fact.kind is Kind.MODULE and key not in ("torch_dtype", "dtype")
    )
    return Shares(parts) if parts else None


def recasts(pipeline: Fact, method: str) -> bool:
    """``pipeline.to(...)``/``.half()`` of a pipeline that holds training modules."""
    return isinstance(pipeline.train, Shares) and method in ("to", "half", "bfloat16", "type")


def pipeline_cast(tracker: Tracker, pipeline: Fact, cast: Fact | None, frame: Frame) -> Fact:
    """``pipeline.to(device, dtype=torch_dtype)`` (``cast``: the new dtype, None when it only
    moves): the shared modules are cast in place, and a cast to half (float16 or bfloat16) is
    remembered for the next step: it unscales their gradients (float16) and goes on from
    master weights rounded to the half grid (either)."""
    if cast is None or not isinstance(pipeline.train, Shares) or cast.origin is None:
        return pipeline
    value = replace(cast, kind=Kind.TENSOR, train=None)
    modules = [m for m in pipeline.train.modules if m.kind is Kind.MODULE]
    tracker.cast_modules(seq_of(modules), value, frame)
    if value.prec is Prec.HALF:
        state = tracker.state(frame)
        recasts = unique(state.recasts + tuple((m, value) for m in modules))
        tracker.set_state(frame, replace(state, recasts=recasts))
    return pipeline
