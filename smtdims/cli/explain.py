"""``smtdims explain``: why one decision came out as it did (the constraints a proof rests on, or
witnesses and verified fixes), or which constraints bound one expression."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ..answers.explain import explain_bounds, explain_decision
from ..lang.parser import parse_comparison, parse_expr
from ..lang.results import UNKNOWN
from .bounds import bounds_status
from .common import (
    EXIT_UNKNOWN,
    STATUS_EXIT,
    Answer,
    UsageError,
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
from .smtlib import bounds_script, decision_script

NAME = "explain"


def add_parser(subs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = subs.add_parser(NAME, parents=[common],
                        usage="smtdims explain [options] (COMPARISON | LHS OP RHS | EXPR)",
                        help="explain one decision (LHS OP RHS) or the bounds of one expression")
    p.add_argument("comparison", nargs="+", metavar="COMPARISON | EXPR",
                   help="the arguments are joined into one comparison or expression")
    constraints_option(p)


def one_query(parts: Sequence[str]) -> str:
    """``explain``'s arguments joined into one comparison or expression; several comparisons are
    a usage error that names ``decide``, which takes several."""
    if len(parts) > 1 and sum(has_comparison(p) for p in parts) > 1:
        raise UsageError(
            f"explain takes one comparison (or one expression), got {len(parts)}: "
            + ", ".join(repr(p) for p in parts)
            + "; explain them one at a time, or use 'smtdims decide' to decide several at once")
    return comparison_text(parts)


def run(args: argparse.Namespace) -> int:
    session, cs = session_of(args)
    text = one_query(args.comparison)
    if has_comparison(text):
        lhs, op, rhs = parse_comparison(text)
        warn(cs, [lhs, rhs])
        d = session.decide(lhs, op, rhs)
        ex = explain_decision(d)
        status = STATUS_EXIT.get(d.status, EXIT_UNKNOWN)
        data = ex.to_dict()
        if d.status == UNKNOWN:
            data["unknown"] = unknown_info(d.reason, d.budget, d.deadline)
        script = decision_script(cs, lhs, op, rhs, d.status, budget_of(args)) if wants_smtlib(args) else None
    else:
        e = parse_expr(text)
        warn(cs, [e])
        b = session.bounds(e, readable=True)
        ex = explain_bounds(b)
        status = bounds_status(b)
        data = ex.to_dict()  # the explanation says which limit left an end loose
        script = bounds_script(cs, e, repr(b), budget_of(args)) if wants_smtlib(args) else None
    return emit(args, [Answer(str(ex), data, script, status)])
