"""The stand-in for a backend whose driver library or hardware is absent."""

from __future__ import annotations

from typing import Any, NoReturn

from arrayjit_tnode import BackendMissingError


class MissingBackend:
    """Has the full Backend interface: ``num_devices()`` is 0, ``is_initialized()`` is False,
    ``name``, ``reason`` and ``install_hint`` work, and every other call raises
    :class:`BackendMissingError` with the reason and the hint."""

    def __init__(self, name: str, reason: str, install_hint: str = "") -> None:
        self.name = name
        self.reason = reason
        self.install_hint = install_hint

    def num_devices(self) -> int:
        """0: a missing backend has no devices."""
        return 0

    def is_initialized(self) -> bool:
        """False: a missing backend cannot be initialized."""
        return False

    def finalize(self) -> None:
        """Nothing to release."""

    def _fail(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise BackendMissingError(self.name, self.reason, self.install_hint)

    initialize = check_live = get_device = new_stream = make_context = make_child = _fail
    compile = compile_batch = link = link_batch = _fail
    from_host = to_host = device_to_device = use_host_memory = _fail
    sync = is_done = will_wait_for = all_work = await_stream = is_idle = _fail
    get_used_memory = get_debug_info = get_global_debug_info = suggested_num_streams = _fail
    get_name = synchronize = alloc_buffer = alloc_zero_init_array = schedule_task = _fail

    @property
    def capabilities(self) -> NoReturn:
        """Raises :class:`BackendMissingError`."""
        self._fail()

    def __repr__(self) -> str:
        return f"<MissingBackend {self.name}: {self.reason}>"
