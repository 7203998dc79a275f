"""A crew of helper threads that run chunks of a parallel loop next to the calling thread (the
CPU compilers' parallelism: the generated code has no threads of its own, see
:mod:`arrayjit_backend_c.cpu.segments`).

The crew is native: a small LLVM module (:data:`CREW_IR`, JIT-compiled once per process by
llvmlite through :mod:`arrayjit_backend_c.cpu.llvm_jit`, so neither compiler needs a C compiler
for it) whose helpers are Python threads that make one ctypes call each, :func:`serve`, and
stay in native code, without the interpreter lock, until the crew stops. A parallel loop is
one ctypes call, ``run``, whatever its number of chunks:

- every chunk is a call of a *task*, ``void task(const int64_t *common, const int64_t *extra,
  int64_t chunk)`` (each parallel segment's ``{name}_task`` wrapper, which unpacks the segment
  function's arguments from the two blocks);
- ``run`` claims idle helpers (an atomic mask of them: concurrent callers never share one, so
  the cores are never oversubscribed), posts the job in each one's mailbox, then takes chunks
  itself (an atomic counter: whoever is free takes the next chunk, so the caller never waits
  for a helper that has not woken up yet, on a loaded machine or a virtual one where a wake-up
  takes tens of microseconds to a time slice), and waits only for the chunks helpers are
  running;
- an idle helper spins (the CPU's pause instruction, checking the clock every 64) for
  :data:`SPIN_NS` before it sleeps on a futex, so back-to-back loops (a routine's parallel
  segments, a Python loop of runs) find it awake, and an idle crew costs no CPU time; the
  caller waits for its helpers the same way.

Futexes are Linux's: on a system whose futex call number :data:`FUTEX_SYSCALLS` does not know
the crew has no helpers (the caller runs every chunk).
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading
import time
import weakref
from typing import Any

import numpy as np

from arrayjit_backends.impl.compile_cache import CompileCache
from arrayjit_backends.impl.stream_queue import Bell

MAX_HELPERS = 63
"""The most helper threads of one crew (the idle mask is 64 bits wide)."""

SPIN_NS = 100_000
"""How long an idle helper (or a caller waiting for its helpers) spins before it sleeps: long
enough to bridge the Python between two runs of a loop of small routines, short enough that a
crew left idle stops taking CPU time at once."""

BELL_GRACE_NS = 20_000
"""How long a stream's worker, woken for a task, sleeps on before it takes it, leaving it to a
caller that waits for it (see :class:`FutexBell`): a task not waited for starts this much
later (when the worker was asleep)."""

FUTEX_SYSCALLS = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98, "riscv64": 98}
"""The futex system call's number per machine (``platform.machine()``) on Linux."""

TASK_ARGTYPES = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
"""A task's parameters: ``(common, extra, chunk)``."""
TASK = ctypes.CFUNCTYPE(None, *TASK_ARGTYPES)
"""A task's ctypes function type."""

