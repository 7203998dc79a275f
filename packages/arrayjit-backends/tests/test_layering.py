"""The import graph of the whole tree: no circles, packages only import packages below them,
every import of another distribution is declared, and the rooms of the shared layer keep their
roles.

Every import counts: module-level, function-level and under ``TYPE_CHECKING`` (those are how
circles get in: a deferred import hides a circle from Python, not from a reader). The check
reads the sources with ``ast``; nothing is imported. A module that imports a name from a
package (``from arrayjit_backends.runtime import hazards``) depends on the submodule when the
name is one, else on the package's ``__init__``.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SOURCE_DIRS = [*sorted(ROOT.glob("packages/*/src")), ROOT / "conformance" / "src"]

LEVELS = {
    "arrayjit_tnode": 0,
    "arrayjit_ir": 1,
    "arrayjit_backends": 2,
    "arrayjit_backend_c": 3,
    "arrayjit_backend_opencl": 3,
    "arrayjit_backend_cuda": 3,
    "arrayjit_distributed": 4,
    "arrayjit_conformance": 4,
}
"""Each package's floor: a package imports only packages on lower floors."""

B = "arrayjit_backends"
ROOMS_MAY_NOT_IMPORT = {
    f"{B}.codegen": (f"{B}.impl", f"{B}.runtime", f"{B}.gpu", f"{B}.cli", f"{B}.backend"),
    f"{B}.impl": (f"{B}.runtime", f"{B}.gpu", f"{B}.cli", f"{B}.backend", f"{B}.registry"),
    f"{B}.runtime": (f"{B}.gpu", f"{B}.cli", f"{B}.backend", f"{B}.registry"),
    f"{B}.gpu": (f"{B}.runtime", f"{B}.cli", f"{B}.backend", f"{B}.registry"),
}
"""The role rules of the shared layer: what each room must not import (see ARCHITECTURE.md
4.6). ``codegen`` is what every renderer shares and ``impl`` what a backend author writes
against, so neither reaches the glue above them; ``gpu`` is a renderer and device recipe, not
glue."""

C = "arrayjit_backend_c"
ROOMS_MAY_NOT_IMPORT |= {
    f"{C}.cpu": (f"{C}.cc", f"{C}.llvm"),
    f"{C}.cc": (f"{C}.llvm",),
    f"{C}.llvm": (f"{C}.cc",),
}
"""The CPU backends' rooms: ``cpu/`` is the runtime both share, so it imports neither."""

GPU_ROOM = f"{B}.gpu"
GPU_USERS = ("arrayjit_backend_opencl", "arrayjit_backend_cuda")
"""Only the GPU device packages (and the room itself) import the GPU room."""

DIST_OF_IMPORT = {"ml_dtypes": "ml-dtypes", "mpi4py": "mpi4py", "llvmlite": "llvmlite"}


def module_name(src: Path, path: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules_of(src_dirs: Iterable[Path]) -> dict[str, Path]:
    """Every module of the tree, by dotted name."""
    return {
        module_name(src, path): path
        for src in src_dirs
        for top in sorted(p for p in src.iterdir() if p.is_dir() and p.name.isidentifier())
        for path in sorted(top.rglob("*.py"))
    }


def imports_of(name: str, source: str, is_package: bool) -> set[str]:
    """The dotted names ``source`` (the module ``name``) imports, wherever the import stands,
    each as written (``from a.b import c`` gives ``a.b.c``, which :func:`graph` resolves)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def graph(sources: Mapping[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """Module -> the modules of ``sources`` it imports, for ``sources`` mapping each module to
    its text and whether it is a package. Imports of anything outside ``sources`` are dropped;
    a module importing its own package's ``__init__`` from inside it counts (it is a circle)."""
    edges: dict[str, set[str]] = {}
    for name, (source, is_package) in sources.items():
        targets: set[str] = set()
        for imported in imports_of(name, source, is_package):
            while imported and imported not in sources:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        edges[name] = targets
    return edges


def circles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative), each sorted, in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def in_room(module: str, room: str) -> bool:
    return module == room or module.startswith(room + ".")


