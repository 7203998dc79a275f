"""The on-disk compile cache shared by every backend.

Entries are keyed by a hash of everything that decides the artifact: the source, the backend and
renderer, the compiler's identity and version, options and flags, the device or architecture,
and the cache-format version. Writes are atomic (a temporary file, then ``os.replace``), and each
entry carries a checksum of its payload: a corrupt or truncated entry is rebuilt, never trusted.
``ARRAYJIT_CACHE_DIR`` moves the cache (default ``~/.cache/arrayjit``); ``ARRAYJIT_NO_CACHE=1``
disables it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from arrayjit_backends import settings

logger = logging.getLogger(__name__)

CACHE_FORMAT = 1
_MAGIC = b"AJC1"
_DIGEST = 32


def cache_key(
    *,
    source: str | bytes,
    backend: str,
    renderer: str,
    compiler: str,
    compiler_version: str,
    options: Mapping[str, object] | tuple[str, ...] = (),
    device: str = "",
) -> str:
    """The key of an artifact: a SHA-256 over every input that decides it."""
    h = hashlib.sha256()
    opts = sorted(options.items()) if isinstance(options, Mapping) else list(options)
    for part in (
        f"format={CACHE_FORMAT}",
        backend,
        renderer,
        compiler,
        compiler_version,
        repr(opts),
        device,
    ):
        h.update(part.encode())
        h.update(b"\0")
    h.update(source.encode() if isinstance(source, str) else source)
    return h.hexdigest()


class CompileCache:
    """A directory of compiled artifacts (bytes) addressed by :func:`cache_key`."""

    def __init__(
        self, directory: str | os.PathLike[str] | None = None, enabled: bool | None = None
    ) -> None:
        env_dir = os.environ.get("ARRAYJIT_CACHE_DIR")
        default = Path.home() / ".cache" / "arrayjit"
        self.directory = Path(directory or env_dir or default)
        if enabled is None:
            enabled = not settings.flag("ARRAYJIT_NO_CACHE")
        self.enabled = enabled
        self.hits = 0
        self.builds = 0

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / key

    def get(self, key: str) -> bytes | None:
        """The cached artifact, or ``None`` when absent, disabled or corrupt (a corrupt entry
        is removed)."""
        if not self.enabled:
            return None
        path = self._path(key)
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        payload = blob[len(_MAGIC) + _DIGEST :]
        digest = blob[len(_MAGIC) : len(_MAGIC) + _DIGEST]
        if not blob.startswith(_MAGIC) or hashlib.sha256(payload).digest() != digest:
            logger.warning("compile cache entry %s is corrupt; rebuilding it", path)
            path.unlink(missing_ok=True)
            return None
        return payload

    def put(self, key: str, data: bytes) -> None:
        """Store an artifact atomically (readers see the old entry or the new one, whole)."""
        if not self.enabled:
            return
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + hashlib.sha256(data).digest() + data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def entries(self) -> list[Path]:
        """The files of every cache entry (partial writes excluded); empty when the directory
        does not exist."""
        if not self.directory.is_dir():
            return []
        return [
            f
            for sub in self.directory.iterdir()
            if sub.is_dir() and len(sub.name) == 2
            for f in sub.iterdir()
            if f.is_file() and f.name.startswith(sub.name) and not f.name.startswith(".tmp-")
        ]

    def clear(self) -> int:
        """Remove every entry (and empty entry folders); returns how many entries were removed.
        Only files with the cache's own layout are removed, so a mistaken ``ARRAYJIT_CACHE_DIR``
        pointing at other data loses nothing else."""
        removed = 0
        for f in self.entries():
            f.unlink(missing_ok=True)
            removed += 1
            with contextlib.suppress(OSError):  # not empty yet
                f.parent.rmdir()
        return removed

    def get_or_build(self, key: str, build: Callable[[], bytes]) -> bytes:
        """The cached artifact, building and storing it first when it is not cached."""
        data = self.get(key)
        if data is not None:
            self.hits += 1
            return data
        data = build()
        self.builds += 1
        self.put(key, data)
        return data
