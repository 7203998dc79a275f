"""Fault injection: damaged compile-cache entries, unusable cache folders, a failing compiler, a
failing task ahead of transfers, a failing event to wait for. Each fault gives its documented
error (or a warning and a rebuild) and never wrong or stale values.

Cache faults are injected into a private cache folder (``ARRAYJIT_CACHE_DIR`` set for the test):
one backend fills it, the entries are damaged, and a fresh backend must rebuild them (with a
warning) and compute the right values. Backends without a compile cache (the interpreter)
skip those tests with the reason.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arrayjit_backends import MergeMode, StreamError
from arrayjit_backends.impl.stream_queue import Event
from arrayjit_conformance.harness import hosted, new_context
from arrayjit_conformance.plugin import fresh_or_skip
from arrayjit_ir import ir
from arrayjit_tnode import CompileError, Tnode
from arrayjit_tnode import memory_mode as mm

VALUES = np.linspace(-2.0, 2.0, 16, dtype=np.float32)


def _comps() -> tuple[list[Any], Tnode, list[Tnode]]:
    x = hosted((16,), "x")
    x.set_values(VALUES)
    outs = [hosted((16,), "neg"), hosted((16,), "relu")]
    return [ir.unop(outs[0], "neg", x), ir.unop(outs[1], "relu", x)], x, outs


def _run_all(backend: Any, comps: list[Any], outs: list[Tnode]) -> None:
    """Compile, run and check both routines (neg, relu) against numpy."""
    expected = [-VALUES, np.maximum(VALUES, 0)]
    for k, (comp, out) in enumerate(zip(comps, outs)):
        r = backend.link(new_context(backend), backend.compile(comp, name=f"fault{k}"))
        r()
        backend.to_host(r.context, out)
        np.testing.assert_array_equal(out.get_values(), expected[k])


def _run_on_fresh(
    backend_name: str,
    comps: list[Any],
    outs: list[Tnode],
    caplog: pytest.LogCaptureFixture | None = None,
) -> None:
    """:func:`_run_all` on a fresh backend (whose compiles can only come from the disk cache),
    finalized after; with ``caplog``, the compile cache's warnings are captured."""
    b = fresh_or_skip(backend_name)
    try:
        if caplog is None:
            _run_all(b, comps, outs)
        else:
            with caplog.at_level(logging.WARNING, logger="arrayjit_backends.impl.compile_cache"):
                _run_all(b, comps, outs)
    finally:
        b.finalize()


def _entries(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("??/*") if not p.name.startswith("."))


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("ARRAYJIT_CACHE_DIR", str(directory))
    monkeypatch.delenv("ARRAYJIT_NO_CACHE", raising=False)
    return directory


def _filled(backend_name: str, cache_dir: Path) -> tuple[list[Any], list[Tnode], list[Path]]:
    comps, _, outs = _comps()
    _run_on_fresh(backend_name, comps, outs)
    entries = _entries(cache_dir)
    if not entries:
        pytest.skip(f"backend {backend_name} keeps no compile cache")
    return comps, outs, entries


