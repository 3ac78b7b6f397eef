"""``--fix``, ``--diff`` and stdin change exactly the bytes of their edits, nothing else.

Each case is one a user met: CRLF and CR-only files, a BOM before a finding on line 1,
characters that ``str.splitlines`` takes for line breaks but Python does not, PEP 263
encodings, undecodable stdin, links, modes, files that change or vanish under the fixer.
MPC404's safe fix (``torch.cuda.amp.GradScaler()`` -> ``torch.amp.GradScaler("cuda")``)
is the edit used throughout.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mpcheck.cli.app
import mpcheck.output.fixes
from mpcheck.cli.app import main

OLD = b"scaler = torch.cuda.amp.GradScaler()"
NEW = b'scaler = torch.amp.GradScaler("cuda")'


def source(eol: bytes = b"\n", middle: bytes = b"x = 1") -> tuple[bytes, bytes]:
    """A file with one finding on its last line, and the same file fixed."""
    lines = [b"import torch", middle, OLD]
    return eol.join(lines) + eol, eol.join([*lines[:2], NEW]) + eol


def fix(path: Path, *extra: str) -> int:
    return main(["check", "--fix", "-q", "--select", "MPC404", *extra, str(path)])


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
def test_line_endings_survive_a_fix(tmp_path: Path, eol: bytes) -> None:
    before, after = source(eol)
    target = tmp_path / "train.py"
    target.write_bytes(before)
    assert fix(target) == 0
    assert target.read_bytes() == after


def test_mixed_line_endings_each_line_keeps_its_own(tmp_path: Path) -> None:
    target = tmp_path / "train.py"
    target.write_bytes(b"import torch\r\nx = 1\n" + OLD + b"\r\ny = 2\r")
    assert fix(target) == 0
    assert target.read_bytes() == b"import torch\r\nx = 1\n" + NEW + b"\r\ny = 2\r"


def test_bom_and_a_finding_on_line_one(tmp_path: Path) -> None:
    target = tmp_path / "train.py"
    target.write_bytes(b"\xef\xbb\xbfimport torch; " + OLD + b"\n")
    assert fix(target) == 0
    assert target.read_bytes() == b"\xef\xbb\xbfimport torch; " + NEW + b"\n"


@pytest.mark.parametrize(
    "char", ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
)
def test_characters_python_does_not_break_lines_at(tmp_path: Path, char: str) -> None:
    middle = f"s = 'a{char}b'  # c{char}d".encode()
    before, after = source(b"\n", middle)
    target = tmp_path / "train.py"
    target.write_bytes(before)
    assert fix(target) == 0
    assert target.read_bytes() == after


FORM_FEEDS = {
    "statement": b"import torch\n\x0c" + OLD + b"\n",
    "two": b"import torch\n\x0c\x0c" + OLD + b"  # \x0c\n",
    "indented": b"import torch\n\n\ndef f():\n\x0c    " + OLD + b"\n    return scaler\n",
    "crlf": b"import torch\r\n\x0c" + OLD + b"\r\n",
    "mid-line": b"import torch\nscaler =\x0c " + OLD.split(b"= ")[1] + b"\n",
    "after-u2028": "import torch\ns = '\u2028'; ".encode() + OLD + b"\n",
    "second-line": b"import torch\n\x0c" + OLD + b"\nother = torch.cuda.amp.GradScaler()\n",
}


@pytest.mark.parametrize("case", sorted(FORM_FEEDS))
def test_a_form_feed_before_a_statement_keeps_its_columns(tmp_path: Path, case: str) -> None:
    """libcst drops a form feed at the start of a statement's line, so its columns there
    were one short: the fix landed a character early (``scaler =torch...)``, a SyntaxError)."""
    before = FORM_FEEDS[case]
    target = tmp_path / "train.py"
    target.write_bytes(before)
    assert fix(target) == 0
    after = before.replace(b"torch.cuda.amp.GradScaler()", b'torch.amp.GradScaler("cuda")')
    assert target.read_bytes() == after
    compile(after, str(target), "exec")


@pytest.mark.parametrize("codec", ["unicode_escape", "raw_unicode_escape", "utf-7"])
def test_an_encoding_that_does_not_round_trip_is_left_alone(
    tmp_path: Path, codec: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--fix`` wrote ``unicode_escape`` files back as one comment line (every line break
    became ``\\n``) and re-shifted ``utf-7``: only the edit may change, or nothing."""
    before = (
        f"# -*- coding: {codec} -*-\nimport torch\n".encode()
        + b's = "caf\\xe9 \\\\u00e9 +AOk-"\n'
        + OLD
        + b"\n"
    )
    target = tmp_path / "train.py"
    target.write_bytes(before)
    fix(target)
    after = target.read_bytes()
    if after == before:
        assert f"{target}: its encoding ({codec}" in capsys.readouterr().err
    else:
        assert after == before.replace(OLD, NEW)


