"""The rules' side of the engine: the ``Rule`` API, its hooks, installed rule packages, and
which rules run where."""
