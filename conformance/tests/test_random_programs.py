"""Random multi-statement programs (``arrayjit_conformance.programs``) on every backend: each
run twice in a row, every hosted node compared after each run with a plain numpy evaluation,
with the interpreter over the unoptimized lowered code (the oracle) and with the interpreter
over the optimized code.

Example counts: ``ARRAYJIT_FUZZ_EXAMPLES`` (the ``fuzz`` tox environment sets 2000; fresh
random programs each run unless ``ARRAYJIT_FUZZ_SEED`` is set), else a fixed-seed set of
:data:`CI_EXAMPLES` programs. The settings apply to this test only.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, assume, given, settings

from arrayjit_conformance.harness import check_program
from arrayjit_conformance.programs import Program, is_tame, programs

CI_EXAMPLES = 25


def program_settings() -> settings:
    """Hypothesis settings of this suite: fixed-seed and small by default, many random
    programs under ``ARRAYJIT_FUZZ_EXAMPLES``."""
    common: dict[str, Any] = {
        "deadline": None,
        "print_blob": True,
        "suppress_health_check": [
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
        ],
    }
    fuzz = int(os.environ.get("ARRAYJIT_FUZZ_EXAMPLES", "0") or 0)
    if fuzz:
        return settings(max_examples=fuzz, derandomize=False, **common)
    return settings(max_examples=CI_EXAMPLES, derandomize=True, database=None, **common)


@program_settings()
@given(program=programs())
def test_random_programs(backend: Any, program: Program) -> None:
    assume(is_tame(program))
    check_program(backend, program)
