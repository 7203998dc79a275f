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

The model follows the backends README ("Semantics decided here"):

- freshness of hosted nodes is per buffer: a buffer is fresh when it read the host array since
  the host array last changed, or computed the node's latest value itself; ``from_host`` copies
  exactly into a buffer that is not fresh. ``set_values`` makes every buffer stale, a routine
  writing a hosted node makes its buffer the only fresh one, ``to_host`` makes the copied buffer
  the only fresh one, ``device_to_device(No)`` makes the destination fresh exactly when the
  source is;
- ``Copy`` and ``Streaming`` merges mean the same: the merge buffer holds the value the source
  had when ``device_to_device`` was called (Streaming just avoids the copy where it can);
- ``u`` (where the backend can: ``use_host_memory``) has one buffer, its host array:
  linking uploads nothing, ``from_host`` and ``to_host`` copy nothing, ``get_values`` shows
  what routines wrote;
- the shared node ``s`` (one buffer per device) and the per-stream node ``g`` (one per context
  lineage) start uninitialized (NaN cells in the model: any value is accepted until they are
  written).

Streams alternate between two devices where the backend has two.

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
HOSTED = ("h0", "h1", "h2", "u")
"""``u`` computes on its host array directly where the backend can (``use_host_memory``: the
CPU backends); elsewhere it is one more hosted node."""
NODES = (*HOSTED, "g", "s")
MAX_STREAMS = 3
MAX_CONTEXTS = 10
WAIT_LIMIT = 30.0
"""Seconds any single blocking call may take before the test reports a deadlock."""
CI_EXAMPLES = 100
CI_STEPS = 40
FUZZ_SHARE = 10
F32 = np.float32

UNKNOWN = np.full(N, np.nan, dtype=F32)
"""Uninitialized memory in the model: any value matches a NaN cell."""


def _matches(got: np.ndarray, want: np.ndarray) -> bool:
    return bool(np.all(np.isnan(want) | (got == want)))


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
        RoutineSpec("tou", "u", ("u", "h0"), None, lambda u, h0: u + h0),
        RoutineSpec("fromu", "h2", ("u", "h1"), None, lambda u, h1: u - h1),
    )
}


def _make_nodes() -> dict[str, Tnode]:
    nodes = {n: Tnode.create((N,), label=n, hosted=True) for n in HOSTED}
    nodes["g"] = Tnode.create((N,), label="g", memory_mode=(mm.On_device(mm.Sharing.Per_stream), 1))
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
        "tou": lambda: (ir.accum(out, "add", t["h0"], initialize_neutral=False),),
        "fromu": lambda: (ir.binop(out, "sub", t["u"], t["h1"]),),
    }[spec.name]()
    return ir.block(*body)


class Env:
    """What one backend's run of the machine keeps across examples: the nodes, the compiled
    codes, and a pool of streams (streams are threads on ``multicore_`` backends; a new one
    per example would pile them up)."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.nodes = _make_nodes()
        self.host_memory = bool(getattr(backend.capabilities, "use_host_memory", False))
        """Whether ``u``'s buffer is its host array."""
        if self.host_memory:
            backend.use_host_memory(self.nodes["u"])
        self.names = {tn: n for n, tn in self.nodes.items()}
        self.codes = {n: backend.compile(_comp(s, self.nodes), name=n) for n, s in SPECS.items()}
        for name, spec in SPECS.items():
            code = self.codes[name]
            assert code.optimized.merge_node == (self.nodes[spec.merge] if spec.merge else None)
            have = {self.names[tn] for tn in code.optimized.context_nodes}
            assert have == {*spec.reads, spec.writes}, f"{name}: context nodes {have}"
        # Streams alternate between the first two devices where there are two (transfers and
        # merges between devices then take part in the search).
        self.devices = min(backend.num_devices(), 2)
        self.streams = [
            backend.new_stream(backend.get_device(k % self.devices)) for k in range(MAX_STREAMS)
        ]
        # The shared node gets its device buffer when a routine using it is first linked;
        # after that, routines that only read it link anywhere on the device.
        for stream in self.streams[: self.devices]:
            backend.link(backend.make_context(stream), self.codes["tos"])


