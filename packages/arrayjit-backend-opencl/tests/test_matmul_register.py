"""The matmul tests of ``test_matmul.py`` with PoCL's default lanes: the register shape of CPU
devices (``gpu.matmul.render_register_matmul``: no local memory, no barriers, rows of vector
cells per work item), its bits equal to the interpreter's at edge sizes, transposed, batched
accumulating operands, and a fill folded in as the cells' start."""

from test_matmul import (  # noqa: F401 (collected here, with this module's backend)
    test_a_fill_before_the_matmul_is_its_start,
    test_batched_matmul_takes_its_shape_and_is_bit_exact,
    test_matmul_takes_its_shape_and_is_bit_exact,
    test_other_contractions_keep_the_naive_nest,
    test_transposed_operand_and_signed_zero_start,
)

GPU_CELL_LANES = 1
