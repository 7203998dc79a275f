"""``ARRAYJIT_DEBUG_DIR``: each compiled routine's optimized IR and generated source, written
for reading.

A diagnostic setting must not stop the program: a folder that cannot be written is one warning
(per folder), and compiling goes on.
"""

from __future__ import annotations

import re
import warnings

from arrayjit_backends import settings
from arrayjit_backends.impl.cpu_compiler import shortened
from arrayjit_ir import pretty
from arrayjit_ir.optimized import Optimized

_unwritable: set[str] = set()
"""Folders already warned about."""


def write_debug(backend: str, name: str, optimized: Optimized, source: str | None) -> None:
    """Write ``<backend>-<name>.ir.txt`` (and ``.src.txt`` when there is a source) into
    ``ARRAYJIT_DEBUG_DIR``, when it is set. The routine's name is free text: only a plain file
    name reaches the folder, the suffix appended (``Path.with_suffix`` would cut a name at its
    last dot, so that ``step.fwd`` and ``step.bwd`` overwrote each other)."""
    directory = settings.debug_dir()
    if directory is None:
        return
    # File names end at 255 bytes: a long one is cut, keeping long names distinct.
    stem = shortened(re.sub(r"[^A-Za-z0-9_.-]", "_", f"{backend}-{name}"), 200, name)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{stem}.ir.txt").write_text(pretty(optimized.code) + "\n")
        if source is not None:
            (directory / f"{stem}.src.txt").write_text(source)
    except OSError as exc:
        if str(directory) not in _unwritable:
            _unwritable.add(str(directory))
            warnings.warn(
                f"ARRAYJIT_DEBUG_DIR={directory} cannot be written ({exc}); compiled routines "
                f"are not written there (backend {backend})",
                UserWarning,
                stacklevel=4,
            )


__all__ = ["write_debug"]