# ---- deadlines -----------------------------------------------------------------------------


class Deadlock(AssertionError):
    """A blocking call did not return within :data:`WAIT_LIMIT`."""


def _stderr() -> Any:
    """The process's standard error (fd 2, which pytest captures into the report), whatever
    object ``sys.stderr`` is now: faulthandler needs a real file descriptor."""
    return sys.__stderr__ if sys.__stderr__ is not None else 2


def _dump_stacks() -> None:
    with contextlib.suppress(OSError, ValueError):
        faulthandler.dump_traceback(file=_stderr(), all_threads=True)


@contextlib.contextmanager
def deadline(what: str, seconds: float = WAIT_LIMIT) -> Iterator[None]:
    """Fail with :class:`Deadlock` (after printing every thread's stack to stderr) if the block
    runs longer than ``seconds``. A timer signal interrupts the blocked main thread (lock waits
    are interruptible on POSIX), so no helper thread is left hanging. Elsewhere (not the main
    thread, no ``setitimer``) a watchdog thread prints the stacks and lets the test run on:
    Python cannot interrupt another thread."""
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):

        def on_alarm(signum: int, frame: Any) -> None:
            _dump_stacks()
            raise Deadlock(f"{what} did not return within {seconds:g} s (deadlock?)")

        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    else:
        faulthandler.dump_traceback_later(seconds, exit=False, file=_stderr())
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()


# ---- the model -----------------------------------------------------------------------------


@dataclass
class MStream:
    stream: Any
    index: int
    merge: tuple[str, np.ndarray] | None = None
    """The node the merge buffer holds and its value, in program order; None: unknown (set
    before this example)."""

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
    """Values in program order: the host arrays, every buffer (by id), which buffers of each
    hosted node are fresh, how many host writes each hosted node had, and for each buffer of a
    hosted node the count when its value was last defined (a run uploads a buffer defined
    before the latest host write: the backends README, "A run never reads a stale hosted
    input")."""

    host: dict[str, np.ndarray] = field(default_factory=dict)
    buf: dict[int, np.ndarray] = field(default_factory=dict)
    fresh: dict[str, set[int]] = field(default_factory=lambda: {n: set() for n in HOSTED})
    host_writes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(HOSTED, 0))
    defined_at: dict[int, int] = field(default_factory=dict)

    def new_buffer(self, value: np.ndarray) -> int:
        bid = len(self.buf) + 1
        self.buf[bid] = value
        return bid


