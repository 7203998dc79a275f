"""The benchmarks time compiled backends: the reference interpreter (``sync_interp``,
``multicore_interp``) is the suite's oracle, and at these sizes (a fused kernel over 2^24
elements, a 1024 matmul) one of its runs takes minutes to hours, so its rows are skipped."""

from __future__ import annotations

import pytest

INTERPRETER_SKIP = pytest.mark.skip(
    reason="the reference interpreter is the suite's oracle, not timed (minutes per run here)"
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        name = callspec.params.get("backend_name", "") if callspec is not None else ""
        if isinstance(name, str) and name.endswith("interp"):
            item.add_marker(INTERPRETER_SKIP)
