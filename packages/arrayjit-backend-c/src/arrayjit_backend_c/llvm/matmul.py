"""The packed matmul of :mod:`arrayjit_backend_c.cpu.matmul` as LLVM IR, for the ``llvm``
backend: the same packing, blocking, micro-kernel and exactness (each cell's ``llvm.fma`` steps in
``k`` order from its stored value), with the tile's rows as ``<NR x float>`` or ``<NR x double>``
vectors and ``llvm.fma.v*`` steps; and the implicit GEMM of
:func:`~arrayjit_backend_c.cpu.matmul.c_gemm_helpers` (``A`` unpacked, ``B`` packed through
offset tables, the walks as functions of their own), and the scatter of
:func:`~arrayjit_backend_c.cpu.matmul.c_scatter_helper` (runs and shifts of GEMMs).

The routine's segment for the matmul takes ``(start, stop, buffer)``: a range of
:attr:`~arrayjit_backend_c.cpu.matmul.CpuMatmul.units` (row panels or column panels), so the
backend's chunks split the matmul across threads, and the chunk's packing buffer
(:func:`~arrayjit_backend_c.cpu.matmul.buffer_bytes`), which the compiler allocates once per
chunk when it links the routine.
"""

from __future__ import annotations

from collections.abc import Callable

from arrayjit_backend_c.cpu import matmul as cm
from arrayjit_backend_c.llvm.scalar import Fn
from arrayjit_backends.codegen.conv_plan import Walk
from arrayjit_tnode import Prec, Tnode


class _Ir:
    """A function body being written: SSA temporaries and counted loops."""

    def __init__(self, f: Fn, t: str) -> None:
        self.f = f
        self.t = t

    def v(self, text: str) -> str:
        return self.f.tmp(text)

    def add(self, a: str | int, b: str | int) -> str:
        return self.v(f"add nsw i64 {a}, {b}")

    def mul(self, a: str | int, b: str | int) -> str:
        return self.v(f"mul nsw i64 {a}, {b}")

    def min(self, a: str | int, b: str | int) -> str:
        return self.v(f"select i1 {self.v(f'icmp slt i64 {a}, {b}')}, i64 {a}, i64 {b}")

    def at(self, base: str, index: str | int) -> str:
        """The address of element ``index`` of the ``t`` array at ``base``."""
        return self.v(f"getelementptr inbounds {self.t}, ptr {base}, i64 {index}")

    def at2(self, base: str, i: str | int, si: str | int, j: str | int, sj: str | int) -> str:
        """The address of ``base[i * si + j * sj]``."""
        return self.at(base, self.add(self.mul(i, si), self.mul(j, sj)))

    def load(self, ptr: str) -> str:
        return self.v(f"load {self.t}, ptr {ptr}")

    def store(self, value: str, ptr: str) -> None:
        self.f.do(f"store {self.t} {value}, ptr {ptr}")

    def loop(self, lo: str | int, stop: str | int, step: int, body: Callable[[str], None]) -> None:
        """``for (iv = lo; iv < stop; iv += step) body(iv)``, tested before the first trip."""
        f = self.f
        head, done = f.label("L"), f.label("X")
        go = self.v(f"icmp slt i64 {lo}, {stop}")
        f.do(f"br i1 {go}, label %{head}, label %{done}")
        pre = f.block
        f.start(head)
        f.n += 1
        iv = f"%iv{f.n}"
        phi_at = len(f.lines)
        f.lines.append("")
        body(iv)
        nxt = self.add(iv, step)
        again = self.v(f"icmp slt i64 {nxt}, {stop}")
        f.do(f"br i1 {again}, label %{head}, label %{done}")
        f.lines[phi_at] = f"  {iv} = phi i64 [ {lo}, %{pre} ], [ {nxt}, %{f.block} ]"
        f.start(done)

    def branch(self, cond: str, then: Callable[[], None], other: Callable[[], None]) -> None:
        """``if (cond) then() else other()``."""
        f = self.f
        yes, no, join = f.label("T"), f.label("E"), f.label("J")
        f.do(f"br i1 {cond}, label %{yes}, label %{no}")
        f.start(yes)
        then()
        f.do(f"br label %{join}")
        f.start(no)
        other()
        f.do(f"br label %{join}")
        f.start(join)


