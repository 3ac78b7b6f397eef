"""An autocast region only CUDA runs, read a second time as the other devices run it.

``torch.autocast(device_type=x.device.type, dtype=torch.float32)`` (the decorator form too,
or a device an expression picks: ``"mps" if ... else "cuda"``) computes its list in float32
on CUDA, whose autocast takes any dtype. Every other device's autocast (CPU, MPS, XPU) takes
float16 and bfloat16 only and turns itself off for any other dtype ("In CPU autocast, but the
target dtype is not supported. Disabling autocast."). The walk reads such a region as CUDA's
(``Autocast.off_elsewhere``): nothing is reported in it. Off CUDA it is off, and a half value
meeting a float32 one there raises, or a square overflows float16: a latent hazard whose
premise is the device, not half.

So the region's body is read twice more from the facts at its entry, after the walk has
reported it: as off (:meth:`Regions.off_reading`) and as CUDA's, each to rules of their own
(``Reporting.readings``, supplied by the pipeline). What the reading as off reports and the
reading as CUDA's does not (nor the file's own walk) is a warning stating the premise
(:class:`~mpcheck.engine.evidence.DevicePremise`, the region as its place): the pipeline
compares the two when the file is done, so rules never learn of devices. Only code holding
such a region is read again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import libcst as cst

from mpcheck.engine.autocast import Regions
from mpcheck.engine.base import Walk
from mpcheck.engine.evidence import DevicePremise
from mpcheck.engine.frames import Frame
from mpcheck.engine.sites import Autocast

__all__ = ["DeviceReadings"]

_QUOTED = 72  # the longest region quoted whole in a message


class DeviceReadings:
    """Reads the regions only CUDA runs again, as off and as CUDA's."""

    def __init__(self, file: Walk, regions: Regions) -> None:
        self.file = file
        self.regions = regions

    def read(
        self,
        region: Autocast | None,
        entry: Frame,
        walk: Callable[[Frame], None],
    ) -> None:
        """Walk the body of ``region`` (``walk``, from ``entry``: the frame at its start)
        again as off (whatever region is around it: torch turns autocast off inside) and as
        CUDA's, when it is one only CUDA runs and the walk has just reported it."""
        reporting = self.file.reporting
        if region is None or not region.off_elsewhere or not reporting.reads_again:
            return
        assert reporting.readings is not None  # (``reads_again`` says so)
        as_cuda, as_off = reporting.readings(self.premise(region))
        # (off first: what the walk leaves behind, a nested function's summary, is CUDA's,
        # as the file's own walk read it)
        for listener, read_as in (
            (as_off, self.regions.off_reading(region)),
            (as_cuda, region),
        ):
            frame = Frame(dict(entry.env), replace(entry.scope, autocast=read_as))
            with reporting.reading(listener):
                walk(frame)

    def premise(self, region: Autocast) -> DevicePremise:
        """The device premise of ``region``, quoted as written."""
        dtype = region.dtype or "float32"
        text = (
            f"latent: when this runs off CUDA: `{self._quoted(region.node, dtype)}` turns "
            f"itself off on CPU/MPS, whose autocast takes no {dtype}"
        )
        note = f"autocast off here on CPU/MPS: only CUDA's autocast takes {dtype}"
        return DevicePremise(text, region.node, note)

    def _quoted(self, node: cst.CSTNode, dtype: str) -> str:
        """The region's call on one line; a long one as its function and its dtype."""
        text = " ".join(self.file.module.code_for_node(node).split())
        if len(text) <= _QUOTED or not isinstance(node, cst.Call):
            return text if len(text) <= _QUOTED else text[: _QUOTED - 3] + "..."
        func = " ".join(self.file.module.code_for_node(node.func).split())
        return f"{func}(..., dtype=torch.{dtype})"
