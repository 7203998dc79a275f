"""The packed matmul of the CPU backends: which top-level loops are a plain matmul, their
layout, and the C source of the kernel (the LLVM IR of the same algorithm is in
:mod:`arrayjit_backend_c.llvm.matmul`).

The generated loop nest of ``C[i, j] = sum_k A[i, k] * B[k, j]`` reloads rows of ``B`` for every
few rows of ``C`` and streams ``C`` through the caches ``k`` times. Here, as BLIS-style libraries
do (the algorithm is the textbook one; the code is ours):

- the columns of ``C`` are cut into blocks of :data:`NC`, ``k`` into blocks of :data:`KC`, the
  rows into blocks of :data:`MC`;
- for each ``(column block, k block)`` the ``KC x NC`` block of ``B`` is copied ("packed") into a
  contiguous buffer, column panels of ``NR`` columns one after the other, each stored step by
  step (the ``NR`` values of one ``k`` step adjacent), zeros past the last column;
- for each row block, the ``MC x KC`` block of ``A`` is packed the same way in panels of ``MR``
  rows, zeros past the last row;
- a micro-kernel computes each ``MR x NR`` tile of ``C``: it loads the tile into registers
  (``MR x NR`` accumulators, :data:`MR` rows of two vectors), and for each ``k`` step of the block
  loads ``NR`` values of ``B``, broadcasts each of the ``MR`` values of ``A`` and takes one fused
  multiply-add per accumulator, then stores the tile back. A tile at the edge of ``C`` (or of a
  ``C`` whose columns are not contiguous) goes through a local ``MR x NR`` copy.

Exactness: each cell of ``C`` starts from its stored value and takes ``fma(x, w, cell)`` for
``k`` in increasing order (block after block; between blocks the cell is stored and reloaded,
which changes nothing in float32 or float64), ``x`` and ``w`` in the IR's operand order: the
serial code's bits. Zero padding only ever fills rows and columns whose cells are never stored;
``k`` is never padded (``fma(0, 0, -0.0)`` is ``+0.0``).

Parallelism: the rows (or, when there are fewer row panels than column panels, the columns) are
cut into ``units`` of ``MR`` rows (``NR`` columns); the matmul is a segment of its own
(:mod:`arrayjit_backend_c.cpu.segments`) whose function computes a range of units, packing into the
buffer of its chunk (:func:`buffer_bytes`, allocated once at link: allocating at each call cost
page faults).

Which loops: a top-level loop nest that
:func:`~arrayjit_backends.codegen.matmul_plan.matmul_plan` recognizes (the detector the GPU
planner uses too, used as is: plain ``fma`` steps over one ``k`` loop, operands indexed by
``{i, k}`` and ``{k, j}`` in either order), in float32 or float64, with no batch axes and at
least :data:`MATMUL_MIN_WORK` multiply-adds; or an implicit GEMM that
:func:`~arrayjit_backends.codegen.conv_plan.gemm_plan` recognizes (convolutions and their
gradients: operands read through affine axes, several reduction loops), run as a plain matmul
where every walk has one stride, else by :func:`c_gemm_helpers` (``A`` read unpacked through
offset tables, ``B`` packed through them; same tiles, same exactness: the steps in the serial
code's order); or a scatter that
:func:`~arrayjit_backends.codegen.conv_plan.scatter_plan` recognizes (a convolution's input
gradient written from the forward spec: per run and shift one GEMM, in the order that gives
each cell the serial nest's steps), by :func:`c_scatter_helper`. Everything else keeps the loop
nest.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

from arrayjit_backends.codegen.conv_plan import GemmPlan, ScatterPlan, Walk, gemm_plan, scatter_plan
from arrayjit_backends.codegen.kernel_plan import loop_work, parallel_order
from arrayjit_backends.codegen.matmul_plan import MatmulPlan, matmul_plan
from arrayjit_ir import low_level as L
from arrayjit_ir.indexing import Fixed_idx, Iterator, Symbol
from arrayjit_tnode import Prec, Tnode

MR = 6
"""Rows of a micro-kernel's tile."""


