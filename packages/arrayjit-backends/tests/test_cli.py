"""The `arrayjit` command."""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from arrayjit_backends.cli.main import main


def test_backends_lists_interp(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "sync_interp" in out and "available: 1 device(s)" in out


@pytest.mark.parametrize("backend", ["sync_interp", "multicore_interp"])
def test_demo_checks_against_numpy(backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--backend", backend, "--size", "256", "--steps", "3"]) == 0
    out = capsys.readouterr().out
    assert f"arrayjit demo on {backend}" in out
    assert out.count("[ok]") == 2 and "FAILED" not in out and "all checks passed" in out
    assert "numpy/ours" in out


def test_demo_with_one_step_passes(capsys: pytest.CaptureFixture[str]) -> None:
    # The smallest --steps the command accepts once failed: its loss cannot have decreased
    # yet (the loss of each step is taken before its update).
    assert main(["demo", "--backend", "sync_interp", "--size", "16", "--steps", "1"]) == 0
    out = capsys.readouterr().out
    assert "[ok] 1 SGD steps" in out and "all checks passed" in out


def test_unknown_backend_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--backend", "nope"]) == 2
    assert "unknown backend 'nope'; valid names:" in capsys.readouterr().err
    assert main(["demo", "--backend", ""]) == 2  # not the default: an empty name is a slip
    assert "empty backend name '' (None picks the default); valid names:" in (
        capsys.readouterr().err
    )


def test_distributed_demo_without_the_package_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "arrayjit_distributed.demo", None)  # import fails
    assert main(["demo", "--distributed"]) == 2
    err = capsys.readouterr().err
    assert "demo --distributed needs arrayjit-distributed" in err
    assert "pip install 'arrayjit-distributed[mpich]'" in err and "mpiexec -n 2" in err


def test_distributed_demo_not_registered_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # arrayjit-distributed not installed: no entry in the group, and no import is tried.
    import importlib.metadata

    real = importlib.metadata.entry_points

    def without_commands(**params: Any) -> Any:
        if params.get("group") == "arrayjit.commands":
            return importlib.metadata.EntryPoints(())
        return real(**params)

    monkeypatch.setattr(importlib.metadata, "entry_points", without_commands)
    monkeypatch.setitem(sys.modules, "arrayjit_distributed.demo", None)  # never reached
    assert main(["demo", "--distributed"]) == 2
    err = capsys.readouterr().err
    assert (
        "demo --distributed needs arrayjit-distributed (no entry point 'demo-distributed' in "
        "group 'arrayjit.commands')" in err
    )
    assert "pip install 'arrayjit-distributed[mpich]'" in err and "mpiexec -n 2" in err


def _shown(path: Path, source: str, capsys: pytest.CaptureFixture[str]) -> str:
    """What ``arrayjit show`` prints for a file of ``source`` (written at ``path``)."""
    path.write_text("from arrayjit_tnode import Tnode\nfrom arrayjit_ir import ir\n" + source)
    assert main(["show", str(path)]) == 0
    return capsys.readouterr().out


def test_show_prints_optimized_ir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _shown(
        tmp_path / "comp.py",
        "a = Tnode.create((4,), label='a', hosted=True)\n"
        "t = Tnode.create((4,), label='t')\n"
        "y = Tnode.create((4,), label='y', hosted=True)\n"
        "step = ir.block(ir.unop(t, 'exp', a), ir.unop(y, 'neg', t))\n",
        capsys,
    )
    assert "# step" in out and "routine step():" in out and "t: Virtual" in out
    assert "y[i1] := neg(exp(a[i1]));" in out
    empty = tmp_path / "none.py"
    empty.write_text("x = 1\n")
    capsys.readouterr()
    assert main(["show", str(empty)]) == 2  # a user error, as every other one
    assert capsys.readouterr().err == f"arrayjit: {empty} defines no computation at module level\n"


def test_show_imports_modules_next_to_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ``python FILE`` would, ``show`` finds the modules beside the file, from any folder."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "shown_helpers.py").write_text(
        "from arrayjit_tnode import Tnode\n"
        "def node(label):\n    return Tnode.create((3,), label=label)\n"
    )
    (proj / "model.py").write_text(
        "from shown_helpers import node\nfrom arrayjit_ir import ir\n"
        "negated = ir.unop(node('b'), 'neg', node('a'))\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command adds the file's folder
    monkeypatch.delitem(sys.modules, "shown_helpers", raising=False)
    assert main(["show", "proj/model.py"]) == 0
    assert "b[i1] := neg(a[i1]);" in capsys.readouterr().out


def test_show_of_static_indices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A computation with static indices shows with them as the routine's parameters (they are
    bound only when it runs)."""
    out = _shown(
        tmp_path / "rows.py",
        "from arrayjit_ir.assignments import Slice\nfrom arrayjit_ir.indexing import StaticSymbol\n"
        "data = Tnode.create((4, 3), label='data')\nrow = Tnode.create((3,), label='row')\n"
        "pick = ir.fetch(row, Slice(StaticSymbol('i'), data))\n",
        capsys,
    )
    assert "routine pick(i):" in out and "row[i1] := data[i, i1];" in out


def test_version_and_bare_command(capsys: pytest.CaptureFixture[str]) -> None:
    from arrayjit_backends.__about__ import __version__

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"arrayjit {__version__} (") and "arrayjit-backends 0.1" in out
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: arrayjit") and "cache" in out and "--from-json" not in out
    assert "``" not in out and ":func:" not in out  # no reStructuredText markup


def test_bench_help_documents_from_json(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    out = capsys.readouterr().out
    assert "--from-json FILE" in out and "pytest-benchmark JSON" in out and "--plot FILE" in out


def test_user_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(tmp_path / "missing.py")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("arrayjit: cannot read ") and "missing.py" in err
    assert "Traceback" not in err and err.count("\n") == 1
    for bad in (["--steps", "0"], ["--size", "-3"], ["--steps", "x"]):
        with pytest.raises(SystemExit) as info:
            main(["demo", "--backend", "sync_interp", *bad])
        assert info.value.code == 2
        assert "is not" in capsys.readouterr().err


def test_backends_lists_uninstalled_first_party(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from arrayjit_backends import registry

    saved = {e.name: e for e in registry.entries()}
    registry.unregister("llvm")
    registry.unregister("cc")
    try:
        assert main(["backends"]) == 0
        out = capsys.readouterr().out
        assert "not installed:" in out
        assert "sync_llvm, multicore_llvm, llvm" in out and "pip install arrayjit-backend-c" in out
        assert main(["demo", "--backend", "sync_llvm"]) == 2
        err = capsys.readouterr().err
        assert "sync_llvm is provided by arrayjit-backend-c, which is not installed: pip " in err
    finally:
        for entry in saved.values():
            registry.register(entry)


def test_cache_info_and_clear(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from arrayjit_backends.impl.compile_cache import CompileCache

    monkeypatch.setenv("ARRAYJIT_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("ARRAYJIT_NO_CACHE", raising=False)
    cache = CompileCache()
    cache.put("ab" + "0" * 62, b"x" * 1000)
    cache.put("cd" + "1" * 62, b"y" * 500)
    (tmp_path / "c" / "notes.txt").write_text("not ours")
    others = [  # laid out almost like entries, but not entries: a clear must keep them
        tmp_path / "c" / "en" / "en_notes.txt",
        tmp_path / "c" / "ab" / ("ab" + "2" * 62),  # a key's name, not an entry's header
        tmp_path / "c" / "ab" / ("AB" + "3" * 62),
    ]
    for path in others:
        path.parent.mkdir(exist_ok=True)
        path.write_text("user data")
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"compile cache: {tmp_path / 'c'} (enabled" in out
    assert "entries: 2, size: 1.7 kB" in out  # the two entries, with their headers
    assert main(["cache", "clear"]) == 0
    assert "removed 2 entries" in capsys.readouterr().out
    assert cache.entries() == [] and (tmp_path / "c" / "notes.txt").exists()
    assert all(path.read_text() == "user data" for path in others)


def test_cache_command_warns_of_a_mistyped_setting_and_an_unusable_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARRAYJIT_NO_CACHE", raising=False)
    monkeypatch.setenv("ARRAYJIT_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("ARRAYJIT_CACHE_DIRR", str(tmp_path / "typo"))
    with pytest.warns(
        UserWarning, match="ARRAYJIT_CACHE_DIRR ignored; did you mean ARRAYJIT_CACHE_DIR"
    ):
        assert main(["cache", "clear"]) == 0
    monkeypatch.delenv("ARRAYJIT_CACHE_DIRR")
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("ARRAYJIT_CACHE_DIR", str(tmp_path / "file" / "cache"))
    capsys.readouterr()
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"(unusable: {tmp_path / 'file'} is not a folder; compiles run without it;" in out
    assert "entries: 0, size: 0 bytes" in out


def _bench_row(group: str, name: str, median: float, impl: str) -> dict[str, object]:
    """One benchmark in pytest-benchmark's JSON layout."""
    return {"group": group, "name": name, "stats": {"median": median}, "extra_info": {"impl": impl}}