class Schedules(RuleBasedStateMachine):
    """The machine; ``ENV`` is set per backend by the test."""

    ENV: Env

    streams = Bundle("streams")
    contexts = Bundle("contexts")
    """Contexts of linked routines (``MCtx.routine``), a routine's context is where it runs."""

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
                self.model.host[name] = v
        self.shared_s = [self.model.new_buffer(UNKNOWN) for _ in range(env.devices)]
        self.u_buf = self.model.new_buffer(self.model.host["u"])
        """With ``use_host_memory``: the buffer of ``u`` in every context, its host array."""
        """The buffer of ``s`` on each device."""

    def on_host(self, node: str) -> bool:
        """Whether ``node``'s buffer is its host array (``use_host_memory``)."""
        return node == "u" and self.env.host_memory

    # ---- streams and contexts ----

    @precondition(lambda self: len(self.used) < MAX_STREAMS)
    @rule(target=streams)
    def new_stream(self) -> MStream:
        ms = MStream(self.env.streams[len(self.used)], len(self.used))
        self.used.append(ms)
        return ms

    def new_context(self, stream: MStream) -> MCtx:
        """A context without a parent (used by :meth:`link_new`)."""
        return MCtx(self.backend.make_context(stream.stream), stream, {}, 0)

    @precondition(lambda self: self.n_ctx < MAX_CONTEXTS)
    @rule(target=contexts, stream=streams, name=st.sampled_from(sorted(SPECS)))
    def link_new(self, stream: MStream, name: str) -> Any:
        """Link a routine into a new context on ``stream``."""
        return self.link(self.new_context(stream), name)

    @precondition(lambda self: self.n_ctx < MAX_CONTEXTS)
    @rule(target=contexts, ctx=contexts, name=st.sampled_from(sorted(SPECS)))
    def link(self, ctx: MCtx, name: str) -> Any:
        """Link into a child of ``ctx`` (a routine's context: contexts are persistent, so
        linking twice from one gives two independent lineages): nodes new to the lineage get
        buffers, hosted ones uploaded (fresh)."""
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
                bufs[node] = self.shared_s[ctx.stream.stream.device.ordinal]
            elif self.on_host(node):
                bufs[node] = self.u_buf  # nothing is uploaded
            elif node in HOSTED:
                bufs[node] = m.new_buffer(m.host[node])
                m.fresh[node].add(bufs[node])
                m.defined_at[bufs[node]] = m.host_writes[node]
            else:
                bufs[node] = m.new_buffer(UNKNOWN)
        self.n_ctx += 1
        child = MCtx(r.context, ctx.stream, bufs, self.n_ctx, r, spec)
        self.contexts_seen.append(child)
        assert {self.env.names[tn] for tn in r.context.buffers} >= set(bufs)
        return child

    # ---- running ----

    @rule(r=contexts)
    def run(self, r: MCtx) -> None:
        spec = r.spec
        assert spec is not None
        m, stream = self.model, r.stream
        for n in spec.reads:  # hosted inputs the host wrote since: uploaded by the run
            bid = r.bufs[n]
            if n in HOSTED and not self.on_host(n) and m.defined_at.get(bid) != m.host_writes[n]:
                m.buf[bid] = m.host[n]
                m.defined_at[bid] = m.host_writes[n]
                m.fresh[n].add(bid)
        inputs = [m.buf[r.bufs[n]] for n in spec.reads]
        if spec.merge is not None:
            if stream.merge is None:
                return  # the merge buffer holds what an earlier example left there
            held, value = stream.merge
            if held != spec.merge:
                with pytest.raises(UsageError, match=r"reads the merge buffer as"):
                    r.routine()
                return
            inputs.append(value)
        with deadline(f"run {spec.name}"):
            r.routine()
        with np.errstate(all="ignore"):
            out = np.asarray(spec.fn(*inputs), dtype=F32)
        bid = r.bufs[spec.writes]
        m.buf[bid] = out
        if self.on_host(spec.writes):
            m.host["u"] = out
            self.stable.pop("u", None)  # the routine writes the host array: asked for
        elif spec.writes in HOSTED:
            m.fresh[spec.writes] = {bid}
            m.defined_at[bid] = m.host_writes[spec.writes]

    # ---- host side ----

    @rule(node=st.sampled_from(HOSTED), values=st.lists(st.integers(-8, 8), min_size=N, max_size=N))
    def set_values(self, node: str, values: list[int]) -> None:
        v = np.array(values, dtype=F32)
        with deadline(f"{node}.set_values"):
            self.t[node].set_values(v)
        self.model.host[node] = v
        self.model.fresh[node] = set()
        self.model.host_writes[node] += 1
        if self.on_host(node):
            self.model.buf[self.u_buf] = v
        self.stable.pop(node, None)

    @rule(ctx=contexts, node=st.sampled_from(HOSTED))
    def from_host(self, ctx: MCtx, node: str) -> None:
        with deadline(f"from_host {node}"):
            done = self.backend.from_host(ctx.ctx, self.t[node])
        assert done == (node in ctx.bufs), f"from_host({ctx}, {node}) returned {done}"
        m = self.model
        if done and not self.on_host(node) and ctx.bufs[node] not in m.fresh[node]:
            m.buf[ctx.bufs[node]] = m.host[node]
            m.fresh[node].add(ctx.bufs[node])
            m.defined_at[ctx.bufs[node]] = m.host_writes[node]

    @rule(ctx=contexts, node=st.sampled_from(HOSTED))
    def to_host(self, ctx: MCtx, node: str) -> None:
        with deadline(f"to_host {node}"):
            done = self.backend.to_host(ctx.ctx, self.t[node])
        assert done == (node in ctx.bufs), f"to_host({ctx}, {node}) returned {done}"
        if done and not self.on_host(node):
            self.model.host[node] = self.model.buf[ctx.bufs[node]]
            self.model.fresh[node] = {ctx.bufs[node]}
            self.model.defined_at[ctx.bufs[node]] = self.model.host_writes[node]
            self.stable.pop(node, None)

    @rule(node=st.sampled_from(HOSTED))
    def get_values(self, node: str) -> None:
        with deadline(f"{node}.get_values"):
            got = self.t[node].get_values()
        want = self.model.host[node]
        assert _matches(got, want), (
            f"{node}.get_values() on {self.backend.name} gave {got.tolist()}, the program "
            f"means {want.tolist()} (a stale or lost value)"
        )
        self.model.host[node] = got  # NaN (unknown) cells are known now
        if self.on_host(node):
            self.model.buf[self.u_buf] = got
        self.stable[node] = got

    @rule(ctx=contexts, node=st.sampled_from(HOSTED))
    def observe(self, ctx: MCtx, node: str) -> None:
        """``to_host`` then ``get_values``: a look at one buffer."""
        self.to_host(ctx, node)
        self.get_values(node)

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
        if mode is not MergeMode.No:
            dst.stream.merge = (node, m.buf[sbid])
            return
        dbid = dst.bufs[node]
        if dbid == sbid:
            return  # one buffer (a shared node on one device, or a host array)
        m.buf[dbid] = m.buf[sbid]
        if node in HOSTED:
            m.defined_at[dbid] = m.host_writes[node]
            if sbid in m.fresh[node]:
                m.fresh[node].add(dbid)
            else:
                m.fresh[node].discard(dbid)

    @rule(stream=streams)
    def await_stream(self, stream: MStream) -> None:
        with deadline(f"await_stream {stream}"):
            self.backend.await_stream(stream.stream)
        assert self.backend.is_idle(stream.stream)

    @rule(stream=streams)
    def sync_event(self, stream: MStream) -> None:
        """Block on an event of everything scheduled on ``stream`` so far."""
        event = self.backend.all_work(stream.stream)
        with deadline(f"sync of all work of {stream}"):
            self.backend.sync(event)
        assert self.backend.is_done(event)

    @rule(waiter=streams, on=streams)
    def will_wait_for(self, waiter: MStream, on: MStream) -> None:
        """Make ``waiter`` wait for everything scheduled on ``on`` so far (an ordering the
        program does not need: it must change no value)."""
        event = self.backend.all_work(on.stream)
        with deadline(f"{waiter} waiting for {on}"):
            self.backend.will_wait_for(self.backend.make_context(waiter.stream), event)

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

    def teardown(self) -> None:
        """Wait for every stream, then look at every host array and every hosted buffer of
        every context (the end of the program observes all it left behind), then send the
        host's values to every buffer and look again."""
        with deadline("awaiting every stream at the end"):
            for ms in self.used:
                self.backend.await_stream(ms.stream)
        self.host_arrays_stay_put()
        for node in HOSTED:
            self.get_values(node)
        for ctx in self.contexts_seen:
            for node in HOSTED:
                self.observe(ctx, node)
        # Then the host's value to every buffer in turn: each from_host follows a to_host
        # from another buffer, so it must copy.
        for ctx in self.contexts_seen:
            for node in HOSTED:
                self.from_host(ctx, node)
                self.observe(ctx, node)


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


