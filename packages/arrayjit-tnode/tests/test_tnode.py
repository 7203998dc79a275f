"""Tensor nodes: creation, dims, precision, predicates, forcing, host values, registry."""

import gc
import threading

import ml_dtypes
import numpy as np
import pytest

from arrayjit_tnode import MemoryModeError, Tnode, UsageError, find, registered_nodes
from arrayjit_tnode import memory_mode as mm
from arrayjit_tnode import precision as P
from arrayjit_tnode.padding import Padding
from arrayjit_tnode.tnode import STACK_THRESHOLD_BYTES


def test_architecture_example() -> None:
    x = Tnode.create((64, 2), prec=P.single, label=["mlp", "x"])
    assert x.memory_mode is None and x.dims == (64, 2) and x.prec is P.single
    w = Tnode.create((2, 16), label="w", hosted=True)
    vals = np.random.default_rng(0).standard_normal((2, 16))
    w.set_values(vals)
    np.testing.assert_allclose(w.get_values(), vals.astype(np.float32))
    text = str(w)
    assert text.splitlines()[0] == w.header()
    assert "Hosted(Unset_hosted)" in text and "2x16" in text and "single" in text
    assert f"{vals[0, 0]:.4f}"[:5] in text


def test_ids_unique_and_identity() -> None:
    a, b = Tnode.create((1,)), Tnode.create((1,))
    assert a.id != b.id and a != b and a == a
    assert {a: 1, b: 2}[a] == 1
    assert sorted([b, a])[0] is a
    with pytest.raises(TypeError, match=r"Tnode.create"):
        Tnode()


def test_label_forms_and_debug_name() -> None:
    assert Tnode.create((1,), label="w").label == ["w"]
    tn = Tnode.create((1,), label=["mlp", "layer 1", "layer 1", "w!"])
    assert tn.debug_name == "mlp_layer1_w"
    assert tn.debug_label == f"mlp.layer 1.layer 1.w!#{tn.id}"
    anon = Tnode.create((1,))
    assert anon.debug_name == f"n{anon.id}"
    assert Tnode.create((1,), label="3d").debug_name == "n3d"
    anon.code_name = "custom"
    assert anon.debug_name == "custom"


def test_lazy_dims() -> None:
    calls = []

    def dims() -> tuple[int, int]:
        calls.append(1)
        return (3, 5)

    tn = Tnode.create(dims, label="lazy")
    assert not tn.dims_known and calls == []
    assert "(lazy)" in tn.header() and "(lazy)" in repr(tn)
    assert tn.dims == (3, 5) and tn.dims == (3, 5)
    assert calls == [1]
    assert tn.num_elems == 15 and tn.size_in_bytes == 60


def test_negative_dims_rejected() -> None:
    with pytest.raises(UsageError, match=r"bad#\d+: dims must be non-negative, got \(2, -1\)"):
        Tnode.create((2, -1), label="bad")


def test_scalar_and_empty_nodes() -> None:
    s = Tnode.create((), label="s", hosted=True)
    assert s.num_elems == 1 and s.dims == ()
    s.set_values(np.float32(2.5))
    assert s.get_values() == np.float32(2.5)
    assert s.get_value(()) == 2.5
    e = Tnode.create((0, 3), label="e", hosted=True)
    assert e.num_elems == 0 and e.size_in_bytes == 0
    assert e.get_values().shape == (0, 3)
    assert "scalar" in s.header()


