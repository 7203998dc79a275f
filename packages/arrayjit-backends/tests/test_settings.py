"""ARRAYJIT_LOG_LEVEL: parsing, the per-package loggers it sets, fresh_backend and the
``arrayjit`` command applying it."""

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from arrayjit_backends import UsageError, fresh_backend, settings


@pytest.fixture
def restore_levels() -> Iterator[None]:
    saved = {n: logging.getLogger(n).level for n in settings.PACKAGE_LOGGERS}
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)


def test_log_level_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARRAYJIT_LOG_LEVEL", raising=False)
    assert settings.log_level() is None
    assert settings.log_level("debug") == logging.DEBUG
    assert settings.log_level(" Warning ") == logging.WARNING
    assert settings.log_level("15") == 15
    assert settings.log_level(logging.ERROR) == logging.ERROR
    monkeypatch.setenv("ARRAYJIT_LOG_LEVEL", "info")
    assert settings.log_level() == logging.INFO
    with pytest.raises(
        UsageError,
        match=r"ARRAYJIT_LOG_LEVEL: unknown level 'LOUD'; valid: DEBUG, INFO, WARNING, ERROR, "
        r"CRITICAL or a non-negative number",
    ):
        settings.log_level("LOUD")
    with pytest.raises(UsageError, match=r"unknown level '-1'"):
        settings.log_level("-1")


def test_configure_logging_sets_every_package_logger(
    monkeypatch: pytest.MonkeyPatch, restore_levels: None
) -> None:
    monkeypatch.delenv("ARRAYJIT_LOG_LEVEL", raising=False)
    for name in settings.PACKAGE_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET)
    assert settings.configure_logging() is None  # unset: nothing changes
    assert all(logging.getLogger(n).level == logging.NOTSET for n in settings.PACKAGE_LOGGERS)
    assert settings.configure_logging("error") == logging.ERROR
    assert all(logging.getLogger(n).level == logging.ERROR for n in settings.PACKAGE_LOGGERS)
    # Module loggers are children of the package loggers.
    assert logging.getLogger("arrayjit_ir.optimize").getEffectiveLevel() == logging.ERROR
    assert not logging.getLogger("arrayjit_tnode").handlers  # the library installs none


def test_fresh_backend_applies_the_level(
    monkeypatch: pytest.MonkeyPatch, restore_levels: None, caplog: pytest.LogCaptureFixture
) -> None:
    from arrayjit_ir import ir
    from arrayjit_tnode import Tnode

    monkeypatch.setenv("ARRAYJIT_LOG_LEVEL", "DEBUG")
    be = fresh_backend("sync_interp")
    try:
        assert logging.getLogger("arrayjit_ir").level == logging.DEBUG
        x = Tnode.create((3,), label="xin", hosted=True)
        t = Tnode.create((3,), label="mid")
        y = Tnode.create((3,), label="yout", hosted=True)
        be.compile(ir.block(ir.unop(t, "exp", x), ir.unop(y, "neg", t)), name="logged")
    finally:
        be.finalize()
    msgs = [r.getMessage() for r in caplog.records if r.name == "arrayjit_ir.optimize"]
    assert (
        f"routine logged: node {t.debug_label} is Virtual/29: virtual: inlined at its 1 read(s)"
        in msgs
    )


def test_bad_level_in_the_environment_warns(
    monkeypatch: pytest.MonkeyPatch, restore_levels: None
) -> None:
    logging.getLogger("arrayjit_ir").setLevel(logging.WARNING)
    monkeypatch.setenv("ARRAYJIT_LOG_LEVEL", "verbose")
    with pytest.warns(
        UserWarning, match=r"unknown level 'verbose'.*; logging levels left unchanged"
    ):
        be = fresh_backend("sync_interp")
    be.finalize()
    assert logging.getLogger("arrayjit_ir").level == logging.WARNING


