"""Einsum specs as text: ``"b(2*h+i)(2*w+j)c,ijcd->bhwd"`` parsed into operands and axes.

An axis is a letter, or a parenthesized affine expression over letters with integer
coefficients and an integer offset (a convolution's input ``(o+k)``, a strided window
``(2*h+i)``, a dilated one ``(o+2*k)``, a "same" convolution ``(o+k-1)``). The grammar
(spaces are ignored)::

    spec    := [operand {',' operand}] '->' operand
    operand := {axis}
    axis    := letter | '(' expr ')'
    expr    := [sign] term {sign term}
    term    := integer | letter | integer '*' letter | letter '*' integer
    sign    := '+' | '-'

Rules checked here, each a :class:`~arrayjit_tnode.UsageError` naming the spec and the position
(with a caret under it): a letter appears at most once in an expression and in an operand, a
coefficient is never 0, a coefficient in the result (after ``->``) is positive. What needs the
nodes (each letter's range, the range check of every expression) is
:meth:`arrayjit_ir.projections.Projections.from_einsum`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from arrayjit_tnode import UsageError


@dataclass(frozen=True)
class AxisSpec:
    """One axis of an operand: ``sum(coeff * letter) + offset``.

    Attributes:
        terms: ``(coefficient, letter)`` pairs, letters distinct, coefficients non-zero, in
            the order written.
        offset: the integer offset.
        text: the axis as written (``"b"``, ``"(2*h+i)"``).
        pos: the position of its first character in the spec.
    """

    terms: tuple[tuple[int, str], ...]
    offset: int
    text: str
    pos: int

    @property
    def letter(self) -> str | None:
        """The letter when the axis is one letter alone (``b`` or ``(b)``), else None."""
        if len(self.terms) == 1 and self.terms[0][0] == 1 and self.offset == 0:
            return self.terms[0][1]
        return None

    @property
    def letters(self) -> tuple[str, ...]:
        return tuple(letter for _, letter in self.terms)


@dataclass(frozen=True)
class OperandSpec:
    """The axes of one operand (``role``: ``"output"`` or ``"input k"``), as written at
    ``pos``."""

    axes: tuple[AxisSpec, ...]
    text: str
    pos: int
    role: str


@dataclass(frozen=True)
class ParsedSpec:
    """A parsed spec: its text, the inputs in order and the output."""

    text: str
    inputs: tuple[OperandSpec, ...]
    output: OperandSpec

    @property
    def operands(self) -> tuple[OperandSpec, ...]:
        """The output first, then the inputs."""
        return (self.output, *self.inputs)

    @property
    def letters(self) -> tuple[str, ...]:
        """Every letter, in order of first appearance: the output's, then the inputs'."""
        return tuple(
            dict.fromkeys(
                letter for op in self.operands for axis in op.axes for letter in axis.letters
            )
        )


def spec_error(spec: str, pos: int, what: str) -> UsageError:
    """A :class:`UsageError` for ``spec`` at ``pos``: the message names both and draws a caret
    under the position."""
    return UsageError(
        f"einsum spec {spec!r}: {what} (at position {pos})\n    {spec}\n    {' ' * pos}^"
    )


class _Parser:
    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.pos = 0

    def error(self, what: str, pos: int | None = None) -> UsageError:
        return spec_error(self.spec, self.pos if pos is None else pos, what)

    def skip(self) -> None:
        while self.pos < len(self.spec) and self.spec[self.pos] == " ":
            self.pos += 1

    def peek(self) -> str:
        self.skip()
        return self.spec[self.pos] if self.pos < len(self.spec) else ""

    def integer(self) -> int:
        start = self.pos
        while self.pos < len(self.spec) and self.spec[self.pos].isdigit():
            self.pos += 1
        return int(self.spec[start : self.pos])

    def operand(self, role: str, end: int, output: bool) -> OperandSpec:
        self.skip()
        start = self.pos
        axes: list[AxisSpec] = []
        seen: dict[str, int] = {}
        while self.peek() and self.pos < end and self.peek() not in ",":
            ch = self.peek()
            pos = self.pos
            if ch == "(":
                axis = self.expression(output)
            elif ch.isalpha() and ch.isascii():
                self.pos += 1
                axis = AxisSpec(((1, ch),), 0, ch, pos)
            else:
                raise self.error(
                    f"axis names must be letters, or parenthesized expressions such as "
                    f"(2*h+i); found {ch!r}"
                )
            for letter in axis.letters:
                if letter in seen:
                    raise self.error(
                        f"{role} repeats an axis: letter {letter!r} appears twice in it "
                        f"(a diagonal or a trace is not an einsum here)",
                        pos,
                    )
                seen[letter] = pos
            axes.append(axis)
        text = self.spec[start : self.pos].strip()
        return OperandSpec(tuple(axes), text, start, role)

    def expression(self, output: bool) -> AxisSpec:
        open_pos = self.pos
        self.pos += 1  # "("
        terms: list[tuple[int, str]] = []
        offset = 0
        first = True
        while True:
            ch = self.peek()
            if ch == ")":
                if first:
                    raise self.error("an empty expression '()'")
                self.pos += 1
                break
            if not ch or ch in ",(" or self.spec.startswith("->", self.pos):
                raise self.error(f"the expression opened at position {open_pos} is not closed")
            term_pos = self.pos
            sign = 1
            if ch in "+-":
                sign = -1 if ch == "-" else 1
                self.pos += 1
                ch = self.peek()
                term_pos = self.pos
            elif not first:
                raise self.error(f"expected '+', '-' or ')' in an expression, found {ch!r}")
            first = False
            coeff: int | None = None
            letter: str | None = None
            if ch.isdigit():
                coeff = self.integer()
                if self.peek() == "*":
                    self.pos += 1
                    ch = self.peek()
                    if not (ch.isalpha() and ch.isascii()):
                        raise self.error(
                            f"expected a letter after '*', found {ch or 'the end'!r} (a term is "
                            "an integer, a letter, or an integer times a letter)"
                        )
                    letter = ch
                    self.pos += 1
            elif ch.isalpha() and ch.isascii():
                letter = ch
                self.pos += 1
                if self.peek() == "*":
                    self.pos += 1
                    if not self.peek().isdigit():
                        raise self.error(
                            "expected an integer after '*' (a term is an integer, a letter, or "
                            "an integer times a letter: a product of letters is not affine)"
                        )
                    coeff = self.integer()
            else:
                raise self.error(
                    f"expected a term (an integer, a letter, or an integer times a letter), "
                    f"found {ch or 'the end'!r}"
                )
            if letter is None:
                assert coeff is not None
                offset += sign * coeff
                continue
            c = sign * (1 if coeff is None else coeff)
            if c == 0:
                raise self.error(f"letter {letter!r} has coefficient 0", term_pos)
            if output and c < 0:
                raise self.error(
                    f"letter {letter!r} has a negative coefficient in the result; coefficients "
                    "of the result's expressions must be positive",
                    term_pos,
                )
            if any(existing == letter for _, existing in terms):
                raise self.error(
                    f"letter {letter!r} appears twice in one expression (write its "
                    f"coefficients summed, e.g. (2*{letter}))",
                    term_pos,
                )
            terms.append((c, letter))
        text = self.spec[open_pos : self.pos]
        return AxisSpec(tuple(terms), offset, text, open_pos)


def parse_spec(spec: str) -> ParsedSpec:
    """Parse ``spec`` (see the module docstring for the grammar and its rules).

    Raises:
        UsageError: the spec is malformed or breaks a rule; the message names the spec and the
            position.
    """
    arrow = spec.find("->")
    if arrow < 0:
        raise UsageError(f"einsum spec {spec!r}: expected 'inputs->output', e.g. 'ik,kj->ij'")
    if spec.find("->", arrow + 2) >= 0:
        raise spec_error(spec, spec.find("->", arrow + 2), "a second '->'")
    p = _Parser(spec)
    inputs: list[OperandSpec] = []
    while True:
        inputs.append(p.operand(f"input {len(inputs)}", arrow, output=False))
        ch = p.peek()
        if ch == ",":
            p.pos += 1
            continue
        if p.pos != arrow:
            raise p.error(f"unexpected {ch!r}")
        break
    if len(inputs) == 1 and not inputs[0].axes and not inputs[0].text:
        inputs = [OperandSpec((), "", 0, "input 0")]  # "->" alone: one scalar input
    p.pos = arrow + 2
    output = p.operand("output", len(spec), output=True)
    if p.peek():
        raise p.error(f"unexpected {p.peek()!r} in the output")
    return ParsedSpec(spec, tuple(inputs), output)


__all__ = ["AxisSpec", "OperandSpec", "ParsedSpec", "parse_spec", "spec_error"]
