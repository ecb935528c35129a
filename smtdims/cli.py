"""The ``smtdims`` command line: bounds, decisions, explanations, constraint checks, ``run``.

    smtdims bounds '2*b + 1' 'b - 1' -c 'b >= 128' -c 'b <= 1024'   (one answer per EXPR)
    smtdims decide 'a + 1' '>=' b            (one query: LHS OP RHS as three arguments)
    smtdims decide 'a >= 1' 'b <= a'         (several queries: each argument a comparison)
    smtdims explain 'b >= 16'                (a comparison; or an expression: its bounds)
    smtdims check-constraints 'a >= b' 'b >= a + 1'   (or -c 'a >= b' -c 'b >= a + 1')
    smtdims run script.py [ARGS...]          (run a program with smtdims installed; also -m MODULE)
    smtdims export ... | smtdims verify ...  (the export pipeline, when installed)

``--json`` prints machine-readable output (one object per query; a list when several
queries were given), ``--smtlib`` the SMT-LIB2 script of the query (pipe it into any SMT
solver), ``--budget N`` sets Z3's deterministic rlimit, ``--deadline SECONDS`` a wall-clock
limit. Exit status (see :data:`EXIT_STATUS_TABLE`): 0 true, 1 false, 2 usage or input
error, 3 undetermined, 4 unknown, 70 internal error, 130 interrupted. Malformed input
prints one line naming the position; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.machinery
import math
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import z3

from . import options, plugins
from .engines.smt import Encoder
from .errors import ParseError, SmtdimsError, UnsatisfiableConstraintsError
from .lang.constraints import ConstraintSet
from .lang.expr import OPERATIONS, Expr
from .lang.parser import COMPARISONS, parse_comparison, parse_expr, tokenize
from .lang.results import FALSE, TRUE, UNDETERMINED, UNKNOWN, Bounds, Decision, json_dumps
from .reasoner import CONFIG, NEGATED, REGISTRY, Session
from .rungs.question import relation

# -- exit statuses --------------------------------------------------------------------------------------
EXIT_TRUE = EXIT_OK = 0  # proven true / bounds proven tight / constraints satisfiable / success
EXIT_FALSE = 1  # proven false / constraints unsatisfiable (check-constraints prints the conflict)
EXIT_USAGE = 2  # usage or input error: bad arguments, syntax, possible division by 0, ...
EXIT_UNDETERMINED = 3  # true for some valuations, false for others (witnesses printed)
EXIT_UNKNOWN = 4  # the solver gave up (budget, deadline, or nonlinear incompleteness)
EXIT_INTERNAL = 70  # a bug in smtdims (EX_SOFTWARE): please report it
EXIT_INTERRUPTED = 130  # Ctrl-C
EXIT_BROKEN_PIPE = 141  # stdout closed early (128 + SIGPIPE, as shells report it)

EXIT_STATUS_TABLE = (
    (EXIT_TRUE, "true: every query proven true (bounds: both ends tight; check-constraints: satisfiable)"),
    (EXIT_FALSE, "false: a query proven false (check-constraints: unsatisfiable, conflict printed)"),
    (EXIT_USAGE, "usage or input error (one line on stderr naming the position)"),
    (EXIT_UNDETERMINED, "undetermined: true for some valuations, false for others"),
    (EXIT_UNKNOWN, "unknown: the solver gave up (budget, deadline, nonlinear incompleteness)"),
    (EXIT_INTERNAL, "internal error (a bug in smtdims)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    (EXIT_BROKEN_PIPE, "stdout was closed early (e.g. piped into head)"),
)
STATUS_EXIT = {TRUE: EXIT_TRUE, FALSE: EXIT_FALSE, UNDETERMINED: EXIT_UNDETERMINED, UNKNOWN: EXIT_UNKNOWN}


def combined_status(codes: Sequence[int]) -> int:
    """The status of several answers: 0 only if every answer is 0, otherwise the largest code
    (so unknown 4 > undetermined 3 > false 1)."""
    return max(codes, default=EXIT_OK)


_OPTIONS_WITH_VALUES = ("--budget", "--deadline")

EPILOG = """\
queries:
  bounds EXPR [EXPR ...]      one answer per expression
  decide COMPARISON [COMPARISON ...] | LHS OP RHS
                              when every argument contains a comparison operator, each is one
                              query; otherwise the arguments are joined into one comparison
                              (e.g. 'a + 1' '>=' b)
  with --json, one query prints one object and several print a list of objects

exit status:
""" + "\n".join(f"  {code:<4}{text}" for code, text in EXIT_STATUS_TABLE) + """
  several queries: 0 only if all answers are 0, otherwise the largest status
"""


class UsageError(Exception):
    """Bad command-line input that is not an expression (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line (exit status 2) like every other input error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def version_text() -> str:
    """``smtdims X.Y.Z (jax A.B.C, z3 D.E.F)``; reads JAX's version without importing it."""
    from importlib import metadata

    from . import __version__

    try:
        jax_version = f"jax {metadata.version('jax')}"
    except metadata.PackageNotFoundError:
        jax_version = "jax not installed"
    return f"smtdims {__version__} ({jax_version}, z3 {z3.get_version_string()}, python {sys.version.split()[0]})"


def _common() -> argparse.ArgumentParser:
    # SUPPRESS defaults: the options work before or after the subcommand without one
    # parser's default overwriting what the user gave to the other.
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="machine-readable output (a list when several queries are given)")
    p.add_argument("--smtlib", action="store_true", default=argparse.SUPPRESS,
                   help="print the SMT-LIB2 script of the query (z3 reproduces the answer)")
    p.add_argument("--budget", type=int, metavar="N", default=argparse.SUPPRESS,
                   help=f"Z3 rlimit per check (deterministic; default {CONFIG.budget})")
    p.add_argument("--deadline", type=float, metavar="SECONDS", default=argparse.SUPPRESS,
                   help=f"wall-clock limit per question, a backstop to the budget (default {CONFIG.deadline:g} s)")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    return p


