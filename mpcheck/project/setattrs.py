"""``setattr(self, "name", value)`` under a literal name, read from a file's bytes.

Python runs it as ``self.name = value`` (``nn.Module.__setattr__`` registers the same child,
parameter or buffer), so the byte readers that find ``self.name = ...`` bindings read it as
one (the libcst walk reads the same statement through :func:`names.literal_setattr`). A name
computed at run time (``setattr(self, f"x{i}", v)``) is no such binding.
"""

from __future__ import annotations

import re

__all__ = ["literal_setattrs"]

# A statement ``setattr(self.<attrs>, "name", `` at the start of a line; the value follows.
_SETATTR = re.compile(
    rb"(?m)^[ \t]+(?P<call>setattr)[ \t]*\([ \t]*(?P<holder>self(?:\.[A-Za-z_]\w*)*)[ \t]*,"
    rb"[ \t]*[rRuU]?(?P<quote>['\"])(?P<name>[A-Za-z_]\w*)(?P=quote)[ \t]*,[ \t]*"
)


def literal_setattrs(data: bytes, code: bytes, start: int, stop: int) -> list[tuple[bytes, int]]:
    """Each ``setattr(self..., "name", value)`` statement in ``data[start:stop]``: the target
    it assigns (``self.name``) and the offset where its value starts. ``code`` is ``data``
    blanked (the same offsets, strings and comments spaced out): a ``setattr`` in a string or a
    comment is no statement. A file that never says ``setattr`` costs one search."""
    if data.find(b"setattr", start, stop) < 0:
        return []
    out = []
    for found in _SETATTR.finditer(data, start, stop):
        if code.startswith(b"setattr", found.start("call")):
            out.append((found.group("holder") + b"." + found.group("name"), found.end()))
    return out
