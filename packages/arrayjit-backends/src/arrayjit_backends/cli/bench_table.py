"""The benchmark table: pytest-benchmark JSON (from ``tox -e bench``) as one line per
implementation and group, with its speed relative to numpy measured in the same run (higher is
faster), under a line naming the machine: CPU model, cores, and a memory bandwidth measured when
the table is printed (a copy of 64 MiB with numpy).

Groups that hold bandwidth-baseline rows (``extra_info["bandwidth_baseline"]``: the C
STREAM-style copy and triad the benchmarks run next to the fused kernels, and on a GPU a CuPy
device copy, on arrays of the same size, in the same run) add a column ``of bw``: each row's
GB/s as a fraction of the fastest baseline row of its group, i.e. of the streaming bandwidth
the machine reached in that run.

Groups that hold hand-written baseline rows (``extra_info["baseline_of"]`` naming a backend:
kernels written by hand in the backend's driver library, such as pyopencl kernels for
``opencl`` or CuPy for ``cuda``) add a column ``vs hand``: the backend's row's speed relative to
the fastest of its baselines in the group (``0.83x``: it takes 1.2 times as long), and each
baseline's own speed relative to that fastest one.

Groups with a numba row (``numba prange``: the CPU fused kernels' named baseline) add a column
``vs numba``: numba's time over each row's (higher is faster).

Groups with a jax row (an impl starting with ``jax``: ``jax.jit`` on the CPU, the whole
programs' compiled baseline) add a column ``vs jax``: jax's time over each row's (higher is
faster). In the compile-time groups (``compile time: L-layer MLP step``,
``conformance/benchmarks/test_bench_compile.py``) the jax row is ``jax.jit``'s compile of the same
step, so ``vs jax`` is jax's compile time over ours (0.25x: ours takes four times as long); in
``compile + first run: L-layer MLP step`` it is ``jax.jit``'s first call, waited for."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from arrayjit_tnode import UsageError

NO_RATIO_GROUPS = ("compile latency",)
"""Groups whose numpy row is not a baseline of the same work (numpy compiles nothing): their
rows show no ratio."""


@dataclass(frozen=True)
class Row:
    """One implementation in one group."""

    group: str
    impl: str
    median_s: float
    extra: dict[str, Any]

    def throughput(self) -> str:
        """GB/s for transfers, GFLOP/s for matmul, else empty."""
        if "bytes" in self.extra:
            return f"{self.extra['bytes'] / self.median_s / 1e9:8.2f} GB/s"
        if "flops" in self.extra:
            return f"{self.extra['flops'] / self.median_s / 1e9:8.2f} GFLOP/s"
        return ""


def load_data(path: Path) -> tuple[list[Row], dict[str, Any]]:
    """Rows of a pytest-benchmark JSON file, and its ``machine_info``.

    Raises:
        UsageError: the file is absent or is not pytest-benchmark output.
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UsageError(f"no benchmark results at {path}; run `tox -e bench` first") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    try:  # every malformed shape is the same user error, never a traceback
        data = json.loads(text)
        rows = []
        for b in data["benchmarks"]:
            extra = dict(b.get("extra_info") or {})
            impl = str(extra.pop("impl", b.get("name", "?")))
            group = str(b.get("group") or b["name"])
            rows.append(Row(group, impl, float(b["stats"]["median"]), extra))
        machine = dict(data.get("machine_info") or {})
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{path} is not pytest-benchmark JSON output: {exc!r}") from None
    return rows, machine


def load_rows(path: Path) -> list[Row]:
    """Rows of a pytest-benchmark JSON file (see :func:`load_data`)."""
    return load_data(path)[0]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def measured_bandwidth_gbs(nbytes: int = 64 << 20, repeat: int = 5) -> float:
    """Memory bandwidth in GB/s: bytes read plus bytes written by the fastest of ``repeat``
    numpy copies of ``nbytes``."""
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * nbytes / best / 1e9


def machine_line(machine_info: dict[str, Any] | None = None) -> str:
    """``machine: <CPU model>, <N> cores, <B> GB/s copy bandwidth``: the CPU as the benchmark
    run recorded it where it did (pytest-benchmark's ``machine_info``), else this machine's;
    the bandwidth is measured now, on this machine."""
    cpu = (machine_info or {}).get("cpu") or {}
    model = cpu.get("brand_raw") or _cpu_model()
    cores = cpu.get("count") or os.cpu_count() or "?"
    return f"machine: {model}, {cores} cores, {measured_bandwidth_gbs():.1f} GB/s copy bandwidth"


def _fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:8.2f} {unit}"
    return f"{seconds / 1e-9:8.1f} ns"


def _bandwidth(members: Iterable[Row]) -> float | None:
    """The fastest bandwidth-baseline row's bytes per second in a group, if it has one."""
    rates = [
        r.extra["bytes"] / r.median_s
        for r in members
        if r.extra.get("bandwidth_baseline") and "bytes" in r.extra
    ]
    return max(rates) if rates else None


def _by_group(rows: Iterable[Row]) -> dict[str, list[Row]]:
    """The rows of each benchmark group, in their order."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(r.group, []).append(r)
    return groups


def bandwidth_fractions(rows: Iterable[Row]) -> dict[str, dict[str, float]]:
    """Per group with a bandwidth baseline, each row's bytes per second as a fraction of the
    fastest baseline row of the group (1.0 = as fast as the plain C loop), as in the table."""
    groups = _by_group(rows)
    out: dict[str, dict[str, float]] = {}
    for group, members in sorted(groups.items()):
        bw = _bandwidth(members)
        if bw is not None:
            out[group] = {
                r.impl: r.extra["bytes"] / r.median_s / bw for r in members if "bytes" in r.extra
            }
    return out


def _hand_bases(members: Iterable[Row]) -> dict[str, float]:
    """Per backend with hand-written baseline rows in a group, the fastest one's median."""
    bases: dict[str, float] = {}
    for r in members:
        backend = r.extra.get("baseline_of")
        if isinstance(backend, str):
            bases[backend] = min(bases.get(backend, float("inf")), r.median_s)
    return bases


