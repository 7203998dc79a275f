"""No routine reads or writes outside its nodes, on every backend.

Static indices get, at compile, the range that keeps every access in bounds, and every binding
is checked against it whichever way it is set; hand-built projections whose indices leave a
node are refused at compile with the node, axis and range; code compiled by one kind of backend
is refused at link by another; a backend dropped without ``finalize`` leaves no thread behind.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from arrayjit_backends import UsageError
from arrayjit_conformance.harness import hosted, new_context
from arrayjit_conformance.plugin import fresh_or_skip
from arrayjit_ir import ir, ops
from arrayjit_ir.assignments import Accum_op
from arrayjit_ir.indexing import Affine, Iterator, StaticSymbol, fresh_symbol
from arrayjit_ir.projections import Projections
from arrayjit_tnode import Tnode

ROWS = np.arange(12.0, dtype=np.float32).reshape(3, 4)


def _slice_routine(backend: Any, symbol: StaticSymbol) -> tuple[Any, Tnode]:
    data, row = hosted((3, 4), "data"), hosted((4,), "row")
    data.set_values(ROWS)
    comp = ir.fetch(row, ir.Slice(symbol, data))
    code = backend.compile(comp, name="pick", bindings=[StaticSymbol("i")])
    return backend.link(new_context(backend), code), row


def test_unranged_static_index_gets_the_sliced_nodes_range(backend: Any) -> None:
    r, row = _slice_routine(backend, StaticSymbol("i"))
    assert r.bindings.ranges() == {"i": 3}
    for bad in (3, 7, 10**9, -1):
        with pytest.raises(UsageError, match=rf"routine pick: static index i = {bad} is out of"):
            r.bindings["i"] = bad
    assert r.bindings["i"] == 0
    for k in (2, 0, 1):
        r.bindings["i"] = k
        r()
        backend.to_host(r.context, row)
        np.testing.assert_array_equal(row.get_values(), ROWS[k])


def test_declared_range_larger_than_the_node_is_refused(backend: Any) -> None:
    data, row = hosted((3, 4), "data"), hosted((4,), "row")
    comp = ir.fetch(row, ir.Slice(StaticSymbol("i", range=100), data))
    with pytest.raises(
        UsageError, match=r"node data#\d+ axis 0 is indexed by i, ranging over 0\.\.99 .*size 3"
    ):
        backend.compile(comp, name="pick", bindings=[StaticSymbol("i")])
    with pytest.raises(UsageError, match=r"ranging over 0\.\.3 .*size 3"):
        backend.compile(
            ir.fetch(row, ir.Slice(StaticSymbol("i"), data)),
            name="pick",
            bindings=[StaticSymbol("i", range=4)],
        )


def test_smaller_declared_range_is_kept(backend: Any) -> None:
    r, _ = _slice_routine(backend, StaticSymbol("i", range=2))
    assert r.bindings.ranges() == {"i": 2}
    with pytest.raises(UsageError, match=r"valid: 0\.\.1"):
        r.bindings["i"] = 2


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b.update({"i": 1000}),
        lambda b: b.update(i=1000),
        lambda b: b.setdefault("j", 1000),
        lambda b: b.__ior__({"i": 1000}),
        lambda b: b.update({"i": 2.7}),
        lambda b: b.update({"i": True}),
        lambda b: b.pop("i"),
        lambda b: b.clear(),
        lambda b: b.update({"j": 1}),
    ],
    ids=["update", "update-kw", "setdefault", "ior", "float", "bool", "pop", "clear", "unknown"],
)
def test_bindings_cannot_be_bypassed(backend: Any, mutate: Any) -> None:
    r, row = _slice_routine(backend, StaticSymbol("i"))
    r.bindings["i"] = 2
    with pytest.raises(UsageError, match=r"routine pick(:| has no) static index"):
        mutate(r.bindings)
    assert dict(r.bindings) == {"i": 2}
    assert not isinstance(r.bindings, dict)
    r.bindings |= {"i": np.int64(1)}  # the checked ways still work
    r()
    backend.to_host(r.context, row)
    np.testing.assert_array_equal(row.get_values(), ROWS[1])


def _affine_copy(dst: Tnode, src: Tnode, extent: int, dst_off: int, src_off: int) -> Accum_op:
    """``dst[i + dst_off] = src[i + src_off]`` for ``i`` in ``0..extent-1`` (hand-built)."""
    i = fresh_symbol()
    return Accum_op(
        dst,
        ops.Unop.identity,
        (src,),
        None,
        False,
        Projections(
            product_space=(extent,),
            product_iterators=(i,),
            project_lhs=(Affine(((1, i),), dst_off),),
            project_rhs=((Affine(((1, i),), src_off),),),
        ),
    )


@pytest.mark.parametrize(
    "extent,dst_off,src_off,message",
    [
        (100000, 0, 0, r"a write of node y#\d+ axis 0 is indexed by i\d+, ranging over 0\.\.99999"),
        (8, 0, 100, r"a read of node x#\d+ axis 0 is indexed by i\d+ \+ 100, ranging over 100"),
        (8, 0, -4, r"a read of node x#\d+ axis 0 is indexed by i\d+ - 4, ranging over -4\.\.3"),
        (8, 6, 0, r"a write of node y#\d+ axis 0 is indexed by i\d+ \+ 6, ranging over 6\.\.13"),
    ],
)
def test_hand_built_out_of_bounds_indices_are_refused(
    backend: Any, extent: int, dst_off: int, src_off: int, message: str
) -> None:
    x, y = hosted((8,), "x"), hosted((8,), "y")
    with pytest.raises(UsageError, match=message + r".*size 8"):
        backend.compile(_affine_copy(y, x, extent, dst_off, src_off), name="oob")


def test_hand_built_in_bounds_shift_runs(backend: Any) -> None:
    x, y = hosted((8,), "x"), hosted((8,), "y")
    x.set_values(np.arange(8.0))
    r = backend.link(new_context(backend), backend.compile(_affine_copy(y, x, 5, 3, 0), "shift"))
    r()
    backend.to_host(r.context, y)
    expected = np.zeros(8, np.float32)
    expected[3:] = np.arange(5.0)
    np.testing.assert_array_equal(y.get_values(), expected)


def test_static_symbol_inside_an_affine_index(backend: Any) -> None:
    """``y[j] = x[2*s + j]`` over ``j < 4`` with ``x`` of 10 cells: ``s`` may be 0..3."""
    x, y = hosted((10,), "x"), hosted((4,), "y")
    x.set_values(np.arange(10.0) * 10)
    s, j = StaticSymbol("s"), fresh_symbol()
    comp = Accum_op(
        y,
        ops.Unop.identity,
        (x,),
        None,
        False,
        Projections((4,), (j,), (Iterator(j),), ((Affine(((2, s), (1, j)), 0),),)),
    )
    r = backend.link(new_context(backend), backend.compile(comp, "win", bindings=[s]))
    assert r.bindings.ranges() == {"s": 4}
    with pytest.raises(UsageError, match=r"valid: 0\.\.3"):
        r.bindings["s"] = 4
    r.bindings["s"] = 3
    r()
    backend.to_host(r.context, y)
    np.testing.assert_array_equal(y.get_values(), np.arange(6.0, 10.0) * 10)


def _other_kind(backend: Any) -> str:
    return "sync_interp" if backend.runtime.code_kind() != "interp" else ""


def test_code_of_another_backend_kind_is_refused_at_link(backend: Any) -> None:
    other_name = _other_kind(backend)
    if not other_name:
        pytest.skip("the interpreter backends all run interpreter code: no other kind here")
    other = fresh_or_skip(other_name)
    try:
        x, y = hosted((4,), "x"), hosted((4,), "y")
        comp = ir.unop(y, "neg", x)
        foreign = other.compile(comp, name="foreign")
        with pytest.raises(
            UsageError, match=r"link foreign: the code was compiled for interp, not for backend "
        ):
            backend.link(new_context(backend), foreign)
        mine = backend.compile(comp, name="mine")
        with pytest.raises(
            UsageError,
            match=r"link mine: the code was compiled for .*, not for backend sync_interp",
        ):
            other.link(new_context(other), mine)
        # Both backends still work.
        x.set_values(np.arange(4.0))
        r = backend.link(new_context(backend), mine)
        r()
        backend.to_host(r.context, y)
        np.testing.assert_array_equal(y.get_values(), -np.arange(4.0))
    finally:
        other.finalize()


def _lifecycle(name: str, comp: Any, y: Tnode) -> weakref.ref[Any]:
    b = fresh_or_skip(name)
    r = b.link(new_context(b), b.compile(comp, name="life"))
    r()
    b.to_host(r.context, y)
    y.get_values()
    return weakref.ref(b)


def test_dropped_backends_leave_no_thread_and_are_collected(backend_name: str) -> None:
    x, y = hosted((64,), "x"), hosted((64,), "y")
    x.set_values(np.arange(64.0))
    comp = ir.unop(y, "relu", x)
    _lifecycle(backend_name, comp, y)  # first use: driver and compiler threads start here
    gc.collect()
    before = {t.ident for t in threading.enumerate()}
    refs = [_lifecycle(backend_name, comp, y) for _ in range(20)]
    gc.collect()
    assert [r for r in refs if r() is not None] == []
    leftover = [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert leftover == []


def test_finalize_stops_every_thread_it_started(backend_name: str) -> None:
    before = {t.ident for t in threading.enumerate()}
    b = fresh_or_skip(backend_name)
    n = 1 << 21 if "llvm" in backend_name else 64  # llvm: big enough for its helper crew
    x, y = hosted((n,), "x"), hosted((n,), "y")
    x.set_values(np.linspace(-1.0, 1.0, n))
    r = b.link(new_context(b), b.compile(ir.unop(y, "relu", x), name="big"))
    r()
    b.to_host(r.context, y)
    np.testing.assert_array_equal(y.get_values(), np.maximum(x.get_values(), 0))
    b.finalize()
    ours = [
        t.name
        for t in threading.enumerate()
        if t.ident not in before and t.is_alive() and t.name.startswith("arrayjit")
    ]
    assert ours == []


def test_assigning_bindings_goes_through_the_checks(backend: Any) -> None:
    r, row = _slice_routine(backend, StaticSymbol("i"))
    with pytest.raises(UsageError, match=r"static index i = 1000 is out of range"):
        r.bindings = {"i": 1000}
    assert isinstance(r.bindings, Mapping) and dict(r.bindings) == {"i": 0}
    r.bindings = {"i": 2}
    r()
    backend.to_host(r.context, row)
    np.testing.assert_array_equal(row.get_values(), ROWS[2])
