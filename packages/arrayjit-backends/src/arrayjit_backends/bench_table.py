"""The benchmark table: pytest-benchmark JSON (from ``tox -e bench``) as one line per
implementation and group, with its ratio to numpy measured in the same run."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arrayjit_tnode import UsageError


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


def load_rows(path: Path) -> list[Row]:
    """Rows of a pytest-benchmark JSON file.

    Raises:
        UsageError: the file is absent or is not pytest-benchmark output.
    """
    try:
        data = json.loads(path.read_text())
        benches = data["benchmarks"]
    except FileNotFoundError:
        raise UsageError(f"no benchmark results at {path}; run `tox -e bench` first") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path} is not pytest-benchmark JSON output: {exc!r}") from None
    rows = []
    for b in benches:
        extra = dict(b.get("extra_info") or {})
        impl = str(extra.pop("impl", b.get("name", "?")))
        rows.append(Row(str(b.get("group") or b["name"]), impl, float(b["stats"]["median"]), extra))
    return rows


def _fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:8.2f} {unit}"
    return f"{seconds / 1e-9:8.1f} ns"


def render(rows: Iterable[Row]) -> str:
    """The table: per group, each implementation's median time, throughput and speed relative
    to numpy in the same group (``2.50x`` = two and a half times as fast as numpy)."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(r.group, []).append(r)
    lines = [f"{'group / implementation':48} {'median':>11} {'throughput':>16} {'vs numpy':>9}"]
    for group in sorted(groups):
        members = sorted(groups[group], key=lambda r: r.median_s)
        base = next((r for r in members if r.impl == "numpy"), None)
        lines.append(group)
        for r in members:
            ratio = f"{base.median_s / r.median_s:8.2f}x" if base else ""
            lines.append(f"  {r.impl:46} {_fmt_time(r.median_s)} {r.throughput():>16} {ratio:>9}")
    return "\n".join(lines)


__all__ = ["Row", "load_rows", "render"]