def build_parser(export: Callable[[Any], Any] | None = None) -> argparse.ArgumentParser:
    """The argument parser; ``export(subparsers)`` adds the real ``export`` subcommand when loaded."""
    common = _common()
    parser = _Parser(prog="smtdims", parents=[common], epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     description="Exact reasoning about jax.export symbolic dimensions (Z3-backed).")
    parser.add_argument("--version", action="version", version=version_text())
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subs.required = True

    def constraints_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("-c", "--constraint", action="append", default=[], metavar="CONSTRAINT",
                       help="a jax.export constraint such as 'a >= b' (repeatable)")

    p = subs.add_parser("bounds", parents=[common], help="tight bounds of each expression")
    p.add_argument("expr", nargs="+", metavar="EXPR", help="one expression per argument, one answer each")
    constraints_arg(p)
    p = subs.add_parser(
        "decide", parents=[common], help="decide comparisons for every valuation",
        usage="smtdims decide [options] (COMPARISON [COMPARISON ...] | LHS OP RHS)",
        description="When every argument contains a comparison operator, each argument is one query "
                    "('a >= 1' 'b <= a'); otherwise all arguments are joined into one comparison "
                    "('a + 1' '>=' b).")
    p.add_argument("comparison", nargs="+", metavar="COMPARISON",
                   help=f"a comparison such as 'a + 1 >= b'; OP is one of {' '.join(COMPARISONS)}")
    constraints_arg(p)
    p = subs.add_parser("explain", parents=[common],
                        usage="smtdims explain [options] (COMPARISON | LHS OP RHS | EXPR)",
                        help="explain one decision (LHS OP RHS) or the bounds of one expression")
    p.add_argument("comparison", nargs="+", metavar="COMPARISON | EXPR",
                   help="the arguments are joined into one comparison or expression")
    constraints_arg(p)
    p = subs.add_parser("check-constraints", parents=[common],
                        usage="smtdims check-constraints [options] [CONSTRAINT ...] [-c CONSTRAINT ...]",
                        help="unsatisfiable subsets, redundant constraints, fixed variables",
                        description="With --json: constraints, satisfiable, example (a valuation that meets them), "
                                    "redundant (text, implied_by), fixed, ranges ([lo, hi] per variable), reason, "
                                    "deterministic, budget, deadline, and clean (true when satisfiable, nothing "
                                    "redundant and no variable fixed: nothing to change); an unsatisfiable set "
                                    "prints constraints, satisfiable false and conflict (a minimal conflicting subset).")
    p.add_argument("positional", nargs="*", metavar="CONSTRAINT",
                   help="the constraints to check (each one argument; -c CONSTRAINT works too)")
    constraints_arg(p)
    p = subs.add_parser("run", help="run a Python program with smtdims installed, then summarise",
                        usage=RUN_USAGE, add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    if export is not None:
        export(subs)
    else:
        p = subs.add_parser("export", parents=[common],
                            help="export a JAX function with symbolic shapes, fix and verify (needs JAX)")
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p = subs.add_parser("verify", parents=[common],
                            help="check a serialized artifact on this host's device against its function (needs JAX)")
        p.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


# -- input --------------------------------------------------------------------------------------------
def _comparison_text(parts: Sequence[str]) -> str:
    """Join arguments into one comparison; ``a >> b`` style operators are named, not mis-tokenized."""
    parts = [p.strip() for p in parts]
    if len(parts) == 3 and parts[1] not in COMPARISONS and parts[1] and not any(ch.isalnum() for ch in parts[1]):
        text = " ".join(parts)
        raise ParseError(text, len(parts[0]) + 1,
                         f"unknown comparison operator {parts[1]!r}; use one of {', '.join(COMPARISONS)}")
    return " ".join(parts)


def _has_comparison(text: str) -> bool:
    try:
        return any(t.kind == "op" and t.text in COMPARISONS for t in tokenize(text))
    except ParseError:
        return any(op in text for op in COMPARISONS) or "=" in text


def decide_queries(parts: Sequence[str]) -> list[str]:
    """``decide``'s arguments as comparison texts: when there are several arguments and every one
    contains a comparison operator, each is one query; otherwise they are joined into one."""
    if len(parts) > 1 and all(_has_comparison(p) for p in parts):
        return list(parts)
    return [_comparison_text(parts)]


def _constraints(texts: Sequence[str]) -> ConstraintSet:
    return ConstraintSet.of(list(texts))


def _unknown_function(err: ParseError) -> ParseError:
    """``foo(a, b)`` parses as a name then a stray '(': name the unknown operation instead."""
    text, pos = err.text, err.position
    if pos < len(text) and text[pos] == "(":
        head = text[:pos].rstrip()
        i = len(head)
        while i > 0 and (head[i - 1].isalnum() or head[i - 1] == "_"):
            i -= 1
        name = head[i:]
        if name and not name[0].isdigit() and name not in OPERATIONS:
            return ParseError(text, i, f"unknown operation {name!r}; use one of {', '.join(OPERATIONS)}")
    return err


def _found_token(err: ParseError) -> ParseError:
    """One side of a comparison ends at the operator: "found end of input" there means "found '>='"."""
    rest = err.text[err.position:]
    if "found end of input" not in err.detail or not rest.strip():
        return err
    pos = err.position + len(rest) - len(rest.lstrip())
    try:
        found = tokenize(err.text[pos:])[0].text
    except ParseError:
        found = err.text[pos]
    return ParseError(err.text, pos, err.detail.replace("found end of input", f"found {found!r}"))


def _located(err: ParseError) -> ParseError:
    return _found_token(_unknown_function(err))


def format_error(err: BaseException) -> str:
    """One line: what was wrong and, for syntax errors, where."""
    if isinstance(err, ParseError):
        err = _located(err)
        rest = err.text[err.position:]
        here = f"here: {rest!r}" if rest.strip() else "at the end"
        return f"{err.detail} at position {err.position} in {err.text!r} ({here})"
    return " ".join(str(err).split())


# -- unknown answers -------------------------------------------------------------------------------------
def unknown_reason(reason: str, *, budget: int | None = None, deadline: float | None = None) -> tuple[str, str]:
    """Why an answer is "unknown", as ``(cause, message)``: what happened and how to get an answer.

    ``cause`` is ``"budget"`` (Z3's "max. resource limit exceeded": the rlimit ran out, raise
    ``--budget``), ``"deadline"`` (Z3's "canceled": the ``--deadline`` passed or the run was
    interrupted) or ``"incomplete"`` (anything else: the solver gave up, nonlinear integer
    arithmetic being undecidable in general). The reasoner's own reason names
    (``budget``/``deadline``/``incomplete``) map to themselves.
    """
    r = " ".join((reason or "").lower().split())
    budget = CONFIG.budget if budget is None else budget
    if deadline is None:
        deadline = CONFIG.deadline
    if "resource limit" in r or "rlimit" in r or "budget" in r:
        return "budget", (f"the solver's budget of {budget} (Z3 rlimit per check) ran out; "
                          f"raise it with --budget N, e.g. --budget {budget * 10}")
    if any(word in r for word in ("cancel", "deadline", "timeout", "interrupt")):
        limit = f"the deadline of {deadline:g} s passed" if deadline else "the solver was stopped (deadline or interrupt)"
        return "deadline", f"{limit} or the run was interrupted; allow more time with --deadline SECONDS"
    return "incomplete", ("the solver gave up (incomplete for nonlinear arithmetic); "
                          "a larger --budget N or a constraint that bounds the variables may help")


# Z3's wording for unknown answers (and older smtdims fallbacks): never shown as such.
_RAW_REASONS = ("max. resource limit exceeded", "canceled", "timeout", "interrupted from keyboard",
                "solver budget exhausted", "budget exhausted")


def friendly_unknown(text: str, reason: str, args: argparse.Namespace) -> str:
    """``text`` with Z3's raw reason replaced by what happened and how to raise the limit."""
    _, message = unknown_reason(reason, budget=_budget(args), deadline=getattr(args, "deadline", None))
    raws = [r for r in (reason, *_RAW_REASONS) if r and r not in ("budget", "deadline", "incomplete")]
    for raw in raws:
        if f"({raw})" in text:
            return text.replace(f"({raw})", f"({message})", 1)
        if f": {raw}" in text:
            return text.replace(f": {raw}", f": {message}", 1)
    if "--budget" in text or "--deadline" in text:
        return text  # the reasoner already said what happened and how to raise the limit
    return f"{text}\n  {message}"


def _unknown_info(reason: str, args: argparse.Namespace) -> dict[str, str]:
    cause, message = unknown_reason(reason, budget=_budget(args), deadline=getattr(args, "deadline", None))
    return {"cause": cause, "message": message}


# -- SMT-LIB2 -------------------------------------------------------------------------------------------
Build = Callable[[Encoder], list[z3.BoolRef]]


def smtlib_script(constraints: ConstraintSet, checks: Sequence[tuple[str, Build]], *, header: Sequence[str] = (),
                  variables: frozenset[str] = frozenset(), objectives: Sequence[tuple[str, str, Expr]] = (),
                  named: bool = False, after_constraints: Sequence[str] = (), budget: int | None = None) -> str:
    """A self-contained SMT-LIB2 script: the budget as ``(set-option :rlimit N)``, declarations,
    ``v >= 1`` facts, the constraints, ``after_constraints`` (e.g. ``(check-sat)``), then each
    check between ``(push 1)``/``(pop 1)``. ``objectives`` (z3's ``minimize``/``maximize``
    extension) are emitted likewise; ``named`` tracks constraints for ``(get-unsat-core)``."""
    ctx = z3.Context()
    enc = Encoder(ctx)
    cons = [(c.text, enc.constraint(c)) for c in constraints]
    goals = [(comment, build(enc)) for comment, build in checks]
    objs = [(comment, sense, enc.expr(e)) for comment, sense, e in objectives]
    for v in sorted(variables | constraints.variables()):
        enc.var(v)
    axioms = enc.all_axioms()
    probe = z3.Solver(ctx=ctx)
    probe.add(*axioms, *(t for _, t in cons), *(g for _, gs in goals for g in gs), *(t >= 0 for _, _, t in objs))
    decls = [ln for ln in probe.sexpr().splitlines() if ln.startswith("(declare-")]
    lines = [f"; {h}" for h in header]
    budget = CONFIG.budget if budget is None else budget
    lines += [f"; Z3's resource limit per check, as smtdims used it (--budget {budget}); other solvers may ignore it",
              f"(set-option :rlimit {budget})"]
    if named:
        lines.append("(set-option :produce-unsat-cores true)")
    lines += decls
    var_terms = {str(t): v for v, t in enc.vars.items()}
    labels = enc.axiom_labels()
    for a in axioms:
        fact = var_terms.get(str(a.arg(0))) if z3.is_ge(a) else None
        if fact is not None:
            lines.append(f"; {fact} >= 1 (dimension variable)")
            lines.append(f"(assert (! {a.sexpr()} :named |v:{fact}|))" if named else f"(assert {a.sexpr()})")
        else:
            lines.append(f"; {labels.get(a.get_id(), 'definition')}")
            lines.append(f"(assert {a.sexpr()})")
    for i, (text, t) in enumerate(cons):
        lines.append(f"; constraint: {text}")
        lines.append(f"(assert (! {t.sexpr()} :named |c{i}|))" if named else f"(assert {t.sexpr()})")
    lines += after_constraints
    for comment, gs in goals:
        lines += [f"; {comment}", "(push 1)", *(f"(assert {g.sexpr()})" for g in gs), "(check-sat)", "(pop 1)"]
    for comment, sense, t in objs:
        lines += [f"; {comment}", "(push 1)", f"({sense} {t.sexpr()})", "(check-sat)", "(get-objectives)", "(pop 1)"]
    return "\n".join(lines) + "\n"


def _header(kind: str, q: str, cs: ConstraintSet, answer: str) -> list[str]:
    return [f"smtdims {kind}: {q}", f"constraints: {', '.join(c.text for c in cs) or 'none'}",
            f"smtdims' answer: {answer}", "dimension variables are integers >= 1"]


def decision_script(cs: ConstraintSet, lhs: Expr, op: str, rhs: Expr, answer: str, budget: int) -> str:
    """``decide --smtlib``'s script: two checks any SMT solver can replay to confirm ``answer``."""
    d = lhs - rhs
    q = f"{lhs} {op} {rhs}"
    return smtlib_script(
        cs,
        [(f"check 1: can '{q}' fail? unsat means it holds for every valuation",
          lambda enc: [relation(NEGATED[op], enc.expr(d))]),
         (f"check 2: can '{q}' hold? unsat means it fails for every valuation",
          lambda enc: [relation(op, enc.expr(d))])],
        header=_header("decide", q, cs, answer) + [
            "true: unsat then sat; false: sat then unsat; undetermined: sat then sat"],
        variables=d.variables(), budget=budget,
    )


def _bounds_script(cs: ConstraintSet, e: Expr, answer: str, budget: int) -> str:
    return smtlib_script(
        cs, [], variables=e.variables(), budget=budget,
        objectives=[(f"lower bound of {e} (z3 optimisation extension)", "minimize", e),
                    (f"upper bound of {e}", "maximize", e)],
        header=_header("bounds", str(e), cs, answer),
    )


def _constraints_script(cs: ConstraintSet, satisfiable: bool | None, budget: int) -> str:
    answer = {True: "satisfiable", False: "unsatisfiable", None: "unknown"}[satisfiable]
    header = [f"smtdims check-constraints: {', '.join(c.text for c in cs) or 'none'}",
              f"smtdims' answer: {answer} (sat = consistent)", "dimension variables are integers >= 1"]
    if satisfiable is False:
        header.append("(get-unsat-core) names a conflicting subset (|c<i>| = the i-th -c, from 0)")
        tail = ["(check-sat)", "(get-unsat-core)"]
    elif satisfiable:
        header.append("(get-model) shows one valuation that meets every constraint")
        tail = ["(check-sat)", "(get-model)"]
    else:
        tail = ["(check-sat)"]
    return smtlib_script(cs, [], named=satisfiable is False, header=header, after_constraints=tail, budget=budget)


# -- commands ---------------------------------------------------------------------------------------------
@dataclass
class Answer:
    """One query's answer: the text, the JSON object, the SMT-LIB2 script (with --smtlib), the status."""

    text: str
    data: dict[str, Any]
    script: str | None
    status: int


def _session(args: argparse.Namespace) -> tuple[Session, ConstraintSet]:
    cs = _constraints(getattr(args, "constraint", []))
    return REGISTRY.get(cs, _budget(args)), cs


def _budget(args: argparse.Namespace) -> int:
    budget = getattr(args, "budget", None)
    if budget is None:
        return CONFIG.budget
    if budget <= 0:
        raise UsageError(f"--budget must be a positive integer (a Z3 rlimit), got {budget}")
    return budget


def _smtlib(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "smtlib", False))


