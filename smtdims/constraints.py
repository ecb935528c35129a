"""Constraint sets: user constraints ``e1 >= e2``, ``e1 <= e2``, ``e1 == e2`` plus ``v >= 1``."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from .expr import Expr, all_variables
from .parser import parse_constraint


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
            return _parse_cached(text)
        lhs, op, rhs = parse_constraint(text)  # raises the TypeError that names the input
        return Constraint.make(lhs, op, rhs, text.strip())

    def holds(self, env: dict[str, int]) -> bool:
        value = self.diff.evaluate(env)
        return value >= 0 if self.kind == ">=" else value == 0

    def __str__(self) -> str:
        return self.text


@functools.lru_cache(maxsize=8192)
def _parse_cached(text: str) -> Constraint:
    lhs, op, rhs = parse_constraint(text)
    return Constraint.make(lhs, op, rhs, text.strip())


@dataclass(frozen=True, slots=True)
class ConstraintSet:
    """An immutable, hashable set of constraints over dimension variables (each >= 1)."""

    constraints: tuple[Constraint, ...] = ()

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
        return all_variables(c.diff for c in self.constraints)

    def holds(self, env: dict[str, int]) -> bool:
        """Whether ``env`` (all variables >= 1) satisfies every constraint; zero divisors fail."""
        if any(v < 1 for v in env.values()):
            return False
        try:
            return all(c.holds(env) for c in self.constraints)
        except ZeroDivisionError:
            return False

    def is_linear(self) -> bool:
        return all(c.diff.is_linear() for c in self.constraints)

    def __iter__(self):
        return iter(self.constraints)

    def __len__(self) -> int:
        return len(self.constraints)