def test_pep263_encoding_is_read_and_written_in_it(tmp_path: Path) -> None:
    middle = "s = 'café'".encode("latin-1")
    before, after = source(b"\n", middle)
    before, after = b"# -*- coding: latin-1 -*-\n" + before, b"# -*- coding: latin-1 -*-\n" + after
    target = tmp_path / "train.py"
    target.write_bytes(before)
    assert main(["check", "--diff", "--select", "MPC404", str(target)]) == 1
    assert fix(target) == 0
    assert target.read_bytes() == after


def test_undecodable_file_is_left_alone_with_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before, _ = source(b"\n", b"s = 1  # \xff\xfe")
    target = tmp_path / "train.py"
    target.write_bytes(before)
    status = fix(target)
    assert target.read_bytes() == before
    assert status in (1, 2)
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize("final", [True, False], ids=["newline-at-end", "no-newline-at-end"])
def test_diff_applies_with_git(tmp_path: Path, eol: bytes, final: bool) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    before, after = source(eol)
    if not final:
        before, after = before[: -len(eol)], after[: -len(eol)]
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "train.py").write_bytes(before)
    patch = subprocess.run(
        [sys.executable, "-m", "mpcheck", "check", "--diff", "--select", "MPC404", "train.py"],
        cwd=repo,
        capture_output=True,
        check=False,
    )
    assert patch.returncode == 1, patch.stderr
    applied = subprocess.run(
        ["git", "apply", "-"], cwd=repo, input=patch.stdout, capture_output=True, check=False
    )
    assert applied.returncode == 0, applied.stderr.decode()
    assert (repo / "train.py").read_bytes() == after


