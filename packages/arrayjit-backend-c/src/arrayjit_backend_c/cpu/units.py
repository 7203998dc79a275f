"""Compile units: a routine's generated source (C or LLVM IR) cut into several units that compile
on their own, in parallel, and are cached one by one (issue 38).

A routine's source is a header (the prelude, the math library, the matmul helpers: everything
that is not a segment function) and its segment functions (:mod:`arrayjit_backend_c.cpu.
segments`), which are independent of each other but for a task or combining function calling its
segment's function. :func:`split_c` and :func:`split_llvm` cut it into *families* (a segment
function and its combining function; the tasks apart), *normalize* each function so that its
text does not depend on the rest of the routine, and group consecutive families into units:

- Normalized text: the names that the renderer numbers per routine (node buffers such as
  ``z0_3_139``, loop symbols such as ``i12``, LLVM's local values, labels and loop metadata) are
  renamed in order of appearance within the function, and each function is given a symbol made
  from a digest of that text (``aj_u`` and 16 hex digits) in place of its name, which holds the
  routine's name and the segment's position. Adding a node, a loop or a segment in one layer
  then leaves the text of every other layer's functions as it was. Identical functions (a
  zero-fill of same-sized buffers, repeated in every layer) become one.
- Units: a unit ends after a family whose digest falls in a fixed fraction of the digest space
  (content-defined boundaries, once the unit holds :data:`MIN_UNIT_BYTES`), or once the unit
  reaches :data:`MAX_UNIT_BYTES`. A boundary depends only on the text since the previous one,
  so an edit moves at most the boundaries next to it: the units elsewhere keep their text, and
  their cache keys. (A task names no position among the routine's parameters: its chunk's row
  holds them, see :mod:`arrayjit_backend_c.cpu.segments`; so it stays with its segment.)
- The kernel library: the packed matmul's kernels (the header's functions that are not inlined:
  large, shape-generic, the same in every routine that multiplies matrices of one precision)
  are :attr:`SplitRoutine.library`, a unit of their own where they are external, declared in
  the others. :func:`library_objects` compiles it once per process (and caches it as any unit):
  like a runtime library, it is not compiled again for each routine (it took 0.26 s of LLVM's
  0.27 s and 0.3 s of gcc's 0.4 s on a two-layer MLP step).
- Small routines stay whole: C whose distinct functions hold less than
  :data:`C_ONE_UNIT_BYTES` is one unit of those functions, a source whose functions hold less
  than :data:`SPLIT_MIN_BYTES` (of C) is one unit of its functions as rendered (the kernel
  library apart).

The compilers (:mod:`arrayjit_backend_c.cc.compiler`, :mod:`arrayjit_backend_c.llvm.compiler`)
compile each unit (header plus its functions) to object code, cached per unit, and link them;
:attr:`SplitRoutine.symbols` maps each function's name in the routine to its symbol there. A
source that is not laid out as expected (text between functions, a reference to a function
defined later, a file-scope variable that each unit would copy) is one unit with its names
unchanged: correct, only not split.
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from arrayjit_backends.impl.compile_cache import CompileCache

MIN_UNIT_BYTES = 6_000
"""A unit ends at a content-defined boundary only once its functions hold this many bytes."""
MAX_UNIT_BYTES = 40_000
"""A unit ends once its functions hold this many bytes, boundary or not."""
BOUNDARY_ONE_IN = 4
"""A family ends a unit (past :data:`MIN_UNIT_BYTES`) when its digest is 0 modulo this."""

SPLIT_MIN_BYTES = 16_000
"""A routine whose functions hold fewer bytes of C (:data:`LLVM_BYTES_PER_C_BYTE` times as many
of LLVM IR) is one unit, its source as rendered: splitting would only add compiler runs (and a
link)."""
C_ONE_UNIT_BYTES = 24_000
"""C whose distinct functions (once normalized, :func:`split_c`) hold fewer bytes is one unit
of those functions: a C compiler run costs its start, the header and the matmul kernels, more
than a few kilobytes of functions take (a routine of repeated layers shrinks to a few distinct
functions)."""
LLVM_BYTES_PER_C_BYTE = 2.5
"""About how much longer LLVM IR is than the C of the same routine."""

SYMBOL_PREFIX = "aj_u"


@dataclass(frozen=True)
class SplitRoutine:
    """A routine's source cut into compile units."""

    units: tuple[str, ...]
    """Each unit's complete source (the header, then its functions)."""
    symbols: dict[str, str]
    """Each function of the routine by its name in the source: its symbol in the units."""
    library: str | None = None
    """The kernel library unit (see the module docstring) the units call, if any: its object
    code comes from :func:`library_objects`."""


