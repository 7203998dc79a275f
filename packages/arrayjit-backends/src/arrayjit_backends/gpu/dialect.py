"""The GPU dialect base: the C-like renderer (:class:`~arrayjit_backends.codegen.c_syntax.
CSyntax`) extended with what GPU kernels spell and share, whatever their shape.

A dialect (OpenCL C in ``arrayjit_backend_opencl.renderer``, CUDA C in
``arrayjit_backend_cuda.renderer``) subclasses :class:`GpuSyntax` and sets its hooks: the
qualifiers of global and local memory, the work-item builtins (global id, local id, group id),
the barriers, local arrays and vector loads from them, how a buffer reaches a kernel, the
helpers' qualifier and the prelude. The base holds no dialect's spellings: its defaults are the C
renderer's, and the GPU-only hooks are declared here and set by each dialect.

What the base adds for every kernel shape (:mod:`arrayjit_backends.gpu.matmul`,
:mod:`~arrayjit_backends.gpu.cell_reduction`, :mod:`~arrayjit_backends.gpu.full_reduction`,
:mod:`~arrayjit_backends.gpu.row_chain`, and the program renderer
:mod:`~arrayjit_backends.gpu.program`): decoding loop indices from a flat work-item index
(:meth:`GpuSyntax.decode`), a work group's tree in local memory (:meth:`GpuSyntax.local_tree`),
a work item's register reduction, folded fill constants as a cell holds them, and rows of nodes
held in local memory while a row chain renders (:meth:`CSyntax.resident_rows`).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from typing import ClassVar

from arrayjit_backends.codegen import math_lib
from arrayjit_backends.codegen.c_prelude import float_to_int_helpers
from arrayjit_backends.codegen.c_syntax import CSyntax, Out
from arrayjit_backends.codegen.kernel_plan import ScalarReduction
from arrayjit_ir import low_level as L
from arrayjit_tnode import Prec


class GpuSyntax(CSyntax, abc.ABC):
    """Shared by the OpenCL C and CUDA C renderers; subclasses set the dialect (the hooks
    below without a value, :meth:`local_array`, :meth:`local_vector` and the prelude)."""

    global_qualifier: ClassVar[str]
    """The qualifier of a pointer to global memory (OpenCL ``__global``; CUDA none)."""
    local_qualifier: ClassVar[str]
    """The qualifier of a work group's local array (OpenCL ``__local``, CUDA ``__shared__``)."""
    restrict: ClassVar[str]
    """The qualifier of a pointer no other parameter aliases."""
    global_id: ClassVar[str]
    """The expression of the work item's index in the whole launch."""
    local_id: ClassVar[str]
    """The expression of the work item's index in its work group."""
    group_id: ClassVar[str]
    """The expression of the work group's index in the launch."""
    barrier: ClassVar[str]
    """The statement after which a work group's stores to local memory are visible to it."""
    global_barrier: ClassVar[str]
    """A work group's barrier after which its global stores are visible to the group too."""
    helper_qualifier: ClassVar[str]
    """How the dialect declares its helper functions."""
    # uint4x32 needs the dialect's vector type and a threefry builtin: not rendered yet.
    supported_precs: ClassVar[frozenset[Prec]] = frozenset(Prec) - {Prec.uint4x32}
    exact_launch: ClassVar[bool] = False
    """Whether a kernel launched without a group size runs exactly its global size of work
    items (OpenCL: the driver picks a group size that divides it), so that its parallel body
    needs no bounds check. CUDA launches whole blocks: the last one's extra threads return."""
    vector_cells: ClassVar[bool] = False
    """Whether the dialect's vector types have an elementwise ``fma`` a tiled matmul may step a
    work item's row of cells with (:mod:`arrayjit_backends.gpu.matmul`)."""

    def generated_names(self) -> set[str]:
        """Every identifier this routine's rendering has made (nodes, loop indices, locals,
        temporaries, static indices: :meth:`~arrayjit_backends.codegen.c_syntax.CSyntax.
        fresh_name`'s)."""
        return set(self._taken)

    def __init__(self, group_size: int = 256, fp64: bool = True, cell_lanes: int = 256) -> None:
        super().__init__()
        self.group_size = max(1, 1 << (group_size.bit_length() - 1))  # a power of two
        """Work items of a work group at most (a power of two)."""
        self.cell_lanes = min(self.group_size, cell_lanes)
        """Most work items per cell of a cooperative reduction (:mod:`~arrayjit_backends.
        gpu.cell_reduction`; below 2: none). Devices choose: GPUs want many lanes per row,
        PoCL's CPU devices fewer (a CPU core runs a work group's lanes as a loop)."""
        self.fp64 = fp64
        """Whether the device computes in double."""
        # Integer pow and transcendentals: in double where the device has it, else float
        # (exact for results below 2**24).
        self.int_math_type = "double" if fp64 else "float"

    # ---- the dialect's hooks ----

    @abc.abstractmethod
    def local_array(self, ct: str, name: str, dims: tuple[int, ...]) -> str:
        """The declaration of a work group's local array ``name`` of ``ct`` values of shape
        ``dims``, aligned for vector loads (:meth:`local_vector`)."""

    @abc.abstractmethod
    def local_vector(self, ct: str, width: int, lvalue: str) -> str:
        """The expression of a vector of ``width`` values of local memory from ``lvalue`` on
        (in an array declared by :meth:`local_array`)."""

    def buffer_params(self, name: str, ctype: str) -> list[str]:
        """Parameters that carry one buffer: a pool pointer and a byte offset (the kernel adds
        the offset and casts once, in :meth:`buffer_prologue`). A dialect may fold them into
        one pointer."""
        g = self.global_qualifier
        return [f"{g} unsigned char* p_{name}", f"const unsigned long o_{name}"]

    def buffer_prologue(self, name: str, ctype: str) -> str:
        """The kernel's first statements turning the parameters into a typed pointer (an
        empty string: none)."""
        g = self.global_qualifier
        return f"{g} {ctype}* {self.restrict} {name} = ({g} {ctype}*)(p_{name} + o_{name});"

    def program_prelude(self) -> str:
        """Type names and helpers the kernels use, at the start of every program's source (the
        math library's too: call it after rendering the kernels)."""
        return self.prelude + self.math_prelude()

    def uses_math(self, name: str) -> bool:
        # The double-based helpers need fp64; without it the dialect's builtins compute them.
        return self.fp64 or name not in math_lib.NEEDS_FP64

    def int_conversions(self) -> str:
        """The saturating float-to-integer helpers, for the dialect's prelude (after the integer
        type names; from double only where the device has it)."""
        sources = ("float", "double") if self.fp64 else ("float",)
        return float_to_int_helpers(self.helper_qualifier, sources)

    # Conversions of bfloat16 and fp8 (E5M2) to and from float, in the dialect's builtins:
    # {bits}(f) float -> uint bits, {flt}(u) uint bits -> float, and the math functions.
    SMALL_FLOATS: ClassVar[str] = """
{q} float aj_bf16_to_f32(unsigned short b) {{ return {flt}(((unsigned int)b) << 16); }}
{q} unsigned short aj_f32_to_bf16(float f) {{
  unsigned int u = {bits}(f);
  if (f != f) return (unsigned short)((u >> 16) | 0x40);
  return (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}}
{q} float aj_fp8_to_f32(unsigned char b) {{
  int e = (b >> 2) & 31, m = b & 3;
  float v = e == 0 ? {ldexp}((float)m, -16)
          : (e == 31 ? (m ? NAN : INFINITY) : {ldexp}(1.0f + m * 0.25f, e - 15));
  return (b & 0x80) ? -v : v;
}}
{q} unsigned char aj_f32_to_fp8(float f) {{
  if (f != f) return 0x7E;
  unsigned char sign = signbit(f) ? 0x80 : 0;
  float m = {fabs}(f);
  if (m == 0) return sign;
  int e; {frexp}(m, &e); e -= 1; if (e < -14) e = -14;
  float q = {ldexp}(1.0f, e - 2);
  float r = {rint}(m / q) * q;
  if (r >= 65536.0f) return sign | 0x7C;
  if (r == 0) return sign;
  int e2; {frexp}(r, &e2); e2 -= 1;
  if (e2 < -14) return sign | (unsigned char)(r * 65536.0f);
  unsigned int mant = (unsigned int)((r / {ldexp}(1.0f, e2) - 1.0f) * 4.0f);
  return sign | (unsigned char)(((e2 + 15) << 2) | mant);
}}
"""

    # ---- one routine's state ----

    def reset(self) -> None:
        """Start a routine: forget the names (numbered per routine, so identical routines
        render identical source) and declarations of the previous one."""
        self._reset()

    def declare_uninitialized(self, sc: L.ScopeId) -> str:
        """The declaration of local ``sc`` without a value (its value is stored before any
        read, by code the caller renders); marks it declared."""
        name = self.local(sc)
        self._declared.add(sc)
        return f"{self.compute_type(sc.tn.prec)} {name};"

    # ---- what every kernel shape writes ----

    def decode(self, nest: list[L.For_loop], out: Out, gid: str, indent: int = 1) -> None:
        """Each loop's index from the flat work-item index ``gid`` (mixed radix, innermost
        fastest). In unsigned arithmetic of 32 bits where the nest fits: a division by a
        constant is then a multiply and a shift (by a power of two, a shift), where a signed
        64-bit one is a long instruction sequence on a GPU (a 2^24 sum's 14 blocked-sum levels
        took 3x the memory time).

        A nest with an empty loop has no work item to decode (every caller bounds ``gid`` by
        the nest's size, 0): its indices are declared as their loops' starts, since a remainder
        by the zero extent, though never run, is undefined and compilers warn about it (PoCL
        printed "2 warnings generated." for a node of shape ``(3, 0)``)."""
        it = self.index_type
        for lp in nest:  # names in nest order: i0 is the outermost loop
            self.sym(lp.index)
        if any(lp.to_inclusive < lp.from_ for lp in nest):
            for lp in nest:
                out.add(indent, f"const {it} {self.sym(lp.index)} = {lp.from_};  /* empty nest */")
            return
        total = math.prod(lp.to_inclusive - lp.from_ + 1 for lp in nest)
        ut = "uint32_t" if total <= 0xFFFFFFFF else "uint64_t"
        out.add(indent, f"{ut} aj_r = (({ut}){gid});")
        for k, lp in enumerate(reversed(nest)):
            extent = lp.to_inclusive - lp.from_ + 1
            v = self.sym(lp.index)
            if k == len(nest) - 1:
                out.add(indent, f"const {it} {v} = {lp.from_} + ({it})aj_r;")
            else:
                out.add(
                    indent,
                    f"const {it} {v} = {lp.from_} + ({it})(aj_r % {extent}u); aj_r /= {extent}u;",
                )

    def register_reduction(self, red: ScalarReduction, out: Out, indent: int) -> None:
        """A work item's serial reduction into its own cell, the cell held in a register (no
        reassociation: the same steps as the serial code)."""
        self.reduction(red, out, indent)

    def local_tree(
        self, out: Out, lanes: int, combine: Callable[[str, str], str], indent: int = 1
    ) -> None:
        """Combine the work group's ``aj_acc`` values (``lanes`` of them, a power of two) as a
        tree in the local array ``aj_sh``: afterwards ``aj_sh[0]`` holds the group's result."""
        out.add(indent, "aj_sh[aj_lid] = aj_acc;")
        out.add(indent, self.barrier)
        out.add(indent, f"for (int aj_s = {lanes // 2}; aj_s > 0; aj_s >>= 1) {{")
        pair = combine("aj_sh[aj_lid]", "aj_sh[aj_lid + aj_s]")
        out.add(indent + 1, f"if (aj_lid < aj_s) aj_sh[aj_lid] = {pair};")
        out.add(indent + 1, self.barrier)
        out.add(indent, "}")

    def stored_const(self, prec: Prec, v: float) -> str:
        """The constant ``v`` as a cell of ``prec`` holds it once stored, in the compute type: a
        folded fill stands for the cell's value, which a half, bfloat16 or fp8 cell holds
        rounded (``1000.3`` is ``1000.5`` in a half cell)."""
        ct = self.compute_type(prec)
        c = self.const(v, ct)
        if not L.rounds_when_stored(prec):
            return c
        return f"(({ct}){self.load(prec, self.store(prec, c))})"


__all__ = ["GpuSyntax"]