def _types(mm: cm.CpuMatmul) -> tuple[str, int, str, str]:
    """The scalar type, the lanes of a vector, the vector type, the fma intrinsic's name."""
    t = "float" if mm.prec is Prec.single else "double"
    vl = mm.nr  # one vector per tile row: LLVM splits it where registers are narrower
    return t, vl, f"<{vl} x {t}>", f"llvm.fma.v{vl}{'f32' if t == 'float' else 'f64'}"


def _micro(mm: cm.CpuMatmul, direct: bool = False, rows: bool = False) -> str:
    """``@aj_mm_micro_<suffix>(kc, a, b, c, ldc)``: the tile at ``c`` (rows ``ldc`` apart)
    after ``kc >= 1`` steps from the packed panels ``a`` and ``b``; with ``direct``, the
    implicit GEMM's ``@aj_gemm_micro_<suffix>(kc, A, rows, so, b, c, ldc)``, which reads
    ``A`` unpacked, step ``p`` of row ``r`` at ``A[rows[r] + so[p]]`` (see
    :func:`~arrayjit_backend_c.cpu.matmul.c_gemm_helpers`); with ``rows``, a scatter's
    ``@aj_sc_micro_<suffix>(kc, a, b, c, ldc)``, whose tile's row ``r`` lies at ``c +
    ldc[r]`` (``ldc`` a table of row offsets)."""
    t, vl, vt, fma = _types(mm)
    nv, mr, nr = mm.nr // vl, cm.MR, mm.nr
    if direct:
        ln = [
            f"define internal void @aj_gemm_micro_{mm.suffix}(i64 %kc, ptr %A, "
            "ptr noalias %rows, ptr noalias %so, ptr noalias %b, ptr noalias %c, i64 %ldc) #0 {",
            "entry:",
        ]
        for r in range(mr):
            ln.append(f"  %rp{r} = getelementptr inbounds i64, ptr %rows, i64 {r}")
            ln.append(f"  %ro{r} = load i64, ptr %rp{r}")
            ln.append(f"  %ar{r} = getelementptr inbounds {t}, ptr %A, i64 %ro{r}")
    else:
        name, ld = ("sc", "ptr noalias %ldc") if rows else ("mm", "i64 %ldc")
        ln = [
            f"define internal void @aj_{name}_micro_{mm.suffix}(i64 %kc, ptr noalias %a, "
            f"ptr noalias %b, ptr noalias %c, {ld}) #0 {{",
            "entry:",
        ]
    for r in range(mr):
        if rows:
            ln.append(f"  %cr{r} = getelementptr inbounds i64, ptr %ldc, i64 {r}")
            ln.append(f"  %co{r} = load i64, ptr %cr{r}")
        else:
            ln.append(f"  %co{r} = mul nsw i64 %ldc, {r}")
        for v in range(nv):
            ln.append(f"  %cp{r}_{v}.o = add nsw i64 %co{r}, {v * vl}")
            ln.append(f"  %cp{r}_{v} = getelementptr inbounds {t}, ptr %c, i64 %cp{r}_{v}.o")
            ln.append(f"  %c{r}_{v}.0 = load {vt}, ptr %cp{r}_{v}, align {mm.prec.byte_size}")
    ln += ["  br label %step", "step:", "  %p = phi i64 [ 0, %entry ], [ %p.next, %step ]"]
    for r in range(mr):
        for v in range(nv):
            ln.append(f"  %c{r}_{v} = phi {vt} [ %c{r}_{v}.0, %entry ], [ %c{r}_{v}.1, %step ]")
    ln.append(f"  %bo = mul nsw i64 %p, {nr}")
    for v in range(nv):
        ln.append(f"  %bo{v} = add nsw i64 %bo, {v * vl}")
        ln.append(f"  %bp{v} = getelementptr inbounds {t}, ptr %b, i64 %bo{v}")
        ln.append(f"  %b{v} = load {vt}, ptr %bp{v}, align {mm.prec.byte_size}")
    if direct:
        ln.append("  %sop = getelementptr inbounds i64, ptr %so, i64 %p")
        ln.append("  %o = load i64, ptr %sop")
    else:
        ln.append(f"  %ao = mul nsw i64 %p, {mr}")
    for r in range(mr):
        if direct:
            ln.append(f"  %ap{r} = getelementptr inbounds {t}, ptr %ar{r}, i64 %o")
        else:
            ln.append(f"  %ao{r} = add nsw i64 %ao, {r}")
            ln.append(f"  %ap{r} = getelementptr inbounds {t}, ptr %a, i64 %ao{r}")
        ln.append(f"  %a{r}.s = load {t}, ptr %ap{r}")
        ln.append(f"  %a{r}.i = insertelement {vt} poison, {t} %a{r}.s, i64 0")
        ln.append(
            f"  %a{r} = shufflevector {vt} %a{r}.i, {vt} poison, <{vl} x i32> zeroinitializer"
        )
        for v in range(nv):
            x, w = (f"%a{r}", f"%b{v}") if mm.x_is_a else (f"%b{v}", f"%a{r}")
            ln.append(f"  %c{r}_{v}.1 = call {vt} @{fma}({vt} {x}, {vt} {w}, {vt} %c{r}_{v})")
    ln += [
        "  %p.next = add nsw i64 %p, 1",
        "  %more = icmp slt i64 %p.next, %kc",
        "  br i1 %more, label %step, label %done",
        "done:",
    ]
    for r in range(mr):
        for v in range(nv):
            ln.append(f"  store {vt} %c{r}_{v}.1, ptr %cp{r}_{v}, align {mm.prec.byte_size}")
    ln += ["  ret void", "}"]
    return "\n".join(ln)


