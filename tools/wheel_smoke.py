"""Build every wheel with hatch, install them by name into a fresh virtual environment (siblings
from the built wheels, everything else from the package index) and smoke-test the result:
``arrayjit --version``, ``arrayjit backends``, ``arrayjit demo`` and the conformance suite from
the installed distribution on ``sync_interp``. Run by ``tox -e wheels``.

Usage: ``python tools/wheel_smoke.py WORKDIR``. Runs outside the repository (cwd = WORKDIR), so
nothing is imported from the source tree; exits non-zero at the first failing step.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

from repo_packages import ALL_PACKAGES as PACKAGES
from repo_packages import ROOT

INSTALL = ("arrayjit-backend-c", "arrayjit-conformance")


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    """Run ``cmd``, echoing it; exit with its status when it fails."""
    print("+", " ".join(cmd), flush=True)
    done = subprocess.run(cmd, cwd=cwd, env=env, check=False)
    if done.returncode != 0:
        sys.exit(f"wheel smoke test failed (exit {done.returncode}): {' '.join(cmd)}")


def main() -> int:
    """Build, install and check; returns 0 when every step passed."""
    work = Path(sys.argv[1]).resolve()
    dist = work / "dist"
    dist.mkdir(parents=True, exist_ok=True)
    for folder in PACKAGES:
        run(["hatch", "build", "-t", "wheel", str(dist)], cwd=ROOT / folder)
    wheels = sorted(p.name for p in dist.glob("*.whl"))
    if len(wheels) < len(PACKAGES):
        sys.exit(f"expected {len(PACKAGES)} wheels in {dist}, found {wheels}")
    env_dir = work / "venv"
    venv.EnvBuilder(clear=True, with_pip=True).create(env_dir)
    bindir = env_dir / "bin"
    python = str(bindir / "python")
    run([python, "-m", "pip", "install", "-q", "--find-links", str(dist), *INSTALL], cwd=work)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["ARRAYJIT_CACHE_DIR"] = str(work / "cache")
    arrayjit = str(bindir / "arrayjit")
    run([arrayjit, "--version"], cwd=work, env=env)
    run([arrayjit, "backends"], cwd=work, env=env)
    run([arrayjit, "demo", "--size", "65536", "--steps", "3"], cwd=work, env=env)
    run(
        [
            python,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--pyargs",
            "arrayjit_conformance",
            "--arrayjit-backend",
            "sync_interp",
        ],
        cwd=work,
        env=env,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
