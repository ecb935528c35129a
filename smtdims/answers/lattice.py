"""Constraints that hold on one residue class of their variable, as the spec rewrite a person writes.

A fix loop that meets a two-level pool and upsample writes ``2*k_h`` for ``h`` and then needs ``k_h``
even, which it can only state as ``2*floordiv(-k_h, 2) == -k_h``; a person writes ``4*k`` (and stock
JAX exports that form, where it refuses a ``floordiv`` constraint). A U-Net's levels give several
such constraints on one size, which together say ``h`` is ``8*k + 4``. :func:`lattice_form` finds the
class and proves that the constraints say exactly that, so the rewrite admits the same shapes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..errors import SmtdimsError
from ..lang.constraints import Constraint, ConstraintSet
from ..lang.expr import FLOORDIV, MOD, Expr, Op
from ..reasoner import session_for
from .fixes import proves_with, spec_rewrite_proves

LATTICE_LIMIT = 1 << 12  # the sizes looked at for the class (where the candidate comes from; each is then proven)
LATTICE_REPEATS = 3  # members of the class seen up to the limit before it is tried


def _divisors(e: Expr) -> list[int]:
    """The constant divisors of ``e``'s ``floordiv``/``mod`` atoms (``atoms()`` holds the nested ones too)."""
    return [abs(k) for a in e.atoms() if isinstance(a, Op) and a.op in (FLOORDIV, MOD)
            for k in (a.rhs.as_constant(),) if k is not None and abs(k) >= 2]


def lattice_form(texts: Sequence[str], others: ConstraintSet, budget: int | None = None) -> tuple[str, Expr] | None:
    """``(v, m*v + c)``: the constraints ``texts``, each on the one variable ``v`` and at least one with a
    ``floordiv``/``mod``, hold together, under ``others``, exactly for ``v`` in ``m + c, 2*m + c, ...``;
    so writing ``m*v + c`` for ``v`` (``v >= 1`` again) in the specification, and dropping them, admits
    the same shapes. None where no residue class is equivalent to them (a strided 'same' conv's
    ``floordiv(-h, 2)`` even holds for ``h`` in 3, 4, 7, 8, ...: two classes), or a proof fails.

    The sizes up to :data:`LATTICE_LIMIT` only suggest the class (its least member and its step, the
    gcd of the members' distances); nothing rests on them. Why the rewrite is sound, both ways:
    - the class satisfies the constraints: each is proven with ``m*v + c`` for ``v``, for every
      ``v >= 1``, under the constraints of ``others`` that do not mention ``v`` (fewer assumptions: a
      stronger proof; :func:`.fixes.spec_rewrite_proves`);
    - they admit nothing else: under ``others`` and the constraints, ``v >= m + c`` and
      ``mod(v - (m + c), m) == 0`` are proven, so every such ``v`` is ``m*v' + c`` with ``v' >= 1``.
    """
    try:
        cs = [Constraint.parse(t) for t in texts]
    except SmtdimsError:
        return None
    names = set().union(*(c.diff.variables() for c in cs)) if cs else set()
    divisors = [k for c in cs for k in _divisors(c.diff)]
    if len(names) != 1 or not divisors:
        return None
    (v,) = names
    period = math.prod(divisors)
    top = min(LATTICE_LIMIT, max(64, (LATTICE_REPEATS + 2) * period))

    def holds(x: int) -> bool:
        try:
            return all(c.holds({v: x}) for c in cs)
        except ZeroDivisionError:
            return False

    members = [x for x in range(1, top + 1) if holds(x)]
    if len(members) < LATTICE_REPEATS:
        return None
    first = members[0]
    m = math.gcd(*(x - first for x in members[1:]))
    if m < 2 or members != list(range(first, top + 1, m))[:len(members)] or members[-1] + m <= top:
        return None  # not one class up to the limit: nothing to try
    new = Expr.var(v) * m + (first - m)
    apart = session_for(ConstraintSet(tuple(o for o in others.constraints if v not in o.diff.variables())), budget,
                        trial=True)
    within = session_for(ConstraintSet(others.constraints + tuple(cs)), budget, trial=True)
    x = Expr.var(v)
    try:
        if not all(spec_rewrite_proves(apart, c.diff, c.kind, Expr.const(0), v, new) for c in cs):
            return None
        if not (proves_with(within, x, ">=", Expr.const(first))
                and proves_with(within, (x - first).mod(Expr.const(m)), "==", Expr.const(0))):
            return None
    except SmtdimsError:
        return None
    return v, new


__all__ = ["LATTICE_LIMIT", "lattice_form"]
