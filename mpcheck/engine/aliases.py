"""Functions called through a local name: ``attn_fn = a if cfg.split else b; attn_fn(x, w)``.

Python binds the name to the function object, so the call is a call of that function; when a
conditional chooses between functions, it is a call of one of them on each path, and what it
returns is the join of what each returns. Only a name every binding in the function binds to
a plain function name (or a conditional between such names) is followed: a name bound any
other way, or a parameter, may be any callable.
"""

from __future__ import annotations

import libcst as cst

from mpcheck.engine.body_uses import body_uses


def function_aliases(function: cst.FunctionDef) -> dict[str, tuple[cst.Name, ...]]:
    """The local names of ``function`` bound only to function names, and those names
    (assignments in nested functions and classes are theirs). The walk is shared with
    :mod:`tensor_use` (:mod:`body_uses`); a walk of the file asks its ``Definitions``."""
    return body_uses(function).aliases
