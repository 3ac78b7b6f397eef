"""What the whole-project store holds at the end of a one-process run, by part and by type.

    python bench/store_census.py /tmp/corpora/transformers

Runs ``mpcheck check -j 1`` in this process with an empty cache, then counts every object
reachable from the store's parts (summaries, their pool, dependency maps, module index),
each object once, with ``sys.getsizeof``; and the RSS at the end. This is how the sixth pass
found where a worker's memory went (docs/real-world.md, "Sixth pass: memory"). It reads the
store's private fields: a measuring tool, not an API.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable

from mpcheck.cli.app import main as mpcheck
from mpcheck.project import summarise

PARTS = ("_done", "_pool", "_deps", "_digests", "_component", "_importers", "_index")


def reachable(roots: Iterable[object], seen: set[int]) -> Counter[str]:
    """Bytes by type name of what ``roots`` reach that ``seen`` does not hold yet."""
    sizes: Counter[str] = Counter()
    stack = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type) or type(obj).__name__ in ("module", "function"):
            continue
        seen.add(id(obj))
        sizes[type(obj).__name__] += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return sizes


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        out = os.path.join(cache, "findings.json")
        argv = ["check", "-q", "--exit-zero", "-j", "1", "--cache-dir", cache, "-o", out]
        try:
            mpcheck([*argv, args.tree])
        except SystemExit:
            pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"RSS at the end {rss_mib():.0f} MiB, peak {peak:.0f} MiB")
    for store, _ in summarise._STORES.values():
        seen: set[int] = set()
        by_type: Counter[str] = Counter()
        for name in PARTS:
            sizes = reachable([getattr(store, name)], seen)
            by_type += sizes
            print(f"{name:12} {sum(sizes.values()) / 2**20:7.1f} MiB")
        kept = [s for s in store._done.values() if s is not None]
        text = sum(len(s.to_json()) for s in kept) / 2**20
        print(f"{len(kept)} summaries, their JSON {text:.1f} MiB")
        for kind, size in by_type.most_common(10):
            print(f"  {kind:16} {size / 2**20:7.1f} MiB")


if __name__ == "__main__":
    main()
