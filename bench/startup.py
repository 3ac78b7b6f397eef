"""Start-up cost: ``mpcheck check one_file.py`` against ``python -c "import libcst"``.

    python bench/startup.py [--runs 10]

Runs both side by side (alternating, so machine noise hits both) and prints the median CPU
seconds of each whole process (user + system) and their ratio. Target: ratio <= 1.3.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SAMPLE = "import torch\n\nx = torch.ones(3)\ny = x.float() @ x\n"


def cpu(cmd: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sample = Path(tmp) / "one.py"
        sample.write_text(SAMPLE)
        check = [sys.executable, "-m", "mpcheck", "check", "--no-cache", str(sample)]
        bare = [sys.executable, "-c", "import libcst"]
        ours, base = [], []
        for _ in range(args.runs):
            ours.append(cpu(check))
            base.append(cpu(bare))
    a, b = statistics.median(ours), statistics.median(base)
    print(f"mpcheck check one_file.py: {a:.3f} s CPU (median of {args.runs})")
    print(f'python -c "import libcst": {b:.3f} s CPU')
    print(f"ratio: {a / b:.2f}x")


if __name__ == "__main__":
    main()
