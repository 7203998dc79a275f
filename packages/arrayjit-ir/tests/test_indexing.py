"""The text of axis indices, shared by the pretty-printer and the C-like renderers."""

import pytest

from arrayjit_ir.indexing import Affine, Fixed_idx, Iterator, StaticSymbol, Symbol, format_index


def _name(s: Symbol | StaticSymbol) -> str:
    return s.name if isinstance(s, StaticSymbol) else f"i{s.id}"


@pytest.mark.parametrize(
    ("idx", "tight", "spaced"),
    [
        (Fixed_idx(7), "7", "7"),
        (Iterator(Symbol(3)), "i3", "i3"),
        (Affine(((1, Symbol(1)), (4, StaticSymbol("b"))), 2), "i1+4*b+2", "i1 + 4 * b + 2"),
        (Affine(((-2, Symbol(5)),)), "-2*i5", "-2 * i5"),
        (Affine((), 5), "5", "5"),
        (Affine(()), "0", "0"),
    ],
)
def test_format_index(idx: Fixed_idx | Iterator | Affine, tight: str, spaced: str) -> None:
    assert format_index(idx, _name) == tight
    assert format_index(idx, _name, " * ", " + ") == spaced


def test_format_index_refuses_what_is_no_index() -> None:
    with pytest.raises(TypeError):
        format_index(3, _name)  # type: ignore[arg-type]
