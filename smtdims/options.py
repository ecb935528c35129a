"""The limits a question runs under: process defaults and scoped overrides.

Two limits bound every question:

- ``budget``: Z3's ``rlimit`` per check. Deterministic: the same question with the same
  budget gets the same answer. It is the primary limit.
- ``deadline``: wall-clock seconds per question (a public call, or one question JAX asks).
  A backstop: Z3 does not consult ``rlimit`` in some nonlinear loops (Grobner bases,
  polynomial factorisation), and one check has run for minutes. When the deadline
  passes, the watchdog (:mod:`smtdims.watchdog`) interrupts the running check, and the
  question is answered "unknown" / with its sound looser bound, reason ``deadline``
  (the question's clock and state: :mod:`smtdims.clocks`).

Defaults are process-wide (``install(budget=..., deadline=...)`` sets them); ``scoped``
overrides them for a block, per thread and per async task (``contextvars``), so nothing
is saved and restored by hand.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

DEFAULT_BUDGET = 5_000_000  # Z3 rlimit per check: deterministic, up to about a second of work
DEFAULT_DEADLINE = 10.0  # seconds per question: a backstop, not the budget


@dataclass(frozen=True)
class Options:
    """The limits a question runs under."""

    budget: int = DEFAULT_BUDGET
    deadline: float = DEFAULT_DEADLINE
    presburger: bool = True  # the ISL rung (smtdims.engines.presburger) where islpy is installed

    def __post_init__(self) -> None:
        check_budget(self.budget)
        check_deadline(self.deadline)
        check_flag("presburger", self.presburger)


def check_budget(budget: Any) -> int:
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ValueError(f"budget must be a positive int (a Z3 rlimit per check, e.g. {DEFAULT_BUDGET}), got {budget!r}")
    return budget


def check_deadline(deadline: Any) -> float:
    if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not deadline > 0 or math.isnan(deadline):
        raise ValueError(f"deadline must be a positive number of seconds (e.g. {DEFAULT_DEADLINE}), got {deadline!r}")
    return float(deadline)


def check_flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


_DEFAULTS = [Options()]  # a one-cell box: replaced whole, read without a lock
_SCOPED: contextvars.ContextVar[Options | None] = contextvars.ContextVar("smtdims_options", default=None)


def current() -> Options:
    """The options in force here: the innermost :func:`scoped` block, else the process defaults."""
    o = _SCOPED.get()
    return o if o is not None else _DEFAULTS[0]


def _overrides(budget: int | None, deadline: float | None, presburger: bool | None = None) -> dict[str, Any]:
    """The given limits, validated; None means "keep what is in force"."""
    kw: dict[str, Any] = {}
    if budget is not None:
        kw["budget"] = check_budget(budget)
    if deadline is not None:
        kw["deadline"] = check_deadline(deadline)
    if presburger is not None:
        kw["presburger"] = check_flag("presburger", presburger)
    return kw


def set_defaults(*, budget: int | None = None, deadline: float | None = None, presburger: bool | None = None) -> Options:
    """Change the process-wide defaults (``install(budget=..., deadline=...)``).

    ``presburger=False`` turns off the ISL rung (:mod:`smtdims.engines.presburger`): every exact
    bound then comes from Z3, e.g. to cross-check the two engines.
    """
    _DEFAULTS[0] = replace(_DEFAULTS[0], **_overrides(budget, deadline, presburger))
    return _DEFAULTS[0]


@contextmanager
def scoped(*, budget: int | None = None, deadline: float | None = None,
           presburger: bool | None = None) -> Iterator[Options]:
    """Override the budget, the deadline and/or the ISL rung for the block (this thread / task only)."""
    kw = _overrides(budget, deadline, presburger)
    # the options in force, pinned for the block (a copy only where something is overridden: every
    # public call opens this block, most with no override)
    token = _SCOPED.set(replace(current(), **kw) if kw else current())
    try:
        yield current()
    finally:
        _SCOPED.reset(token)


class _Config:
    """Backwards-compatible view of the process defaults (``CONFIG.budget``)."""

    @property
    def budget(self) -> int:
        return current().budget

    @budget.setter
    def budget(self, value: int) -> None:
        set_defaults(budget=value)

    @property
    def deadline(self) -> float:
        return current().deadline

    @deadline.setter
    def deadline(self, value: float) -> None:
        set_defaults(deadline=value)


CONFIG = _Config()
