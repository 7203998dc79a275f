"""Every complete Python example of the repository's READMEs runs as written, as a user would
paste it: in a fresh interpreter, outside the source tree. A block is complete when it starts
with an import; blocks that do not (sketches that continue a sentence, such as the IR README's
MLP pass or the distributed package's fragments under ``mpiexec``) are not programs and are
not collected."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
READMES = [ROOT / "README.md", *sorted(ROOT.glob("packages/*/README.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
IMPORT = re.compile(r"^(?:from|import) (\w+)", re.M)


def _examples() -> list[tuple[str, str]]:
    found = []
    for readme in READMES:
        blocks = BLOCK.findall(readme.read_text())
        for i, src in enumerate(blocks):
            if src.lstrip().startswith(("import ", "from ")):
                found.append((f"{readme.relative_to(ROOT)}#{i}", src))
    return found


EXAMPLES = _examples()


def test_the_readmes_have_examples() -> None:
    # The root README's and the backends package's at least (a broken regex finds none).
    names = {name.split("#")[0] for name, _ in EXAMPLES}
    assert {"README.md", "packages/arrayjit-backends/README.md"} <= names


@pytest.mark.parametrize("src", [s for _, s in EXAMPLES], ids=[n for n, _ in EXAMPLES])
def test_example_runs(src: str, tmp_path: Path) -> None:
    missing = [m for m in IMPORT.findall(src) if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"the example imports {', '.join(missing)}, not installed here")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["ARRAYJIT_CACHE_DIR"] = str(tmp_path / "cache")
    script = tmp_path / "example.py"
    script.write_text(src)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"the example exits {done.returncode}:\n{done.stderr[-3000:]}"
