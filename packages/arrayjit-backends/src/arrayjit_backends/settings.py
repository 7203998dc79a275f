"""Settings: arguments first, else ``ARRAYJIT_*`` environment variables, else defaults.

Every setting the project reads is declared here. An ``ARRAYJIT_*`` variable that names no
setting is a warning with the closest valid name (a typo such as ``ARRAYJIT_NO_CAHCE`` must not
pass silently, and a variable of a newer release must not break this one);
:func:`check_environment` warns and :func:`fresh_backend
<arrayjit_backends.registry.fresh_backend>` calls it.
"""

from __future__ import annotations

import difflib
import logging
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from arrayjit_tnode import UsageError


@dataclass(frozen=True)
class Setting:
    """One setting: its variable, what it does, and its default (as text)."""

    name: str
    help: str
    default: str = ""


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting("ARRAYJIT_BACKEND", "default backend name for fresh_backend(None)"),
        Setting("ARRAYJIT_BACKENDS", "backends the conformance suite tests (comma separated)"),
        Setting("ARRAYJIT_REQUIRE", "backends whose absence fails the conformance suite"),
        Setting(
            "ARRAYJIT_CACHE_DIR",
            "compile cache directory (default: the user cache folder, honouring "
            "XDG_CACHE_HOME, plus arrayjit)",
        ),
        Setting("ARRAYJIT_NO_CACHE", "1 disables the compile cache", "0"),
        Setting("ARRAYJIT_DEBUG_DIR", "write each compiled routine's IR and source here"),
        Setting(
            "ARRAYJIT_TRACE",
            "write a Chrome trace (JSON) of streams, kernels and transfers to this file at exit "
            "(arrayjit trace FILE summarizes it)",
        ),
        Setting("ARRAYJIT_REGEN_GOLDEN", "1 rewrites the IR golden files (tests)", "0"),
        Setting("ARRAYJIT_BENCH_QUICK", "1 runs only the smallest benchmark sizes", "0"),
        Setting(
            "ARRAYJIT_LOG_LEVEL",
            "level of the arrayjit_* loggers (DEBUG, INFO, WARNING, ERROR, CRITICAL or a "
            "number); unset: logging's own configuration decides",
        ),
        Setting(
            "ARRAYJIT_NUM_THREADS",
            "most threads one CPU kernel uses (a positive integer; unset: OMP_NUM_THREADS if "
            "set, else every core the process may run on; shared among a device's busy "
            "streams)",
        ),
        Setting(
            "ARRAYJIT_GPU_CELL_LANES",
            "work items per output cell of a long row reduction on the GPU backends (a power "
            "of two, capped by the group size; 0 or 1: one work item per cell; unset: 256 on "
            "GPUs, one work item per cell on CPU OpenCL devices such as PoCL)",
        ),
        Setting(
            "ARRAYJIT_FUZZ_EXAMPLES",
            "random programs per backend in the conformance suite (0: a fixed-seed few)",
            "0",
        ),
    )
}


def check_environment(environ: Mapping[str, str] | None = None) -> list[str]:
    """Warn (:class:`UserWarning`) about each ``ARRAYJIT_*`` variable that names no setting,
    with the closest valid name when there is one; returns the unknown names.

    A warning, not an error: a variable meant for a newer release must not break an older one
    (numba and CuPy ignore unknown names), while a typo such as ``ARRAYJIT_NO_CAHCE`` is still
    reported.
    """
    env = os.environ if environ is None else environ
    unknown = sorted(k for k in env if k.startswith("ARRAYJIT_") and k not in SETTINGS)
    for name in unknown:
        # Compared without the common prefix, which would make every name look close.
        suffixes = {k.removeprefix("ARRAYJIT_"): k for k in SETTINGS}
        close = difflib.get_close_matches(name.removeprefix("ARRAYJIT_"), suffixes, n=1)
        hint = f"; did you mean {suffixes[close[0]]}?" if close else ""
        warnings.warn(
            f"unknown setting {name} ignored{hint} (valid settings: {', '.join(sorted(SETTINGS))})",
            UserWarning,
            stacklevel=3,
        )
    return unknown


def get(name: str, argument: str | None = None) -> str:
    """The value of a setting: ``argument`` when given, else the environment, else the
    default.

    Raises:
        UsageError: ``name`` is not a setting.
    """
    if name not in SETTINGS:
        raise UsageError(f"unknown setting {name}; valid settings: {', '.join(sorted(SETTINGS))}")
    if argument is not None:
        return argument
    return os.environ.get(name, SETTINGS[name].default)


_YES = ("1", "true", "yes", "on")
_NO = ("", "0", "false", "no", "off")
_warned_flags: set[tuple[str, str]] = set()


def flag(name: str) -> bool:
    """A yes/no setting: ``1``, ``true``, ``yes`` or ``on`` mean yes (any case); ``0``,
    ``false``, ``no``, ``off`` or empty mean no. Any other value means no, with one warning
    per value (``ARRAYJIT_NO_CACHE=y`` must not silently keep the cache on)."""
    value = get(name).strip().lower()
    if value in _YES:
        return True
    if value not in _NO and (name, value) not in _warned_flags:
        _warned_flags.add((name, value))
        warnings.warn(
            f"{name}={value!r} is neither yes ({', '.join(_YES)}) nor no "
            f"({', '.join(v for v in _NO if v)}); taken as no",
            UserWarning,
            stacklevel=2,
        )
    return False


