"""A stand-in for the sglang package: the same module layout and process layout (a launcher that spawns
one scheduler per TP rank and a detokenizer with multiprocessing "spawn"), no GPU, no dependencies."""
from sglang_standin.version import __version__  # noqa: F401