def _hand_ratio(r: Row, bases: dict[str, float]) -> float | None:
    """``r``'s speed relative to the fastest hand-written baseline of its backend (the one it
    is a baseline of, for a baseline row), if the group has one."""
    backend = r.extra.get("baseline_of", r.impl)
    base = bases.get(backend) if isinstance(backend, str) else None
    return base / r.median_s if base is not None else None


def hand_ratios(rows: Iterable[Row]) -> dict[str, dict[str, float]]:
    """Per group with hand-written baselines, the speed of each backend row (and each baseline
    row) relative to the fastest baseline of that backend in the group (baseline time / its
    time: 1.0 is as fast, 0.5 twice as slow), as in the table's ``vs hand`` column."""
    groups = _by_group(rows)
    out: dict[str, dict[str, float]] = {}
    for group, members in sorted(groups.items()):
        bases = _hand_bases(members)
        found = {r.impl: x for r in members if (x := _hand_ratio(r, bases)) is not None}
        if found:
            out[group] = found
    return out


def _numpy(group: str, members: Iterable[Row]) -> Row | None:
    """The group's numpy row, if it is a baseline there (compile-latency groups have none)."""
    if group.startswith(NO_RATIO_GROUPS):
        return None
    return next((r for r in members if r.impl == "numpy"), None)


def _numba(group: str, members: Iterable[Row]) -> Row | None:
    """The group's numba row, if it has one."""
    return next((r for r in members if r.impl.startswith("numba")), None)


def _jax(group: str, members: Iterable[Row]) -> Row | None:
    """The group's jax row (``jax.jit (cpu)``), if it has one."""
    return next((r for r in members if r.impl.startswith("jax")), None)


def _ratios_to(
    rows: Iterable[Row], baseline: Callable[[str, list[Row]], Row | None]
) -> dict[str, dict[str, float]]:
    """Per group with a ``baseline`` row, each other row's speed relative to it (its time /
    the row's)."""
    out: dict[str, dict[str, float]] = {}
    for group, members in sorted(_by_group(rows).items()):
        base = baseline(group, members)
        if base is not None:
            out[group] = {r.impl: base.median_s / r.median_s for r in members if r is not base}
    return out


def numba_ratios(rows: Iterable[Row]) -> dict[str, dict[str, float]]:
    """Per group with a numba row, each other row's speed relative to numba (numba time / its
    time), as in the table's ``vs numba`` column."""
    return _ratios_to(rows, _numba)


def jax_ratios(rows: Iterable[Row]) -> dict[str, dict[str, float]]:
    """Per group with a jax row, each other row's speed relative to jax (jax time / its time),
    as in the table's ``vs jax`` column."""
    return _ratios_to(rows, _jax)


def render(rows: Iterable[Row]) -> str:
    """The table: per group, each implementation's median time, throughput and speed relative
    to numpy in the same group (``2.50x`` = two and a half times as fast as numpy: higher is
    faster), where the group has a bandwidth baseline, the fraction of it (``of bw``), and
    where it has hand-written baselines, the speed relative to them (``vs hand``), and where it
    has a numba row, the speed relative to it (``vs numba``), and where it has a jax row, the
    speed relative to that (``vs jax``). Compile-latency groups show no ratio (numpy compiles
    nothing)."""
    groups = _by_group(rows)
    header = f"{'group / implementation':48} {'median':>11} {'throughput':>16}"
    lines = [
        f"{header} {'vs numpy':>9} {'of bw':>6} {'vs hand':>8} {'vs numba':>8} {'vs jax':>8}   "
        "(numpy time / ours: higher is faster; of bw: GB/s over the group's fastest bandwidth "
        "baseline: C STREAM loop or device copy; vs hand: the fastest hand-written kernel's "
        "time / ours; vs numba: numba's time / ours; vs jax: jax.jit's time / ours)"
    ]
    for group in sorted(groups):
        members = sorted(groups[group], key=lambda r: r.median_s)
        base = _numpy(group, members)
        bw = _bandwidth(members)
        bases = _hand_bases(members)
        numba = _numba(group, members)
        jax = _jax(group, members)
        lines.append(group)
        for r in members:
            ratio = f"{base.median_s / r.median_s:8.2f}x" if base else ""
            line = f"  {r.impl:46} {_fmt_time(r.median_s)} {r.throughput():>16} {ratio:>9}"
            if bw is not None:
                line += f" {r.extra['bytes'] / r.median_s / bw:5.0%}" if "bytes" in r.extra else ""
            if bases:
                hand = _hand_ratio(r, bases)
                line = f"{line:94}"  # under the header's column
                line += f" {hand:7.2f}x" if hand is not None else ""
            if numba is not None:
                line = f"{line:103}{numba.median_s / r.median_s:8.2f}x"
            if jax is not None:
                line = f"{line:112}{jax.median_s / r.median_s:8.2f}x"
            lines.append(line.rstrip())
    return "\n".join(lines)


def ratios(rows: Iterable[Row]) -> dict[str, dict[str, float]]:
    """Per group with a numpy baseline, each other implementation's speed relative to numpy
    (numpy time / its time), as in the table."""
    return _ratios_to(rows, _numpy)


__all__ = [
    "Row",
    "bandwidth_fractions",
    "hand_ratios",
    "jax_ratios",
    "load_data",
    "load_rows",
    "machine_line",
    "numba_ratios",
    "ratios",
    "render",
]