def run_stdin(data: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    cmd = [sys.executable, "-m", "mpcheck", "check", "--select", "MPC404", *args, "-"]
    return subprocess.run(cmd, input=data, capture_output=True, check=False)


def test_stdin_fix_is_byte_exact() -> None:
    before, after = source(b"\r\n", "s = 'é\u2028'".encode())
    done = run_stdin(b"\xef\xbb\xbf" + before, "--fix")
    assert done.stdout == b"\xef\xbb\xbf" + after
    assert done.returncode == 0


def test_stdin_that_cannot_be_decoded_comes_back_unchanged() -> None:
    before, _ = source(b"\n", b"s = 1  # \xff")
    done = run_stdin(before, "--fix")
    assert done.stdout == before
    assert done.returncode == 2
    assert b"cannot decode" in done.stderr and b"Traceback" not in done.stderr


def test_symlink_target_is_fixed_and_the_link_kept(tmp_path: Path) -> None:
    before, after = source()
    real = tmp_path / "real.py"
    real.write_bytes(before)
    link = tmp_path / "link.py"
    link.symlink_to(real)
    assert fix(link) == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_bytes() == after


def test_hard_links_stay_one_file(tmp_path: Path) -> None:
    before, after = source()
    first = tmp_path / "a.py"
    first.write_bytes(before)
    second = tmp_path / "b.py"
    os.link(first, second)
    assert fix(first) == 0
    assert second.read_bytes() == after
    assert os.stat(first).st_ino == os.stat(second).st_ino


def test_mode_is_kept(tmp_path: Path) -> None:
    before, after = source()
    target = tmp_path / "train.py"
    target.write_bytes(before)
    target.chmod(0o750)
    assert fix(target) == 0
    assert target.read_bytes() == after
    assert target.stat().st_mode & 0o7777 == 0o750


def test_unwritable_file_is_reported_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before, _ = source()
    target = tmp_path / "train.py"
    target.write_bytes(before)

    def refuse(*args: object, **kwargs: object) -> io.BufferedRandom:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("mpcheck.output.fixes.open", refuse, raising=False)
    assert fix(target) == 2
    assert target.read_bytes() == before
    err = capsys.readouterr().err
    assert "not writable" in err and "Traceback" not in err


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root can write anything")
def test_read_only_file_is_reported_not_replaced(tmp_path: Path) -> None:
    before, _ = source()
    target = tmp_path / "train.py"
    target.write_bytes(before)
    target.chmod(0o444)
    assert fix(target) == 2
    assert target.read_bytes() == before


def edit_during_fix(monkeypatch: pytest.MonkeyPatch, action: object) -> None:
    """Run ``action`` after the fixer read the file and before it writes."""
    real = mpcheck.output.fixes.apply_fixes

    def patched(*args: object, **kwargs: object) -> tuple[str, int]:
        result = real(*args, **kwargs)  # type: ignore[arg-type]
        action()  # type: ignore[operator]
        return result

    monkeypatch.setattr(mpcheck.output.fixes, "apply_fixes", patched)  # the CLI imports it late


def test_user_edit_during_the_fix_is_not_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before, _ = source()
    target = tmp_path / "train.py"
    target.write_bytes(before)
    edited = before + b"# typed by the user\n"
    edit_during_fix(monkeypatch, lambda: target.write_bytes(edited))
    assert fix(target) == 1  # the finding is still there
    assert target.read_bytes() == edited
    assert "changed while mpcheck was checking it" in capsys.readouterr().err


def test_file_removed_during_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before, _ = source()
    target = tmp_path / "train.py"
    target.write_bytes(before)
    edit_during_fix(monkeypatch, target.unlink)
    assert fix(target) == 2
    err = capsys.readouterr().err
    assert "was removed" in err and "Traceback" not in err


def test_two_fixers_at_once_apply_each_fix_once(tmp_path: Path) -> None:
    before, after = source(b"\n", b"def helper():\n    return torch.cuda.amp.GradScaler()")
    expected = after.replace(b"torch.cuda.amp.GradScaler()", b'torch.amp.GradScaler("cuda")')
    for i in range(80):
        (tmp_path / f"m{i}.py").write_bytes(before)
    cmd = [sys.executable, "-m", "mpcheck", "check", "--fix", "-q", "--select", "MPC404", "-j", "1"]
    runs = [
        subprocess.Popen(
            [*cmd, "."], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    for run in runs:
        _, err = run.communicate(timeout=300)
        assert b"Traceback" not in err
    for i in range(80):
        assert (tmp_path / f"m{i}.py").read_bytes() == expected, i


def _xattrs_work(path: Path) -> bool:
    try:
        os.setxattr(path, "user.mpcheck-probe", b"1")
    except (AttributeError, OSError):
        return False
    os.removexattr(path, "user.mpcheck-probe")
    return True


def test_extended_attributes_survive_a_fix(tmp_path: Path) -> None:
    """A rename put a fresh file in place and dropped the file's xattrs (and its ACLs, which
    are xattrs too); the copy now carries them, and no stray file is left."""
    before, after = source()
    target = tmp_path / "train.py"
    target.write_bytes(before)
    if not _xattrs_work(target):
        pytest.skip("no user xattrs on this file system")
    os.setxattr(target, "user.origin", b"checked-out")
    assert fix(target) == 0
    assert target.read_bytes() == after
    assert os.getxattr(target, "user.origin") == b"checked-out"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_attributes_that_cannot_be_copied_mean_writing_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the copy cannot carry an attribute (a security label), the file is rewritten in
    place: same inode, so everything attached to it stays; the saved original is removed."""
    before, after = source()
    target = tmp_path / "train.py"
    target.write_bytes(before)
    if not _xattrs_work(target):
        pytest.skip("no user xattrs on this file system")
    os.setxattr(target, "user.origin", b"checked-out")
    inode = target.stat().st_ino

    def refuse(*args: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "setxattr", refuse)
    assert fix(target) == 0
    assert target.read_bytes() == after
    assert target.stat().st_ino == inode
    assert os.getxattr(target, "user.origin") == b"checked-out"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]
