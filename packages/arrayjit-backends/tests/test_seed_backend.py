"""Seed features of the generic layer, on the interpreter backends: host memory used in place,
device facts, memory accounting helpers, device-wide synchronize, the missing backend's new
methods. (The conformance suite checks the same features on every backend.)"""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

from arrayjit_backends import (
    BackendMissingError,
    DeviceBackend,
    MissingBackend,
    StreamError,
    fresh_backend,
)
from arrayjit_backends.impl.device import ScratchAccount
from arrayjit_backends.runtime.cpu_devices import CpuDevices
from arrayjit_backends.runtime.slab import Slab
from arrayjit_ir import ir
from arrayjit_tnode import Prec, Tnode


def test_host_memory_buffer_is_the_host_array() -> None:
    b = fresh_backend("multicore_interp")
    try:
        a = Tnode.create((3, 5), label="a", hosted=True, prec="double")
        y = Tnode.create((3, 5), label="y", hosted=True, prec="double")
        b.use_host_memory(a)
        b.use_host_memory(y)
        b.use_host_memory(y)  # declaring twice is harmless
        ctx = b.make_context(b.new_stream(b.get_device(0)))
        code = b.compile(ir.unop(y, "neg", a), name="neg")
        r = b.link(ctx, code)
        for tn in (a, y):
            mem, offset = r.context.buf(tn)
            assert offset == 0 and np.shares_memory(mem, tn.array)
        # Another context on the device gets the same buffer: there is one host array.
        r2 = b.link(b.make_context(b.new_stream(b.get_device(0))), code)
        assert r2.context.buffers[y] == r.context.buffers[y]
    finally:
        b.finalize()


def test_slab_adopted_memory_is_not_counted() -> None:
    freed: list[object] = []
    slab = Slab(lambda n: np.zeros(n, np.uint8), freed.append)
    own = slab.alloc_pool(100)
    host = np.arange(10.0)
    adopted = slab.adopt_pool(host.view(np.uint8))
    assert slab.used_bytes == 100 and own != adopted
    assert np.shares_memory(slab.buf(slab_loc(adopted))[0], host)
    slab.free_pool(adopted)
    assert slab.used_bytes == 100


def slab_loc(pool_id: int) -> object:
    from arrayjit_backends.runtime.slab import BufferLoc

    return BufferLoc(pool_id, 0)


def test_scratch_account_releases_with_its_owner() -> None:
    account = ScratchAccount()

    def run() -> None: ...

    account.hold(run, 0, 96)
    account.hold(run, 1, 8)
    account.hold(run, 0, 0)  # nothing held, nothing to release
    assert (account.bytes(0), account.bytes(1), account.bytes(2)) == (96, 8, 0)
    del run
    gc.collect()
    assert (account.bytes(0), account.bytes(1)) == (0, 0)


def test_cpu_device_info() -> None:
    b = fresh_backend("sync_interp")
    try:
        info = b.get_device(0).info
        assert info.kind == "cpu" and info.unified_memory
        assert info.compute_units == (os.cpu_count() or 1)
        assert info.max_workgroup_size == (1,) and info.max_shared_memory == 0
        assert info.supported_precs == b.capabilities.supported_precs
        assert info.supports_dtype(Prec.single)
    finally:
        b.finalize()


def test_default_device_info_knows_only_what_it_can() -> None:
    class Minimal(CpuDevices):
        info = DeviceBackend.info  # a third-party backend that keeps the default

    from arrayjit_backends.interp import InterpCompiler

    info = Minimal("mini", "sync", InterpCompiler()).info(0)
    assert info.name == "mini:0" and info.kind == "unknown"
    assert info.max_workgroup_size == () and info.max_shared_memory == 0
    assert Prec.single in info.supported_precs


def test_synchronize_waits_for_every_stream_and_reports_a_failure() -> None:
    b = fresh_backend("multicore_interp")
    try:
        dev = b.get_device(0)
        bad, good = b.new_stream(dev), b.new_stream(dev)
        a, y = (Tnode.create((4,), label=s, hosted=True) for s in ("a", "y"))
        a.set_values(np.arange(4.0))
        r = b.link(b.make_context(good), b.compile(ir.unop(y, "neg", a), name="neg"))
        good.hold(0.05)
        r()
        b.to_host(r.context, y)

        def fail() -> None:
            raise RuntimeError("boom")

        b.schedule_task(b.make_context(bad), fail)
        with pytest.raises(StreamError, match="boom"):
            b.synchronize(dev)
        assert b.is_idle(good)
        np.testing.assert_array_equal(y.get_values(), -np.arange(4.0))
    finally:
        b.finalize()


@pytest.mark.parametrize(
    "method",
    ["use_host_memory", "alloc_buffer", "alloc_zero_init_array", "synchronize"],
)
def test_missing_backend_refuses_the_seed_methods(method: str) -> None:
    m = MissingBackend("nope", "no driver", "pip install nope")
    with pytest.raises(BackendMissingError, match="no driver"):
        getattr(m, method)(None)
