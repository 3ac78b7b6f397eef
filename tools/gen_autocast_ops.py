"""Generate mpcheck/data/autocast_ops.json from the installed torch (stdlib + torch only).

Usage:  python tools/gen_autocast_ops.py [--check] [--version-delta]

Without ``--version-delta`` it writes the base table (top level of the file) from the
installed torch, which must ship the header's policy macros (2.13 in CI); entries under
``versions`` are kept, re-encoded against the new base. ``--check`` exits 1 if the committed
file differs from what it would write.

``--version-delta`` measures the installed torch (any other minor) and writes its entry
``versions["X.Y"]``: only the ops whose policy differs from the base, ``{device: {op: policy
or null}}`` (null: autocast leaves the op alone there). How the older releases were measured
(one at a time, on a machine without a GPU; the probe needs none)::

    python3 -m venv /tmp/torchver/v2.1
    /tmp/torchver/v2.1/bin/pip install torch==2.1.2      # the CUDA wheel, with its nvidia deps
    /tmp/torchver/v2.1/bin/python tools/gen_autocast_ops.py --version-delta
    rm -rf /tmp/torchver/v2.1

for the last patch of each minor. Releases before the header carried the AT_FORALL_* lists
use the probe alone for cuda too; their autocast switches are the old per-device ones
(``set_autocast_enabled(bool)``, ``set_autocast_gpu_dtype``, ``set_autocast_cpu_*``), found
by feature detection. An op whose kernel fails on the probe's fake tensors is listed under
the entry's ``unprobed`` and keeps the base's policy.

Where each list comes from:

* cuda: the policy macros in torch's shipped header ``include/ATen/autocast_mode.h``
  (AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32, AT_FORALL_FP32_SET_OPT_DTYPE,
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE (the ``norm`` redispatch), AT_FORALL_PROMOTE).
  The few ops that autocast_mode.cpp registers for AutocastCUDA outside those macros
  (``cudnn_convolution*``, the banned ``binary_cross_entropy``) come from the binary probe
  below, and every header entry is cross-checked against the same probe.
* cpu: the CPU lists live only in autocast_mode.cpp, which the wheel does not ship, so they
  come from the binary: every aten op with a kernel for the AutocastCPU dispatch key is
  classified by the probe.

The probe calls the op once with autocast enabled and once disabled, on storage-less
wrapper tensors whose ``__torch_dispatch__`` records the first call that reaches the Python
key and then aborts. Autocast's casts (``_to_copy``) and dtype rewrites happen before that
point, so no kernel runs and the result does not depend on the hardware or on a GPU:

* fp32 inputs, first call is a cast to the low dtype  -> lower_precision
* low-dtype inputs, first call differs from baseline  -> fp32 (cast, or dtype=float added)
* first tensor low, rest fp32, first call differs     -> promote
* autocast raises (naming autocast) for every input, baseline does not -> banned

``--check`` regenerates in memory and exits 1 if the committed file differs.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "mpcheck" / "data" / "autocast_ops.json"
HEADER_REL = "include/ATen/autocast_mode.h"
POLICIES = ("lower_precision", "fp32", "promote", "banned")
# classify()'s answer for an overload the probe cannot call at all (torch < 2.3's Dimname
# overloads reject a plain string): it is skipped when another overload of the op has a policy.
UNPROBEABLE = "unprobeable"

# header macro -> our policy name
HEADER_MACROS = {
    "AT_FORALL_LOWER_PRECISION_FP": "lower_precision",
    "AT_FORALL_FP32": "fp32",
    "AT_FORALL_FP32_SET_OPT_DTYPE": "fp32",
    "AT_FORALL_PROMOTE": "promote",
}
REDISPATCH_MACRO = "AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE"
REDISPATCH_POLICIES = {"fp32_append_dtype": "fp32", "fp32_set_opt_dtype": "fp32"}

# device -> (dispatch key, low dtype the probe enables autocast with: each device's default)
DEVICES = {
    "cuda": ("AutocastCUDA", torch.float16),
    "cpu": ("AutocastCPU", torch.bfloat16),
}


# --------------------------------------------------------------------------- header


def _macro_bodies(text: str) -> dict[str, str]:
    """Return {macro name: body} for every ``#define NAME(_)`` list macro."""
    joined = re.sub(r"\\\n", " ", re.sub(r"//[^\n]*", "", text))
    return {
        m.group(1): m.group(2)
        for m in re.finditer(r"^#define\s+(AT_FORALL_\w+)\(_\)(.*)$", joined, re.M)
    }


