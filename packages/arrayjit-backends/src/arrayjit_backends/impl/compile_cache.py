"""The on-disk compile cache shared by every backend.

Entries are keyed by a hash of everything that decides the artifact: the source, the backend and
renderer, the compiler's identity and version, options and flags, the device or architecture
(for native CPU code: the CPU model and its feature flags), and the cache-format version.

An entry can never hand back the wrong artifact or stop compilation:

- Writes are atomic (a temporary file, then ``os.replace``).
- Each entry holds its own key and a SHA-256 of key and payload: a truncated, corrupted or
  swapped entry (another key's file moved in its place) is detected, removed with a warning and
  rebuilt. A directory in place of an entry is removed the same way.
- A cache folder that cannot be used (read-only, a path through a file, an unreadable home) is
  not an error: the backend compiles without the cache and warns once per folder.
- ``ARRAYJIT_CACHE_DIR`` moves the cache (default: the platform's user cache folder from
  ``platformdirs``, which honours ``XDG_CACHE_HOME``, plus ``arrayjit``); ``ARRAYJIT_NO_CACHE=1``
  disables it: nothing is read or written there.

Loading a verified artifact (a shared object, a program binary) is the backend's job; a backend
whose loader rejects an artifact that came from the cache calls :meth:`CompileCache.discard` and
rebuilds it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import platformdirs

from arrayjit_backends import settings

logger = logging.getLogger(__name__)

CACHE_FORMAT = 2
_MAGIC = b"AJC2"
_KEY = 64  # hex SHA-256
_DIGEST = 32
_HEADER = len(_MAGIC) + _KEY + _DIGEST

T = TypeVar("T")

_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(directory: Path, problem: str) -> None:
    with _warned_lock:
        if str(directory) in _warned:
            return
        _warned.add(str(directory))
    logger.warning(
        "compile cache %s cannot be used (%s); compiling without the cache", directory, problem
    )


def default_directory() -> Path:
    """``ARRAYJIT_CACHE_DIR``, else the platform's user cache folder (``XDG_CACHE_HOME`` on
    Linux) plus ``arrayjit``."""
    env_dir = settings.get("ARRAYJIT_CACHE_DIR").strip()
    if env_dir:
        return Path(env_dir).expanduser()
    return Path(platformdirs.user_cache_dir("arrayjit", appauthor=False))


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


def _is_entry(path: Path) -> bool:
    """Whether ``path`` is a file laid out as a cache entry (its name a key, its first bytes
    the entry header)."""
    if len(path.name) != _KEY or not all(c in "0123456789abcdef" for c in path.name):
        return False
    try:
        with open(path, "rb") as f:
            return f.read(len(_MAGIC)) == _MAGIC
    except OSError:
        return False


def _digest(key: str, data: bytes) -> bytes:
    return hashlib.sha256(key.encode() + b"\0" + data).digest()


class CompileCache:
    """A directory of compiled artifacts (bytes) addressed by :func:`cache_key`."""

    def __init__(
        self, directory: str | os.PathLike[str] | None = None, enabled: bool | None = None
    ) -> None:
        self.directory = Path(directory) if directory is not None else default_directory()
        if enabled is None:
            enabled = not settings.flag("ARRAYJIT_NO_CACHE")
        self.enabled = enabled
        self.hits = 0
        self.builds = 0
        self.rebuilt = 0
        """Entries found bad (corrupt, swapped, unloadable) and rebuilt."""

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / key

    def unusable_reason(self) -> str | None:
        """Why the directory cannot hold entries (a path through a file, no write permission),
        or None; looked up without creating anything."""
        path = self.directory
        while not path.exists() and path != path.parent:
            path = path.parent
        if not path.is_dir():
            return f"{path} is not a folder"
        if not os.access(path, os.W_OK | os.X_OK):
            return f"{path} is not writable"
        return None

    def _unusable(self, exc: OSError) -> None:
        self.enabled = False
        _warn_once(self.directory, f"{type(exc).__name__}: {exc}")

    def discard(self, key: str, reason: str) -> None:
        """Remove a bad entry (with a warning naming it and why); never raises."""
        path = self._path(key)
        logger.warning("compile cache entry %s is bad (%s); rebuilding it", path, reason)
        self.rebuilt += 1
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        except OSError as exc:
            self._unusable(exc)

    def get(self, key: str) -> bytes | None:
        """The verified artifact, or ``None`` when absent, disabled or bad (a bad entry is
        removed with a warning). Never raises for the state of the cache folder."""
        if not self.enabled:
            return None
        path = self._path(key)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            self.discard(key, "a directory stands in its place")
            return None
        except OSError as exc:
            self._unusable(exc)
            return None
        payload = blob[_HEADER:]
        stored_key = blob[len(_MAGIC) : len(_MAGIC) + _KEY]
        digest = blob[len(_MAGIC) + _KEY : _HEADER]
        if not blob.startswith(_MAGIC) or len(blob) < _HEADER:
            self.discard(key, "truncated or not a cache entry")
            return None
        if stored_key != key.encode():
            self.discard(key, "it holds another artifact's entry")
            return None
        if _digest(key, payload) != digest:
            self.discard(key, "checksum mismatch")
            return None
        return payload

    def put(self, key: str, data: bytes) -> None:
        """Store an artifact atomically (readers see the old entry or the new one, whole). A
        folder that cannot be written disables the cache with one warning; never raises
        ``OSError``."""
        if not self.enabled:
            return
        path = self._path(key)
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        except OSError as exc:
            self._unusable(exc)
            return
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + key.encode() + _digest(key, data) + data)
            os.replace(tmp, path)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            self._unusable(exc)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def entries(self) -> list[Path]:
        """The files of every cache entry: named by a key (64 hex digits) in the folder of its
        first two, and starting with the entry header (partial writes and any other file
        excluded); empty when the directory does not exist."""
        if not self.directory.is_dir():
            return []
        return [
            f
            for sub in self.directory.iterdir()
            if sub.is_dir() and len(sub.name) == 2
            for f in sub.iterdir()
            if f.name.startswith(sub.name) and _is_entry(f)
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

    def load_or_build(
        self, key: str, build: Callable[[], bytes], load: Callable[[bytes, bool], T]
    ) -> T:
        """``load(artifact, from_cache)`` of the cached artifact, or of a fresh build when it is
        absent or when ``load`` rejects the cached one (an ``OSError`` or ``ValueError``: the
        entry is discarded with a warning and rebuilt).

        Raises:
            whatever ``build`` raises (``CompileError``), and ``load``'s errors for a fresh
            build.
        """
        data = self.get(key)
        if data is not None:
            try:
                loaded = load(data, True)
            except (OSError, ValueError) as exc:
                self.discard(key, f"it does not load: {exc}")
            else:
                self.hits += 1
                return loaded
        data = build()
        self.builds += 1
        loaded = load(data, False)
        self.put(key, data)
        return loaded