def test_the_command_prints_debug_records(tmp_path: Path) -> None:
    program = tmp_path / "prog.py"
    program.write_text(
        "from arrayjit_ir import ir\n"
        "from arrayjit_tnode import Tnode\n"
        "x = Tnode.create((3,), label='xin', hosted=True)\n"
        "y = Tnode.create((3,), label='yout', hosted=True)\n"
        "comp = ir.unop(y, 'relu', x)\n"
    )
    env = {**os.environ, "ARRAYJIT_LOG_LEVEL": "DEBUG"}
    done = subprocess.run(
        [sys.executable, "-m", "arrayjit_backends.cli.main", "show", str(program)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "DEBUG arrayjit_ir.optimize: routine" in done.stderr
    assert "yout#" in done.stderr and "output: written, never read here" in done.stderr
    quiet = subprocess.run(
        [sys.executable, "-m", "arrayjit_backends.cli.main", "show", str(program)],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "ARRAYJIT_LOG_LEVEL"},
        check=False,
    )
    assert quiet.returncode == 0 and "DEBUG" not in quiet.stderr


# ---- ARRAYJIT_NUM_THREADS ----


def test_num_threads_values(monkeypatch: pytest.MonkeyPatch) -> None:
    cores = settings.available_cores()
    monkeypatch.delenv("ARRAYJIT_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert settings.num_threads() == cores
    monkeypatch.setenv("ARRAYJIT_NUM_THREADS", "1")
    assert settings.num_threads() == 1
    monkeypatch.setenv("ARRAYJIT_NUM_THREADS", str(cores + 100))
    assert settings.num_threads() == cores  # never more threads than cores
    for bad in ("0", "-2", "two", "1.5"):
        monkeypatch.setenv("ARRAYJIT_NUM_THREADS", bad)
        with pytest.raises(UsageError, match=f"ARRAYJIT_NUM_THREADS: '{bad}' is not a positive"):
            settings.num_threads()
    assert "ARRAYJIT_NUM_THREADS" in settings.SETTINGS  # no unknown-setting warning


def test_omp_num_threads_caps_when_ours_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """A launcher's one-thread-per-rank setting (``OMP_NUM_THREADS=1``) is honoured; ours wins
    where both are set; values OpenMP itself would reject are ignored, as the runtime does."""
    cores = settings.available_cores()
    monkeypatch.delenv("ARRAYJIT_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert settings.num_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "1,4")  # nested levels: the outermost counts
    assert settings.num_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", str(cores + 7))
    assert settings.num_threads() == cores
    for ignored in ("", "0", "many", "-1"):
        monkeypatch.setenv("OMP_NUM_THREADS", ignored)
        assert settings.num_threads() == cores
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("ARRAYJIT_NUM_THREADS", str(cores))
    assert settings.num_threads() == cores
    with monkeypatch.context() as m:
        m.setenv("ARRAYJIT_NUM_THREADS", "1")
        m.setenv("OMP_NUM_THREADS", "2")
        assert settings.num_threads() == 1


def test_bad_num_threads_fails_fresh_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARRAYJIT_NUM_THREADS", "zero")
    with pytest.raises(UsageError, match="ARRAYJIT_NUM_THREADS: 'zero' is not a positive integer"):
        fresh_backend("multicore_interp")


def test_flag_values_and_unknown_ones_warn_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    for yes in ("1", "TRUE", " yes ", "On"):
        monkeypatch.setenv("ARRAYJIT_NO_CACHE", yes)
        assert settings.flag("ARRAYJIT_NO_CACHE")
    for no in ("", "0", "false", "OFF", "no"):
        monkeypatch.setenv("ARRAYJIT_NO_CACHE", no)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert not settings.flag("ARRAYJIT_NO_CACHE")
    # "y" or "maybe" kept the cache on without a word
    monkeypatch.setenv("ARRAYJIT_NO_CACHE", "maybe")
    with pytest.warns(
        UserWarning, match=r"ARRAYJIT_NO_CACHE='maybe' is neither yes .* taken as no"
    ):
        assert not settings.flag("ARRAYJIT_NO_CACHE")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per value
        assert not settings.flag("ARRAYJIT_NO_CACHE")


def test_threads_chosen_follows_what_num_threads_honours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARRAYJIT_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert not settings.threads_chosen()
    for ignored in ("", "0", "many", "-1"):  # num_threads ignores these too
        monkeypatch.setenv("OMP_NUM_THREADS", ignored)
        assert not settings.threads_chosen()
    monkeypatch.setenv("OMP_NUM_THREADS", "1,4")
    assert settings.threads_chosen()
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setenv("ARRAYJIT_NUM_THREADS", "2")
    assert settings.threads_chosen()
