"""Start-up cost: ``mpcheck check one_file.py`` against ``python -c "import libcst"``.

    python bench/startup.py [--runs 15]

Runs them side by side (alternating, so machine noise hits all) and prints the median CPU
seconds of each whole process (user + system) and their ratio. Target: ratio <= 1.3 and
<= 0.5 s for the check without the cache (the file analysed); the check through a warm cache
is shown too. Bytecode caching is on, as in a normal install: ``PYTHONDONTWRITEBYTECODE`` is
dropped and each command runs once before the timed rounds.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SAMPLE = "import torch\n\nx = torch.ones(3)\ny = x.float() @ x\n"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def cpu(cmd: list[str], cwd: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=ENV, cwd=cwd
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    bare = 'python -c "import libcst"'
    with tempfile.TemporaryDirectory() as tmp:
        sample = str(Path(tmp) / "one.py")
        Path(sample).write_text(SAMPLE)
        check = [sys.executable, "-m", "mpcheck", "check"]
        commands = {
            bare: [sys.executable, "-c", "import libcst"],
            "mpcheck check --no-cache one_file.py": [*check, "--no-cache", sample],
            "mpcheck check one_file.py (warm cache)": [*check, sample],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        load = os.getloadavg()
        for cmd in commands.values():  # bytecode written, cache filled
            cpu(cmd, tmp)
        for _ in range(args.runs):
            for name, cmd in commands.items():
                times[name].append(cpu(cmd, tmp))
    base = statistics.median(times[bare])
    print(f"median of {args.runs}, CPU seconds (user + system); load before: {load}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:40} {median:.3f} s  {median / base:.2f}x")
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
