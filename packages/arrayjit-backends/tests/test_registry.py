"""Registry, selection, the missing-backend stand-in, and slab planning."""

from pathlib import Path

import numpy as np
import pytest

from arrayjit_backends import (
    BackendEntry,
    BackendMissingError,
    MissingBackend,
    UsageError,
    available_backends,
    backend_names,
    fresh_backend,
    register,
)
from arrayjit_backends.registry import resolve_name, unregister
from arrayjit_backends.runtime.slab import Slab, aligned_bytes, plan_pool_segments


def test_interp_names_and_default_prefix() -> None:
    names = backend_names()
    assert {"interp", "sync_interp", "multicore_interp"} <= set(names)
    be = fresh_backend("interp")
    assert be.name == "multicore_interp" and be.scheduler == "multicore"
    be.finalize()
    be = fresh_backend("SYNC_Interp")
    assert be.name == "sync_interp"
    be.finalize()


def test_unknown_backend_lists_valid_names() -> None:
    with pytest.raises(UsageError, match=r"unknown backend 'vulkan'; valid names: .*sync_interp"):
        fresh_backend("vulkan")


def test_env_selects_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARRAYJIT_BACKEND", "sync_interp")
    be = fresh_backend()
    assert be.name == "sync_interp"
    be.finalize()
    monkeypatch.setenv("ARRAYJIT_BACKEND", "nope")
    with pytest.raises(UsageError, match="unknown backend 'nope'"):
        fresh_backend()


def test_missing_backend_contract() -> None:
    register(
        BackendEntry(
            "fakegpu",
            factory=lambda full: None,
            priority=-5,
            probe=lambda: "no fakegpu driver found",
            install_hint="pip install fakegpu",
        )
    )
    try:
        status = {s.name: s for s in available_backends()}
        assert not status["fakegpu"].available
        assert status["fakegpu"].reason == "no fakegpu driver found"
        be = fresh_backend("fakegpu")
        assert isinstance(be, MissingBackend)
        assert be.num_devices() == 0 and not be.is_initialized() and be.name == "fakegpu"
        be.finalize()
        for call in (
            be.initialize,
            lambda: be.get_device(0),
            lambda: be.compile(None),
            lambda: be.link(None, None),
            lambda: be.from_host(None, None),
            lambda: be.all_work(None),
            lambda: be.capabilities,
        ):
            with pytest.raises(
                BackendMissingError,
                match=r"backend 'fakegpu' is missing: no fakegpu driver found "
                r"\(to install: pip install fakegpu\)",
            ):
                call()
    finally:
        unregister("fakegpu")
    with pytest.raises(UsageError):
        resolve_name("fakegpu")


def test_broken_entry_is_reported_not_fatal() -> None:
    from arrayjit_backends.registry import _missing_factory

    register(
        BackendEntry(
            "broken", _missing_factory("broken", "import failed"), probe=lambda: "import failed"
        )
    )
    try:
        be = fresh_backend("broken")
        assert isinstance(be, MissingBackend) and be.reason == "import failed"
    finally:
        unregister("broken")


@pytest.mark.parametrize(
    "items,cap,placements,sizes",
    [
        ([(100, 1), (100, 4), (50, 8)], 1000, [(0, 0), (0, 100), (0, 200)], [250]),
        ([(600, 1), (600, 1)], 1000, [(0, 0), (1, 0)], [600, 600]),
        ([(1000, 1), (1, 1)], 1000, [(0, 0), (1, 0)], [1000, 1]),
        ([(5, 1), (8, 8)], 1000, [(0, 0), (0, 8)], [16]),
        # Buffers of 4 KiB or more start on a 64-byte boundary; smaller ones on their element.
        (
            [(4100, 4), (4096, 4), (10, 4), (4095, 1)],
            1 << 20,
            [(0, 0), (0, 4160), (0, 8256), (0, 8266)],
            [12361],
        ),
        ([], 1000, [], []),
    ],
)
def test_plan_pool_segments(items: list, cap: int, placements: list, sizes: list) -> None:  # type: ignore[type-arg]
    plan = plan_pool_segments(items, cap)
    assert list(plan.placements) == placements and list(plan.sizes) == sizes


def test_plan_pool_segments_oversize_names_the_node() -> None:
    with pytest.raises(UsageError, match=r"big#7 needs 2000 bytes, over the 1000-byte per-pool"):
        plan_pool_segments([(2000, 1)], 1000, ["big#7"])


def test_slab_accounting_and_alignment() -> None:
    freed: list[int] = []
    slab = Slab(aligned_bytes, lambda mem: freed.append(mem.nbytes))
    a, b = slab.alloc_pool(100), slab.alloc_pool(0)
    assert slab.used_bytes == 100 and a != b
    assert slab.pool(a).ctypes.data % 64 == 0
    slab.free_pool(a)
    slab.free_pool(a)
    assert slab.used_bytes == 0 and freed == [100]
    slab.free_all()
    assert freed == [100, 1] and slab.debug_info() == {"pools": 0, "used_bytes": 0}
    assert aligned_bytes(10, 128).ctypes.data % 128 == 0
    assert not np.any(aligned_bytes(10))