@dataclass(frozen=True)
class _Function:
    name: str
    text: str


def _families(functions: list[_Function]) -> list[list[_Function]]:
    """Functions grouped by segment, in the order the segments come: a ``_combine`` or
    ``_task`` function joins the function it is named after."""
    names = {f.name for f in functions}
    groups: dict[str, list[_Function]] = {}
    for f in functions:
        root = f.name
        for suffix in ("_combine", "_task"):
            if root.endswith(suffix) and root.removesuffix(suffix) in names:
                root = root.removesuffix(suffix)
        groups.setdefault(root, []).append(f)
    return list(groups.values())


def _external(texts: list[str], declarations: dict[str, str]) -> str:
    """The declarations of the functions ``texts`` call but do not define."""
    defined = {s for t in texts for s in _DEFINES.findall(t)}
    used = dict.fromkeys(s for t in texts for s in _SYMBOLS.findall(t))
    return "".join(declarations[s] for s in used if s not in defined and s in declarations)


_SYMBOLS = re.compile(rf"\b{SYMBOL_PREFIX}[0-9a-f]{{16}}\b")
_DEFINES = re.compile(rf"^(?:void |define [^@]*@)({SYMBOL_PREFIX}[0-9a-f]{{16}})\b", re.MULTILINE)


def _units(header: str, families: list[list[str]], declarations: dict[str, str]) -> tuple[str, ...]:
    """Group the families' normalized texts into units (see the module docstring)."""
    units: list[str] = []
    current: list[str] = []
    size = 0
    for texts in families:
        current += texts
        size += sum(len(t) for t in texts)
        if _ends_unit(texts, size):
            units.append(header + _external(current, declarations) + "".join(current))
            current, size = [], 0
    if current:
        units.append(header + _external(current, declarations) + "".join(current))
    return tuple(units)


def _ends_unit(texts: list[str], size: int) -> bool:
    """Whether a family of functions ``texts`` ends its unit, which holds ``size`` bytes with
    it: a content-defined boundary, or the unit is full."""
    digest = int.from_bytes(hashlib.sha256("".join(texts).encode()).digest()[:4], "little")
    boundary = size >= MIN_UNIT_BYTES and digest % BOUNDARY_ONE_IN == 0
    return boundary or size >= MAX_UNIT_BYTES


def _symbol(text: str) -> str:
    return f"{SYMBOL_PREFIX}{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def _closing_line(lines: list[str], start: int) -> int | None:
    """The index of the first line from ``start`` on that is ``}`` alone (the end of a
    function the renderers print), or None if there is none."""
    for end in range(start, len(lines)):
        if lines[end].rstrip("\n") == "}":
            return end
    return None


def _whole(source: str, names: list[str] | None) -> SplitRoutine:
    return SplitRoutine((source,), {n: n for n in names or []})


# --- C ---------------------------------------------------------------------------------------

