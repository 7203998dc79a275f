"""The ``arrayjit`` command.

- ``arrayjit backends``: each registered backend, available or why not, devices, streams; then
  the first-party backends that are not installed, each with its install command.
- ``arrayjit demo [--backend B] [--size N] [--steps K]``: an end-to-end check against numpy.
  With ``--distributed`` (run under ``mpiexec -n P``), the data-parallel demo of
  ``arrayjit-distributed``: every rank trains on its shard, gradients all-reduced. The command
  finds it through the entry-point group ``arrayjit.commands`` (:data:`COMMANDS_GROUP`), not
  an import: arrayjit-distributed sits above this package.
- ``arrayjit show FILE.py``: the optimized IR of the computations a file defines: every
  module-level value that is an assignment or a computation, in definition order.
- ``arrayjit bench [--from-json FILE] [--plot FILE]``: the benchmark table of a
  ``tox -e bench`` run, each implementation's ratio to numpy in the same run, and where the run
  measured it (the C STREAM baseline rows), its fraction of the streaming bandwidth.
- ``arrayjit cache info|clear``: where the compile cache is, its entries and size; emptying it.
- ``arrayjit trace FILE [--plot FILE]``: the summary of a trace (``ARRAYJIT_TRACE``): time
  per routine, compiles and links, transfers and their bytes, cross-stream waits; with
  ``--plot``, a timeline picture of it (a lane per stream).

User errors (an unknown backend, a missing file, a bad number) are one line on stderr and exit
status 2, never a traceback. A compile that takes longer than a second prints what it is doing
on stderr; that notice belongs to the command only, library calls stay silent. With
``ARRAYJIT_LOG_LEVEL`` set, the command prints the arrayjit loggers' records on stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import runpy
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from arrayjit_backends import settings
from arrayjit_backends.registry import available_backends, entries, fresh_backend
from arrayjit_ir import lower, optimize, pretty
from arrayjit_ir.assignments import Accum_op, Block, Comp, Fetch, static_symbols
from arrayjit_tnode import ArrayjitError, UsageError

DESCRIPTION = "arrayjit: a Python array compiler. Inspect backends, run checks and benchmarks."
EPILOG = """examples:
  arrayjit backends                  every backend: available or why not, and what to install
  arrayjit demo --backend sync_llvm  the end-to-end check on one backend
  mpiexec -n 2 arrayjit demo --distributed   data-parallel training over two MPI ranks
  arrayjit bench --plot bench.svg    the table of `tox -e bench`, and a chart of it
  arrayjit cache info                where the compile cache is and how big
  ARRAYJIT_TRACE=run.json python prog.py && arrayjit trace run.json   a trace and its summary
  arrayjit trace run.json --plot run.png   the summary and a timeline picture of the trace
