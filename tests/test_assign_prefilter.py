"""The source prefilter of ``Definitions.may_alias`` (:func:`_written_before_equals`): which
names a file's source writes before an ``=``, read without backtracking on comments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mpcheck.engine.functions import _written_before_equals


def test_assignments_keywords_and_comments() -> None:
    assert _written_before_equals(b"attn = a if split else b\n", "attn")
    assert _written_before_equals(b"(attn) = f\n", "attn")
    assert _written_before_equals(b"attn \\\n= f\n", "attn")
    assert _written_before_equals(b"f(attn  # the function\n= g)\n", "attn")
    assert not _written_before_equals(b"if attn == f:\n    pass\n", "attn")
    assert not _written_before_equals(b"attn  # = is no assignment\n", "attn")
    assert not _written_before_equals(b"my_attn = f\n", "attn")


def test_a_banner_comment_after_the_name_is_read_in_one_pass(tmp_path: Path) -> None:
    """A name before a long run of ``#`` once made the pattern try every way of cutting the
    run into comments (2**n): the walk of such a file never ended. Checked in a process of
    its own, so a regression fails here instead of hanging the suite."""
    banner = "#" * 200
    source = (
        "import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n"
        "    def forward(self, x):\n"
        f"        y = helper(x)  {banner}\n"
        "        return helper(y)\n"
    )
    path = tmp_path / "banner.py"
    path.write_text(source)
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", "--exit-zero", str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert _written_before_equals(f"helper  {banner}\n".encode(), "helper") is False