_BLOCK_PARAMS = (
    "i64 %r0, i64 %r1, i64 %c0, i64 %c1, i64 %k, ptr %A, i64 %rsa, i64 %csa, ptr %B, i64 %rsb, "
    "i64 %csb, ptr %C, i64 %rsc, i64 %csc, ptr noalias %pa, ptr noalias %pb"
)


_GEMM_PARAMS = (
    "i64 %r0, i64 %r1, i64 %c0, i64 %c1, ptr %A, ptr %B, ptr %C, ptr noalias %pa, ptr noalias %pb"
)


def _walk_fn(name: str, w: Walk) -> str:
    """``@<name>(i64 %t)``: the offset of point ``%t`` of the walk ``w``."""
    ln = [f"define internal i64 @{name}(i64 %t) #0 {{", "entry:"]
    acc = "0"
    for d, (inner, e, st) in enumerate(w.terms()):
        ln.append(f"  %q{d} = udiv i64 %t, {inner}")
        digit = f"%q{d}"
        if d:
            ln.append(f"  %r{d} = urem i64 %q{d}, {e}")
            digit = f"%r{d}"
        ln.append(f"  %o{d} = mul nsw i64 {digit}, {st}")
        ln.append(f"  %s{d} = add nsw i64 {acc}, %o{d}")
        acc = f"%s{d}"
    ln += [f"  ret i64 {acc}", "}"]
    return "\n".join(ln)


