"""``mpcheck server``: a Language Server publishing mpcheck's findings and fixes to editors."""

from mpcheck.server.app import create_server, serve

__all__ = ["create_server", "serve"]
