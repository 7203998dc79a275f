"""The `arrayjit` command."""

from pathlib import Path

import pytest

from arrayjit_backends.cli import main


def test_backends_lists_interp(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "sync_interp" in out and "available: 1 device(s)" in out


@pytest.mark.parametrize("backend", ["sync_interp", "multicore_interp"])
def test_demo_checks_against_numpy(backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--backend", backend, "--size", "256", "--steps", "3"]) == 0
    out = capsys.readouterr().out
    assert f"arrayjit demo on {backend}" in out
    assert out.count("[ok]") == 2 and "FAILED" not in out and "all checks passed" in out
    assert "numpy/ours" in out


def test_unknown_backend_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--backend", "nope"]) == 2
    assert "unknown backend 'nope'; valid names:" in capsys.readouterr().err


def test_show_prints_optimized_ir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "comp.py"
    src.write_text(
        "from arrayjit_tnode import Tnode\nfrom arrayjit_ir import ir\n"
        "a = Tnode.create((4,), label='a', hosted=True)\n"
        "t = Tnode.create((4,), label='t')\n"
        "y = Tnode.create((4,), label='y', hosted=True)\n"
        "step = ir.block(ir.unop(t, 'exp', a), ir.unop(y, 'neg', t))\n"
    )
    assert main(["show", str(src)]) == 0
    out = capsys.readouterr().out
    assert "# step" in out and "routine step():" in out and "t: Virtual" in out
    assert "y[i1] := neg(exp(a[i1]));" in out
    empty = tmp_path / "none.py"
    empty.write_text("x = 1\n")
    assert main(["show", str(empty)]) == 1
