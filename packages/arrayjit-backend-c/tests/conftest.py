"""Shared set-up of the arrayjit-backend-c tests.

A test module names the backends its ``backend`` fixture runs on in ``BACKENDS``; the fixture
gives each test a started backend with a compile cache of its own (so that cached binaries of
another test never hide a compile) and finalizes it afterwards.
"""

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arrayjit_backends import fresh_backend

# Tests import their helpers module (pytest runs with --import-mode=importlib).
sys.path.insert(0, os.path.dirname(__file__))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", metafunc.module.BACKENDS, indirect=True)


@pytest.fixture
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    monkeypatch.setenv("ARRAYJIT_CACHE_DIR", str(tmp_path))
    be = fresh_backend(request.param)
    be.initialize()
    yield be
    be.finalize()


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A compile cache folder of the test module's own (for tests that drive a CPU compiler
    directly, without a backend)."""
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("cache")
        mp.setenv("ARRAYJIT_CACHE_DIR", str(path))
        yield path
