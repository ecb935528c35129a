"""``smtdims check-constraints``: whether constraints can all hold; if not, a minimal conflict; if so,
the redundant ones, the fixed variables and each variable's range."""

from __future__ import annotations

import argparse

from ..answers import diagnostics
from ..errors import UnsatisfiableConstraintsError
from ..lang.constraints import ConstraintSet
from .common import (
    EXIT_FALSE,
    EXIT_TRUE,
    EXIT_UNKNOWN,
    Answer,
    budget_of,
    constraints_option,
    emit,
    unknown_info,
    wants_smtlib,
)
from .smtlib import constraints_script

NAME = "check-constraints"


def add_parser(subs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = subs.add_parser(NAME, parents=[common],
                        usage="smtdims check-constraints [options] [CONSTRAINT ...] [-c CONSTRAINT ...]",
                        help="unsatisfiable subsets, redundant constraints, fixed variables",
                        description="With --json: constraints, satisfiable, example (a valuation that meets them), "
                                    "redundant (text, implied_by), fixed, ranges ([lo, hi] per variable), reason, "
                                    "deterministic, budget, deadline, and clean (true when satisfiable, nothing "
                                    "redundant and no variable fixed: nothing to change); an unsatisfiable set "
                                    "prints constraints, satisfiable false and conflict (a minimal conflicting subset).")
    p.add_argument("positional", nargs="*", metavar="CONSTRAINT",
                   help="the constraints to check (each one argument; -c CONSTRAINT works too)")
    constraints_option(p)


def run(args: argparse.Namespace) -> int:
    cs = ConstraintSet.of([*args.positional, *args.constraint])
    budget = budget_of(args)
    try:
        report = diagnostics.check_constraints(cs, budget=budget)
    except UnsatisfiableConstraintsError as err:
        # A diagnosis, not an input error: the minimal conflict, status 1 ("false").
        texts = [c.text for c in cs]
        text = (f"constraints: {', '.join(texts) or 'none'}\n"
                "  unsatisfiable: no dimension values >= 1 meet them all\n"
                f"  minimal conflict: {'; '.join(err.conflict)}\n"
                "  remove or relax one of these")
        data = {"constraints": texts, "satisfiable": False, "conflict": list(err.conflict)}
        script = constraints_script(cs, False, budget) if wants_smtlib(args) else None
        return emit(args, [Answer(text, data, script, EXIT_FALSE)])
    script = constraints_script(cs, report.satisfiable, budget) if wants_smtlib(args) else None
    data = report.to_dict()
    if report.satisfiable is None:
        data["unknown"] = unknown_info(report.reason, report.budget, report.deadline)
        return emit(args, [Answer(str(report), data, script, EXIT_UNKNOWN)])
    return emit(args, [Answer(str(report), data, script, EXIT_TRUE)])