"""

SLOW_COMPILE_S = 1.0
"""A compile running longer than this gets a notice on stderr (PoCL builds take seconds)."""

DISTRIBUTIONS = (
    "arrayjit-tnode",
    "arrayjit-ir",
    "arrayjit-backends",
    "arrayjit-backend-c",
    "arrayjit-backend-opencl",
    "arrayjit-backend-cuda",
    "arrayjit-distributed",
    "arrayjit-conformance",
)


def version_text() -> str:
    """``arrayjit X.Y.Z`` and the version of every installed arrayjit distribution."""
    from importlib.metadata import PackageNotFoundError, version

    from arrayjit_backends.__about__ import __version__

    found = []
    for dist in DISTRIBUTIONS:
        try:
            found.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            continue
    return f"arrayjit {__version__} ({', '.join(found)})"


def _backends() -> int:
    from arrayjit_backends.first_party import not_installed

    for status in available_backends():
        if not status.available:
            hint = f" (install: {status.install_hint})" if status.install_hint else ""
            print(f"{status.name:20} unavailable: {status.reason}{hint}")
            continue
        be = fresh_backend(status.name)
        dev = be.get_device(0)
        print(
            f"{status.name:20} available: {be.num_devices()} device(s), "
            f"{be.suggested_num_streams(dev)} suggested stream(s); {status.description}"
        )
        be.finalize()
    missing = not_installed({e.name for e in entries()})
    if missing:
        print("\nnot installed:")
        for fp in missing:
            print(f"{', '.join(fp.full_names):30} {fp.install}")
    return 0


def _announce_slow_compiles(be: Any, out: Any = None) -> None:
    """Make ``be.compile`` print a line on stderr when a compile runs past
    :data:`SLOW_COMPILE_S` (for this command's backend instance only)."""
    stream = out if out is not None else sys.stderr
    original: Callable[..., Any] = be.compile

    def compile_with_notice(*args: Any, **kwargs: Any) -> Any:
        name = kwargs.get("name", "routine")
        timer = threading.Timer(
            SLOW_COMPILE_S,
            lambda: print(
                f"arrayjit: compiling {name} for {be.name} (first compile of this code; "
                "cached for later runs)...",
                file=stream,
                flush=True,
            ),
        )
        timer.daemon = True
        timer.start()
        try:
            return original(*args, **kwargs)
        finally:
            timer.cancel()

    be.compile = compile_with_notice


def _demo(name: str | None, size: int | None, steps: int, distributed: bool) -> int:
    if distributed:
        return _distributed_demo(name, steps)
    from arrayjit_backends.cli.demo import run_demo

    be = fresh_backend(name)
    be.initialize()
    _announce_slow_compiles(be)
    n = size if size is not None else (1 << 12 if "interp" in be.name else 1 << 20)
    try:
        ok = run_demo(be, sys.stdout, n=n, steps=steps)
    finally:
        be.finalize()
    return 0 if ok else 1


COMMANDS_GROUP = "arrayjit.commands"
"""The entry-point group through which packages above this one lend the command a subcommand:
each entry names a callable that takes the argument list (``list[str]``) and returns the exit
status. ``arrayjit demo --distributed`` runs the entry ``demo-distributed``, which
arrayjit-distributed registers; this package never imports the packages above it."""


def _command(name: str) -> Callable[[list[str]], int]:
    """The callable of entry ``name`` in :data:`COMMANDS_GROUP`, loaded.

    Raises:
        ImportError: no installed distribution registers ``name``, or loading it fails (its
            package or one of its dependencies, such as mpi4py, does not import).
    """
    from importlib.metadata import entry_points

    found = entry_points(group=COMMANDS_GROUP, name=name)
    if not found:
        raise ImportError(f"no entry point {name!r} in group {COMMANDS_GROUP!r}")
    command: Callable[[list[str]], int] = next(iter(found)).load()
    return command


def _distributed_demo(name: str | None, steps: int) -> int:
    try:
        distributed_main = _command("demo-distributed")
    except ImportError as exc:
        raise UsageError(
            f"demo --distributed needs arrayjit-distributed ({exc}); install it with "
            "pip install 'arrayjit-distributed[mpich]' and run under mpiexec -n 2"
        ) from None
    args = ["--steps", str(steps)] + (["--backend", name] if name is not None else [])
    return distributed_main(args)


def _show(path: str) -> int:
    # As `python FILE` does: modules next to the file import.
    sys.path.insert(0, str(Path(path).resolve().parent))
    try:
        namespace = runpy.run_path(path)
    except (OSError, SyntaxError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    except Exception as exc:  # the file's own error: one line, with where in the file
        lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
        where = f" at line {lines[-1]}" if lines else ""
        raise UsageError(f"{path} raised{where}: {type(exc).__name__}: {exc}") from None
    found = 0
    for key, value in namespace.items():
        if isinstance(value, (Accum_op, Fetch, Block, Comp)):
            found += 1
            print(f"# {key}\n{pretty(value)}\n")
            # Static indices stay symbols here: the optimized code does not depend on them.
            symbols = static_symbols(Comp.of(value).assignments)
            print(pretty(optimize(lower(value), name=key, static_symbols=symbols)))
            print()
    if not found:
        raise UsageError(f"{path} defines no computation at module level")
    return 0


def _bench(from_json: str, plot: str | None) -> int:
    from arrayjit_backends.cli.bench_plot import check_plot_path
    from arrayjit_backends.cli.bench_table import load_data, machine_line, render

    settings.check_environment()
    if plot is not None:
        check_plot_path(Path(plot))  # before the table, not after it
    rows, machine_info = load_data(Path(from_json))
    print(machine_line(machine_info))
    print(render(rows))
    if plot is not None:
        from arrayjit_backends.cli.bench_plot import write_plot

        write_plot(rows, Path(plot))
        print(f"chart written to {plot}")
    return 0


def _trace(file: str, plot: str | None) -> int:
    from arrayjit_backends.cli import trace_table

    if plot is not None:
        from arrayjit_backends.cli.trace_plot import check_plot_path

        check_plot_path(Path(plot))  # before reading the trace, not after the summary
    events = trace_table.load(file)
    print(trace_table.summary(events))
    if plot is not None:
        from arrayjit_backends.cli.trace_plot import write_plot

        write_plot(events, Path(plot))
        print(f"timeline written to {plot}")
    return 0


def _cache(action: str) -> int:
    from arrayjit_backends.impl.compile_cache import CompileCache

    settings.check_environment()  # a mistyped ARRAYJIT_CACHE_DIR must not go unnoticed here
    cache = CompileCache()
    files = cache.entries()
    if action == "clear":
        removed = cache.clear()
        print(f"removed {removed} entries from {cache.directory}")
        return 0
    size = sum(f.stat().st_size for f in files)
    problem = cache.unusable_reason()
    if not cache.enabled:
        state = "disabled (ARRAYJIT_NO_CACHE)"
    elif problem is not None:
        state = f"unusable: {problem}; compiles run without it"
    else:
        state = "enabled"
    print(f"compile cache: {cache.directory} ({state}; set ARRAYJIT_CACHE_DIR to move it)")
    print(f"entries: {len(files)}, size: {_size_text(size)}")
    return 0


def _size_text(nbytes: int) -> str:
    """``512 bytes``, ``48.2 kB``, ``3.1 MB``."""
    if nbytes < 1000:
        return f"{nbytes} bytes"
    if nbytes < 1_000_000:
        return f"{nbytes / 1e3:.1f} kB"
    return f"{nbytes / 1e6:.1f} MB"


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1 (argparse turns the error into a usage
    message, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def parser() -> argparse.ArgumentParser:
    """The command line of ``arrayjit``."""
    p = argparse.ArgumentParser(
        prog="arrayjit",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=version_text())
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser(
        "backends", help="list backends: available or why not, and what to install for the rest"
    )
    demo = sub.add_parser("demo", help="run a small end-to-end check against numpy")
    demo.add_argument("--backend", default=None, help="backend name (default: the best available)")
    demo.add_argument("--size", type=positive_int, default=None, help="elements of the fused check")
    demo.add_argument("--steps", type=positive_int, default=10, help="MLP training steps (>= 1)")
    demo.add_argument(
        "--distributed",
        action="store_true",
        help="data-parallel training over MPI ranks (run as mpiexec -n 2 arrayjit demo "
        "--distributed; needs arrayjit-distributed)",
    )
    show = sub.add_parser("show", help="print the optimized IR of a file's computations")
    show.add_argument("file", help="a Python file defining computations at module level")
    bench = sub.add_parser(
        "bench", help="print the table of a benchmark run (tox -e bench); higher is faster"
    )
    bench.add_argument(
        "--from-json",
        default="bench-results/bench.json",
        metavar="FILE",
        help="pytest-benchmark JSON output to read (default: bench-results/bench.json, "
        "written by tox -e bench or pytest --benchmark-json=FILE)",
    )
    bench.add_argument(
        "--plot",
        default=None,
        metavar="FILE",
        help="also write a chart of every ratio to numpy (FILE.svg, FILE.png or FILE.pdf; needs "
        "matplotlib)",
    )
    trace = sub.add_parser(
        "trace", help="summarize a trace written by ARRAYJIT_TRACE or arrayjit_backends.trace"
    )
    trace.add_argument("file", help="the Chrome trace file (JSON)")
    trace.add_argument(
        "--plot",
        default=None,
        metavar="FILE",
        help="also write a timeline of the trace: a lane per stream, a bar per event (FILE.svg, "
        "FILE.png or FILE.pdf; needs matplotlib)",
    )
    cache = sub.add_parser("cache", help="the compile cache: info (where, how big) or clear")
    cache.add_argument("action", choices=["info", "clear"])
    return p


def warning_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    line: str | None = None,
) -> str:
    """A warning as the command prints it: one line, ``arrayjit: warning: MESSAGE``, without
    the source line Python adds (``settings.apply_environment()  # unknown ...``), which says
    nothing to a user of the command."""
    return f"arrayjit: warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``arrayjit`` command; returns the exit code. Python warnings raised
    while it runs print as one line each (:func:`warning_line`); the formatting is restored on
    return, so a program calling ``main`` keeps its own."""
    saved = warnings.formatwarning
    # formatwarning rather than showwarning: warnings.catch_warnings(record=True) (pytest.warns)
    # still records the warnings themselves.
    warnings.formatwarning = warning_line
    try:
        return _main(argv)
    finally:
        warnings.formatwarning = saved


def _main(argv: Sequence[str] | None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.command is None:
        p.print_help()
        return 0
    try:
        if settings.configure_logging() is not None:
            # An application may install a handler (the library never does): the levels alone
            # would show nothing below WARNING.
            logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
        if args.command == "backends":
            return _backends()
        if args.command == "demo":
            return _demo(args.backend, args.size, args.steps, args.distributed)
        if args.command == "bench":
            return _bench(args.from_json, args.plot)
        if args.command == "cache":
            return _cache(args.action)
        if args.command == "trace":
            return _trace(args.file, args.plot)
        return _show(args.file)
    except ArrayjitError as exc:
        print(f"arrayjit: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader of the output went away (``arrayjit bench | head``): nothing to report.
        # Python would still flush stdout at exit and fail there, so point it at devnull.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
