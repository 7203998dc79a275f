"""Bad input gets the documented error with a precise message, and other contexts keep
working."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from arrayjit_backends import UsageError
from arrayjit_conformance.harness import hosted, new_context
from arrayjit_conformance.plugin import fresh_or_skip
from arrayjit_ir import ir
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_tnode import Prec, Tnode


@pytest.fixture
def healthy(backend: Any) -> Iterator[tuple[Any, Tnode, Tnode]]:
    """A working routine in another context; checked after the bad call."""
    a, y = hosted((16,), "ha"), hosted((16,), "hy")
    a.set_values(np.arange(16.0))
    r = backend.link(new_context(backend), backend.compile(ir.unop(y, "neg", a), name="healthy"))
    r()
    yield r, a, y
    r()
    backend.to_host(r.context, y)
    np.testing.assert_array_equal(y.get_values(), -np.arange(16.0))


def _neg(backend: Any) -> tuple[Any, Tnode, Tnode]:
    a, y = hosted((4,), "a"), hosted((4,), "y")
    a.set_values(np.arange(4.0))
    return (
        backend.link(new_context(backend), backend.compile(ir.unop(y, "neg", a), name="neg")),
        a,
        y,
    )


@pytest.mark.parametrize(
    "shape,dtype,message",
    [
        (
            (5,),
            np.float32,
            r"from_host: node a#\d+ has a host array of shape \[5\] and dtype float32",
        ),
        ((4,), np.float64, r"expected shape \[4\] and dtype float32"),
        ((2, 2), np.float32, r"has a host array of shape \[2, 2\]"),
    ],
)
def test_from_host_with_wrong_host_array(
    backend: Any, healthy: Any, shape: tuple[int, ...], dtype: Any, message: str
) -> None:
    r, a, _ = _neg(backend)
    a.array = np.zeros(shape, dtype)
    a.devices_not_lagging_host.clear()
    with pytest.raises(UsageError, match=message) as info:
        backend.from_host(r.context, a)
    assert backend.name in str(info.value)


def test_link_context_of_another_backend(backend: Any, backend_name: str, healthy: Any) -> None:
    other = fresh_or_skip(backend_name)
    try:
        a, y = hosted((4,), "a"), hosted((4,), "y")
        code = backend.compile(ir.unop(y, "neg", a), name="neg")
        with pytest.raises(
            UsageError,
            match=rf"link neg: the context belongs to backend {other.name} .*not to this",
        ):
            backend.link(new_context(other), code)
    finally:
        other.finalize()


def test_link_without_an_input(backend: Any, healthy: Any) -> None:
    y, missing = hosted((4,), "y"), Tnode.create((4,), label="missing")
    code = backend.compile(ir.unop(y, "neg", missing), name="neg2")
    with pytest.raises(
        UsageError, match=r"link neg2: .* lacks node missing#\d+, which the routine reads"
    ):
        backend.link(new_context(backend), code)


def test_static_index_errors(backend: Any, healthy: Any) -> None:
    i = StaticSymbol("i", range=3)
    data, row = hosted((3, 2), "data"), hosted((2,), "row")
    r = backend.link(
        new_context(backend),
        backend.compile(ir.fetch(row, ir.Slice(i, data)), name="pick", bindings=(i,)),
    )
    with pytest.raises(
        UsageError, match=r"routine pick: static index i = 3 is out of range \(valid: 0..2\)"
    ):
        r.bindings["i"] = 3
    with pytest.raises(UsageError, match=r"routine pick: static index i = -1 is out of range"):
        r.bindings["i"] = -1
    with pytest.raises(UsageError, match=r"routine pick has no static index 'j'"):
        r.bindings["j"] = 0


def test_unbound_static_symbol_is_refused(backend: Any, healthy: Any) -> None:
    i = StaticSymbol("batch", range=3)
    data, row = hosted((3, 2), "data"), hosted((2,), "row")
    with pytest.raises(UsageError, match=r"static symbols \['batch'\] are not bound"):
        backend.compile(ir.fetch(row, ir.Slice(i, data)), name="unbound")


def test_unsupported_precision_is_refused(backend: Any, healthy: Any) -> None:
    unsupported = sorted(
        set(Prec) - set(backend.capabilities.supported_precs), key=lambda p: p.name
    )
    if not unsupported:
        pytest.skip(f"backend {backend.name} supports every precision")
    p = unsupported[0].name
    k, y = hosted((2,), "k", p), hosted((2,), "y", p)
    with pytest.raises(
        UsageError,
        match=rf"node (k|y)#\d+ has precision {p}, which backend {backend.name} does not support",
    ):
        backend.compile(ir.unop(y, "identity", k), name="bits")


def test_device_of_another_backend(backend: Any, backend_name: str, healthy: Any) -> None:
    other = fresh_or_skip(backend_name)
    try:
        with pytest.raises(UsageError, match=rf"does not belong to backend {backend.name}"):
            backend.new_stream(other.get_device(0))
    finally:
        other.finalize()


def test_device_to_device_across_backends(backend: Any, backend_name: str, healthy: Any) -> None:
    from arrayjit_backends import MergeMode

    other = fresh_or_skip(backend_name)
    try:
        r, a, _ = _neg(backend)
        with pytest.raises(
            UsageError, match=r"device_to_device \(src\): the context belongs to backend"
        ):
            backend.device_to_device(a, MergeMode.No, r.context, new_context(other))
    finally:
        other.finalize()


def test_bad_einsum_spec_names_the_node(backend: Any, healthy: Any) -> None:
    x, s = hosted((3, 4), "x"), hosted((3,), "s")
    with pytest.raises(UsageError, match=r"reduces over axes .* without an accumulation op"):
        backend.compile(ir.unop(s, "identity", x, spec="ij->i"), name="bad")
