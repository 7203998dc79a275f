"""The opencl backend's own behaviour (the conformance suite covers the interface)."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from arrayjit_backends import fresh_backend
from arrayjit_backends.gpu.program import GpuProgram, render_program
from arrayjit_ir import ir, lower, optimize
from arrayjit_tnode import CompileError, Prec, Tnode

pytest.importorskip("pyopencl")
from arrayjit_backend_opencl.device import OpenclDevices, find_platform
from arrayjit_backend_opencl.renderer import OpenclSyntax
from arrayjit_backends.gpu.devices import GpuCode

if isinstance(find_platform(), str):
    pytest.skip(f"no OpenCL platform: {find_platform()}", allow_module_level=True)


@pytest.fixture
def backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("ARRAYJIT_CACHE_DIR", str(tmp_path / "cache"))
    be = fresh_backend("opencl")
    yield be
    be.finalize()


def _run_identity(be: Any, src: Tnode, dst: Tnode) -> np.ndarray:
    r = be.link(
        be.make_context(be.new_stream(be.get_device(0))),
        be.compile(ir.unop(dst, "identity", src), name="conv"),
    )
    r()
    be.to_host(r.context, dst)
    return dst.get_values()


@pytest.mark.parametrize(
    "prec,dtype",
    [("fp8", ml_dtypes.float8_e5m2), ("bfloat16", ml_dtypes.bfloat16), ("half", np.float16)],
)
def test_small_float_loads_are_exact_for_every_bit_pattern(
    backend: Any, prec: str, dtype: Any
) -> None:
    bits = np.arange(
        256 if prec == "fp8" else 65536, dtype=np.uint8 if prec == "fp8" else np.uint16
    )
    src = Tnode.create((bits.size,), prec=prec, label="src", hosted=True)
    dst = Tnode.create((bits.size,), prec="single", label="dst", hosted=True)
    src.array = bits.view(dtype).copy()
    src.devices_not_lagging_host.clear()
    got = _run_identity(backend, src, dst)
    np.testing.assert_array_equal(got, bits.view(dtype).astype(np.float32))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # the host's own rounding
@pytest.mark.parametrize("prec", ["fp8", "bfloat16", "half"])
def test_small_float_stores_round_like_the_host(backend: Any, prec: str) -> None:
    rng = np.random.default_rng(3)
    # Random magnitudes (subnormals to overflow), and exact ties between neighbouring halves.
    ties = np.arange(0x3C00, 0x3C40, dtype=np.uint16).view(np.float16).astype(np.float32)
    ties = ties[:-1] + np.diff(ties) / 2
    vals = np.concatenate(
        [
            rng.standard_normal(2000) * 10.0 ** rng.integers(-8, 6, 2000),
            [0.0, -0.0, 1e9, -1e9, 65520.0, 65519.0, 2.0**-25, 3 * 2.0**-26],
            ties,
        ]
    ).astype(np.float32)
    src = Tnode.create((vals.size,), prec="single", label="src", hosted=True)
    dst = Tnode.create((vals.size,), prec=prec, label="dst", hosted=True)
    src.set_values(vals)
    got = _run_identity(backend, src, dst)
    host = Tnode.create((vals.size,), prec=prec, label="host", hosted=True)
    host.set_values(vals)
    np.testing.assert_array_equal(got.view(np.uint8), host.get_values().view(np.uint8))


def test_capabilities_follow_the_device_extensions(backend: Any) -> None:
    dev = backend.runtime.devices[0]
    precs = backend.capabilities.supported_precs
    assert (Prec.double in precs) == ("cl_khr_fp64" in dev.extensions.split())
    # half, bfloat16 and fp8 are stored as bits: every device has them.
    assert {Prec.half, Prec.bfloat16, Prec.fp8} <= precs and Prec.uint4x32 not in precs


def test_kernels_are_parallel(backend: Any) -> None:
    n = 5000
    a, y = (Tnode.create((n,), label=x, hosted=True) for x in ("a", "y"))
    tot = Tnode.create((), label="tot", hosted=True)
    va = np.random.default_rng(4).uniform(-1, 1, n).astype(np.float32)
    a.set_values(va)
    code = backend.compile(
        ir.block(ir.unop(y, "exp", a), ir.accum(tot, "add", a, spec="i->")), name="par"
    )
    program: GpuProgram = code.native.rendered
    sizes = [(k.global_size, k.local_size) for k in program.kernels]
    # One work item per element, launched as exactly n work items (the driver picks the
    # groups), so the kernel has no bounds check (which kept PoCL from vectorizing it).
    assert sizes[0] == (n, None) and "aj_gid >=" not in program.source
    # PoCL's default (CPU) shape of the sum: work items of one range of the serial loop each,
    # then one combining them (a blocked sum's remainder may follow).
    assert any(
        first[0] > 1 and first[1] == 1 and second == (1, 1)
        for first, second in itertools.pairwise(sizes[1:])
    )
    # The GPU shape: partials from work groups reducing in local memory, then one group.
    syntax = OpenclSyntax(cell_lanes=64)
    gpu, group = render_program(syntax, code.optimized, "par"), syntax.group_size
    assert any(
        first.global_size > group and first.global_size % group == 0 and second.local_size == group
        for first, second in itertools.pairwise(gpu.kernels[1:])
    )
    assert "__local" in gpu.source and "barrier(CLK_LOCAL_MEM_FENCE)" in gpu.source
    r = backend.link(backend.make_context(backend.new_stream(backend.get_device(0))), code)
    r()
    backend.to_host(r.context, y)
    backend.to_host(r.context, tot)
    np.testing.assert_allclose(y.get_values(), np.exp(va.astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(tot.get_values(), va.astype(np.float64).sum(), rtol=1e-5)


def test_warm_cache_builds_nothing(backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = Tnode.create((8,), label="x", hosted=True), Tnode.create((8,), label="y", hosted=True)
    backend.compile(ir.unop(y, "exp", x), name="warm")
    builds: list[str] = []
    real = OpenclDevices.build

    def counting(self: Any, code: Any, ordinal: int) -> bytes:
        builds.append(code.name)
        return real(self, code, ordinal)

    monkeypatch.setattr(OpenclDevices, "build", counting)
    fresh = fresh_backend("opencl")
    fresh.compile(ir.unop(y, "exp", x), name="warm")
    assert builds == []
    fresh.compile(ir.unop(y, "exp", x), name="cold")
    assert builds == ["cold"]
    fresh.finalize()


def test_build_failure_raises_compile_error_with_log(backend: Any) -> None:
    runtime = backend.runtime
    x, y = Tnode.create((8,), label="x", hosted=True), Tnode.create((8,), label="y", hosted=True)
    opt = optimize(lower(ir.unop(y, "exp", x)), name="broken")
    bad = GpuProgram("__kernel void k(void) { this is not OpenCL }", (), None, ())  # type: ignore[arg-type]
    with pytest.raises(CompileError, match=r"OpenCL failed to build routine broken on") as info:
        runtime.build(GpuCode(opt.name, bad), 0)
    assert "error" in info.value.output.lower()
    assert (
        info.value.source_path and "this is not OpenCL" in Path(info.value.source_path).read_text()
    )


def test_probe_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyopencl as cl

    import arrayjit_backend_opencl
    from arrayjit_backends import BackendMissingError

    monkeypatch.setattr(cl, "get_platforms", lambda: [])
    assert arrayjit_backend_opencl._probe() == "no OpenCL platform with a device found"
    missing = fresh_backend("opencl")
    assert missing.num_devices() == 0
    with pytest.raises(BackendMissingError, match=r"arrayjit-backend-opencl\[pocl\]"):
        missing.get_device(0)

    def no_icd() -> list[Any]:
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(cl, "get_platforms", no_icd)
    reason = arrayjit_backend_opencl._probe()
    assert reason is not None and reason.startswith("no OpenCL platform found")


def test_cached_binary_the_driver_rejects_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from arrayjit_backends.impl.compile_cache import CompileCache

    monkeypatch.setenv("ARRAYJIT_CACHE_DIR", str(tmp_path))
    x, y = Tnode.create((8,), label="x", hosted=True), Tnode.create((8,), label="y", hosted=True)
    x.set_values(np.arange(8.0))
    comp = ir.unop(y, "neg", x)
    first = fresh_backend("opencl")
    first.compile(comp, name="rejected")
    first.finalize()
    cache = CompileCache(tmp_path, enabled=True)
    keys = [p.name for p in tmp_path.glob("??/*") if not p.name.startswith(".")]
    assert keys
    for key in keys:  # well-formed entries (right key, right checksum) of unusable binaries
        cache.put(key, b"not a program binary")
    b = fresh_backend("opencl")
    try:
        with caplog.at_level("WARNING"):
            r = b.link(b.make_context(b.new_stream(b.get_device(0))), b.compile(comp, "rejected"))
        assert any("rejects its binary" in rec.getMessage() for rec in caplog.records)
        r()
        b.to_host(r.context, y)
        np.testing.assert_array_equal(y.get_values(), -np.arange(8.0))
    finally:
        b.finalize()


TWO_DEVICES_SCRIPT = """
import numpy as np
from arrayjit_backend_opencl.device import OpenclDevices
from arrayjit_backends import MergeMode, fresh_backend
from arrayjit_ir import ir
from arrayjit_tnode import Tnode

