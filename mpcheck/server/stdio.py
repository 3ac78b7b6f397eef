"""The server's stdin, refusing a message header that would make it allocate without bound.

pygls reads a message body with ``stdin.read(content_length)``: a header such as
``Content-Length: 99999999999999999999`` made the server allocate (MemoryError) or overflow,
and die with a traceback. The framing cannot be trusted after such a header, so the server
says why on stderr and ends the session cleanly (the client sees the stream close).
"""

from __future__ import annotations

import logging
import re
from typing import BinaryIO

MAX_MESSAGE = 256 * 1024 * 1024  # far above any real document; an editor's file, not a disk
MAX_HEADER_LINE = 64 * 1024
_LENGTH = re.compile(rb"^Content-Length: (\d+)\r\n$")
logger = logging.getLogger(__name__)


class GuardedStdin:
    """``readline``/``read`` for pygls' reader, with the header limits checked first."""

    def __init__(self, stream: BinaryIO, limit: int = MAX_MESSAGE) -> None:
        self._stream = stream
        self._limit = limit
        self.rejected: str | None = None  # why the session was ended, if it was

    def readline(self) -> bytes:
        if self.rejected is not None:
            return b""
        line = self._stream.readline(MAX_HEADER_LINE + 1)
        if len(line) > MAX_HEADER_LINE:
            return self._reject(f"a header line longer than {MAX_HEADER_LINE} bytes")
        match = _LENGTH.match(line)
        # (digits counted first: int() refuses over 4300 digits, and that, too, killed it)
        if match is not None and (
            len(match.group(1)) > len(str(self._limit)) or int(match.group(1)) > self._limit
        ):
            digits = match.group(1).decode()
            shown = digits if len(digits) <= 20 else f"{digits[:20]}... ({len(digits)} digits)"
            return self._reject(f"Content-Length {shown} is above the limit of {self._limit} bytes")
        return line

    def read(self, n: int) -> bytes:
        if self.rejected is not None or n > self._limit:
            return b""
        return self._stream.read(n)

    def _reject(self, why: str) -> bytes:
        self.rejected = f"mpcheck server: {why}; the message is refused and the session ends"
        logger.error("%s", self.rejected)
        return b""
