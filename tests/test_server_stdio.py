"""The server process driven with raw bytes over stdio: framing it must refuse, text it must
report on, never a traceback or an internal-error popup."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest

pytest.importorskip("pygls")

pytestmark = pytest.mark.integration

SERVER = [sys.executable, "-m", "mpcheck", "server"]


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def message(method: str, params: dict[str, Any], msg_id: int | None = None) -> bytes:
    payload: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if msg_id is not None:
        payload["id"] = msg_id
    return frame(json.dumps(payload).encode())


def read_message(stream: IO[bytes]) -> dict[str, Any]:
    length = 0
    while True:
        line = stream.readline()
        assert line, "the server closed its output"
        if line == b"\r\n":
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    loaded: dict[str, Any] = json.loads(stream.read(length))
    return loaded


def initialize(root: Path) -> bytes:
    params = {"processId": None, "rootUri": root.as_uri(), "capabilities": {}}
    return message("initialize", params, 1) + message("initialized", {})


@pytest.mark.parametrize(
    "length",
    [b"99999999999999999999999999", b"9" * 5000, b"%d" % (2**40)],
    ids=["26 digits", "5000 digits", "1 TiB"],
)
def test_huge_content_length_is_refused_cleanly(tmp_path: Path, length: bytes) -> None:
    """After a valid exchange, a header announcing an absurd body ends the session with one
    line on stderr: nothing is allocated for it and there is no traceback."""
    proc = subprocess.Popen(
        SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(initialize(tmp_path))
    proc.stdin.flush()
    assert read_message(proc.stdout)["id"] == 1  # serving
    proc.stdin.write(b"Content-Length: " + length + b"\r\n\r\n{}")
    proc.stdin.flush()
    _, err = proc.communicate(timeout=60)
    stderr = err.decode()
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr
    assert "Content-Length" in stderr and "refused" in stderr
    assert "MemoryError" not in stderr and "OverflowError" not in stderr


def test_lone_surrogate_is_mpc001(tmp_path: Path) -> None:
    """A document holding ``\\ud800`` (valid JSON, not valid Unicode) gets MPC001 at its place,
    and the client sees no error message."""
    uri = (tmp_path / "bad.py").as_uri()
    text = 'import torch\n\nname = "ok @"\nscaler = torch.cuda.amp.GradScaler()\n'
    document = {"uri": uri, "languageId": "python", "version": 1, "text": text}
    payload = {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {}}
    payload["params"] = {"textDocument": document}
    body = json.dumps(payload).replace("@", "\\ud800")  # a lone surrogate, as JSON escapes it
    json.loads(body)  # (the bytes are valid JSON)
    exit_ = message("shutdown", {}, 2) + message("exit", {})
    proc = subprocess.Popen(
        SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(initialize(tmp_path) + frame(body.encode()))
    proc.stdin.flush()
    seen = []
    while True:
        received = read_message(proc.stdout)
        seen.append(received)
        if received.get("method") in ("textDocument/publishDiagnostics", "window/showMessage"):
            break  # (the old server answered with an internal-error message, and no findings)
    proc.stdin.write(exit_)
    proc.stdin.flush()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert not [m for m in seen if str(m.get("method")).startswith("window/show")], seen
    (diag,) = seen[-1]["params"]["diagnostics"]
    assert diag["code"] == "MPC001"
    assert "lone surrogate (U+D800)" in diag["message"]
    assert diag["range"]["start"] == {"line": 2, "character": 11}
    assert "Traceback" not in err.decode()
