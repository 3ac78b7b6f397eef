"""When a site reaches the rules: one policy object for the whole walk.

The walk visits some code more than once -- a loop body's first pass, a helper's quiet
second walk, a module walked again with its parts cast apart, a helper walked again
for the training loop -- and only one visit may report. Each such walk enters one of
the modes below as a ``with`` block, and every site asks :meth:`Reporting.takes`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Protocol

from mpcheck.engine.evidence import DevicePremise
from mpcheck.engine.sites import CallSite
from mpcheck.ruleset.hooks import Site, SiteKind

MAX_SPLIT_DEPTH = 6  # nested re-walks of modules cast apart, before giving up


class Listener(Protocol):
    """Receives the sites of one file; the engine fans them out to rules (by ``HOOKS``)."""

    def wants(self, kind: SiteKind) -> bool: ...

    def deliver(self, kind: SiteKind, site: Site) -> None: ...


# A second reading of code under a device premise (:mod:`mpcheck.engine.device_reading`): the
# listeners of the code read as written (CUDA's region) and read as the premise says (the
# region off), each with rules of its own, compared when the file is done.
Readings = Callable[[DevicePremise], tuple[Listener, Listener]]


class Reporting:
    """Whether the walk reports, records or stays silent right now."""

    def __init__(self, listener: Listener, readings: Readings | None = None) -> None:
        self.listener = listener
        self._main = listener  # (the listener a walk for its own sake reports to)
        self.readings = readings  # None: nothing compares second readings (summaries, tests)
        self._reading = 0  # inside a second reading (:meth:`reading`)
        self._muted = 0  # inside walks whose sites another visit reports
        # While a called module is re-walked (``split_call``), call sites go here.
        self._recorder: list[CallSite] | None = None
        self._splitting = 0  # depth of nested re-walks
        self._hypothetical = 0  # inside a walk under a premise (mpcheck.engine.ambient)

    @property
    def recording(self) -> bool:
        """Re-walking code for the sites it would produce, not for the listener."""
        return self._recorder is not None

    @property
    def may_rewalk(self) -> bool:
        """Another nested re-walk of a module stays within the depth limit."""
        return self._splitting < MAX_SPLIT_DEPTH

    def takes(self, kind: SiteKind) -> bool:
        """Whether a site of ``kind`` found now is delivered (worth building)."""
        if self._muted:
            return False
        if kind == "calls":
            return self.listener.wants("calls") or self._recorder is not None
        if kind == "training":
            reading = self._hypothetical or self._reading
            return not reading and self.listener.wants("training")
        if self._recorder is not None:
            return False
        return self.listener.wants(kind)

    def call(self, site: CallSite) -> None:
        """Deliver a call site :meth:`takes` accepted: to the recorder or the listener."""
        if self._recorder is not None:
            self._recorder.append(site)
        else:
            self.listener.deliver("calls", site)

    def record(self, sites: Iterable[CallSite]) -> None:
        """Add the sites of a nested re-walk to the one under way."""
        if self._recorder is not None:
            self._recorder.extend(sites)

    @property
    def reads_again(self) -> bool:
        """Whether code walked now may be read a second time under a device premise: this
        walk reports (it is not muted, recording, under a premise or a second reading
        itself), and something compares the readings."""
        if self.readings is None or self._muted or self._recorder is not None:
            return False
        return not self._hypothetical and not self._reading

    @contextmanager
    def live(self) -> Iterator[None]:
        """A function or class walked for its own sake: its sites are reported (to the
        file's listener, also when a second reading reaches it first)."""
        saved = self._muted, self._recorder, self.listener, self._reading
        self._muted, self._recorder, self.listener, self._reading = 0, None, self._main, 0
        try:
            yield
        finally:
            self._muted, self._recorder, self.listener, self._reading = saved

    @contextmanager
    def reading(self, listener: Listener) -> Iterator[None]:
        """A second reading of code the walk has reported already: its sites go to
        ``listener`` (whose rules read them apart), training steps to no one."""
        saved, self.listener = self.listener, listener
        self._reading += 1
        try:
            yield
        finally:
            self.listener = saved
            self._reading -= 1

    @contextmanager
    def muted(self) -> Iterator[None]:
        """A walk whose sites another walk of the same code reports."""
        self._muted += 1
        try:
            yield
        finally:
            self._muted -= 1

    @contextmanager
    def unmuted(self) -> Iterator[None]:
        """A nested ``def``: its body is walked once, wherever its definition is reached."""
        saved, self._muted = self._muted, 0
        try:
            yield
        finally:
            self._muted = saved

    @contextmanager
    def recording_into(self, sites: list[CallSite]) -> Iterator[None]:
        """A module walked again with other facts: its call sites go to ``sites``."""
        saved = self._recorder, self._muted
        self._recorder, self._muted = sites, 0
        self._splitting += 1
        try:
            yield
        finally:
            self._recorder, self._muted = saved
            self._splitting -= 1

    @contextmanager
    def hypothetical(self, sites: list[CallSite]) -> Iterator[None]:
        """Code walked under a premise the code does not state (a trainer's autocast): its
        call sites go to ``sites``, and nothing else it meets is reported."""
        self._hypothetical += 1
        try:
            with self.recording_into(sites):
                yield
        finally:
            self._hypothetical -= 1

    @contextmanager
    def calls_reported_elsewhere(self) -> Iterator[None]:
        """A helper walked again for the training loop: its calls were reported already."""
        saved, self._recorder = self._recorder, []
        try:
            yield
        finally:
            self._recorder = saved
