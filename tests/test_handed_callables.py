"""A lambda handed to a function runs where that function calls it (mpcheck.project.callables):
``create_fn(tokens)`` in a mixin runs ``lambda t: model.encode_text(t)`` handed in another
file, and so the text encoder whose input embeddings a third file cast apart from its layers.
Checked through the CLI on variants of ``fixtures/xfile/bad_handed_embedding_lambda`` (the
whole case, proven under torch, runs in tests/test_xfile.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from mpcheck.project.records import ModelRecord, record_of
from tests.support import XFILE

CASE = XFILE / "bad_handed_embedding_lambda"
CALL = "            return create_output_embedding_fn(tokens)  # expect: MPC104:20\n"
HAND = "        return self.create_embedding(tokens, lambda t: model.encode_text(t))\n"
SPLIT = "        model.text_encoder.get_input_embeddings().to(dtype=torch.float32)\n"


def findings(tmp_path: Path, edits: dict[str, tuple[str, str]]) -> set[tuple[str, int, str]]:
    """The CLI's findings on the case with ``edits`` (file -> (old, new)) applied."""
    root = tmp_path / "case"
    shutil.copytree(CASE, root)
    for name, (old, new) in edits.items():
        path = root / "encoders" / name
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new))
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", "--output-format", "json", "."]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), done.stderr
    return {
        (Path(d["filename"]).name, d["location"]["row"], d["code"]) for d in json.loads(done.stdout)
    }


def test_the_lambda_runs_the_split_encoder_where_the_mixin_calls_it(tmp_path: Path) -> None:
    assert findings(tmp_path, {}) == {("mixin.py", 11, "MPC104")}


def test_a_lambda_handed_by_keyword_is_the_same_call(tmp_path: Path) -> None:
    keyword = HAND.replace("lambda t:", "create_output_embedding_fn=lambda t:")
    assert findings(tmp_path, {"setup.py": (HAND, keyword)}) == {("mixin.py", 11, "MPC104")}


def test_autocast_around_the_handing_call_covers_the_callee(tmp_path: Path) -> None:
    wrapped = '        with torch.autocast("cpu", dtype=torch.bfloat16):\n    ' + HAND
    assert findings(tmp_path, {"setup.py": (HAND, wrapped)}) == set()


def test_a_stored_autocast_context_in_the_callee_covers_the_call(tmp_path: Path) -> None:
    stored = "            with self.autocast_context:\n    " + CALL.split("  #")[0] + "\n"
    assert findings(tmp_path, {"mixin.py": (CALL, stored)}) == set()


def test_autocast_around_another_callers_call_does_not_count(tmp_path: Path) -> None:
    other = (
        HAND.replace("return ", "first = ")
        + '        with torch.autocast("cpu", dtype=torch.bfloat16):\n    '
        + HAND.replace("return ", "second = ")
        + "        return first\n"
    )
    assert findings(tmp_path, {"setup.py": (HAND, other)}) == {("mixin.py", 11, "MPC104")}


def test_moving_the_embeddings_to_a_device_splits_nothing(tmp_path: Path) -> None:
    moved = SPLIT.replace("dtype=torch.float32", '"cpu"')
    assert findings(tmp_path, {"setup.py": (SPLIT, moved)}) == set()


def test_a_lambda_that_runs_no_split_module_is_quiet(tmp_path: Path) -> None:
    other = HAND.replace("model.encode_text(t)", "t.float()")
    assert findings(tmp_path, {"setup.py": (HAND, other)}) == set()


def test_records_keep_what_a_file_hands_and_splits() -> None:
    setup = (CASE / "encoders" / "setup.py").read_bytes()
    model = (CASE / "encoders" / "model.py").read_bytes()
    handed = record_of(setup, "encoders/setup.py")
    lambdas, splits, _ = handed.callables
    assert [(c, s, b, k) for c, s, b, _, k, _ in lambdas] == [
        ("create_embedding", "1", ("encode_text",), False)
    ]
    assert [(n, ln) for n, ln, _, _ in splits] == [("text_encoder", 11)]
    runs = record_of(model, "encoders/model.py").callables[2]
    assert ("encode_text", "text_encoder") in runs
    assert ModelRecord.from_plain(json.loads(json.dumps(handed.to_plain()))) == handed


def test_a_lambda_stored_in_a_name_and_then_handed_is_the_same_call(tmp_path: Path) -> None:
    stored = (
        "        create = lambda t: model.encode_text(t)  # noqa: E731\n"
        "        return self.create_embedding(tokens, create)\n"
    )
    assert findings(tmp_path, {"setup.py": (HAND, stored)}) == {("mixin.py", 11, "MPC104")}


def test_the_cache_sees_the_caller_wrap_its_call_in_autocast(tmp_path: Path) -> None:
    root = tmp_path / "case"
    shutil.copytree(CASE, root)
    cache = tmp_path / "cache"
    cmd = [sys.executable, "-m", "mpcheck", "check", "--cache-dir", str(cache)]
    cmd += ["--output-format", "json", "."]

    def codes() -> list[str]:
        done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
        return [d["code"] for d in json.loads(done.stdout)]

    assert codes() == ["MPC104"]
    setup = root / "encoders" / "setup.py"
    wrapped = '        with torch.autocast("cpu", dtype=torch.bfloat16):\n    ' + HAND
    setup.write_text(setup.read_text().replace(HAND, wrapped))
    assert codes() == []  # (the mixin did not change; the evidence in setup.py did)