builds = []
real = OpenclDevices.build

def counting(self, code, ordinal):
    builds.append((code.name, ordinal))
    return real(self, code, ordinal)

OpenclDevices.build = counting
b = fresh_backend("opencl")
assert b.num_devices() == 2, b.num_devices()
x, y = Tnode.create((8,), label="x", hosted=True), Tnode.create((8,), label="y", hosted=True)
x.set_values(np.arange(8.0))
code = b.compile(ir.unop(y, "neg", x), name="neg")
assert sorted(code.native.modules) == [0], code.native.modules
assert builds == [("neg", 0)], builds
ctx1 = b.make_context(b.new_stream(b.get_device(1)))
r1 = b.link(ctx1, code)
assert sorted(code.native.modules) == [0, 1], code.native.modules
# Identical devices share the cache entry: device 1's program came from device 0's binary.
assert builds == [("neg", 0)], builds
r1()
b.to_host(r1.context, y)
assert (y.get_values() == -np.arange(8.0)).all(), y.get_values()
ctx0 = b.make_context(b.new_stream(b.get_device(0)))
r0 = b.link(ctx0, code)
r0()
assert b.device_to_device(y, MergeMode.No, r1.context, r0.context)
b.to_host(r1.context, y)
assert (y.get_values() == -np.arange(8.0)).all(), y.get_values()
b.finalize()
print("ok")
"""


def test_two_devices_build_a_program_each_from_one_cache_entry(tmp_path: Path) -> None:
    """With two PoCL devices (in a child process: PoCL reads ``POCL_DEVICES`` once), device 0's
    program is built by ``compile``, device 1's at its first link, from the cached binary of
    device 0 (the devices are identical), and values move between them."""
    import os
    import subprocess

    platform = find_platform()
    assert not isinstance(platform, str)
    if "Portable Computing Language" not in platform[0].name:
        pytest.skip(f"two devices are made with PoCL, the platform is {platform[0].name}")
    env = dict(os.environ, POCL_DEVICES="pthread pthread", ARRAYJIT_CACHE_DIR=str(tmp_path))
    env.pop("ARRAYJIT_NO_CACHE", None)
    done = subprocess.run(
        [sys.executable, "-c", TWO_DEVICES_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


@pytest.mark.parametrize(("op", "start"), [("add", 0.0), ("max", -np.inf)])
def test_full_reduction_folds_its_fill(backend: Any, op: str, start: float) -> None:
    """A full reduction into a one-cell node is two launches (partials, combine): the neutral
    fill before it is the combine's start instead of a launch of its own; the value is still
    the fill's constant combined with every term (checked against numpy). (A length the
    blocked sum splits evenly: a remainder is a reduction of its own.)"""
    n = 1 << 17
    x, s = Tnode.create((n,), label="x", hosted=True), Tnode.create((), label="s", hosted=True)
    vx = np.random.default_rng(5).uniform(-3, 1, n).astype(np.float32)
    x.set_values(vx)
    code = backend.compile(ir.accum(s, op, x, spec="i->"), name="full")
    program: GpuProgram = code.native.rendered
    assert len(program.kernels) == 2, program.source
    routine = backend.link(backend.make_context(backend.new_stream(backend.get_device(0))), code)
    routine()
    backend.to_host(routine.context, s)
    want = vx.astype(np.float64).sum() if op == "add" else max(start, float(vx.max()))
    np.testing.assert_allclose(s.get_values(), want, rtol=1e-5)


def test_only_an_empty_nest_keeps_a_bounds_check() -> None:
    """Kernels are launched with exactly their global size (no group size: the driver divides
    it), so a parallel body has no bounds check; an empty nest still launches one work item,
    which must do nothing."""
    a, y = (Tnode.create((0, 3), label=x, hosted=True) for x in ("a", "y"))
    empty = render_program(OpenclSyntax(), optimize(lower(ir.unop(y, "exp", a)), name="e"), "e")
    assert [(k.global_size, k.local_size) for k in empty.kernels] == [(1, 1)]
    assert "if (aj_gid >= 0) return;" in empty.source
    b, z = (Tnode.create((7, 3), label=x, hosted=True) for x in ("b", "z"))
    full = render_program(OpenclSyntax(), optimize(lower(ir.unop(z, "exp", b)), name="f"), "f")
    assert [(k.global_size, k.local_size) for k in full.kernels] == [(21, None)]
    assert "aj_gid >=" not in full.source


def test_repeated_layers_share_kernels(backend: Any) -> None:
    """Three identical layers ``h = tanh(h w + b)``: their kernels are defined once and
    launched with each layer's buffers, and the result is numpy's."""
    rng = np.random.default_rng(3)
    h = Tnode.create((8, 16), label="x", hosted=True)
    x = (rng.standard_normal((8, 16)) * 0.5).astype(np.float32)
    h.set_values(x)
    want = x.astype(np.float64)
    stmts = []
    for k in range(3):
        w = Tnode.create((16, 16), label=f"w{k}", hosted=True)
        b = Tnode.create((16,), label=f"b{k}", hosted=True)
        vw = (rng.standard_normal((16, 16)) * 0.3).astype(np.float32)
        vb = (rng.standard_normal(16) * 0.1).astype(np.float32)
        w.set_values(vw)
        b.set_values(vb)
        z, out = (
            Tnode.create((8, 16), label=f"z{k}"),
            Tnode.create((8, 16), label=f"h{k}", hosted=True),
        )
        stmts += [
            ir.accum(z, "add", h, w, op="mul", spec="bi,ih->bh"),
            ir.binop(z, "add", z, b, spec="bh,h->bh"),
            ir.unop(out, "tanh", z),
        ]
        want = np.tanh(want @ vw + vb)
        h = out
    code = backend.compile(ir.block(*stmts), name="layers")
    names = [k.name for k in code.native.rendered.kernels]
    assert len(set(names)) < len(names) / 2
    r = backend.link(backend.make_context(backend.new_stream(backend.get_device(0))), code)
    r()
    backend.to_host(r.context, h)
    np.testing.assert_allclose(h.get_values(), want, rtol=1e-5, atol=1e-5)
