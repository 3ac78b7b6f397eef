"""Patterns built around one name, compiled once per process.

The record pass asks the same questions of the same names (``model``, ``dtype``,
``self.unet``) in file after file, each as a pattern of its own. ``re`` keeps only the last
512 patterns it compiled, and the patterns made of one file's own names (its list of model
variables) pushed those shared ones out: each was compiled again, which cost a fifth of the
pass. Kept here (a few thousand over transformers and diffusers), each is compiled once.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["compiled"]


@lru_cache(maxsize=8192)
def compiled(pattern: bytes, flags: int = 0) -> re.Pattern[bytes]:
    """``re.compile(pattern, flags)``, kept for the next file that asks."""
    return re.compile(pattern, flags)
