"""The ``interp`` backend: the reference interpreter behind the full backend interface.

Slow and exact; usable everywhere (no compiler needed). It verifies the shared backend layer
independently of any compiler, and serves as the oracle the conformance suite compares with.
:class:`InterpCompiler` is a CPU compiler whose "compiled code" is the optimized routine itself;
the scheduler and the generic layer around it are the ones ``cc`` and ``llvm`` run under.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from arrayjit_backends.impl.cpu_compiler import CpuCompiler, GetMergeView, NodeViews, Run
from arrayjit_backends.registry import no_device_entry
from arrayjit_ir import interpret
from arrayjit_ir.indexing import StaticSymbol
from arrayjit_ir.optimized import Optimized


class InterpCompiler(CpuCompiler):
    """Runs optimized code with :func:`arrayjit_ir.interpret` over the context's buffers."""

    name: ClassVar[str] = "interp"

    def compile(self, optimized: Optimized) -> Optimized:
        return optimized

    def link(self, code: Any, buffers: NodeViews, merge_buffer: GetMergeView) -> Run:
        opt: Optimized = code
        bufs = dict(buffers)

        def run(bindings: Mapping[StaticSymbol, int]) -> None:
            values: dict[StaticSymbol | str, int] = {k: v for k, v in bindings.items()}
            interpret(opt, bufs, values, merge_buffer())

        return run


interp_entry = no_device_entry(
    "interp", InterpCompiler, priority=0, description="reference interpreter (slow, exact)"
)
