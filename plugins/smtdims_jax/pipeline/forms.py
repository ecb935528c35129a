"""The fixed specification as a person writes it: the same shapes, fewer and plainer words.

Four rewrites, each admitting exactly the shapes it replaces (each says why next to it): constraints
the others imply are dropped (:func:`without_implied`); a ``min``/``max`` in a dimension that the
constraints decide becomes the side it is (:func:`in_plain_dims`: ``b`` for ``min(64, b)`` beside
``b <= 64``); a constraint on one variable becomes the bounds
it means (:func:`in_interval_form`: ``w >= 25, w <= 28``); constraints that hold on one residue class of
a variable become the spec rewrite a person writes (:func:`in_lattice_form`: ``4*k_h``, not ``2*k_h``
with ``2*floordiv(-k_h, 2) == -k_h``). A rewritten specification is kept only where JAX, with smtdims
installed, exports it.
"""

from __future__ import annotations

from typing import Any

from smtdims.answers.equations import interval_form, map_atoms, op_of, plain_constraint
from smtdims.answers.fixes import SPEC
from smtdims.answers.lattice import lattice_form
from smtdims.errors import SmtdimsError
from smtdims.lang.constraints import Constraint, ConstraintSet
from smtdims.lang.expr import MAX, MIN, Atom, Expr, Op
from smtdims.reasoner import session_for

from .attempt import Spec
from .job import ExportJob
from .refusals import FixPart


def without_implied(spec: Spec, budget: int | None) -> Spec:
    """Drop each constraint the others prove (``b >= 2`` beside ``b >= 8``): the same valuations, fewer words.

    Sound: a constraint implied by the rest excludes nothing the rest admits, so the set is equivalent.
    """
    kept = list(spec.constraints)
    for text in reversed(spec.constraints):
        rest = [t for t in kept if t != text]
        try:
            c = Constraint.parse(text)
            if rest and session_for(ConstraintSet.of(rest), budget, trial=True).proves(c.diff, ">=" if c.kind == ">=" else "==",
                                                                        Expr.const(0)):
                kept = rest
        except SmtdimsError:
            continue
    return Spec(spec.dims, spec.dtypes, tuple(kept))


def in_interval_form(job: ExportJob, spec: Spec) -> tuple[Spec, Any]:
    """``spec`` with each constraint on one variable written as the bounds a person writes
    (:func:`smtdims.answers.equations.interval_form`: ``floordiv(floordiv(-w, 2), 2) == -7`` is
    ``w >= 25, w <= 28``), and its export; ``(spec, None)`` where nothing changes or JAX, with smtdims
    installed, does not export the rewritten one.

    Sound: each constraint is replaced by bounds equivalent to it under the constraints in force at
    that step (those replaced before included), so every step, and the whole, admits the same shapes.
    """
    texts = list(spec.constraints)
    changed = False
    for i, text in enumerate(spec.constraints):
        others = ConstraintSet.of([t for j, t in enumerate(texts) if j != i and t])
        form = interval_form(text, others, job.budget)
        if form is not None:
            texts[i] = ""
            texts.extend(form)
            changed = True
    if not changed:
        return spec, None
    trial = Spec(spec.dims, spec.dtypes, tuple(dict.fromkeys(t for t in texts if t)))
    got = job.attempt(trial)
    return (trial, got) if got.ok else (spec, None)


def _with_atom(e: Expr, atom: Atom, by: Expr) -> Expr:
    """``e`` with every occurrence of ``atom`` replaced by ``by``, inside other atoms too
    (``floordiv(min(64, b), 2)``)."""

    def f(a: Atom) -> Expr:
        if a == atom:
            return by
        if isinstance(a, Op):
            return op_of(a.op, _with_atom(a.lhs, atom, by), _with_atom(a.rhs, atom, by))
        return Expr.atom(a)

    return map_atoms(e, f)


def in_plain_dims(job: ExportJob, spec: Spec) -> tuple[Spec, Any]:
    """``spec`` with each ``min``/``max`` of a dimension replaced by the side it always is under the
    constraints (``b`` for ``min(64, b)`` beside ``b <= 64``: the mask's length is the ids' length), and
    its export; ``(spec, None)`` where nothing changes or the rewritten one does not export.

    Sound: a dimension is replaced only by one proven equal to it for every valuation the constraints
    admit, so every valuation gives the same shapes."""
    if not any(isinstance(a, Op) and a.op in (MIN, MAX) for leaf in spec.dims for d in leaf for a in d.atoms()):
        return spec, None
    session = session_for(spec.constraint_set(), job.budget, trial=True)
    dims, changed = [], False
    for leaf in spec.dims:
        out = []
        for d in leaf:
            again = True
            while again:
                again = False
                for a in sorted(d.atoms(), key=lambda a: a.sort_key()):
                    if not (isinstance(a, Op) and a.op in (MIN, MAX)):
                        continue
                    for side in (a.lhs, a.rhs):
                        plain = _with_atom(d, a, side)
                        if plain == d:
                            continue  # nothing replaced: no progress to make (and no loop)
                        try:
                            if session.proves(d, "==", plain):
                                d, again, changed = plain, True, True
                                break
                        except SmtdimsError:
                            continue
                    if again:
                        break
            out.append(d)
        dims.append(tuple(out))
    if not changed:
        return spec, None
    trial = Spec(tuple(dims), spec.dtypes, spec.constraints)
    done = job.attempt(trial)
    return (trial, done) if done.ok else (spec, None)


def in_lattice_form(job: ExportJob, spec: Spec) -> tuple[Spec, Any]:
    """``spec`` with the equations on each one variable of its dimensions that hold on one residue class
    (:func:`smtdims.answers.lattice.lattice_form`) written as the class: ``m*v + c`` for ``v`` in the
    dimensions and in the other constraints, the equations dropped; and its export. ``(spec, None)``
    where nothing changes or the rewritten one does not export.

    Sound: :func:`~smtdims.answers.lattice.lattice_form` proves that the equations hold, under the other
    constraints, exactly on the class, so the rewrite (``v >= 1`` again) admits the same shapes.
    """
    current, changed = spec, False
    for v in sorted(spec.variables()):
        mine, rest = [], []
        for text in current.constraints:
            try:
                names = Constraint.parse(text).diff.variables()
            except SmtdimsError:
                names = set()
            (mine if names == {v} and not plain_constraint(text) and "==" in text else rest).append(text)
        if not mine:
            continue
        got = lattice_form(mine, ConstraintSet.of(rest), job.budget)
        if got is None:
            continue
        _, new = got
        trial = Spec(current.dims, current.dtypes, tuple(rest)).apply(FixPart(SPEC, str(new), v))
        current, changed = trial, True
    if not changed:
        return spec, None
    done = job.attempt(current)
    return (current, done) if done.ok else (spec, None)


__all__ = ["in_interval_form", "in_lattice_form", "in_plain_dims", "without_implied"]
