"""arrayjit_tnode: precisions, host arrays, tensor nodes and memory modes."""

from arrayjit_tnode import errors, precision
from arrayjit_tnode.__about__ import __version__
from arrayjit_tnode.errors import (
    ArrayjitError,
    BackendMissingError,
    CompileError,
    MemoryModeError,
    StreamError,
    UsageError,
)
from arrayjit_tnode.precision import Prec

__all__ = [
    "ArrayjitError",
    "BackendMissingError",
    "CompileError",
    "MemoryModeError",
    "Prec",
    "StreamError",
    "UsageError",
    "__version__",
    "errors",
    "precision",
]
