"""Random multi-statement programs (``arrayjit_conformance.programs``) on every backend: each
run twice in a row, every hosted node compared after each run with a plain numpy evaluation,
with the interpreter over the unoptimized lowered code (the oracle) and with the interpreter
over the optimized code.

Example counts: ``ARRAYJIT_FUZZ_EXAMPLES`` (the ``fuzz`` tox environment sets 2000) fresh random
programs (a twentieth of that for the big ones), else a fixed-seed set of :data:`CI_EXAMPLES`
programs (6 big ones). The settings apply to these tests only.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from arrayjit_conformance.harness import check_program, check_split_program
from arrayjit_conformance.programs import BIG_VALUE_LIMIT, Program, is_tame, programs

CI_EXAMPLES = 25


def program_settings(ci_examples: int = CI_EXAMPLES, fuzz_share: int = 1) -> settings:
    """Hypothesis settings of this suite: ``ci_examples`` fixed-seed programs by default,
    ``ARRAYJIT_FUZZ_EXAMPLES // fuzz_share`` fresh random ones under that variable."""
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
        return settings(max_examples=max(fuzz // fuzz_share, 1), derandomize=False, **common)
    # CI reports a failing program as drawn: shrinking it is the fuzz run's work.
    return settings(
        max_examples=ci_examples,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        **common,
    )


@program_settings()
@given(program=programs())
def test_random_programs(backend: Any, program: Program) -> None:
    assume(is_tame(program))
    check_program(backend, program)


@program_settings(ci_examples=6, fuzz_share=20)
@given(program=programs(big=True, max_stmts=5))
def test_random_big_programs(backend: Any, program: Program) -> None:
    """Axes of 33 to 64: loop nests large enough for the renderers' parallel loops, scalar
    reductions and reordered matmul loops. Too large for the interpreter: against numpy."""
    assume(is_tame(program, limit=BIG_VALUE_LIMIT))
    check_program(backend, program, interpreters=False)


@program_settings(ci_examples=6, fuzz_share=4)
@given(program=programs(), data=st.data())
def test_random_programs_split_in_two_routines(backend: Any, program: Program, data: Any) -> None:
    """The same programs as two routines compiled together (``compile_batch``) and run one
    after the other in one context lineage: nodes the second reads from the first must survive
    between them."""
    assume(is_tame(program) and len(program.stmts) >= 2)
    cut = data.draw(st.integers(1, len(program.stmts) - 1), label="cut")
    check_split_program(backend, program, cut)