def _block(mm: cm.CpuMatmul) -> str:
    """``@aj_mm_block_<suffix>``: ``C[r0:r1, c0:c1]`` after every ``k`` step, serially (the
    loops of ``aj_mm_block_*`` in :func:`~arrayjit_backend_c.cpu.matmul.c_helpers`); for an
    implicit GEMM (``mm.walks``), with its shape and strides built in and its operands packed
    through offset tables of the block's steps and the panel's lanes (as
    :func:`~arrayjit_backend_c.cpu.matmul.c_gemm_helpers` does)."""
    t = _types(mm)[0]
    f = Fn()
    b = _Ir(f, t)
    mr, nr, kc_max, mc_max, nc_max = cm.MR, mm.nr, cm.kc_of(mm), cm.MC, cm.NC
    tile = "%tile"
    f.allocas.append(f"  %tile = alloca [{mr * nr} x {t}], align 64")
    zero = "0.0"
    micro = f"@aj_mm_micro_{mm.suffix}"
    gemm = mm.walks is not None
    k_, rsc, csc = (str(mm.k), str(mm.c.rs), str(mm.c.cs)) if gemm else ("%k", "%rsc", "%csc")
    if gemm:
        for name, size in (("sa", kc_max), ("sb", kc_max), ("la", mc_max + mr), ("lb", nr)):
            f.allocas.append(f"  %{name} = alloca [{size} x i64], align 64")

    def walk(name: str, at: str) -> str:
        return b.v(f"call i64 @aj_gemm_walk_{mm.suffix}_{name}(i64 {at})")

    def table(name: str, at: str) -> str:
        return b.v(f"getelementptr inbounds i64, ptr %{name}, i64 {at}")

    def pack_tables(
        src: str, lanes_t: str, steps_t: str, dst: str, lanes: int, valid: str, kc: str
    ) -> None:
        """``dst[p * lanes + e] = src[steps_t[p] + lanes_t[e]]`` for ``e < valid``, else 0; a
        full panel with its lanes' offsets in registers and its lanes unrolled."""

        def full() -> None:
            lane = mm.walks[3].stride if mm.walks is not None and lanes_t == "lb" else None
            if lane is not None:  # the panel's first column's offset, then one stride apart
                lo0 = b.v(f"load i64, ptr {table(lanes_t, '0')}")
                los = [b.add(lo0, e * lane) for e in range(lanes)]
            else:
                los = [b.v(f"load i64, ptr {table(lanes_t, str(e))}") for e in range(lanes)]

            def step(p: str) -> None:
                row = b.mul(p, lanes)
                so = b.v(f"load i64, ptr {table(steps_t, p)}")
                for e, lo in enumerate(los):
                    b.store(b.load(b.at(src, b.add(so, lo))), b.at(dst, b.add(row, e)))

            b.loop(0, kc, 1, step)

        def partial() -> None:
            def step(p: str) -> None:
                row = b.mul(p, lanes)
                so = b.v(f"load i64, ptr {table(steps_t, p)}")

                def cell(e: str) -> None:
                    lo = b.v(f"load i64, ptr {table(lanes_t, e)}")
                    b.store(b.load(b.at(src, b.add(so, lo))), b.at(dst, b.add(row, e)))

                b.loop(0, valid, 1, cell)
                b.loop(valid, lanes, 1, lambda e: b.store(zero, b.at(dst, b.add(row, e))))

            b.loop(0, kc, 1, step)

        b.branch(b.v(f"icmp eq i64 {valid}, {lanes}"), full, partial)

    def fill(name: str, walk_name: str, first: str, count: str) -> None:
        """``%name[l] = walk(first + l)`` for ``l < count``."""
        b.loop(
            0,
            count,
            1,
            lambda e: f.do(f"store i64 {walk(walk_name, b.add(first, e))}, ptr {table(name, e)}"),
        )

    def pack(src: str, s_outer: str, s_k: str, dst: str, lanes: int, valid: str, kc: str) -> None:
        """``dst[p * lanes + e] = src[e * s_outer + p * s_k]`` for ``e < valid``, else 0; a
        full panel with its lanes unrolled (a loop of ``lanes`` short trips per step cost more
        than the copy: the llvm matmul took twice cc's time at 32768 x 576 x 64)."""

        def full() -> None:
            outs = [b.mul(e, s_outer) for e in range(lanes)]

            def step(p: str) -> None:
                row, at = b.mul(p, lanes), b.mul(p, s_k)
                for e, o in enumerate(outs):
                    b.store(b.load(b.at(src, b.add(at, o))), b.at(dst, b.add(row, e)))

            b.loop(0, kc, 1, step)

        def partial() -> None:
            def step(p: str) -> None:
                row = b.mul(p, lanes)
                b.loop(
                    0,
                    valid,
                    1,
                    lambda e: b.store(
                        b.load(b.at2(src, e, s_outer, p, s_k)), b.at(dst, b.add(row, e))
                    ),
                )
                b.loop(valid, lanes, 1, lambda e: b.store(zero, b.at(dst, b.add(row, e))))

            b.loop(0, kc, 1, step)

        b.branch(b.v(f"icmp eq i64 {valid}, {lanes}"), full, partial)

    def columns(jc: str) -> None:
        nc = b.min(b.v(f"sub nsw i64 %c1, {jc}"), nc_max)

        def kblock(pc: str) -> None:
            kc = b.min(b.v(f"sub nsw i64 {k_}, {pc}"), kc_max)
            if gemm:
                fill("sa", "ak", pc, kc)
                fill("sb", "bk", pc, kc)

            def pack_b(jr: str) -> None:
                valid = b.min(b.v(f"sub nsw i64 {nc}, {jr}"), nr)
                if gemm:
                    fill("lb", "bc", b.add(jc, jr), valid)
                    pack_tables("%B", "lb", "sb", b.at("%pb", b.mul(jr, kc)), nr, valid, kc)
                    return
                src = b.at2("%B", pc, "%rsb", b.add(jc, jr), "%csb")
                pack(src, "%csb", "%rsb", b.at("%pb", b.mul(jr, kc)), nr, valid, kc)

            b.loop(0, nc, nr, pack_b)

            def rows(ic: str) -> None:
                mc = b.min(b.v(f"sub nsw i64 %r1, {ic}"), mc_max)

                def pack_a(ir: str) -> None:
                    valid = b.min(b.v(f"sub nsw i64 {mc}, {ir}"), mr)
                    src = b.at2("%A", b.add(ic, ir), "%rsa", pc, "%csa")
                    pack(src, "%rsa", "%csa", b.at("%pa", b.mul(ir, kc)), mr, valid, kc)

                if gemm:  # A unpacked: the offsets of the block's rows, then its first's
                    fill("la", "ar", ic, mc)
                    first = b.v(f"load i64, ptr {table('la', '0')}")
                    b.loop(
                        mc,
                        mc_max + mr,
                        1,
                        lambda e: f.do(f"store i64 {first}, ptr {table('la', e)}"),
                    )
                else:
                    b.loop(0, mc, mr, pack_a)

                def tiles(jr: str) -> None:
                    def one(ir: str) -> None:
                        c = b.at2("%C", b.add(ic, ir), rsc, b.add(jc, jr), csc)
                        rows_ = b.min(b.v(f"sub nsw i64 {mc}, {ir}"), mr)
                        cols = b.min(b.v(f"sub nsw i64 {nc}, {jr}"), nr)
                        pa, pb = b.at("%pa", b.mul(ir, kc)), b.at("%pb", b.mul(jr, kc))
                        full_r = b.v(f"icmp eq i64 {rows_}, {mr}")
                        full_c = b.v(f"icmp eq i64 {cols}, {nr}")
                        unit = b.v(f"icmp eq i64 {csc}, 1")
                        full = b.v(f"and i1 {b.v(f'and i1 {full_r}, {full_c}')}, {unit}")

                        def call_micro(tile_at: str, ld: str) -> None:
                            if gemm:
                                rows_at = table("la", ir)
                                f.do(
                                    f"call void @aj_gemm_micro_{mm.suffix}(i64 {kc}, ptr %A, "
                                    f"ptr {rows_at}, ptr %sa, ptr {pb}, ptr {tile_at}, i64 {ld})"
                                )
                            else:
                                f.do(
                                    f"call void {micro}(i64 {kc}, ptr {pa}, ptr {pb}, "
                                    f"ptr {tile_at}, i64 {ld})"
                                )

                        def direct() -> None:
                            call_micro(c, rsc)

                        def via_tile() -> None:
                            size = mr * nr * mm.prec.byte_size
                            f.do(
                                f"call void @llvm.memset.p0.i64(ptr {tile}, i8 0, i64 {size}, i1 0)"
                            )

                            def copy(into_tile: bool) -> None:
                                def row(r: str) -> None:
                                    def cell(j: str) -> None:
                                        there = b.at2(c, r, rsc, j, csc)
                                        here = b.at(tile, b.add(b.mul(r, nr), j))
                                        src, dst = (there, here) if into_tile else (here, there)
                                        b.store(b.load(src), dst)

                                    b.loop(0, cols, 1, cell)

                                b.loop(0, rows_, 1, row)

                            copy(True)
                            call_micro(tile, str(nr))
                            copy(False)

                        b.branch(full, direct, via_tile)

                    b.loop(0, mc, mr, one)

                b.loop(0, nc, nr, tiles)

            b.loop("%r0", "%r1", mc_max, rows)

        b.loop(0, k_, kc_max, kblock)

    b.loop("%c0", "%c1", nc_max, columns)
    f.do("ret void")
    params = _GEMM_PARAMS if gemm else _BLOCK_PARAMS
    return (
        f"define internal void @aj_mm_block_{mm.suffix}({params}) #0 {{\nentry:\n"
        + "\n".join(f.allocas + f.lines)
        + "\n}"
    )


