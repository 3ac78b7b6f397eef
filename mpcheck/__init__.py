"""mpcheck: find mixed-precision (fp16/bf16) bugs in PyTorch code before they run."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mpcheck")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