def debug_dir() -> Path | None:
    """Where compiled routines are written for reading, or None."""
    value = get("ARRAYJIT_DEBUG_DIR").strip()
    return Path(value) if value else None


def num_threads(argument: str | None = None) -> int:
    """The most threads one CPU kernel may use: ``ARRAYJIT_NUM_THREADS`` (or ``argument``),
    capped by the cores the process may run on. When it is unset or empty, OpenMP's own
    ``OMP_NUM_THREADS`` (its first entry, where it is a positive integer: what a launcher such
    as ``mpiexec`` or Slurm sets for one thread per rank) caps the cores instead.

    Raises:
        UsageError: ``ARRAYJIT_NUM_THREADS`` is not a positive integer.
    """
    cores = available_cores()
    value = get("ARRAYJIT_NUM_THREADS", argument).strip()
    if not value:
        omp = _omp_num_threads()
        return cores if omp is None else min(omp, cores)
    if not value.isdigit() or int(value) < 1:
        raise UsageError(f"ARRAYJIT_NUM_THREADS: {value!r} is not a positive integer")
    return min(int(value), cores)


def threads_chosen() -> bool:
    """Whether the user chose how many threads a CPU kernel uses, by one of the settings
    :func:`num_threads` honours (``ARRAYJIT_NUM_THREADS``, or a usable ``OMP_NUM_THREADS``)."""
    return bool(get("ARRAYJIT_NUM_THREADS").strip()) or _omp_num_threads() is not None


def _omp_num_threads() -> int | None:
    """``OMP_NUM_THREADS``'s first entry where it is a positive integer, else None."""
    omp = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(omp) if omp.isdigit() and int(omp) > 0 else None


def gpu_cell_lanes(default: int) -> int:
    """Work items per output cell of a long row reduction (``ARRAYJIT_GPU_CELL_LANES``, else
    the device's ``default``; see :mod:`arrayjit_backends.gpu.cell_reduction`).

    Raises:
        UsageError: the value is not a non-negative integer.
    """
    value = get("ARRAYJIT_GPU_CELL_LANES").strip()
    if not value:
        return default
    if not value.isdigit():
        raise UsageError(f"ARRAYJIT_GPU_CELL_LANES: {value!r} is not a non-negative integer")
    return int(value)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS reports it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


PACKAGE_LOGGERS = (
    "arrayjit_tnode",
    "arrayjit_ir",
    "arrayjit_backends",
    "arrayjit_backend_c",
    "arrayjit_backend_opencl",
    "arrayjit_backend_cuda",
    "arrayjit_distributed",
    "arrayjit_conformance",
)
"""The loggers :func:`configure_logging` sets: one per package, named like the import package
(each module logs to ``logging.getLogger(__name__)``, a child of its package's logger)."""

_LEVEL_NAMES = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(argument: str | int | None = None) -> int | None:
    """The level ``ARRAYJIT_LOG_LEVEL`` (or ``argument``) names: a standard level name (any
    case) or a non-negative number; ``None`` when unset or empty.

    Raises:
        UsageError: the value is neither; the message lists the valid names.
    """
    if isinstance(argument, int):
        value = str(argument)
    else:
        value = get("ARRAYJIT_LOG_LEVEL", argument).strip()
    if not value:
        return None
    if value.upper() in _LEVEL_NAMES:
        level = logging.getLevelName(value.upper())
        assert isinstance(level, int)
        return level
    if value.isdigit():
        return int(value)
    raise UsageError(
        f"ARRAYJIT_LOG_LEVEL: unknown level {value!r}; valid: {', '.join(_LEVEL_NAMES)} "
        f"or a non-negative number"
    )


def configure_logging(level: str | int | None = None) -> int | None:
    """Set the level of every package logger (:data:`PACKAGE_LOGGERS`) to ``level``, else to
    ``ARRAYJIT_LOG_LEVEL``; with neither, leave them alone. Returns the level set, or None.

    No handler is installed: a library leaves output to the application (``logging.basicConfig``
    or its own handlers; without any, Python prints only warnings and errors). The ``arrayjit``
    command installs one when ``ARRAYJIT_LOG_LEVEL`` is set.
    :func:`fresh_backend <arrayjit_backends.registry.fresh_backend>` calls this.

    Raises:
        UsageError: ``level`` is not a level (see :func:`log_level`).
    """
    resolved = log_level(level)
    if resolved is None:
        return None
    for name in PACKAGE_LOGGERS:
        logging.getLogger(name).setLevel(resolved)
    return resolved


def apply_environment() -> None:
    """What :func:`fresh_backend <arrayjit_backends.registry.fresh_backend>` does with the
    environment: :func:`check_environment`, then :func:`configure_logging`. An invalid
    ``ARRAYJIT_LOG_LEVEL`` is a warning (logging left as it was), not an error: a typo in a
    diagnostic setting must not stop the program."""
    check_environment()
    try:
        configure_logging()
    except UsageError as exc:
        warnings.warn(f"{exc}; logging levels left unchanged", UserWarning, stacklevel=3)


__all__ = [
    "PACKAGE_LOGGERS",
    "SETTINGS",
    "Setting",
    "apply_environment",
    "available_cores",
    "check_environment",
    "configure_logging",
    "debug_dir",
    "flag",
    "get",
    "log_level",
    "num_threads",
]
