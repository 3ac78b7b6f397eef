"""Names a file gets from ``from module import *`` of a project module.

The import table is read from the file's own import statements, which for a star import say
nothing of what it binds; the exporting module's summary does (:mod:`mpcheck.project.exports`).
Before the walk, each star import of the file is asked of the project, so ``torch.zeros`` in a
script that has ``torch`` only through ``from utils.utils import *`` resolves to torch's, and
``Darknet`` of ``from models import *`` to the class that ``models.py`` summarises. Asking
makes the file depend on the exporting summaries, so a change to what they export re-checks it.
"""

from __future__ import annotations

import libcst as cst

from mpcheck.project.exports import exported
from mpcheck.project.names import ImportTable
from mpcheck.project.summary import Exports, ProjectLookup

__all__ = ["bind_starred"]


def bind_starred(imports: ImportTable, module: cst.Module, project: ProjectLookup) -> None:
    """Add to ``imports`` what the file's star imports of project modules bind (a library's,
    ``from torch import *``, is not followed). The later star import wins a name, as at run
    time; the file's own imports and module-level bindings win over all of them."""
    if not imports.stars:
        return
    own = set(exported(module)[0])
    for name, level in reversed(imports.stars):
        found = project(f"{name}.*" if name else "*", level)
        if isinstance(found, Exports):
            imports.add_starred(name, level, found.names, own)