def _emit(args: argparse.Namespace, answers: Sequence[Answer]) -> int:
    """Print the answers (one JSON object for one query, a list for several) and return the status."""
    if getattr(args, "json", False):
        items = [{**a.data, "smtlib": a.script} if a.script is not None else a.data for a in answers]
        print(json_dumps(items[0] if len(items) == 1 else items, indent=2))
    elif _smtlib(args):
        # Several scripts in one stream: (reset) between them keeps each self-contained.
        print("(reset)\n".join(a.script or "" for a in answers), end="")
    else:
        print("\n".join(a.text for a in answers))
    return combined_status([a.status for a in answers])


def _bounds_status(b: Bounds) -> int:
    return EXIT_TRUE if b.lo_tight and b.hi_tight else EXIT_UNKNOWN


def _bounds_answer(args: argparse.Namespace, session: Session, cs: ConstraintSet, e: Expr) -> Answer:
    b = session.bounds(e, readable=True)
    status = _bounds_status(b)
    text = b.describe() + (f"\n  an end is not proven tight: {b.advice}" if status else "")
    script = _bounds_script(cs, e, repr(b), _budget(args)) if _smtlib(args) else None
    return Answer(text, b.to_dict(), script, status)


def _decision_data(d: Decision, args: argparse.Namespace) -> dict[str, Any]:
    data = d.to_dict()
    if d.status == UNKNOWN:
        data["unknown"] = _unknown_info(d.reason, args)
    return data