_C_TOKEN = re.compile(r"\d[\w.]*(?:[eEpP][+-]\d+)?|[A-Za-z_]\w*")
_C_FUNCTION = re.compile(r"^void (\w+)\(", re.MULTILINE)
_ENDS_IN_DIGIT = re.compile(r"\d$")
_C_VARIABLE = re.compile(r"^[A-Za-z_][^(\n]*=", re.MULTILINE)
"""A variable defined at file scope (a line that assigns before any parenthesis)."""
_C_HELPER = re.compile(r"static (?!inline\b)[A-Za-z_][\w \*]*?\b\w+\(")
"""The start of a ``static`` function that is not ``inline``."""
_C_KEEP = frozenset({"log2", "exp2", "log10", "atan2", "expm1", "log1p", "exp10", "frexp"})
"""Library functions whose names end in a digit (never renamed)."""


def _c_functions(body: str) -> list[_Function] | None:
    """The functions of ``body`` (each ``void name(...) {`` to ``}`` at the line's start), or
    None if anything else stands between them."""
    functions: list[_Function] = []
    lines = body.splitlines(keepends=True)
    k = 0
    while k < len(lines):
        line = lines[k]
        match = _C_FUNCTION.match(line)
        if match is None:
            if line.strip():
                return None
            k += 1
            continue
        end = _closing_line(lines, k)
        if end is None:
            return None
        functions.append(_Function(match.group(1), "".join(lines[k : end + 1])))
        k = end + 1
    return functions


def _rename(
    text: str,
    token: re.Pattern[str],
    local: Callable[[str], str | None],
) -> str:
    """``text`` with each token for which ``local(token)`` gives a name replaced by it.
    ``local`` is asked once per distinct token, in order of first appearance (it numbers the
    names it gives in that order), and each occurrence takes its answer."""
    parts = _capturing(token).split(text)  # text, token, text, token, ..., text
    tokens = parts[1::2]
    names = {}
    for tok in dict.fromkeys(tokens):
        new = local(tok)
        if new is not None:
            names[tok] = new
    parts[1::2] = [names.get(tok, tok) for tok in tokens]
    return "".join(parts)


@functools.cache
def _capturing(token: re.Pattern[str]) -> re.Pattern[str]:
    """``token`` as one capturing group (for ``split``: the tokens between the rest)."""
    return re.compile(f"({token.pattern})", token.flags)


def split_c(source: str) -> SplitRoutine:
    """Cut the C source of a routine (:class:`~arrayjit_backend_c.cc.renderer.CcSyntax`) into
    units (see the module docstring)."""
    at = source.find("\n/* routine ")
    if at < 0:
        return _whole(source, [])
    header = source[: at + 1]
    first_line_end = source.index("\n", at + 1)
    functions = _c_functions(source[first_line_end + 1 :])
    # A file-scope variable is state every unit would have its own copy of.
    if functions is None or _C_VARIABLE.search(header):
        return _whole(source, _C_FUNCTION.findall(source))
    fixed = set(_C_TOKEN.findall(header)) | _C_KEEP
    library, header = _c_helpers(header)
    if sum(len(f.text) for f in functions) < SPLIT_MIN_BYTES:
        names = {f.name: f.name for f in functions}
        return SplitRoutine((header + source[at + 1 :],), names, library)
    defined = {f.name for f in functions}
    symbols: dict[str, str] = {}
    texts: dict[str, str] = {}
    for f in functions:
        renamed: dict[str, str] = {f.name: "__aj_self__"}
        ok = [True]

        def local(tok: str, renamed: dict[str, str] = renamed, ok: list[bool] = ok) -> str | None:
            if tok in renamed:
                return renamed[tok]
            if tok in defined:
                if tok not in symbols:  # a call of a function defined later: leave as is
                    ok[0] = False
                    return None
                return symbols[tok]
            if tok[0].isdigit() or tok[0] == "_" or tok in fixed or tok.startswith("aj_"):
                return None
            if _ENDS_IN_DIGIT.search(tok) is None:
                return None
            renamed[tok] = f"_l{len(renamed) - 1}"
            return renamed[tok]

        text = _rename(f.text, _C_TOKEN, local)
        if not ok[0] or any(f"_l{k}" in fixed for k in range(len(renamed))):
            return _whole(source, [g.name for g in functions])
        symbols[f.name] = _symbol(text)
        texts[f.name] = text.replace("__aj_self__", symbols[f.name])
    declarations = {
        symbols[f.name]: texts[f.name][: texts[f.name].index("{")].rstrip() + ";\n"
        for f in functions
    }
    unique = {symbols[f.name]: texts[f.name] for f in _in_unit_order(functions)}
    if sum(len(t) for t in unique.values()) < C_ONE_UNIT_BYTES:
        # One compiler run is cheaper: one unit, its functions once each (segments first).
        return SplitRoutine((header + "".join(unique.values()),), symbols, library)
    grouped = _group(header, functions, symbols, texts, declarations)
    return SplitRoutine(grouped, symbols, library)


