"""How many examples the property tests try.

CI (``.ci/run`` sets ``MPCHECK_HYPOTHESIS_PROFILE=ci``) tries each property's full count; the
fast loop (the default profile, ``dev``) a fifth of it, from the same derandomised sequence.
``bench/fuzz.py`` runs the same properties for as long as it is given.
"""

from __future__ import annotations

import os

PROFILES = {"ci": 1.0, "dev": 0.2}
PROFILE = os.environ.get("MPCHECK_HYPOTHESIS_PROFILE", "dev")
if PROFILE not in PROFILES:
    raise ValueError(f"MPCHECK_HYPOTHESIS_PROFILE={PROFILE!r}: expected one of {sorted(PROFILES)}")


def examples(full: int) -> int:
    """The examples to try under the active profile, for a property whose CI count is ``full``."""
    return max(1, round(full * PROFILES[PROFILE]))