def cmd_bounds(args: argparse.Namespace) -> int:
    session, cs = _session(args)
    exprs = [parse_expr(text) for text in args.expr]  # all parsed before any is answered
    _warn(cs, exprs)  # the typo hint of decide and explain (issue 29)
    return _emit(args, [_bounds_answer(args, session, cs, e) for e in exprs])


def cmd_decide(args: argparse.Namespace) -> int:
    session, cs = _session(args)
    queries = [parse_comparison(text) for text in decide_queries(args.comparison)]
    _warn(cs, [e for lhs, _, rhs in queries for e in (lhs, rhs)])
    answers = []
    for lhs, op, rhs in queries:
        d = session.decide(lhs, op, rhs)
        text = friendly_unknown(d.describe(), d.reason, args) if d.status == UNKNOWN else d.describe()
        script = decision_script(cs, lhs, op, rhs, d.status, _budget(args)) if _smtlib(args) else None
        answers.append(Answer(text, _decision_data(d, args), script, STATUS_EXIT.get(d.status, EXIT_UNKNOWN)))
    return _emit(args, answers)


def _one_explain_query(parts: Sequence[str]) -> str:
    """``explain``'s arguments joined into one comparison or expression; several comparisons are
    a usage error that names ``decide``, which takes several."""
    if len(parts) > 1 and sum(_has_comparison(p) for p in parts) > 1:
        raise UsageError(
            f"explain takes one comparison (or one expression), got {len(parts)}: "
            + ", ".join(repr(p) for p in parts)
            + "; explain them one at a time, or use 'smtdims decide' to decide several at once")
    return _comparison_text(parts)


