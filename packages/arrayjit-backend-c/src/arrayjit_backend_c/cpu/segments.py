"""Segments: how both CPU compilers run a routine on several threads.

A routine becomes one native function per *segment* of its top-level statements
(:func:`split_segments`): a parallel loop (a top-level loop whose iterations write disjoint
cells, or that reduces into one cell, with enough work), a packed matmul, or a run of the serial
statements between them. The routine's *common* parameters are the context nodes' buffers (in
:func:`~arrayjit_backends.codegen.kernel_plan.kernel_params` order), the merge buffer if the
routine reads it, the scratch buffers (kernel-local nodes too large for the stack or touched by
several segments: :func:`plan_segments`), then the static indices; each segment function takes
only those it uses (:attr:`Segment.args`: the buffers and scratch it touches, the merge buffer,
every static index), in that order, so that the generated source grows with the program, not
with segments times nodes. A parallel segment's function takes a range of its loop after them
(:class:`Segment`), and has a *task*
(:attr:`Segment.task_name`) that calls it with one chunk's arguments read from blocks of int64
(:func:`task_arguments`). The task's text names no position among the routine's parameters (each
chunk's row holds the positions it reads), so that the tasks of identical segment functions are
identical too (:mod:`arrayjit_backend_c.cpu.units` compiles them once).

At link (:meth:`SegmentedCompiler.link`) each parallel segment is cut into chunks
(:func:`chunks`), as many as its cost is worth
(:func:`~arrayjit_backends.codegen.kernel_plan.worth_threads`), which the calling thread and the
compiler's native :class:`~arrayjit_backend_c.cpu.crew.Crew` of helper threads run in one ctypes
call, the caller never waiting for a helper that has not woken up. The chunks are fixed at
link, so a reduction's bits do not depend on which thread ran what. (The cc compiler ran its
parallel loops as OpenMP regions before: on a virtual machine each region cost 80-110 us of
thread wake-ups under the passive wait policy that the loaded case needs, more than the work of
most loops.)
"""

from __future__ import annotations

import abc
import ctypes
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from arrayjit_backend_c.cpu.crew import TASK_ARGTYPES, Crew, FutexBell, has_helpers
from arrayjit_backend_c.cpu.matmul import CpuMatmul, buffer_bytes, cpu_matmul
from arrayjit_backend_c.cpu.work import is_short
from arrayjit_backends import settings
from arrayjit_backends.codegen.kernel_plan import (
    PARALLEL_MIN_WORK,
    SIMD_LANES,
    KernelParams,
    ScalarReduction,
    is_parallel_loop,
    kernel_params,
    loop_work,
    scalar_reduction,
    worth_threads,
)
from arrayjit_backends.codegen.row_plan import fuse_row_loops, packed_dots, resident_rows
from arrayjit_backends.impl.cpu_compiler import (
    CpuCompiler,
    GetMergeView,
    NativeArgs,
    NodeViews,
    Run,
    native_argtypes,
)
from arrayjit_backends.impl.device import ScratchAccount
from arrayjit_backends.impl.stream_queue import Bell, thread_share
from arrayjit_ir import low_level as L
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_ir.optimized import Optimized
from arrayjit_ir.summation import widen_blocks
from arrayjit_tnode import Tnode

STACK_LIMIT_BYTES = 1 << 16
"""Kernel-local nodes larger than this live in scratch buffers allocated at link, not on the
stack (helper threads have small stacks)."""


Group = list[L.Stmt] | L.For_loop | L.Set
"""A segment's statements: a serial run (a list), a parallel loop, or a reduction's ``Set``."""


