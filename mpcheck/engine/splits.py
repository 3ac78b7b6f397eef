"""Which calls a module's re-walk changed: ``model.half(); model.head.float(); model(x)``
walks ``forward`` once with the part cast apart and once without, and the calls whose dtypes
differ between the two are what the split did (see ``ModuleWalk.split_call``)."""

from __future__ import annotations

from mpcheck.engine.facts import Prec
from mpcheck.engine.sites import CallSite, InnerCall

__all__ = ["changed_calls"]


def changed_calls(walked: list[CallSite], plain: list[CallSite]) -> tuple[InnerCall, ...]:
    """The calls of ``walked`` whose dtypes differ from the same call in ``plain``.

    Both walks take the same calls in the same order: the k-th visit of a node pairs up.
    """
    before_of: dict[tuple[int, int], CallSite] = {}
    seen: dict[int, int] = {}
    for site in plain:
        seen[id(site.node)] = k = seen.get(id(site.node), 0) + 1
        before_of[id(site.node), k] = site
    seen.clear()
    changed = []
    for site in walked:
        seen[id(site.node)] = k = seen.get(id(site.node), 0) + 1
        before = before_of.get((id(site.node), k))
        if before is None or _site_precs(site) != _site_precs(before):
            changed.append(InnerCall(site, before))
    return tuple(changed)


def _site_precs(site: CallSite) -> tuple[tuple[Prec, str | None], ...]:
    """The dtypes a call sees: its receiver's and its arguments'."""
    operands = [site.receiver] if site.receiver is not None else []
    operands += list(site.args) + [site.kwargs[k] for k in sorted(site.kwargs)]
    return tuple((o.fact.prec, o.fact.dtype) for o in operands)
