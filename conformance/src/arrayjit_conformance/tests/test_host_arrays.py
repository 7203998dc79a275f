"""Nodes over existing arrays (``create_with_reshape``, ``create_from_padded``) on a device:
routines read the base's data, and ``to_host`` writes into the base, which the node shares."""

from __future__ import annotations

from typing import Any

import numpy as np

from arrayjit_conformance.harness import new_context
from arrayjit_ir import ir
from arrayjit_tnode import Padding, create_from_padded, create_with_reshape

RNG = np.random.default_rng(11)


def test_reshaped_and_padded_nodes_on_the_device(backend: Any) -> None:
    flat_x = RNG.standard_normal(12).astype(np.float32)
    w_data = RNG.standard_normal((3, 4)).astype(np.float32)
    w_padded = np.pad(w_data, ((1, 1), (0, 2)), constant_values=0.0)
    flat_y = np.zeros(12, np.float32)
    x = create_with_reshape(flat_x, (3, 4), label="x")
    w = create_from_padded(w_padded, Padding(((1, 1), (0, 2)), 0.0), label="w")
    y = create_with_reshape(flat_y, (3, 4), label="y")
    r = backend.link(new_context(backend), backend.compile(ir.binop(y, "mul", x, w), name="xw"))
    r()
    assert backend.to_host(r.context, y)
    np.testing.assert_allclose(y.get_values(), flat_x.reshape(3, 4) * w_data, rtol=1e-6)
    # The result landed in the caller's own flat buffer (get_values above waited for it).
    np.testing.assert_allclose(flat_y, (flat_x.reshape(3, 4) * w_data).ravel(), rtol=1e-6)
    # A write into the base is a host write like set_values: sent again by from_host.
    x.set_values(np.ones((3, 4), np.float32))
    assert flat_x.tolist() == [1.0] * 12
    assert backend.from_host(r.context, x)
    r()
    assert backend.to_host(r.context, y)
    # to_host may still be running: the base is read after tn.do_read() (get_values does it).
    y.do_read()
    np.testing.assert_allclose(flat_y.reshape(3, 4), w_data, rtol=1e-6)
