"""Schedules searched, not hoped for: a Hypothesis state machine drives streams, contexts,
routines, transfers, merges and stream holds in random order on the backend under test, and
checks every value it observes against a sequential model of what the program means.

Program order is the order in which the rules are called; the model (plain numpy, float32 like
the nodes, with the same rounding steps) runs each call at once, in that order. The backend may
run the work in any order it likes, on any number of threads, as long as nobody can tell:

- every value read back (``get_values`` after ``to_host``; a merge-buffer read, a routine's
  input) is the one the model gives at that point of the program, never an older one;
- a host array does not change after ``get_values`` returned, unless the user asked for it
  again (``to_host``, ``set_values``) since; checked after every step and at the end;
- nothing deadlocks: every call that may block runs under a deadline (:func:`deadline`), after
  which the test fails with every thread's stack printed.

``Stream.hold`` delays a stream's next task without blocking the caller, so that the search
reaches schedules in which one stream lags far behind the others (on ``sync_`` backends holds are
no-ops and the machine checks the same program order without concurrency).

Where the documented semantics leave a choice, the model allows each defensible value (a set
of candidates per buffer, narrowed by observation) instead of guessing one implementation:

- ``from_host`` into a buffer that holds neither the host's value nor the node's latest value
  (the node was last computed in another buffer, the host lags it) may copy the host array or
  skip; when the host holds the node's latest value it must copy, and when the buffer itself
  computed the latest value it must not;
- a buffer that received its value by ``device_to_device`` is treated the same way (whether
  such a copy counts as fresh is not specified);
- a ``Streaming`` merge is a view of the source's buffer: a reader sees the value sent, or, if
  the source was overwritten after the send in program order, the newer value;
- the shared node ``s`` and the per-stream node ``g`` start uninitialized (NaN in the model:
  any value is accepted until they are written).

Example counts: a fixed-seed set (:data:`CI_EXAMPLES` programs of at most :data:`CI_STEPS`
steps) by default; ``ARRAYJIT_FUZZ_EXAMPLES // FUZZ_SHARE`` fresh random ones (and longer
programs) under that variable (``tox -e fuzz``). The ``test_found_*`` tests below replay the
schedules the search found, as plain sequences.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from arrayjit_backends import MergeMode, UsageError
from arrayjit_ir import ir
from arrayjit_tnode import Tnode
from arrayjit_tnode import memory_mode as mm

N = 4
"""Cells of every node: tiny, so that the search is about schedules, not about kernels."""
HOSTED = ("h0", "h1", "h2")
NODES = (*HOSTED, "g", "s")
MAX_STREAMS = 3
MAX_CONTEXTS = 10
WAIT_LIMIT = 30.0
"""Seconds any single blocking call may take before the test reports a deadlock."""
CI_EXAMPLES = 25
CI_STEPS = 40
FUZZ_SHARE = 10
F32 = np.float32

Cands = tuple[np.ndarray, ...]
"""The values a buffer (or the host array) may hold: one unless the semantics leave a choice.
NaN cells are unknown (uninitialized memory): any value matches them."""

UNKNOWN = np.full(N, np.nan, dtype=F32)


def _join(*groups: Cands) -> Cands:
    """The union of candidate sets, without duplicates."""
    seen: dict[bytes, np.ndarray] = {}
    for group in groups:
        for c in group:
            seen.setdefault(c.tobytes(), c)
    return tuple(seen.values())


def _matches(got: np.ndarray, want: np.ndarray) -> bool:
    return bool(np.all(np.isnan(want) | (got == want)))


def _show(cands: Cands) -> str:
    return " or ".join(str(c.tolist()) for c in cands)


# ---- the routines: compiled once per backend, linked into many contexts -----------------------


@dataclass(frozen=True)
class RoutineSpec:
    """A routine of the machine: what it computes (as IR and as the model's numpy function)."""

    name: str
    writes: str
    reads: tuple[str, ...]
    """Context nodes read (read-modify-write outputs included)."""
    merge: str | None
    """The node whose value it reads from the stream's merge buffer."""
    fn: Callable[..., np.ndarray]
    """The model: the output from the values of ``reads`` (then the merge value), float32."""


def _c(v: float) -> np.float32:
    return F32(v)


SPECS = {
    s.name: s
    for s in (
        RoutineSpec("inc", "h1", ("h0",), None, lambda h0: h0 + _c(1)),
        RoutineSpec("rmw", "h0", ("h0",), None, lambda h0: h0 * _c(2) + _c(1)),
        RoutineSpec("acc", "h2", ("h2", "h1"), None, lambda h2, h1: h2 + h1),
        RoutineSpec("tog", "g", ("h2",), None, lambda h2: h2 * _c(3)),
        RoutineSpec("fromg", "h1", ("g", "h0"), None, lambda g, h0: g + h0),
        RoutineSpec("tos", "s", ("h0", "h2"), None, lambda h0, h2: h0 + h2),
        RoutineSpec("froms", "h2", ("s",), None, lambda s: s - _c(1)),
        RoutineSpec("rmws", "s", ("s", "h1"), None, lambda s, h1: s + h1),
        RoutineSpec("mg", "h2", (), "g", lambda g: g + _c(1)),
        RoutineSpec("mh", "h1", (), "h0", lambda h0: h0 * _c(3)),
    )
}


def _make_nodes() -> dict[str, Tnode]:
    nodes = {n: Tnode.create((N,), label=n, hosted=True) for n in HOSTED}
    nodes["g"] = Tnode.create(
        (N,), label="g", memory_mode=(mm.On_device(mm.Sharing.Per_stream), 1)
    )
    nodes["s"] = Tnode.create(
        (N,), label="s", memory_mode=(mm.On_device(mm.Sharing.Shared_cross_streams), 1)
    )
    return nodes


def _comp(spec: RoutineSpec, t: dict[str, Tnode]) -> Any:
    def const(v: float) -> tuple[Tnode, Any]:
        k = Tnode.create((), label=f"k{v:g}", memory_mode=(mm.Virtual(), 1))
        return k, ir.fetch(k, ir.Constant(v))

    one, fill1 = const(1.0)
    two, fill2 = const(2.0)
    three, fill3 = const(3.0)
    out = t[spec.writes]
    body = {
        "inc": lambda: (fill1, ir.binop(out, "add", t["h0"], one)),
        "rmw": lambda: (
            fill2,
            fill1,
            ir.binop(out, "mul", t["h0"], two),
            ir.binop(out, "add", out, one),
        ),
        "acc": lambda: (ir.accum(out, "add", t["h1"], initialize_neutral=False),),
        "tog": lambda: (fill3, ir.binop(out, "mul", t["h2"], three)),
        "fromg": lambda: (ir.binop(out, "add", t["g"], t["h0"]),),
        "tos": lambda: (ir.binop(out, "add", t["h0"], t["h2"]),),
        "froms": lambda: (fill1, ir.binop(out, "sub", t["s"], one)),
        "rmws": lambda: (ir.accum(out, "add", t["h1"], initialize_neutral=False),),
        "mg": lambda: (fill1, ir.binop(out, "add", ir.merge_buffer(t["g"]), one)),
        "mh": lambda: (fill3, ir.binop(out, "mul", ir.merge_buffer(t["h0"]), three)),
    }[spec.name]()
    return ir.block(*body)


class Env:
    """What one backend's run of the machine keeps across examples: the nodes, the compiled
    codes, and a pool of streams (streams are threads on ``multicore_`` backends; a new one
    per example would pile them up)."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.nodes = _make_nodes()
        self.names = {tn: n for n, tn in self.nodes.items()}
        self.codes = {n: backend.compile(_comp(s, self.nodes), name=n) for n, s in SPECS.items()}
        for name, spec in SPECS.items():
            code = self.codes[name]
            assert code.optimized.merge_node == (self.nodes[spec.merge] if spec.merge else None)
            have = {self.names[tn] for tn in code.optimized.context_nodes}
            assert have == {*spec.reads, spec.writes}, f"{name}: context nodes {have}"
        self.device = backend.get_device(0)
        self.streams = [backend.new_stream(self.device) for _ in range(MAX_STREAMS)]
        # The shared node gets its device buffer when a routine using it is first linked;
        # after that, routines that only read it link anywhere on the device.
        backend.link(backend.make_context(self.streams[0]), self.codes["tos"])


# ---- deadlines -----------------------------------------------------------------------------


class Deadlock(AssertionError):
    """A blocking call did not return within :data:`WAIT_LIMIT`."""


@contextlib.contextmanager
def deadline(what: str, seconds: float = WAIT_LIMIT) -> Iterator[None]:
    """Fail with :class:`Deadlock` (after printing every thread's stack to stderr) if the block
    runs longer than ``seconds``. A timer signal interrupts the blocked main thread (lock waits
    are interruptible on POSIX), so no helper thread is left hanging. Elsewhere (not the main
    thread, no ``setitimer``) a watchdog thread prints the stacks and lets the test run on:
    Python cannot interrupt another thread."""
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):

        def on_alarm(signum: int, frame: Any) -> None:
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            raise Deadlock(f"{what} did not return within {seconds:g} s (deadlock?)")

        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    else:
        faulthandler.dump_traceback_later(seconds, exit=False)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()


# ---- the model -----------------------------------------------------------------------------


@dataclass
class MStream:
    stream: Any
    index: int
    merge: tuple[Any, ...] | None = None
    """What the merge buffer holds in program order: None (unknown: set before this example),
    ``("Copy", node, cands)`` or ``("Streaming", node, buffer id, cands, generation)``."""

    def __repr__(self) -> str:
        return f"stream{self.index}"


@dataclass
class MCtx:
    ctx: Any
    stream: MStream
    bufs: dict[str, int]
    """Node name -> model buffer id."""
    index: int
    routine: Any = None
    spec: RoutineSpec | None = None

    def __repr__(self) -> str:
        what = f", {self.spec.name}" if self.spec else ""
        return f"ctx{self.index}({self.stream!r}{what})"


@dataclass
class Model:
    """Values in program order. Versions name the successive values of a hosted node (a
    ``set_values`` or a routine writing it makes a new one), so that ``from_host`` can tell
    whether the host or a buffer holds the node's latest value."""

    host: dict[str, Cands] = field(default_factory=dict)
    host_ver: dict[str, int] = field(default_factory=dict)
    latest: dict[str, int] = field(default_factory=dict)
    buf: dict[int, Cands] = field(default_factory=dict)
    buf_ver: dict[int, int] = field(default_factory=dict)
    trusted: dict[int, bool] = field(default_factory=dict)
    """The buffer got its version itself (an upload or a routine), not by device_to_device."""
    gen: dict[int, int] = field(default_factory=dict)
    """Bumped at every change of a buffer (for Streaming merges)."""
    counter: int = 0

    def fresh(self) -> int:
        self.counter += 1
        return self.counter

    def new_buffer(self, value: Cands, ver: int = 0) -> int:
        bid = self.fresh()
        self.set_buf(bid, value, ver, trusted=True)
        return bid

    def set_buf(self, bid: int, value: Cands, ver: int, trusted: bool) -> None:
        self.buf[bid] = value
        self.buf_ver[bid] = ver
        self.trusted[bid] = trusted
        self.gen[bid] = self.gen.get(bid, 0) + 1


class Schedules(RuleBasedStateMachine):
    """The machine; ``ENV`` is set per backend by the test."""

    ENV: Env

    streams = Bundle("streams")
    contexts = Bundle("contexts")
    routines = Bundle("routines")

    def __init__(self) -> None:
        super().__init__()
        env = self.ENV
        self.env, self.backend, self.t = env, env.backend, env.nodes
        self.model = Model()
        self.used: list[MStream] = []
        self.n_ctx = 0
        self.contexts_seen: list[MCtx] = []
        self.stable: dict[str, np.ndarray] = {}
        """Host arrays as the last get_values returned them, while nobody asked again."""
        with deadline("resetting the hosted nodes"):
            for k, name in enumerate(HOSTED):
                v = np.arange(N, dtype=F32) + F32(10 * (k + 1))
                self.t[name].set_values(v)
                self.model.host[name] = (v,)
                ver = self.model.fresh()
                self.model.host_ver[name] = ver
                self.model.latest[name] = ver
        self.shared_s = self.model.new_buffer((UNKNOWN,))

    # ---- streams and contexts ----

    @precondition(lambda self: len(self.used) < MAX_STREAMS)
    @rule(target=streams)
    def new_stream(self) -> MStream:
        ms = MStream(self.env.streams[len(self.used)], len(self.used))
        self.used.append(ms)
        return ms

    @precondition(lambda self: self.n_ctx < MAX_CONTEXTS)
    @rule(target=contexts, stream=streams)
    def new_context(self, stream: MStream) -> MCtx:
        self.n_ctx += 1
        ctx = MCtx(self.backend.make_context(stream.stream), stream, {}, self.n_ctx)
        self.contexts_seen.append(ctx)
        return ctx

    @precondition(lambda self: self.n_ctx < MAX_CONTEXTS)
    @rule(target=routines, ctx=contexts, name=st.sampled_from(sorted(SPECS)))
    def link(self, ctx: MCtx, name: str) -> Any:
        spec, code = SPECS[name], self.env.codes[name]
        if "g" in spec.reads and "g" not in ctx.bufs:
            with pytest.raises(UsageError, match=r"lacks node g#\d+, which the routine reads"):
                self.backend.link(ctx.ctx, code)
            return multiple()
        with deadline(f"link {name}"):
            r = self.backend.link(ctx.ctx, code)
        m = self.model
        bufs = dict(ctx.bufs)
        for node in (*spec.reads, spec.writes):
            if node in bufs:
                continue
            if node == "s":
                bufs[node] = self.shared_s
            elif node in HOSTED:  # uploaded when first linked
                bufs[node] = m.new_buffer(m.host[node], m.host_ver[node])
            else:
                bufs[node] = m.new_buffer((UNKNOWN,))
        self.n_ctx += 1
        child = MCtx(r.context, ctx.stream, bufs, self.n_ctx, r, spec)
        self.contexts_seen.append(child)
        assert {self.env.names[tn] for tn in r.context.buffers} >= set(bufs)
        return child

    @rule(target=contexts, ctx=routines)
    def context_of(self, ctx: MCtx) -> MCtx:
        return ctx

    # ---- running ----

    @rule(r=routines)
    def run(self, r: MCtx) -> None:
        spec = r.spec
        assert spec is not None
        m, stream = self.model, r.stream
        inputs = [m.buf[r.bufs[n]] for n in spec.reads]
        if spec.merge is not None:
            if stream.merge is None:
                return  # the merge buffer holds what an earlier example left there
            held = stream.merge[1]
            if held != spec.merge:
                with pytest.raises(UsageError, match=r"reads the merge buffer as"):
                    r.routine()
                return
            if stream.merge[0] == "Copy":
                inputs.append(stream.merge[2])
            else:
                _, _, bid, sent, gen = stream.merge
                # A view of the source's buffer: newer values written since may show.
                inputs.append(sent if m.gen[bid] == gen else _join(sent, m.buf[bid]))
        with deadline(f"run {spec.name}"):
            r.routine()
        outs: Cands = ()
        with np.errstate(all="ignore"):
            for combo in _product(inputs):
                outs = _join(outs, (np.asarray(spec.fn(*combo), dtype=F32),))
        bid = r.bufs[spec.writes]
        if spec.writes in HOSTED:
            ver = m.fresh()
            m.latest[spec.writes] = ver
            m.set_buf(bid, outs, ver, trusted=True)
        else:
            m.set_buf(bid, outs, 0, trusted=True)

    # ---- host side ----

    @rule(node=st.sampled_from(HOSTED), values=st.lists(st.integers(-8, 8), min_size=N, max_size=N))
    def set_values(self, node: str, values: list[int]) -> None:
        v = np.array(values, dtype=F32)
        with deadline(f"{node}.set_values"):
            self.t[node].set_values(v)
        m = self.model
        m.host[node] = (v,)
        ver = m.fresh()
        m.host_ver[node] = m.latest[node] = ver
        self.stable.pop(node, None)

    @rule(ctx=contexts, node=st.sampled_from(HOSTED))
    def from_host(self, ctx: MCtx, node: str) -> None:
        with deadline(f"from_host {node}"):
            done = self.backend.from_host(ctx.ctx, self.t[node])
        assert done == (node in ctx.bufs), f"from_host({ctx}, {node}) returned {done}"
        if not done:
            return
        m, bid = self.model, ctx.bufs[node]
        if m.buf_ver[bid] == m.host_ver[node]:
            return  # copy or not, the buffer holds the host's value
        if m.host_ver[node] == m.latest[node]:
            m.set_buf(bid, m.host[node], m.host_ver[node], trusted=True)  # must copy
        elif m.buf_ver[bid] == m.latest[node] and m.trusted[bid]:
            return  # the buffer computed the latest value: the host's is older
        else:  # unspecified: copy or skip
            m.set_buf(bid, _join(m.buf[bid], m.host[node]), m.fresh(), trusted=False)

    @rule(ctx=contexts, node=st.sampled_from(HOSTED))
    def to_host(self, ctx: MCtx, node: str) -> None:
        with deadline(f"to_host {node}"):
            done = self.backend.to_host(ctx.ctx, self.t[node])
        assert done == (node in ctx.bufs), f"to_host({ctx}, {node}) returned {done}"
        if not done:
            return
        m, bid = self.model, ctx.bufs[node]
        m.host[node] = m.buf[bid]
        m.host_ver[node] = m.buf_ver[bid]
        self.stable.pop(node, None)

    @rule(node=st.sampled_from(HOSTED))
    def get_values(self, node: str) -> None:
        with deadline(f"{node}.get_values"):
            got = self.t[node].get_values()
        want = self.model.host[node]
        assert any(_matches(got, w) for w in want), (
            f"{node}.get_values() on {self.backend.name} gave {got.tolist()}, the program "
            f"means {_show(want)} (a stale or lost value)"
        )
        self.model.host[node] = (got,)
        self.stable[node] = got

    # ---- between streams ----

    @rule(
        node=st.sampled_from(NODES),
        mode=st.sampled_from(list(MergeMode)),
        dst=contexts,
        src=contexts,
    )
    def device_to_device(self, node: str, mode: MergeMode, dst: MCtx, src: MCtx) -> None:
        with deadline(f"device_to_device {node}"):
            done = self.backend.device_to_device(self.t[node], mode, dst.ctx, src.ctx)
        expected = node in src.bufs and (mode is not MergeMode.No or node in dst.bufs)
        assert done == expected, f"device_to_device({node}, {mode}) returned {done}"
        if not done:
            return
        m, sbid = self.model, src.bufs[node]
        if mode is MergeMode.No:
            dbid = dst.bufs[node]
            if dbid != sbid:
                m.set_buf(dbid, m.buf[sbid], m.buf_ver[sbid], trusted=False)
        elif mode is MergeMode.Copy:
            dst.stream.merge = ("Copy", node, m.buf[sbid])
        else:
            dst.stream.merge = ("Streaming", node, sbid, m.buf[sbid], m.gen[sbid])

    @rule(stream=streams)
    def await_stream(self, stream: MStream) -> None:
        with deadline(f"await_stream {stream}"):
            self.backend.await_stream(stream.stream)
        assert self.backend.is_idle(stream.stream)

    @rule(stream=streams, ms=st.integers(5, 30))
    def hold(self, stream: MStream, ms: int) -> None:
        stream.stream.hold(ms / 1000)

    # ---- invariants ----

    @invariant()
    def host_arrays_stay_put(self) -> None:
        for node, got in self.stable.items():
            tn = self.t[node]
            assert tn.array is not None
            now = tn.array[tn.logical_slices()]
            assert np.array_equal(now, got), (
                f"{node}'s host array changed to {now.tolist()} after get_values() returned "
                f"{got.tolist()}, and nobody asked for a new value since (a late transfer)"
            )

    @rule(ctx=contexts, node=st.sampled_from(HOSTED))
    def observe(self, ctx: MCtx, node: str) -> None:
        """``to_host`` then ``get_values``: a look at one buffer."""
        self.to_host(ctx, node)
        self.get_values(node)

    def teardown(self) -> None:
        """Wait for every stream, then look at every host array and every hosted buffer of
        every context (the end of the program observes all it left behind)."""
        with deadline("awaiting every stream at the end"):
            for ms in self.used:
                self.backend.await_stream(ms.stream)
        self.host_arrays_stay_put()
        for node in HOSTED:
            self.get_values(node)
        for ctx in self.contexts_seen:
            for node in HOSTED:
                self.observe(ctx, node)


def _product(groups: list[Cands]) -> Iterator[tuple[np.ndarray, ...]]:
    if not groups:
        yield ()
        return
    for head in groups[0]:
        for rest in _product(groups[1:]):
            yield (head, *rest)


def machine_settings() -> settings:
    """Fixed-seed, modest, unshrunk by default; ``ARRAYJIT_FUZZ_EXAMPLES // FUZZ_SHARE`` fresh
    random (and shrunk) programs under that variable."""
    common: dict[str, Any] = {
        "deadline": None,
        "print_blob": True,
        "suppress_health_check": list(HealthCheck),
    }
    fuzz = int(os.environ.get("ARRAYJIT_FUZZ_EXAMPLES", "0") or 0)
    if fuzz:
        return settings(
            max_examples=max(fuzz // FUZZ_SHARE, 1),
            stateful_step_count=2 * CI_STEPS,
            derandomize=False,
            **common,
        )
    return settings(
        max_examples=CI_EXAMPLES,
        stateful_step_count=CI_STEPS,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        **common,
    )


def test_schedules(backend: Any) -> None:
    """The state machine on the backend under test."""
    env = Env(backend)
    machine = type("ScheduleMachine", (Schedules,), {"ENV": env})
    run_state_machine_as_test(machine, settings=machine_settings())


def machine_for(backend: Any) -> Schedules:
    """A fresh machine on ``backend``, for replaying a schedule step by step."""
    return type("ScheduleMachine", (Schedules,), {"ENV": Env(backend)})()


def test_found_from_host_into_a_second_stream(backend: Any) -> None:
    state = machine_for(backend)
    s0, s1 = state.new_stream(), state.new_stream()
    r1 = state.link(ctx=state.new_context(stream=s0), name="inc")
    r2 = state.link(ctx=state.new_context(stream=s1), name="inc")
    state.set_values(node="h0", values=[9, 9, 9, 9])
    state.from_host(ctx=r1, node="h0")
    state.from_host(ctx=r2, node="h0")
    state.run(r=r2)
    state.observe(ctx=r2, node="h1")
    state.teardown()


def test_found_from_host_after_a_sibling_context_uploaded(backend: Any) -> None:
    """Two contexts of one stream hold their own buffers of ``h0``; linking the second
    uploads the new host value into it. The first buffer still lags the host: ``from_host``
    into it must copy (freshness is a buffer's, not a device's)."""
    state = machine_for(backend)
    root = state.new_context(stream=state.new_stream())
    r = state.link(ctx=root, name="inc")
    state.set_values(node="h0", values=[0, 0, 0, 0])
    state.link(ctx=root, name="tos")
    state.from_host(ctx=r, node="h0")
    state.observe(ctx=r, node="h0")
    state.teardown()


def test_found_set_values_waits_for_every_upload(backend: Any) -> None:
    """Two uploads of one host array on two streams (each context's first link uploads its
    buffer); the first stream lags. ``set_values`` must wait for both reads of the host array,
    not only for the latest one."""
    state = machine_for(backend)
    s0, s1 = state.new_stream(), state.new_stream()
    state.hold(stream=s0, ms=30)
    r1 = state.link(ctx=state.new_context(stream=s0), name="inc")
    state.link(ctx=state.new_context(stream=s1), name="inc")
    state.set_values(node="h0", values=[9, 9, 9, 9])
    state.observe(ctx=r1, node="h0")
    state.teardown()


def test_found_older_transfer_lands_last(backend: Any) -> None:
    """Two streams write ``h1`` and copy it to the host; the first stream lags. The host array
    must end with the value of the later ``to_host`` and keep it."""
    state = machine_for(backend)
    s0, s1 = state.new_stream(), state.new_stream()
    r0 = state.link(ctx=state.new_context(stream=s0), name="inc")
    state.set_values(node="h0", values=[5, 5, 5, 5])
    r1 = state.link(ctx=state.new_context(stream=s1), name="inc")
    state.hold(stream=s0, ms=30)
    state.run(r=r0)
    state.run(r=r1)
    state.to_host(ctx=r0, node="h1")
    state.to_host(ctx=r1, node="h1")
    state.get_values(node="h1")
    state.teardown()


def test_found_streaming_merge_before_the_sources_next_write(backend: Any) -> None:
    """A lagging stream reads ``h0`` through a Streaming merge; the source stream rewrites
    ``h0`` next. The reader must see the value sent."""
    state = machine_for(backend)
    s0, s1 = state.new_stream(), state.new_stream()
    src = state.link(ctx=state.new_context(stream=s0), name="rmw")
    dst = state.link(ctx=state.new_context(stream=s1), name="mh")
    state.device_to_device(node="h0", mode=MergeMode.Streaming, dst=dst, src=src)
    state.hold(stream=s1, ms=30)
    state.run(r=dst)
    state.run(r=src)
    state.observe(ctx=dst, node="h1")
    state.teardown()
