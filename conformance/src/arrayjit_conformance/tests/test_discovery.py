"""Discovery: the backend under test is registered, listed and usable; the missing-backend
contract, checked on a stand-in registered for the test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from arrayjit_backends import (
    BackendEntry,
    BackendInterface,
    BackendMissingError,
    MissingBackend,
    UsageError,
    available_backends,
    backend_names,
    fresh_backend,
    registry,
)
from arrayjit_conformance.plugin import fresh_or_skip


def test_backend_is_registered_and_listed(backend: Any, backend_name: str) -> None:
    assert backend_name in backend_names()
    assert backend.name in backend_names()
    statuses = {s.name: s for s in available_backends()}
    base = registry.resolve_name(backend_name).name
    assert base in statuses and statuses[base].available, statuses.get(base)
    assert backend.is_initialized() and backend.num_devices() >= 1


def test_fresh_backends_are_independent(backend: Any, backend_name: str) -> None:
    other = fresh_or_skip(backend_name)
    try:
        assert other is not backend and other.name == backend.name
        assert other.get_device(0) is not backend.get_device(0)
    finally:
        other.finalize()


def test_unknown_backend_name_lists_valid_ones(backend_name: str) -> None:
    with pytest.raises(UsageError, match=r"unknown backend 'no_such_backend'; valid names: .*"):
        fresh_backend("no_such_backend")


@pytest.fixture
def missing(backend_name: str) -> Iterator[Any]:
    """A backend whose driver is absent, registered next to the one under test."""
    entry = BackendEntry(
        "ghost",
        lambda full: MissingBackend(full, "libghost.so not found", "pip install ghost"),
        probe=lambda: "libghost.so not found",
        install_hint="pip install ghost",
    )
    registry.register(entry)
    try:
        yield fresh_backend("ghost")
    finally:
        registry.unregister("ghost")


def test_missing_backend_explains_itself(missing: Any) -> None:
    assert isinstance(missing, MissingBackend)
    assert missing.name == "ghost" and missing.num_devices() == 0
    assert not missing.is_initialized()
    status = {s.name: s for s in available_backends()}["ghost"]
    assert not status.available and "libghost.so not found" in str(status.reason)


WORKING_WHEN_MISSING = {"num_devices", "is_initialized", "finalize"}
INTERFACE = sorted(
    n for n in vars(BackendInterface) if not n.startswith("_") and n not in WORKING_WHEN_MISSING
)


@pytest.mark.parametrize("call", INTERFACE)
def test_missing_backend_calls_raise_with_reason_and_hint(missing: Any, call: str) -> None:
    with pytest.raises(BackendMissingError) as info:
        attr = getattr(missing, call)
        if callable(attr):
            attr()
    text = str(info.value)
    assert "ghost" in text and "libghost.so not found" in text and "pip install ghost" in text