def layering_problems(edges: Mapping[str, set[str]]) -> list[str]:
    """Imports that break the floors of :data:`LEVELS` or the room rules."""
    problems = []
    for module, targets in sorted(edges.items()):
        own = module.split(".")[0]
        for target in sorted(targets):
            other = target.split(".")[0]
            if other != own and LEVELS.get(other, -1) >= LEVELS.get(own, -1):
                problems.append(f"{module} -> {target}: {other} is not below {own}")
            for room, forbidden in ROOMS_MAY_NOT_IMPORT.items():
                if in_room(module, room) and any(in_room(target, f) for f in forbidden):
                    problems.append(f"{module} -> {target}: {room} may not import it")
            if in_room(target, GPU_ROOM) and not in_room(module, GPU_ROOM) and own not in GPU_USERS:
                problems.append(f"{module} -> {target}: only the GPU packages use {GPU_ROOM}")
    return problems


def _sources() -> dict[str, tuple[str, bool]]:
    return {
        name: (path.read_text(encoding="utf-8"), path.name == "__init__.py")
        for name, path in modules_of(SOURCE_DIRS).items()
    }


def _declared(pyproject: Path) -> set[str]:
    """Distribution names a pyproject declares, required or in an extra, normalized."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    specs = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        specs.extend(extra)
    names = set()
    for spec in specs:
        name = spec.split(";")[0].split("[")[0]
        for sep in "<>=!~ ":
            name = name.split(sep)[0]
        names.add(name.strip().lower().replace("_", "-"))
    return names


def test_the_check_finds_a_synthetic_circle() -> None:
    sources = {
        "pkg": ("", True),
        "pkg.a": ("from pkg.b import f\n", False),
        "pkg.b": ("def f():\n    from pkg import c\n", False),
        "pkg.c": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n", False),
        "pkg.d": ("from . import a\nfrom .a import f\n", False),
    }
    edges = graph(sources)
    assert edges["pkg.d"] == {"pkg.a"}
    assert circles(edges) == [["pkg.a", "pkg.b", "pkg.c"]]
    del sources["pkg.c"]
    assert circles(graph(sources)) == []


def test_the_check_sees_a_package_init_circle_and_the_floors() -> None:
    edges = graph(
        {
            "arrayjit_backends": ("from arrayjit_backends.runtime.x import X\n", True),
            "arrayjit_backends.runtime": ("", True),
            "arrayjit_backends.runtime.x": ("from arrayjit_backends import Backend\n", False),
            "arrayjit_backends.codegen": ("", True),
            "arrayjit_backends.codegen.y": (
                "import arrayjit_backend_c\nfrom arrayjit_backends.runtime import x\n",
                False,
            ),
            "arrayjit_backends.gpu": ("", True),
            "arrayjit_backend_c": ("from arrayjit_backends.gpu import z\n", True),
        }
    )
    assert circles(edges) == [["arrayjit_backends", "arrayjit_backends.runtime.x"]]
    assert layering_problems(edges) == [
        "arrayjit_backend_c -> arrayjit_backends.gpu: only the GPU packages use "
        "arrayjit_backends.gpu",
        "arrayjit_backends.codegen.y -> arrayjit_backend_c: arrayjit_backend_c is not below "
        "arrayjit_backends",
        "arrayjit_backends.codegen.y -> arrayjit_backends.runtime.x: arrayjit_backends.codegen "
        "may not import it",
    ]


needs_tree = pytest.mark.skipif(not (ROOT / "packages").is_dir(), reason="needs the source tree")


@needs_tree
def test_no_import_circle_anywhere() -> None:
    edges = graph(_sources())
    assert len(edges) > 50  # the tree was found
    assert circles(edges) == []


@needs_tree
def test_packages_and_rooms_import_downward_only() -> None:
    assert layering_problems(graph(_sources())) == []


@needs_tree
def test_every_imported_distribution_is_declared() -> None:
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    problems = []
    for src in SOURCE_DIRS:
        declared = _declared(src.parent / "pyproject.toml")
        for name, path in modules_of([src]).items():
            own = name.split(".")[0]
            for imported in imports_of(name, path.read_text(), path.name == "__init__.py"):
                top = imported.split(".")[0]
                if top in stdlib or top == own or not top:
                    continue
                dist = DIST_OF_IMPORT.get(top, top.replace("_", "-")).lower()
                if dist not in declared:
                    problems.append(f"{name} imports {top}: {dist} is not declared")
    assert sorted(set(problems)) == []