def _truncate(entries: list[Path]) -> None:
    for p in entries:
        p.write_bytes(p.read_bytes()[: max(1, p.stat().st_size // 2)])


def _corrupt(entries: list[Path]) -> None:
    for p in entries:
        blob = bytearray(p.read_bytes())
        for k in range(len(blob) // 2, len(blob), 97):
            blob[k] ^= 0x5A
        p.write_bytes(bytes(blob))


def _random(entries: list[Path]) -> None:
    rng = np.random.default_rng(0)
    for p in entries:
        p.write_bytes(rng.integers(0, 256, p.stat().st_size, dtype=np.uint8).tobytes())


def _swap(entries: list[Path]) -> None:
    # Every entry gets another's content (two routines at least, so a cycle exists).
    blobs = [p.read_bytes() for p in entries]
    for p, blob in zip(entries, blobs[1:] + blobs[:1]):
        p.write_bytes(blob)


def _directory(entries: list[Path]) -> None:
    for p in entries:
        p.unlink()
        (p / "junk").mkdir(parents=True)


@pytest.mark.parametrize(
    "damage",
    [_truncate, _corrupt, _random, _swap, _directory],
    ids=["truncated", "corrupted", "random-bytes", "swapped", "directory"],
)
def test_damaged_cache_entries_are_rebuilt_with_a_warning(
    backend_name: str,
    cache_dir: Path,
    damage: Callable[[list[Path]], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    comps, outs, entries = _filled(backend_name, cache_dir)
    damage(entries)
    _run_on_fresh(backend_name, comps, outs, caplog)
    assert any("rebuilding it" in rec.getMessage() for rec in caplog.records)
    # The rebuilt entries are good again: a third backend hits them without a warning.
    caplog.clear()
    _run_on_fresh(backend_name, comps, outs, caplog)
    assert [r.getMessage() for r in caplog.records] == []


@pytest.mark.parametrize("where", ["through-a-file", "in-proc", "read-only"])
def test_unusable_cache_folder_compiles_without_it_and_warns_once(
    backend_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    where: str,
) -> None:
    if where == "through-a-file":
        (tmp_path / "file").write_text("not a folder")
        directory = tmp_path / "file" / "cache"
    elif where == "in-proc":
        directory = Path(f"/proc/self/arrayjit-cache-{os.getpid()}-{backend_name}")
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders; the other cases cover this")
        directory = tmp_path / "ro"
        directory.mkdir()
        directory.chmod(stat.S_IRUSR | stat.S_IXUSR)
    monkeypatch.setenv("ARRAYJIT_CACHE_DIR", str(directory))
    monkeypatch.delenv("ARRAYJIT_NO_CACHE", raising=False)
    comps, _, outs = _comps()
    b = fresh_or_skip(backend_name)
    has_cache = hasattr(getattr(b.runtime, "compiler", b.runtime), "cache")
    try:
        with caplog.at_level(logging.WARNING, logger="arrayjit_backends.impl.compile_cache"):
            _run_all(b, comps, outs)
            _run_all(b, comps, outs)
    finally:
        b.finalize()
    warnings = [r.getMessage() for r in caplog.records if "cannot be used" in r.getMessage()]
    assert len(warnings) == (1 if has_cache else 0)  # once per folder and process
    if warnings:
        assert str(directory) in warnings[0] and "compiling without the cache" in warnings[0]


def test_no_cache_writes_nothing(
    backend_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "cache"
    monkeypatch.setenv("ARRAYJIT_CACHE_DIR", str(directory))
    monkeypatch.setenv("ARRAYJIT_NO_CACHE", "1")
    comps, _, outs = _comps()
    _run_on_fresh(backend_name, comps, outs)
    assert not directory.exists() or list(directory.rglob("*")) == []


def _fake_compiler(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fakecc"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "fakecc 1.0"; exit 0; fi\n'
        'out=""; prev=""\n'
        'for a in "$@"; do if [ "$prev" = "-o" ]; then out="$a"; fi; prev="$a"; done\n'
        f"{body}\n"
    )
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize(
    "body,message",
    [
        ('printf "not an ELF file" > "$out"; exit 0', r"exited 0 but its output .* not a shared"),
        ("exit 0", r"exited 0 but wrote no readable library"),
        ('echo "fake: internal error" >&2; exit 3', r"failed to compile routine .*exit 3"),
    ],
    ids=["non-elf", "no-output", "exit-3"],
)
def test_failing_compiler_gives_compile_error(
    backend_name: str, cache_dir: Path, tmp_path: Path, body: str, message: str
) -> None:
    b = fresh_or_skip(backend_name)
    try:
        compiler = getattr(b.runtime, "compiler", None)
        if getattr(compiler, "name", None) != "cc":
            pytest.skip(f"this test fakes the C compiler driver; backend {backend_name} has none")
        compiler.cc = _fake_compiler(tmp_path, body)
        comps, _, _ = _comps()
        with pytest.raises(CompileError, match=message):
            b.compile(comps[0], name="faulty")
        assert _entries(cache_dir) == []  # nothing bad was cached
    finally:
        b.finalize()


class _Boom(Exception):
    pass


def test_failure_ahead_of_transfers_is_never_lost(backend: Any) -> None:
    """A task fails ahead of ``from_host``, a run and ``to_host``: ``get_values`` raises
    :class:`StreamError` with the cause instead of returning the previous host values."""
    x, y = hosted((16,), "x"), hosted((16,), "y")
    x.set_values(VALUES)
    r = backend.link(new_context(backend), backend.compile(ir.unop(y, "neg", x), name="after"))
    r()
    backend.to_host(r.context, y)
    np.testing.assert_array_equal(y.get_values(), -VALUES)  # the previous host values
    queue = r.context.stream.queue
    gate = threading.Event()

    def fail() -> None:
        raise _Boom("injected")

    raised: list[StreamError] = []
    try:
        if backend.scheduler == "multicore":  # queue the failure behind a gate: deterministic
            queue.schedule(lambda: gate.wait(10))
        queue.schedule(fail)
        x.set_values(VALUES * 3)
        backend.from_host(r.context, x)
        r()
        backend.to_host(r.context, y)
    except StreamError as exc:  # streams that run tasks at once report it there
        raised.append(exc)
    finally:
        gate.set()
    deadline = time.monotonic() + 10
    while not backend.is_idle(r.context.stream) and time.monotonic() < deadline:
        time.sleep(0.001)  # the copy's event is passed (skipped) before get_values looks
    if not raised:
        with pytest.raises(StreamError, match=r"_Boom\('injected'\)") as info:
            y.get_values()
        raised.append(info.value)
    if backend.scheduler == "multicore":
        with pytest.raises(StreamError):  # every later read reports it too
            y.get_values()
    cause: BaseException | None = raised[0]
    while cause is not None and not isinstance(cause, _Boom):
        cause = cause.__cause__
    assert isinstance(cause, _Boom)
    with pytest.raises(StreamError):
        backend.await_stream(r.context.stream)


class _FailingEvent(Event):
    def is_done(self) -> bool:
        return False

    def sync(self) -> None:
        raise RuntimeError("event failed")


def test_failing_event_in_will_wait_for_fails_the_stream(backend: Any) -> None:
    ctx = new_context(backend)
    try:
        backend.will_wait_for(ctx, _FailingEvent())
    except StreamError as exc:
        assert isinstance(exc.__cause__, RuntimeError)
    with pytest.raises(StreamError, match=r"RuntimeError\('event failed'\)"):
        backend.await_stream(ctx.stream)
    x, y = hosted((4,), "x"), hosted((4,), "y")
    with pytest.raises(StreamError):  # the stream refuses new work, as a failed stream does
        r = backend.link(ctx, backend.compile(ir.unop(y, "neg", x), name="late"))
        r()
    # Another stream is unaffected.
    x.set_values(np.arange(4.0))
    r = backend.link(new_context(backend), backend.compile(ir.unop(y, "neg", x), name="ok"))
    r()
    backend.to_host(r.context, y)
    np.testing.assert_array_equal(y.get_values(), -np.arange(4.0))


def _failed_event(other: Any) -> Any:
    """An event of a ``multicore_`` stream of ``other`` that is done, having failed: a task
    before it raised."""
    ctx = new_context(other)
    gate = threading.Event()
    other.schedule_task(ctx, lambda: gate.wait(10))  # the failure comes after the event is taken

    def fail() -> None:
        raise _Boom("injected")

    other.schedule_task(ctx, fail)
    event = other.all_work(ctx.stream)
    gate.set()
    deadline = time.monotonic() + 10
    while not other.is_done(event) and time.monotonic() < deadline:
        time.sleep(0.001)
    assert other.is_done(event) and not event.succeeded()
    return event


def test_waiting_for_an_event_that_failed_fails_the_stream(backend: Any) -> None:
    """An event already passed, but after a failed task (what it orders never happened), given
    to ``will_wait_for`` fails the waiting stream as a pending one would, whatever the two
    backends are."""
    other = fresh_or_skip("multicore_interp")
    try:
        event = _failed_event(other)
        ctx = new_context(backend)
        with contextlib.suppress(StreamError):  # at once on sync_ and device streams
            backend.will_wait_for(ctx, event)
        with pytest.raises(StreamError, match=r"_Boom\('injected'\)"):
            backend.await_stream(ctx.stream)
    finally:
        other.finalize()


def test_a_reader_after_a_writer_skipped_by_a_failure_fails(backend: Any) -> None:
    """A routine on one stream reads a node whose writer on another stream was skipped after
    a failure: by the time the reader is scheduled the writer's event has passed (failed), and
    the reader must fail rather than read the value from before the writer."""
    dev = backend.get_device(0)
    s1, s2 = backend.new_stream(dev), backend.new_stream(dev)
    x = Tnode.create((4,), label="x")
    x.update_memory_mode(mm.On_device(mm.Sharing.Shared_cross_streams), 1)
    y = hosted((4,), "y")
    init = backend.link(
        backend.make_context(s1), backend.compile(ir.fetch(x, ir.Constant(1.0)), name="init")
    )
    writer = backend.link(
        init.context, backend.compile(ir.fetch(x, ir.Constant(5.0)), name="writer")
    )
    reader = backend.link(
        backend.make_context(s2), backend.compile(ir.unop(y, "identity", x), name="reader")
    )
    init()
    backend.await_stream(s1)

    def fail() -> None:
        raise _Boom("injected")

    try:
        backend.schedule_task(init.context, fail)
        writer()
    except StreamError:  # told at once (sync_ and device streams): the writer never ran
        return
    deadline = time.monotonic() + 10
    while not backend.is_idle(s1) and time.monotonic() < deadline:
        time.sleep(0.001)  # the writer's event is passed (skipped) before the reader comes
    with pytest.raises(StreamError, match=r"_Boom\('injected'\)"):
        reader()
        backend.to_host(reader.context, y)
        y.get_values()
    # A write of the node on a third stream replaces the value that never came: it waits for
    # the skipped writer to pass, but does not fail with it.
    z = hosted((4,), "z")
    comp = ir.block(ir.fetch(x, ir.Constant(9.0)), ir.unop(z, "identity", x))
    rewrite = backend.link(
        backend.make_context(backend.new_stream(dev)), backend.compile(comp, name="rewrite")
    )
    rewrite()
    backend.to_host(rewrite.context, z)
    np.testing.assert_array_equal(z.get_values(), np.full(4, 9.0))


def _failed_stream(backend: Any) -> Any:
    """A context whose stream failed (the failure reported, or at least passed)."""
    ctx = new_context(backend)

    def fail() -> None:
        raise _Boom("injected")

    with contextlib.suppress(StreamError):  # raised at once on sync_ and device streams
        backend.schedule_task(ctx, fail)
    deadline = time.monotonic() + 10
    while not backend.is_idle(ctx.stream) and time.monotonic() < deadline:
        time.sleep(0.001)
    return ctx


def test_a_failed_stream_refuses_work_that_has_nothing_to_do(backend: Any) -> None:
    """``link``, a ``from_host`` of a node already fresh there and a ``device_to_device`` into
    a context of the failed stream raise :class:`StreamError` like every other call, rather
    than report success."""
    x, y = hosted((4,), "x"), hosted((4,), "y")
    x.set_values(np.arange(4.0))
    code = backend.compile(ir.unop(y, "neg", x), name="neg")
    ctx = _failed_stream(backend)
    with pytest.raises(StreamError, match=r"_Boom\('injected'\)"):
        backend.link(ctx, code)
    healthy = backend.link(new_context(backend), code)
    healthy()
    failed = _failed_stream(backend)
    shared = backend.make_context(failed.stream, ctx_arrays={x: healthy.context.ctx_arrays[x]})
    with pytest.raises(StreamError, match=r"_Boom\('injected'\)"):
        backend.from_host(shared, x)
    with pytest.raises(StreamError, match=r"_Boom\('injected'\)"):
        backend.device_to_device(x, MergeMode.No, shared, healthy.context)


def test_transfers_after_another_backends_failed_copy_to_the_host_fail(backend: Any) -> None:
    """Another backend's copy into a host array was skipped after a failure: a ``from_host``
    of that array requested after it fails instead of uploading the stale host values."""
    other = fresh_or_skip("multicore_interp")
    try:
        y, out = hosted((4,), "y"), hosted((4,), "out")
        y.set_values(np.ones(4))
        w = other.link(new_context(other), other.compile(ir.fetch(y, ir.Constant(7.0)), name="w"))
        code = backend.compile(ir.unop(out, "neg", y), name="r")
        r = backend.link(new_context(backend), code)
        gate = threading.Event()
        other.schedule_task(w.context, lambda: gate.wait(10))

        def fail() -> None:
            raise _Boom("injected")

        other.schedule_task(w.context, fail)
        w()
        other.to_host(w.context, y)  # skipped: never lands
        gate.set()
        deadline = time.monotonic() + 10
        while not other.is_idle(w.context.stream) and time.monotonic() < deadline:
            time.sleep(0.001)
        with pytest.raises(StreamError, match=r"_Boom\('injected'\)"):
            backend.from_host(r.context, y)
            r()
            backend.to_host(r.context, out)
            out.get_values()
        # Once the host arrays are written, the skipped copies no longer matter: another
        # stream uploads the new values (the failed stream of ``r`` stays failed). Until then
        # ``out``'s host array, whose copy was skipped too, could not be uploaded either.
        y.set_values(np.full(4, 2.0))
        out.set_values(np.zeros(4))
        again = backend.link(new_context(backend), code)
        backend.from_host(again.context, y)
        again()
        backend.to_host(again.context, out)
        np.testing.assert_array_equal(out.get_values(), np.full(4, -2.0))
    finally:
        other.finalize()


def test_host_memory_routines_keep_request_order_with_other_backends_copies(
    backend: Any,
) -> None:
    """A routine computing on a host array (``use_host_memory``) is a copy into it (or out of
    it) for the ordering of that array's transfers: requested after another backend's
    ``from_host`` / ``to_host`` of it, it lands after them, whichever runs late."""
    if not getattr(backend.capabilities, "use_host_memory", False):
        pytest.skip(f"{backend.name}: no use_host_memory (device memory is not host memory)")
    other = fresh_or_skip("multicore_interp")
    try:
        a = hosted((4,), "a")
        a.set_values(np.full(4, 3.0))
        backend.use_host_memory(a)
        ones = backend.link(
            new_context(backend), backend.compile(ir.fetch(a, ir.Constant(1.0)), name="ones")
        )
        neg = other.link(new_context(other), other.compile(ir.unop(a, "neg", a), name="neg"))
        gate = threading.Event()
        other.schedule_task(neg.context, lambda: gate.wait(10))  # the other backend runs late
        other.from_host(neg.context, a)  # reads 3s
        neg()
        other.to_host(neg.context, a)  # writes -3s, requested before the routine below
        timer = threading.Timer(0.2, gate.set)
        timer.start()
        ones()  # a := 1, after the copy to the host in request order
        backend.await_stream(ones.context.stream)
        np.testing.assert_array_equal(a.get_values(), np.ones(4))
        other.await_stream(neg.context.stream)
        timer.join()
    finally:
        other.finalize()
