"""mpcheck: find mixed-precision (fp16/bf16) bugs in PyTorch code before they run."""

# Kept here, not read from the installed metadata: importing importlib.metadata costs more
# than a one-file check's analysis. pyproject.toml reads it from this line.
__version__ = "0.1.0"
