"""Run the robustness properties for as long as asked, and print what was tried.

The test suite runs the same properties with a fixed seed and a few dozen examples each;
this runs them with fresh randomness until the time is up::

    python bench/fuzz.py --minutes 30

Properties: mpcheck never crashes on a valid program (``hypothesmith`` programs and
torch-shaped ones), and ``--fix`` on generated files changes exactly the bytes of its edits,
compiles and is idempotent, and whatever the cache directory holds (links, FIFOs, truncated,
huge or garbage entries) the findings are those of a run without it. Prints inputs tried and
failures (with the failing input).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.robustness import test_cache_properties as caches  # noqa: E402
from tests.robustness import test_fix_properties as fixes  # noqa: E402
from tests.robustness import test_run_properties as runs  # noqa: E402


def fuzz(name: str, strategy: st.SearchStrategy[Any], check: Callable[[object], None]) -> int:
    """One batch of examples; returns how many were tried (raises on a failure)."""
    tried = 0

    @settings(
        max_examples=200,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def batch(example: object) -> None:
        nonlocal tried
        tried += 1
        check(example)

    batch()
    return tried


def _program(example: object) -> None:
    assert isinstance(example, str)
    runs.never_crashes(example)


def _snippets(example: object) -> None:
    assert isinstance(example, list)
    runs.never_crashes("\n".join(example) + "\n")


def _fix(example: object) -> None:
    assert isinstance(example, tuple)
    fixes.fix_is_exact(example)


def _cache(example: object) -> None:
    assert isinstance(example, list)
    caches.cache_survives(example)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    args = parser.parse_args()
    import hypothesmith

    properties: list[tuple[str, st.SearchStrategy[Any], Callable[[object], None]]] = [
        ("valid programs", hypothesmith.from_grammar() | hypothesmith.from_node(), _program),
        ("torch-shaped programs", st.lists(st.sampled_from(runs.SNIPPETS)), _snippets),
        ("fix bytes", fixes.programs(), _fix),
        ("cache contents", caches.MUTATIONS, _cache),
    ]
    # notebooks: generated in several layouts, then their bytes or cell values mutated
    from tests.robustness import test_notebook_properties as notebooks

    properties.append(("mutated notebooks", notebooks.mutated(), notebooks.checks_and_fixes))
    deadline = time.monotonic() + 60 * args.minutes
    counts = dict.fromkeys((name for name, _, _ in properties), 0)
    start = time.monotonic()
    failures = 0
    while time.monotonic() < deadline:
        for name, strategy, check in properties:
            try:
                counts[name] += fuzz(name, strategy, check)
            except Exception as exc:  # noqa: BLE001 - report every failure, keep fuzzing
                failures += 1
                print(f"FAILURE in {name}: {type(exc).__name__}: {exc}", flush=True)
    minutes = (time.monotonic() - start) / 60
    for name, count in counts.items():
        print(f"{name}: {count:,} tried")
    print(f"{sum(counts.values()):,} inputs in {minutes:.1f} min, failures: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
