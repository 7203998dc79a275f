"""First use from several threads at once: a fresh process whose threads, released together,
each make their first backend, stream, compile, link, run and copy to the host.

Everything a backend creates lazily on first use (native helper modules, compilers, LLVM's
target, toolchain probes, device contexts, the registry's entries) must be as safe to reach
from eight threads at the same instant as from one: not a crash, not two instances where one
is kept alive and the other's code is freed under it. Each check runs in a subprocess of its
own, since a first use happens once per process (and a crash must fail the test, not end the
suite); it is repeated, since a race does not lose every time.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import numpy as np

from arrayjit_backends import registry
from arrayjit_conformance.plugin import skip_or_fail

THREADS = 8
RUNS = 3
SIZE = 1 << 17
"""Large enough that each routine is not short: it runs on a stream's worker, and on the
multicore CPU backends its parallel loop runs on the crew."""
INTERP_SIZE = 1 << 10
"""The size on the reference interpreter, which runs every scalar step in Python."""

SCRIPT = """
import json, sys, threading
import numpy as np
from arrayjit_backends import fresh_backend
from arrayjit_ir import ir
from arrayjit_tnode import Tnode

name, threads, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
comps, inputs = [], []
for i in range(threads):  # nodes and values made up front: the race is the backend's
    a = Tnode.create((n,), label=f"a{i}", hosted=True)
    k, one = Tnode.create((n,), label=f"k{i}"), Tnode.create((n,), label=f"one{i}")
    t = Tnode.create((n,), label=f"t{i}")
    y = Tnode.create((n,), label=f"y{i}", hosted=True)
    a.set_values(np.arange(n, dtype=np.float32) % 7 - 3)
    comps.append(ir.block(
        ir.fetch(k, ir.Constant(float(i + 2))), ir.fetch(one, ir.Constant(1.0)),
        ir.binop(t, "mul", a, k), ir.binop(y, "add", t, one),
    ))
    inputs.append(y)
start = threading.Barrier(threads, timeout=120)
paired = threading.Barrier(threads, timeout=120)
backends = [None] * threads
results = [None] * threads

def work(i):
    try:
        start.wait()
        backends[i] = fresh_backend(name)
        paired.wait()
        # Odd threads use their even neighbour's backend: first streams of one backend made
        # at once, as well as first uses of separate backends.
        b = backends[i - i % 2]
        ctx = b.make_context(b.new_stream(b.get_device(0)))
        routine = b.link(ctx, b.compile(comps[i], name=f"first_use_{i}"))
        routine()
        b.to_host(routine.context, inputs[i])
        results[i] = inputs[i].get_values().astype(float).tolist()
    except BaseException as exc:
        start.abort()
        paired.abort()
        results[i] = f"{type(exc).__name__}: {exc}"

workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
for w in workers:
    w.start()
for w in workers:
    w.join()
for b in backends:
    if b is not None:
        b.finalize()
print(json.dumps(results))
"""


def _run_once(name: str, size: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, name, str(THREADS), str(size)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _exit_status(code: int) -> str:
    if code < 0:
        return f"killed by {signal.Signals(-code).name} ({code})"
    return f"exit status {code}"


def test_concurrent_first_use(backend_name: str) -> None:
    """Eight threads of a fresh process, released by a barrier, each make a backend (odd
    threads then use their even neighbour's), a stream, and compile, link, run and read back a
    routine of their own; the process exits 0 and every thread's values are numpy's."""
    reason = registry.resolve_name(backend_name).probe()
    if reason is not None:
        skip_or_fail(backend_name, reason)
    size = INTERP_SIZE if backend_name.endswith("interp") else SIZE
    x = np.arange(size, dtype=np.float32) % 7 - 3
    for run in range(RUNS):
        done = _run_once(backend_name, size)
        where = f"backend {backend_name}, run {run + 1} of {RUNS}"
        assert done.returncode == 0, (
            f"{where}: a fresh process whose {THREADS} threads first use the backend at once "
            f"ended with {_exit_status(done.returncode)}\nstderr:\n{done.stderr[-4000:]}"
        )
        results = json.loads(done.stdout.strip().splitlines()[-1])
        for i, got in enumerate(results):
            assert isinstance(got, list), f"{where}: thread {i} failed: {got}"
            np.testing.assert_allclose(
                np.array(got), x * (i + 2) + 1, rtol=1e-6, err_msg=f"{where}: thread {i}"
            )
