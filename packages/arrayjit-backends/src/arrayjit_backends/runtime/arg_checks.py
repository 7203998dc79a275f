"""The argument checks of the Backend's entry points.

Each check raises :class:`UsageError` naming the call, the argument and the backend *before*
anything is scheduled, so a wrong argument never reaches a stream: a stream that received a bad
event or a non-callable task would otherwise fail and refuse all later work, although nothing
the user queued went wrong. The backend is taken as an
:class:`~arrayjit_backends.runtime.owner.Owner` (its name, and whether it is live).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from arrayjit_backends.impl.stream_queue import Event
from arrayjit_backends.runtime.transfers import MergeMode
from arrayjit_backends.runtime.values import Context, Device, Stream
from arrayjit_tnode import Tnode, UsageError

if TYPE_CHECKING:
    from arrayjit_backends.runtime.owner import Owner


def _got(value: Any) -> str:
    return f"got {value!r} ({type(value).__name__})"


def check_device(backend: Owner, device: Any, what: str = "", *, live: bool = True) -> None:
    """``device`` is a :class:`Device` of ``backend``; with ``live``, the backend must not be
    finalized."""
    if live:
        backend.check_live()
    if not isinstance(device, Device) or device.backend is not backend:
        prefix = f"{what}: " if what else ""
        if not isinstance(device, Device):
            raise UsageError(f"{prefix}expected a Device of backend {backend.name}, {_got(device)}")
        raise UsageError(f"{prefix}device {device!r} does not belong to backend {backend.name}")


def check_stream(backend: Owner, stream: Any, what: str, *, live: bool = True) -> None:
    """``stream`` is a :class:`Stream` of ``backend``; with ``live``, the backend must not be
    finalized (queries such as ``is_idle`` pass ``live=False``)."""
    if not isinstance(stream, Stream):
        raise UsageError(f"{what}: expected a Stream of backend {backend.name}, {_got(stream)}")
    if stream.device.backend is not backend:
        raise UsageError(
            f"{what}: stream {stream.name} belongs to backend {stream.device.backend.name}, "
            f"not to this {backend.name} backend"
        )
    if live:  # (a stream's device is a Device of the stream's backend)
        backend.check_live()


def check_context(backend: Owner, ctx: Any, what: str) -> None:
    """``ctx`` is a :class:`Context` of ``backend`` (and the backend is live)."""
    backend.check_live()
    if not isinstance(ctx, Context):
        raise UsageError(f"{what}: expected a Context of backend {backend.name}, {_got(ctx)}")
    if ctx.backend is not backend:
        raise UsageError(
            f"{what}: the context belongs to backend {ctx.backend.name} "
            f"(stream {ctx.stream.name}), not to this {backend.name} backend"
        )


def check_event(backend: Owner, event: Any, what: str) -> None:
    """``event`` is an :class:`Event` (of any backend: waits across backends are allowed)."""
    if not isinstance(event, Event):
        raise UsageError(
            f"{what}: expected an Event (from all_work or schedule_task), {_got(event)} "
            f"(backend {backend.name})"
        )


def check_node(backend: Owner, tn: Any, what: str) -> None:
    """``tn`` is a :class:`Tnode`."""
    if not isinstance(tn, Tnode):
        raise UsageError(f"{what}: expected a Tnode, {_got(tn)} (backend {backend.name})")


def check_mode(backend: Owner, mode: Any, what: str) -> None:
    """``mode`` is a :class:`MergeMode` (a string such as ``"Copy"`` is refused: it would
    otherwise be taken for another mode)."""
    if not isinstance(mode, MergeMode):
        valid = ", ".join(f"MergeMode.{m.name}" for m in MergeMode)
        raise UsageError(
            f"{what}: into_merge_buffer must be one of {valid}, {_got(mode)} "
            f"(backend {backend.name})"
        )


def check_task(backend: Owner, ctx: Context, task: Any, what: str) -> None:
    """``task`` can be called with no arguments."""
    if not callable(task):
        raise UsageError(
            f"{what}: the task must be callable with no arguments, {_got(task)} "
            f"(stream {ctx.stream.name}, backend {backend.name})"
        )


__all__ = [
    "check_context",
    "check_device",
    "check_event",
    "check_mode",
    "check_node",
    "check_stream",
    "check_task",
]
