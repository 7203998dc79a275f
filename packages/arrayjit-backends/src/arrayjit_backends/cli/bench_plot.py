"""The benchmark chart of ``arrayjit bench --plot FILE``: every benchmark group's ratio to numpy
per implementation, as horizontal bars on a log scale (1.0 = numpy's speed; right of it is
faster). matplotlib is an optional dependency (the ``plot`` extra of arrayjit-backends)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from arrayjit_backends.cli.bench_table import Row, ratios
from arrayjit_tnode import UsageError

FORMATS = (".svg", ".png", ".pdf")


def check_plot_path(path: Path) -> None:
    """Whether a chart can be written to ``path`` (checked before any work).

    Raises:
        UsageError: the suffix is not a known format, or matplotlib is not installed.
    """
    if path.suffix.lower() not in FORMATS:
        raise UsageError(f"--plot {path}: the file must end in one of {', '.join(FORMATS)}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError(
            "--plot needs matplotlib: pip install 'arrayjit-backends[plot]' (or pip install "
            "matplotlib)"
        ) from None


def write_plot(rows: Iterable[Row], path: Path) -> None:
    """Write the chart of :func:`~arrayjit_backends.cli.bench_table.ratios` to ``path`` (SVG, PNG
    or PDF, by its suffix).

    Raises:
        UsageError: matplotlib is not installed, the suffix is not a known format, or there is
            no group with a numpy baseline to chart.
    """
    check_plot_path(path)
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    data = ratios(rows)
    if not data:
        raise UsageError("no benchmark group has a numpy baseline to chart")
    impls = sorted({impl for group in data.values() for impl in group})
    groups = list(data)
    height = 0.8 / max(len(impls), 1)
    fig, ax = plt.subplots(figsize=(9, 0.5 + 0.35 * len(groups) * max(len(impls), 1) ** 0.5))
    for k, impl in enumerate(impls):
        ys = [g + k * height for g in range(len(groups)) if impl in data[groups[g]]]
        xs = [data[group][impl] for group in groups if impl in data[group]]
        ax.barh(ys, xs, height=height, label=impl)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yticks([g + 0.4 - height / 2 for g in range(len(groups))], groups)
    ax.invert_yaxis()
    ax.set_xlabel("speed relative to numpy (numpy time / implementation time; higher is faster)")
    ax.legend(fontsize="small", loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


__all__ = ["FORMATS", "write_plot"]