def helpers(mm: cm.CpuMatmul) -> tuple[str, list[str]]:
    """The helper functions of ``mm``'s precision and operand order, and the declarations they
    need."""
    _, _, vt, fma = _types(mm)
    decls = [
        f"declare {vt} @{fma}({vt}, {vt}, {vt})",
        "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)",
    ]
    walks = ""
    if mm.walks is not None:
        names = ("ar", "ak", "bk", "bc")
        walks = "".join(
            _walk_fn(f"aj_gemm_walk_{mm.suffix}_{n}", w) + "\n"
            for n, w in zip(names, mm.walks, strict=True)
        )
        walks += _micro(mm, direct=True) + "\n"
    if mm.scatter is not None:
        return _micro(mm) + "\n" + _micro(mm, rows=True) + "\n" + _scatter(mm), decls
    return walks + _micro(mm) + "\n" + _block(mm), decls


def part_body(f: Fn, mm: cm.CpuMatmul, ptrs: dict[Tnode, str]) -> None:
    """The body of the matmul's segment function: units ``[%start, %stop)`` of ``C``, packing
    into the chunk's buffer ``%mmbuf`` (:func:`~arrayjit_backend_c.cpu.matmul.buffer_bytes`,
    64-byte aligned)."""
    b = _Ir(f, _types(mm)[0])
    size, extent = (cm.MR, mm.m) if mm.split_rows else (mm.nr, mm.n)
    lo = b.mul("%start", size)
    hi = b.min(b.mul("%stop", size), extent)
    r0, r1, c0, c1 = (lo, hi, 0, mm.n) if mm.split_rows else (0, mm.m, lo, hi)
    pb = b.v(f"getelementptr inbounds i8, ptr %mmbuf, i64 {cm.buffer_bytes(mm)[0]}")
    if mm.scatter is not None:
        _scatter_body(b, mm, ptrs, lo, hi, pb)
        return
    a_, b_, c_ = (b.at(ptrs[o.tn], o.offset) for o in (mm.a, mm.b, mm.c))
    if mm.walks is not None:
        f.do(
            f"call void @aj_mm_block_{mm.suffix}(i64 {r0}, i64 {r1}, i64 {c0}, i64 {c1}, "
            f"ptr {a_}, ptr {b_}, ptr {c_}, ptr %mmbuf, ptr {pb})"
        )
        return
    f.do(
        f"call void @aj_mm_block_{mm.suffix}(i64 {r0}, i64 {r1}, i64 {c0}, i64 {c1}, "
        f"i64 {mm.k}, ptr {a_}, i64 {mm.a.rs}, i64 {mm.a.cs}, ptr {b_}, i64 {mm.b.rs}, "
        f"i64 {mm.b.cs}, ptr {c_}, i64 {mm.c.rs}, i64 {mm.c.cs}, ptr %mmbuf, ptr {pb})"
    )