def _in_unit_order(functions: list[_Function]) -> list[_Function]:
    """The functions in the order the units hold them: by segment (see :func:`_families`)."""
    return [f for family in _families(functions) for f in family]


_HIDDEN = '__attribute__((visibility("hidden"))) '


_C_INLINE = re.compile(r"static inline\b.*?\b(aj_\w+)\(")
"""The first line of a ``static inline`` helper of the header, its name in group 1."""


def _c_helpers(header: str) -> tuple[str | None, str]:
    """The kernel library and the header of the other units: the header's ``static``
    functions that are not ``inline`` (the packed matmul's kernels) are external in the
    library (hidden: resolved within the shared object) and declared in the others; None and
    ``header`` when there are none. The library holds only what its functions use (the
    header's ``#include`` lines and the inline helpers they call), so that it is the same text
    in every routine that uses those kernels."""
    lines = header.splitlines(keepends=True)
    own: list[str] = []
    kernels: list[str] = []
    inline: dict[str, str] = {}
    k = 0
    while k < len(lines):
        line = lines[k]
        helper = _C_INLINE.match(line)
        if helper is not None:
            end = k if line.rstrip().endswith("}") else _closing_line(lines, k)
            if end is not None:
                inline[helper[1]] = "".join(lines[k : end + 1])
        if _C_HELPER.match(line) is None:
            own.append(line)
            k += 1
            continue
        end = _closing_line(lines, k)
        if end is None:
            return None, header
        text = "".join(lines[k : end + 1])
        if "{" not in text or "(" not in text[: text.index("{")]:
            return None, header
        external = _HIDDEN + text[len("static ") :]
        own.append(external[: external.index("{")].rstrip() + ";\n")
        kernels.append(external)
        k = end + 1
    if not kernels:
        return None, header
    includes = [line for line in lines if line.startswith("#include")]
    used = _reached(kernels, inline, re.compile(r"\baj_\w+(?=\()"))
    return "".join([*includes, *(inline[n] for n in used), *kernels]), "".join(own)