@dataclass(frozen=True)
class Segment:
    """One generated function: a run of serial top-level statements, a parallel loop, or a
    parallel reduction."""

    name: str
    loop: L.For_loop | None = None
    """The parallel loop; its function takes ``(start, stop)`` after the common parameters."""
    reduction: ScalarReduction | None = None
    """For a parallel reduction (then ``loop`` is its outer loop): the function takes
    ``(start, stop, partials, slot)`` and stores the reduction of its range, from the op's
    identity, into ``partials[slot]`` (8-byte slots); ``{name}_combine`` takes
    ``(partials, count)`` and folds the partials into the cell."""
    matmul: CpuMatmul | None = None
    """For the packed matmul (then ``loop`` is the nest it replaces): the function takes
    ``(start, stop, buffer)``, a range of its :attr:`~arrayjit_backend_c.cpu.matmul.CpuMatmul.
    units` (not of the loop) and the chunk's packing buffer
    (:func:`~arrayjit_backend_c.cpu.matmul.buffer_bytes`, 64-byte aligned)."""
    grain: int = 1
    """Chunks of the loop start at multiples of this many iterations from its start (a loop
    whose function runs several iterations side by side: the cc renderer's unroll-and-jam)."""
    args: tuple[int, ...] = ()
    """The routine's common parameters this segment's functions take, as indices into them
    (:func:`~arrayjit_backends.impl.cpu_compiler.native_argtypes` order, with the scratch
    buffers as its extra pointers; :attr:`SegmentPlan.args`), increasing."""

    @property
    def parallel(self) -> bool:
        return self.loop is not None

    @property
    def combine_name(self) -> str:
        return f"{self.name}_combine"

    @property
    def task_name(self) -> str:
        """A parallel segment's task: its function called with the arguments of one chunk,
        ``void task(const int64_t *common, const int64_t *extra, int64_t chunk)`` (the type
        the :class:`~arrayjit_backend_c.cpu.crew.Crew` runs; see :func:`task_arguments`)."""
        return f"{self.name}_task"

    def extra_pointers(self) -> list[bool]:
        """Per parameter this segment's function takes after the common ones, whether it is a
        pointer (else an ``int64``)."""
        if self.matmul is not None:
            return [False, False, True]
        if self.reduction is not None:
            return [False, False, True, False]
        return [False, False] if self.parallel else []

    def chunk_width(self) -> int:
        """The ``int64`` values of one chunk's row of a parallel segment's task
        (:func:`task_arguments`): its extra arguments, then the positions of its common ones."""
        return len(self.extra_pointers()) + len(self.args)

    def chunk_row(self, extra: tuple[int, ...]) -> tuple[int, ...]:
        """One chunk's row (:meth:`chunk_width` values): the chunk's ``extra`` arguments, then
        :attr:`args`."""
        return (*extra, *self.args)

    def extra_argtypes(self) -> list[Any]:
        """The ctypes types of the parameters this segment's function takes after the common
        ones."""
        return [ctypes.c_void_p if p else ctypes.c_int64 for p in self.extra_pointers()]


@dataclass(frozen=True)
class Arg:
    """One argument of a task's call (:func:`task_arguments`)."""

    common: bool
    """Read from the routine's parameters (``common[row[index]]``), else the row's own value
    (``row[index]``)."""
    index: int
    """Its offset in the chunk's row (``extra + chunk * width``, width
    :meth:`Segment.chunk_width`)."""
    pointer: bool


def task_arguments(seg: Segment, params: KernelParams, scratch: Sequence[Tnode]) -> list[Arg]:
    """How a parallel segment's task (:attr:`Segment.task_name`) calls its function, given the
    routine's parameters (``common``: one ``int64`` each in
    :func:`~arrayjit_backends.impl.cpu_compiler.native_argtypes` order) and the chunks' rows
    (``extra``: :meth:`Segment.chunk_width` ``int64`` a chunk, :meth:`Segment.chunk_row`): the
    segment's common arguments, read at the positions the row holds after the chunk's own
    values, then those values."""
    pointers = len(params.buffers) + (params.merge_node is not None) + len(scratch)
    own = seg.extra_pointers()
    common = [Arg(True, len(own) + j, k < pointers) for j, k in enumerate(seg.args)]
    return common + [Arg(False, k, p) for k, p in enumerate(own)]


COMBINE_ARGTYPES = [ctypes.c_void_p, ctypes.c_int64]
"""The ctypes types of a parallel reduction's combining function's own parameters
``(partials, count)``."""


