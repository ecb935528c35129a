"""The kinds of refused export, each a class that carries what JAX asked and owns its fix generator.

A refused export (an :class:`~.fixes.Attempt`) is read once into its refusals, in the order the fix
loop takes them (:func:`refusals_of`):

- :class:`Inconclusive`: a comparison ``lhs >= rhs`` JAX asked and smtdims could not decide;
- :class:`UnprovenEquation`: the last equalities JAX's shape checks asked and smtdims could not prove
  (a broadcast, concatenate, split or reshape needed the last one);
- :class:`Indivisible`: a reshape's "The remainder mod(E, k) should be 0" (:class:`UnreadableRemainder`
  where the remainder is not one ``mod`` by a constant: no fix);
- :class:`BroadcastMismatch`: two sizes a broadcast could not match, read from JAX's message;
- :class:`ConstantNeeded`: a dimension used as a number (``int(n)``, ``range(n)``), which no
  constraint or rewrite fixes (the loop fixes a variable's value: :func:`~.fixes.specialisations`).

Each offers its verified fixes (:meth:`Refusal.fixes`: every one re-decided by smtdims with the fix
in place) and, where nothing weaker survives, a last resort (:meth:`Refusal.last_resort`: a fixed
size). Adding a kind is a class here and its place in :func:`refusals_of`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from smtdims.answers.equations import (
    equation_family_fix,
    equation_fixes,
    fix_rank,
    fix_text,
    fixed_size_fix,
    normalise_constraint,
    render_constraint,
)
from smtdims.answers.fixes import SPEC, Fix, proves_with, suggest_fixes
from smtdims.errors import SmtdimsError
from smtdims.lang.constraints import Constraint
from smtdims.lang.expr import FLOORDIV, MAX, MIN, MOD, Expr, Op
from smtdims.lang.parser import parse_expr
from smtdims.reasoner import Session

from .report import first_line


class Why(enum.StrEnum):
    """Why a part may exclude shapes where the function runs: what the verdict reads (never the note's
    words), and the reason the report gives for each shape it excludes."""

    NONE = ""  # nothing beyond the refusal: an excluded shape that runs makes the fix narrower than needed
    NUMBER = "number"  # the program uses the size as a Python number: one size, by necessity
    BRANCH = "branch"  # the program branches on a shape comparison there: the other sizes take another path
    EQUATION = "equation"  # one class of solutions of an equation no constraint JAX takes admits whole
    NAN = "nan"  # past it the program computes NaN everywhere (measured by running it)


@dataclass(frozen=True)
class FixPart:
    """One part of a fix: a constraint (``text``) or a spec rewrite (write ``text`` for ``variable``);
    ``why``: what it may exclude beyond the refusal, and why (:class:`Why`)."""

    kind: str  # "constraint" | "spec"
    text: str
    variable: str | None = None
    note: str = ""
    why: Why = Why.NONE
    # with Why.EQUATION: the equation (a constraint's text) whose other solutions it excludes; with Why.BRANCH:
    # the comparisons the program branched on
    because: str = ""

    def __str__(self) -> str:
        return fix_text(self.kind, self.text, self.variable)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "variable": self.variable, "note": self.note,
                "why": self.why.value, "because": self.because}


Candidate = tuple[tuple[FixPart, ...], int]  # the parts applied together, and a tie-break rank (lower first)

REMAINDER_RE = re.compile(r"The remainder (.+?) should be 0")
BROADCAST_RE = re.compile(r"incompatible shapes for broadcasting: (\(.*?\)), (\(.*?\))")
# JAX's words when a program uses a dimension as a number: int(n), math.sqrt(n), range(n), np.arange(n), and a
# value computed from a dimension used where a Python number must be (attention's 1/sqrt(head_dim) as a float).
# The last is also what a data-dependent branch raises: a fixed size is kept only where the export then gets
# past the refusal (tried), so a refusal no size settles gets none.
CONSTANT_NEEDED = ("_DimExpr", "requires a constant", "'dim_as_value'",
                   "Abstract tracer value encountered where concrete value is expected")
_DIVISIBILITY_ATOMS = 8  # floordiv/mod atoms at most: each is one more proof in the minimisation


class _Fixes:
    """The candidates of one refusal, each group once, in the order offered."""

    def __init__(self) -> None:
        self.out: list[Candidate] = []
        self._seen: set[tuple[tuple[str, str, str | None], ...]] = set()

    def group(self, parts: Sequence[FixPart], rank: int) -> None:
        key = tuple((p.kind, p.text, p.variable if p.kind == SPEC else None) for p in parts)
        if key not in self._seen:
            self._seen.add(key)
            self.out.append((tuple(parts), rank))

    def add(self, kind: str, text: str, variable: str | None, note: str, rank: int) -> None:
        self.group([FixPart(kind, text, variable, note)], rank)


class Refusal:
    """A kind of refused export. ``FALLS_THROUGH``: where it offers no fix, the next refusal of the
    same export may (an equation none settles, then the message's own words); otherwise its fixes,
    even none, are the export's."""

    FALLS_THROUGH: ClassVar[bool] = False

    def key(self) -> tuple[str, str] | None:
        """What it is, for "the same refusal came back" (None: the message's first line says it)."""
        return None

    def fixes(self, session: Session) -> list[Candidate]:
        return []

    def last_resort(self, session: Session) -> list[Candidate] | None:
        """A fixed size where no fix survives; None where this kind has no last resort."""
        return None

    def sides(self) -> tuple[Expr, ...]:
        """The sizes an equation of this refusal compared (a broadcast's two): none for a comparison."""
        return ()


@dataclass(frozen=True)
class Inconclusive(Refusal):
    lhs: Expr
    rhs: Expr

    def key(self) -> tuple[str, str]:
        return ("comparison", f"{self.lhs} >= {self.rhs}")

    def fixes(self, session: Session) -> list[Candidate]:
        out = _Fixes()
        for op in (">=", "<"):  # settling either direction settles the comparison JAX asked
            try:
                found = suggest_fixes(session, self.lhs, op, self.rhs)
            except SmtdimsError:
                found = []
            for f in found:
                out.add(f.kind, f.text if f.kind == SPEC else normalise_constraint(f.text), f.variable, f.note,
                        fix_rank(f))
        return out.out


@dataclass(frozen=True)
class UnprovenEquation(Refusal):
    equations: tuple[tuple[Expr, Expr], ...]  # oldest first; the refused shape check needed the last

    FALLS_THROUGH: ClassVar[bool] = True

    def key(self) -> tuple[str, str]:
        lhs, rhs = self.equations[-1]
        return ("equation", f"{lhs} == {rhs}")

    def fixes(self, session: Session) -> list[Candidate]:
        out = _Fixes()
        for lhs, rhs in reversed(self.equations[-2:]):  # the last equation; the one before if it has none
            for kind, text, variable, note, rank in equation_fixes(session, lhs, rhs):
                out.add(kind, text, variable, note, rank)
            for texts in divisibility_fixes(session, lhs, rhs):
                # after the equation's own fixes at equal box scores: they name fewer atoms; the
                # divisibilities of variables as the rewrites a person writes (7*h for h) first, which
                # JAX takes where it may refuse the mod constraint or fail to use it in a reshape
                rewrites = as_rewrites(texts)
                if rewrites is not None:
                    out.group(rewrites, 2)
                out.group([FixPart("constraint", t, None, "a floor division in the equation is exact") for t in texts], 3)
            if out.out:
                break
        return out.out

    def last_resort(self, session: Session) -> list[Candidate]:
        return _fixed_size(session, *self.equations[-1])

    def sides(self) -> tuple[Expr, ...]:
        return self.equations[-1]


@dataclass(frozen=True)
class Indivisible(Refusal):
    """A reshape's "The remainder ``mod(E, k)`` should be 0": ``E`` must be a multiple of ``k``."""

    dividend: Expr
    k: int

    @staticmethod
    def parse(remainder: str) -> Indivisible | None:
        """The refusal from the remainder JAX names, where it is one ``mod`` by a constant of at least 2."""
        try:
            e = parse_expr(remainder)
        except SmtdimsError:
            return None
        atoms = [a for a in e.atoms() if isinstance(a, Op) and a.op == MOD]
        if len(atoms) != 1 or e != Expr.atom(atoms[0]):
            return None
        k = atoms[0].rhs.as_constant()
        if k is None or abs(k) < 2:
            return None
        return Indivisible(atoms[0].lhs, abs(k))

    @property
    def target(self) -> Expr:
        return self.dividend.mod(self.k)  # mod(E, -k) == 0 exactly when mod(E, k) == 0

    def rewrites(self, session: Session) -> list[Fix]:
        """smtdims' verified fixes of ``mod(E, k) == 0`` (spec rewrites ``v -> m*v`` among them)."""
        try:
            return suggest_fixes(session, self.target, "==", Expr.const(0))
        except SmtdimsError:
            return []

    def fixes(self, session: Session) -> list[Candidate]:
        out = _Fixes()
        for f in self.rewrites(session):
            out.add(f.kind, f.text, f.variable, f.note, 0 if f.kind == SPEC else 1)  # divisibility: a rewrite first
        trials = []
        for a in sorted(self.dividend.atoms(), key=lambda a: a.sort_key()):
            if isinstance(a, Op) and a.op in (MIN, MAX):  # settle min/max on one side: min(a + b, 16) -> a + b >= 16
                trials += [Constraint.make(a.lhs, ">=", a.rhs), Constraint.make(a.lhs, "<=", a.rhs)]
        if not any(isinstance(a, Op) and a.op in (MIN, MAX) for a in self.dividend.atoms()):
            trials.append(Constraint.make(self.target, "==", Expr.const(0)))
        for c in trials:
            text = render_constraint(c.diff, c.kind) if c.diff.is_linear() else c.text
            try:
                if proves_with(session, self.target, "==", Expr.const(0), [Constraint.parse(text)]):
                    out.add("constraint", text, None, f"makes {self.dividend} a multiple of {self.k}", 1)
            except SmtdimsError:
                continue
        return out.out


@dataclass(frozen=True)
class UnreadableRemainder(Refusal):
    """A reshape's remainder this module cannot read as one ``mod`` by a constant: no fix offered."""

    remainder: str


@dataclass(frozen=True)
class BroadcastMismatch(Refusal):
    """Two sizes a broadcast could not match (the rightmost pair that differs, neither 1: numpy
    broadcasting aligns on the right), read from JAX's message."""

    x: Expr
    y: Expr

    @staticmethod
    def read(message: str) -> BroadcastMismatch | None:
        bc = BROADCAST_RE.search(message)
        if not bc:
            return None
        try:
            a = [parse_expr(x) for x in bc.group(1).strip("()").split(",") if x.strip()]
            b = [parse_expr(x) for x in bc.group(2).strip("()").split(",") if x.strip()]
        except SmtdimsError:
            return None
        for x, y in zip(reversed(a), reversed(b), strict=False):
            if x != y and x.as_constant() != 1 and y.as_constant() != 1:
                return BroadcastMismatch(x, y)
        return None

    def fixes(self, session: Session) -> list[Candidate]:
        out = _Fixes()
        for v, other in ((self.x.as_var(), self.y), (self.y.as_var(), self.x)):
            if v is not None and v not in other.variables():
                out.add(SPEC, str(other), v, f"so that {v} equals {other}", 0)
        out.add("constraint", render_constraint(self.x - self.y, "=="), None, "the two sizes are equal", 1)
        return out.out

    def last_resort(self, session: Session) -> list[Candidate]:
        return _fixed_size(session, self.x, self.y)

    def sides(self) -> tuple[Expr, ...]:
        return (self.x, self.y)


@dataclass(frozen=True)
class ConstantNeeded(Refusal):
    """A dimension used as a number: no constraint or rewrite offered here (the loop fixes the value)."""

    words: str = ""  # the first line of JAX's message: what it is, for "the same refusal came back"

    @staticmethod
    def read(message: str) -> ConstantNeeded | None:
        return ConstantNeeded(first_line(message, 300)) if any(m in message for m in CONSTANT_NEEDED) else None

    def key(self) -> tuple[str, str]:
        return ("number", self.words)


def refusals_of(question: tuple[Expr, Expr] | None, equations: tuple[tuple[Expr, Expr], ...],
                message: str) -> tuple[Refusal, ...]:
    """The refusals of one refused export, in the order the fix loop takes them. ``message``: the
    error's text with the errors it was raised from (a framework's re-raise keeps JAX's there)."""
    out: list[Refusal] = []
    if question is not None:
        out.append(Inconclusive(*question))
    needed = ConstantNeeded.read(message) if question is None else None
    if needed is not None:  # its own words come first: an equation asked earlier is not what stopped it
        out.append(needed)
    if equations:
        out.append(UnprovenEquation(equations))
    rem = REMAINDER_RE.search(message)
    if rem is not None:
        out.append(Indivisible.parse(rem.group(1)) or UnreadableRemainder(rem.group(1)))
    pair = BroadcastMismatch.read(message)
    if pair is not None:
        out.append(pair)
    return tuple(out)


def candidates_of(refusals: Sequence[Refusal], session: Session) -> list[Candidate]:
    """Verified fixes of the first refusal that offers any (or whose fixes, even none, are final)."""
    for r in refusals:
        found = r.fixes(session)
        if found or not r.FALLS_THROUGH:
            return found
    return []


def last_resort_of(refusals: Sequence[Refusal], session: Session) -> list[Candidate]:
    """The last resort of the first refusal that has one."""
    for r in refusals:
        got = r.last_resort(session)
        if got is not None:
            return got
    return []


def _fixed_size(session: Session, lhs: Expr, rhs: Expr) -> list[Candidate]:
    """Where nothing weaker survives: the family of the equation's parts held at a size where it holds
    (two strided 'same' convs: ``h, w`` in 25..28), then the size a person fixes (a ViT's 224, that
    conv's 28). Both exclude the equation's other solutions by necessity (:attr:`Why.EQUATION`)."""
    out: list[Candidate] = []
    for rank, parts in ((3, equation_family_fix(session, lhs, rhs)), (4, fixed_size_fix(session, lhs, rhs))):
        if parts:
            equation = render_constraint(lhs - rhs, "==")
            out.append((tuple(FixPart(*p, Why.EQUATION, equation) for p in parts), rank))
    return out


def divisibility_rewrite(text: str) -> FixPart | None:
    """``mod(v, k) == 0`` on a variable ``v`` (``|k| >= 2``) as the rewrite ``k*v`` for ``v`` (the form
    JAX's documentation teaches, and one JAX accepts where it refuses a ``mod`` constraint); else None.

    Sound: for integers ``v >= 1``, ``mod(v, k) == 0`` holds exactly for ``v = k*v'`` with ``v' >= 1``.
    """
    try:
        c = Constraint.parse(text)
    except SmtdimsError:
        return None
    atom = None
    if len(c.diff.terms) == 1 and abs(c.diff.terms[0][1]) == 1 and len(c.diff.terms[0][0]) == 1:
        a, power = c.diff.terms[0][0][0]
        atom = a if power == 1 else None
    k = atom.rhs.as_constant() if isinstance(atom, Op) and atom.op == MOD else None
    v = atom.lhs.as_var() if k is not None else None
    if c.kind == "==" and v is not None and k is not None and abs(k) >= 2:
        return FixPart(SPEC, f"{abs(k)}*{v}", v, f"so that {v} is a multiple of {abs(k)}")
    return None


def as_rewrites(texts: Sequence[str]) -> list[FixPart] | None:
    """Every ``mod(v, k) == 0`` as its rewrite ``k*v`` (:func:`divisibility_rewrite`); None unless each is one."""
    parts = [divisibility_rewrite(t) for t in texts]
    return [p for p in parts if p is not None] if all(p is not None for p in parts) else None


def divisibility_fixes(session: Session, lhs: Expr, rhs: Expr) -> list[tuple[str, ...]]:
    """The fewest exact-division constraints under which smtdims proves ``lhs == rhs``, as one group.

    A reshape after a strided conv, a pool or a patchify asks ``P*Q == 16*floordiv(P, 4)*floordiv(Q, 4)``:
    true exactly when each ``floordiv(X, k)`` in it divides exactly, ``mod(X, k) == 0`` (then
    ``k*floordiv(X, k) == X``). Every ``floordiv``/``mod`` by a constant in the equation, nested ones
    included, gives one such constraint; if all of them together prove the equation, each is dropped in
    turn (innermost first, so ``mod(P, 4) == 0`` stays and ``mod(h - 3, 2) == 0`` goes) while the rest
    still prove it. Each group is re-decided with :func:`proves_with`, as every fix is.
    """
    found: list[tuple[int, Expr, int]] = []  # (depth, dividend, divisor)

    def walk(e: Expr, depth: int) -> None:
        for a in e.atoms():
            if isinstance(a, Op):
                k = a.rhs.as_constant() if a.op in (FLOORDIV, MOD) else None
                if k is not None and abs(k) >= 2 and (a.lhs, abs(k)) not in [(x, y) for _, x, y in found]:
                    found.append((depth, a.lhs, abs(k)))
                walk(a.lhs, depth + 1)
                walk(a.rhs, depth + 1)

    walk(lhs - rhs, 0)
    if not found or len(found) > _DIVISIBILITY_ATOMS:
        return []
    found.sort(key=lambda x: x[0])  # outermost first
    # k divides X exactly when it divides -X: the side with fewer negative terms reads better (mod(h, 2), not mod(-h, 2))
    conds = [Constraint.make((-x if sum(c < 0 for _, c in x.terms) > sum(c > 0 for _, c in x.terms) else x).mod(k),
                             "==", Expr.const(0)) for _, x, k in found]
    if not proves_with(session, lhs, "==", rhs, conds):
        return []
    kept = list(conds)
    for c in reversed(conds):  # innermost first
        trial = [x for x in kept if x is not c]
        if trial and proves_with(session, lhs, "==", rhs, trial):
            kept = trial
    return [tuple(normalise_constraint(c.text) for c in kept)]


def message_key(message: str) -> tuple[str, str]:
    return ("message", first_line(message, 300))
