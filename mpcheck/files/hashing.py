"""The one hash the cache and plugin lookup use: BLAKE2b, without importing ``hashlib``.

``hashlib`` loads OpenSSL on import (about 5 ms, a tenth of what a one-file check may cost
beyond libcst); its ``blake2b`` is CPython's built-in ``_blake2`` anyway, so that is taken
directly, with ``hashlib`` as the fallback where it is missing.
"""

from __future__ import annotations

try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - another interpreter
    from hashlib import blake2b

__all__ = ["blake2b", "hex_digest"]


def hex_digest(data: bytes, size: int = 16) -> str:
    """``size`` bytes of BLAKE2b of ``data``, as hex."""
    return blake2b(data, digest_size=size).hexdigest()