class PlanMemo:
    """What planning asks of a statement more than once, computed once per plan:
    :func:`~arrayjit_backend_c.cpu.matmul.cpu_matmul` (calling the memo), its
    :func:`~arrayjit_backends.codegen.kernel_plan.loop_work` (:meth:`work`) and, for a loop,
    :func:`~arrayjit_backends.codegen.kernel_plan.is_parallel_loop` (:meth:`parallel`). One
    plan asked each of these of the same statement up to six times (:func:`split_segments`,
    the row plan, the renderers; issue 38). Keyed by identity, the statements kept, so that an
    id stays theirs; it lives as long as its plan."""

    def __init__(self) -> None:
        self._matmul: dict[int, tuple[L.Stmt, CpuMatmul | None]] = {}
        self._work: dict[int, tuple[L.Stmt, int]] = {}
        self._parallel: dict[int, tuple[L.For_loop, bool]] = {}

    def __call__(self, s: L.Stmt) -> CpuMatmul | None:
        return _memoized(self._matmul, s, self._matmul_of)

    def _matmul_of(self, s: L.Stmt) -> CpuMatmul | None:
        return cpu_matmul(s, self.work(s) if isinstance(s, L.For_loop) else None)

    def work(self, s: L.Stmt) -> int:
        """:func:`~arrayjit_backends.codegen.kernel_plan.loop_work` of ``s``."""
        return _memoized(self._work, s, loop_work)

    def parallel(self, loop: L.For_loop) -> bool:
        """:func:`~arrayjit_backends.codegen.kernel_plan.is_parallel_loop` of ``loop``."""
        return _memoized(self._parallel, loop, is_parallel_loop)


_S = TypeVar("_S", bound=L.Stmt)
_R = TypeVar("_R")


def _memoized(table: dict[int, tuple[_S, _R]], s: _S, compute: Callable[[_S], _R]) -> _R:
    """``compute(s)``, kept in ``table`` by the identity of ``s`` (with ``s``, so that the id
    stays its own)."""
    hit = table.get(id(s))
    if hit is None:
        hit = table[id(s)] = (s, compute(s))
    return hit[1]


def split_segments(code: L.Stmt, memo: PlanMemo | None = None) -> list[Group]:
    """The routine's top-level statements grouped into serial runs (lists) and parallel loops:
    top-level loops with at least ``PARALLEL_MIN_WORK`` work, worth two threads or more
    (:func:`~arrayjit_backends.codegen.kernel_plan.worth_threads`), that write disjoint cells or
    are a :class:`~arrayjit_backends.codegen.kernel_plan.ScalarReduction` (as is the store of a
    float32 accumulator into a small-float cell, a ``Set``), and packed matmuls
    (:func:`~arrayjit_backend_c.cpu.matmul.cpu_matmul`). A loop worth one thread stays in its
    serial run: one native call for the run instead of a call per loop. A loop storing cells
    from inlined dot products that the packed matmul can compute is split first
    (:func:`~arrayjit_backends.codegen.row_plan.packed_dots`: a fill, the matmul, the rest of
    each cell's value); then consecutive loops over the same rows run as one loop
    (:func:`~arrayjit_backends.codegen.row_plan.fuse_row_loops`; packed matmuls stay apart).
    ``memo``: the plan's :class:`PlanMemo` (default: one of its own)."""
    matmul = memo or PlanMemo()
    packed = packed_dots(
        list(code.stmts) if isinstance(code, L.Seq) else [code],
        takes=lambda s: matmul(s) is not None,
    )
    stmts = fuse_row_loops(
        packed,
        apart=lambda s: isinstance(s, L.For_loop) and matmul(s) is not None,
        parallel=matmul.parallel,
    )
    groups: list[Group] = []
    for s in stmts:
        # The packed matmul first (known): the same answer as asking it last.
        if (isinstance(s, L.For_loop) and matmul(s) is not None) or (
            isinstance(s, L.For_loop | L.Set)
            and matmul.work(s) >= PARALLEL_MIN_WORK
            and worth_threads(s) > 1
            and (
                scalar_reduction(s) is not None
                or (isinstance(s, L.For_loop) and matmul.parallel(s))
            )
        ):
            groups.append(s)
        elif groups and isinstance(groups[-1], list):
            groups[-1].append(s)
        else:
            groups.append([s])
    return groups


def touched_nodes(s: L.Stmt, acc: set[Tnode]) -> set[Tnode]:
    """Every node a statement reads, writes or zeroes (local-scope bodies included)."""
    # isinstance chains, not match: planning walks every statement (issue 38).
    if isinstance(s, L.Seq):
        for x in s.stmts:
            touched_nodes(x, acc)
    elif isinstance(s, L.For_loop):
        touched_nodes(s.body, acc)
    elif isinstance(s, L.Set):
        acc.add(s.tn)
        _touched_expr(s.value, acc)
    elif isinstance(s, L.Zero_out):
        acc.add(s.tn)
    elif isinstance(s, L.Set_local):
        _touched_expr(s.value, acc)
    return acc