def _has_avx512() -> bool:
    """Whether the CPU has AVX-512 (Linux: its flags in ``/proc/cpuinfo``; else False)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(
                line.startswith("flags") and " avx512f" in line for line in f.read().splitlines()
            )
    except OSError:
        return False


VECTOR_BYTES = 64 if _has_avx512() else 32
"""Bytes of the vectors a tile's rows are made of, two per row: AVX2's 32, or AVX-512's 64
(12 accumulators of its 32 registers; with 32-byte vectors the 6 x 16 float32 tile is 6
512-bit accumulators, too few to hide the fma latency: the conv2d benchmark's forward ran at
0.8x the time of 64-byte tiles, one process, cc and llvm alike). Narrower targets split
them. Both compilers target the host (``-march=native``, the host's features), where the
flag is read."""
KC = 256
"""Steps of ``k`` per packed block: a panel of ``B`` (``KC x NR``) stays in the L1 cache."""
MC = 96
"""Rows of ``A`` per packed block (``MC x KC``, 96-192 KiB: the L2 cache)."""
NC = 2048
"""Columns of ``B`` per packed block (``KC x NC``, 2-4 MiB: the L3 cache)."""
KC_WHOLE = 1024
"""An implicit GEMM of at most this many steps takes them in one block (:func:`kc_of`): each
tile of ``C`` is then loaded and stored once, not once per block (the conv2d benchmark's
forward, 576 steps, took 0.8x the time of blocks of :data:`KC` in one process)."""
MATMUL_MIN_WORK = 1 << 15
"""Smaller matmuls keep the loop nest (packing would not pay)."""


def nr_of(prec: Prec) -> int:
    """Columns of a micro-kernel's tile: two vectors of ``prec``."""
    return 2 * VECTOR_BYTES // prec.byte_size


@dataclass(frozen=True)
class Operand:
    """Where a matrix lies in its node's buffer: element ``(r, c)`` is at
    ``offset + r * rs + c * cs``."""

    tn: Tnode
    offset: int
    rs: int
    cs: int


@dataclass(frozen=True)
class CpuMatmul:
    """A top-level loop nest that runs as the packed matmul: ``C (m x n)``, each cell taking
    ``fma(x, w, cell)`` over ``k`` steps, ``x`` the ``A`` operand when ``x_is_a``."""

    m: int
    n: int
    k: int
    a: Operand
    b: Operand
    c: Operand
    x_is_a: bool
    walks: tuple[Walk, Walk, Walk, Walk] | None = None
    """For an implicit GEMM (:func:`~arrayjit_backends.codegen.conv_plan.gemm_plan`) whose
    operands do not walk with one stride: the offsets of ``A``'s rows, ``A``'s steps, ``B``'s
    steps and ``B``'s columns (then ``a`` and ``b`` give only their node and offset, and the
    kernel packs through these walks, :func:`c_gemm_helpers`)."""
    scatter: ScatterPlan | None = None
    """For a scatter-form contraction (:func:`~arrayjit_backends.codegen.conv_plan.
    scatter_plan`): the runs and shifts around this GEMM (its operands' offsets are those of
    the first run and shift)."""

    @property
    def prec(self) -> Prec:
        return self.c.tn.prec

    @property
    def nr(self) -> int:
        return nr_of(self.prec)

    @property
    def split_rows(self) -> bool:
        """Whether threads share the rows (else the columns); for a scatter, the batches of
        runs (rows of one run may write the cells of another's)."""
        if self.scatter is not None:
            return self.scatter.batches >= -(-self.n // self.nr)
        return -(-self.m // MR) >= -(-self.n // self.nr)

    @property
    def units(self) -> int:
        """Row panels (or column panels) the threads share; for a scatter, batches of runs
        or column panels."""
        if self.scatter is not None and self.split_rows:
            return self.scatter.batches
        return -(-self.m // MR) if self.split_rows else -(-self.n // self.nr)

    @property
    def suffix(self) -> str:
        """Names the helper functions of this precision and operand order (and, for an
        implicit GEMM, of its walks and shape, which its helpers have built in)."""
        base = f"{'f32' if self.prec is Prec.single else 'f64'}_{'xa' if self.x_is_a else 'xb'}"
        if self.scatter is not None:  # its helper has the whole shape built in
            sp = self.scatter
            text = repr((self.m, self.n, self.k, self.walks, sp.shifts, sp.a_units, sp.c_units))
            text += repr(sp.c_rows)
            text += repr([(o.rs, o.cs) for o in (self.a, self.b, self.c)])
            return f"{base}_s{hashlib.sha1(text.encode()).hexdigest()[:10]}"
        if self.walks is None:
            return base
        key = repr((self.walks, self.k, self.c.rs, self.c.cs)).encode()
        return f"{base}_g{hashlib.sha1(key).hexdigest()[:10]}"


def _operand(g: L.Get, rows: L.For_loop | None, cols: L.For_loop | None) -> Operand:
    """The layout of ``g`` as a matrix whose rows follow ``rows`` and columns ``cols`` (a
    missing loop: one row or column)."""
    stride, offset = 1, 0
    strides: dict[Symbol, int] = {}
    for dim, i in reversed(list(zip(g.tn.dims, g.indices, strict=True))):
        if isinstance(i, Fixed_idx):
            offset += i.value * stride
        else:
            assert isinstance(i, Iterator) and isinstance(i.symbol, Symbol)
            strides[i.symbol] = stride
        stride *= dim
    rs = cs = 0
    for lp, is_row in ((rows, True), (cols, False)):
        if lp is None:
            continue
        s = strides[lp.index]
        offset += lp.from_ * s
        rs, cs = (s, cs) if is_row else (rs, s)
    return Operand(g.tn, offset, rs, cs)


def cpu_matmul(stmt: L.Stmt, work: int | None = None) -> CpuMatmul | None:
    """The :class:`CpuMatmul` a top-level statement is, if it is one (see the module
    docstring). ``work``: ``loop_work(stmt)`` where the caller has it."""
    if not isinstance(stmt, L.For_loop):
        return None
    if (loop_work(stmt) if work is None else work) < MATMUL_MIN_WORK:
        return None
    nest, rest = parallel_order(stmt)
    plan: MatmulPlan | None = matmul_plan(nest, rest)
    if plan is None or plan.batch:
        gemm = gemm_plan(nest, rest)
        if gemm is not None:
            return _implicit(gemm)
        scatter = scatter_plan(stmt)
        if scatter is None:
            return None
        mm = replace(_implicit(scatter.gemm), scatter=scatter)
        return mm if sum(scatter_bytes(mm)) <= SCATTER_BUFFER else None
    m, n, k = plan.extents
    a, b = (plan.x, plan.w) if plan.x_is_a else (plan.w, plan.x)
    target = L.Get(plan.target.tn, plan.target.indices)
    return CpuMatmul(
        m,
        n,
        k,
        _operand(a, plan.rows, plan.k),
        _operand(b, plan.k, plan.cols),
        _operand(target, plan.rows, plan.cols),
        plan.x_is_a,
    )


def _implicit(g: GemmPlan) -> CpuMatmul:
    """The :class:`CpuMatmul` of an implicit GEMM: a plain strided one where every walk has
    one stride (a 1x1 convolution, a matmul over several row or step loops), else one that
    packs through its walks."""
    c = Operand(g.target, g.c_offset, g.c_rs, g.c_cs)
    walks = (g.a.lanes, g.a.steps, g.b.steps, g.b.lanes)
    strides = [w.stride for w in walks]
    if all(s is not None for s in strides):
        ar, ak, bk, bc = (int(s or 0) for s in strides)
        a, b = Operand(g.a.tn, g.a.offset, ar, ak), Operand(g.b.tn, g.b.offset, bk, bc)
        return CpuMatmul(g.m, g.n, g.k, a, b, c, g.x_is_a)
    a, b = Operand(g.a.tn, g.a.offset, 0, 0), Operand(g.b.tn, g.b.offset, 0, 0)
    return CpuMatmul(g.m, g.n, g.k, a, b, c, g.x_is_a, walks)


def kc_of(mm: CpuMatmul) -> int:
    """Steps of ``k`` per block of ``mm``: :data:`KC`, or all of them for an implicit GEMM of
    at most :data:`KC_WHOLE`."""
    return mm.k if mm.walks is not None and mm.k <= KC_WHOLE else KC


SCATTER_BUFFER = 1 << 22
"""A scatter whose packed operands (:func:`scatter_bytes`) exceed this keeps its loop nest."""


def scatter_bytes(mm: CpuMatmul) -> tuple[int, int]:
    """Bytes of a scatter's packed ``A`` (one run's rows, all steps) and of its packed ``B``
    (every shift's, all steps and columns, then the tables of the rows' offsets in ``A`` and
    ``C``), each a multiple of 64."""
    assert mm.scatter is not None
    mp, np_ = -(-mm.m // MR) * MR, -(-mm.n // mm.nr) * mm.nr
    pa = mm.prec.byte_size * mp * mm.k
    pb = mm.prec.byte_size * len(mm.scatter.shifts) * mm.k * np_ + 16 * mm.m  # + row tables
    return -(-pa // 64) * 64, -(-pb // 64) * 64


def buffer_bytes(mm: CpuMatmul) -> tuple[int, int]:
    """Bytes of the packed ``A`` block and of the packed ``B`` block one chunk needs (each a
    multiple of 64)."""
    if mm.scatter is not None:
        return scatter_bytes(mm)
    width = min(mm.n, NC)
    kc = kc_of(mm)
    # An implicit GEMM reads A unpacked (c_gemm_helpers): no A block.
    pa = 0 if mm.walks is not None else mm.prec.byte_size * kc * (MC + MR)
    pb = mm.prec.byte_size * kc * (-(-width // mm.nr) * mm.nr)
    return -(-pa // 64) * 64, -(-pb // 64) * 64


def _c_type(mm: CpuMatmul) -> str:
    return "float" if mm.prec is Prec.single else "double"


def _c_micro(mm: CpuMatmul, rows: bool = False) -> str:
    """``aj_mm_micro_<suffix>``: the ``MR x NR`` tile at ``c`` after ``kc`` steps from packed
    panels; with ``rows``, ``aj_sc_micro_<suffix>``, whose tile's row ``r`` lies at ``c +
    ldc[r]`` (a table of row offsets: a scatter's rows need not walk with one stride)."""
    t = _c_type(mm)
    f = "f" if mm.prec is Prec.single else ""
    sx, nr = mm.suffix, mm.nr

    def fma(a: str, b: str, acc: str) -> str:
        x, w = (a, b) if mm.x_is_a else (b, a)
        return f"fma{f}({x}, {w}, {acc})"

    name, ld, row = (
        ("sc", "const int64_t *restrict ldc", "ldc[r]")
        if rows
        else (
            "mm",
            "int64_t ldc",
            "r * ldc",
        )
    )
    return f"""
/* The packed matmul (arrayjit_backend_c.cpu.matmul), {t}. */
static void aj_{name}_micro_{sx}(int64_t kc, const {t} *restrict a, const {t} *restrict b,
                            {t} *restrict c, {ld}) {{
  enum {{ MR = {MR}, NR = {nr} }};
  {t} acc[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) acc[r][j] = c[{row} + j];
  for (int64_t p = 0; p < kc; ++p) {{
#pragma GCC unroll {MR}
    for (int r = 0; r < MR; ++r) {{
      const {t} av = a[p * MR + r];
#pragma GCC unroll {nr}
      for (int j = 0; j < NR; ++j) acc[r][j] = {fma("av", "b[p * NR + j]", "acc[r][j]")};
    }}
  }}
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) c[{row} + j] = acc[r][j];
}}
"""


def c_helpers(mm: CpuMatmul) -> str:
    """C functions computing the matmuls of ``mm``'s precision and operand order:
    ``aj_mm_block_<suffix>``, a block of ``C`` (see :func:`c_part`); for an implicit GEMM
    (``mm.walks``), :func:`c_gemm_helpers`."""
    if mm.scatter is not None:
        return _c_micro(mm) + _c_micro(mm, rows=True) + c_scatter_helper(mm)
    if mm.walks is not None:
        return c_gemm_helpers(mm)
    t = _c_type(mm)
    sx, nr = mm.suffix, mm.nr
    return (
        _c_micro(mm)
        + f"""/* One packed panel: kc steps of w lanes (rows of A, or columns of B)
   stored step by step, lane l of step p read at src[p * step + l * lane]; zeros past the
   last of the `lanes` that exist. Inlined with w constant, the full-panel loop is a plain
   copy. */
static inline __attribute__((always_inline)) void aj_mm_pack_{sx}({t} *restrict dst,
    const {t} *src, int64_t kc, int w, int64_t lanes, int64_t step, int64_t lane) {{
  if (lanes >= w) {{
    for (int64_t p = 0; p < kc; ++p)
      for (int l = 0; l < w; ++l) dst[p * w + l] = src[p * step + l * lane];
  }} else {{
    for (int64_t p = 0; p < kc; ++p)
      for (int l = 0; l < w; ++l) dst[p * w + l] = l < lanes ? src[p * step + l * lane] : 0;
  }}
}}
/* C[r0:r1, c0:c1] after all k steps (see the module docstring); pa, pb: packing buffers. */
static void aj_mm_block_{sx}(int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t k,
    const {t} *A, int64_t rsa, int64_t csa, const {t} *B, int64_t rsb, int64_t csb,
    {t} *C, int64_t rsc, int64_t csc, {t} *restrict pa, {t} *restrict pb) {{
  enum {{ MR = {MR}, NR = {nr}, KC = {KC}, MC = {MC}, NC = {NC} }};
  {t} tile[MR * NR];
  for (int64_t jc = c0; jc < c1; jc += NC) {{
    const int64_t nc = c1 - jc < NC ? c1 - jc : NC;
    for (int64_t pc = 0; pc < k; pc += KC) {{
      const int64_t kc = k - pc < KC ? k - pc : KC;
      for (int64_t jr = 0; jr < nc; jr += NR)
        aj_mm_pack_{sx}(pb + jr * kc, B + pc * rsb + (jc + jr) * csb, kc, NR, nc - jr, rsb, csb);
      for (int64_t ic = r0; ic < r1; ic += MC) {{
        const int64_t mc = r1 - ic < MC ? r1 - ic : MC;
        for (int64_t ir = 0; ir < mc; ir += MR)
          aj_mm_pack_{sx}(pa + ir * kc, A + (ic + ir) * rsa + pc * csa, kc, MR, mc - ir, csa, rsa);
        for (int64_t jr = 0; jr < nc; jr += NR) {{
          for (int64_t ir = 0; ir < mc; ir += MR) {{
            {t} *c = C + (ic + ir) * rsc + (jc + jr) * csc;
            const int64_t mr = mc - ir < MR ? mc - ir : MR, nr = nc - jr < NR ? nc - jr : NR;
            if (mr == MR && nr == NR && csc == 1) {{
              aj_mm_micro_{sx}(kc, pa + ir * kc, pb + jr * kc, c, rsc);
              continue;
            }}
            for (int64_t r = 0; r < MR; ++r)
              for (int64_t j = 0; j < NR; ++j)
                tile[r * NR + j] = r < mr && j < nr ? c[r * rsc + j * csc] : 0;
            aj_mm_micro_{sx}(kc, pa + ir * kc, pb + jr * kc, tile, NR);
            for (int64_t r = 0; r < mr; ++r)
              for (int64_t j = 0; j < nr; ++j) c[r * rsc + j * csc] = tile[r * NR + j];
          }}
        }}
      }}
    }}
  }}
}}
"""
    )


def _c_walk(w: Walk, t: str) -> str:
    """The C expression of a walk's offset of point ``t`` (an ``int64_t``)."""
    terms = [
        f"{t} / {inner}" if k == 0 else f"{t} / {inner} % {e}"
        for k, (inner, e, _) in enumerate(w.terms())
    ]
    parts = [f"({x}) * {s}" for x, (_, _, s) in zip(terms, w.terms(), strict=True)]
    return " + ".join(parts) if parts else "0"


def c_gemm_helpers(mm: CpuMatmul) -> str:
    """C functions computing an implicit GEMM (``mm.walks``): ``aj_mm_block_<suffix>(r0, r1, c0,
    c1, A, B, C, pa, pb)``, the block ``C[r0:r1, c0:c1]`` with its shape, strides and walks
    built in. ``B`` is packed through its walks (offset tables of the block's steps and of the
    panel's columns, computed per block: a division per column or step, against ``NR`` copies
    per step); ``A`` is not packed: the micro-kernel ``aj_gemm_micro_<suffix>`` broadcasts
    ``A[rows[r] + so[p]]`` from the tile's ``MR`` rows (a table of the block's row offsets)
    and the block's step offsets, which costs it one load per step more than a packed panel,
    where packing cost a load and a store per element of ``A`` (``M x K``, the whole im2col
    matrix of a convolution; each element is read ``n / NR`` times). A tile past the last
    row repeats the block's first row (its cells are never stored). The tiles are the plain
    matmul's."""
    assert mm.walks is not None
    t = _c_type(mm)
    sx, nr = mm.suffix, mm.nr
    a_rows, a_steps, b_steps, b_cols = mm.walks
    walks = "".join(
        f"static inline int64_t aj_gemm_walk_{sx}_{name}(int64_t t) "
        f"{{ return {_c_walk(w, 't')}; }}\n"
        for name, w in (("ar", a_rows), ("ak", a_steps), ("bk", b_steps), ("bc", b_cols))
    )
    f = "f" if mm.prec is Prec.single else ""
    full_lane = "lo[l]" if b_cols.stride is None else f"lo[0] + l * {b_cols.stride}"

    def fma(a: str, b: str, acc: str) -> str:
        x, w = (a, b) if mm.x_is_a else (b, a)
        return f"fma{f}({x}, {w}, {acc})"

    return (
        f"""
/* The implicit GEMM's micro-kernel: the tile at c after kc steps, A's rows at A + rows[r],
   step p of every row at offset so[p] from it, B packed. */
static void aj_gemm_micro_{sx}(int64_t kc, const {t} *A, const int64_t *restrict rows,
    const int64_t *restrict so, const {t} *restrict b, {t} *restrict c, int64_t ldc) {{
  enum {{ MR = {MR}, NR = {nr} }};
  const {t} *ar[MR];
  {t} acc[MR][NR];
  for (int r = 0; r < MR; ++r) ar[r] = A + rows[r];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) acc[r][j] = c[r * ldc + j];
  for (int64_t p = 0; p < kc; ++p) {{
    const int64_t o = so[p];
#pragma GCC unroll {MR}
    for (int r = 0; r < MR; ++r) {{
      const {t} av = ar[r][o];
#pragma GCC unroll {nr}
      for (int j = 0; j < NR; ++j) acc[r][j] = {fma("av", "b[p * NR + j]", "acc[r][j]")};
    }}
  }}
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) c[r * ldc + j] = acc[r][j];
}}
"""
        + f"""/* Walks of the implicit GEMM (arrayjit_backends.codegen.conv_plan). */
{walks}/* One packed panel through offset tables: lane l of step p read at src[so[p] + lo[l]]
   (lo[0] + l * stride where the columns walk with one: a plain copy per step). */
static inline __attribute__((always_inline)) void aj_gemm_pack_{sx}({t} *restrict dst,
    const {t} *src, int64_t kc, int w, int64_t lanes, const int64_t *restrict so,
    const int64_t *restrict lo) {{
  if (lanes >= w) {{
    for (int64_t p = 0; p < kc; ++p)
      for (int l = 0; l < w; ++l) dst[p * w + l] = src[so[p] + {full_lane}];
  }} else {{
    for (int64_t p = 0; p < kc; ++p)
      for (int l = 0; l < w; ++l) dst[p * w + l] = l < lanes ? src[so[p] + lo[l]] : 0;
  }}
}}
static void aj_mm_block_{sx}(int64_t r0, int64_t r1, int64_t c0, int64_t c1,
    const {t} *A, const {t} *B, {t} *C, {t} *restrict pa, {t} *restrict pb) {{
  enum {{ MR = {MR}, NR = {nr}, KC = {kc_of(mm)}, MC = {MC}, NC = {NC} }};
  const int64_t k = {mm.k}, rsc = {mm.c.rs}, csc = {mm.c.cs};
  {t} tile[MR * NR];
  int64_t sa[KC], sb[KC], la[MC + MR], lb[NR];
  for (int64_t jc = c0; jc < c1; jc += NC) {{
    const int64_t nc = c1 - jc < NC ? c1 - jc : NC;
    for (int64_t pc = 0; pc < k; pc += KC) {{
      const int64_t kc = k - pc < KC ? k - pc : KC;
      for (int64_t p = 0; p < kc; ++p) {{
        sa[p] = aj_gemm_walk_{sx}_ak(pc + p);
        sb[p] = aj_gemm_walk_{sx}_bk(pc + p);
      }}
      for (int64_t jr = 0; jr < nc; jr += NR) {{
        const int64_t valid = nc - jr < NR ? nc - jr : NR;
        for (int64_t l = 0; l < valid; ++l) lb[l] = aj_gemm_walk_{sx}_bc(jc + jr + l);
        aj_gemm_pack_{sx}(pb + jr * kc, B, kc, NR, valid, sb, lb);
      }}
      for (int64_t ic = r0; ic < r1; ic += MC) {{
        const int64_t mc = r1 - ic < MC ? r1 - ic : MC;
        for (int64_t l = 0; l < mc; ++l) la[l] = aj_gemm_walk_{sx}_ar(ic + l);
        for (int64_t l = mc; l < MC + MR; ++l) la[l] = la[0];
        for (int64_t jr = 0; jr < nc; jr += NR) {{
          for (int64_t ir = 0; ir < mc; ir += MR) {{
            {t} *c = C + (ic + ir) * rsc + (jc + jr) * csc;
            const int64_t mr = mc - ir < MR ? mc - ir : MR, nr = nc - jr < NR ? nc - jr : NR;
            if (mr == MR && nr == NR && csc == 1) {{
              aj_gemm_micro_{sx}(kc, A, la + ir, sa, pb + jr * kc, c, rsc);
              continue;
            }}
            for (int64_t r = 0; r < MR; ++r)
              for (int64_t j = 0; j < NR; ++j)
                tile[r * NR + j] = r < mr && j < nr ? c[r * rsc + j * csc] : 0;
            aj_gemm_micro_{sx}(kc, A, la + ir, sa, pb + jr * kc, tile, NR);
            for (int64_t r = 0; r < mr; ++r)
              for (int64_t j = 0; j < nr; ++j) c[r * rsc + j * csc] = tile[r * NR + j];
          }}
        }}
      }}
    }}
  }}
}}
"""
    )


def c_part(mm: CpuMatmul, names: dict[Tnode, str]) -> list[str]:
    """The body of the matmul's segment function: units ``[start, stop)`` of ``C``, packing
    into the chunk's buffer ``mmbuf`` (:func:`buffer_bytes`, 64-byte aligned); ``names``: the
    buffers' identifiers."""
    t, (a, b, c) = _c_type(mm), (mm.a, mm.b, mm.c)
    size, extent = (MR, mm.m) if mm.split_rows else (mm.nr, mm.n)
    lo, hi = f"start * {size}", f"(stop * {size} < {extent} ? stop * {size} : {extent})"
    r0, r1, c0, c1 = (lo, hi, "0", str(mm.n)) if mm.split_rows else ("0", str(mm.m), lo, hi)
    buffers = f"{t} *pa = ({t} *)mmbuf, *pb = ({t} *)((char *)mmbuf + {buffer_bytes(mm)[0]});"
    if mm.scatter is not None:
        whole = ("0", str(mm.m), "0", str(mm.n)) if mm.split_rows else (r0, r1, c0, c1)
        return [buffers, *_c_scatter(mm, names, whole)]
    if mm.walks is not None:
        return [
            buffers,
            f"aj_mm_block_{mm.suffix}({r0}, {r1}, {c0}, {c1}, {names[a.tn]} + {a.offset}, "
            f"{names[b.tn]} + {b.offset}, {names[c.tn]} + {c.offset}, pa, pb);",
        ]
    return [
        buffers,
        f"aj_mm_block_{mm.suffix}({r0}, {r1}, {c0}, {c1}, {mm.k}, "
        f"{names[a.tn]} + {a.offset}, {a.rs}, {a.cs}, {names[b.tn]} + {b.offset}, {b.rs}, "
        f"{b.cs}, {names[c.tn]} + {c.offset}, {c.rs}, {c.cs}, pa, pb);",
    ]


def _c_scatter(
    mm: CpuMatmul, names: dict[Tnode, str], block: tuple[str, str, str, str]
) -> list[str]:
    """The call of a scatter's helper for units ``[start, stop)``: batches of runs (every
    column), or column panels of every run."""
    sp = mm.scatter
    assert sp is not None
    _, _, c0, c1 = block
    per = sp.runs // sp.batches
    u0, u1 = (f"start * {per}", f"stop * {per}") if mm.split_rows else ("0", str(sp.runs))
    a, b, c = (f"{names[o.tn]} + {o.offset}" for o in (mm.a, mm.b, mm.c))
    return [f"aj_scatter_{mm.suffix}({u0}, {u1}, {c0}, {c1}, {a}, {b}, {c}, pa, pb);"]


def _lane_exprs(mm: CpuMatmul) -> tuple[str, str, str, str]:
    """C expressions of the offsets of ``A``'s row ``r``, ``A``'s step ``p``, ``B``'s step
    ``p`` and ``B``'s column ``j``."""
    if mm.walks is None:
        a, b = mm.a, mm.b
        return f"r * {a.rs}", f"p * {a.cs}", f"p * {b.rs}", f"j * {b.cs}"
    ar, ak, bk, bc = mm.walks
    return _c_walk(ar, "r"), _c_walk(ak, "p"), _c_walk(bk, "p"), _c_walk(bc, "j")


def c_scatter_helper(mm: CpuMatmul) -> str:
    """``aj_scatter_<suffix>(u0, u1, c0, c1, A, B, C, pa, pb)``: runs ``[u0, u1)`` of a
    scatter (:class:`~arrayjit_backends.codegen.conv_plan.ScatterPlan`), columns ``[c0, c1)``
    (``c0`` a multiple of ``NR``). Every shift's ``B`` is packed once per call (panels of
    ``NR`` columns, all ``k`` steps, zeros past the last column), a run's ``A`` once per run
    and ``A`` shift (panels of ``MR`` rows, zeros past the last row), the rows' offsets in
    ``A`` and ``C`` into tables once per call; then per run and shift in order the tiles of
    the micro-kernel (``C``'s rows through the table), all ``k`` steps in one go: each cell
    takes each shift's ``fma`` steps in order, the shifts in the plan's order."""
    sp = mm.scatter
    assert sp is not None
    t, sx, nr = _c_type(mm), mm.suffix, mm.nr
    ar, ak, bk, bc = _lane_exprs(mm)
    n_s = len(sp.shifts)
    table = ", ".join(f"{{{da}, {db}, {dc}}}" for da, db, dc in sp.shifts)
    return f"""/* A scatter's runs and shifts (arrayjit_backends.codegen.conv_plan.ScatterPlan):
   aj_scatter. */
static void aj_scatter_{sx}(int64_t u0, int64_t u1, int64_t c0, int64_t c1, const {t} *A,
    const {t} *B, {t} *C, {t} *restrict pa, {t} *restrict pb) {{
  enum {{ MR = {MR}, NR = {nr} }};
  const int64_t M = {mm.m}, K = {mm.k}, csc = {mm.c.cs};
  const int64_t NP = {-(-mm.n // nr) * nr};
  static const int64_t sh[{n_s}][3] = {{{table}}};
  {t} tile[MR * NR];
  int64_t *la = (int64_t *)(pb + {n_s} * K * NP), *lc = la + M;
  for (int64_t r = 0; r < M; ++r) {{
    la[r] = {ar};
    lc[r] = {_c_walk(sp.c_rows, "r")};
  }}
  for (int s = 0; s < {n_s}; ++s)
    for (int64_t jr = c0; jr < c1; jr += NR) {{
      {t} *dst = pb + s * K * NP + (jr - c0) * K;
      for (int64_t p = 0; p < K; ++p)
        for (int l = 0; l < NR; ++l) {{
          const int64_t j = jr + l;
          dst[p * NR + l] = j < c1 ? B[sh[s][1] + {bk} + {bc}] : 0;
        }}
    }}
  for (int64_t u = u0; u < u1; ++u) {{
    const int64_t ua = {_c_walk(sp.a_units, "u")}, uc = {_c_walk(sp.c_units, "u")};
    for (int s = 0; s < {n_s}; ++s) {{
      if (s == 0 || sh[s][0] != sh[s - 1][0]) {{
        const {t} *src = A + ua + sh[s][0];
        for (int64_t ir = 0; ir < M; ir += MR) {{
          {t} *dst = pa + ir * K;
          if (ir + MR <= M) {{  /* a full panel: its rows' starts in registers */
            const {t} *row[MR];
            for (int q = 0; q < MR; ++q) row[q] = src + la[ir + q];
            for (int64_t p = 0; p < K; ++p) {{
              const int64_t o = {ak};
#pragma GCC unroll {MR}
              for (int q = 0; q < MR; ++q) dst[p * MR + q] = row[q][o];
            }}
            continue;
          }}
          for (int64_t p = 0; p < K; ++p)
            for (int q = 0; q < MR; ++q) {{
              const int64_t r = ir + q;
              dst[p * MR + q] = r < M ? src[la[r] + {ak}] : 0;
            }}
        }}
      }}
      {t} *cs = C + uc + sh[s][2];
      for (int64_t jr = c0; jr < c1; jr += NR) {{
        const {t} *b = pb + s * K * NP + (jr - c0) * K;
        for (int64_t ir = 0; ir < M; ir += MR) {{
          {t} *c = cs + jr * csc;
          const int64_t *lr = lc + ir;
          const int64_t mr = M - ir < MR ? M - ir : MR, nr = c1 - jr < NR ? c1 - jr : NR;
          if (mr == MR && nr == NR && csc == 1) {{
            aj_sc_micro_{sx}(K, pa + ir * K, b, c, lr);
            continue;
          }}
          for (int64_t r = 0; r < MR; ++r)
            for (int64_t j = 0; j < NR; ++j)
              tile[r * NR + j] = r < mr && j < nr ? c[lr[r] + j * csc] : 0;
          aj_mm_micro_{sx}(K, pa + ir * K, b, tile, NR);
          for (int64_t r = 0; r < mr; ++r)
            for (int64_t j = 0; j < nr; ++j) c[lr[r] + j * csc] = tile[r * NR + j];
        }}
      }}
    }}
  }}
}}
"""