# The machine asks for transfers on contexts that lack the node on purpose; the warning that a
# routine's context holds it is checked by test_stale_inputs.py.
@pytest.mark.filterwarnings(r"ignore:(from|to)_host. node .* linked from it:UserWarning")
def test_schedules(backend: Any) -> None:
    """The state machine on the backend under test."""
    env = Env(backend)
    machine = type("ScheduleMachine", (Schedules,), {"ENV": env})
    run_state_machine_as_test(machine, settings=machine_settings())


def machine_for(backend: Any) -> Schedules:
    """A fresh machine on ``backend``, for replaying a schedule step by step."""
    machine: type[Schedules] = type("ScheduleMachine", (Schedules,), {"ENV": Env(backend)})
    return machine()


def test_found_from_host_into_a_second_stream(backend: Any) -> None:
    """Issue 21, first defect: after ``set_values``, ``from_host`` into the first stream's
    buffer must not make the second stream's buffer look fresh."""
    state = machine_for(backend)
    s0, s1 = state.new_stream(), state.new_stream()
    r1 = state.link_new(stream=s0, name="inc")
    r2 = state.link_new(stream=s1, name="inc")
    state.set_values(node="h0", values=[9, 9, 9, 9])
    state.from_host(ctx=r1, node="h0")
    state.from_host(ctx=r2, node="h0")
    state.run(r=r2)
    state.observe(ctx=r2, node="h1")
    state.teardown()


