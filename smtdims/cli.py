"""The ``smtdims`` command line: bounds, decisions, explanations and constraint checks.

    smtdims bounds '2*b + 1' -c 'b >= 128' -c 'b <= 1024'
    smtdims decide 'a + 1' '>=' b            (or: smtdims decide 'a + 1 >= b')
    smtdims explain 'b >= 16'                (a comparison; or an expression: its bounds)
    smtdims check-constraints -c 'a >= b' -c 'b >= a + 1'
    smtdims export ...                       (the export pipeline, when installed)

``--json`` prints machine-readable output, ``--smtlib`` the SMT-LIB2 script of the
query (pipe it into any SMT solver), ``--budget N`` sets Z3's deterministic rlimit.
Malformed input exits with status 2 and one line naming the position; ``--debug``
adds the traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import z3

from .constraints import ConstraintSet
from .errors import ParseError, SmtdimsError
from .explain import decision_dict
from .expr import OPERATIONS, Expr
from .parser import COMPARISONS, _tokenize, parse_comparison, parse_expr
from .reasoner import CONFIG, REGISTRY, Session, _relation
from .smt import Encoder

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2
_NEGATED = {">=": "<", "<=": ">", ">": "<=", "<": ">=", "==": "!=", "!=": "=="}


class UsageError(Exception):
    """Bad command-line input that is not an expression (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line (exit status 2) like every other input error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _common() -> argparse.ArgumentParser:
    # SUPPRESS defaults: the options work before or after the subcommand without one
    # parser's default overwriting what the user gave to the other.
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")
    p.add_argument("--smtlib", action="store_true", default=argparse.SUPPRESS,
                   help="print the SMT-LIB2 script of the query instead of solving it here")
    p.add_argument("--budget", type=int, metavar="N", default=argparse.SUPPRESS,
                   help=f"Z3 rlimit per check (deterministic; default {CONFIG.budget})")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    return p


def build_parser(export: Callable[[Any], Any] | None = None) -> argparse.ArgumentParser:
    """The argument parser; ``export(subparsers)`` adds the real ``export`` subcommand when loaded."""
    common = _common()
    parser = _Parser(prog="smtdims", parents=[common],
                     description="Exact reasoning about jax.export symbolic dimensions (Z3-backed).")
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subs.required = True

    def constraints_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("-c", "--constraint", action="append", default=[], metavar="CONSTRAINT",
                       help="a jax.export constraint such as 'a >= b' (repeatable)")

    p = subs.add_parser("bounds", parents=[common], help="tight bounds of an expression")
    p.add_argument("expr", nargs="+", metavar="EXPR")
    constraints_arg(p)
    p = subs.add_parser("decide", parents=[common], help="decide LHS OP RHS for every valuation")
    p.add_argument("comparison", nargs="+", metavar="LHS OP RHS",
                   help=f"three arguments or one comparison string; OP is one of {' '.join(COMPARISONS)}")
    constraints_arg(p)
    p = subs.add_parser("explain", parents=[common],
                        help="explain a decision (LHS OP RHS) or the bounds of an expression")
    p.add_argument("comparison", nargs="+", metavar="LHS OP RHS | EXPR")
    constraints_arg(p)
    p = subs.add_parser("check-constraints", parents=[common],
                        help="unsatisfiable subsets, redundant constraints, fixed variables")
    constraints_arg(p)
    if export is not None:
        export(subs)
    else:
        p = subs.add_parser("export", parents=[common], help="export pipeline (needs smtdims_jax.pipeline_cli)")
        p.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


# -- input --------------------------------------------------------------------------------------------
def _comparison_text(parts: Sequence[str]) -> str:
    """Join arguments into one comparison; ``a >> b`` style operators are named, not mis-tokenized."""
    if len(parts) == 3 and parts[1] not in COMPARISONS and parts[1] and not any(ch.isalnum() for ch in parts[1]):
        text = " ".join(parts)
        raise ParseError(text, len(parts[0]) + 1,
                         f"unknown comparison operator {parts[1]!r}; use one of {', '.join(COMPARISONS)}")
    return " ".join(parts)


def _has_comparison(text: str) -> bool:
    try:
        return any(t.kind == "op" and t.text in COMPARISONS for t in _tokenize(text))
    except ParseError:
        return any(op in text for op in COMPARISONS) or "=" in text


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


def format_error(err: BaseException) -> str:
    """One line: what was wrong and, for syntax errors, where."""
    if isinstance(err, ParseError):
        err = _unknown_function(err)
        rest = err.text[err.position:]
        here = f"here: {rest!r}" if rest.strip() else "at the end"
        return f"{err.detail} at position {err.position} in {err.text!r} ({here})"
    return " ".join(str(err).split())


# -- SMT-LIB2 -------------------------------------------------------------------------------------------
Build = Callable[[Encoder], list[z3.BoolRef]]


def smtlib_script(constraints: ConstraintSet, checks: Sequence[tuple[str, Build]], *, header: Sequence[str] = (),
                  variables: frozenset[str] = frozenset(), objectives: Sequence[tuple[str, str, Expr]] = (),
                  named: bool = False) -> str:
    """A self-contained SMT-LIB2 script: declarations, ``v >= 1`` facts, the constraints, then each
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
    if named:
        lines.append("(set-option :produce-unsat-cores true)")
    lines += decls
    var_terms = {str(t): v for v, t in enc.vars.items()}
    for a in axioms:
        fact = var_terms.get(str(a.arg(0))) if z3.is_ge(a) else None
        if fact is not None:
            lines.append(f"; {fact} >= 1 (dimension variable)")
            lines.append(f"(assert (! {a.sexpr()} :named |v:{fact}|))" if named else f"(assert {a.sexpr()})")
        else:
            lines.append("; definition of a floordiv/mod by a symbolic divisor (Python semantics)")
            lines.append(f"(assert {a.sexpr()})")
    for i, (text, t) in enumerate(cons):
        lines.append(f"; constraint: {text}")
        lines.append(f"(assert (! {t.sexpr()} :named |c{i}|))" if named else f"(assert {t.sexpr()})")
    if named:
        lines += ["(check-sat)", "(get-unsat-core)"]
    for comment, gs in goals:
        lines += [f"; {comment}", "(push 1)", *(f"(assert {g.sexpr()})" for g in gs), "(check-sat)", "(pop 1)"]
    for comment, sense, t in objs:
        lines += [f"; {comment}", "(push 1)", f"({sense} {t.sexpr()})", "(check-sat)", "(get-objectives)", "(pop 1)"]
    return "\n".join(lines) + "\n"


def _decision_script(cs: ConstraintSet, lhs: Expr, op: str, rhs: Expr, answer: str) -> str:
    d = lhs - rhs
    q = f"{lhs} {op} {rhs}"
    return smtlib_script(
        cs,
        [(f"check 1: can '{q}' fail? unsat means it holds for every valuation",
          lambda enc: [_relation(_NEGATED[op], enc.expr(d))]),
         (f"check 2: can '{q}' hold? unsat means it fails for every valuation",
          lambda enc: [_relation(op, enc.expr(d))])],
        header=[f"smtdims decide: {q}", f"constraints: {', '.join(c.text for c in cs) or 'none'}",
                f"smtdims' answer: {answer}", "dimension variables are integers >= 1"],
        variables=d.variables(),
    )


def _bounds_script(cs: ConstraintSet, e: Expr, answer: str) -> str:
    return smtlib_script(
        cs, [], variables=e.variables(),
        objectives=[(f"lower bound of {e} (z3 optimisation extension)", "minimize", e),
                    (f"upper bound of {e}", "maximize", e)],
        header=[f"smtdims bounds: {e}", f"constraints: {', '.join(c.text for c in cs) or 'none'}",
                f"smtdims' answer: {answer}", "dimension variables are integers >= 1"],
    )


# -- commands ---------------------------------------------------------------------------------------------
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


def _emit(args: argparse.Namespace, text: str, data: dict[str, Any], script: str | None) -> None:
    if getattr(args, "json", False):
        if script is not None:
            data = {**data, "smtlib": script}
        print(json.dumps(data, indent=2))
    elif script is not None:
        print(script, end="")
    else:
        print(text)


def cmd_bounds(args: argparse.Namespace) -> int:
    session, cs = _session(args)
    e = parse_expr(" ".join(args.expr))
    b = session.bounds(e)
    script = _bounds_script(cs, e, repr(b)) if getattr(args, "smtlib", False) else None
    _emit(args, b.describe(), b.to_dict(), script)
    return EXIT_OK


def cmd_decide(args: argparse.Namespace) -> int:
    session, cs = _session(args)
    lhs, op, rhs = parse_comparison(_comparison_text(args.comparison))
    d = session.decide(lhs, op, rhs)
    script = _decision_script(cs, lhs, op, rhs, d.status) if getattr(args, "smtlib", False) else None
    _emit(args, d.describe(), decision_dict(d), script)
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    from .explain import explain_bounds, explain_decision

    session, cs = _session(args)
    text = _comparison_text(args.comparison)
    if _has_comparison(text):
        lhs, op, rhs = parse_comparison(text)
        d = session.decide(lhs, op, rhs)
        ex = explain_decision(d)
        script = _decision_script(cs, lhs, op, rhs, d.status) if getattr(args, "smtlib", False) else None
    else:
        e = parse_expr(text)
        b = session.bounds(e)
        ex = explain_bounds(b)
        script = _bounds_script(cs, e, repr(b)) if getattr(args, "smtlib", False) else None
    _emit(args, str(ex), ex.to_dict(), script)
    return EXIT_OK


def cmd_check_constraints(args: argparse.Namespace) -> int:
    from .diagnostics import check_constraints

    cs = _constraints(args.constraint)
    if getattr(args, "smtlib", False):
        script = smtlib_script(cs, [], named=True, header=[
            "smtdims check-constraints: satisfiability of the constraints (sat = consistent)",
            "on unsat, (get-unsat-core) names a conflicting subset (|c<i>| = the i-th -c, from 0)"])
        _emit(args, "", {"constraints": [c.text for c in cs]}, script)
        return EXIT_OK
    report = check_constraints(cs, budget=_budget(args))
    _emit(args, str(report), report.to_dict(), None)
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "bounds": cmd_bounds, "decide": cmd_decide, "explain": cmd_explain, "check-constraints": cmd_check_constraints,
}


def _wants_export(argv: Sequence[str]) -> bool:
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--budget":
            skip = True
            continue
        if a.startswith("-"):
            continue
        return a == "export"
    return False


def _load_export() -> Any:
    try:
        from smtdims_jax import pipeline_cli
    except ImportError as err:
        raise UsageError(
            f"'smtdims export' needs the export pipeline (smtdims_jax.pipeline_cli), which could not be "
            f"imported: {err}. Install smtdims with JAX support (pip install smtdims) or use the Python API."
        ) from err
    return pipeline_cli


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 2 malformed input, 1 internal error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    json_out = "--json" in argv
    try:
        pipeline = _load_export() if _wants_export(argv) else None
        parser = build_parser(pipeline.add_export_parser if pipeline is not None else None)
        try:
            args = parser.parse_args(argv)
        except SystemExit as exit_:  # usage errors (status 2) and --help (0): return, do not raise
            return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
        if args.command == "export":
            if pipeline is None:  # pragma: no cover - _wants_export saw it first
                pipeline = _load_export()
            rc = pipeline.run_export(args)
            return EXIT_OK if rc is None else int(rc)
        return COMMANDS[args.command](args)
    except (SmtdimsError, UsageError) as err:
        # Input errors: syntax, unknown operators, non-integer constants, unsupported
        # comparisons, possible division by 0, unsatisfiable constraints, bad budgets.
        if debug:
            traceback.print_exc()
        if json_out:
            info: dict[str, Any] = {"type": type(err).__name__, "message": format_error(err)}
            if isinstance(err, ParseError):
                info.update(text=err.text, position=err.position, detail=err.detail)
            print(json.dumps({"error": info}))
        print(f"smtdims: error: {format_error(err)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # pragma: no cover - a bug; say so in one line unless debugging
        if debug:
            traceback.print_exc()
        print(f"smtdims: internal error: {format_error(err)} (rerun with --debug for the traceback)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
