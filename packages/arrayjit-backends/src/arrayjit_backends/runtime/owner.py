"""What the runtime's values need of the backend that owns them: the :class:`Owner` protocol.

Devices, streams, contexts and routines (:mod:`~arrayjit_backends.runtime.values`,
:mod:`~arrayjit_backends.runtime.routine`), the transfers and the argument checks reach their
backend only through this protocol, never through the concrete
:class:`~arrayjit_backends.backend.Backend` above them, so the runtime imports nothing of it.
The generic Backend satisfies it (mypy checks that wherever the Backend hands itself to a
value: ``Device(self, ...)``, ``Context(self, ...)``, ``check_context(self, ...)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from arrayjit_backends.impl.device import DeviceBackend


class Owner(Protocol):
    """The backend as its values see it."""

    @property
    def name(self) -> str:
        """The backend's name, for error messages and stream names."""
        ...

    @property
    def runtime(self) -> DeviceBackend:
        """The device backend that allocates, copies and launches."""
        ...

    copies: int
    """Host<->device and device<->device copies scheduled so far (the transfers count them)."""

    def check_live(self) -> None:
        """Raise :class:`~arrayjit_tnode.UsageError` once the backend is finalized."""
        ...


__all__ = ["Owner"]
