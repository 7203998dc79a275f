"""The trace of streams, kernels and transfers (``runtime/trace.py``) and ``arrayjit trace``."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arrayjit_backends import fresh_backend, trace
from arrayjit_backends.cli.main import main
from arrayjit_backends.runtime import trace as trace_module
from arrayjit_ir import ir
from arrayjit_tnode import Tnode
from arrayjit_tnode import memory_mode as mm


def _two_streams(path: Path) -> dict[str, Any]:
    backend = fresh_backend("multicore_interp")
    dev = backend.get_device(0)
    s1, s2 = backend.new_stream(dev), backend.new_stream(dev)
    n = 256
    x = Tnode.create((n,), label="x")
    x.update_memory_mode(mm.On_device(mm.Sharing.Shared_cross_streams), 1)
    src = Tnode.create((n,), label="src", hosted=True)
    y = Tnode.create((n,), label="y", hosted=True)
    src.set_values(np.arange(n, dtype=np.float32))
    with trace(path):
        writer = backend.link(
            backend.make_context(s1), backend.compile(ir.unop(x, "exp", src), name="writer")
        )
        reader = backend.link(
            backend.make_context(s2), backend.compile(ir.unop(y, "neg", x), name="reader")
        )
        for _ in range(2):
            s1.hold(0.05)  # the writer lags: the reader's stream must wait for it
            writer()
            reader()
        backend.to_host(reader.context, y)
        y.get_values()
        backend.await_stream(s1)
    backend.finalize()
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data


def test_trace_has_the_format_and_stream_order(tmp_path: Path) -> None:
    assert trace_module.tracer is None  # off by default: routines test one attribute
    events = _two_streams(tmp_path / "run.json")["traceEvents"]
    assert trace_module.tracer is None  # restored on leaving
    for e in events:
        assert {"name", "ph", "pid", "tid"} <= set(e), e
        if e["ph"] == "X":
            assert isinstance(e["ts"], float) and e["dur"] >= 0 and "args" in e
    names = [e["name"] for e in events if e["ph"] == "X"]
    for what in ("compile writer", "link reader", "routine writer", "routine reader", "to_host y"):
        assert any(n.startswith(what) for n in names), (what, names)
    uploads = [e for e in events if e["name"].startswith("from_host src")]
    assert uploads and uploads[0]["cat"] == "transfer"
    assert uploads[0]["args"]["bytes"] == 1024 and uploads[0]["args"]["node"].startswith("src#")
    by_track: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for e in events:
        if e["ph"] == "X":
            by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    for track in by_track.values():  # recorded in run order: never overlapping
        for a, b in itertools.pairwise(track):
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-3, (a, b)
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"
    }
    writer_track = next(t for t, es in by_track.items() if es[-1]["name"] == "routine writer")
    assert threads[writer_track].startswith("multicore_interp:0:")
    runs = [e["name"] for e in by_track[writer_track] if e["cat"] == "routine"]
    assert runs == ["routine writer", "routine writer"]


def test_trace_shows_a_cross_stream_wait_as_a_flow(tmp_path: Path) -> None:
    events = _two_streams(tmp_path / "run.json")["traceEvents"]
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = [e for e in events if e["ph"] == "f"]
    assert ends and all(e["id"] in starts for e in ends)
    slices = [e for e in events if e["ph"] == "X"]
    pairs: set[tuple[str, str]] = set()
    for f in ends:
        s = starts[f["id"]]
        assert (s["pid"], s["tid"]) != (f["pid"], f["tid"])  # across streams
        source = [
            x
            for x in slices
            if (x["pid"], x["tid"]) == (s["pid"], s["tid"])
            and x["ts"] <= s["ts"] <= x["ts"] + x["dur"]
        ]
        target = [
            x for x in slices if (x["pid"], x["tid"]) == (f["pid"], f["tid"]) and x["ts"] == f["ts"]
        ]
        assert source and target
        pairs.add((source[0]["name"], target[0]["name"]))
        assert s["ts"] <= f["ts"]  # the waiting stream went on after the other's work
    # The reader waits for the writer's run (read after write), and the writer's next run for
    # the reader (write after read).
    assert ("routine writer", "routine reader") in pairs


def test_arrayjit_trace_prints_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.json"
    _two_streams(path)
    capsys.readouterr()
    assert main(["trace", str(path)]) == 0
    out = capsys.readouterr().out
    assert "routine    writer" in out and "routine    reader" in out
    assert "transfer   to_host" in out and "1024" in out
    assert "waited for multicore_interp:0:" in out
    (tmp_path / "bad.json").write_text("{")
    assert main(["trace", str(tmp_path / "bad.json")]) == 2
    assert "arrayjit: trace: cannot read" in capsys.readouterr().err


def test_the_environment_setting_writes_at_exit(tmp_path: Path) -> None:
    path = tmp_path / "env.json"
    program = (
        "import numpy as np\n"
        "from arrayjit_backends import fresh_backend\n"
        "from arrayjit_ir import ir\n"
        "from arrayjit_tnode import Tnode\n"
        "b = fresh_backend('sync_interp')\n"
        "a = Tnode.create((4,), label='a', hosted=True); a.set_values(np.arange(4.0))\n"
        "y = Tnode.create((4,), label='y', hosted=True)\n"
        "ctx = b.make_context(b.new_stream(b.get_device(0)))\n"
        "r = b.link(ctx, b.compile(ir.unop(y, 'neg', a), name='neg')); r()\n"
    )
    env = dict(os.environ, ARRAYJIT_TRACE=str(path))
    subprocess.run([sys.executable, "-c", program], env=env, check=True, timeout=120)
    names = [e["name"] for e in json.loads(path.read_text())["traceEvents"]]
    assert "routine neg" in names and "compile neg" in names


def _flows(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each flow as (name of the slice holding its start, name of the slice it ends at)."""
    slices = [e for e in events if e["ph"] == "X"]

    def holder(e: dict[str, Any]) -> str:
        track = (e["pid"], e["tid"])
        return next(
            x["name"]
            for x in slices
            if (x["pid"], x["tid"]) == track and x["ts"] <= e["ts"] <= x["ts"] + x["dur"]
        )

    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts.keys() == ends.keys()  # no flow without both ends
    return sorted((holder(starts[i]), holder(ends[i])) for i in starts)