def _touched_expr(e: L.Expr, acc: set[Tnode]) -> None:
    if isinstance(e, L.Get):
        acc.add(e.tn)
    elif isinstance(e, L.Binop):
        _touched_expr(e.a, acc)
        _touched_expr(e.b, acc)
    elif isinstance(e, L.Unop):
        _touched_expr(e.a, acc)
    elif isinstance(e, L.Ternop):
        _touched_expr(e.a, acc)
        _touched_expr(e.b, acc)
        _touched_expr(e.c, acc)
    elif isinstance(e, L.Local_scope):
        touched_nodes(e.body, acc)


@dataclass(frozen=True)
class SegmentPlan:
    """How a routine splits into segments, what each touches, and its scratch nodes."""

    opt: Optimized
    params: KernelParams
    groups: list[Group]
    touched: list[set[Tnode]]
    """Per segment, every node it reads, writes or zeroes (:func:`touched_nodes`)."""
    scratch: tuple[Tnode, ...]
    """Kernel-local nodes held in buffers allocated at link and passed to the segments touching
    them: those larger than :data:`STACK_LIMIT_BYTES` or touched by several segments."""
    args: list[tuple[int, ...]]
    """Per segment, the common parameters its functions take (:attr:`Segment.args`): the
    buffers and scratch buffers it touches, the merge buffer if the routine reads it, and every
    static index."""
    stack: list[list[Tnode]]
    """Per segment, the kernel-local nodes it holds on its own stack (in ``opt.local_nodes``
    order)."""
    zeroed: list[list[Tnode]]
    """Per segment, the scratch nodes it zero-fills on entry: zero-initialized by code, and this
    is the first segment touching them, a serial one (in :attr:`scratch` order)."""
    rows: dict[int, tuple[Tnode, ...]] = field(default_factory=dict)
    """Per row loop (by ``id``) of the groups, the kernel-local nodes it holds a row of in
    arrays of its own (:func:`~arrayjit_backends.codegen.row_plan.resident_rows`): they have
    no buffer and no array of the whole node anywhere."""
    matmul_of: Callable[[L.Stmt], CpuMatmul | None] = cpu_matmul
    """:func:`~arrayjit_backend_c.cpu.matmul.cpu_matmul`, as the plan computed it (its
    :class:`PlanMemo`): :meth:`matmul`."""

    def matmul(self, s: L.Stmt) -> CpuMatmul | None:
        """The packed matmul the top-level statement ``s`` of the groups is, if it is one
        (:func:`~arrayjit_backend_c.cpu.matmul.cpu_matmul`, computed once per plan)."""
        return self.matmul_of(s)

    def resident(self, s: L.Stmt) -> tuple[Tnode, ...]:
        """The nodes the top-level statement ``s`` of the groups holds a row at a time."""
        return self.rows.get(id(s), ())

    def stack_nodes(self, k: int) -> list[Tnode]:
        """The kernel-local nodes segment ``k`` holds on its own stack."""
        return self.stack[k]

    def zeroed_scratch(self, k: int) -> list[Tnode]:
        """The scratch nodes segment ``k`` zero-fills on entry (:attr:`zeroed`)."""
        return self.zeroed[k]

    def arg_nodes(self, k: int) -> list[Tnode]:
        """The buffers and scratch nodes among segment ``k``'s parameters, in order."""
        nodes = (*self.params.buffers, *self.scratch)
        merge = self.params.merge_node is not None
        buffers = len(self.params.buffers)
        return [
            nodes[i if i < buffers else i - merge]
            for i in self.args[k]
            if i < buffers or buffers + merge <= i < buffers + merge + len(self.scratch)
        ]


