"""The timeline picture of ``arrayjit trace FILE --plot PICTURE``: one horizontal lane per
track of the trace (a stream, or a host thread for compiles and links), each complete event a
bar coloured by its kind (routine runs, transfers, compiles, links, tasks), and an arrow per
cross-stream wait (a flow: from the end of the writer's task to the start of the waiting
stream's next one). matplotlib is an optional dependency (the ``plot`` extra of
arrayjit-backends)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from arrayjit_backends.cli.bench_plot import FORMATS, check_plot_path
from arrayjit_tnode import UsageError

COLOURS = {
    "routine": "tab:blue",
    "transfer": "tab:orange",
    "compile": "tab:green",
    "link": "tab:purple",
    "task": "tab:gray",
}
"""The colour of each event category; another category is drawn in :data:`OTHER`."""
OTHER = "tab:olive"


def _lanes(events: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """The tracks with a complete event, streams first (by name), then the host threads."""
    processes = {
        e.get("pid"): str(e.get("args", {}).get("name", "?"))
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    used = {(e.get("pid"), e.get("tid")) for e in events if e.get("ph") == "X"}
    return sorted(
        used,
        key=lambda track: (processes.get(track[0]) == "host", str(track[0]), str(track[1])),
    )


def _label(events: list[dict[str, Any]], track: tuple[Any, Any]) -> str:
    names = {
        (e.get("pid"), e.get("tid") if e.get("name") == "thread_name" else None): str(
            e.get("args", {}).get("name", "?")
        )
        for e in events
        if e.get("ph") == "M"
    }
    process = names.get((track[0], None), str(track[0]))
    thread = names.get(track, str(track[1]))
    return f"host: {thread}" if process == "host" else thread


def write_plot(events: list[dict[str, Any]], path: Path) -> None:
    """Write the timeline of ``events`` (a trace's, as
    :func:`~arrayjit_backends.cli.trace_table.load` reads them) to ``path`` (SVG, PNG or PDF,
    by its suffix); times in milliseconds from the trace's first event.

    Raises:
        UsageError: matplotlib is not installed, the suffix is not a known format, or the
            trace has no complete event to draw.
    """
    check_plot_path(path)
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    slices = [e for e in events if e.get("ph") == "X"]
    if not slices:
        raise UsageError("trace: no complete event (routine run, transfer, compile) to draw")
    lanes = _lanes(events)
    row = {track: k for k, track in enumerate(lanes)}
    t0 = min(float(e.get("ts", 0.0)) for e in slices)
    t1 = max(float(e.get("ts", 0.0)) + float(e.get("dur", 0.0)) for e in slices)
    span = max(t1 - t0, 1e-3) / 1000.0
    fig, ax = plt.subplots(figsize=(9, 1.0 + 0.45 * len(lanes)))
    seen: dict[str, str] = {}
    for e in slices:
        cat = str(e.get("cat", ""))
        colour = seen.setdefault(cat, COLOURS.get(cat, OTHER))
        start = (float(e.get("ts", 0.0)) - t0) / 1000.0
        width = float(e.get("dur", 0.0)) / 1000.0
        y = row[e.get("pid"), e.get("tid")]
        # A minimum width: a microsecond task still shows at the scale of a whole run.
        ax.broken_barh(
            [(start, max(width, span / 1500))], (y - 0.35, 0.7), facecolors=colour, linewidth=0
        )
        if width > span / 8:
            name = str(e.get("name", ""))
            ax.text(start + width / 2, y, name[:40], ha="center", va="center", fontsize=6.5)
    starts = {e.get("id"): e for e in events if e.get("ph") == "s"}
    for f in events:
        s = starts.get(f.get("id")) if f.get("ph") == "f" else None
        if s is None or (s.get("pid"), s.get("tid")) not in row:
            continue
        if (f.get("pid"), f.get("tid")) not in row:
            continue
        ax.annotate(
            "",
            xy=((float(f.get("ts", 0.0)) - t0) / 1000.0, row[f.get("pid"), f.get("tid")]),
            xytext=((float(s.get("ts", 0.0)) - t0) / 1000.0, row[s.get("pid"), s.get("tid")]),
            arrowprops={"arrowstyle": "->", "color": "crimson", "linewidth": 0.9},
        )
    order = list(COLOURS)
    kinds = sorted(seen, key=lambda cat: (order.index(cat) if cat in order else len(order), cat))
    handles = [Patch(color=seen[cat], label=cat or "other") for cat in kinds]
    if any(e.get("ph") == "f" for e in events):
        handles.append(Patch(color="crimson", label="cross-stream wait"))
    ax.set_yticks(range(len(lanes)), [_label(events, track) for track in lanes], fontsize=8)
    ax.set_ylim(len(lanes) - 0.5, -0.5)  # the first lane on top
    ax.set_xlim(-span * 0.01, span * 1.01)
    ax.set_xlabel("time (ms)")
    ax.grid(axis="x", linewidth=0.3)
    ax.legend(
        handles=handles,
        fontsize="small",
        loc="lower left",
        bbox_to_anchor=(0.0, 1.0),
        ncol=len(handles),
        frameon=False,
    )
    fig.savefig(path, dpi=100, bbox_inches="tight")  # the legend above the axes included
    plt.close(fig)


__all__ = ["COLOURS", "FORMATS", "check_plot_path", "write_plot"]