CREW_IR = """\
; A crew: 64 bytes of idle mask (bit i: helper i is idle), then one 64-byte slot per helper:
; [0] the job posted to it (null: none; inttoptr 1: stop), [8] i32 bell (a futex word bumped to
; wake it), [12] i32 asleep, [16] i32 started (set once it is idle the first time).
; A job lives on its caller's stack: [0] task, [8] common block, [16] extra block, [24] i64
; chunks, [32] i64 next chunk, [40] i32 helpers still on it (bit 31: the caller sleeps on it).
%job = type {{ ptr, ptr, ptr, i64, i64, i32 }}

declare i64 @syscall(i64, ...)
declare i32 @clock_gettime(i32, ptr)
declare i32 @sched_yield()
{pause_decl}

define internal i64 @now() {{
  %ts = alloca [2 x i64], align 8
  call i32 @clock_gettime(i32 1, ptr %ts)
  %s = load i64, ptr %ts
  %nsp = getelementptr i64, ptr %ts, i64 1
  %ns = load i64, ptr %nsp
  %sns = mul i64 %s, 1000000000
  %t = add i64 %sns, %ns
  ret i64 %t
}}

define internal void @futex_wait(ptr %word, i32 %seen) {{
  %v = zext i32 %seen to i64
  call i64 (i64, ...) @syscall(i64 {futex}, ptr %word, i64 128, i64 %v, ptr null)
  ret void
}}

define internal void @futex_wait_for(ptr %word, i32 %seen, i64 %ns) {{
  %ts = alloca [2 x i64], align 8
  %s = udiv i64 %ns, 1000000000
  %rest = urem i64 %ns, 1000000000
  store i64 %s, ptr %ts
  %nsp = getelementptr i64, ptr %ts, i64 1
  store i64 %rest, ptr %nsp
  %v = zext i32 %seen to i64
  call i64 (i64, ...) @syscall(i64 {futex}, ptr %word, i64 128, i64 %v, ptr %ts)
  ret void
}}

define internal void @futex_wake(ptr %word) {{
  call i64 (i64, ...) @syscall(i64 {futex}, ptr %word, i64 129, i64 1)
  ret void
}}

; One step of a spin that started at %t0: a pause, and every 64th step a look at the clock.
; Returns the next step's number, or -1 once %spin_ns have passed.
define internal i64 @spin_step(i64 %k, i64 %t0, i64 %spin_ns) alwaysinline {{
entry:
  {pause}
  %k1 = add i64 %k, 1
  %check = icmp eq i64 %k1, 64
  br i1 %check, label %clock, label %out
clock:
  %t = call i64 @now()
  %dt = sub i64 %t, %t0
  %over = icmp sge i64 %dt, %spin_ns
  %next = select i1 %over, i64 -1, i64 0
  br label %out
out:
  %r = phi i64 [ %k1, %entry ], [ %next, %clock ]
  ret i64 %r
}}

; Spins until *%at (a pointer) is not null, for at most %spin_ns; returns it (null: timed out).
define internal ptr @spin_for_ptr(ptr %at, i64 %spin_ns) {{
entry:
  %t0 = call i64 @now()
  br label %look
look:
  %k = phi i64 [ 0, %entry ], [ %k1, %pause ]
  %v = load atomic ptr, ptr %at acquire, align 8
  %has = icmp ne ptr %v, null
  br i1 %has, label %out, label %pause
pause:
  %k1 = call i64 @spin_step(i64 %k, i64 %t0, i64 %spin_ns)
  %over = icmp slt i64 %k1, 0
  br i1 %over, label %out, label %look
out:
  %r = phi ptr [ %v, %look ], [ null, %pause ]
  ret ptr %r
}}

; Spins until the low 31 bits of *%at are 0, for at most %spin_ns; returns whether they are.
define internal i1 @spin_for_zero(ptr %at, i64 %spin_ns) {{
entry:
  %t0 = call i64 @now()
  br label %look
look:
  %k = phi i64 [ 0, %entry ], [ %k1, %pause ]
  %v = load atomic i32, ptr %at acquire, align 4
  %low = and i32 %v, 2147483647
  %zero = icmp eq i32 %low, 0
  br i1 %zero, label %out, label %pause
pause:
  %k1 = call i64 @spin_step(i64 %k, i64 %t0, i64 %spin_ns)
  %over = icmp slt i64 %k1, 0
  br i1 %over, label %out, label %look
out:
  %r = phi i1 [ true, %look ], [ false, %pause ]
  ret i1 %r
}}

; Takes and runs chunks of %j until none is left.
define internal void @work(ptr %j) {{
entry:
  %task = load ptr, ptr %j
  %cp = getelementptr %job, ptr %j, i32 0, i32 1
  %common = load ptr, ptr %cp
  %ep = getelementptr %job, ptr %j, i32 0, i32 2
  %extra = load ptr, ptr %ep
  %np = getelementptr %job, ptr %j, i32 0, i32 3
  %n = load i64, ptr %np
  %next = getelementptr %job, ptr %j, i32 0, i32 4
  br label %take
take:
  %c = atomicrmw add ptr %next, i64 1 monotonic
  %more = icmp slt i64 %c, %n
  br i1 %more, label %call, label %done
call:
  call void %task(ptr %common, ptr %extra, i64 %c)
  br label %take
done:
  ret void
}}

; Posts %j (or the stop mark) in helper %i's mailbox and wakes it if it sleeps.
define internal void @post(ptr %crew, i64 %i, ptr %j) {{
  %off = shl i64 %i, 6
  %off1 = add i64 %off, 64
  %slot = getelementptr i8, ptr %crew, i64 %off1
  %bell = getelementptr i8, ptr %slot, i64 8
  %asleep = getelementptr i8, ptr %slot, i64 12
  store atomic ptr %j, ptr %slot seq_cst, align 8
  %s = load atomic i32, ptr %asleep seq_cst, align 4
  %sleeps = icmp ne i32 %s, 0
  br i1 %sleeps, label %wake, label %done
wake:
  atomicrmw add ptr %bell, i32 1 seq_cst
  call void @futex_wake(ptr %bell)
  br label %done
done:
  ret void
}}

; Helper %i's life: idle (spinning, then asleep) until a job or the stop mark is posted.
define void @arrayjit_crew_serve(ptr %crew, i64 %i, i64 %spin_ns) {{
entry:
  %off = shl i64 %i, 6
  %off1 = add i64 %off, 64
  %slot = getelementptr i8, ptr %crew, i64 %off1
  %bell = getelementptr i8, ptr %slot, i64 8
  %asleep = getelementptr i8, ptr %slot, i64 12
  %bit = shl i64 1, %i
  atomicrmw or ptr %crew, i64 %bit seq_cst
  %started = getelementptr i8, ptr %slot, i64 16
  store atomic i32 1, ptr %started seq_cst, align 4
  br label %idle
idle:
  %spun = call ptr @spin_for_ptr(ptr %slot, i64 %spin_ns)
  %woke = icmp ne ptr %spun, null
  br i1 %woke, label %got, label %sleep
sleep:
  %b = load atomic i32, ptr %bell seq_cst, align 4
  store atomic i32 1, ptr %asleep seq_cst, align 4
  %late = load atomic ptr, ptr %slot seq_cst, align 8
  %posted = icmp ne ptr %late, null
  br i1 %posted, label %awake, label %wait
wait:
  call void @futex_wait(ptr %bell, i32 %b)
  br label %awake
awake:
  store atomic i32 0, ptr %asleep seq_cst, align 4
  %after = load atomic ptr, ptr %slot acquire, align 8
  %has = icmp ne ptr %after, null
  br i1 %has, label %got, label %sleep
got:
  %j = phi ptr [ %spun, %idle ], [ %after, %awake ]
  %stop = icmp eq ptr %j, inttoptr (i64 1 to ptr)
  br i1 %stop, label %done, label %run
run:
  store atomic ptr null, ptr %slot monotonic, align 8
  call void @work(ptr %j)
  atomicrmw or ptr %crew, i64 %bit seq_cst
  %hp = getelementptr %job, ptr %j, i32 0, i32 5
  %old = atomicrmw sub ptr %hp, i32 1 seq_cst
  %last = icmp eq i32 %old, -2147483647
  br i1 %last, label %wake, label %idle
wake:
  ; the caller sleeps on the word (its address stays valid: a wake with no sleeper is harmless)
  call void @futex_wake(ptr %hp)
  br label %idle
done:
  store atomic ptr null, ptr %slot seq_cst, align 8 ; a helper started later in this slot
  ret void
}}

; Runs chunks 0..%n-1 of %task, with up to %most idle helpers next to the calling thread.
define void @arrayjit_crew_run(ptr %crew, ptr %task, ptr %common, ptr %extra, i64 %n,
                               i64 %most, i64 %spin_ns) {{
entry:
  %j = alloca %job, align 64
  store ptr %task, ptr %j
  %cp = getelementptr %job, ptr %j, i32 0, i32 1
  store ptr %common, ptr %cp
  %ep = getelementptr %job, ptr %j, i32 0, i32 2
  store ptr %extra, ptr %ep
  %np = getelementptr %job, ptr %j, i32 0, i32 3
  store i64 %n, ptr %np
  %next = getelementptr %job, ptr %j, i32 0, i32 4
  store i64 0, ptr %next
  %hp = getelementptr %job, ptr %j, i32 0, i32 5
  br label %claim
claim:
  %want = phi i64 [ %most, %entry ], [ %want, %lost ], [ %want1, %won ]
  %mine = phi i64 [ 0, %entry ], [ %mine, %lost ], [ %mine1, %won ]
  %enough = icmp sle i64 %want, 0
  br i1 %enough, label %count, label %look
look:
  %idle = load atomic i64, ptr %crew monotonic, align 8
  %none = icmp eq i64 %idle, 0
  br i1 %none, label %count, label %try
try:
  %neg = sub i64 0, %idle
  %bit = and i64 %idle, %neg
  %notbit = xor i64 %bit, -1
  %was = atomicrmw and ptr %crew, i64 %notbit seq_cst
  %had = and i64 %was, %bit
  %got = icmp ne i64 %had, 0
  br i1 %got, label %won, label %lost
lost:
  br label %claim
won:
  %mine1 = or i64 %mine, %bit
  %want1 = sub i64 %want, 1
  br label %claim
count:
  %helpers64 = call i64 @llvm.ctpop.i64(i64 %mine)
  %helpers = trunc i64 %helpers64 to i32
  store i32 %helpers, ptr %hp
  br label %posting
posting:
  %left = phi i64 [ %mine, %count ], [ %rest, %postone ]
  %empty = icmp eq i64 %left, 0
  br i1 %empty, label %work, label %postone
postone:
  %i = call i64 @llvm.cttz.i64(i64 %left, i1 true)
  call void @post(ptr %crew, i64 %i, ptr %j)
  %less = sub i64 %left, 1
  %rest = and i64 %left, %less
  br label %posting
work:
  call void @work(ptr %j)
  %nohelpers = icmp eq i64 %mine, 0
  br i1 %nohelpers, label %done, label %spin
spin:
  %quiet = call i1 @spin_for_zero(ptr %hp, i64 %spin_ns)
  br i1 %quiet, label %done, label %sleep
sleep:
  %old = atomicrmw or ptr %hp, i32 -2147483648 seq_cst
  %oldlow = and i32 %old, 2147483647
  %finished = icmp eq i32 %oldlow, 0
  br i1 %finished, label %done, label %wait
wait:
  %seen = or i32 %old, -2147483648
  call void @futex_wait(ptr %hp, i32 %seen)
  br label %sleep
done:
  ret void
}}

; Takes helper %i (waiting until it is idle) and posts it the stop mark.
define void @arrayjit_crew_stop(ptr %crew, i64 %i) {{
entry:
  %bit = shl i64 1, %i
  %notbit = xor i64 %bit, -1
  br label %try
try:
  %was = atomicrmw and ptr %crew, i64 %notbit seq_cst
  %had = and i64 %was, %bit
  %got = icmp ne i64 %had, 0
  br i1 %got, label %post, label %busy
busy:
  call i32 @sched_yield()
  br label %try
post:
  call void @post(ptr %crew, i64 %i, ptr inttoptr (i64 1 to ptr))
  ret void
}}

; A bell (a stream worker's sleep, see FutexBell): [0] i32 level (0: lowered, 1: raised, 2:
; raised at once), [4] i32 asleep. Returns once the level has stayed raised for %grace_ns, or at
; once for level 2.
define void @arrayjit_bell_wait(ptr %bell, i64 %grace_ns) {{
entry:
  %asleep = getelementptr i8, ptr %bell, i64 4
  br label %look
look:
  %v = load atomic i32, ptr %bell acquire, align 4
  %up = icmp ne i32 %v, 0
  br i1 %up, label %hold, label %sleep
hold:
  %now = icmp ugt i32 %v, 1
  br i1 %now, label %done, label %grace
grace:
  call void @futex_wait_for(ptr %bell, i32 %v, i64 %grace_ns)
  %still = load atomic i32, ptr %bell acquire, align 4
  %kept = icmp ne i32 %still, 0
  br i1 %kept, label %done, label %look
sleep:
  store atomic i32 1, ptr %asleep seq_cst, align 4
  %late = load atomic i32, ptr %bell seq_cst, align 4
  %raised = icmp ne i32 %late, 0
  br i1 %raised, label %awake, label %wait
wait:
  call void @futex_wait(ptr %bell, i32 0)
  br label %awake
awake:
  store atomic i32 0, ptr %asleep seq_cst, align 4
  br label %look
done:
  ret void
}}

; Raises the bell to %level (1, or 2: no grace; that also ends a grace being waited out).
define void @arrayjit_bell_raise(ptr %bell, i32 %level) {{
entry:
  %asleep = getelementptr i8, ptr %bell, i64 4
  store atomic i32 %level, ptr %bell seq_cst, align 4
  %s = load atomic i32, ptr %asleep seq_cst, align 4
  %sleeps = icmp ne i32 %s, 0
  %urgent = icmp ugt i32 %level, 1
  %wakes = or i1 %sleeps, %urgent
  br i1 %wakes, label %wake, label %done
wake:
  call void @futex_wake(ptr %bell)
  br label %done
done:
  ret void
}}

declare i64 @llvm.ctpop.i64(i64)
declare i64 @llvm.cttz.i64(i64, i1)
"""

