"""The Z3 engine's counters that :func:`smtdims.stats` reports, and the one lock of every reported
counter: a module of their own, since every part of the engine counts (solvers, checks, deadlines,
workers, heap trims)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from .. import clocks, forking

# The one lock of every counter :func:`smtdims.stats` reports: the solver counters here and the rungs'
# answer counts (``smtdims.scope.STATS``). ``+=`` alone loses counts between threads; the counters are
# one resource (one report), so one lock, held for a single addition.
COUNTS_LOCK = forking.fork_safe(threading.Lock())


@dataclass
class SolverCounters:
    """Process-wide counters reported by :func:`smtdims.stats`."""

    solvers_created: int = 0
    solver_checks: int = 0
    solver_unknowns: int = 0
    fresh_contexts: int = 0
    deadline_hits: int = 0
    interrupts: int = 0  # checks cut by Ctrl-C
    abandoned_checks: int = 0  # checks whose Z3 worker was killed past the deadline (Z3 ignored the interrupt)
    workers_down: int = 0  # checks answered "unknown" (deadline) because no Z3 worker could start just then
    heap_trims: int = 0  # freed memory given back to the system after Z3 sides were released

    def bump(self, name: str, by: int = 1) -> None:
        with COUNTS_LOCK:
            setattr(self, name, getattr(self, name) + by)

    def checked(self, ask: clocks.QuestionState) -> None:
        """One more Z3 check, in the process's counters and in the question's own (``ask.checks``:
        whether a rung's answer came from Z3, :meth:`smtdims.scope._Stats.answered`)."""
        self.bump("solver_checks")
        ask.checks += 1

    def reset(self) -> None:
        with COUNTS_LOCK:
            self.solvers_created = self.solver_checks = self.solver_unknowns = 0
            self.fresh_contexts = self.deadline_hits = self.interrupts = self.abandoned_checks = 0
            self.workers_down = self.heap_trims = 0


COUNTERS = SolverCounters()
