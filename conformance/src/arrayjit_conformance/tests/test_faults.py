"""Fault injection: damaged compile-cache entries, unusable cache folders, a failing compiler, a
failing task ahead of transfers, a failing event to wait for. Each fault gives its documented
error (or a warning and a rebuild) and never wrong or stale values.

Cache faults are injected into a private cache folder (``ARRAYJIT_CACHE_DIR`` set for the test):
one backend fills it, the entries are damaged, and a fresh backend must rebuild them (with a
warning) and compute the right values. Backends without a compile cache (the interpreter)
skip those tests with the reason.
"""

from __future__ import annotations

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

from arrayjit_backends import StreamError
from arrayjit_backends.scheduler import Event
from arrayjit_conformance.harness import hosted, new_context
from arrayjit_conformance.plugin import fresh_or_skip
from arrayjit_ir import ir
from arrayjit_tnode import CompileError, Tnode

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
            with caplog.at_level(logging.WARNING, logger="arrayjit_backends.compile_cache"):
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
        with caplog.at_level(logging.WARNING, logger="arrayjit_backends.compile_cache"):
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
