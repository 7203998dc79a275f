"""Host <-> device round trips for every supported precision and several shapes, including
empty and scalar nodes, and the no-redundant-copy bookkeeping of hosted nodes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from arrayjit_conformance.harness import ALL_PRECS, hosted, new_context, require_precs, sample
from arrayjit_ir import ir

RNG = np.random.default_rng(7)
SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 3, 4)]


@pytest.mark.parametrize("shape", SHAPES, ids=[str(list(s)) for s in SHAPES])
@pytest.mark.parametrize("prec", ALL_PRECS)
def test_round_trip(backend: Any, prec: str, shape: tuple[int, ...]) -> None:
    require_precs(backend, prec)
    x, y = hosted(shape, "x", prec), hosted(shape, "y", prec)
    x.set_values(sample(RNG, prec, shape))
    sent = x.get_values()
    r = backend.link(new_context(backend), backend.compile(ir.unop(y, "identity", x), name="rt"))
    r()
    assert backend.to_host(r.context, y)
    np.testing.assert_array_equal(y.get_values(), sent)
    x.set_values(np.zeros(shape, dtype=np.int64))
    assert backend.to_host(r.context, x)  # the device still holds what was sent
    np.testing.assert_array_equal(x.get_values(), sent)


def test_from_host_refreshes_and_skips_redundant_copies(backend: Any) -> None:
    a, y = hosted((8,), "a"), hosted((8,), "y")
    a.set_values(np.arange(8.0))
    r = backend.link(new_context(backend), backend.compile(ir.unop(y, "neg", a), name="neg"))
    dev = r.context.device
    assert dev.id in a.devices_not_lagging_host
    copies = backend.copies
    assert backend.from_host(r.context, a)
    assert backend.copies == copies  # the device already has the host's value
    a.set_values(np.ones(8))
    assert dev.id not in a.devices_not_lagging_host
    assert backend.from_host(r.context, a) and backend.copies == copies + 1
    r()
    assert y.devices_not_lagging_host == {dev.id}
    backend.to_host(r.context, y)
    np.testing.assert_array_equal(y.get_values(), -np.ones(8))


def test_transfers_of_nodes_not_in_context(backend: Any) -> None:
    a, y = hosted((4,), "a"), hosted((4,), "y")
    a.set_values(np.arange(4.0))
    r = backend.link(new_context(backend), backend.compile(ir.unop(y, "neg", a), name="neg"))
    absent = hosted((4,), "absent")
    assert not backend.to_host(r.context, absent)
    assert not backend.from_host(r.context, absent)


def test_host_writes_wait_for_pending_upload_and_download(backend: Any) -> None:
    n = 1 << 16
    a, y = hosted((n,), "a"), hosted((n,), "y")
    a.set_values(np.arange(n, dtype=np.float64))
    r = backend.link(new_context(backend), backend.compile(ir.unop(y, "neg", a), name="neg"))
    for k in range(3):
        a.set_values(np.full(n, float(k)))  # must not race with the previous upload
        backend.from_host(r.context, a)
        r()
        backend.to_host(r.context, y)
        np.testing.assert_array_equal(y.get_values(), np.full(n, -float(k)))
