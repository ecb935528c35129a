"""The fixes of an equation JAX's shape checks needed, and the text a person writes for them.

JAX-free: the export pipeline's fix loop (``smtdims_jax.pipeline.fixes``) and the hint on a failed
broadcast inside ``jax.export`` (``smtdims_jax.adapter``) both read the equation a failed broadcast,
concatenate, split or reshape asked at the seam, and ask here for the constraints and spec rewrites
under which smtdims proves it. Every fix offered is re-decided (:func:`smtdims.answers.fixes.proves_with`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..errors import SmtdimsError
from ..lang.constraints import Constraint, ConstraintSet
from ..lang.expr import FLOORDIV, MAX, MIN, MOD, Atom, Expr, Op, Var
from ..reasoner import Session, session_for
from ..rungs.question import common_factor, divide_common
from .fixes import SPEC, divided_vars, proves_with, spec_rewrite_proves, suggest_fixes


def fix_text(kind: str, text: str, variable: str | None = None) -> str:
    """One fix in words: a constraint to add, or a spec rewrite (write ``text`` for ``variable``)."""
    if kind == SPEC:
        return f"write '{text}' in the shape specification in place of '{variable}'"
    return f"add the constraint '{text}'"


def exact_divisions(e: Expr) -> Expr:
    """``e`` with every ``floordiv(X, k)`` / ``mod(X, k)`` whose ``X`` is a multiple of the constant ``k``
    (every coefficient and the constant divisible by it) written out: ``X / k`` and ``0``. What a spec
    rewrite leaves behind (``floordiv(h, 8) <= 16`` with ``8*h`` for ``h`` reads ``h <= 16``). A
    constant multiple of ``k`` inside is moved out: ``floordiv(h - 8, 8)`` is ``floordiv(h, 8) - 1``
    (a VALID conv's output size reads as the patch count a person writes).

    Sound: for an integer ``Y``, ``floor(k*Y / k) == Y`` and ``mod(k*Y, k) == 0`` (Python's floor
    semantics, either sign of ``k``); and for integers ``X``, ``q``: ``floor((X + q*k) / k) ==
    floor(X / k) + q`` and ``mod(X + q*k, k) == mod(X, k)`` (``(X + q*k) / k = X / k + q``, and the
    floor of a real plus an integer is the floor plus that integer), with ``q, r = divmod(c, k)`` of
    the constant ``c`` of ``X``. Nested atoms are rewritten first, so the test sees the result.
    """
    def atom(a: Atom) -> Expr:
        if not isinstance(a, Op):
            return Expr.atom(a)
        lhs, rhs = exact_divisions(a.lhs), exact_divisions(a.rhs)
        k = rhs.as_constant()
        if a.op in (FLOORDIV, MOD) and k and all(c % k == 0 for _, c in lhs.terms):
            return Expr.from_coefficients({m: c // k for m, c in lhs.terms}) if a.op == FLOORDIV else Expr.const(0)
        if a.op in (FLOORDIV, MOD) and k and divmod(lhs.constant_part(), k)[0]:
            q, r = divmod(lhs.constant_part(), k)
            shifted = lhs - (lhs.constant_part() - r)
            return shifted.floordiv(rhs) + q if a.op == FLOORDIV else shifted.mod(rhs)
        return op_of(a.op, lhs, rhs)

    return map_atoms(e, atom)


def op_of(op: str, lhs: Expr, rhs: Expr) -> Expr:
    """The atom ``op(lhs, rhs)`` (floordiv, mod, max, min) as an expression."""
    return {FLOORDIV: lhs.floordiv, MOD: lhs.mod, MAX: lhs.max, MIN: lhs.min}[op](rhs)


def map_atoms(e: Expr, f: Callable[[Atom], Expr]) -> Expr:
    """``e``, a sum of products of atoms, with each atom ``a`` replaced by ``f(a)`` (``f`` rebuilds an
    operation's operands itself, where it rewrites inside them)."""
    total = Expr.const(0)
    for mono, coeff in e.terms:
        term = Expr.const(coeff)
        for a, power in mono:
            x = f(a)
            for _ in range(power):
                term = term * x
        total = total + term
    return total


def render_constraint(diff: Expr, kind: str) -> str:
    """``diff >= 0`` / ``diff == 0`` as a user writes it: positive terms left, the rest right, coefficients
    divided by their gcd (``2*b - 16 >= 0`` is ``b >= 8``: for an integer X, ``g*X + c >= 0`` iff
    ``X + floor(c/g) >= 0``; an equality is divided only when ``g`` divides its constant)."""
    const = diff.constant_part()
    coeffs = [c for m, c in diff.terms if m]
    g = math.gcd(*coeffs) if coeffs else 1
    if g > 1 and (kind == ">=" or const % g == 0):
        diff = Expr.from_coefficients({m: c // g for m, c in diff.terms if m}) + (const // g)
        const = diff.constant_part()
    pos = Expr.from_coefficients({m: c for m, c in diff.terms if m and c > 0})
    neg = Expr.from_coefficients({m: -c for m, c in diff.terms if m and c < 0})
    op = ">=" if kind == ">=" else "=="
    if not pos.terms and neg.terms:  # 1 - b >= 0 is b <= 1
        return f"{neg} {'<=' if op == '>=' else '=='} {const}"
    return f"{pos} {op} {neg - const}"


def normalise_constraint(text: str) -> str:
    try:
        c = Constraint.parse(text)
    except SmtdimsError:
        return text
    if c.diff.is_linear():
        return render_constraint(c.diff, c.kind)
    shifted = exact_divisions(c.diff)  # the same valuations (its proof); a product of patch counts reads as one
    return render_constraint(shifted, c.kind) if shifted != c.diff else text


def cancel_common_factor(e: Expr, d: Expr) -> tuple[Expr, Expr]:
    """``(e/g, d/g)`` for the largest ``g`` dividing every term of both: a positive integer (the gcd of
    the coefficients) times a product of variables (:func:`smtdims.rungs.question.common_factor`, the
    factor the ladder's sign reduction divides out of a division too).

    Why it is sound for ``mod(e, d) == 0``: variables are >= 1, so ``g >= 1`` and
    ``mod(g*x, g*y) == g*mod(x, y)`` (floor(g*x / (g*y)) == floor(x / y)); one is 0 exactly when
    the other is. This is how ``reshape(b, -1, 4)`` of ``(b, n)`` reads: ``mod(b*n, 4*b)`` is
    ``b*mod(n, 4)``; and ``reshape(b, -1, 64)`` of ``(b, n, 16)``: ``mod(16*b*n, 64*b)`` is
    ``16*b*mod(n, 4)``.
    """
    terms = e.terms + d.terms
    if not terms or any(not m for m, _ in terms):
        return e, d
    g, powers = common_factor(terms)
    if not powers and g <= 1:
        return e, d
    return divide_common(e, g, powers), divide_common(d, g, powers)


def fix_rank(f: Any) -> int:
    """The tie-break rank of a :class:`smtdims.answers.fixes.Fix` among equal box scores (lower first): a plain
    relation (the comparison itself), a bound on one variable, a spec rewrite, and last a relation that
    still holds max/min/floordiv/mod (harder to read, the same shapes)."""
    if f.kind == SPEC:
        return 2
    if not plain_constraint(f.text):
        return 3
    return 0 if f.variable is None else 1


def interval_form(text: str, others: ConstraintSet, budget: int | None = None) -> tuple[str, ...] | None:
    """The bounds a person writes for a constraint on one variable, where they say exactly the same:
    ``floordiv(floordiv(-w, 2), 2) == -7`` is ``w >= 25, w <= 28`` (two stride-2 'same' convolutions
    give 7 rows from 25 to 28 rows). None where the constraint is plain already, names several
    variables, or no interval is equivalent (``mod(t, 8) == 0``).

    Why it is sound: the bounds are the exact (tight) bounds of the variable under ``others`` and the
    constraint, so the constraint implies them; the converse is proven under ``others`` and the bounds
    (:func:`proves_with`). Equivalent under ``others``, the rewrite admits exactly the same shapes.
    """
    try:
        c = Constraint.parse(text)
    except SmtdimsError:
        return None
    names = c.diff.variables()
    if len(names) != 1 or plain_constraint(text):
        return None
    v = Expr.var(next(iter(names)))
    try:
        b = session_for(ConstraintSet(others.constraints + (c,)), budget, trial=True).bounds(v)
    except SmtdimsError:
        return None
    if not (b.lo_tight and b.hi_tight):
        return None
    out = tuple(t for t, end in ((f"{v} >= {b.lo}", b.lo), (f"{v} <= {b.hi}", b.hi))
                if isinstance(end, int) and not (t.endswith(">= 1") and end == 1))
    if not out:
        return None
    session = session_for(ConstraintSet(others.constraints + tuple(Constraint.parse(t) for t in out)), budget, trial=True)
    return out if proves_with(session, c.diff, "==" if c.kind == "==" else ">=", Expr.const(0)) else None


def plain_constraint(text: str) -> bool:
    """A constraint over variables only (no max/min/floordiv/mod atoms)."""
    try:
        c = Constraint.parse(text)
    except SmtdimsError:
        return False
    return all(not isinstance(a, Op) for a in c.diff.atoms())


def equation_fixes(session: Session, lhs: Expr, rhs: Expr) -> list[tuple[str, str, str | None, str, int]]:
    """Verified fixes under which smtdims proves ``lhs == rhs``: (kind, text, variable, note, rank).

    The equation is one JAX's shape check asked (a broadcast, a concatenate, a split, a reshape's
    remainder). Tried: settling each ``min``/``max`` on one side (``t == min(512, t)`` holds
    exactly when ``t <= 512``), every fix :func:`suggest_fixes` verifies (bounds, the relation
    itself, spec rewrites ``v -> m*v``), and writing one side for a variable that is the other
    (``c -> a`` for ``a == c``). A remainder ``mod(g*x, g*y) == 0`` is first reduced to
    ``mod(x, y) == 0`` (:func:`cancel_common_factor`). Each fix is re-decided before it is offered.
    """
    out: list[tuple[str, str, str | None, str, int]] = []
    goals = [(lhs, rhs)]
    diff = lhs - rhs
    remainder = False
    if rhs.as_constant() == 0 and len(diff.terms) == 1 and len(diff.terms[0][0]) == 1:  # k*mod(e, d) == 0
        a, power = diff.terms[0][0][0]
        if isinstance(a, Op) and a.op == MOD and power == 1:
            remainder = True
            e, d = cancel_common_factor(a.lhs, a.rhs)
            k = d.as_constant()
            # mod(e, -k) == 0 exactly when mod(e, k) == 0: the positive divisor reads better and gives rewrites
            goal = e.mod(abs(k)) if k is not None and k != 0 else e.mod(d)
            if goal != diff:
                goals.insert(0, (goal, Expr.const(0)))
    for glhs, grhs in goals:
        gdiff = glhs - grhs
        for a in sorted(gdiff.atoms(), key=lambda a: a.sort_key()):
            if isinstance(a, Op) and a.op in (MIN, MAX):
                for c in (Constraint.make(a.lhs, ">=", a.rhs), Constraint.make(a.lhs, "<=", a.rhs)):
                    text = render_constraint(c.diff, c.kind)
                    try:
                        if proves_with(session, glhs, "==", grhs, [Constraint.parse(text)]):
                            out.append(("constraint", text, None, f"settles {a}", 0 if plain_constraint(text) else 1))
                    except SmtdimsError:
                        continue
        try:
            fixes = suggest_fixes(session, glhs, "==", grhs)
        except SmtdimsError:
            fixes = []
        for f in fixes:
            rank = fix_rank(f)
            if remainder:  # a divisibility: the rewrite v -> m*v first, then the constraint
                rank = 0 if f.kind == SPEC else 1
            out.append((f.kind, f.text if f.kind == SPEC else normalise_constraint(f.text), f.variable, f.note, rank))
        for v, new, note in periodic_rewrites(session, glhs, grhs):
            out.append((SPEC, new, v, note, -1))  # before the equation as a constraint: the person's form
        for x, y in ((glhs, grhs), (grhs, glhs)):
            v = x.as_var()
            if v is not None and y.as_constant() is None and v not in y.variables():
                # before the same relation as a constraint (equal box scores): one variable fewer to explain
                out.append((SPEC, str(y), v, f"so that {v} equals {y}", -1))
        if out:
            break
    return out


PERIODIC_LIMIT = 1 << 12  # the largest size looked at for the sizes where a one-variable equation holds
PERIODIC_REPEATS = 3  # a residue class counts as periodic once it holds this many periods in a row up to the limit


def periodic_rewrites(session: Session, lhs: Expr, rhs: Expr) -> list[tuple[str, str, str]]:
    """Spec rewrites ``v -> m*v + c`` under which a one-variable equation holds: (v, text, note).

    A length computed from itself (an overlap-add's ``16*max(0, floordiv(n - 64, 16) + 1) + 48`` that
    must equal the signal's ``n``, a padded or framed size compared with the original) holds on a
    residue class mod ``m`` (a divisor of the equation) from some size up: ``n`` in 48, 64, 80, ....
    JAX cannot take such an equation as a constraint as written (it rewrites ``n`` by a right side
    that contains ``n``); a person writes ``16*k + 48``. The sizes up to :data:`PERIODIC_LIMIT` are
    evaluated to find the class and where it starts; that is only where the candidate comes from:
    each rewrite is then proven for every ``v >= 1`` (:func:`spec_rewrite_proves`), so nothing
    rests on the sizes looked at. The first size is one where no ``max`` against a constant is
    clamped (48 makes ``max(0, 0)``: zero frames, an empty intermediate), so the new variable counts
    something (``k`` frames).
    """
    diff = lhs - rhs
    names = diff.variables()
    if len(names) != 1:
        return []
    (v,) = names
    out: list[tuple[str, str, str]] = []
    consts = [abs(c) for a in diff.atoms() if isinstance(a, Op) for e in (a.lhs, a.rhs) for _, c in e.terms]
    for w, m in divided_vars(lhs, rhs):
        if w != v or m > PERIODIC_LIMIT // (2 * PERIODIC_REPEATS):
            continue
        top = min(PERIODIC_LIMIT, max(consts, default=0) + 2 * PERIODIC_REPEATS * m)

        def holds(x: int) -> bool:
            try:
                return diff.evaluate({v: x}) == 0
            except ZeroDivisionError:
                return False

        for r in range(m):
            x = top - ((top - r) % m)  # the largest size <= top in the class
            start = None
            while x >= 1 and holds(x):
                start, x = x, x - m
            if start is None or (top - start) // m + 1 < PERIODIC_REPEATS:
                continue
            while _clamped(diff, v, start) and (top - start) // m >= PERIODIC_REPEATS:
                start += m
            new = Expr.var(v) * m + (start - m)
            if new.as_var() is not None:
                continue  # every size: nothing to rewrite
            try:
                if spec_rewrite_proves(session, lhs, "==", rhs, v, new):
                    out.append((v, str(new), f"so that the equation holds: {v} in {start}, {start + m}, ..."))
            except SmtdimsError:
                continue
    return out


def _clamped(diff: Expr, v: str, x: int) -> bool:
    """Whether at ``v = x`` a ``max``/``min`` of ``diff`` against a constant gives that constant while the
    other side does not exceed it (``max(0, floordiv(x - 64, 16) + 1)`` at 48: zero frames)."""
    for a in diff.atoms():
        if isinstance(a, Op) and a.op in (MAX, MIN):
            for c, other in ((a.lhs, a.rhs), (a.rhs, a.lhs)):
                k = c.as_constant()
                if k is not None and other.as_constant() is None:
                    try:
                        y = other.evaluate({v: x})
                    except (ZeroDivisionError, KeyError):
                        continue
                    if (y <= k) if a.op == MAX else (y >= k):
                        return True
    return False


FIXED_SIZE_LIMIT = 1 << 14  # the largest size tried for a fixed-size fix (an image side of 16,384)


def _exact_divisions_at(e: Expr, env: dict[str, int]) -> bool:
    """Whether every ``floordiv(X, k)`` / ``mod(X, k)`` by a constant in ``e`` divides exactly at ``env``
    (nothing left over: a strided 'same' conv's 28 = 4*7, a patch embedding's 224 = 16*14)."""
    for a in e.atoms():
        if isinstance(a, Op) and a.op in (FLOORDIV, MOD):
            k = a.rhs.as_constant()
            try:
                if k and a.lhs.evaluate(env) % k:
                    return False
            except (ZeroDivisionError, KeyError):
                return False
    return True


def diagonal_sizes(diff: Expr, names: list[str]) -> list[int]:
    """The first run of consecutive sizes at which ``diff == 0`` with every variable equal (25..28 for
    two strided 'same' convs whose ceilings must give 7); empty where none up to the limit."""
    run: list[int] = []
    for v in range(1, FIXED_SIZE_LIMIT + 1):
        try:
            holds = diff.evaluate(dict.fromkeys(names, v)) == 0
        except ZeroDivisionError:
            holds = False
        if holds:
            run.append(v)
        elif run:
            break
    return run


def person_size(diff: Expr, names: list[str]) -> int | None:
    """The size a person pins for ``diff == 0`` on the diagonal: in :func:`diagonal_sizes`' run, the one
    where every division in it is exact (two 'same' convs to 7x7: 28; 16x16 patches: 224), else the run's
    first; None where the equation holds at no size up to the limit."""
    run = diagonal_sizes(diff, names)
    if not run:
        return None
    return next((x for x in run if _exact_divisions_at(diff, dict.fromkeys(names, x))), run[0])


def fixed_size_fix(session: Session, lhs: Expr, rhs: Expr) -> list[tuple[str, str, str, str]]:
    """The fix a person writes when a dimension must meet a constant and nothing weaker settles it:
    the size fixed (a ViT's learned table of 14x14 grid positions, a class token and 16x16 patches by
    a strided conv: ``(floordiv(h - 16, 16) + 1)*(floordiv(w - 16, 16) + 1) + 1 == 197`` holds for
    ``h, w`` in 224..239, a set no constraint JAX accepts says; the person writes 224 in the spec).

    The size is on the diagonal (a square image): among the first run of sizes at which the equation
    holds with every one of its variables equal, the one where every division in it is exact (224, not
    225..239; two strided 'same' convs to 7x7 give 28, the size they were built for, not 25), else the
    run's first. Each variable is then written as that size in the spec; verified like every fix
    (:func:`proves_with`: the equation, the constraints rewritten alike, satisfiable). One fix of
    several parts, (SPEC, size, variable, note) each, applied together; empty when there is none.
    """
    names = sorted(lhs.variables() | rhs.variables())
    if not names or len(names) > 4 or ((lhs - rhs).variables() != set(names)):
        return []
    size = person_size(lhs - rhs, names)
    if size is None:
        return []
    env = {n: Expr.const(size) for n in names}
    cs = ConstraintSet(tuple(Constraint(c.diff.substitute(env), c.kind, c.text) for c in session.constraints))
    try:
        if not proves_with(session, lhs.substitute(env), "==", rhs.substitute(env), replace=cs):
            return []
    except SmtdimsError:
        return []
    return [(SPEC, str(size), n, f"the size fixed: the equation holds at {size}") for n in names]


def equation_family_fix(session: Session, lhs: Expr, rhs: Expr) -> list[tuple[str, str, str, str]]:
    """The family around :func:`fixed_size_fix`'s size where the equation is a polynomial in parts of one
    variable each: each part held at its value there (two strided 'same' convs flattened into a Dense of
    784 = 16*7*7 need ``16*floordiv(floordiv(-h, 2), 2)*floordiv(floordiv(-w, 2), 2) == 784``; the fix is
    ``floordiv(floordiv(-h, 2), 2) == -7`` and the same for ``w``: every ``h, w`` in 25..28, the sizes
    whose two ceilings give 7, where the pin admits one). Empty where a part mixes variables, where every
    part is a bare variable (that family is the pin), or where the proof fails.

    Sound: the equation's two sides are polynomials in these parts; a valuation that gives every part
    its value at the diagonal size gives both sides their values there, where they are equal. The
    family is re-decided (:func:`proves_with`) all the same.
    """
    names = sorted(lhs.variables() | rhs.variables())
    if not names or len(names) > 4:
        return []
    diff = lhs - rhs
    parts: list[Op] = []
    for mono, _ in diff.terms:
        for a, _power in mono:
            if isinstance(a, Op):
                if len(Expr.atom(a).variables()) != 1:
                    return []  # a part of two variables (max(h, w)): no family of one-variable parts
                if a not in parts:
                    parts.append(a)
    if not parts:
        return []
    size = person_size(diff, names)
    if size is None:
        return []
    at = dict.fromkeys(names, size)
    try:
        extra = [Constraint.parse(render_constraint(Expr.atom(a) - Expr.atom(a).evaluate(at), "==")) for a in parts]
    except (SmtdimsError, ZeroDivisionError):
        return []
    # a variable that also appears bare keeps its value: the part holding it is the variable itself
    bare = sorted(v for v in names if any(len(m) and isinstance(x, Var) and x.name == v
                                           for m, _ in diff.terms for x, _p in m))
    extra += [Constraint.parse(f"{v} == {size}") for v in bare]
    try:
        if not proves_with(session, lhs, "==", rhs, extra=extra):
            return []
    except SmtdimsError:
        return []
    return [("constraint", c.text, None, f"each part of the equation held at its value at {size}") for c in extra]
