"""``smtdims decide``: decide comparisons for every valuation (true, false, undetermined, unknown)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ..lang.parser import COMPARISONS, parse_comparison
from ..lang.results import UNKNOWN
from .common import (
    EXIT_UNKNOWN,
    STATUS_EXIT,
    Answer,
    budget_of,
    comparison_text,
    constraints_option,
    emit,
    has_comparison,
    session_of,
    unknown_info,
    wants_smtlib,
    warn,
)
from .smtlib import decision_script

NAME = "decide"


def add_parser(subs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = subs.add_parser(
        NAME, parents=[common], help="decide comparisons for every valuation",
        usage="smtdims decide [options] (COMPARISON [COMPARISON ...] | LHS OP RHS)",
        description="When every argument contains a comparison operator, each argument is one query "
                    "('a >= 1' 'b <= a'); otherwise all arguments are joined into one comparison "
                    "('a + 1' '>=' b).")
    p.add_argument("comparison", nargs="+", metavar="COMPARISON",
                   help=f"a comparison such as 'a + 1 >= b'; OP is one of {' '.join(COMPARISONS)}")
    constraints_option(p)


def decide_queries(parts: Sequence[str]) -> list[str]:
    """``decide``'s arguments as comparison texts: when there are several arguments and every one
    contains a comparison operator, each is one query; otherwise they are joined into one."""
    if len(parts) > 1 and all(has_comparison(p) for p in parts):
        return list(parts)
    return [comparison_text(parts)]


def run(args: argparse.Namespace) -> int:
    session, cs = session_of(args)
    queries = [parse_comparison(text) for text in decide_queries(args.comparison)]
    warn(cs, [e for lhs, _, rhs in queries for e in (lhs, rhs)])
    answers = []
    for lhs, op, rhs in queries:
        d = session.decide(lhs, op, rhs)
        data = d.to_dict()
        if d.status == UNKNOWN:
            data["unknown"] = unknown_info(d.reason, d.budget, d.deadline)
        script = decision_script(cs, lhs, op, rhs, d.status, budget_of(args)) if wants_smtlib(args) else None
        answers.append(Answer(d.describe(), data, script, STATUS_EXIT.get(d.status, EXIT_UNKNOWN)))
    return emit(args, answers)