def test_padding_dims_and_values() -> None:
    tn = Tnode.create((2, 3), label="p", hosted=True, padding=Padding(((1, 1), (0, 2)), -1.0))
    assert tn.dims == (4, 5) and tn.dims_without_padding == (2, 3)
    arr = tn.array
    assert arr is not None and arr.shape == (4, 5)
    assert arr[0, 0] == -1.0 and arr[1, 0] == 0.0
    tn.set_values(np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(tn.get_values(), np.arange(6).reshape(2, 3))
    assert tn.array[1:3, 0:3].sum() == 15 and tn.array[0].sum() == -5  # type: ignore[index]
    tn.set_value((1, 2), 9.0)
    assert tn.get_value((1, 2)) == 9.0 and tn.array[2, 2] == 9.0  # type: ignore[index]
    assert "logical 2x3" in tn.header()


def test_padding_rank_mismatch() -> None:
    with pytest.raises(UsageError, match=r"padding has 1 axes but the node has 2 dims"):
        Tnode.create((2, 3), label="q", padding=Padding(((1, 1),)))
    with pytest.raises(UsageError, match="padding must be non-negative"):
        Tnode.create((2,), label="q", padding=Padding(((-1, 0),)))


def test_padding_is_one_class_under_every_import_path() -> None:
    import arrayjit_tnode
    import arrayjit_tnode.tnode

    assert arrayjit_tnode.Padding is Padding and arrayjit_tnode.tnode.Padding is Padding


def test_delayed_precision() -> None:
    tn = Tnode.create((2,), label="d")
    assert not tn.prec_specified
    tn.update_prec("double")
    assert tn.prec is P.double and tn.prec_specified
    tn.update_prec(P.double)  # same: fine
    with pytest.raises(UsageError, match=r"d#\d+: precision already specified as double"):
        tn.update_prec("half")


def test_precision_fixed_once_read() -> None:
    tn = Tnode.create((2,), label="r")
    assert tn.prec is P.single
    with pytest.raises(UsageError, match=r"precision single was already used"):
        tn.update_prec("half")


def test_unknown_precision() -> None:
    with pytest.raises(UsageError, match="unknown precision 'f128'"):
        Tnode.create((1,), prec="f128")


def test_initial_memory_mode_and_hosted_conflict() -> None:
    tn = Tnode.create((1,), label="v", memory_mode=(mm.Virtual(), 5))
    assert tn.known_virtual() and tn.memory_mode_provenance == 5
    with pytest.raises(MemoryModeError, match=r"v#\d+: memory mode Hosted.*provenance 0.*Virtual"):
        Tnode.create((1,), label="v", memory_mode=(mm.Virtual(), 5), hosted=True)


PREDICATES = [
    # mode, virtual, non_virtual, not_materialized, constant, volatile, unspecified, hosted
    (None, False, False, False, False, False, True, False),
    (mm.Effectively_constant(), False, False, False, True, False, True, False),
    (mm.Virtual(), True, False, True, False, False, False, False),
    (mm.Never_virtual(), False, True, False, False, False, True, False),
    (mm.Local(), False, True, True, False, False, False, False),
    (mm.Device_only(), False, True, False, False, False, False, False),
    (mm.On_device(), False, True, False, False, False, False, False),
    (mm.Materialized(), False, True, False, False, False, False, False),
    (mm.Hosted(mm.Constant()), False, True, False, True, False, False, True),
    (mm.Hosted(mm.Volatile()), False, True, False, False, True, False, True),
]


@pytest.mark.parametrize("row", PREDICATES, ids=lambda r: str(r[0]))
def test_predicates(row: tuple) -> None:  # type: ignore[type-arg]
    mode, virt, nonvirt, notmat, const, vol, unspec, hosted = row
    tn = Tnode.create((2,), label="pred")
    if mode is not None:
        tn.update_memory_mode(mode, 1)
    assert tn.known_virtual() is virt
    assert tn.known_non_virtual() is nonvirt
    assert tn.known_not_materialized() is notmat
    assert tn.known_constant() is const
    assert tn.known_volatile() is vol
    assert tn.mode_is_unspecified() is unspec
    assert tn.is_hosted() is hosted


def test_cross_stream_predicates() -> None:
    local = Tnode.create((2,), memory_mode=(mm.Local(), 1))
    assert local.known_non_cross_stream() and not local.potentially_cross_stream()
    const = Tnode.create((2,), memory_mode=(mm.Hosted(mm.Constant()), 1))
    assert const.potentially_cross_stream() and not const.known_non_cross_stream()
    plain = Tnode.create((2,), memory_mode=(mm.On_device(), 1))
    assert not plain.potentially_cross_stream() and not plain.known_non_cross_stream()


SMALL = STACK_THRESHOLD_BYTES // 4
BIG = SMALL + 1


@pytest.mark.parametrize(
    "mode,size,expected",
    [
        (None, SMALL, mm.Virtual()),
        (mm.Effectively_constant(), SMALL, mm.Virtual()),
        (mm.Never_virtual(), SMALL, mm.Local()),
        (mm.Never_virtual(), BIG, mm.On_device()),
        (mm.Device_only(), SMALL, mm.Local()),
        (mm.Device_only(), BIG, mm.On_device()),
        (mm.Materialized(), SMALL, mm.On_device()),
        (mm.Local(), SMALL, mm.Local()),
        (mm.Hosted(), SMALL, mm.Hosted()),
        (mm.Virtual(), BIG, mm.Virtual()),
    ],
)
def test_default_to_most_local(mode: mm.MemoryMode | None, size: int, expected: object) -> None:
    tn = Tnode.create((size,), label="f")
    if mode is not None:
        tn.update_memory_mode(mode, 7)
    tn.default_to_most_local(3)
    assert tn.memory_mode == expected
    if mode is not None and mode != expected:
        assert tn.memory_mode_provenance == 7003


def test_force_functions() -> None:
    a = Tnode.create((2,))
    assert a.is_virtual_force(1) and a.known_virtual()
    b = Tnode.create((2,), memory_mode=(mm.Never_virtual(), 1))
    assert not b.is_virtual_force(2) and b.memory_mode == mm.Never_virtual()
    assert not b.is_materialized_force(3) and b.memory_mode == mm.Local()
    c = Tnode.create((2,), memory_mode=(mm.Materialized(), 1))
    assert c.is_in_context_force(2) and c.memory_mode == mm.On_device()
    assert not c.is_hosted_force(3)
    d = Tnode.create((2,), hosted=True)
    assert d.is_hosted_force(1) and d.is_in_context_force(1) and d.is_materialized_force(1)
    e = Tnode.create((2,), memory_mode=(mm.Effectively_constant(), 1))
    assert not e.is_in_context_force(2) and e.known_virtual()


@pytest.mark.parametrize("prec", [p for p in P.Prec])
def test_host_roundtrip_every_precision(prec: P.Prec) -> None:
    tn = Tnode.create((3, 2), prec=prec, label="rt", hosted=True)
    shape = prec.host_shape((3, 2))
    if prec.is_float:
        vals = (np.arange(6).reshape(shape) - 2.5).astype(prec.numpy_dtype)
    else:
        vals = np.arange(int(np.prod(shape))).reshape(shape).astype(prec.numpy_dtype)
    tn.set_values(vals)
    got = tn.get_values()
    assert got.dtype == prec.numpy_dtype and got.shape == shape
    np.testing.assert_array_equal(got.astype(np.float64), vals.astype(np.float64))


def test_set_values_converts_within_kind() -> None:
    tn = Tnode.create((2,), prec="bfloat16", hosted=True)
    tn.set_values(np.array([1.0, 3.14159]))
    np.testing.assert_array_equal(
        tn.get_values(), np.array([1.0, 3.140625], dtype=ml_dtypes.bfloat16)
    )
    ints = Tnode.create((2,), prec="int32", hosted=True)
    ints.set_values([1, 2])
    assert ints.get_values().tolist() == [1, 2]


def test_set_values_errors() -> None:
    tn = Tnode.create((2, 3), label="w", hosted=True)
    with pytest.raises(UsageError, match=r"w#\d+ expects values of shape \[2, 3\], got \[3, 2\]"):
        tn.set_values(np.zeros((3, 2)))
    ints = Tnode.create((2,), prec="int32", label="i", hosted=True)
    with pytest.raises(
        UsageError, match=r"set_values: node i#\d+: values of dtype float64 do not convert to "
    ):
        ints.set_values(np.array([1.5, 2.0]))


def test_reading_a_node_that_is_not_hosted() -> None:
    tn = Tnode.create((2,), label="dev")
    for call in (
        tn.get_values,
        lambda: tn.set_values([1.0, 2.0]),
        lambda: tn.get_value((0,)),
        lambda: tn.set_value((0,), 1.0),
        lambda: tn.points_1d(0),
    ):
        with pytest.raises(UsageError, match=r"node dev#\d+ is not hosted"):
            call()
    assert tn.array is None
    assert str(tn).endswith("(not hosted)")


def test_index_errors() -> None:
    tn = Tnode.create((2, 3), label="ix", hosted=True)
    with pytest.raises(
        UsageError, match=r"ix#\d+: index \[2, 0\] is out of bounds for dims \[2, 3\]"
    ):
        tn.get_value((2, 0))
    with pytest.raises(UsageError, match="out of bounds"):
        tn.set_value((0,), 1.0)
    with pytest.raises(UsageError, match="out of bounds"):
        tn.get_value((0, -1))


def test_get_value_uint4x32_refused() -> None:
    tn = Tnode.create((2,), prec="uint4x32", label="rng", hosted=True)
    with pytest.raises(UsageError, match="uint4x32; use get_values"):
        tn.get_value((0,))


def test_points() -> None:
    tn = Tnode.create((3, 2), label="pts", hosted=True)
    tn.set_values(np.array([[0, 1], [2, 3], [4, 5]], dtype=np.float32))
    np.testing.assert_array_equal(tn.points_1d(1), [1, 3, 5])
    np.testing.assert_array_equal(tn.points_2d(0, 1), [[0, 1], [2, 3], [4, 5]])
    np.testing.assert_array_equal(tn.points_1d(2, from_axis=0), [4, 5])
    with pytest.raises(UsageError, match=r"axis 1 has 2 entries, coordinate 2 is out of range"):
        tn.points_2d(0, 2)
    s = Tnode.create((), hosted=True)
    with pytest.raises(UsageError, match="is a scalar"):
        s.points_1d(0)


def test_set_values_marks_devices_lagging() -> None:
    tn = Tnode.create((2,), hosted=True)
    tn.devices_not_lagging_host.update({1, 2})
    tn.set_values([1.0, 2.0])
    assert tn.devices_not_lagging_host == set()
    tn.devices_not_lagging_host.add(3)
    tn.set_value((0,), 5.0)
    assert tn.devices_not_lagging_host == set()


def test_a_constant_on_a_device_refuses_host_writes() -> None:
    c = Tnode.create((2,), label="c", memory_mode=(mm.Hosted(mm.Constant()), 1))
    c.set_values([1.0, 2.0])  # before any device holds it: how a constant gets its values
    c.set_value((1,), 3.0)
    c.devices_not_lagging_host.add(7)  # what a backend's upload records
    msg = r"node c#\d+ is a constant already on a device \(memory mode Hosted\(Constant\)"
    with pytest.raises(UsageError, match=rf"^set_values: {msg}"):
        c.set_values([5.0, 6.0])
    with pytest.raises(UsageError, match=rf"^set_value: {msg}"):
        c.set_value((0,), 5.0)
    np.testing.assert_array_equal(c.get_values(), [1.0, 3.0])  # nothing was written
    assert c.devices_not_lagging_host == {7}  # and the device does not lag
    v = Tnode.create((2,), label="v", hosted=True)  # not a constant: a host write, as ever
    v.devices_not_lagging_host.add(7)
    v.set_values([5.0, 6.0])
    assert v.devices_not_lagging_host == set()


def test_prepare_read_waits_and_transfers_once() -> None:
    tn = Tnode.create((2,), hosted=True)
    log: list[str] = []
    done = [False]

    def sync() -> None:
        log.append("sync")
        done[0] = True

    def transfer() -> None:
        log.append("transfer")
        tn.array[:] = [7.0, 8.0]  # type: ignore[index]

    tn.prepare_read(lambda: done[0], sync, transfer)
    assert tn.get_values().tolist() == [7.0, 8.0]
    assert log == ["sync", "transfer"]
    tn.get_values()
    assert log == ["sync", "transfer"]  # the hook runs once


def test_prepare_read_skips_sync_when_done() -> None:
    tn = Tnode.create((2,), hosted=True)
    log: list[str] = []
    tn.prepare_read(lambda: True, lambda: log.append("sync"))
    tn.get_value((0,))
    assert log == []


def test_prepare_write_waits_before_writing() -> None:
    tn = Tnode.create((2,), hosted=True)
    seen: list[list[float]] = []

    def sync() -> None:
        seen.append(tn.array.tolist())  # type: ignore[union-attr]

    tn.prepare_write(lambda: False, sync)
    tn.set_values([3.0, 4.0])
    assert seen == [[0.0, 0.0]]  # the pending reader saw the old values
    assert tn.get_values().tolist() == [3.0, 4.0]
    tn.prepare_write(lambda: True, sync)
    tn.set_value((1,), 1.0)
    assert len(seen) == 1


def test_registry_find_and_weakness() -> None:
    tn = Tnode.create((1,), label="reg")
    ident = tn.id
    assert find(ident) is tn
    assert tn in registered_nodes()
    del tn
    gc.collect()
    assert find(ident) is None


def test_thread_safe_ids_and_registry() -> None:
    made: list[list[Tnode]] = [[] for _ in range(8)]

    def work(k: int) -> None:
        for _ in range(200):
            made[k].append(Tnode.create((1,)))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    nodes = [tn for group in made for tn in group]
    assert len({tn.id for tn in nodes}) == 1600
    assert all(find(tn.id) is tn for tn in nodes)


def test_backend_info_and_repr() -> None:
    tn = Tnode.create((2, 2), label="b")
    tn.backend_info["cc"] = "param"
    assert tn.backend_info == {"cc": "param"}
    assert repr(tn) == f"<Tnode b#{tn.id} (2, 2)>"
    tn.update_memory_mode(mm.On_device(), 42)
    assert f"#{tn.id} b [On_device(Unset)/42] 2x2 single 16 bytes" == tn.header()


def test_large_array_print_is_elided() -> None:
    tn = Tnode.create((1000,), hosted=True)
    assert "..." in str(tn)


def test_demo_runs_and_checks(capsys: pytest.CaptureFixture[str]) -> None:
    from arrayjit_tnode import demo

    assert demo.main() == 0
    out = capsys.readouterr().out
    assert "all checks passed" in out and "FAILED" not in out


def test_update_prec_only_if() -> None:
    tn = Tnode.create((2,), label="oi")
    tn.update_prec("half", only_if=lambda p: p is P.double)
    assert tn.prec_state == "default"
    tn.update_prec("half", only_if=lambda p: p is P.single)
    assert tn.prec_state == "specified" and tn.prec is P.half
    # A failing condition leaves even a conflicting request alone.
    tn.update_prec("double", only_if=lambda p: p is P.single)
    assert tn.prec is P.half


def test_update_infer_prec() -> None:
    tn = Tnode.create((2,), label="inf")
    tn.update_infer_prec("half")
    assert tn.prec_state == "inferred" and not tn.prec_specified
    tn.update_infer_prec("bfloat16")  # promote(half, bfloat16)
    tn.update_infer_prec("int32", only_if=lambda p: p is P.half)  # condition fails
    assert tn.prec is P.bfloat16
    with pytest.raises(
        UsageError, match=r"inf#\d+: precision bfloat16 was already used, cannot infer"
    ):
        tn.update_infer_prec("double")
    tn.update_infer_prec("half")  # promotes to bfloat16: unchanged, fine after forcing
    spec = Tnode.create((2,), prec="byte")
    spec.update_infer_prec("double")  # specified wins
    assert spec.prec is P.byte and spec.prec_state == "specified"
    inferred = Tnode.create((2,))
    inferred.update_infer_prec("double")
    inferred.update_prec("half")  # an explicit precision replaces an inference
    assert inferred.prec is P.half and inferred.prec_state == "specified"


def test_same_precision_after_forcing_is_fine() -> None:
    tn = Tnode.create((2,))
    assert tn.prec is P.single
    tn.update_prec("single")
    assert tn.prec_specified


def test_set_value_checks_the_value() -> None:
    ints = Tnode.create((3,), prec="byte", label="b8", hosted=True)
    ints.set_value((0,), 7)
    ints.set_value((1,), True)
    assert ints.get_values().tolist() == [7, 1, 0]
    assert isinstance(ints.get_value((0,)), int)
    with pytest.raises(UsageError, match=r"set_value: node b8#\d+: values of dtype float64"):
        ints.set_value((0,), 1.5)
    with pytest.raises(UsageError, match=r"value 300 is out of the range \[0, 255\]"):
        ints.set_value((0,), 300)
    with pytest.raises(UsageError, match=r"expected one number, got an array of shape \[2\]"):
        ints.set_value((0,), [1, 2])
    assert ints.get_values().tolist() == [7, 1, 0]
    f = Tnode.create((1,), prec="fp8", hosted=True)
    f.set_value((0,), 1.3)
    assert f.get_value((0,)) == 1.25 and isinstance(f.get_value((0,)), float)


def test_set_value_uint4x32_refused() -> None:
    tn = Tnode.create((2,), prec="uint4x32", label="key", hosted=True)
    with pytest.raises(UsageError, match=r"key#\d+ is uint4x32; use set_values"):
        tn.set_value((0,), 1)
    tn.set_values(np.arange(8, dtype=np.uint32).reshape(2, 4))
    assert tn.get_values()[1].tolist() == [4, 5, 6, 7]


def test_set_values_out_of_range_integers() -> None:
    tn = Tnode.create((2,), prec="uint16", label="u", hosted=True)
    with pytest.raises(UsageError, match=r"u#\d+: value -3 is out of the range"):
        tn.set_values([-3, 4])
    tn.set_values(np.array([65535, 0], dtype=np.int64))
    assert tn.get_values().tolist() == [65535, 0]


@pytest.mark.parametrize("index", [(0.5, 0), ("a", 0), (None, 1)])
def test_index_must_be_integers(index: tuple) -> None:  # type: ignore[type-arg]
    tn = Tnode.create((2, 2), label="ii", hosted=True)
    with pytest.raises(UsageError, match=r"ii#\d+: index .* is not a sequence of integers"):
        tn.get_value(index)


def test_numpy_integer_indices() -> None:
    tn = Tnode.create((2, 2), hosted=True)
    tn.set_value((np.int64(1), np.int32(0)), 4.0)
    assert tn.get_value([1, 0]) == 4.0


def test_get_values_is_a_copy() -> None:
    tn = Tnode.create((2,), hosted=True)
    got = tn.get_values()
    got[0] = 5.0
    assert tn.get_values().tolist() == [0.0, 0.0]


def test_padding_value_none_leaves_margins_zero() -> None:
    tn = Tnode.create((2,), hosted=True, padding=Padding(((1, 2),), None))
    assert tn.array is not None and tn.array.tolist() == [0.0] * 5
    assert tn.logical_slices() == (slice(1, 3),)
    assert Tnode.create((2, 3)).logical_slices() == (slice(None), slice(None))


def test_lazy_dims_with_padding_and_errors() -> None:
    tn = Tnode.create(lambda: [4], label="lp", padding=Padding(((2, 0),)))
    assert tn.dims_without_padding == (4,) and tn.dims == (6,)
    bad = Tnode.create(lambda: (-1,), label="lbad")
    with pytest.raises(UsageError, match=r"lbad#\d+: dims must be non-negative"):
        _ = bad.dims


def test_lazy_dims_forced_once_across_threads() -> None:
    calls: list[int] = []
    gate = threading.Event()

    def dims() -> tuple[int]:
        gate.wait()
        calls.append(1)
        return (7,)

    tn = Tnode.create(dims)
    results: list[tuple[int, ...]] = []
    threads = [threading.Thread(target=lambda: results.append(tn.dims)) for _ in range(8)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert calls == [1] and results == [(7,)] * 8


def test_array_setter_and_lazy_allocation() -> None:
    tn = Tnode.create((2,), prec="int32", hosted=True)
    assert tn._array is None  # allocated only when first needed
    assert tn.array is not None and tn.array.dtype == np.int32
    tn.array = np.array([5, 6], dtype=np.int32)
    assert tn.get_values().tolist() == [5, 6]
    later = Tnode.create((3,))
    assert later.array is None
    later.update_memory_mode(mm.Hosted(mm.Volatile()), 1)
    assert later.array is not None and later.array.shape == (3,)


def test_str_reads_through_the_hook() -> None:
    tn = Tnode.create((2,), label="hk", hosted=True)

    def transfer() -> None:
        tn.array[:] = [1.5, 2.5]  # type: ignore[index]

    tn.prepare_read(lambda: True, lambda: None, transfer)
    text = str(tn)
    assert "1.5" in text and "2.5" in text


def test_all_nodes_alias_and_find_unknown() -> None:
    from arrayjit_tnode import all_nodes

    tn = Tnode.create((1,))
    assert tn in all_nodes()
    assert find(-5) is None


def test_hash_and_equality_by_id_only() -> None:
    a = Tnode.create((1,), label="same")
    b = Tnode.create((1,), label="same")
    assert a != b and a.id != b.id
    assert a != "same" and (a == a.id) is False
    assert len({a, b, a}) == 2


@pytest.mark.parametrize(
    "dims,message",
    [
        ((2**32, 2**32), r"dims \[4294967296, 4294967296\] give 18446744073709551616 elements"),
        ((2**64,), r"more than 64-bit indexing can address"),
        ((2.7,), r"dims must be non-negative integers, got 2.7 \(float\)"),
        ((True, 2), r"got True \(bool\)"),
        (("3",), r"got '3' \(str\)"),
        ((-1,), r"dims must be non-negative"),
        ("34", r"dims must be a sequence of integers"),
        (5, r"dims must be a sequence of integers"),
    ],
)
def test_dims_are_exact_non_negative_integers(dims: object, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        Tnode.create(dims)  # type: ignore[arg-type]


def test_dims_accept_numpy_integers_and_sizes_are_exact() -> None:
    tn = Tnode.create((np.int64(3), np.uint8(4)))
    assert tn.dims == (3, 4) and all(type(d) is int for d in tn.dims)
    big = Tnode.create((2**20, 2**20, 2**10), prec="byte")  # 2^50 cells: exact, never wrapped
    assert big.num_elems == 2**50 and big.size_in_bytes == 2**50
    with pytest.raises(UsageError, match="dims must be non-negative integers"):
        Tnode.create(lambda: (2.5,)).dims  # noqa: B018 (lazy dims are checked when forced)


def test_padding_margins_are_integers() -> None:
    with pytest.raises(UsageError, match=r"padding must be non-negative integers, got 1.5"):
        Tnode.create((3,), padding=Padding(((1.5, 0),)))  # type: ignore[arg-type]


def test_set_values_refuses_ragged_lists() -> None:
    tn = Tnode.create((2, 2), hosted=True, label="r")
    with pytest.raises(UsageError, match=r"set_values: node r#\d+: values are not an array"):
        tn.set_values([[1.0, 2.0], [3.0]])
    with pytest.raises(UsageError, match=r"values are not an array of numbers"):
        tn.set_values([[object(), 1], [2, 3]])
    tn.set_values([[1, 2], [3, 4]])
    np.testing.assert_array_equal(tn.get_values(), [[1, 2], [3, 4]])


def test_a_write_waits_for_a_pending_copy_to_the_host_and_spends_it() -> None:
    tn = Tnode.create((2,), hosted=True, label="w")
    log: list[str] = []

    def land() -> None:  # the copy to the host lands before the caller's write
        log.append("sync")
        tn.array[...] = 5.0  # type: ignore[index]

    tn.prepare_read(lambda: False, land, lambda: log.append("transfer"))
    tn.set_values([1.0, 2.0])
    assert log == ["sync", "transfer"]
    np.testing.assert_array_equal(tn.get_values(), [1.0, 2.0])  # the hook is spent
    assert log == ["sync", "transfer"]


def test_a_write_after_a_failed_copy_to_the_host_wins() -> None:
    tn = Tnode.create((2,), hosted=True, label="f")

    def failing_sync() -> None:
        raise RuntimeError("copy skipped")

    tn.prepare_read(lambda: False, failing_sync, lambda: pytest.fail("no transfer"))
    tn.set_value((0,), 3.0)  # the failed copy never lands: the write does not raise
    np.testing.assert_array_equal(tn.get_values(), [3.0, 0.0])


def test_a_read_hook_that_fails_stays_until_replaced() -> None:
    tn = Tnode.create((2,), hosted=True, label="h")
    calls: list[int] = []

    def failing_sync() -> None:
        calls.append(1)
        raise RuntimeError("copy skipped")

    tn.prepare_read(lambda: False, failing_sync)
    for _ in range(2):  # every read reports it, none returns the stale array
        with pytest.raises(RuntimeError, match="copy skipped"):
            tn.get_values()
    assert calls == [1, 1]
    tn.prepare_read(lambda: True, failing_sync)  # a later copy that completed
    np.testing.assert_array_equal(tn.get_values(), [0.0, 0.0])