BENCH = {
    "machine_info": {"cpu": {"brand_raw": "Test CPU 9000", "count": 7}},
    "benchmarks": [
        _bench_row("sum 2^10 f32", "a", 2e-3, "numpy"),
        _bench_row("sum 2^10 f32", "b", 1e-3, "multicore_cc"),
        _bench_row("compile latency (small routine)", "c", 5e-2, "multicore_cc cold"),
        _bench_row("compile latency (small routine)", "d", 1e-7, "numpy"),
    ],
}


def test_bench_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    path = tmp_path / "b.json"
    path.write_text(json.dumps(BENCH))
    assert main(["bench", "--from-json", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("machine: Test CPU 9000, 7 cores, ") and "GB/s" in lines[0]
    assert "higher is faster" in lines[1]
    cc_sum = lines[lines.index("sum 2^10 f32") + 1]
    assert "multicore_cc" in cc_sum and cc_sum.endswith("2.00x")  # numpy 2 ms / ours 1 ms
    start = lines.index("compile latency (small routine)")
    assert all("x" not in line.split()[-1] for line in lines[start + 1 : start + 3])


def _bench_table(
    tmp_path: Path, rows: list[dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> tuple[Path, list[str]]:
    """``arrayjit bench`` of ``rows`` next to :data:`BENCH`'s: the JSON's path and the lines."""
    import json

    path = tmp_path / "b.json"
    path.write_text(json.dumps({"benchmarks": [*rows, *BENCH["benchmarks"]]}))  # type: ignore[misc]
    assert main(["bench", "--from-json", str(path)]) == 0
    return path, capsys.readouterr().out.splitlines()


def test_bench_table_bandwidth_fraction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rows with bytes in a group with a STREAM baseline show their GB/s as a fraction of the
    fastest baseline row; groups without one show no such column."""

    from arrayjit_backends.cli.bench_table import bandwidth_fractions, load_rows

    group = "fused relu(a*b+c) 2^24 f32"
    rows = [
        _bench_row(group, "t", 10e-3, "C STREAM triad (bandwidth)"),
        _bench_row(group, "c", 10e-3, "C STREAM copy (bandwidth)"),
        _bench_row(group, "f", 16e-3, "multicore_cc"),
        _bench_row(group, "n", 40e-3, "numpy"),
    ]
    for row, nbytes in zip(rows, (12e6, 8e6, 16e6, 16e6)):
        row["extra_info"]["bytes"] = nbytes  # type: ignore[index]
    for row in rows[:2]:
        row["extra_info"]["bandwidth_baseline"] = True  # type: ignore[index]
    path, lines = _bench_table(tmp_path, rows, capsys)
    start = lines.index(group)
    # triad: 1.2 GB/s is the fastest baseline; the fused kernel moves 1.0 GB/s, numpy 0.4.
    assert lines[start + 1].split()[-1] == "100%" and "C STREAM triad" in lines[start + 1]
    cc = next(line for line in lines[start:] if "multicore_cc" in line)
    assert cc.split()[-2:] == ["2.50x", "83%"]
    assert lines[start + 4].split()[-2:] == ["1.00x", "33%"]  # numpy
    assert lines[lines.index("sum 2^10 f32") + 1].endswith("2.00x")  # no column there
    fractions = bandwidth_fractions(load_rows(path))
    assert list(fractions) == [group]
    assert fractions[group]["multicore_cc"] == pytest.approx(1e9 / 1.2e9)


def test_bench_table_hand_written_baselines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows marked ``baseline_of`` a backend give that backend's row (and each other baseline
    of it) a ``vs hand`` ratio to the fastest of them; other rows and groups get none."""

    from arrayjit_backends.cli.bench_table import hand_ratios, load_rows

    group = "sum 2^24 f32"
    rows = [
        _bench_row(group, "o", 12e-3, "opencl"),
        _bench_row(group, "s", 40e-3, "pyopencl.array.sum"),
        _bench_row(group, "k", 10e-3, "pyopencl kernel"),
        _bench_row(group, "c", 1e-3, "cuda"),
        _bench_row(group, "n", 5e-3, "numpy"),
    ]
    for row in rows[1:3]:
        row["extra_info"]["baseline_of"] = "opencl"  # type: ignore[index]
    path, lines = _bench_table(tmp_path, rows, capsys)
    assert "vs hand" in lines[1]
    start = lines.index(group)
    members = {line.split()[0]: line.split() for line in lines[start + 1 : start + 6]}
    assert members["opencl"][-2:] == ["0.42x", "0.83x"]  # numpy 5 / 12; kernel 10 / 12
    assert members["pyopencl"][-1] == "1.00x"  # the fastest baseline: the hand-written kernel
    assert members["pyopencl.array.sum"][-1] == "0.25x"
    assert members["cuda"][-1] == "5.00x" and members["numpy"][-1] == "1.00x"  # vs numpy only
    assert lines[lines.index("sum 2^10 f32") + 1].endswith("2.00x")  # a group without them
    got = hand_ratios(load_rows(path))
    assert list(got) == [group]
    assert got[group] == pytest.approx(
        {"opencl": 10 / 12, "pyopencl kernel": 1.0, "pyopencl.array.sum": 0.25}
    )


def test_bench_table_numba_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A group with a numba row gives every row a ``vs numba`` ratio (numba time / its time),
    after the ``vs hand`` column where the group has both; other groups get none."""

    from arrayjit_backends.cli.bench_table import load_rows, numba_ratios

    group = "fused relu(a*b+c) 2^20 f32"
    rows = [
        _bench_row(group, "b", 4e-3, "numba prange"),
        _bench_row(group, "s", 5e-3, "sync_cc"),
        _bench_row(group, "o", 2e-3, "opencl"),
        _bench_row(group, "k", 8e-3, "pyopencl kernel"),
        _bench_row(group, "n", 10e-3, "numpy"),
    ]
    rows[3]["extra_info"]["baseline_of"] = "opencl"  # type: ignore[index]
    path, lines = _bench_table(tmp_path, rows, capsys)
    assert "vs numba" in lines[1] and lines[1].index("vs numba") > lines[1].index("vs hand")
    start = lines.index(group)
    members = {line.split()[0]: line.split() for line in lines[start + 1 : start + 6]}
    assert members["sync_cc"][-2:] == ["2.00x", "0.80x"]  # numpy 10 / 5; numba 4 / 5
    assert members["opencl"][-3:] == ["5.00x", "4.00x", "2.00x"]  # numpy, hand 8 / 2, numba
    assert members["numba"][-1] == "1.00x" and members["numpy"][-1] == "0.40x"
    assert lines[lines.index("sum 2^10 f32") + 1].endswith("2.00x")  # no numba row there
    got = numba_ratios(load_rows(path))
    assert list(got) == [group]
    assert got[group] == pytest.approx(
        {"sync_cc": 0.8, "opencl": 2.0, "pyopencl kernel": 0.5, "numpy": 0.4}
    )


def test_bench_table_jax_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A group with a jax row gives every row a ``vs jax`` ratio (jax time / its time), after
    the ``vs hand`` and ``vs numba`` columns where the group has them; other groups get none."""

    from arrayjit_backends.cli.bench_table import jax_ratios, load_rows

    group = "softmax over rows 2048x1024 f32"
    rows = [
        _bench_row(group, "j", 6e-3, "jax.jit (cpu)"),
        _bench_row(group, "m", 3e-3, "multicore_cc"),
        _bench_row(group, "c", 1e-3, "cuda"),
        _bench_row(group, "k", 2e-3, "cupy"),
        _bench_row(group, "n", 12e-3, "numpy"),
    ]
    rows[3]["extra_info"]["baseline_of"] = "cuda"  # type: ignore[index]
    both = "fused relu(a*b+c) 2^20 f32"
    rows += [
        _bench_row(both, "b", 4e-3, "numba prange"),
        _bench_row(both, "j", 2e-3, "jax.jit (cpu)"),
        _bench_row(both, "s", 8e-3, "sync_cc"),
        _bench_row(both, "n", 10e-3, "numpy"),
    ]
    path, lines = _bench_table(tmp_path, rows, capsys)
    header = lines[1]
    assert "vs jax" in header and header.index("vs jax") > header.index("vs numba")
    assert "vs jax: jax.jit's time / ours" in header
    start = lines.index(group)
    members = {line.split()[0]: line.split() for line in lines[start + 1 : start + 6]}
    assert members["multicore_cc"][-2:] == ["4.00x", "2.00x"]  # numpy 12 / 3; jax 6 / 3
    assert members["cuda"][-3:] == ["12.00x", "2.00x", "6.00x"]  # numpy, hand 2 / 1, jax
    assert members["jax.jit"][-2:] == ["2.00x", "1.00x"] and members["numpy"][-1] == "0.50x"
    # the columns line up under the header: each ratio ends where its title does
    cc = next(line for line in lines[start:] if "multicore_cc" in line)
    assert len(cc) == header.index("vs jax") + len("vs jax")
    start = lines.index(both)
    members = {line.split()[0]: line.split() for line in lines[start + 1 : start + 5]}
    assert members["sync_cc"][-3:] == ["1.25x", "0.50x", "0.25x"]  # numpy, numba, jax
    assert members["numba"][-2:] == ["1.00x", "0.50x"]
    assert lines[lines.index("sum 2^10 f32") + 1].endswith("2.00x")  # no jax row there
    got = jax_ratios(load_rows(path))
    assert list(got) == [both, group]
    assert got[group] == pytest.approx(
        {"multicore_cc": 2.0, "cuda": 6.0, "cupy": 3.0, "numpy": 0.5}
    )
    assert got[both] == pytest.approx({"numba prange": 0.5, "sync_cc": 0.25, "numpy": 0.2})


def test_bench_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    """``arrayjit bench | head -1``: the reader leaves early; the command ends without a
    traceback (a table larger than the pipe's buffer makes the write fail)."""
    import json
    import subprocess
    import sys

    rows = [_bench_row(f"group {i}", f"r{i}", 1e-3, "numpy") for i in range(3000)]
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"benchmarks": rows}))
    cmd = [sys.executable, "-m", "arrayjit_backends.cli.main", "bench", "--from-json", str(path)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"machine: ")
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_bench_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    path = tmp_path / "b.json"
    path.write_text(json.dumps(BENCH))
    chart = tmp_path / "chart.svg"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert main(["bench", "--from-json", str(path), "--plot", str(chart)]) == 2
        assert "--plot needs matplotlib: pip install" in capsys.readouterr().err
        return
    assert main(["bench", "--from-json", str(path), "--plot", str(chart)]) == 0
    svg = chart.read_text()
    assert svg.lstrip().startswith("<?xml") and "sum 2^10 f32" in svg.replace("&#94;", "^")
    capsys.readouterr()  # the table and chart of the run above
    assert main(["bench", "--from-json", str(path), "--plot", str(tmp_path / "c.txt")]) == 2
    out, err = capsys.readouterr()
    assert "must end in one of .svg, .png, .pdf" in err and out == ""  # before the table


def test_bench_plot_without_matplotlib(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # an import of it fails
    path = tmp_path / "b.json"
    path.write_text(json.dumps(BENCH))
    assert main(["bench", "--from-json", str(path), "--plot", str(tmp_path / "c.svg")]) == 2
    out, err = capsys.readouterr()
    assert "--plot needs matplotlib: pip install 'arrayjit-backends[plot]'" in err
    assert out == ""  # said before the table, not after it


def test_slow_compile_notice_in_the_command_only(capsys: pytest.CaptureFixture[str]) -> None:
    import io
    import time

    from arrayjit_backends.cli import main as cli

    class Slow:
        name = "slowbe"

        def compile(self, comp: object, name: str = "r") -> str:
            time.sleep(1.3)
            return "code"

    be, out = Slow(), io.StringIO()
    cli._announce_slow_compiles(be, out)
    assert be.compile(None, name="fused") == "code"
    assert out.getvalue() == (
        "arrayjit: compiling fused for slowbe (first compile of this code; cached for later "
        "runs)...\n"
    )
    quick, out2 = Slow(), io.StringIO()
    quick.compile = lambda comp, name="r": "code"  # type: ignore[method-assign]
    cli._announce_slow_compiles(quick, out2)
    assert quick.compile(None) == "code"
    time.sleep(cli.SLOW_COMPILE_S + 0.2)  # the cancelled notice never comes
    assert out2.getvalue() == ""


@pytest.mark.parametrize(
    "text",
    [
        '{"benchmarks": 5}',
        '{"benchmarks": [{"name": "x"}]}',
        '{"benchmarks": [{"name": "x", "group": "g", "stats": {}}]}',
        '{"benchmarks": [], "machine_info": 3}',
        '{"benchmarks": ["x"]}',
    ],
)
def test_malformed_bench_json_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    # valid JSON of the wrong shape raised a traceback (exit 1) from the table code
    path = tmp_path / "bench.json"
    path.write_text(text)
    assert main(["bench", "--from-json", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"arrayjit: {path} is not pytest-benchmark JSON output: ")
    assert err.count("\n") == 1
    assert main(["bench", "--from-json", str(tmp_path)]) == 2  # a folder
    assert capsys.readouterr().err.startswith(f"arrayjit: cannot read {tmp_path}: ")


def test_show_of_a_file_that_raises_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a file that raised printed the whole traceback (exit 1)
    failing = tmp_path / "failing.py"
    failing.write_text("x = 1\ny = undefined_name\n")
    assert main(["show", str(failing)]) == 2
    err = capsys.readouterr().err
    want = "raised at line 2: NameError: name 'undefined_name' is not defined"
    assert err == f"arrayjit: {failing} {want}\n"


def test_warnings_print_as_one_line(tmp_path: Path) -> None:
    # A real process: pytest records warnings itself, so only a run of the command shows
    # what a user sees on stderr.
    env = dict(os.environ, ARRAYJIT_CACHE_DIR=str(tmp_path / "c"))
    env["ARRAYJIT_CACHE_DIRR"] = str(tmp_path / "typo")
    env.pop("PYTHONWARNINGS", None)
    run = subprocess.run(
        [sys.executable, "-m", "arrayjit_backends.cli.main", "cache", "info"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("arrayjit: warning: unknown setting ARRAYJIT_CACHE_DIRR ignored")
    assert "settings.apply_environment()" not in run.stderr


def _small_trace(path: Path) -> None:
    import numpy as np

    from arrayjit_backends import fresh_backend, trace
    from arrayjit_ir import ir
    from arrayjit_tnode import Tnode

    backend = fresh_backend("multicore_interp")
    ctx = backend.make_context(backend.new_stream(backend.get_device(0)))
    a = Tnode.create((64,), label="a", hosted=True)
    a.set_values(np.arange(64.0))
    y = Tnode.create((64,), label="y", hosted=True)
    with trace(path):
        routine = backend.link(ctx, backend.compile(ir.unop(y, "exp", a), name="exp"))
        routine()
        backend.to_host(routine.context, y)
        y.get_values()
    backend.finalize()


def test_trace_plot_writes_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib (the plot extra)")
    path, picture = tmp_path / "run.json", tmp_path / "timeline.png"
    _small_trace(path)
    assert main(["trace", str(path), "--plot", str(picture)]) == 0
    out = capsys.readouterr().out
    assert "routine" in out and f"timeline written to {picture}" in out
    data = picture.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 5000


def test_trace_plot_of_another_format_is_an_error_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the trace file does not exist: the picture's format is said first
    assert main(["trace", str(tmp_path / "missing.json"), "--plot", str(tmp_path / "t.txt")]) == 2
    out, err = capsys.readouterr()
    assert "must end in one of .svg, .png, .pdf" in err and out == ""


def test_trace_plot_without_matplotlib(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # an import of it fails
    path = tmp_path / "run.json"
    path.write_text('{"traceEvents": []}')
    assert main(["trace", str(path), "--plot", str(tmp_path / "t.png")]) == 2
    out, err = capsys.readouterr()
    assert "--plot needs matplotlib: pip install 'arrayjit-backends[plot]'" in err
    assert out == ""  # said before the summary, not after it