def warn_near_misses(cs: ConstraintSet, exprs: Sequence[Expr]) -> list[str]:
    """Warnings for constraint variables that no question mentions but that look like a typo of one
    that does (``bacth`` for ``batch``): such a constraint constrains nothing the question asks about."""
    import difflib

    asked = sorted(frozenset().union(*(e.variables() for e in exprs)))
    out = []
    for v in sorted(cs.variables() - set(asked)):
        close = difflib.get_close_matches(v, asked, n=1, cutoff=0.75)
        if close:
            out.append(f"smtdims: warning: the constraints name {v!r}, which no question mentions; "
                       f"did you mean {close[0]!r}?")
    return out


def _warn(cs: ConstraintSet, exprs: Sequence[Expr]) -> None:
    for line in warn_near_misses(cs, exprs):
        print(line, file=sys.stderr)


def cmd_explain(args: argparse.Namespace) -> int:
    from .answers.explain import explain_bounds, explain_decision

    session, cs = _session(args)
    text = _one_explain_query(args.comparison)
    if _has_comparison(text):
        lhs, op, rhs = parse_comparison(text)
        _warn(cs, [lhs, rhs])
        d = session.decide(lhs, op, rhs)
        ex = explain_decision(d)
        status = STATUS_EXIT.get(d.status, EXIT_UNKNOWN)
        out = friendly_unknown(str(ex), d.reason, args) if d.status == UNKNOWN else str(ex)
        data = ex.to_dict()
        if d.status == UNKNOWN:
            data["unknown"] = _unknown_info(d.reason, args)
        script = decision_script(cs, lhs, op, rhs, d.status, _budget(args)) if _smtlib(args) else None
    else:
        e = parse_expr(text)
        _warn(cs, [e])
        b = session.bounds(e, readable=True)
        ex = explain_bounds(b)
        status = _bounds_status(b)
        out, data = str(ex), ex.to_dict()  # the explanation says which limit left an end loose
        script = _bounds_script(cs, e, repr(b), _budget(args)) if _smtlib(args) else None
    return _emit(args, [Answer(out, data, script, status)])


def cmd_check_constraints(args: argparse.Namespace) -> int:
    from .answers.diagnostics import check_constraints

    cs = _constraints([*args.positional, *args.constraint])
    budget = _budget(args)
    try:
        report = check_constraints(cs, budget=budget)
    except UnsatisfiableConstraintsError as err:
        # A diagnosis, not an input error: the minimal conflict, status 1 ("false").
        texts = [c.text for c in cs]
        text = (f"constraints: {', '.join(texts) or 'none'}\n"
                "  unsatisfiable: no dimension values >= 1 meet them all\n"
                f"  minimal conflict: {'; '.join(err.conflict)}\n"
                "  remove or relax one of these")
        data = {"constraints": texts, "satisfiable": False, "conflict": list(err.conflict)}
        script = _constraints_script(cs, False, budget) if _smtlib(args) else None
        return _emit(args, [Answer(text, data, script, EXIT_FALSE)])
    script = _constraints_script(cs, report.satisfiable, budget) if _smtlib(args) else None
    data = report.to_dict()
    if report.satisfiable is None:
        reason = getattr(report, "reason", "")
        data["unknown"] = _unknown_info(reason, args)
        return _emit(args, [Answer(friendly_unknown(str(report), reason, args), data, script, EXIT_UNKNOWN)])
    return _emit(args, [Answer(str(report), data, script, EXIT_TRUE)])


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "bounds": cmd_bounds, "decide": cmd_decide, "explain": cmd_explain, "check-constraints": cmd_check_constraints,
}


