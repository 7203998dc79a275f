"""The on-disk compile cache."""

from pathlib import Path

import pytest

from arrayjit_backends.compile_cache import CompileCache, cache_key

BASE = dict(
    source="int f(void){return 1;}",
    backend="cc",
    renderer="c",
    compiler="gcc",
    compiler_version="12.2.0",
    options=("-O3",),
    device="x86_64",
)


def test_warm_cache_builds_nothing(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, enabled=True)
    calls: list[int] = []

    def build() -> bytes:
        calls.append(1)
        return b"artifact"

    key = cache_key(**BASE)  # type: ignore[arg-type]
    assert cache.get_or_build(key, build) == b"artifact"
    assert CompileCache(tmp_path, enabled=True).get_or_build(key, build) == b"artifact"
    assert calls == [1]
    assert not list(tmp_path.rglob(".tmp-*"))  # atomic writes leave no temporaries


@pytest.mark.parametrize(
    "field,value",
    [
        ("source", "int f(void){return 2;}"),
        ("compiler_version", "13.1.0"),
        ("options", ("-O2",)),
        ("device", "aarch64"),
        ("backend", "llvm"),
        ("renderer", "opencl"),
        ("compiler", "clang"),
    ],
)
def test_key_covers_every_input(field: str, value: object) -> None:
    assert cache_key(**{**BASE, field: value}) != cache_key(**BASE)  # type: ignore[arg-type]


def test_corrupt_entry_is_rebuilt(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, enabled=True)
    key = cache_key(**BASE)  # type: ignore[arg-type]
    cache.put(key, b"good")
    (entry,) = [p for p in tmp_path.rglob("*") if p.is_file()]
    entry.write_bytes(entry.read_bytes()[:-1] + b"X")
    assert cache.get(key) is None and not entry.exists()
    assert cache.get_or_build(key, lambda: b"rebuilt") == b"rebuilt"
    assert cache.get(key) == b"rebuilt"


def test_disabled_by_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARRAYJIT_NO_CACHE", "1")
    monkeypatch.setenv("ARRAYJIT_CACHE_DIR", str(tmp_path / "moved"))
    cache = CompileCache()
    assert not cache.enabled and cache.directory == tmp_path / "moved"
    key = cache_key(**BASE)  # type: ignore[arg-type]
    assert cache.get_or_build(key, lambda: b"x") == b"x"
    assert cache.get_or_build(key, lambda: b"y") == b"y"
    assert cache.builds == 2 and not (tmp_path / "moved").exists()