def parse_header(path: Path) -> dict[str, str]:
    """Map ``op[.overload]`` -> policy from the CUDA policy macros of autocast_mode.h."""
    bodies = _macro_bodies(path.read_text())
    out: dict[str, str] = {}

    def add(op: str, pol: str) -> None:
        if out.setdefault(op, pol) != pol:
            raise SystemExit(f"header: {op} listed as both {out[op]} and {pol}")

    for macro, pol in HEADER_MACROS.items():
        if macro not in bodies:
            raise SystemExit(f"header: macro {macro} not found in {path}")
        entries = re.findall(r"_\(\s*(\w+)\s*(?:,\s*(\w+)\s*)?\)", bodies[macro])
        if not entries:
            raise SystemExit(f"header: macro {macro} is empty")
        for name, overload in entries:
            add(f"{name}.{overload}" if overload else name, pol)
    if REDISPATCH_MACRO not in bodies:
        raise SystemExit(f"header: macro {REDISPATCH_MACRO} not found in {path}")
    # _(ADD_NS(norm), "norm.Scalar", <sig>, <redispatch sig>, fp32_append_dtype)
    for entry in re.split(r"(?=\b_\(ADD_NS\()", bodies[REDISPATCH_MACRO])[1:]:
        name_m = re.search(r'"([\w.]+)"', entry)
        pol_m = re.search(r",\s*(\w+)\s*\)\s*$", entry.strip())
        if not name_m or not pol_m or pol_m.group(1) not in REDISPATCH_POLICIES:
            raise SystemExit(f"header: cannot parse {REDISPATCH_MACRO} entry {entry!r}")
        add(name_m.group(1), REDISPATCH_POLICIES[pol_m.group(1)])
    return out


# --------------------------------------------------------------------------- binary probe


class _Abort(Exception):
    """Raised by the probe tensor at the first call that reaches the Python key."""


def _sig(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return f"<{x.dtype}>"
    if isinstance(x, (list, tuple)):
        return [_sig(v) for v in x]
    if isinstance(x, dict):
        return {k: _sig(v) for k, v in sorted(x.items())}
    return repr(x)


class _Probe(torch.Tensor):
    """Storage-less tensor: record the first dispatched call, then abort."""

    seen: list[Any] = []

    @staticmethod
    def __new__(cls, dtype: torch.dtype, device: str) -> _Probe:
        dev = torch.device(device)
        t: _Probe = torch.Tensor._make_wrapper_subclass(cls, (2, 2), dtype=dtype, device=dev)
        return t

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]  # torch's stub is not a classmethod
        cls, func: Any, types: Any, args: Any = (), kwargs: Any = None
    ) -> Any:
        cls.seen.append((str(func), _sig(args), _sig(kwargs or {})))
        raise _Abort