def test_flows_are_resolved_from_the_schedule_order(tmp_path: Path) -> None:
    """The recorder keeps raw tuples; the flows are found when the file is written: from the
    source stream's last task scheduled before the wait to the waiting stream's first task
    scheduled after it, and left out where either had not run."""
    tracer = trace_module.Tracer(tmp_path / "t.json")
    one, two = "be:0:1", "be:0:2"

    def task(stream: str, name: str) -> Any:
        return tracer.task((stream, name, "routine", {}), lambda: None)

    a1, a2 = task(one, "a1"), task(one, "a2")
    tracer.wait(one, two)  # joins a2 (not a1) to b1
    b1 = task(two, "b1")
    tracer.wait(two, one)  # joins b1 to a3, once b1 has run
    tracer.wait("be:0:3", one)  # a stream with no traced task: no flow
    a3 = task(one, "a3")
    task(one, "a4")  # scheduled, never run
    tracer.wait(one, two)  # its source may be a4: no flow
    b2 = task(two, "b2")
    for t in (a1, a2, a3, b2):
        t()
    assert _flows(tracer.events()) == []  # b1 has not run: neither wait has both ends
    b1()
    events = tracer.events()
    assert _flows(events) == [("a2", "b1"), ("b1", "a3")]
    runs = [e["name"] for e in events if e["ph"] == "X"]
    assert runs == ["a1", "a2", "b1", "a3", "b2"]  # in schedule order, a4 left out
    assert json.loads(json.dumps(events)) == events


def test_a_routine_records_its_label_once(tmp_path: Path) -> None:
    backend = fresh_backend("sync_interp")
    y = Tnode.create((4,), label="y", hosted=True)
    ctx = backend.make_context(backend.new_stream(backend.get_device(0)))
    routine = backend.link(ctx, backend.compile(ir.fetch(y, ir.Constant(2.0)), name="fill"))
    with trace(tmp_path / "t.json") as tracer:
        routine()
        routine()
    runs = [e for e in tracer.events() if e["name"] == "routine fill"]
    assert len(runs) == 2 and runs[0]["args"] is runs[1]["args"]  # one label, shared
    assert runs[0]["args"]["writes"] == [y.debug_label]
    backend.finalize()