def _reached(roots: list[str], items: dict[str, str], ref: re.Pattern[str]) -> list[str]:
    """The names of ``items`` that the texts ``roots`` refer to (``ref`` finds the names in a
    text), directly or through other items, in the order of ``items``."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        for name in ref.findall(todo.pop()):
            if name in items and name not in seen:
                seen.add(name)
                todo.append(items[name])
    return [n for n in items if n in seen]


def _group(
    header: str,
    functions: list[_Function],
    symbols: dict[str, str],
    texts: dict[str, str],
    declarations: dict[str, str],
) -> tuple[str, ...]:
    """The units of the normalized functions, each symbol defined once (and declared in the
    units that call it from another)."""
    seen: set[str] = set()
    families: list[list[str]] = []
    for family in _families(functions):
        mine = []
        for f in family:
            if symbols[f.name] not in seen:
                seen.add(symbols[f.name])
                mine.append(texts[f.name])
        if mine:
            families.append(mine)
    return _units(header, families, declarations)


# --- LLVM IR ---------------------------------------------------------------------------------

_LL_DEFINE = re.compile(r"^define (?!internal)[^@]*@([\w.]+)\(")
_LL_LOCAL = re.compile(r"%[A-Za-z_.$][\w.$]*|^[A-Za-z_.$][\w.$]*(?=:)|@[\w.$]+|!\d+", re.MULTILINE)
_LL_GLOBAL = re.compile(r"^@[\w.$]+ = .*\bglobal\b", re.MULTILINE)
_LL_METADATA = re.compile(r"^!(\d+) = (.*)$")


def _ll_pieces(source: str) -> tuple[str, list[_Function], dict[int, str]] | None:
    """The header (every line outside the routine's external functions and the numbered
    metadata), the external functions, and the numbered metadata definitions; None if a
    function does not end."""
    header: list[str] = []
    functions: list[_Function] = []
    metadata: dict[int, str] = {}
    lines = source.splitlines(keepends=True)
    k = 0
    while k < len(lines):
        line = lines[k]
        meta = _LL_METADATA.match(line)
        if meta is not None:
            metadata[int(meta.group(1))] = meta.group(2)
            k += 1
            continue
        match = _LL_DEFINE.match(line)
        if match is None:
            header.append(line)
            k += 1
            continue
        end = _closing_line(lines, k)
        if end is None:
            return None
        functions.append(_Function(match.group(1), "".join(lines[k : end + 1])))
        k = end + 1
    return "".join(header), functions, metadata


def _metadata_closure(refs: list[int], metadata: dict[int, str]) -> list[int] | None:
    """The numbered metadata ``refs`` reach, in order of first reach; None if one is not
    defined."""
    order: list[int] = []
    todo = list(refs)
    while todo:
        n = todo.pop(0)
        if n in order:
            continue
        if n not in metadata:
            return None
        order.append(n)
        todo += [int(m[1:]) for m in re.findall(r"!\d+", metadata[n])]
    return order


def split_llvm(source: str) -> SplitRoutine:
    """Cut the LLVM IR module of a routine (:class:`~arrayjit_backend_c.llvm.renderer.LlvmGen`)
    into units (see the module docstring): each unit is a module of the header (declarations,
    the internal helpers, attribute groups) and its functions, with the numbered metadata they
    use numbered afresh."""
    pieces = _ll_pieces(source)
    if pieces is None:
        return _whole(source, _LL_DEFINE.findall(source))
    header, functions, metadata = pieces
    if _LL_GLOBAL.search(header):  # state every unit would have its own copy of
        return _whole(source, [f.name for f in functions])
    if sum(len(f.text) for f in functions) < SPLIT_MIN_BYTES * LLVM_BYTES_PER_C_BYTE:
        library, header = _ll_helpers(header)
        text = "".join(f.text for f in functions)
        numbered = "".join(f"!{n} = {m}\n" for n, m in metadata.items())
        names = {f.name: f.name for f in functions}
        return SplitRoutine((header + text + numbered,), names, library)
    # Named types are global: never renamed.
    types = set(re.findall(r"^(%[A-Za-z_.$][\w.$]*) = type", header, re.MULTILINE))
    defined = {f.name for f in functions}
    symbols: dict[str, str] = {}
    texts: dict[str, tuple[str, list[str]]] = {}
    for f in functions:
        renamed: dict[str, str] = {}
        metas: list[int] = []
        ok = [True]

        def local(
            tok: str,
            renamed: dict[str, str] = renamed,
            metas: list[int] = metas,
            ok: list[bool] = ok,
            own: str = f.name,
        ) -> str | None:
            if tok[0] == "@":
                name = tok[1:]
                if name == own:
                    return "@__aj_self__"
                if name in defined:
                    if name not in symbols:
                        ok[0] = False
                        return None
                    return f"@{symbols[name]}"
                return None
            if tok[0] == "!":
                n = int(tok[1:])
                if n not in metas:
                    metas.append(n)
                return f"!__aj_m{metas.index(n)}__"
            if tok in types:
                return None
            label = tok[0] != "%"
            key = tok if not label else f"%{tok}"
            if key not in renamed:
                renamed[key] = f"%v{len(renamed)}"
            return renamed[key] if not label else renamed[key][1:]

        text = _rename(f.text, _LL_LOCAL, local)
        closure = _metadata_closure(metas, metadata)
        if not ok[0] or closure is None:
            return _whole(source, [g.name for g in functions])
        # The metadata it reaches, numbered from 0 in the text that is digested.
        local_numbers = {n: k for k, n in enumerate(closure)}
        by_ref = {k: local_numbers[n] for k, n in enumerate(metas)}
        body = _renumber(text, r"!__aj_m(\d+)__", by_ref)
        defs = [
            f"!__aj_m{k}__ = " + _renumber(metadata[n], r"!(\d+)", local_numbers)
            for k, n in enumerate(closure)
        ]
        symbols[f.name] = _symbol(body + "\n".join(defs))
        texts[f.name] = (body.replace("@__aj_self__", f"@{symbols[f.name]}"), defs)
    declarations = {symbols[f.name]: _ll_declaration(texts[f.name][0]) for f in functions}
    library, header = _ll_helpers(header)
    seen: set[str] = set()
    units: list[str] = []
    for group in _ll_groups(_families(functions), symbols, texts, seen):
        external = _external([t for t, _ in group], declarations)
        units.append(header + external + _ll_numbered(group))
    return SplitRoutine(tuple(units), symbols, library)


def _ll_groups(
    families: list[list[_Function]],
    symbols: dict[str, str],
    texts: dict[str, tuple[str, list[str]]],
    seen: set[str],
) -> Iterator[list[tuple[str, list[str]]]]:
    """The functions of each unit (content-defined, as :func:`_units`)."""
    current: list[tuple[str, list[str]]] = []
    size = 0
    for family in families:
        mine = []
        for f in family:
            if symbols[f.name] not in seen:
                seen.add(symbols[f.name])
                mine.append(texts[f.name])
        if not mine:
            continue
        current += mine
        size += sum(len(t) for t, _ in mine)
        if _ends_unit([t for t, _ in mine], size):
            yield current
            current, size = [], 0
    if current:
        yield current


def _renumber(text: str, pattern: str, numbers: dict[int, int]) -> str:
    """``text`` with each metadata reference matching ``pattern`` (its number in group 1)
    written ``!__aj_m<n>__``, ``n`` its new number."""
    return re.sub(pattern, lambda m: f"!__aj_m{numbers[int(m[1])]}__", text)


def _ll_helpers(header: str) -> tuple[str | None, str]:
    """The kernel library and the header of the other units: the internal functions that are
    not always inlined (the packed matmul's kernels) are external in the library and declared
    in the others; None and ``header`` when there are none."""
    inline = set(re.findall(r"^attributes (#\d+) = \{[^}]*\balwaysinline\b", header, re.MULTILINE))
    lines = header.splitlines(keepends=True)
    own: list[str] = []
    kernels: list[str] = []
    items: dict[str, str] = {}  # the header's other functions, declarations and attributes
    k = 0
    while k < len(lines):
        line = lines[k]
        group = re.search(r"(#\d+) \{$", line.rstrip())
        kernel = line.startswith("define internal ") and group is not None
        end = _closing_line(lines, k) if line.startswith("define ") else k
        if end is None:
            return None, header
        text = "".join(lines[k : end + 1])
        named = re.match(r"(?:define|declare)[^@]*(@[\w.$]+)\(|attributes (#\d+) ", line)
        if named is not None and not (kernel and group is not None and group[1] not in inline):
            items[named[1] or named[2]] = text
        if not kernel or group is None or group[1] in inline:
            own.append(text)
            k = end + 1
            continue
        external = "define " + text[len("define internal ") :]
        own.append(_ll_declaration(external))
        kernels.append(external)
        k = end + 1
    if not kernels:
        return None, header
    used = _reached(kernels, items, re.compile(r"@[\w.$]+(?=\()|#\d+\b"))
    return "".join([*(items[n] for n in used), *kernels]), "".join(own)


def _ll_declaration(text: str) -> str:
    """The ``declare`` line of a function defined by ``text``: its first line, without the
    parameters' names, its attribute group and its body."""
    first = text[: text.index("{")].rstrip()
    first = re.sub(r"\s*#\d+$", "", first)
    first = re.sub(r" %[\w.$]+(?=[,)])", "", first)
    return "declare" + first[len("define") :] + "\n"


def _ll_numbered(group: list[tuple[str, list[str]]]) -> str:
    """A unit's functions with their metadata numbered within the unit, then its metadata."""
    out: list[str] = []
    defs: list[str] = []
    for body, metas in group:
        base = len(defs)

        def shift(m: re.Match[str], base: int = base) -> str:
            return f"!{base + int(m[1])}"

        out.append(re.sub(r"!__aj_m(\d+)__", shift, body))
        defs += [re.sub(r"!__aj_m(\d+)__", shift, d) + "\n" for d in metas]
    return "".join(out) + "".join(defs)


def unit_objects(
    units: tuple[str, ...],
    cache: CompileCache,
    key: Callable[[str], str],
    build: Callable[[str, int], bytes],
    check: Callable[[bytes], bool],
    workers: int | None = None,
) -> list[bytes]:
    """The object code of each unit: from ``cache`` under ``key(unit)``, else ``build(unit,
    k)``'s (then cached). The units missing from the cache are built at once on ``workers``
    threads (default: the CPU count; ``build`` runs a compiler process, or one that releases
    the GIL), the cache is read and written on the calling thread only. A cached entry that
    ``check`` rejects is discarded and rebuilt.

    Raises:
        CompileError: a build failed (the first unit's, in order).
    """
    objects: list[bytes | None] = []
    keys = [key(u) for u in units]
    for unit_key in keys:
        data = cache.get(unit_key)
        if data is not None and not check(data):
            cache.discard(unit_key, "not object code")
            data = None
        if data is not None:
            cache.hits += 1
        objects.append(data)
    missing = [k for k, data in enumerate(objects) if data is None]
    threads = min(len(missing), workers or os.cpu_count() or 1)
    if threads <= 1:
        built = [build(units[k], k) for k in missing]
    else:
        with concurrent.futures.ThreadPoolExecutor(threads, "arrayjit-unit") as pool:
            built = list(pool.map(lambda k: build(units[k], k), missing))
    for k, data in zip(missing, built, strict=True):
        cache.builds += 1
        cache.put(keys[k], data)
        objects[k] = data
    return [data for data in objects if data is not None]


_libraries: dict[str, bytes] = {}
"""The kernel libraries this process has built or read, by cache key."""
_libraries_lock = threading.Lock()


def forget_libraries() -> None:
    """Forget the kernel libraries this process has built: the next routine that uses one
    compiles it (or reads it from the cache) again, as the first routine of a process does
    (what the compile benchmark times as a process's first compile)."""
    with _libraries_lock:
        _libraries.clear()


def library_objects(
    split: SplitRoutine,
    cache: CompileCache,
    key: Callable[[str], str],
    build: Callable[[str, int], bytes],
    check: Callable[[bytes], bool],
) -> list[bytes]:
    """The object code of ``split``'s kernel library (:attr:`SplitRoutine.library`), as a list
    of one (none where it has no library): as built or read earlier in this process under its
    ``key``, else as :func:`unit_objects` gives it (the cache, else ``build``). Two threads
    compiling their first routines at once may both build it; the first result is kept."""
    if split.library is None:
        return []
    library, library_key = split.library, key(split.library)
    with _libraries_lock:
        data = _libraries.get(library_key)
    if data is None:
        data = unit_objects((library,), cache, lambda _: library_key, build, check, workers=1)[0]
        with _libraries_lock:
            data = _libraries.setdefault(library_key, data)
    return [data]


__all__ = [
    "MAX_UNIT_BYTES",
    "MIN_UNIT_BYTES",
    "SplitRoutine",
    "forget_libraries",
    "library_objects",
    "split_c",
    "split_llvm",
    "unit_objects",
]
