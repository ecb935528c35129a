"""``--smtlib``: the question as a self-contained SMT-LIB2 script, so that any SMT solver can replay
smtdims' answer. :func:`smtlib_script` writes every script; the functions below it say only which
checks a command's answer rests on and what the header says."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import z3

from ..engines.encoding import Encoder
from ..engines.smtlib import to_smtlib
from ..lang.constraints import ConstraintSet
from ..lang.expr import Expr
from ..reasoner import CONFIG
from ..rungs.question import NEGATED, relation

Build = Callable[[Encoder], list[z3.BoolRef]]


def smtlib_script(constraints: ConstraintSet, checks: Sequence[tuple[str, Build]], *, header: Sequence[str] = (),
                  variables: frozenset[str] = frozenset(), objectives: Sequence[tuple[str, str, Expr]] = (),
                  named: bool = False, after_constraints: Sequence[str] = (), budget: int | None = None) -> str:
    """A self-contained SMT-LIB2 script: the budget as ``(set-option :rlimit N)``, declarations,
    ``v >= 1`` facts, the constraints, ``after_constraints`` (e.g. ``(check-sat)``), then each
    check between ``(push 1)``/``(pop 1)``. ``objectives`` (z3's ``minimize``/``maximize``
    extension) are emitted likewise; ``named`` tracks constraints for ``(get-unsat-core)``.

    The formulas are the engine's own encoding (:class:`Encoder`: its variables, its division
    axioms), so the script asks what smtdims asked. Each assertion is written here, not by the
    engine's writer, because it carries a comment saying what it is and, with ``named``, a name.
    """
    ctx = z3.Context()
    enc = Encoder(ctx)
    cons = [(c.text, enc.constraint(c)) for c in constraints]
    goals = [(comment, build(enc)) for comment, build in checks]
    objs = [(comment, sense, enc.expr(e)) for comment, sense, e in objectives]
    for v in sorted(variables | constraints.variables()):
        enc.var(v)
    axioms = enc.all_axioms()
    formulas = [*axioms, *(t for _, t in cons), *(g for _, gs in goals for g in gs), *(t >= 0 for _, _, t in objs)]
    # the declarations of every symbol the formulas use, as a scratch solver prints them
    text, _ = to_smtlib(ctx, formulas)  # the engine's writer declares the symbols, as its workers see them
    decls = [ln for ln in text.splitlines() if ln.startswith("(declare-")]
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
    """A decision's script: two checks any SMT solver can replay to confirm ``answer``."""
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


def bounds_script(cs: ConstraintSet, e: Expr, answer: str, budget: int) -> str:
    """Bounds' script: z3's minimize and maximize of ``e`` under the constraints."""
    return smtlib_script(
        cs, [], variables=e.variables(), budget=budget,
        objectives=[(f"lower bound of {e} (z3 optimisation extension)", "minimize", e),
                    (f"upper bound of {e}", "maximize", e)],
        header=_header("bounds", str(e), cs, answer),
    )


def constraints_script(cs: ConstraintSet, satisfiable: bool | None, budget: int) -> str:
    """check-constraints' script: one check-sat, then the model or the unsat core that answers it."""
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
