"""Write a pip constraints file pinning every third-party dependency of the CPU packages to the
minimum their pyproject.toml files declare (``name>=X`` -> ``name==X``), for ``tox -e mindeps``.

Usage: ``python tools/minimums.py OUT.txt``. The minimums are read from the packages' own
metadata, so a minimum that no longer works fails that environment instead of a user's install.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

from repo_packages import CPU_PACKAGES as PACKAGES
from repo_packages import ROOT

SPEC = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(?:\[[^\]]*\])?\s*>=\s*([^,;\s]+)")


def minimums() -> dict[str, str]:
    """Distribution name -> its declared minimum, over :data:`PACKAGES` (the highest where two
    packages declare one)."""
    found: dict[str, str] = {}
    for folder in PACKAGES:
        project = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]
        for requirement in project.get("dependencies", []):
            match = SPEC.match(requirement)
            if match is None or match.group(1).startswith("arrayjit"):
                continue
            name, low = match.group(1).lower().replace("_", "-"), match.group(2)
            found[name] = max(found.get(name, low), low, key=_version_key)
    return found


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def main() -> int:
    """Write the constraints file named by the first argument; print it."""
    lines = [f"{name}=={low}" for name, low in sorted(minimums().items())]
    Path(sys.argv[1]).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
