"""Names that hold plain Python numbers, not tensors.

A quantity named by its unit of memory or time (``gpu_capacity_gb``, ``budget_bytes``,
``timeout_seconds``) is a Python number: a tensor of the model is never measured in
gigabytes or seconds, so ``gpu_capacity_gb * 0.9 * 1e9`` has no float16 range to exceed.
"""

from __future__ import annotations

import re

_UNIT_WORDS = frozenset(
    """
    gb mb kb tb gib mib kib tib bytes byte seconds second secs sec ms msec millis minutes
    hours
    """.split()
)


def number_name(name: str) -> bool:
    """Whether ``name`` ends with a unit of memory or time (``capacity_gb``, ``elapsed_s``
    is too short to tell and stays unknown)."""
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]
    return bool(words) and len(words) > 1 and words[-1] in _UNIT_WORDS
