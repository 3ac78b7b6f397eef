"""Third-party rule packages: the ``mpcheck.rules`` entry points of installed distributions.

Reading the distributions' metadata costs more than checking one file (importing
``importlib.metadata`` alone takes tens of milliseconds), yet it changes only when something
is installed or removed, which changes the modification time of the ``sys.path`` directory
it lands in. So the list is kept in the user's cache directory, keyed by those directories
and their times, and read again only when one of them changed.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

from mpcheck.files.hashing import blake2b

__all__ = ["load", "load_all", "rule_entry_points"]

GROUP = "mpcheck.rules"


def _user_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mpcheck"


def _key() -> str:
    h = blake2b(digest_size=12)
    h.update(sys.executable.encode("utf-8", "surrogateescape"))
    # sys.path[0] is the script's directory or the cwd, where nothing gets installed and
    # whose time changes with every file created there.
    for entry in sys.path[1:]:
        try:
            stamp = os.stat(entry or ".").st_mtime_ns
        except OSError:
            stamp = -1
        h.update(f"{entry}\0{stamp}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def rule_entry_points() -> list[tuple[str, str]]:
    """``(name, "module:attr")`` of each entry point in the ``mpcheck.rules`` group."""
    store = _user_cache() / f"entry-points-{_key()}.json"
    try:
        found = json.loads(store.read_text("utf-8"))
        if isinstance(found, list) and all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(s, str) for s in p)
            for p in found
        ):
            return [(name, value) for name, value in found]
    except (OSError, ValueError):
        pass
    import tempfile
    from importlib.metadata import entry_points

    pairs = sorted({(ep.name, ep.value) for ep in entry_points(group=GROUP)})
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=store.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(pairs, out)
        os.replace(tmp, store)
    except OSError:
        pass  # a read-only home: look the entry points up every run
    return pairs


def load(value: str) -> object:
    """What an entry point's ``module:attr.attr`` value names (extras are ignored)."""
    module_name, _, attrs = value.partition("[")[0].strip().partition(":")
    obj: object = importlib.import_module(module_name.strip())
    for part in filter(None, attrs.strip().split(".")):
        obj = getattr(obj, part)
    return obj


def load_all() -> list[object]:
    """What every ``mpcheck.rules`` entry point names. One that fails to load (a broken or
    half-installed package) is named in one warning line and left out, as flake8 does, so
    that the other rules still run."""
    loaded = []
    for name, value in rule_entry_points():
        try:
            loaded.append(load(value))
        except Exception as exc:  # noqa: BLE001 - any error in third-party code at import
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            print(
                f"mpcheck: warning: rule plugin `{name}` ({value}) failed to load and is "
                f"skipped: {detail}",
                file=sys.stderr,
            )
    return loaded