def test_unknown_setting_is_a_warning_suggesting_the_valid_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARRAYJIT_NO_CAHCE", "1")
    monkeypatch.setenv("ARRAYJIT_FROM_A_NEWER_RELEASE", "1")
    with pytest.warns(UserWarning) as record:
        be = fresh_backend("sync_interp")  # still works
    be.finalize()
    messages = sorted(str(w.message) for w in record)
    assert len(messages) == 2
    assert messages[0].startswith("unknown setting ARRAYJIT_FROM_A_NEWER_RELEASE ignored (valid")
    assert messages[1].startswith(
        "unknown setting ARRAYJIT_NO_CAHCE ignored; did you mean ARRAYJIT_NO_CACHE? (valid"
    )
    from arrayjit_backends import settings

    with pytest.raises(UsageError, match=r"unknown setting ARRAYJIT_NOPE"):
        settings.get("ARRAYJIT_NOPE")
    assert settings.get("ARRAYJIT_BACKEND", "sync_cc") == "sync_cc"  # an argument wins


def test_debug_dir_gets_ir_and_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from arrayjit_ir import ir
    from arrayjit_tnode import Tnode

    monkeypatch.setenv("ARRAYJIT_DEBUG_DIR", str(tmp_path / "debug"))
    be = fresh_backend("sync_interp")
    x = Tnode.create((3,), label="xin", hosted=True)
    y = Tnode.create((3,), label="yout", hosted=True)
    be.compile(ir.unop(y, "exp", x), name="expo")
    text = (tmp_path / "debug" / "sync_interp-expo.ir.txt").read_text()
    assert "yout" in text and "exp" in text and "xin" in text
    be.finalize()


def test_debug_dir_file_names_are_plain(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import warnings

    from arrayjit_ir import ir
    from arrayjit_tnode import Tnode

    # a name with a path separator tried to write into a sub-folder that does not exist
    monkeypatch.setenv("ARRAYJIT_DEBUG_DIR", str(tmp_path / "debug"))
    be = fresh_backend("sync_interp")
    x = Tnode.create((3,), label="xin", hosted=True)
    y = Tnode.create((3,), label="yout", hosted=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        be.compile(ir.unop(y, "exp", x), name="../up/and down")
        # names that differ after a dot were cut to one file name by with_suffix
        be.compile(ir.unop(y, "exp", x), name="step.fwd")
        be.compile(ir.unop(y, "exp", x), name="step.bwd")
        be.compile(ir.unop(y, "exp", x), name="x" * 300)  # was a warning: name too long
    names = sorted(p.name for p in (tmp_path / "debug").iterdir())
    assert len(names.pop()) == 200 + len(".ir.txt")  # the long one, cut with its digest
    assert names == [
        "sync_interp-.._up_and_down.ir.txt",
        "sync_interp-step.bwd.ir.txt",
        "sync_interp-step.fwd.ir.txt",
    ]
    be.finalize()


def test_unwritable_debug_dir_warns_once_and_compiles(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import warnings

    import numpy as np

    from arrayjit_ir import ir
    from arrayjit_tnode import Tnode

    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("ARRAYJIT_DEBUG_DIR", str(blocker / "debug"))
    be = fresh_backend("sync_interp")
    x = Tnode.create((3,), label="xin", hosted=True)
    y = Tnode.create((3,), label="yout", hosted=True)
    x.set_values(np.arange(3.0))
    with pytest.warns(UserWarning, match=r"ARRAYJIT_DEBUG_DIR=.*a_file/debug cannot be written"):
        code = be.compile(ir.unop(y, "neg", x), name="neg")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per folder
        be.compile(ir.unop(y, "neg", x), name="neg2")
    r = be.link(be.make_context(be.new_stream(be.get_device(0))), code)
    r()
    be.to_host(r.context, y)
    np.testing.assert_array_equal(y.get_values(), [0.0, -1.0, -2.0])
    be.finalize()


def test_interpreter_fallback_is_noted_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from arrayjit_backends import registry

    monkeypatch.delenv("ARRAYJIT_BACKEND", raising=False)
    saved = registry.entries()
    for e in saved:
        if e.name != "interp":
            registry.unregister(e.name)
    registry.register(
        BackendEntry("ghostcc", lambda full: None, priority=99, probe=lambda: "no ghost here")
    )
    registry._note_interpreter_fallback.cache_clear()
    try:
        with caplog.at_level("WARNING", logger="arrayjit_backends.registry"):
            assert registry.default_backend_name() == "multicore_interp"
            assert registry.default_backend_name() == "multicore_interp"
        notes = [
            r.getMessage() for r in caplog.records if "reference interpreter" in r.getMessage()
        ]
        assert notes == [
            "no compiler backend is usable here (ghostcc: no ghost here); the default backend "
            "is the reference interpreter, which is exact but slow"
        ]
    finally:
        registry.unregister("ghostcc")
        for e in saved:
            registry.register(e)
