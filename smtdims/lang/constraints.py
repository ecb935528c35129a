"""Constraint sets: user constraints ``e1 >= e2``, ``e1 <= e2``, ``e1 == e2`` plus ``v >= 1``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .expr import MAX, MIN, Expr, Op, all_variables
from .memos import PARSE_CACHE_SIZE, SizedMemo, sized_memo
from .parser import parse_constraint

if TYPE_CHECKING:
    from ..clocks import Deadline

_MISSING = object()


@dataclass(frozen=True, slots=True)
class Constraint:
    """``diff >= 0`` (kind ``">="``) or ``diff == 0`` (kind ``"=="``), keeping the user's text."""

    diff: Expr
    kind: str
    text: str

    @staticmethod
    def make(lhs: Expr, op: str, rhs: Expr, text: str | None = None) -> Constraint:
        text = text if text is not None else f"{lhs} {op} {rhs}"
        if op == ">=":
            return Constraint(lhs - rhs, ">=", text)
        if op == "<=":
            return Constraint(rhs - lhs, ">=", text)
        if op == "==":
            return Constraint(lhs - rhs, "==", text)
        raise ValueError(f"unsupported constraint comparison {op!r} in {text!r}; use >=, <= or ==")

    @staticmethod
    def parse(text: str) -> Constraint:
        if isinstance(text, str):
            return CONSTRAINT_MEMO(text)
        lhs, op, rhs = parse_constraint(text)  # raises the TypeError that names the input
        return Constraint.make(lhs, op, rhs, text.strip())

    def holds(self, env: Mapping[str, int]) -> bool:
        value = self.diff.evaluate(env)
        return value >= 0 if self.kind == ">=" else value == 0

    def __str__(self) -> str:
        return self.text

    def parts(self) -> tuple[Constraint, ...]:
        """Constraints whose conjunction is equivalent to this one, with no ``max``/``min`` that splits.

        ``max(x, y) <= z + 4`` is ``x <= z + 4 and y <= z + 4``: solvers and the interval rung
        then see linear facts instead of a case split (at hundreds of variables and
        constraints, a check split costs tens of times less than one with the ``If`` terms).
        """
        return _parts(self)


MAX_PARTS = 32  # max(a, b) + max(c, d) + ... <= z doubles per atom: past this, keep the case split


def _split(diff: Expr) -> list[Expr]:
    """Differences ``d_i`` with ``diff >= 0`` iff every ``d_i >= 0`` (where ``diff`` is defined).

    Rule: for a degree-1 term ``c*max(x, y)`` with ``c < 0``, ``rest + c*max(x, y) =
    min(rest + c*x, rest + c*y)`` at every valuation (multiplying by a negative ``c`` turns
    ``max`` into ``min``; ``rest`` is just a number there, whatever atoms it holds), and a
    ``min`` is ``>= 0`` iff both arguments are. The same for ``c*min(x, y)`` with ``c > 0``.
    The other sign is a disjunction and stays whole. Where the constraint is defined is still
    decided by the divisors of the whole ``diff`` (the encoder asserts them nonzero), not by a
    part's. Each step replaces an atom by one of its (smaller) arguments, so it terminates.
    """
    for m, c in diff.terms:
        if len(m) != 1 or m[0][1] != 1 or not isinstance(m[0][0], Op):
            continue
        a = m[0][0]
        if (a.op == MAX and c < 0) or (a.op == MIN and c > 0):
            rest = diff - Expr.atom(a) * c
            out = _split(rest + a.lhs * c) + _split(rest + a.rhs * c)
            return out if len(out) <= MAX_PARTS else [diff]
    return [diff]


@sized_memo(entries=8192, total=PARSE_CACHE_SIZE, size=lambda parts: sum(p.diff.size() for p in parts))
def _parts(c: Constraint) -> tuple[Constraint, ...]:
    if c.kind != ">=":
        return (c,)
    diffs = _split(c.diff)
    if len(diffs) == 1:
        return (c,)
    seen: dict[Expr, None] = dict.fromkeys(diffs)
    return tuple(Constraint(d, ">=", c.text) for d in seen)


def _parse_text(text: str) -> Constraint:
    lhs, op, rhs = parse_constraint(text)
    return Constraint.make(lhs, op, rhs, text.strip())


# text -> Constraint for Constraint.parse, bounded in size (a SizedMemo); a name of its own so that
# what it holds can be read (``held``, ``entries()``: diagnostics, tests/core/test_bounded_time.py)
CONSTRAINT_MEMO = SizedMemo(_parse_text, 8192, PARSE_CACHE_SIZE, lambda c: c.diff.size())


