"""The on-disk compile cache."""

from pathlib import Path

import pytest

from arrayjit_backends.impl.compile_cache import CompileCache, cache_key

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


def _key(n: int) -> str:
    return cache_key(**{**BASE, "source": f"int f(void){{return {n};}}"})  # type: ignore[arg-type]


def test_swapped_entry_is_detected(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = CompileCache(tmp_path, enabled=True)
    a, b = _key(1), _key(2)
    cache.put(a, b"artifact A")
    cache.put(b, b"artifact B")
    pa, pb = cache._path(a), cache._path(b)
    blob_a = pa.read_bytes()
    pa.write_bytes(pb.read_bytes())  # entry A now holds B's valid entry
    pb.write_bytes(blob_a)
    with caplog.at_level("WARNING"):
        assert cache.get(a) is None and cache.get(b) is None
    assert sum("holds another artifact's entry" in r.getMessage() for r in caplog.records) == 2
    assert cache.rebuilt == 2


def test_directory_in_place_of_an_entry(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, enabled=True)
    key = _key(3)
    (cache._path(key) / "sub").mkdir(parents=True)
    assert cache.get_or_build(key, lambda: b"built") == b"built"
    assert cache._path(key).is_file() and cache.get(key) == b"built"


def test_unusable_folder_warns_once_and_still_builds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "file").write_text("x")
    directory = tmp_path / "file" / "cache"
    with caplog.at_level("WARNING"):
        for n in range(3):
            cache = CompileCache(directory, enabled=True)
            assert cache.get_or_build(_key(n), lambda: b"built") == b"built"
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and "compiling without the cache" in messages[0]


def test_default_folder_honours_xdg_cache_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.delenv("ARRAYJIT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert CompileCache().directory == tmp_path / "xdg" / "arrayjit"
    monkeypatch.setenv("ARRAYJIT_CACHE_DIR", str(tmp_path / "mine"))
    assert CompileCache().directory == tmp_path / "mine"


def test_load_or_build_rebuilds_what_does_not_load(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, enabled=True)
    key = _key(4)
    cache.put(key, b"stale")

    def load(data: bytes, from_cache: bool) -> bytes:
        if data == b"stale":
            raise OSError("cannot load")
        return data

    assert cache.load_or_build(key, lambda: b"fresh", load) == b"fresh"
    assert cache.rebuilt == 1 and cache.get(key) == b"fresh"
