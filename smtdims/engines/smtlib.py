"""Z3 formulas as SMT-LIB text: what a Z3 worker reads, in the one writer smtdims has.

Names are written as :func:`smtdims.engines.encoding.symbol` made them (quoted, never a word of the
language), so any SMT-LIB reader takes the text back as the same formulas.
"""

from __future__ import annotations

from collections.abc import Sequence

import z3

_DECLARE = "(declare-fun "


def to_smtlib(ctx: z3.Context, formulas: Sequence[z3.BoolRef],
              declared: frozenset[str] = frozenset()) -> tuple[str, frozenset[str]]:
    """SMT-LIB text of ``formulas`` in ``ctx`` (their declarations, then one ``assert`` each; no
    ``check-sat``), without declaring again the names in ``declared``, and the declared names after it
    (a reader refuses a declaration it has seen: a Z3 worker holds what it was sent before)."""
    if not formulas:
        return "", declared
    # Z3's benchmark printer: one C call, where a scratch solver's sexpr costs many times more
    arr = (z3.Ast * len(formulas))(*(f.as_ast() for f in formulas))
    text = z3.Z3_benchmark_to_smtlib_string(ctx.ref(), "", "", "unknown", "", len(formulas), arr,
                                            z3.BoolVal(True, ctx).as_ast())
    lines, names = [], set(declared)
    for line in text.splitlines(keepends=True):
        if line.startswith(("(check-sat", "(set-info")):
            continue
        if line.startswith(_DECLARE):
            name = _declared_name(line)
            if name in names:
                continue
            names.add(name)
        lines.append(line)
    return "".join(lines), frozenset(names)


def _declared_name(line: str) -> str:
    rest = line[len(_DECLARE):]
    if rest.startswith("|"):
        return rest[: rest.index("|", 1) + 1]
    return rest.split(" ", 1)[0]