def _walk_at(b: _Ir, w: Walk, t: str) -> str:
    """The offset of point ``t`` of a walk, computed inline."""
    acc: str | int = 0
    for k, (inner, e, st) in enumerate(w.terms()):
        digit = b.v(f"sdiv i64 {t}, {inner}")
        if k:
            digit = b.v(f"srem i64 {digit}, {e}")
        acc = b.add(acc, b.mul(digit, st))
    return str(acc)


def _lane(b: _Ir, mm: cm.CpuMatmul, which: int, at: str) -> str:
    """The offset of ``A``'s row (``which`` 0), ``A``'s step (1), ``B``'s step (2) or ``B``'s
    column (3) ``at``."""
    if mm.walks is not None:
        return _walk_at(b, mm.walks[which], at)
    stride = (mm.a.rs, mm.a.cs, mm.b.rs, mm.b.cs)[which]
    return b.mul(at, stride)


def _scatter(mm: cm.CpuMatmul) -> str:
    """``@aj_scatter_<suffix>(u0, u1, c0, c1, A, B, C, pa, pb)``: runs ``[u0, u1)`` of a scatter,
    columns ``[c0, c1)``, as :func:`~arrayjit_backend_c.cpu.matmul.c_scatter_helper` computes
    them (every shift's ``B`` packed once per call, a run's ``A`` once per run and ``A``
    shift, then the micro-kernel's tiles per run and shift in order), the shifts unrolled."""
    sp = mm.scatter
    assert sp is not None
    t = _types(mm)[0]
    f = Fn()
    b = _Ir(f, t)
    mr, nr, m, k = cm.MR, mm.nr, mm.m, mm.k
    np_ = -(-mm.n // nr) * nr
    csc = mm.c.cs
    f.allocas.append(f"  %tile = alloca [{mr * nr} x {t}], align 64")
    micro = f"@aj_mm_micro_{mm.suffix}"
    f.do("; aj_scatter: the runs and shifts of a scatter (conv_plan.ScatterPlan)")
    la = b.v(f"getelementptr inbounds {t}, ptr %pb, i64 {len(sp.shifts) * k * np_}")
    lc = b.v(f"getelementptr inbounds i64, ptr {la}, i64 {m}")

    def entry(table: str, r: str) -> str:
        return b.v(f"getelementptr inbounds i64, ptr {table}, i64 {r}")

    def tables(r: str) -> None:
        f.do(f"store i64 {_lane(b, mm, 0, r)}, ptr {entry(la, r)}")
        f.do(f"store i64 {_walk_at(b, sp.c_rows, r)}, ptr {entry(lc, r)}")

    b.loop(0, m, 1, tables)

    def pack_b(s: int, db: int) -> None:
        def panel(jr: str) -> None:
            dst = b.at("%pb", b.add(s * k * np_, b.mul(b.v(f"sub nsw i64 {jr}, %c0"), k)))

            def step(p: str) -> None:
                src = b.at("%B", b.add(db, _lane(b, mm, 2, p)))

                def lane(e: str) -> None:
                    j = b.add(jr, e)
                    to = b.at(dst, b.add(b.mul(p, nr), e))
                    b.branch(
                        b.v(f"icmp slt i64 {j}, %c1"),
                        lambda: b.store(b.load(b.at(src, _lane(b, mm, 3, j))), to),
                        lambda: b.store("0.0", to),
                    )

                b.loop(0, nr, 1, lane)

            b.loop(0, k, 1, step)

        b.loop("%c0", "%c1", nr, panel)

    for s, (_, db, _) in enumerate(sp.shifts):
        pack_b(s, db)

    def row_a(r: str) -> str:
        return b.v(f"load i64, ptr {entry(la, r)}")

    def run(u: str) -> None:
        ua, uc = _walk_at(b, sp.a_units, u), _walk_at(b, sp.c_units, u)
        for s, (da, _, dc) in enumerate(sp.shifts):
            if s == 0 or sp.shifts[s - 1][0] != da:
                src = b.at("%A", b.add(ua, da))

                def panel(ir: str, src: str = src) -> None:
                    def step(p: str) -> None:
                        ak = _lane(b, mm, 1, p)

                        def lane(q: str) -> None:
                            r = b.add(ir, q)
                            to = b.at("%pa", b.add(b.mul(ir, k), b.add(b.mul(p, mr), q)))
                            b.branch(
                                b.v(f"icmp slt i64 {r}, {m}"),
                                lambda: b.store(b.load(b.at(src, b.add(row_a(r), ak))), to),
                                lambda: b.store("0.0", to),
                            )

                        b.loop(0, mr, 1, lane)

                    b.loop(0, k, 1, step)

                b.loop(0, m, mr, panel)
            cs = b.at("%C", b.add(uc, dc))

            def tiles(jr: str, s: int = s, cs: str = cs) -> None:
                bp = b.at("%pb", b.add(s * k * np_, b.mul(b.v(f"sub nsw i64 {jr}, %c0"), k)))

                def one(ir: str) -> None:
                    c = b.at(cs, b.mul(jr, csc))
                    lr = entry(lc, ir)
                    rows_ = b.min(b.v(f"sub nsw i64 {m}, {ir}"), mr)
                    cols = b.min(b.v(f"sub nsw i64 %c1, {jr}"), nr)
                    pa = b.at("%pa", b.mul(ir, k))
                    full_r = b.v(f"icmp eq i64 {rows_}, {mr}")
                    full_c = b.v(f"icmp eq i64 {cols}, {nr}")
                    full = b.v(f"and i1 {full_r}, {full_c}") if csc == 1 else "false"

                    def direct() -> None:
                        f.do(
                            f"call void @aj_sc_micro_{mm.suffix}(i64 {k}, ptr {pa}, ptr {bp}, "
                            f"ptr {c}, ptr {lr})"
                        )

                    def via_tile() -> None:
                        size = mr * nr * mm.prec.byte_size
                        f.do(f"call void @llvm.memset.p0.i64(ptr %tile, i8 0, i64 {size}, i1 0)")

                        def copy(into_tile: bool) -> None:
                            def row(r: str) -> None:
                                ro = b.v(f"load i64, ptr {entry(lr, r)}")

                                def cell(j: str) -> None:
                                    there = b.at(c, b.add(ro, b.mul(j, csc)))
                                    here = b.at("%tile", b.add(b.mul(r, nr), j))
                                    src, dst = (there, here) if into_tile else (here, there)
                                    b.store(b.load(src), dst)

                                b.loop(0, cols, 1, cell)

                            b.loop(0, rows_, 1, row)

                        copy(True)
                        f.do(f"call void {micro}(i64 {k}, ptr {pa}, ptr {bp}, ptr %tile, i64 {nr})")
                        copy(False)

                    b.branch(full, direct, via_tile)

                b.loop(0, m, mr, one)

            b.loop("%c0", "%c1", nr, tiles)

    b.loop("%u0", "%u1", 1, run)
    f.do("ret void")
    return (
        f"define internal void @aj_scatter_{mm.suffix}(i64 %u0, i64 %u1, i64 %c0, i64 %c1, "
        "ptr %A, ptr %B, ptr %C, ptr noalias %pa, ptr noalias %pb) #0 {\nentry:\n"
        + "\n".join(f.allocas + f.lines)
        + "\n}"
    )


def _scatter_body(
    b: _Ir, mm: cm.CpuMatmul, ptrs: dict[Tnode, str], lo: str, hi: str, pb: str
) -> None:
    """A scatter's units: ``[%start, %stop)`` batches of runs (every column), or column panels
    ``[lo, hi)`` of every run, by its helper (:func:`_scatter`)."""
    sp = mm.scatter
    assert sp is not None
    per = sp.runs // sp.batches
    if mm.split_rows:
        u0, u1, c0, c1 = b.mul("%start", per), b.mul("%stop", per), "0", str(mm.n)
    else:
        u0, u1, c0, c1 = "0", str(sp.runs), lo, hi
    a_, b_, c_ = (b.at(ptrs[o.tn], o.offset) for o in (mm.a, mm.b, mm.c))
    b.f.do(
        f"call void @aj_scatter_{mm.suffix}(i64 {u0}, i64 {u1}, i64 {c0}, i64 {c1}, "
        f"ptr {a_}, ptr {b_}, ptr {c_}, ptr %mmbuf, ptr {pb})"
    )
