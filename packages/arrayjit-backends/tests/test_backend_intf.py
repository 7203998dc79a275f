"""The user-facing interface: both backend kinds honour it, and mypy catches a misspelt call."""

from __future__ import annotations

from pathlib import Path

import pytest

from arrayjit_backends import Backend, BackendInterface, MissingBackend

mypy_api = pytest.importorskip("mypy.api", reason="mypy is installed in the unit and type envs")

ROOT = Path(__file__).resolve().parents[3]


def test_every_interface_method_exists_on_both_kinds() -> None:
    names = [n for n in vars(BackendInterface) if not n.startswith("_")]
    assert {"compile", "link", "to_host", "device_to_device", "capabilities"} <= set(names)
    for n in names:
        assert hasattr(Backend, n), n
        assert hasattr(MissingBackend, n), n


TYPO = """
from arrayjit_backends import fresh_backend
from arrayjit_ir import ir
from arrayjit_tnode import Tnode

x = Tnode.create((4,), label="x", hosted=True)
backend = fresh_backend("sync_cc")
code = backend.compiel(ir.unop(x, "neg", x), name="typo")
"""

CORRECT = """
from arrayjit_backends import fresh_backend
from arrayjit_ir import ir
from arrayjit_tnode import Tnode

x = Tnode.create((4,), label="x", hosted=True)
backend = fresh_backend("sync_cc")
ctx = backend.make_context(backend.new_stream(backend.get_device(0)))
routine = backend.link(ctx, backend.compile(ir.unop(x, "neg", x), name="ok"))
routine()
backend.to_host(routine.context, x)
"""


def test_mypy_strict_catches_a_misspelt_method_and_only_that(tmp_path: Path) -> None:
    (tmp_path / "typo.py").write_text(TYPO)
    (tmp_path / "correct.py").write_text(CORRECT)
    args = ["--strict", "--config-file", str(ROOT / "pyproject.toml"), "--no-error-summary"]
    args += ["--cache-dir", str(tmp_path / ".mypy"), str(tmp_path / "typo.py")]
    out, err, status = mypy_api.run([*args, str(tmp_path / "correct.py")])
    # Only the user's files count: --strict also reports the library's own looser spots.
    errors = [
        line
        for line in (out + err).splitlines()
        if ": error:" in line and line.startswith(str(tmp_path))
    ]
    assert status == 1, out + err
    assert len(errors) == 1, errors
    assert "typo.py:8" in errors[0] and '"BackendInterface" has no attribute "compiel"' in errors[0]
