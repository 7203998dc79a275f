"""No module uses a private (underscore) name of another package.

A leading underscore says "this package may change it without notice"; a sibling package that
imports such a name breaks silently when it does. The check reads the sources (``ast``, nothing
is imported) of every package under ``packages/*/src`` and of ``conformance/src``, and flags
``from other_pkg... import _name``, ``import other_pkg._mod``, and ``X._name`` where ``X`` is a
name bound by an import from another package (a module or anything in it). Names within one
package are its own business; dunder names are public. Only this repository's packages count: a
third-party package's private API, where one is used, is a choice its user's comment explains.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SOURCE_DIRS = [*sorted(ROOT.glob("packages/*/src")), ROOT / "conformance" / "src"]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _dotted(e: ast.expr) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None when the chain does not start at a name."""
    parts: list[str] = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    if not isinstance(e, ast.Name):
        return None
    parts.append(e.id)
    return parts[::-1]


def private_uses(source: str, own: str, packages: set[str]) -> list[str]:
    """The private names of ``packages`` other than ``own`` that ``source`` uses, as
    ``"line: text"`` entries."""
    tree = ast.parse(source)
    found: list[str] = []
    foreign: dict[str, str] = {}  # local name -> what it is bound to, in another package
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] not in packages - {own}:
                continue
            if any(_private(p) for p in node.module.split(".")):
                found.append(f"{node.lineno}: from {node.module} import ...")
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
                foreign[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] not in packages - {own}:
                    continue
                if any(_private(p) for p in parts):
                    found.append(f"{node.lineno}: import {alias.name}")
                if alias.asname:
                    foreign[alias.asname] = alias.name
                else:
                    foreign[parts[0]] = parts[0]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain = _dotted(node)
        if chain is None or chain[0] not in foreign:
            continue
        # Each attribute node of a chain is visited: report only at the private component.
        if _private(chain[-1]):
            found.append(f"{node.lineno}: {foreign[chain[0]]}.{'.'.join(chain[1:])}")
    return sorted(set(found), key=lambda s: int(s.split(":")[0]))


def _modules() -> list[tuple[str, Path]]:
    """``(top-level package, file)`` for every module of the tree."""
    out = []
    for src in SOURCE_DIRS:
        for top in sorted(p for p in src.iterdir() if p.is_dir() and p.name.isidentifier()):
            out.extend((top.name, f) for f in sorted(top.rglob("*.py")))
    return out


def test_the_check_sees_private_uses() -> None:
    src = (
        "from arrayjit_ir.interpret import _to_vec, natural_prec\n"
        "from arrayjit_ir import optimize as O\n"
        "import arrayjit_ir.summation\n"
        "from arrayjit_backends._impl import x\n"
        "from mine import _ok\n"
        "import numpy as np\n"
        "y = O._exprs_of(1) + O.optimize(2) + O.__name__ + np._private\n"
        "z = arrayjit_ir.summation._blocks\n"
    )
    assert private_uses(src, "mine", {"mine", "arrayjit_ir", "arrayjit_backends"}) == [
        "1: from arrayjit_ir.interpret import _to_vec",
        "4: from arrayjit_backends._impl import ...",
        "7: arrayjit_ir.optimize._exprs_of",
        "8: arrayjit_ir.summation._blocks",
    ]


@pytest.mark.skipif(not (ROOT / "packages").is_dir(), reason="needs the source tree")
def test_no_module_uses_a_private_name_of_another_package() -> None:
    modules = _modules()
    assert len(modules) > 20  # the tree was found
    packages = {own for own, _ in modules}
    problems = [
        f"{path.relative_to(ROOT)}:{use}"
        for own, path in modules
        for use in private_uses(path.read_text(encoding="utf-8"), own, packages)
    ]
    assert problems == []
