"""Small seed helpers: the default precision, the memory-mode text and log, the header
printers (``print_accessible_headers``, ``log_accessible_headers``)."""

import logging

import pytest

from arrayjit_tnode import Tnode
from arrayjit_tnode import memory_mode as mm
from arrayjit_tnode import precision as P
from arrayjit_tnode.tnode import DEFAULT_PREC


def test_initial_default_prec() -> None:
    assert DEFAULT_PREC is P.single
    tn = Tnode.create((1,))
    assert tn.prec_state == "default" and tn.prec is DEFAULT_PREC


def test_debug_memory_mode_and_log_debug_info(caplog: pytest.LogCaptureFixture) -> None:
    tn = Tnode.create((2,), label="d")
    assert tn.debug_memory_mode == "undecided"
    tn.update_memory_mode(mm.Virtual(), 29)
    assert tn.debug_memory_mode == "Virtual/29"
    tn.log_debug_info()  # the logger is off for DEBUG by default: nothing
    assert not caplog.records
    with caplog.at_level(logging.DEBUG, logger="arrayjit_tnode"):
        tn.log_debug_info()
    (rec,) = caplog.records
    assert rec.name == "arrayjit_tnode.tnode" and rec.levelno == logging.DEBUG
    assert rec.getMessage() == (
        f"{tn.header()}; sharing Unset; devices not lagging host []; backend info {{}}"
    )


def test_accessible_headers(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    from arrayjit_tnode.tnode import log_accessible_headers, print_accessible_headers

    a = Tnode.create((2,), label="hdr_a", hosted=True)
    b = Tnode.create((3,), label="hdr_b")
    print_accessible_headers(lambda tn: tn.label[:1] == ["hdr_a"] or tn.label[:1] == ["hdr_b"])
    assert capsys.readouterr().out.splitlines() == [a.header(), b.header()]
    print_accessible_headers(lambda tn: tn.is_hosted() and tn.label[:1] == ["hdr_a"])
    assert capsys.readouterr().out == a.header() + "\n"
    with caplog.at_level(logging.DEBUG, logger="arrayjit_tnode"):
        log_accessible_headers(lambda tn: tn.label[:1] == ["hdr_b"])
    assert [r.getMessage() for r in caplog.records] == [b.header()]
