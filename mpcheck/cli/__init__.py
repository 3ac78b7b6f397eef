"""The ``mpcheck`` command line: arguments, ``check`` and the other subcommands, what it prints.

``mpcheck.cli:main`` is the console script's entry point (its name is public).
"""

from mpcheck.cli.app import main

__all__ = ["main"]