# -- limits ----------------------------------------------------------------------------------------------
@contextlib.contextmanager
def limits(budget: int | None, seconds: float | None) -> Iterator[None]:
    """``--budget`` and ``--deadline`` in force for the block (scoped: nothing to restore by hand)."""
    if budget is not None and budget <= 0:
        raise UsageError(f"--budget must be a positive integer (a Z3 rlimit), got {budget}")
    if seconds is not None and (not (seconds > 0) or math.isinf(seconds)):
        raise UsageError(f"--deadline must be a positive number of seconds, got {seconds}")
    with options.scoped(budget=budget, deadline=seconds):
        yield


# -- dispatch ---------------------------------------------------------------------------------------------
def first_command(argv: Sequence[str]) -> str | None:
    """The subcommand: the first argument that is neither an option nor an option's value."""
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in _OPTIONS_WITH_VALUES:
            skip = True
            continue
        if a == "--":
            return None
        if a.startswith("-"):
            continue
        return a
    return None


def _plugin_command(command: str, needs: str, *, package_only: bool = False, hint: str = "") -> Any:
    """The module a plugin declares for ``smtdims COMMAND`` (entry-point group smtdims.commands).

    ``needs`` ("'smtdims run' needs JAX support") leads the usage error when it cannot be had; the
    error names the declared module (its package where ``package_only``), as it did when the CLI
    imported the plugin by name.
    """
    entry = plugins.find(plugins.COMMANDS, command)
    if entry is None:
        raise UsageError(f"{needs}, which no installed plugin declares (entry point {plugins.COMMANDS}: {command})"
                         f"{hint or '. Install smtdims with JAX support (pip install smtdims).'}")
    try:
        return entry.load()
    except ImportError as err:
        where = entry.module.partition(".")[0] if package_only else entry.module
        raise UsageError(f"{needs} ({where}), which could not be imported: {err}{hint}") from err


def _load_export(command: str = "export") -> Any:
    return _plugin_command(command, "'smtdims export' needs the export pipeline",
                           hint=". Install smtdims with JAX support (pip install smtdims) or use the Python API.")


RUN_USAGE = ("smtdims run [--json] [--json-out FILE] [--budget N] [--deadline SECONDS] (SCRIPT.py | -m MODULE) "
             "[ARGS ...]")
RUN_HELP = f"""usage: {RUN_USAGE}

Run a Python program unmodified with smtdims installed (like `coverage run` or
`python -m cProfile`): SCRIPT runs as __main__ with sys.argv = [SCRIPT, ARGS...].
Every argument after SCRIPT (or -m MODULE) belongs to the program. At exit, the
summary goes to stderr: who answered JAX's dimension questions and every comparison
that stayed inconclusive, with the user code line that asked it and a verified fix.

options:
  --json               also print the summary as JSON on stdout, after the program's
                       own output (one object, the last thing printed)
  --json-out FILE      also write the summary as JSON to FILE (never the program, one
                       of its arguments or an existing .py file)
  --budget N           Z3 rlimit per check (default {CONFIG.budget})
  --deadline SECONDS   wall-clock limit per question (default {CONFIG.deadline:g} s)
  -m MODULE            run a module as a script (like python -m)
  -h, --help           show this help

exit status: the program's (an uncaught exception prints its traceback and exits 1);
2 when smtdims run itself is misused.
"""


@dataclass
class RunArgs:
    target: str
    args: list[str]
    module: bool = False
    json_path: str | None = None  # --json-out FILE
    json: bool = False  # --json: the summary as JSON on stdout
    budget: int | None = None
    deadline: float | None = None
    debug: bool = False
    help: bool = False


def parse_run_args(argv: Sequence[str]) -> RunArgs:
    """``[global options] run [run options] (SCRIPT | -m MODULE) [ARGS...]``: everything after
    SCRIPT or MODULE is the program's, untouched."""
    out = RunArgs(target="", args=[])
    argv = list(argv)
    i = 0

    def value(opt: str, conv: Callable[[str], Any]) -> Any:
        nonlocal i
        if "=" in argv[i]:
            raw = argv[i].split("=", 1)[1]
        else:
            if i + 1 >= len(argv):
                raise UsageError(f"run: {opt} needs a value")
            i += 1
            raw = argv[i]
        try:
            return conv(raw)
        except ValueError:
            raise UsageError(f"run: invalid {opt} value {raw!r}") from None

    seen_run = False
    while i < len(argv):
        a = argv[i]
        name = a.split("=", 1)[0]
        if not seen_run and a == "run":
            seen_run = True
        elif name == "--budget":
            out.budget = value("--budget", int)
            if out.budget <= 0:
                raise UsageError(f"--budget must be a positive integer (a Z3 rlimit), got {out.budget}")
        elif name == "--deadline":
            out.deadline = value("--deadline", float)
        elif a == "--debug":
            out.debug = True
        elif a == "--json":  # a flag, as for every other subcommand (issue 29: it took a FILE and overwrote it)
            out.json = True
        elif seen_run and name == "--json-out":
            out.json_path = value("--json-out", str)
        elif name == "--json":
            raise UsageError(f"run: --json is a flag (the summary as JSON on stdout) and takes no value; "
                             f"to write the summary to a file use --json-out FILE; usage: {RUN_USAGE}")
        elif a in ("-h", "--help"):
            out.help = True
            return out
        elif seen_run and (a == "-m" or (a.startswith("-m") and len(a) > 2)):
            mod = a[2:] if len(a) > 2 else None
            if mod is None:
                if i + 1 >= len(argv):
                    raise UsageError("run: -m needs a module name")
                i += 1
                mod = argv[i]
            out.target, out.module, out.args = mod, True, argv[i + 1:]
            return out
        elif seen_run and a == "--":
            if i + 1 >= len(argv):
                break
            out.target, out.args = argv[i + 1], argv[i + 2:]
            return _checked_run_args(out)
        elif seen_run and not a.startswith("-"):
            out.target, out.args = a, argv[i + 1:]
            return _checked_run_args(out)
        else:
            where = "after 'run'" if seen_run else "before 'run'"
            raise UsageError(f"run: unknown option {a!r} {where}; usage: {RUN_USAGE}")
        i += 1
    raise UsageError(f"run: no program given; usage: {RUN_USAGE}")


