"""The arrayjit error hierarchy.

Every error arrayjit raises on purpose is an :class:`ArrayjitError`. The hierarchy lives in the
lowest package so that every layer raises the same types; ``arrayjit_backends`` re-exports it.

Messages say what was expected, what was found, and which node (label and id), backend, device
or stream was involved.
"""

from __future__ import annotations


class ArrayjitError(Exception):
    """Base class of every error arrayjit raises on purpose."""


class UsageError(ArrayjitError, ValueError):
    """The caller asked for something invalid: wrong device or context, a precision or shape
    mismatch, a bad ordinal, an unknown name, a read of a node that is not hosted, ..."""


class MemoryModeError(UsageError):
    """A memory-mode update contradicts an earlier decision about the same node.

    The message names the node and both provenances (who decided what).
    """


class BackendMissingError(ArrayjitError):
    """A backend whose driver library or hardware is absent was used.

    Attributes:
        backend: the backend's name.
        reason: why it is missing.
        install_hint: how to make it available.
    """

    def __init__(self, backend: str, reason: str, install_hint: str = "") -> None:
        self.backend = backend
        self.reason = reason
        self.install_hint = install_hint
        msg = f"backend {backend!r} is missing: {reason}"
        if install_hint:
            msg += f" (to install: {install_hint})"
        super().__init__(msg)


class CompileError(ArrayjitError):
    """Generated code failed to compile.

    Attributes:
        output: the compiler's output (or build log).
        source_path: where the generated source was kept, or ``None``.
    """

    def __init__(self, message: str, output: str = "", source_path: str | None = None) -> None:
        self.output = output
        self.source_path = source_path
        full = message
        if source_path:
            full += f"\nsource kept at: {source_path}"
        if output:
            full += f"\ncompiler output:\n{output}"
        super().__init__(full)


class StreamError(ArrayjitError):
    """A task failed on a stream; the original exception is the ``__cause__``.

    Attributes:
        stream: the stream's name.
    """

    def __init__(self, stream: str, message: str) -> None:
        self.stream = stream
        super().__init__(f"stream {stream}: {message}")


__all__ = [
    "ArrayjitError",
    "BackendMissingError",
    "CompileError",
    "MemoryModeError",
    "StreamError",
    "UsageError",
]
