"""The whole fix of a failed export: fix, re-export, repeat; minimise; verify end to end.

Each round reads JAX's refusal into its kinds (:mod:`.refusals`: an inconclusive comparison,
whose operands smtdims' hook reports; an equation JAX's shape checks could not prove; a
reshape's "The remainder ... should be 0"; a broadcast of two different dimensions), asks the
first kind that offers any for every verified fix of it
(:func:`smtdims.answers.fixes.suggest_fixes`: constraints and spec rewrites, each re-decided
with the fix in place), and keeps the *weakest*: the one whose specification admits the
most traced shapes where the native function runs (:mod:`.box`: shapes chosen by reasoning,
those where the candidates disagree), then the fewest where it fails. It re-exports with that
fix and goes on until the export succeeds, no fix is found, or the round or time limit is
reached (the result says which). Minimising then drops each part in turn and keeps the drop
when the export still succeeds and no more traced shapes that fail natively are admitted. The
result is verified by the whole pipeline (export, fresh process, samples) and measured: called
"fixed" only when it admits every traced shape where the function runs on non-empty arrays,
else "found, narrower than needed", with an example.

The steps, each over one :class:`~.job.ExportJob` and the :class:`~.job.FixDraft` it builds:
:func:`search` (the rounds, :func:`fix_round` each, :func:`next_candidate` where a candidate's
export runs out of time, then :func:`minimise`), the verification with :func:`.verdict.exclude`
(:mod:`.verify` runs them: the fixed export is verified by the same pipeline, no second export),
and :func:`.verdict.conclude`. :func:`synthesize` is the same path without the verification.

Why greedy by native runs, and why it is sound: every part is verified (the export succeeds
with the whole fix, by JAX's own checks, and the artifact runs in a stock process), so
the traces only choose among correct fixes; their counts are reported, never trusted as a
proof. A fix that excludes shapes that run natively is said so plainly.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from smtdims.answers.equations import (
    cancel_common_factor,
    equation_fixes,
    normalise_constraint,
    render_constraint,
)
from smtdims.answers.fixes import SPEC, settling_fix, suggest_fixes, weakest_first
from smtdims.errors import SmtdimsError
from smtdims.lang.constraints import Constraint, ConstraintSet
from smtdims.lang.expr import Expr
from smtdims.reasoner import Session, session_for

from ..conversion import session_for_scope
from ..frames import raise_site
from ._common import Progress, Ticker
from .attempt import Attempt, Spec, apply_all, error_chain, jax_accepts, refusal_key, spec_of
from .box import NativeBox, valuation_of
from .forms import in_interval_form, in_lattice_form, in_plain_dims, without_implied
from .job import DEFAULT_DEADLINE, DEFAULT_ROUNDS, ExportJob, FixDraft, FixOptions
from .refusals import Candidate, ConstantNeeded, FixPart, Why, candidates_of, divisibility_fixes, last_resort_of
from .report import first_line
from .result import DEADLINE, FIXED, NARROW, NO_FIX, NO_SYMBOLIC, NOT_NEEDED, NOT_VERIFIED, ROUND_LIMIT, FixResult, FixRound
from .verdict import (
    as_parts,
    as_rewrite,
    conclude,
    excuses,
    exports_on_stock,
    group_text,
    with_counted_names,
)

VERIFY_ROUNDS = 4  # verification passes: each may add the exclusion of natively failing samples



def _complexity(parts: Sequence[FixPart]) -> tuple[int, int]:
    """How hard a fix is to read, for ties: the max/min/floordiv/mod it names, then its length
    (``p <= 16`` before ``p*q == min(16, p)*min(16, q)``, ``t <= 16`` before ``max(t - 4, 0) <= 16``)."""
    ops = sum(p.text.count(f"{op}(") for p in parts for op in ("max", "min", "floordiv", "mod"))
    return ops, sum(len(p.text) for p in parts)


def _simplest_equivalent(scored: list[Any], spec: Spec, budget: int | None) -> tuple[FixPart, ...]:
    """The best-scored fix, or a simpler one that admits exactly the same valuations (proven both ways
    under the specification's constraints): among equals, the text a person reads first. Only proven
    equivalence decides, not the box: a box too small to tell ``h <= 7`` from a bound on the patch grid
    would pick the shorter, stronger one."""
    best = scored[0][1]
    if any(p.kind == SPEC for p in best):
        return best
    peers = [g for _, g, *counts in scored[1:] if counts == scored[0][2:] and all(p.kind != SPEC for p in g)
             and _complexity(g) < _complexity(best)]
    if not peers:
        return best

    def implies(a: Sequence[FixPart], b: Sequence[FixPart]) -> bool:
        try:
            session = session_for(ConstraintSet.of([*spec.constraints, *(p.text for p in a)]), budget, trial=True)
            return all(session.proves(c.diff, ">=" if c.kind == ">=" else "==", Expr.const(0))
                       for c in (Constraint.parse(p.text) for p in b))
        except SmtdimsError:
            return False

    for g in sorted(peers, key=_complexity):
        if implies(g, best) and implies(best, g):
            return g
    return best


# -- candidates ------------------------------------------------------------------------------------
def candidates(att: Attempt, session: Session) -> list[Candidate]:
    """Verified fixes for the refusal, each a group of parts applied together (most are one part; the
    divisibilities that settle an equation may be several) with a tie-break rank (lower first among
    equal box scores): the fixes of the first of its refusals (:mod:`.refusals`) that offers any."""
    return candidates_of(att.refusals, session)


def specialisations(job: ExportJob, spec: Spec, att: Attempt) -> list[Candidate]:
    """A variable fixed where the program uses it as a number (``s = int(math.sqrt(n))``): no constraint
    or rewrite makes a symbolic dimension a Python number, a constant does. For each variable of the
    specification, the value a person fixes: the user's example's, else the smallest traced size at
    which the function runs on non-empty arrays (the smallest the model is built for; on a grid, the
    value at which the most grid shapes run); kept only when the export then gets past this refusal
    (tried: one export per variable, each as a candidate's). Also the last resort of any refusal where
    the user gave examples (a dimension fixed at its example value where nothing weaker verifies:
    ``dims="auto"``), and of a refusal smtdims reads nothing from (an einsum's sizes, checked by numpy
    on stand-in values)."""
    box = job.box
    assert box is not None
    if att.refusals and not box.example_shapes() and not any(isinstance(r, ConstantNeeded) for r in att.refusals):
        return []
    key = refusal_key(att)
    names = sorted(spec.variables())
    cs = spec.constraint_set()
    # the examples in this specification's variables (a rewrite 2*c has c = 4 where the example has 8)
    examples = [e for e in (valuation_of(spec.dims, cs, x, job.budget) for x in box.example_shapes()) if e is not None]
    out: list[Candidate] = []
    for v in names:
        if v not in box.variables and not examples:
            continue  # a rewritten variable: the traced sizes are the original's
        k = next((e[v] for e in examples if v in e), None)
        why = "the example's size"
        if k is None and not box.grid:
            k, why = box.smallest_running(v), "the smallest traced size where it runs"
        if k is None:
            counts = collections.Counter(env[v] for s, env in box.env.items() if box.ok.get(s))
            if not counts:
                continue
            k, why = max(counts, key=lambda x: (counts[x], x)), "where the most traced shapes run"
        chosen = "" if why == "the example's size" else (
            "; a choice, not the program's: give an example (dims='auto', --like) to fix it at your size")
        part = FixPart(SPEC, str(k), v, f"{v} is used as a number: fixed at {k}, {why}{chosen}", Why.NUMBER)
        trial = apply_all(spec, [part])
        if trial is None:
            continue
        got = job.attempt(trial)
        if got.ok or (not got.timed_out and refusal_key(got) != key):
            out.append(((part,), 3))
    return out




Scored = tuple[tuple[int, int, int, int], tuple[FixPart, ...], int, int, int]  # (sort key, group, ok, bad, nonempty)


def _scored(offered: Sequence[Candidate], spec: Spec, box: NativeBox,
            tick: Callable[[str | Callable[[], str]], None] = lambda m: None) -> list[Scored]:
    """The candidates JAX accepts, each with its score on the traced shapes (those where they disagree
    traced first: :meth:`.box.NativeBox.prepare`); the degenerate ones dropped."""
    trials = []
    for group, rank in offered:
        trial = apply_all(spec, group)
        if trial is None or not jax_accepts(trial):
            continue  # a rewrite we cannot apply, or a constraint JAX's parser refuses: no candidate
        if not all(box.admits(trial.dims, trial.constraint_set(), x) for x in box.example_shapes()):
            continue  # the user runs the examples: a family without them is no fix for this user
        trials.append((group, rank, trial))
    tick(lambda: f"fix: tracing where {len(trials)} candidates disagree")
    box.prepare([(t.dims, t.constraint_set()) for _, _, t in trials])
    # whether the specification so far admits a traced shape that computes on something (after the tracing)
    some_nonempty = bool(box.nonempty & box.admitted_shapes(spec.dims, spec.constraint_set()))
    order = _first_appearance(spec)
    out: list[Scored] = []
    for group, rank, trial in trials:
        nonempty, ok, bad = box.weakness(trial.dims, trial.constraint_set())
        if some_nonempty and nonempty == 0 and ok - bad > 0:  # weakness gives -(admitted failing)
            # degenerate: every traced shape it admits computes on empty arrays (n <= 15 under a stride of 16)
            continue
        # between equal renames (t := s or s := t), the later variable gives way: the names read in order
        late = any(p.kind == SPEC and p.variable is not None and p.text in order and
                   order.get(p.variable, 0) < order[p.text] for p in group)
        # where some traced shape computes on something, the shapes that compute on empty arrays only
        # count after the rank: 16*k + 48 (k frames) before 16*k + 32, which adds n = 48 (zero frames)
        key = (-nonempty, -bad, 2 * rank + late, -ok) if some_nonempty else (-nonempty, -ok, -bad, 2 * rank + late)
        out.append((key, group, ok, -bad, nonempty))
    return out


def _first_appearance(spec: Spec) -> dict[str, int]:
    """Each variable of the specification by where it first appears (leaf by leaf, left to right)."""
    order: dict[str, int] = {}
    for leaf in spec.dims:
        for d in leaf:
            for v in sorted(d.variables()):
                order.setdefault(v, len(order))
    return order


def last_resort(att: Attempt, session: Session) -> list[Candidate]:
    """The size a person fixes (a ViT's 224) when no candidate of :func:`candidates` survives: nothing
    weaker settles the equation, or JAX refuses each as written (an equation of sums as a constraint).
    Only then: it admits one size, so among candidates it would always admit the fewest failing shapes."""
    return last_resort_of(att.refusals, session)


# -- the first round alone (no function to run: smtdims run, pytest --smtdims) ---------------------------
def first_round_fix(session: Session, lhs: Expr, rhs: Expr, side: int | None = None) -> Any:
    """The weakest verified fix of an inconclusive ``lhs >= rhs``: :func:`smtdims.answers.fixes.settling_fix`
    (kept under this name for callers of the pipeline; ``side`` sets the ranking box)."""
    if side is None:
        return settling_fix(session, lhs, rhs)
    fixes = suggest_fixes(session, lhs, ">=", rhs) or suggest_fixes(session, lhs, "<", rhs)
    ranked = weakest_first(session, fixes, sorted(lhs.variables() | rhs.variables()), side)
    return ranked[0] if ranked else None


# -- the loop --------------------------------------------------------------------------------------
@dataclass
class Fallback:
    """The round's other candidates, for when the chosen one's export runs out of time."""

    before: Spec  # the specification before the round's fix
    n_parts: int  # the parts before it
    rest: list[Scored]  # the candidates left, best first
    at: int  # the round's place in the record
    later: list[Callable[[], list[Scored]]]  # the later kinds of candidate, tried when none is left
    key: tuple[str, str] | None = None  # the round's refusal: back after its fix, that fix settled nothing


def synthesize(fn: Callable[..., Any], spec_leaves: Sequence[Any], in_tree: Any, scope: Any,
               plats: tuple[str, ...] | None, *, budget: int | None = None, rounds: int = DEFAULT_ROUNDS,
               deadline: float = DEFAULT_DEADLINE, box_side: int | None = None, native: str = "eval_shape",
               say: Progress = lambda m: None, name: str = "",
               examples: Sequence[dict[str, int]] = ()) -> FixResult:
    """Find and minimise the whole fix of ``fn``'s export and measure it (see the module docstring),
    without the end-to-end verification: ``export_and_verify(fix=True)`` runs the same steps with it.
    ``examples``: valuations of the specification's variables the user runs (traced first; a size that
    must be pinned is pinned there)."""
    job = ExportJob.of(fn, spec_leaves, in_tree, scope, plats, budget, say, name, examples)
    job, draft = search(job, FixOptions(rounds, deadline, box_side), native=native)
    return conclude(job, draft)


def search(job: ExportJob, fx: FixOptions, *, native: str = "eval_shape", first: Attempt | None = None,
           start: Sequence[FixPart] = (), start_round: FixRound | None = None) -> tuple[ExportJob, FixDraft]:
    """The fix before its verification: the native traces, the rounds from the specification as given,
    the minimisation. ``first``: the refused export of the specification as given, where the caller ran
    it (each export runs once); ``start``: parts already found (the samples of an export that succeeded
    failed natively), with the round that found them. Returns the job with its clocks and traces."""
    t_start = time.perf_counter()
    job = job.fixing(fx.deadline, first)
    original = job.spec()
    job.say(f"fix: tracing the native function ({native}) " + (f"on the grid 1..{fx.box}" if fx.box else
                                                               "at shapes chosen by reasoning"))
    job = job.traced(original, fx.box, native)
    assert job.box is not None
    draft = FixDraft(original, (apply_all(original, start) or original) if start else original, list(start),
                     [start_round] if start_round is not None else [], tuple(start), detail=f"{fx.rounds} rounds",
                     t_start=t_start)
    job = run_rounds(job, draft, fx, first)
    minimise(job, draft)
    if draft.status == FIXED:
        draft.spec = without_implied(draft.spec, job.budget)
        for form in (in_plain_dims, in_interval_form, in_lattice_form):
            readable, got = form(job, draft.spec)
            if got is not None:
                draft.spec, draft.done = readable, got
        with_counted_names(job, draft)
    spec = draft.spec
    draft.count = (job.box.count(spec.dims, spec.constraint_set(), excused=excuses(draft.parts))
                   if draft.parts or draft.status == NOT_NEEDED else None)
    return job, draft


def run_rounds(job: ExportJob, draft: FixDraft, fx: FixOptions, first: Attempt | None) -> ExportJob:
    """Export, fix, repeat: until the export succeeds, no fix is found, the same refusal comes back, or
    the round or time limit is reached (the draft's status says which)."""
    assert job.stop is not None
    seen: set[tuple[str, str]] = set()  # the refusals met: the same one back is no progress
    fallback: Fallback | None = None
    for _ in range(fx.rounds + 1):
        if time.monotonic() > job.stop:
            draft.status, draft.detail = DEADLINE, f"{fx.deadline:.0f}s"
            break
        t0 = time.perf_counter()
        given = draft.spec is draft.original and not draft.parts
        last = draft.ran(first if first is not None and draft.spec is draft.original else
                         job.attempt(draft.spec, limited=not given))  # the user's own export is never cut
        first = None
        if given:
            job = job.given(last)
        if fallback is not None and (last.timed_out or (not last.ok and refusal_key(last) == fallback.key)):
            # past its limit, or the round's own refusal back (JAX's rules did not match the constraint as
            # written): the round's next candidate, then its later kinds (a family, a fixed size)
            fallback = next_candidate(job, draft, last, fallback)
            if fallback is None:
                break
            continue
        if last.ok:
            draft.done = last
            draft.status, draft.detail = (FIXED, "") if draft.parts else (NOT_NEEDED, "the export succeeds as specified")
            break
        if len(draft.rounds) >= fx.rounds:
            break
        fallback = fix_round(job, draft, last, seen, t0)
        if fallback is None:
            break
    return job


def fix_round(job: ExportJob, draft: FixDraft, last: Attempt, seen: set[tuple[str, str]],
              t0: float) -> Fallback | None:
    """One round on the refused export ``last``: every verified candidate of its first kind that offers
    any, scored on the native traces; the weakest (its simplest equivalent, as a person writes it) joins
    the fix. Returns the round's other candidates; None: the loop ends (the same refusal came back, or no
    candidate was found)."""
    box, spec = job.box, draft.spec
    assert box is not None
    msg = first_line(last.message, 300)
    key = refusal_key(last)
    if key in seen:  # the same equation or comparison, not merely the same words of a wrapper
        draft.status, draft.detail = NO_FIX, f"the same refusal came back: {msg}"
        return None
    seen.add(key)
    draft.sides += [(e, spec.dims) for r in last.refusals for e in r.sides()]  # in the round's own variables
    session = (session_for(spec.constraint_set(), job.budget, trial=True) if last.scope is None
               else session_for_scope(last.scope))
    job.say(f"fix round {len(draft.rounds) + 1}: {msg}")
    tick = Ticker(job.say)
    offered = candidates(last, session)
    round_no = len(draft.rounds) + 1
    tick(f"fix round {round_no}: {len(offered)} verified candidate(s); measuring them")
    scored = _scored(offered, spec, box, tick)
    later = _later_kinds(job, spec, last, session, tick, round_no)
    while not scored and later:
        scored = later.pop(0)()
    scored.sort(key=lambda x: x[0])
    if not scored:
        draft.status, draft.detail = NO_FIX, f"smtdims found no verified fix for: {msg}"
        draft.rounds.append(FixRound(last.message, (), (), time.perf_counter() - t0))
        return None
    picked = _simplest_equivalent(scored, spec, job.budget)
    chosen = tuple(as_rewrite(p, spec) for p in picked)
    fallback = Fallback(spec, len(draft.parts), [x for x in scored if x[1] != picked], len(draft.rounds), later, key)
    draft.parts.extend(chosen)
    draft.spec = apply_all(spec, chosen) or spec
    draft.rounds.append(FixRound(last.message, tuple((group_text(g), ok, bad, ne) for _, g, ok, bad, ne in scored),
                                 chosen, time.perf_counter() - t0,
                                 raise_site(last.error) if last.error is not None else ""))
    return fallback


def _later_kinds(job: ExportJob, spec: Spec, last: Attempt, session: Session, tick: Ticker,
                 round_no: int) -> list[Callable[[], list[Scored]]]:
    """The kinds of candidate tried when none of the earlier kinds is found (or each ran past its limit):
    a fixed size (:func:`specialisations`) and the refusal's last resort."""
    assert job.box is not None
    box = job.box

    def pinned() -> list[Scored]:
        tick(f"fix round {round_no}: trying each variable fixed")
        return _scored(specialisations(job, spec, last), spec, box, tick)

    def resort() -> list[Scored]:
        return _scored(last_resort(last, session), spec, box, tick)

    # a size used as a number is a fixed size before an earlier equation's last resort
    number_needed = bool(last.refusals) and isinstance(last.refusals[0], ConstantNeeded)
    return [pinned, resort] if number_needed else [resort, pinned]


def next_candidate(job: ExportJob, draft: FixDraft, last: Attempt, fb: Fallback) -> Fallback | None:
    """The chosen candidate's export ran past its limit (JAX's own arithmetic under it, not a refusal), or
    the same refusal came back with it: the round's next candidate in its place, else its later kinds'.
    None: none is left (the loop ends)."""
    job.say(f"fix: {group_text(draft.parts[fb.n_parts:])}: {first_line(last.message, 200)}; trying the next candidate")
    rest = fb.rest
    while not rest and fb.later:  # the round's later kinds of candidate (a fixed size), as when none was found
        rest = sorted(fb.later.pop(0)(), key=lambda x: x[0])
    if not rest:
        draft.status, draft.detail = NO_FIX, (f"every candidate of the round ran past its limit: {last.message}"
                                              if last.timed_out else
                                              f"the same refusal came back with every candidate: {first_line(last.message, 300)}")
        return None
    picked = _simplest_equivalent(rest, fb.before, job.budget)
    chosen = tuple(as_rewrite(p, fb.before) for p in picked)
    draft.parts[fb.n_parts:] = chosen
    draft.spec = apply_all(fb.before, chosen) or fb.before
    draft.rounds[fb.at] = replace(draft.rounds[fb.at], parts=chosen)
    return replace(fb, rest=[x for x in rest if x[1] != picked])


def minimise(job: ExportJob, draft: FixDraft) -> None:
    """Drop each part in turn, the last first, and keep the drop when the export still succeeds and the
    wider specification admits no more traced shapes that fail natively (what it admits besides is traced
    before it is judged). A part found by samples that failed natively stays: the traces may not see
    those shapes."""
    box = job.box
    assert box is not None
    if draft.status != FIXED or len(draft.parts) <= 1:
        return
    base_bad = -box.score(draft.spec.dims, draft.spec.constraint_set())[1]
    i = len(draft.parts) - 1
    while i >= 0 and job.running():
        part = draft.parts[i]
        if part in draft.start:
            i -= 1
            continue
        trial_parts = draft.parts[:i] + draft.parts[i + 1:]
        trial = apply_all(draft.original, trial_parts)
        if trial is not None:
            box.prepare([(draft.spec.dims, draft.spec.constraint_set()), (trial.dims, trial.constraint_set())])
            base_bad = -box.score(draft.spec.dims, draft.spec.constraint_set())[1]
        if trial is not None and -box.score(trial.dims, trial.constraint_set())[1] <= base_bad:
            got = draft.ran(job.attempt(trial))
            if got.ok:
                job.say(f"fix: minimised: {part} is not needed")
                draft.dropped.append(str(part))
                draft.parts, draft.spec, draft.done = trial_parts, trial, got
        i -= 1


__all__ = [
    "DEADLINE", "DEFAULT_DEADLINE", "DEFAULT_ROUNDS", "FIXED", "NARROW", "NOT_NEEDED", "NOT_VERIFIED", "NO_FIX",
    "NO_SYMBOLIC", "ROUND_LIMIT", "VERIFY_ROUNDS",
    "Attempt", "Fallback", "FixOptions", "FixPart", "FixResult", "FixRound", "Spec", "as_parts", "cancel_common_factor",
    "candidates", "divisibility_fixes", "equation_fixes", "error_chain", "exports_on_stock", "first_round_fix",
    "last_resort", "minimise", "normalise_constraint", "refusal_key", "render_constraint", "search",
    "specialisations", "spec_of", "synthesize",
]
