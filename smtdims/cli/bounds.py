"""``smtdims bounds EXPR [EXPR ...]``: the tight bounds of each expression, one answer each."""

from __future__ import annotations

import argparse

from ..lang.constraints import ConstraintSet
from ..lang.expr import Expr
from ..lang.parser import parse_expr
from ..lang.results import Bounds
from ..reasoner import Session
from .common import (
    EXIT_TRUE,
    EXIT_UNKNOWN,
    Answer,
    budget_of,
    constraints_option,
    emit,
    session_of,
    wants_smtlib,
    warn,
)
from .smtlib import bounds_script

NAME = "bounds"


def add_parser(subs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = subs.add_parser(NAME, parents=[common], help="tight bounds of each expression")
    p.add_argument("expr", nargs="+", metavar="EXPR", help="one expression per argument, one answer each")
    constraints_option(p)


def bounds_status(b: Bounds) -> int:
    """0 when both ends are proven tight; otherwise unknown (4): an end may be loose."""
    return EXIT_TRUE if b.lo_tight and b.hi_tight else EXIT_UNKNOWN


def bounds_answer(args: argparse.Namespace, session: Session, cs: ConstraintSet, e: Expr) -> Answer:
    b = session.bounds(e, readable=True)
    status = bounds_status(b)
    text = b.describe() + (f"\n  an end is not proven tight: {b.advice}" if status else "")
    script = bounds_script(cs, e, repr(b), budget_of(args)) if wants_smtlib(args) else None
    return Answer(text, b.to_dict(), script, status)


def run(args: argparse.Namespace) -> int:
    session, cs = session_of(args)
    exprs = [parse_expr(text) for text in args.expr]  # all parsed before any is answered
    warn(cs, exprs)
    return emit(args, [bounds_answer(args, session, cs, e) for e in exprs])