def test_found_from_host_after_a_sibling_context_uploaded(backend: Any) -> None:
    """Two contexts of one stream hold their own buffers of ``h0``; linking the second
    uploads the new host value into it. The first buffer still lags the host: ``from_host``
    into it must copy (freshness is a buffer's, not a device's; the search's own variant of
    issue 21's first defect)."""
    state = machine_for(backend)
    root = state.new_context(stream=state.new_stream())
    r = state.link(ctx=root, name="inc")
    state.set_values(node="h0", values=[0, 0, 0, 0])
    state.link(ctx=root, name="tos")  # a sibling of r's context, with its own buffer of h0
    state.from_host(ctx=r, node="h0")
    state.observe(ctx=r, node="h0")
    state.teardown()


def test_found_set_values_waits_for_every_upload(backend: Any) -> None:
    """Two uploads of one host array on two streams (each context's first link uploads its
    buffer); the first stream lags. ``set_values`` must wait for both reads of the host array,
    not only for the latest one. Found by the search (not among issue 21's three defects)."""
    state = machine_for(backend)
    s0, s1 = state.new_stream(), state.new_stream()
    state.hold(stream=s0, ms=30)
    r1 = state.link_new(stream=s0, name="inc")
    state.link_new(stream=s1, name="inc")
    state.set_values(node="h0", values=[9, 9, 9, 9])
    state.observe(ctx=r1, node="h0")
    state.teardown()


def test_found_older_transfer_lands_last(backend: Any) -> None:
    """Two streams write ``h1`` and copy it to the host; the first stream lags. The host array
    must end with the value of the later ``to_host`` and keep it (issue 21, second defect)."""
    state = machine_for(backend)
    s0, s1 = state.new_stream(), state.new_stream()
    r0 = state.link_new(stream=s0, name="inc")
    state.set_values(node="h0", values=[5, 5, 5, 5])
    r1 = state.link_new(stream=s1, name="inc")
    state.hold(stream=s0, ms=30)
    state.run(r=r0)
    state.run(r=r1)
    state.to_host(ctx=r0, node="h1")
    state.to_host(ctx=r1, node="h1")
    state.get_values(node="h1")
    state.teardown()


def test_found_streaming_merge_before_the_sources_next_write(backend: Any) -> None:
    """A lagging stream reads ``h0`` through a Streaming merge; the source stream rewrites
    ``h0`` next. The reader must see the value sent (issue 21, third defect)."""
    state = machine_for(backend)
    s0, s1 = state.new_stream(), state.new_stream()
    src = state.link_new(stream=s0, name="rmw")
    dst = state.link_new(stream=s1, name="mh")
    state.device_to_device(node="h0", mode=MergeMode.Streaming, dst=dst, src=src)
    state.hold(stream=s1, ms=30)
    state.run(r=dst)
    state.run(r=src)
    state.observe(ctx=dst, node="h1")
    state.teardown()


def test_deadline_fails_a_blocked_wait() -> None:
    """The deadlock check itself: a wait that never ends fails within the deadline, and the
    timer is gone afterwards."""
    never = threading.Event()
    with (
        pytest.raises(Deadlock, match=r"waiting for nothing did not return within 0.05 s"),
        deadline("waiting for nothing", 0.05),
    ):
        never.wait()
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