_PAUSE = {
    "x86_64": ("declare void @llvm.x86.sse2.pause()", "call void @llvm.x86.sse2.pause()"),
    "aarch64": ("declare void @llvm.aarch64.hint(i32)", "call void @llvm.aarch64.hint(i32 1)"),
}


class _Native:
    """The crew module, compiled and loaded: its entry points (the crew's serve, run and stop,
    the bell's wait and raise) as ctypes functions."""

    def __init__(self) -> None:
        # Imported on use: llvmlite is loaded when the first crew or bell needs the module.
        from arrayjit_backend_c.cpu import llvm_jit

        target = llvm_jit.host_target()
        arch = target.triple.split("-")[0]
        decl, pause = _PAUSE.get(arch, ("", ""))
        machine = platform.machine().lower()
        ir = CREW_IR.format(pause_decl=decl, pause=pause, futex=FUTEX_SYSCALLS.get(machine, -1))
        with llvm_jit.LLVM_LOCK:  # the object code is in the compile cache after the first time
            self.engine = CompileCache().load_or_build(
                llvm_jit.object_key(ir, target, "crew"),
                lambda: llvm_jit.compile_object(ir, "crew", target),
                lambda data, cached: llvm_jit.load_object(data, target),
            )
        address = self.engine.get_function_address
        ptr, i64 = ctypes.c_void_p, ctypes.c_int64
        self.serve = ctypes.CFUNCTYPE(None, ptr, i64, i64)(address("arrayjit_crew_serve"))
        self.run = ctypes.CFUNCTYPE(None, ptr, ptr, ptr, ptr, i64, i64, i64)(
            address("arrayjit_crew_run")
        )
        self.stop = ctypes.CFUNCTYPE(None, ptr, i64)(address("arrayjit_crew_stop"))
        self.bell_wait = ctypes.CFUNCTYPE(None, ptr, i64)(address("arrayjit_bell_wait"))
        # Called holding the interpreter lock (a few instructions, or one futex wake): a
        # worker woken by it cannot take the lock from its caller meanwhile.
        self.bell_raise = ctypes.PYFUNCTYPE(None, ptr, ctypes.c_int32)(
            address("arrayjit_bell_raise")
        )


