"""A run never reads a hosted input the host changed since the device last saw it.

The rule (backends README, "Semantics decided here"): a host write (``set_values``,
``set_value``) makes every device buffer of the node lag the host; a routine run uploads each
hosted input whose buffer lags, before it runs, ordered like ``from_host``. A buffer whose value
was defined after the host write (an upload, a routine or task writing it, a device-to-device
copy into it, a ``to_host`` from it) does not lag: the device's value stays. ``from_host`` and
``to_host`` on a context that lacks the node while a context linked from it has it warn, naming
that context.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from arrayjit_conformance.harness import hosted, new_context
from arrayjit_ir import ir
from arrayjit_tnode import Tnode


def _values(backend: Any, ctx: Any, tn: Tnode) -> np.ndarray:
    assert backend.to_host(ctx, tn)
    return np.asarray(tn.get_values()).copy()


def test_a_run_uses_the_values_the_host_set_since_the_last_upload(backend: Any) -> None:
    a, y = hosted((4,), "a"), hosted((4,), "y")
    a.set_values(np.arange(4.0))
    ctx = new_context(backend)
    r = backend.link(ctx, backend.compile(ir.unop(y, "neg", a), name="neg"))
    r()
    np.testing.assert_array_equal(_values(backend, r.context, y), -np.arange(4.0))
    a.set_values(np.full(4, 5.0))  # no from_host: the run must not read the old values
    r()
    np.testing.assert_array_equal(_values(backend, r.context, y), np.full(4, -5.0))
    a.set_value((2,), 7.0)  # a one-cell write is a host write too
    r()
    np.testing.assert_array_equal(_values(backend, r.context, y), [-5.0, -5.0, -7.0, -5.0])


def test_from_host_on_the_parent_context_warns_naming_the_routine_context(backend: Any) -> None:
    a, y = hosted((4,), "a"), hosted((4,), "y")
    a.set_values(np.zeros(4))
    ctx = new_context(backend)
    r = backend.link(ctx, backend.compile(ir.unop(y, "neg", a), name="n"))
    a.set_values(np.full(4, 5.0))
    with pytest.warns(UserWarning, match=r"(?s)from_host.*\ba\b.*context of routine n"):
        assert backend.from_host(ctx, a) is False  # the seed contract: nothing was copied here
    with pytest.warns(UserWarning, match=r"(?s)to_host.*\by\b.*context of routine n"):
        assert backend.to_host(ctx, y) is False
    r()  # and the run still reads the new values
    np.testing.assert_array_equal(_values(backend, r.context, y), np.full(4, -5.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a node no context linked from ctx has: a plain False
        assert backend.from_host(ctx, hosted((2,), "unrelated")) is False


def test_device_values_are_kept_until_the_host_writes(backend: Any) -> None:
    """An in-place update on the device (w += 1 each run) is not undone by uploads: only a host
    write makes the next run start from the host's values."""
    w, one = hosted((3,), "w"), hosted((3,), "one")
    w.set_values(np.zeros(3))
    one.set_values(np.ones(3))
    ctx = new_context(backend)
    step = backend.link(ctx, backend.compile(ir.binop(w, "add", w, one), name="inc"))
    step()
    step()
    np.testing.assert_array_equal(_values(backend, step.context, w), np.full(3, 2.0))
    step()  # after a to_host the host holds the device's value; nothing to upload either
    np.testing.assert_array_equal(_values(backend, step.context, w), np.full(3, 3.0))
    w.set_values(np.full(3, 10.0))
    step()
    np.testing.assert_array_equal(_values(backend, step.context, w), np.full(3, 11.0))


def test_each_routine_context_gets_the_host_write(backend: Any) -> None:
    """Two routines linked from one parent each hold a buffer of the input: a host write reaches
    both, whichever runs first, and a run of one does not count for the other."""
    a, y1, y2 = hosted((4,), "a"), hosted((4,), "y1"), hosted((4,), "y2")
    a.set_values(np.ones(4))
    ctx = new_context(backend)
    r1 = backend.link(ctx, backend.compile(ir.unop(y1, "neg", a), name="r1"))
    r2 = backend.link(ctx, backend.compile(ir.binop(y2, "add", a, a), name="r2"))
    a.set_values(np.full(4, 3.0))
    r1()
    r2()
    np.testing.assert_array_equal(_values(backend, r1.context, y1), np.full(4, -3.0))
    np.testing.assert_array_equal(_values(backend, r2.context, y2), np.full(4, 6.0))
    a.set_values(np.full(4, 4.0))
    r2()
    r1()
    np.testing.assert_array_equal(_values(backend, r1.context, y1), np.full(4, -4.0))
    np.testing.assert_array_equal(_values(backend, r2.context, y2), np.full(4, 8.0))