def plan_segments(opt: Optimized, rows: bool = False) -> SegmentPlan:
    """The segments of ``opt`` (its blocks of sums widened for vector lanes: reassociated,
    same error bound), their scratch nodes and parameters; with ``rows`` (a renderer that holds
    rows, :meth:`SegmentPlan.resident`), the kernel-local nodes each row loop holds a row at a
    time, which get no buffer. Linear in the size of the routine: each segment's work is over
    the nodes it touches."""
    matmul_of = PlanMemo()
    groups = split_segments(widen_blocks(opt.code, SIMD_LANES), matmul_of)
    # Each top-level statement's nodes, found once: a serial run's are the union of its
    # statements' (issue 38: the walk took a tenth of a 64-layer MLP's planning, twice).
    tops = [s for g in groups for s in (g if isinstance(g, list) else [g])]
    top_touched = [touched_nodes(s, set()) for s in tops]
    touched: list[set[Tnode]] = []
    at = 0
    for g in groups:
        count = len(g) if isinstance(g, list) else 1
        mine = top_touched[at : at + count]
        touched.append(set().union(*mine) if isinstance(g, list) else mine[0])
        at += count
    params = kernel_params(opt)
    local_nodes = opt.local_nodes  # a scan of every traced node: taken once (issue 38)
    local = set(local_nodes)
    held: dict[int, tuple[Tnode, ...]] = {}
    if rows:
        reach = [t & local for t in top_touched]
        readers: dict[Tnode, int] = {}  # per local node, how many top-level statements touch it
        for r in reach:
            for tn in r:
                readers[tn] = readers.get(tn, 0) + 1
        order = {tn: k for k, tn in enumerate(local_nodes)}
        for s, r in zip(tops, reach, strict=True):
            # In local-node order, from the statement's own nodes (not a scan of every local
            # node per statement: quadratic, issue 38).
            only = sorted((tn for tn in r if readers[tn] == 1), key=order.__getitem__)
            if (
                isinstance(s, L.For_loop)
                and only
                and matmul_of(s) is None
                and scalar_reduction(s) is None
            ):
                found = resident_rows(s, only)
                if found:
                    held[id(s)] = found
    kept = {tn for r in held.values() for tn in r}
    owners: dict[Tnode, list[int]] = {}  # per local node, the segments touching it, in order
    for k, t in enumerate(touched):
        for tn in t:
            if tn in local and tn not in kept:
                owners.setdefault(tn, []).append(k)
    scratch = tuple(
        tn
        for tn in local_nodes
        if tn not in kept
        and (tn.num_elems * tn.prec.byte_size > STACK_LIMIT_BYTES or len(owners.get(tn, ())) > 1)
    )
    stack: list[list[Tnode]] = [[] for _ in groups]
    zeroed: list[list[Tnode]] = [[] for _ in groups]
    scratch_set = set(scratch)
    for tn in local_nodes:
        if tn not in scratch_set:
            for k in owners.get(tn, ()):
                stack[k].append(tn)
    for tn in scratch:
        first = owners.get(tn)
        if first and isinstance(groups[first[0]], list) and opt.traced[tn].zero_initialized_by_code:
            zeroed[first[0]].append(tn)
    merge = params.merge_node is not None
    index = {tn: i for i, tn in enumerate(params.buffers)}
    index.update({tn: len(params.buffers) + merge + i for i, tn in enumerate(scratch)})
    tail = len(params.buffers) + merge + len(scratch)
    fixed = ([len(params.buffers)] if merge else []) + list(
        range(tail, tail + len(params.static_symbols))
    )
    args = [tuple(sorted([index[tn] for tn in t if tn in index] + fixed)) for t in touched]
    return SegmentPlan(opt, params, groups, touched, scratch, args, stack, zeroed, held, matmul_of)


CHUNKS_PER_WORKER = 4
"""A parallel loop is split into up to this many chunks per worker (each still worth a thread,
:func:`~arrayjit_backends.codegen.kernel_plan.worth_threads`): threads take chunks as they come free
(:class:`~arrayjit_backend_c.cpu.crew.Crew`), so one that starts late, or is descheduled by another
process, leaves less of the loop for the others to wait on."""


