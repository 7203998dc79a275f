"""``arrayjit trace FILE``: the summary of a Chrome trace that ``ARRAYJIT_TRACE`` or
``arrayjit_backends.trace(...)`` wrote (:mod:`arrayjit_backends.runtime.trace`): time per
routine, compiles and links, transfers with their bytes, and the cross-stream waits."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from arrayjit_tnode import UsageError


def load(path: str) -> list[dict[str, Any]]:
    """The events of a trace file.

    Raises:
        UsageError: the file cannot be read or is not a trace (JSON with ``traceEvents``).
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"trace: cannot read {path}: {exc}") from exc
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise UsageError(f"trace: {path} is not a Chrome trace (no list of traceEvents)")
    return events


def summary(events: list[dict[str, Any]]) -> str:
    """The summary table of ``events`` (times in milliseconds)."""
    tracks = {
        (e.get("pid"), e.get("tid")): e.get("args", {}).get("name", "?")
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    rows: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0])
    for e in events:
        if e.get("ph") != "X":
            continue
        cat, args = str(e.get("cat", "")), e.get("args", {})
        if cat == "transfer":
            key = (cat, str(e.get("name", "")).split(" ")[0])
        elif cat == "routine":
            key = (cat, str(args.get("routine", e.get("name", ""))))
        else:
            key = (cat, str(e.get("name", "")))
        row = rows[key]
        row[0] += 1
        row[1] += float(e.get("dur", 0.0))
        row[2] += int(args.get("bytes", 0))
    lines = [
        f"{'kind':<10} {'name':<32} {'count':>6} {'total ms':>10} {'mean ms':>9} {'bytes':>12}"
    ]
    for (cat, name), (count, total, nbytes) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        size = str(int(nbytes)) if cat == "transfer" else ""
        lines.append(
            f"{cat:<10} {name[:32]:<32} {int(count):>6} {total / 1000:>10.3f} "
            f"{total / 1000 / count:>9.3f} {size:>12}"
        )
    starts = {e.get("id"): e for e in events if e.get("ph") == "s"}
    waits: dict[tuple[str, str], int] = defaultdict(int)
    for e in events:
        if e.get("ph") == "f" and e.get("id") in starts:
            s = starts[e.get("id")]
            src = tracks.get((s.get("pid"), s.get("tid")), "?")
            dst = tracks.get((e.get("pid"), e.get("tid")), "?")
            waits[src, dst] += 1
    lines.append("")
    if waits:
        lines.append("cross-stream waits (the waiting stream's next task after the other's work):")
        for (src, dst), count in sorted(waits.items()):
            lines.append(f"  {dst} waited for {src}: {count}")
    else:
        lines.append("cross-stream waits: none")
    return "\n".join(lines)


__all__ = ["load", "summary"]
