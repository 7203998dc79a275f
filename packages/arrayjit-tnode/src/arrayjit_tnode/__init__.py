"""arrayjit_tnode: precisions, host arrays, padding, tensor nodes and memory modes."""

from arrayjit_tnode import errors, from_array, memory_mode, precision
from arrayjit_tnode.__about__ import __version__
from arrayjit_tnode.errors import (
    ArrayjitError,
    BackendMissingError,
    CompileError,
    MemoryModeError,
    StreamError,
    UsageError,
)
from arrayjit_tnode.from_array import create_from_padded, create_with_reshape
from arrayjit_tnode.padding import Padding
from arrayjit_tnode.precision import Prec
from arrayjit_tnode.tnode import (
    Tnode,
    all_nodes,
    find,
    log_accessible_headers,
    print_accessible_headers,
    registered_nodes,
)

__all__ = [
    "ArrayjitError",
    "BackendMissingError",
    "CompileError",
    "MemoryModeError",
    "Padding",
    "Prec",
    "StreamError",
    "Tnode",
    "UsageError",
    "__version__",
    "all_nodes",
    "create_from_padded",
    "create_with_reshape",
    "errors",
    "find",
    "from_array",
    "log_accessible_headers",
    "memory_mode",
    "precision",
    "print_accessible_headers",
    "registered_nodes",
]