def _checked_run_args(ra: RunArgs) -> RunArgs:
    """Refuse what would run the wrong thing or overwrite the user's files (issue 29: ``--json
    victim.py prog.py`` used to write JSON over victim.py): a ``.json`` program (the old
    ``--json FILE`` spelling), a ``--json-out`` that is the program, one of its arguments or an
    existing ``.py`` file."""
    if ra.target.endswith(".json"):
        raise UsageError(f"run: {ra.target!r} is not a Python program; --json is a flag now (the summary as JSON "
                         f"on stdout): to write the summary to a file use --json-out {ra.target}")
    if ra.json_path is not None:
        out = os.path.realpath(ra.json_path)
        theirs = [ra.target, *ra.args] if not ra.module else list(ra.args)
        taken = next((a for a in theirs if a and os.path.realpath(a) == out), None)
        if taken is not None:
            what = "the program" if taken == ra.target and not ra.module else "an argument of the program"
            raise UsageError(f"run: --json-out {ra.json_path!r} is {what}; it would be overwritten: "
                             "write the summary to another file")
        if ra.json_path.endswith(".py") and os.path.exists(ra.json_path):
            raise UsageError(f"run: --json-out {ra.json_path!r} is an existing Python file; it would be overwritten: "
                             "write the summary to another file (e.g. summary.json)")
    return ra


def _run_command(argv: Sequence[str]) -> int:
    ra = parse_run_args(argv)
    if ra.help:
        print(RUN_HELP, end="")
        return EXIT_OK
    runner = _plugin_command("run", "'smtdims run' needs JAX support", package_only=True)
    with limits(None, ra.deadline):
        return runner.run_program(ra.target, ra.args, module=ra.module, budget=ra.budget, json_path=ra.json_path,
                                  json_stdout=ra.json)


# -- Ctrl-C ------------------------------------------------------------------------------------------------
class _Interrupts:
    """Ctrl-C that is never lost: a SIGINT handler for the CLI's run (issue 29).

    Python runs a signal handler at the next bytecode of the main thread. After C work (an
    extension module's import, an XLA compile) that is often JAX's ``_xla_gc_callback`` (a
    ``gc.callbacks`` hook), where gc prints "Exception ignored" and drops the KeyboardInterrupt;
    a bare ``except:`` in a library drops it too, and the run went on to exit 1. So the handler
    records the Ctrl-C; it raises KeyboardInterrupt only where the exception can travel (not
    inside a gc callback, a ``__del__`` or an extension's initialisation, not while a
    KeyboardInterrupt is already unwinding, not in :func:`main`'s own frame), and a watcher thread re-delivers SIGINT every
    ``REDELIVER_S`` seconds until :func:`main` has the interrupt in hand. :func:`main` returns
    130 whenever one was recorded. (A Ctrl-C in the first ~0.2 s, while ``smtdims.cli`` itself
    is imported, gets Python's default: a traceback, and death by SIGINT, which shells report
    as 130 too.)
    """

    REDELIVER_S = 0.2

    def __init__(self) -> None:
        self.seen = False
        self.done = False  # main has the interrupt in hand (or finished): never raise again
        self._prev: Any = None
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self.installed = False  # it took SIGINT from Python's default handler

    def install(self) -> _Interrupts:
        """Take SIGINT if Python's default handler has it, in the main thread; otherwise do nothing
        (an embedding program's own handler, or SIGINT ignored, stays as it is)."""
        if threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._prev = signal.signal(signal.SIGINT, self._on_sigint)
            self.installed = True
        return self

    def close(self) -> None:
        """Stop re-delivering, then give SIGINT back to the handler it had."""
        self.done = True
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join()
        if self._prev is not None:
            signal.signal(signal.SIGINT, self._prev)
            self._prev = None

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self.seen = True
        if self.done:
            return
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._redeliver, name="smtdims-ctrl-c", daemon=True)
            self._watcher.start()
        if frame is None or frame.f_code is main.__code__ or _unwinding_interrupt() or _swallowing(frame):
            return  # the watcher delivers it again where it can travel
        raise KeyboardInterrupt

    def _redeliver(self) -> None:
        main_id = threading.main_thread().ident
        while not self._stop.wait(self.REDELIVER_S):
            if main_id is not None:
                signal.pthread_kill(main_id, signal.SIGINT)