_NATIVE: _Native | None = None
"""The process's crew module, once made: never replaced nor collected, since helper threads and
bells hold its entry points (code in its execution engine) for the life of the process."""
_NATIVE_LOCK = threading.Lock()


def _native() -> _Native:
    """The crew module, compiled and loaded by the first caller; safe to call from several
    threads at once (a second module, made by a race and dropped, would free code that its
    callers' ctypes functions still point into)."""
    global _NATIVE
    if _NATIVE is None:
        with _NATIVE_LOCK:
            if _NATIVE is None:
                _NATIVE = _Native()
    return _NATIVE


def has_helpers() -> bool:
    """Whether crews on this system get helper threads (Linux on a machine whose futex call
    :data:`FUTEX_SYSCALLS` knows)."""
    return platform.system() == "Linux" and platform.machine().lower() in FUTEX_SYSCALLS


class Crew:
    """Helper threads for parallel loops, shared by the threads that run routines (see the
    module docstring).

    Helpers start on first need, up to ``size``; :meth:`stop` (or the crew's collection) ends
    them."""

    def __init__(self, size: int, name: str = "arrayjit-crew") -> None:
        """``size``: the most helper threads (at most :data:`MAX_HELPERS`; none where
        :func:`has_helpers` is false); ``name``: their names' prefix."""
        self.size = max(0, min(size, MAX_HELPERS)) if has_helpers() else 0
        self.name = name
        words = np.zeros(8 * (self.size + 2) + 8, np.int64)  # the mask, the slots, alignment
        self._memory = words
        self.address = words.ctypes.data + (-words.ctypes.data) % 64
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._stopper = weakref.finalize(self, _stop, self.address, words, self._threads)
        _CREWS.add(self)

    def _forget_helpers(self) -> None:
        """In a child process made by ``fork``: the helper threads were not copied, so none is
        idle (a run would post them jobs and wait forever); later runs start new ones."""
        self._memory[:] = 0
        self._threads.clear()
        self._lock = threading.Lock()

    @property
    def started(self) -> int:
        """How many helper threads are running."""
        return len(self._threads)

    def _start(self, count: int) -> None:
        native = _native()
        with self._lock:
            flags = []
            while len(self._threads) < count:
                i = len(self._threads)
                flag = ctypes.c_int32.from_address(self.address + 64 * (i + 1) + 16)
                flag.value = 0
                flags.append(flag)
                thread = threading.Thread(
                    target=native.serve,
                    args=(self.address, i, SPIN_NS),
                    name=f"{self.name}-{i}",
                    daemon=True,
                )
                thread.start()
                self._threads.append(thread)
            # A helper can be claimed once it has marked itself idle: wait for the new ones, so
            # that the run that started them gets them (a thread starts in tens of microseconds).
            deadline = time.monotonic() + 1.0
            for flag in flags:
                while not flag.value and time.monotonic() < deadline:
                    time.sleep(0)

    def run(
        self, task: int, common: int, extra: int, chunks: int, threads: int | None = None
    ) -> None:
        """Calls ``task(common, extra, chunk)`` for every chunk of ``range(chunks)``, each once,
        on the calling thread and idle helpers; returns when all are done. ``task``: the
        address of a native function of type :data:`TASK`; ``threads``: the most threads to
        use, the caller's included (its stream's share of the cores, see
        :class:`~arrayjit_backends.impl.stream_queue.ThreadBudget`; None: no limit).

        Raises:
            TypeError: ``task`` is not a non-null address (an ``int``): ctypes would take a
                string or ``None`` for a pointer and the call would crash the process.
        """
        if type(task) is not int or task == 0:
            raise TypeError(f"crew {self.name}: task must be a function's address, got {task!r}")
        most = min(chunks if threads is None else min(chunks, threads), self.size + 1) - 1
        if most > len(self._threads):
            self._start(most)
        _native().run(self.address, task, common, extra, chunks, most, SPIN_NS)

    def stop(self) -> None:
        """Stop every helper thread (waiting for those running a job to finish it); later runs
        start new ones."""
        with self._lock:
            _stop(self.address, self._memory, self._threads)


