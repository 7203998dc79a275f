"""The backend registry: discovery through the ``arrayjit.backends`` entry points, selection
by name, and the reasons unavailable backends give.

Each entry point names a :class:`BackendEntry`. CPU compilers declare scheduler prefixes, so the
entry ``cc`` provides ``sync_cc`` and ``multicore_cc`` (and ``cc``, meaning its default,
``multicore_cc``). The registry (this module's ``_REGISTRY``) is the only global state here.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from arrayjit_tnode import UsageError

if TYPE_CHECKING:
    from arrayjit_backends.backend import Backend
    from arrayjit_backends.backend_intf import BackendInterface
    from arrayjit_backends.impl.cpu_compiler import CpuCompiler
    from arrayjit_backends.impl.device import DeviceBackend

logger = logging.getLogger(__name__)


def _usable() -> str | None:
    return None


@dataclass(frozen=True)
class BackendEntry:
    """A registered backend."""

    name: str
    factory: Callable[[str], BackendInterface]
    """Full name (e.g. ``"multicore_cc"``) -> a fresh Backend (or a MissingBackend)."""
    scheduler_prefixes: tuple[str, ...] = ()
    """For CPU compilers: ``("multicore", "sync")``; the first is the default."""
    priority: int = 0
    """The default backend is the available one with the highest priority."""
    probe: Callable[[], str | None] = field(default=_usable)
    """``None`` if usable, else the reason it is not."""
    install_hint: str = ""
    description: str = ""

    def full_names(self) -> list[str]:
        """Every name this entry answers to."""
        if not self.scheduler_prefixes:
            return [self.name]
        return [f"{p}_{self.name}" for p in self.scheduler_prefixes] + [self.name]


def make_cpu_backend(full_name: str, scheduler_prefix: str, compiler: CpuCompiler) -> Backend:
    """The Backend of a CPU compiler under a scheduler (``"sync"`` or ``"multicore"``)."""
    from arrayjit_backends.backend import Backend
    from arrayjit_backends.runtime.cpu_devices import CpuDevices

    return Backend(CpuDevices(full_name, scheduler_prefix, compiler))


def no_device_entry(
    name: str,
    make: Callable[[], CpuCompiler],
    *,
    priority: int = 0,
    probe: Callable[[], str | None] = _usable,
    install_hint: str = "",
    description: str = "",
) -> BackendEntry:
    """The entry of a CPU compiler: its Backend runs under the ``multicore_`` (default) or
    ``sync_`` scheduler."""

    def factory(full: str) -> Backend:
        prefix = full.split("_", 1)[0] if "_" in full else "multicore"
        if full == name:
            full = f"multicore_{name}"
        return make_cpu_backend(full, prefix, make())

    return BackendEntry(
        name, factory, ("multicore", "sync"), priority, probe, install_hint, description
    )


def device_entry(
    name: str,
    make: Callable[[], DeviceBackend],
    *,
    priority: int = 0,
    probe: Callable[[], str | None] = _usable,
    install_hint: str = "",
    description: str = "",
) -> BackendEntry:
    """The entry of a device backend (OpenCL, CUDA): one name, no scheduler prefix."""

    def factory(full: str) -> Backend:
        from arrayjit_backends.backend import Backend

        return Backend(make())

    return BackendEntry(name, factory, (), priority, probe, install_hint, description)


_REGISTRY: dict[str, BackendEntry] = {}
_LOADED = False
_LOCK = threading.Lock()


@dataclass(frozen=True)
class _BrokenEntry:
    reason: str


def _load() -> None:
    global _LOADED
    with _LOCK:
        if _LOADED:
            return
        for ep in entry_points(group="arrayjit.backends"):
            if ep.name in _REGISTRY:
                continue
            try:
                entry = ep.load()
                if not isinstance(entry, BackendEntry):
                    raise TypeError(f"{ep.value} is not a BackendEntry")
            except Exception as exc:
                logger.warning("backend entry point %s failed to load: %r", ep.name, exc)
                reason = f"its entry point {ep.value} failed to load: {exc!r}"
                entry = BackendEntry(
                    ep.name, _missing_factory(ep.name, reason), probe=_fixed_reason(reason)
                )
            _REGISTRY[ep.name] = entry
        _LOADED = True


def _fixed_reason(reason: str) -> Callable[[], str | None]:
    return lambda: reason


def _missing_factory(name: str, reason: str, hint: str = "") -> Callable[[str], BackendInterface]:
    def factory(full: str) -> BackendInterface:
        from arrayjit_backends.missing import MissingBackend

        return MissingBackend(full, reason, hint)

    return factory


def register(entry: BackendEntry) -> None:
    """Add (or replace) a backend entry: for tests and for backends not installed as packages."""
    _load()
    with _LOCK:
        _REGISTRY[entry.name] = entry


def unregister(name: str) -> None:
    """Remove a backend entry (no error if absent)."""
    _load()
    with _LOCK:
        _REGISTRY.pop(name, None)


def entries() -> list[BackendEntry]:
    """Every registered entry, by decreasing priority then name."""
    _load()
    return sorted(_REGISTRY.values(), key=lambda e: (-e.priority, e.name))


def backend_names() -> list[str]:
    """Every full backend name (with scheduler prefixes)."""
    return [n for e in entries() for n in e.full_names()]


def resolve_name(name: str) -> BackendEntry:
    """The entry a full name belongs to.

    Raises:
        UsageError: unknown name; the message lists the valid ones.
    """
    key = name.strip().lower()
    for e in entries():
        if key in e.full_names():
            return e
    raise UsageError(unknown_name_message(name))


def unknown_name_message(name: str) -> str:
    """The message for a backend name that is not registered: the valid names, and the
    install command where ``name`` is a first-party backend whose package is not installed."""
    from arrayjit_backends.first_party import providing

    message = f"unknown backend {name!r}; valid names: {', '.join(backend_names())}"
    fp = providing(name)
    if fp is not None:
        message += (
            f"; {name} is provided by {fp.distribution}, which is not installed: {fp.install}"
        )
    return message


def default_backend_name() -> str:
    """$ARRAYJIT_BACKEND, else the available backend with the highest priority."""
    from arrayjit_backends import settings

    env = settings.get("ARRAYJIT_BACKEND").strip()
    if env:
        resolve_name(env)
        return env.lower()
    reasons: list[str] = []
    for e in entries():
        reason = e.probe()
        if reason is None:
            if e.name == "interp":
                _note_interpreter_fallback("; ".join(reasons) or "none is installed")
            return e.full_names()[0]
        reasons.append(f"{e.name}: {reason}")
    raise UsageError("no arrayjit backend is available; install arrayjit-backend-c")


@functools.cache
def _note_interpreter_fallback(reasons: str) -> None:
    # Once per process and reason: the default silently being 1000x slower would mislead.
    logger.warning(
        "no compiler backend is usable here (%s); the default backend is the reference "
        "interpreter, which is exact but slow",
        reasons,
    )


def fresh_backend(name: str | None = None) -> BackendInterface:
    """A new backend instance by name (``None``: the default); a missing backend gives a
    :class:`~arrayjit_backends.missing.MissingBackend` that explains itself.

    Raises:
        UsageError: a name that is not a string, an empty or unknown name, or an unknown
            ``ARRAYJIT_*`` setting in the environment; the message lists the valid ones.
    """
    from arrayjit_backends import settings
    from arrayjit_backends.runtime import trace

    settings.apply_environment()  # unknown ARRAYJIT_* names warn; ARRAYJIT_LOG_LEVEL applies
    trace.start_from_environment()  # ARRAYJIT_TRACE: a trace of the process, written at exit
    if name is not None and not isinstance(name, str):
        raise UsageError(
            f"fresh_backend: name must be a string or None, got {name!r} ({type(name).__name__}); "
            f"valid names: {', '.join(backend_names())}"
        )
    if name is not None and not name.strip():
        raise UsageError(
            f"fresh_backend: empty backend name {name!r} (None picks the default); valid names: "
            f"{', '.join(backend_names())}"
        )
    full = (name or default_backend_name()).strip().lower()
    entry = resolve_name(full)
    reason = entry.probe()
    if reason is not None:
        from arrayjit_backends.missing import MissingBackend

        return MissingBackend(full, reason, entry.install_hint)
    return entry.factory(full)


@dataclass(frozen=True)
class BackendStatus:
    """One line of :func:`available_backends`."""

    name: str
    available: bool
    reason: str
    install_hint: str
    description: str


def available_backends() -> list[BackendStatus]:
    """Every registered backend name, whether it is available, and why not."""
    out = []
    for e in entries():
        reason = e.probe()
        for n in e.full_names():
            out.append(
                BackendStatus(n, reason is None, reason or "", e.install_hint, e.description)
            )
    return out
