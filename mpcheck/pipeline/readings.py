"""The second readings of a file's autocast regions only CUDA runs, compared.

:mod:`mpcheck.engine.device_reading` reads the body of such a region again, as CUDA's and as
off, each to a :class:`Dispatch` of rules of its own (their state apart: a rule that holds a
finding until ``finish`` holds it for that reading alone). When the file is done, what the
reading as off reports where neither the reading as CUDA's nor the file's own walk reports
(the same rule at the same node) is kept, as a warning stating the device premise, with the
region as a related location: a premise about the device is never an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from mpcheck.diagnostics import Severity
from mpcheck.engine.evidence import DevicePremise
from mpcheck.pipeline.dispatch import Dispatch
from mpcheck.ruleset.rule import Report, Rule, RuleContext

__all__ = ["PremiseReadings"]


@dataclass
class _Side:
    """One reading: its rules and what they reported."""

    dispatch: Dispatch
    found: list[Report] = field(default_factory=list)


@dataclass(frozen=True)
class _Reading:
    premise: DevicePremise
    as_cuda: _Side
    as_off: _Side


class PremiseReadings:
    """Gives each region read again its two sets of rules, and compares what they report."""

    def __init__(self, rules: Sequence[type[Rule]], ctx: RuleContext) -> None:
        self._rules = rules
        self._ctx = ctx  # (the file's: its line references are shared, as messages are one)
        self._readings: list[_Reading] = []

    def __call__(self, premise: DevicePremise) -> tuple[Dispatch, Dispatch]:
        """The listeners of the region read as CUDA's and read as off."""
        reading = _Reading(premise, self._side(), self._side())
        self._readings.append(reading)
        return reading.as_cuda.dispatch, reading.as_off.dispatch

    def _side(self) -> _Side:
        found: list[Report] = []
        ctx = replace(self._ctx, sink=found.append)
        return _Side(Dispatch([rule(ctx) for rule in self._rules]), found)

    def added(self, shown: Sequence[Report]) -> list[Report]:
        """What the readings as off report beyond ``shown`` (the file's own findings) and
        beyond their readings as CUDA's, each a warning stating its premise; the readings'
        rules are finished first."""
        seen = {_key(report) for report in shown}
        out: list[Report] = []
        for reading in self._readings:
            reading.as_cuda.dispatch.finish()
            reading.as_off.dispatch.finish()
            known = seen | {_key(report) for report in reading.as_cuda.found}
            for report in reading.as_off.found:
                key = _key(report)
                if key not in known:
                    seen.add(key)
                    out.append(_premised(report, reading.premise))
        return out

    def failed(self) -> dict[str, Exception]:
        """The rules that raised in a reading (what each raised first)."""
        failed: dict[str, Exception] = {}
        for reading in self._readings:
            for side in (reading.as_cuda, reading.as_off):
                for code, exc in side.dispatch.failed.items():
                    failed.setdefault(code, exc)
        return failed


def _key(report: Report) -> tuple[str, int]:
    """One finding: its rule and the node it is reported at (as ``one_file._unique``)."""
    return report.rule.code, id(report.node)


def _premised(report: Report, premise: DevicePremise) -> Report:
    """``report`` resting on ``premise``: a warning that states it, the region its place."""
    related = (*report.related, (premise.node, premise.note))
    message = f"{report.message} ({premise.text})"
    return replace(report, message=message, related=related, severity=Severity.WARNING)