_CREWS: weakref.WeakSet[Crew] = weakref.WeakSet()
"""Every live crew, for :func:`_after_fork`."""


def _after_fork() -> None:
    for crew in list(_CREWS):
        crew._forget_helpers()


os.register_at_fork(after_in_child=_after_fork)


def _stop(address: int, memory: Any, threads: list[threading.Thread]) -> None:
    """Post the stop mark to every started helper and wait for it to end (``memory``, the
    crew's words, stays referenced until they have)."""
    if not threads:
        return
    native = _native()
    for i in range(len(threads)):
        native.stop(address, i)
    for thread in threads:
        thread.join(timeout=10)
    threads.clear()  # in place: the finalizer holds this list
    del memory


class FutexBell(Bell):
    """A stream worker's :class:`~arrayjit_backends.impl.stream_queue.Bell` on a futex.

    The worker sleeps in native code, without the interpreter lock; once woken it sleeps
    :data:`BELL_GRACE_NS` more (a timed futex wait, leaving the core to the caller's parallel
    loop) and goes back to sleep if the bell was lowered meanwhile: a caller that runs the
    task itself (a run and wait, :meth:`lower`) leaves the worker in the kernel instead of
    returning it to Python to find the queue empty. The raise is called holding the
    interpreter lock, so a woken worker cannot take the task from under its caller. With the
    lock-based bell, the worker took a third of the tasks of a run-and-wait loop of a 2^18
    routine (the caller then slept until it had run it), and the stray wake-ups cost the others
    the interpreter lock and a core."""

    def __init__(self) -> None:
        self._words = np.zeros(2, np.int32)
        self._address = self._words.ctypes.data
        self._raised = 0
        """The level last set: 0 lowered, 1 raised, 2 raised at once."""
        native = _native()
        self._native = native  # its engine holds the code of the two entry points
        self._raise, self._wait = native.bell_raise, native.bell_wait

    def raise_(self, at_once: bool = False) -> None:
        level = 2 if at_once else 1
        if self._raised < level:
            self._raised = level
            self._raise(self._address, level)

    def lower(self) -> None:
        if self._raised:
            self._raised = 0
            self._words[0] = 0

    def prepare(self) -> None:
        pass  # the native wait announces its sleep itself

    def wait(self) -> None:
        self._wait(self._address, BELL_GRACE_NS)