def _unwinding_interrupt() -> bool:
    """A KeyboardInterrupt is being handled (an ``except``/``finally`` on its way out): let it finish."""
    return isinstance(sys.exc_info()[1], KeyboardInterrupt)


def _swallowing(frame: Any) -> bool:
    """Whether ``frame`` runs where an exception is dropped or fatal: a ``gc.callbacks`` hook, a
    ``__del__`` or a weakref callback (Python prints "Exception ignored" and goes on), or an extension
    module's initialisation (measured: a KeyboardInterrupt in Python code that jaxlib's extension calls
    while it initialises aborts the process, SIGABRT). A pure-Python import is not one: the user's
    module may sleep or compute at import for minutes (``smtdims export file.py:fn``), and a
    KeyboardInterrupt there travels as from any other code."""
    import gc

    hooks = {getattr(cb, "__code__", None) for cb in gc.callbacks}
    f = frame
    while f is not None:
        code = f.f_code
        if code in hooks or code.co_name == "__del__" or code in _EXTENSION_INIT \
                or os.path.basename(code.co_filename) in ("weakref.py", "_weakrefset.py"):  # weakref callbacks too
            return True
        f = f.f_back
    return False


# The frames that run an extension module's C initialisation (Python code it calls sits above them).
_EXTENSION_INIT = frozenset({importlib.machinery.ExtensionFileLoader.create_module.__code__,
                             importlib.machinery.ExtensionFileLoader.exec_module.__code__})


def _interrupted(json_out: bool) -> int:
    """Say that Ctrl-C stopped the run (with --json also ``{"error": {...}}`` on stdout); 130."""
    if json_out:
        with contextlib.suppress(OSError):
            print(json_dumps({"error": {"type": "KeyboardInterrupt", "message": "interrupted (Ctrl-C)",
                                        "exit_status": EXIT_INTERRUPTED}}), flush=True)
    with contextlib.suppress(OSError):
        print("smtdims: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


def _run_options(argv: Sequence[str]) -> list[str]:
    """``smtdims [opts] run [run opts]``: the arguments before the program (the rest are the program's)."""
    seen_run, i = False, 0
    while i < len(argv):
        a = argv[i]
        if not seen_run:
            seen_run = a == "run"
        elif a in ("--budget", "--deadline", "--json-out"):
            i += 1
        elif a == "--" or a.startswith("-m") or not a.startswith("-"):
            return list(argv[:i])
        i += 1
    return list(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (see :data:`EXIT_STATUS_TABLE`)."""
    argv_given = argv
    argv = list(sys.argv[1:] if argv is None else argv)
    command = first_command(argv)
    # Options after the subcommand's program belong to the program (smtdims run script.py --json).
    own = _run_options(argv) if command == "run" else argv
    json_out = "--json" in own
    # `run`: the program's Ctrl-C is the program's (it may catch KeyboardInterrupt and go on)
    guard = _Interrupts() if command == "run" else _Interrupts().install()
    interrupted = False
    try:
        rc = _main(argv, command, own)
    except KeyboardInterrupt:
        interrupted = True
    guard.done = True  # here, in main's frame, the handler raises nothing any more
    if interrupted or guard.seen:
        rc = _interrupted(json_out and command != "run")
    guard.close()
    if rc == EXIT_INTERRUPTED and argv_given is None and command != "run" and guard.installed:
        # the program ends with 130 now: a second Ctrl-C (or one delivered late) during the interpreter's
        # shutdown would otherwise end it by SIGINT instead (status -2), after "interrupted" was said
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return rc


def _main(argv: list[str], command: str | None, own: list[str]) -> int:
    debug = "--debug" in own
    json_out = "--json" in own
    try:
        if command == "run":
            return _run_command(argv)
        pipeline = _load_export(command) if command in ("export", "verify") else None
        parser = build_parser(pipeline.add_export_parser if pipeline is not None else None)
        try:
            args = parser.parse_args(argv)
        except SystemExit as exit_:  # usage errors (status 2), --help and --version (0): return, do not raise
            return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
        if args.command in ("export", "verify"):
            if pipeline is None:  # pragma: no cover - first_command saw it first
                pipeline = _load_export(args.command)
            rc = pipeline.run_export(args) if args.command == "export" else pipeline.run_verify(args)
            return EXIT_OK if rc is None else int(rc)
        with limits(getattr(args, "budget", None), getattr(args, "deadline", None)):
            return COMMANDS[args.command](args)
    except (SmtdimsError, UsageError) as err:
        # Input errors: syntax, unknown operators, non-integer constants, unsupported
        # comparisons, possible division by 0, unsatisfiable constraints (outside
        # check-constraints), bad budgets or deadlines.
        if debug:
            traceback.print_exc()
        if json_out:
            info: dict[str, Any] = {"type": type(err).__name__, "message": format_error(err)}
            if isinstance(err, ParseError):
                located = _located(err)
                info.update(text=located.text, position=located.position, detail=located.detail)
            if isinstance(err, UnsatisfiableConstraintsError):
                info.update(conflict=list(err.conflict))
            print(json_dumps({"error": info}))
        print(f"smtdims: error: {format_error(err)}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # stdout closed early (smtdims ... | head): not an error of smtdims
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as err:  # a bug; say so in one line unless debugging
        if debug:
            traceback.print_exc()
        print(f"smtdims: internal error: {format_error(err)} (rerun with --debug for the traceback; "
              f"exit status {EXIT_INTERNAL})", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
