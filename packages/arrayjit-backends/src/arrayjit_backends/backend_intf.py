"""What users call: the interface every backend object honours.

The three roles of the backend layer stand as files: this interface (what users call),
:mod:`~arrayjit_backends.impl.device` and :mod:`~arrayjit_backends.impl.cpu_compiler` (what a
backend author writes), and the glue that turns the second into the first
(:mod:`~arrayjit_backends.backend`, :mod:`~arrayjit_backends.runtime.values`,
:mod:`~arrayjit_backends.runtime.routine`, :mod:`~arrayjit_backends.runtime.transfers`,
:mod:`~arrayjit_backends.runtime.hazards`, :mod:`~arrayjit_backends.runtime.schedulers`).

:func:`~arrayjit_backends.fresh_backend` returns a :class:`BackendInterface`; both the real
:class:`~arrayjit_backends.backend.Backend` and the stand-in
:class:`~arrayjit_backends.missing.MissingBackend` satisfy it, which mypy proves at the bottom
of this module. A misspelt method on a backend is then a type error, not a runtime surprise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, overload

if TYPE_CHECKING:
    from arrayjit_backends.backend import Capabilities, Config
    from arrayjit_backends.impl.stream_queue import Event
    from arrayjit_backends.runtime.interop import ExternalArray
    from arrayjit_backends.runtime.routine import Routine
    from arrayjit_backends.runtime.transfers import MergeMode
    from arrayjit_backends.runtime.values import Buffer, Code, Context, Device, Stream
    from arrayjit_ir.assignments import Assignment, Comp
    from arrayjit_ir.indexing import StaticSymbol
    from arrayjit_tnode import Prec, Tnode


class BackendInterface(Protocol):
    """A backend as users see it (ARCHITECTURE.md §4.2): every public method of
    :class:`~arrayjit_backends.backend.Backend` (``tests/test_backend_intf.py`` checks that
    none is missing). Each method of :class:`~arrayjit_backends.backend.Backend` documents its
    errors; on a missing backend every call but ``num_devices``, ``is_initialized`` and
    ``finalize`` raises :class:`~arrayjit_tnode.BackendMissingError`."""

    name: str

    # ---- life cycle ----
    def initialize(self, config: Config = ...) -> None: ...
    def is_initialized(self) -> bool: ...
    def finalize(self) -> None: ...
    def check_live(self) -> None: ...
    @property
    def capabilities(self) -> Capabilities: ...

    # ---- devices, streams, contexts ----
    def num_devices(self) -> int: ...
    def get_device(self, ordinal: int = 0) -> Device: ...
    def suggested_num_streams(self, device: Device) -> int: ...
    def new_stream(self, device: Device) -> Stream: ...
    def get_name(self, stream: Stream) -> str: ...
    def make_context(
        self, stream: Stream, ctx_arrays: Mapping[Tnode, Buffer | ExternalArray] | None = ...
    ) -> Context: ...
    def make_child(
        self, ctx: Context, ctx_arrays: Mapping[Tnode, Buffer | ExternalArray] | None = ...
    ) -> Context: ...
    def alloc_buffer(
        self, size_in_bytes: int, stream: Stream, old_buffer: Buffer | None = ...
    ) -> Buffer: ...
    def alloc_zero_init_array(self, prec: Prec, dims: Sequence[int], stream: Stream) -> Buffer: ...

    # ---- compiling and linking ----
    def compile(
        self, comp: Comp | Assignment, name: str = ..., bindings: Sequence[StaticSymbol] = ...
    ) -> Code: ...
    @overload
    def compile_batch(
        self,
        comps: Sequence[Comp | Assignment],
        names: Sequence[str],
        bindings: Sequence[StaticSymbol] = ...,
    ) -> list[Code]: ...
    @overload
    def compile_batch(
        self,
        comps: Sequence[Comp | Assignment | None],
        names: Sequence[str | None],
        bindings: Sequence[StaticSymbol] = ...,
    ) -> list[Code | None]: ...
    def link(self, ctx: Context, code: Code) -> Routine: ...
    @overload
    def link_batch(self, ctx: Context, codes: Sequence[Code]) -> list[Routine]: ...
    @overload
    def link_batch(self, ctx: Context, codes: Sequence[Code | None]) -> list[Routine | None]: ...

    # ---- transfers ----
    def use_host_memory(self, tn: Tnode) -> None: ...
    def from_host(self, ctx: Context, tn: Tnode) -> bool: ...
    def to_host(self, ctx: Context, tn: Tnode) -> bool: ...
    def device_to_device(
        self, tn: Tnode, into_merge_buffer: MergeMode, dst: Context, src: Context
    ) -> bool: ...

    # ---- events and streams ----
    def all_work(self, stream: Stream) -> Event: ...
    def is_done(self, event: Event) -> bool: ...
    def sync(self, event: Event) -> None: ...
    def will_wait_for(self, ctx: Context, event: Event) -> None: ...
    def await_stream(self, stream: Stream) -> None: ...
    def is_idle(self, stream: Stream) -> bool: ...
    def synchronize(self, device: Device) -> None: ...

    # ---- tasks of other packages (arrayjit-distributed's collectives) ----
    def schedule_task(
        self,
        ctx: Context,
        task: Callable[[], None],
        *,
        reads: Sequence[Tnode] = ...,
        writes: Sequence[Tnode] = ...,
    ) -> Event: ...

    # ---- accounting and debugging ----
    def get_used_memory(self, device: Device) -> int: ...
    def get_debug_info(self, stream: Stream) -> dict[str, Any]: ...
    def get_global_debug_info(self) -> dict[str, Any]: ...


if TYPE_CHECKING:  # mypy proves both implementations honour the interface
    from arrayjit_backends.backend import Backend
    from arrayjit_backends.missing import MissingBackend

    def _backend_is_one(b: Backend) -> BackendInterface:
        return b

    def _missing_is_one(b: MissingBackend) -> BackendInterface:
        return b
