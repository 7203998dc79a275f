"""The user-facing interface: both backend kinds honour it, and mypy catches a misspelt call."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from arrayjit_backends import Backend, BackendInterface, MissingBackend
from arrayjit_tnode import BackendMissingError

mypy_api = pytest.importorskip("mypy.api", reason="mypy is installed in the unit and type envs")

ROOT = Path(__file__).resolve().parents[3]


def test_every_interface_method_exists_on_both_kinds() -> None:
    names = [n for n in vars(BackendInterface) if not n.startswith("_")]
    assert {"compile", "link", "to_host", "device_to_device", "capabilities"} <= set(names)
    for n in names:
        assert hasattr(Backend, n), n
        assert hasattr(MissingBackend, n), n


def _public_methods(cls: type) -> set[str]:
    """The public methods and properties ``cls`` defines."""
    return {
        n
        for n, v in vars(cls).items()
        if not n.startswith("_") and (callable(v) or isinstance(v, property))
    }


def test_every_public_backend_method_is_in_the_interface_and_refused_when_missing() -> None:
    """A method added to ``Backend`` must be added to ``BackendInterface`` (so mypy makes
    ``MissingBackend`` have it), and a missing backend refuses every call with the reason and
    the hint (``schedule_task`` and ``check_live`` were forgotten once: ``AttributeError``)."""
    interface = {n for n in vars(BackendInterface) if not n.startswith("_")}
    interface |= set(BackendInterface.__annotations__)
    public = _public_methods(Backend)
    assert {"schedule_task", "check_live", "compile", "capabilities"} <= public
    assert public - interface == set(), "public Backend methods missing from BackendInterface"
    missing = MissingBackend("nope", "no nope driver here", "pip install nope")
    answers = {"num_devices": 0, "is_initialized": False, "finalize": None}
    for n in sorted(interface - {"name"}):
        if n in answers:
            assert getattr(missing, n)() == answers[n], n
            continue
        member = inspect.getattr_static(Backend, n)
        with pytest.raises(
            BackendMissingError,
            match=r"^backend 'nope' is missing: no nope driver here "
            r"\(to install: pip install nope\)$",
        ):
            if isinstance(member, property):
                getattr(missing, n)
            else:
                required = [
                    p
                    for p in inspect.signature(member).parameters.values()
                    if p.name != "self"
                    and p.default is p.empty
                    and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                ]
                getattr(missing, n)(*[None] * len(required))
    assert missing.name == "nope"
    assert repr(missing) == "<MissingBackend nope: no nope driver here>"


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