@dataclass(frozen=True, slots=True)
class ConstraintSet:
    """An immutable, hashable set of constraints over dimension variables (each >= 1)."""

    constraints: tuple[Constraint, ...] = ()
    # memoised on the set, not in a module cache: a module cache of sets keeps large scopes' constraints
    # alive long after their sessions are gone (tens of thousands of objects after a few thousand questions)
    _variables_memo: frozenset[str] | None = field(default=None, compare=False, repr=False)
    _parts_memo: tuple[Constraint, ...] | None = field(default=None, compare=False, repr=False)
    _index_memo: dict[str, tuple[int, ...]] | None = field(default=None, compare=False, repr=False)
    _derived_memo: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    _hash_memo: int | None = field(default=None, compare=False, repr=False)

    def __hash__(self) -> int:
        """The constraints' hash, kept: every public call looks its session up by its set, and
        hashing hundreds of constraints again costs a fraction of a millisecond a lookup."""
        h = self._hash_memo
        if h is None:
            h = hash(self.constraints)
            object.__setattr__(self, "_hash_memo", h)
        return h

    def __reduce__(self) -> tuple:
        """Copies and pickles carry the constraints alone: the memos are rebuilt on use (the derived
        facts hold locks and read-only views, which neither copy nor pickle)."""
        return (ConstraintSet, (self.constraints,))

    def derived(self, key: str, make: Callable[[ConstraintSet, Deadline], Any], clock: Deadline) -> Any:
        """``make(self, clock)``, once per set: facts that are pure functions of the constraints (the
        variables' ranges, the known satisfying points), shared by every session of this set (JAX's
        fresh scopes with the same constraints: converting and analysing them again was most of the
        first question's cost). ``make`` must not depend on earlier questions: what it returns is
        reused for every later question. One that the question's deadline (``clock``) cut short (a
        long sum's interval stops at it) is returned but not kept, as the answer caches do. Two
        threads may both compute it; either result is kept (equal values)."""
        memo = self._derived_memo
        if memo is None:
            memo = {}
            object.__setattr__(self, "_derived_memo", memo)
        got = memo.get(key, _MISSING)
        if got is _MISSING:
            got = make(self, clock)
            if not clock.expired:
                got = memo.setdefault(key, got)
        return got

    def has_derived(self, key: str) -> bool:
        """Whether :meth:`derived` made ``key`` for this set already (making it costs what it saves)."""
        memo = self._derived_memo
        return memo is not None and key in memo

    @staticmethod
    def of(items: Iterable[str | Constraint] | str | ConstraintSet = ()) -> ConstraintSet:
        if isinstance(items, ConstraintSet):
            return items
        if isinstance(items, str):
            raise TypeError(
                f"constraints must be a sequence of strings, got the single string {items!r}; "
                f"write constraints=({items!r},)"
            )
        out = []
        for c in items:
            out.append(c if isinstance(c, Constraint) else Constraint.parse(c))
        return ConstraintSet(tuple(out))

    def variables(self) -> frozenset[str]:
        v = self._variables_memo
        if v is None:
            v = all_variables(c.diff for c in self.constraints)
            object.__setattr__(self, "_variables_memo", v)
        return v

    def by_variable(self) -> dict[str, tuple[int, ...]]:
        """For each variable, the positions of the constraints that mention it (nested operands too)."""
        idx = self._index_memo
        if idx is None:
            acc: dict[str, list[int]] = {}
            for i, c in enumerate(self.constraints):
                for v in c.diff.variables():
                    acc.setdefault(v, []).append(i)
            idx = {v: tuple(ix) for v, ix in acc.items()}
            object.__setattr__(self, "_index_memo", idx)
        return idx

    def holds(self, env: dict[str, int]) -> bool:
        """Whether ``env`` (all variables >= 1) satisfies every constraint; zero divisors fail."""
        # loops, not any()/all() over generators: a known point is checked several times per fresh
        # question (the gate's guesses, the points at hand, each witness)
        for v in env.values():
            if v < 1:
                return False
        try:
            for c in self.constraints:
                if not c.holds(env):
                    return False
        except ZeroDivisionError:
            return False
        return True

    def failing(self, env: Mapping[str, int]) -> list[int]:
        """Positions of the constraints that do not hold at ``env`` (a zero divisor or a missing
        variable counts as failing); the implicit ``v >= 1`` is not among them."""
        bad = []
        for i, c in enumerate(self.constraints):
            try:
                ok = c.holds(env)
            except (ZeroDivisionError, KeyError):
                ok = False
            if not ok:
                bad.append(i)
        return bad

    def is_linear(self) -> bool:
        return all(c.diff.is_linear() for c in self.constraints)

    def parts(self) -> tuple[Constraint, ...]:
        """The constraints with splitting ``max``/``min`` split (:meth:`Constraint.parts`); same solutions."""
        p = self._parts_memo
        if p is None:
            p = tuple(q for c in self.constraints for q in c.parts())
            object.__setattr__(self, "_parts_memo", p)
        return p

    def __iter__(self):
        return iter(self.constraints)

    def __len__(self) -> int:
        return len(self.constraints)