def chunks(seg: Segment, workers: int) -> list[tuple[int, int]]:
    """The ``(start, stop)`` ranges a parallel segment's loop is split into: as many as the
    loop is worth (:func:`~arrayjit_backends.codegen.kernel_plan.worth_threads`), at most
    :data:`CHUNKS_PER_WORKER` per worker (one per worker for a matmul, each chunk packing into
    a buffer of its own), sizes within one :attr:`~Segment.grain`."""
    assert seg.loop is not None
    lo, trip = seg.loop.from_, seg.loop.to_inclusive - seg.loop.from_ + 1
    most = workers * CHUNKS_PER_WORKER if workers > 1 else 1
    if seg.matmul is not None:  # chunks of row or column panels
        lo, trip, most = 0, seg.matmul.units, workers
    grains = -(-trip // seg.grain)
    n = max(1, min(most, grains, worth_threads(seg.loop)))
    bounds = [lo + min(trip, grains * k // n * seg.grain) for k in range(n + 1)]
    return [(bounds[k], bounds[k + 1]) for k in range(n)]


@dataclass(frozen=True)
class SegmentedKernel:
    """The generated code of one routine: its functions are ``{fn_name}_{k}``, one a segment."""

    source: str
    """C source (cc) or LLVM IR (llvm)."""
    params: KernelParams
    scratch: tuple[Tnode, ...]
    """Kernel-local nodes held in buffers allocated at link; their pointers follow the merge
    buffer among the routine's parameters (each function takes those it touches)."""
    segments: tuple[Segment, ...]


@dataclass
class SegmentedCode:
    """A compiled routine: per segment its native function and, for a parallel reduction, its
    combining function (ctypes functions with their argument types set)."""

    name: str
    params: KernelParams
    scratch: tuple[Tnode, ...]
    segments: tuple[Segment, ...]
    functions: tuple[tuple[Any, Any, int | None], ...]
    """Per segment: its function, its combining function (None but for a reduction) and its
    task's address (None but for a parallel segment)."""
    short: bool
    """Short enough to run on the scheduling thread
    (:func:`~arrayjit_backend_c.cpu.work.is_short`)."""
    owner: Any
    """What keeps the functions' machine code loaded (a library, an execution engine)."""
    source: str
    """The generated source."""


def bind_segments(
    segments: Sequence[Segment],
    params: KernelParams,
    scratch: Sequence[Tnode],
    function: Callable[[str, list[Any]], Any],
) -> tuple[tuple[Any, Any, int | None], ...]:
    """Per segment, its function, combining function (or None) and task address (or None),
    from ``function(name, argtypes)``, which returns the named ctypes function with those
    argument types (the segment's :attr:`~Segment.args` of the common ones, then its own)."""
    common = native_argtypes(params, extra_pointers=len(scratch))

    def address(seg: Segment) -> int | None:
        if not seg.parallel:
            return None
        task = function(seg.task_name, TASK_ARGTYPES)
        return ctypes.cast(task, ctypes.c_void_p).value

    return tuple(
        (
            function(seg.name, [common[i] for i in seg.args] + seg.extra_argtypes()),
            function(seg.combine_name, [common[i] for i in seg.args] + COMBINE_ARGTYPES)
            if seg.reduction is not None
            else None,
            address(seg),
        )
        for seg in segments
    )


Step = tuple[
    Any,
    Callable[[Sequence[Any]], tuple[Any, ...]],
    tuple[int, ...],
    tuple[int, int, int] | None,
    Any,
    tuple[int, ...],
]
"""How a linked routine runs one segment (:meth:`SegmentedCompiler.link`)."""


def constant(picked: tuple[Any, ...]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """A picker that returns ``picked`` whatever the arguments (they are fixed)."""
    return lambda values: picked


def picker(indices: Sequence[int]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """A function picking ``indices`` of a sequence, as a tuple."""
    if not indices:
        return lambda values: ()
    if len(indices) == 1:
        only = indices[0]
        return lambda values: (values[only],)
    return operator.itemgetter(*indices)


class SegmentedCompiler(CpuCompiler):
    """A CPU compiler whose routines are segments (see the module docstring): links them with
    their scratch and runs their parallel segments on its :class:`~arrayjit_backend_c.cpu.crew.
    Crew`."""

    def __init__(self, workers: int | None = None) -> None:
        """``workers``: threads a parallel loop is split across (default: the CPU count)."""
        self.workers = workers or settings.num_threads()
        self.crew = Crew(self.workers - 1, f"arrayjit-{self.name}")
        self.scratch_account = ScratchAccount()

    @abc.abstractmethod
    def compile(self, optimized: Optimized) -> SegmentedCode: ...

    @staticmethod
    def code(
        optimized: Optimized,
        kernel: SegmentedKernel,
        function: Callable[[str, list[Any]], Any],
        owner: Any,
    ) -> SegmentedCode:
        """The compiled routine of ``kernel``, its functions bound by ``function`` (see
        :func:`bind_segments`) from ``owner``, the loaded machine code."""
        functions = bind_segments(kernel.segments, kernel.params, kernel.scratch, function)
        return SegmentedCode(
            optimized.name,
            kernel.params,
            kernel.scratch,
            kernel.segments,
            functions,
            is_short(optimized),
            owner,
            kernel.source,
        )

    def link(self, code: Any, buffers: NodeViews, merge_buffer: GetMergeView) -> Run:
        c: SegmentedCode = code
        scratch: list[np.ndarray] = [
            np.zeros(tn.num_elems * tn.prec.byte_size, np.uint8) for tn in c.scratch
        ]
        args = NativeArgs(c.params, buffers, merge_buffer, [a.ctypes.data for a in scratch])
        # Per segment: its function, what it takes of the routine's arguments (picked from
        # them per run, see Segment.args), the extra arguments of its one call, or (for a
        # parallel segment of several chunks) its task, the address of the chunks' rows
        # (int64 each, see task_arguments) and their count; for a reduction its combining
        # function with its extra arguments.
        steps: list[Step] = []
        for (fn, combine, task), seg in zip(c.functions, c.segments, strict=True):
            pick = picker(seg.args)
            if not seg.parallel:
                steps.append((fn, pick, (), None, None, ()))
                continue
            ranges = chunks(seg, self.workers)
            fold: tuple[int, ...] = ()
            calls: list[tuple[int, ...]]
            if seg.matmul is not None:  # each chunk packs into a buffer of its own
                size = sum(buffer_bytes(seg.matmul))
                calls = []
                for start, stop in ranges:
                    buf = np.zeros(size + 64, np.uint8)
                    scratch.append(buf)
                    calls.append((start, stop, buf.ctypes.data + (-buf.ctypes.data) % 64))
            elif seg.reduction is not None:
                partials = np.zeros(len(ranges), np.uint64)
                scratch.append(partials)
                at = partials.ctypes.data
                calls = [(start, stop, at, k) for k, (start, stop) in enumerate(ranges)]
                fold = (at, len(ranges))
            else:
                calls = list(ranges)
            if len(calls) == 1 or task is None:  # no thread to share it with
                steps.append((fn, pick, calls[0], None, combine, fold))
                continue
            extra = np.array([seg.chunk_row(c) for c in calls], np.int64).reshape(-1)
            scratch.append(extra)
            steps.append((fn, pick, (), (task, extra.ctypes.data, len(calls)), combine, fold))
        keep_alive = (list(buffers.values()), scratch, c)

        if args.fixed is not None and len(steps) == 1 and steps[0][3:5] == (None, None):
            # One native call with fixed arguments (no crew job, no partials to fold).
            fn, fixed = steps[0][0], (*steps[0][1](args.fixed), *steps[0][2])

            def run(bindings: Mapping[StaticSymbol, int]) -> None:
                fn(*fixed)

        else:
            # The routine's parameters as the tasks read them: fixed, or a block per run.
            fixed_block = None if args.fixed is None else np.array(args.fixed, np.int64)
            if fixed_block is not None:
                scratch.append(fixed_block)
            fixed_at = None if fixed_block is None else fixed_block.ctypes.data
            parallel = self.crew.run
            if args.fixed is not None:  # each step's share of fixed arguments, picked once
                steps = [(s[0], constant(s[1](args.fixed)), *s[2:]) for s in steps]

            def run(bindings: Mapping[StaticSymbol, int]) -> None:
                values = args.fixed if args.fixed is not None else args(bindings)
                common, block = fixed_at, None
                for fn, pick, one, job, combine, fold in steps:
                    mine = pick(values)
                    if job is None:
                        fn(*mine, *one)
                    else:
                        if common is None:
                            block = np.array([v or 0 for v in values], np.int64)
                            common = block.ctypes.data
                        parallel(job[0], common, job[1], job[2], thread_share())
                    if combine is not None:
                        combine(*mine, *fold)
                del block  # held until every task has run

        run.keep_alive = keep_alive  # type: ignore[attr-defined]
        run.short = c.short  # type: ignore[attr-defined]
        self.scratch_account.hold(run, 0, sum(a.nbytes for a in scratch))  # freed with the run
        return run

    def new_bell(self) -> Bell | None:
        """A futex bell (:class:`~arrayjit_backend_c.cpu.crew.FutexBell`) where the crew has
        helpers (Linux with a known futex call)."""
        return FutexBell() if has_helpers() else None

    def scratch_bytes(self) -> int:
        return self.scratch_account.bytes(0)

    def finalize(self) -> None:
        """Stop the helper threads (the backend is finalized: nothing runs any more)."""
        self.crew.stop()