def _build_args(schema: Any, make: Callable[[], torch.Tensor]) -> tuple[list[Any], dict[str, Any]]:
    """Arguments for the required parameters of ``schema``; tensors come from ``make``."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for a in schema.arguments:
        if a.has_default_value():
            continue
        t = str(a.type)
        if t == "Tensor":
            v: Any = make()
        elif t == "List[Tensor]":
            v = [make(), make()]
        elif t == "List[Optional[Tensor]]":
            v = [make()]
        elif t.startswith("Optional["):
            v = None
        elif t == "List[int]":
            v = [1] * (a.N or 1)
        elif t in ("int", "SymInt"):
            v = 1
        elif t in ("float", "number"):
            v = 1.0
        elif t == "bool":
            v = False
        elif t == "str":
            v = "x"
        elif t == "List[str]":  # Dimname[] in torch < 2.3's schemas
            v = ["x"] * (a.N or 1)
        else:
            raise SystemExit(f"probe: no value for argument {a.name}: {t} of {schema}")
        if a.kwarg_only:
            kwargs[a.name] = v
        else:
            args.append(v)
    return args, kwargs


def _switches(
    device: str,
) -> tuple[Callable[[], bool], Callable[[bool], None], Callable[[], Any], Callable[[Any], None]]:
    """(is_enabled, set_enabled, get_dtype, set_dtype) for ``device``, by feature detection.

    torch >= 2.4 takes the device as an argument; older releases have one switch per device
    (``set_autocast_enabled(bool)`` is CUDA's, ``set_autocast_gpu_dtype``, ``*_cpu_*``).
    """
    if hasattr(torch, "get_autocast_dtype"):
        return (
            lambda: torch.is_autocast_enabled(device),
            lambda on: torch.set_autocast_enabled(device, on),
            lambda: torch.get_autocast_dtype(device),
            lambda dt: torch.set_autocast_dtype(device, dt),
        )
    t: Any = torch  # the old per-device switches are gone from the installed stubs
    if device == "cpu":
        return (
            t.is_autocast_cpu_enabled,
            t.set_autocast_cpu_enabled,
            t.get_autocast_cpu_dtype,
            t.set_autocast_cpu_dtype,
        )
    return (
        t.is_autocast_enabled,
        t.set_autocast_enabled,
        t.get_autocast_gpu_dtype,
        t.set_autocast_gpu_dtype,
    )


@contextmanager
def _autocast(device: str, dtype: torch.dtype, enabled: bool) -> Iterator[None]:
    # torch.autocast("cuda") disables itself on CPU-only builds (and machines); the low-level
    # switches turn the AutocastCUDA key on regardless, which is all the probe needs.
    is_enabled, set_enabled, get_dtype, set_dtype = _switches(device)
    prev_enabled, prev_dtype = is_enabled(), get_dtype()
    set_enabled(enabled)
    set_dtype(dtype)
    try:
        yield
    finally:
        set_enabled(prev_enabled)
        set_dtype(prev_dtype)
        torch.clear_autocast_cache()


def _first_call(
    op: Any, schema: Any, device: str, low: torch.dtype, dtypes: list[torch.dtype], on: bool
) -> Any:
    """First call reaching the Python key (or the error raised before it)."""
    it = iter(dtypes + [dtypes[-1]] * 64)
    args, kwargs = _build_args(schema, lambda: _Probe(next(it), device))
    _Probe.seen = []
    with _autocast(device, low, on):
        try:
            op(*args, **kwargs)
        except _Abort:
            pass
        except Exception as e:  # noqa: BLE001 - the error itself is the observation
            return ("raised", type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    if not _Probe.seen:
        raise SystemExit(f"probe: {op} returned without dispatching (autocast on={on})")
    return _Probe.seen[0]


def classify(name: str, device: str, low: torch.dtype) -> str | None:
    """Autocast policy of aten ``name`` (``op`` or ``op.overload``) on ``device``, or None."""
    base, _, overload = name.partition(".")
    schema = torch._C._get_schema(f"aten::{base}", overload)
    op = getattr(getattr(torch.ops.aten, base), overload or "default")
    f32 = torch.float32

    runs = {
        case: tuple(_first_call(op, schema, device, low, dtypes, on) for on in (True, False))
        for case, dtypes in (("fp32", [f32]), ("low", [low]), ("mixed", [low, f32]))
    }
    if all(
        on[0] == "raised" and "autocast" in on[2] and off[0] != "raised"
        for on, off in runs.values()
    ):
        return "banned"  # the banned kernel refuses any input, naming autocast in its error
    if all(on == off and on[0] == "raised" for on, off in runs.values()):
        return UNPROBEABLE  # the call fails before dispatch, with autocast on or off
    on, off = runs["fp32"]
    if on != off and on[0] == "aten._to_copy.default" and on[2].get("dtype") == repr(low):
        return "lower_precision"
    # A changed first call is evidence only when autocast let the call through: a kernel
    # that fails on the fake tensors (torch 2.1's cudnn RNN weight flattening) says nothing.
    if runs["low"][0] != runs["low"][1] and runs["low"][0][0] != "raised":
        return "fp32"
    if runs["mixed"][0] != runs["mixed"][1] and runs["mixed"][0][0] != "raised":
        return "promote"
    if any(on != off and on[0] == "raised" for on, off in runs.values()):
        return UNPROBEABLE
    return None


def registered(key: str) -> list[str]:
    """aten ops (``op`` or ``op.overload``) with their own kernel for dispatch key ``key``."""
    return sorted(
        n.removeprefix("aten::")
        for n in torch._C._dispatch_get_all_op_names()
        if n.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(n, key)
    )


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence fd 2: the probe trips C++ deprecation warnings (chain_matmul, qr, ...)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def probe(device: str, strict: bool = True) -> tuple[dict[str, str | None], list[str], set[str]]:
    """{op[.overload]: policy} for the device's Autocast kernels, the ops left unprobed, and
    the overloads dropped because another overload of their op answered.

    An overload the probe cannot call is dropped when another overload of its op has a
    policy; an op with none is an error when ``strict`` (the base), else returned as unprobed.
    """
    key, low = DEVICES[device]
    with _quiet_stderr():
        found = {name: classify(name, device, low) for name in registered(key)}
    classified = {n.split(".", 1)[0] for n, p in found.items() if p not in (None, UNPROBEABLE)}
    unprobed, dropped = set(), set()
    for name, pol in list(found.items()):
        if pol == UNPROBEABLE:
            base = name.split(".", 1)[0]
            if base not in classified:
                if strict:
                    raise SystemExit(f"probe: cannot call {name}, and no other overload can be")
                unprobed.add(base)
            else:
                dropped.add(name)
            del found[name]
    return found, sorted(unprobed), dropped


# --------------------------------------------------------------------------- assemble


def _by_policy(entries: dict[str, str], where: str) -> dict[str, list[str]]:
    """Group ``op[.overload]`` -> policy into sorted base-name lists; reject conflicts."""
    base: dict[str, str] = {}
    for name, pol in entries.items():
        op = name.split(".", 1)[0]
        if base.setdefault(op, pol) != pol:
            raise SystemExit(f"{where}: overloads of {op} disagree ({base[op]} vs {pol})")
    return {p: sorted(op for op, q in base.items() if q == p) for p in POLICIES}


def has_macros(header: Path) -> bool:
    """Whether the header holds the CUDA policy lists (torch < 2.3 keeps them in the .cpp)."""
    if not header.is_file():
        return False
    bodies = _macro_bodies(header.read_text())
    return all(m in bodies for m in (*HEADER_MACROS, REDISPATCH_MACRO))


def measure(require_header: bool = True) -> tuple[dict[str, dict[str, list[str]]], dict[str, Any]]:
    """The installed torch's tables ({device: {policy: ops}}) and where they came from.

    With the header's macros, cuda is header + probe cross-checked (the base must be); without
    them (older torch, or ``require_header=False``) the AutocastCUDA probe alone, as for cpu.
    """
    torch_dir = Path(torch.__file__).resolve().parent
    header = torch_dir / HEADER_REL
    use_header = has_macros(header)
    if require_header and not use_header:
        raise SystemExit(f"{header}: missing, or without the AT_FORALL_* policy macros")

    cuda_probe, cuda_unprobed, dropped = probe("cuda", strict=require_header)
    unclassified = sorted(n for n, p in cuda_probe.items() if p is None)
    if use_header:
        from_header = parse_header(header)
        mismatch = sorted(
            f"{n}: header {p}, binary {cuda_probe.get(n)}"
            for n, p in from_header.items()
            if cuda_probe.get(n) != p and n not in dropped
        )
        if unclassified or mismatch:
            raise SystemExit(f"cuda: header vs AutocastCUDA probe: {unclassified} {mismatch}")
    else:
        if unclassified:
            raise SystemExit(
                f"cuda: AutocastCUDA kernels the probe cannot classify: {unclassified}"
            )
        from_header = {}
    extra_cuda = {n: p for n, p in cuda_probe.items() if n not in from_header and p}
    cuda = _by_policy({**from_header, **extra_cuda}, "cuda")

    cpu_probe, cpu_unprobed, _ = probe("cpu", strict=require_header)
    unclassified = sorted(n for n, p in cpu_probe.items() if p is None)
    if unclassified:
        raise SystemExit(f"cpu: AutocastCPU kernels the probe cannot classify: {unclassified}")
    cpu = _by_policy({n: p for n, p in cpu_probe.items() if p}, "cpu")
    sources: dict[str, Any] = {
        "header": header,
        "use_header": use_header,
        "extra": extra_cuda,
        "unprobed": {"cuda": cuda_unprobed, "cpu": cpu_unprobed},
    }
    return {"cuda": cuda, "cpu": cpu}, sources


def generate() -> dict[str, Any]:
    """The base table (without ``versions``): the installed torch, header required."""
    tables, src = measure()
    header: Path = src["header"]
    macros = {**HEADER_MACROS, REDISPATCH_MACRO: "fp32"}
    return {
        "torch_version": _version(),
        "generated_by": "tools/gen_autocast_ops.py",
        "sources": {
            "cuda": {
                "header": f"<torch>/{HEADER_REL}",
                "header_sha256": hashlib.sha256(header.read_bytes()).hexdigest(),
                "header_macros": macros,
                "not_in_header_so_from_probe": dict(sorted(src["extra"].items())),
                "probe": "AutocastCUDA kernels, autocast dtype float16; agrees with every "
                "header entry and adds only the ops above",
            },
            "cpu": {
                "probe": "AutocastCPU kernels, autocast dtype bfloat16 (autocast_mode.cpp, "
                "which holds the CPU lists, is not shipped in the wheel)",
            },
            "probe_method": (
                "every aten op with its own kernel for the dispatch key "
                "(torch._C._dispatch_has_kernel_for_dispatch_key) is called on storage-less "
                "wrapper tensors of that device with autocast on and off, and the first "
                "dispatched call is compared: fp32 inputs cast to the low dtype -> "
                "lower_precision; low-dtype inputs changed -> fp32; mixed low/fp32 inputs "
                "changed -> promote; autocast error for every input -> banned"
            ),
            "op_names": "aten base names; overload suffixes dropped (all overloads agree)",
        },
        "cuda": tables["cuda"],
        "cpu": tables["cpu"],
    }


def _version() -> str:
    return torch.__version__.split("+", 1)[0]


def minor(version: str) -> str:
    """``"2.1.2"`` -> ``"2.1"``: the key of a version's entry."""
    return ".".join(version.split(".")[:2])


def _minor_key(key: str) -> tuple[int, ...]:
    return tuple(int(x) for x in key.split("."))


# --------------------------------------------------------------------------- versions


VERSIONS_FORMAT = (
    "versions[X.Y]: an older (or newer) torch minor, measured with --version-delta, stored as "
    "the ops whose policy differs from the base lists above: {device: {op: policy or null}}, "
    "null = autocast leaves the op alone in that version; torch_version is the release measured "
    "(the minor's last patch), evidence says whether its header held the cuda lists"
)


def by_op(lists: dict[str, list[str]]) -> dict[str, str]:
    """{policy: [ops]} -> {op: policy}."""
    return {op: pol for pol in POLICIES for op in lists.get(pol, [])}


def encode_delta(
    base: dict[str, dict[str, list[str]]], full: dict[str, dict[str, list[str]]]
) -> dict[str, dict[str, str | None]]:
    """{device: {op: policy or None}}: what ``full`` changes relative to ``base``."""
    out: dict[str, dict[str, str | None]] = {}
    for device in DEVICES:
        old, new = by_op(base[device]), by_op(full[device])
        out[device] = {
            op: new.get(op) for op in sorted(old.keys() | new.keys()) if old.get(op) != new.get(op)
        }
    return out


def apply_delta(
    base: dict[str, dict[str, list[str]]], delta: dict[str, dict[str, str | None]]
) -> dict[str, dict[str, list[str]]]:
    """The full {device: {policy: ops}} tables of a version, from the base and its delta."""
    out: dict[str, dict[str, list[str]]] = {}
    for device in DEVICES:
        ops = by_op(base[device])
        for op, pol in delta.get(device, {}).items():
            if pol is None:
                ops.pop(op, None)
            else:
                ops[op] = pol
        out[device] = {p: sorted(op for op, q in ops.items() if q == p) for p in POLICIES}
    return out


def rebase(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``new`` (a base) with ``old``'s version entries re-encoded against it."""
    out = dict(new)
    versions = old.get("versions", {})
    if versions:
        out["versions_format"] = VERSIONS_FORMAT
        out["versions"] = {}
        for key in sorted(versions, key=_minor_key):
            entry = versions[key]
            full = apply_delta(old, entry)
            delta = encode_delta(new, full)
            for device, ops in entry.get("unprobed", {}).items():
                for op in ops:  # unprobed ops follow the base, whatever it says
                    delta[device].pop(op, None)
            out["versions"][key] = {
                **{k: v for k, v in entry.items() if k not in DEVICES},
                **delta,
            }
    return out


def version_entry(old: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The installed torch's entry for ``old["versions"]``: its minor and its delta."""
    key = minor(_version())
    if key == minor(old["torch_version"]):
        raise SystemExit(
            f"torch {_version()} is the base table's minor: run without --version-delta"
        )
    tables, src = measure(require_header=False)
    evidence = (
        "header AT_FORALL_* macros cross-checked by the probe (cuda), probe (cpu)"
        if src["use_header"]
        else "probe only (cuda lists not in the header)"
    )
    delta = encode_delta(old, tables)
    entry: dict[str, Any] = {"torch_version": _version(), "evidence": evidence}
    unprobed = {d: ops for d, ops in src["unprobed"].items() if ops}
    if unprobed:  # kept at the base's policy: the probe could not call them
        entry["unprobed"] = unprobed
        for device, ops in unprobed.items():
            for op in ops:
                delta[device].pop(op, None)
    return key, {**entry, **delta}


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the committed file is out of date"
    )
    parser.add_argument(
        "--version-delta",
        action="store_true",
        help="add (or update) the installed torch's entry under versions, as a delta",
    )
    ns = parser.parse_args(argv)
    rel = OUT.relative_to(REPO)
    committed = OUT.read_text() if OUT.is_file() else ""
    old: dict[str, Any] = json.loads(committed) if committed else {}
    if ns.version_delta:
        if not old:
            raise SystemExit(f"{rel} not found: generate the base first")
        key, entry = version_entry(old)
        versions = {**old.get("versions", {}), key: entry}
        old["versions"] = {k: versions[k] for k in sorted(versions, key=_minor_key)}
        text = render(
            rebase(old, {k: v for k, v in old.items() if k not in ("versions", "versions_format")})
        )
    else:
        text = render(rebase(old, generate()))
    if ns.check:
        if committed == text:
            print(f"{rel} is up to date")
            return 0
        diff = difflib.unified_diff(
            committed.splitlines(),
            text.splitlines(),
            f"{rel} (committed)",
            f"{rel} (generated)",
            lineterm="",
        )
        print("\n".join(list(diff)[:80]))
        print(f"{rel} is out of date: run python tools/gen_autocast_ops.py", file=sys.stderr)
        return 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {rel}" + (f" (versions[{key}])" if ns.version_delta else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
