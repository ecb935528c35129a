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

Why greedy by native runs, and why it is sound: every part is verified (the export succeeds
with the whole fix, by JAX's own checks, and the artifact runs in a stock process), so
the traces only choose among correct fixes; their counts are reported, never trusted as a
proof. A fix that excludes shapes that run natively is said so plainly.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import jax
from jax import export

from smtdims.answers.equations import (
    cancel_common_factor,
    equation_fixes,
    normalise_constraint,
    render_constraint,
)
from smtdims.answers.fixes import SPEC, settling_fix, suggest_fixes, weakest_first
from smtdims.errors import SmtdimsError, format_valuation
from smtdims.lang.constraints import Constraint, ConstraintSet
from smtdims.lang.expr import Expr, Var
from smtdims.reasoner import Session

from ..conversion import session_for_scope
from ..frames import raise_site
from ..seam import stock_jax
from ._common import Progress, Ticker, _local_platform, paste_target
from .attempt import (
    Attempt,
    Spec,
    apply_all,
    attempt,
    error_chain,
    jax_accepts,
    refusal_key,
    spec_of,
)
from .box import NativeBox, shapes_at, valuation_of
from .refusals import (
    Candidate,
    ConstantNeeded,
    FixPart,
    candidates_of,
    divisibility_fixes,
    divisibility_rewrite,
    last_resort_of,
)
from .report import _first_line
from .result import DEADLINE, FIXED, NARROW, NO_FIX, NO_SYMBOLIC, NOT_NEEDED, NOT_VERIFIED, ROUND_LIMIT, FixResult, FixRound

DEFAULT_ROUNDS = 8
DEFAULT_DEADLINE = 120.0  # seconds for the rounds and the minimisation (the final verification runs after)
# An export under a candidate may take ATTEMPT_SCALE times the longer of a whole native trace of the
# function (the box's slowest where it runs) and the refused export of the specification as given, and
# never less than ATTEMPT_FLOOR seconds: a symbolic export costs a few native traces, but a candidate
# that keeps JAX's own arithmetic busy for minutes (a product of floor divisions equal to a constant)
# is no fix to wait for; the round's next candidate is tried instead.
ATTEMPT_SCALE, ATTEMPT_FLOOR = 10.0, 5.0


@dataclass(frozen=True)
class FixOptions:
    """How far the loop may go: rounds, seconds, and the grid's side (None: shapes chosen by reasoning,
    :mod:`.box`)."""

    rounds: int = DEFAULT_ROUNDS
    deadline: float = DEFAULT_DEADLINE
    box: int | None = None


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
    peers = [g for key, g, *_ in scored[1:] if key[:3] == scored[0][0][:3] and all(p.kind != SPEC for p in g)
             and _complexity(g) < _complexity(best)]
    if not peers:
        return best

    def implies(a: Sequence[FixPart], b: Sequence[FixPart]) -> bool:
        try:
            session = Session(ConstraintSet.of([*spec.constraints, *(p.text for p in a)]), budget)
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


def specialisations(fn: Callable[..., Any], spec: Spec, in_tree: Any, plats: tuple[str, ...] | None,
                    budget: int | None, att: Attempt, box: NativeBox, name: str = "",
                    limit: Callable[[], float | None] = lambda: None) -> list[Candidate]:
    """A variable fixed where the program uses it as a number (``s = int(math.sqrt(n))``): no constraint
    or rewrite makes a symbolic dimension a Python number, a constant does. For each variable of the
    specification, the value a person fixes: the user's example's, else the smallest traced size at
    which the function runs on non-empty arrays (the smallest the model is built for; on a grid, the
    value at which the most grid shapes run); kept only when the export then gets past this refusal
    (tried: one export per variable). Also the last resort of any refusal where the user gave examples
    (a dimension fixed at its example value where nothing weaker verifies: ``dims="auto"``), and of a
    refusal smtdims reads nothing from (an einsum's sizes, checked by numpy on stand-in values)."""
    if att.refusals and not box.example_shapes() and not any(isinstance(r, ConstantNeeded) for r in att.refusals):
        return []
    key = refusal_key(att)
    names = sorted(spec.variables())
    cs = spec.constraint_set()
    # the examples in this specification's variables (a rewrite 2*c has c = 4 where the example has 8)
    examples = [e for e in (valuation_of(spec.dims, cs, x, budget) for x in box.example_shapes()) if e is not None]
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
        part = FixPart(SPEC, str(k), v, f"{v} is used as a number: fixed at {k}, {why}")
        trial = apply_all(spec, [part])
        if trial is None:
            continue
        got = attempt(fn, trial, in_tree, plats, budget, limit())
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
    out: list[Scored] = []
    for group, rank, trial in trials:
        nonempty, ok, bad = box.weakness(trial.dims, trial.constraint_set())
        if some_nonempty and nonempty == 0 and ok - bad > 0:  # weakness gives -(admitted failing)
            # degenerate: every traced shape it admits computes on empty arrays (n <= 15 under a stride of 16)
            continue
        out.append(((-nonempty, -ok, -bad, rank), group, ok, -bad, nonempty))
    return out


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
def synthesize(fn: Callable[..., Any], spec_leaves: Sequence[Any], in_tree: Any, scope: Any,
               plats: tuple[str, ...] | None, *, budget: int | None = None, rounds: int = DEFAULT_ROUNDS,
               deadline: float = DEFAULT_DEADLINE, box_side: int | None = None, native: str = "eval_shape",
               say: Progress = lambda m: None, verify: Callable[[Any, Any, Any], Any] | None = None,
               name: str = "", start: Sequence[FixPart] = (), start_round: FixRound | None = None,
               examples: Sequence[dict[str, int]] = (), first: Attempt | None = None) -> FixResult:
    """Find, minimise and verify the whole fix of ``fn``'s export (see the module docstring).

    ``verify(specs, scope, exported)`` runs the whole pipeline on the fixed specification and returns
    its VerificationReport (None: skip the end-to-end check). One loop over export and
    verification: when the fixed export's samples fail where the function itself fails, the
    exclusion the diagnosis found joins the fix (a divisibility of a spec variable as the spec
    rewrite a person writes, ``7*h`` for ``h``) and the loop goes on until the fixed export
    verifies or nothing is left to try. ``start``: parts already found (the samples of an export
    that succeeded failed natively), with the round that found them. ``examples``: valuations of the
    specification's variables the user runs (traced first; a size that must be pinned is pinned there).
    ``first``: the refused export of the specification as given, when the caller ran it (each export
    runs once). ``verify`` gets the fixed export's ``Exported`` as its third argument.
    """
    t_start = time.perf_counter()
    stop = time.monotonic() + deadline
    original = spec_of(spec_leaves, scope)
    say(f"fix: tracing the native function ({native}) " + (f"on the grid 1..{box_side}" if box_side else
                                                          "at shapes chosen by reasoning"))
    box = NativeBox(fn, original.dims, original.dtypes, in_tree, original.constraint_set(), side=box_side,
                    native=native, deadline=stop, say=say, examples=examples, budget=budget)
    spec, parts, done_rounds = original, list(start), [start_round] if start_round is not None else []
    if start:
        spec = apply_all(original, start) or original
    status, detail = ROUND_LIMIT, f"{rounds} rounds"
    errors_seen: set[tuple[str, str]] = set()
    last: Attempt | None = None
    sides: list[Expr] = []  # the sizes each refused equation compared, in the original variables
    done: Attempt | None = None  # the export that succeeded, of the specification it was made with
    exports = [0, 0.0]  # the exports this fix ran and their seconds (the refused one as given included)
    verify_s = 0.0

    scale = [first.seconds if first is not None else 0.0]  # the refused export of the spec as given

    def limit() -> float:
        """Seconds an export under a candidate may take (see ATTEMPT_SCALE)."""
        return max(0.1, min(stop - time.monotonic(), max(ATTEMPT_FLOOR, ATTEMPT_SCALE * max(scale[0], box.slowest_run))))

    def exported(att: Attempt) -> Attempt:
        exports[0] += 1
        exports[1] += att.seconds
        return att
    # the round's other candidates, for when the chosen one's export runs out of time: (the specification
    # and parts before it, the candidates left, the round's record)
    fallback: tuple[Spec, int, list[Scored], int, list[Callable[[], list[Scored]]]] | None = None
    for _ in range(rounds + 1):
        if time.monotonic() > stop:
            status, detail = DEADLINE, f"{deadline:.0f}s"
            break
        t0 = time.perf_counter()
        given = spec is original and not parts
        last = exported(first if first is not None and spec is original else
                        attempt(fn, spec, in_tree, plats, budget, None if given else limit()))
        first = None
        if given:
            scale[0] = max(scale[0], last.seconds)
        if last.timed_out and fallback is not None:
            # JAX's own arithmetic under the chosen candidate ran past the limit: the round's next one
            before, n_parts, rest, at, later = fallback
            say(f"fix: {group_text(parts[n_parts:])}: {last.message}; trying the next candidate")
            tried = {x[1] for x in rest}
            while not rest and later:  # the round's later kinds of candidate (a fixed size), as when none was found
                rest = sorted((x for x in later.pop(0)() if x[1] not in tried), key=lambda x: x[0])
            if not rest:
                status, detail = NO_FIX, f"every candidate of the round ran past its limit: {last.message}"
                break
            picked = _simplest_equivalent(rest, before, budget)
            chosen = tuple(_as_rewrite(p, before) for p in picked)
            fallback = (before, n_parts, [x for x in rest if x[1] != picked], at, later)
            parts[n_parts:] = chosen
            spec = apply_all(before, chosen) or before
            if done_rounds[at] is not None:
                done_rounds[at] = replace(done_rounds[at], chosen=group_text(chosen))
            continue
        if last.ok:
            done = last
            status, detail = (FIXED, "") if parts else (NOT_NEEDED, "the export succeeds as specified")
            break
        if len(done_rounds) >= rounds:
            break
        msg = _first_line(last.message, 300)
        key = refusal_key(last)
        if key in errors_seen:  # the same equation or comparison, not merely the same words of a wrapper
            status, detail = NO_FIX, f"the same refusal came back: {msg}"
            break
        errors_seen.add(key)
        if spec.dims == original.dims:
            sides += [e for r in last.refusals for e in r.sides()]
        session = Session(spec.constraint_set(), budget) if last.scope is None else session_for_scope(last.scope)
        say(f"fix round {len(done_rounds) + 1}: {msg}")
        tick = Ticker(say)
        offered = candidates(last, session)
        round_no = len(done_rounds) + 1
        tick(f"fix round {round_no}: {len(offered)} verified candidate(s); measuring them")
        scored = _scored(offered, spec, box, tick)

        def pinned(spec: Spec = spec, last: Attempt = last, tick: Ticker = tick, round_no: int = round_no) -> list[Scored]:
            tick(f"fix round {round_no}: trying each variable fixed")
            return _scored(specialisations(fn, spec, in_tree, plats, budget, last, box, name, limit), spec, box, tick)

        def resort(spec: Spec = spec, last: Attempt = last, session: Session = session, tick: Ticker = tick) -> list[Scored]:
            return _scored(last_resort(last, session), spec, box, tick)

        # the kinds of candidate tried when none of the earlier kinds is found (or each ran past its limit):
        # a size used as a number is a fixed size before an earlier equation's last resort
        number_needed = bool(last.refusals) and isinstance(last.refusals[0], ConstantNeeded)
        later: list[Callable[[], list[Scored]]] = [pinned, resort] if number_needed else [resort, pinned]
        while not scored and later:
            scored = later.pop(0)()
        scored.sort(key=lambda x: x[0])
        if not scored:
            status, detail = NO_FIX, f"smtdims found no verified fix for: {msg}"
            done_rounds.append(FixRound(last.message, (), "", time.perf_counter() - t0))
            break
        picked = _simplest_equivalent(scored, spec, budget)
        chosen = tuple(_as_rewrite(p, spec) for p in picked)
        fallback = (spec, len(parts), [x for x in scored if x[1] != picked], len(done_rounds), later)
        parts.extend(chosen)
        spec = apply_all(spec, chosen) or spec
        done_rounds.append(FixRound(last.message, tuple((group_text(g), ok, bad, ne) for _, g, ok, bad, ne in scored),
                                    group_text(chosen), time.perf_counter() - t0,
                                    raise_site(last.error) if last.error is not None else ""))
    dropped: list[str] = []
    if status == FIXED and len(parts) > 1:
        base_bad = -box.score(spec.dims, spec.constraint_set())[1]
        i = len(parts) - 1
        while i >= 0 and time.monotonic() < stop:
            if parts[i] in start:  # found by samples that failed natively: the box may not see those shapes
                i -= 1
                continue
            trial_parts = parts[:i] + parts[i + 1:]
            trial = apply_all(original, trial_parts)
            if trial is not None:  # what the wider specification admits besides: traced before it is judged
                box.prepare([(spec.dims, spec.constraint_set()), (trial.dims, trial.constraint_set())])
                base_bad = -box.score(spec.dims, spec.constraint_set())[1]
            if trial is not None and -box.score(trial.dims, trial.constraint_set())[1] <= base_bad:
                got = exported(attempt(fn, trial, in_tree, plats, budget, limit()))
                if got.ok:
                    say(f"fix: minimised: {parts[i]} is not needed")
                    dropped.append(str(parts[i]))
                    parts, spec, done = trial_parts, trial, got
            i -= 1
    if status == FIXED:
        spec = _without_implied(spec, budget)
    count = box.count(spec.dims, spec.constraint_set()) if parts or status == NOT_NEEDED else None
    verified: bool | None = None
    lines: tuple[str, ...] = ()
    report = None
    for _pass in range(VERIFY_ROUNDS):
        if status != FIXED or verify is None:
            break
        say("fix: verifying the fixed specification end to end")
        args, new_scope = spec.build(in_tree)
        t_verify = time.perf_counter()
        report = verify(args, new_scope, done.exported if done is not None and done.spec == spec else None)
        verify_s += time.perf_counter() - t_verify
        verified = bool(report.ok)
        lines = tuple(report.failures)
        more = _exclusions(report, spec, fn, in_tree, plats, budget, limit()) if not verified else None
        if more is None:
            break
        group, trial, why = more  # samples failed where the function fails: exclude them and go on
        say(f"fix: the fixed export's samples fail natively; excluding them: {group_text(group)}")
        parts.extend(group)
        spec, done = _without_implied(trial, budget), None
        ne, ok, bad = box.weakness(spec.dims, spec.constraint_set())
        done_rounds.append(FixRound(why, ((group_text(group), ok, -bad, ne),), group_text(group), 0.0))
        count = box.count(spec.dims, spec.constraint_set())
    if status == FIXED and verify is not None and report is not None:
        if not verified:  # "fixed" means verified end to end: say what was found and what failed
            status = NOT_VERIFIED
            detail = (f"the fixed export did not run: {report.not_run}" if report.not_run else
                      "the fixed export failed its verification: " + (_first_line(lines[0], 200) if lines else "a check failed"))
    extremes: tuple[tuple[dict[str, int], bool, bool], ...] = ()
    if status in (FIXED, NOT_VERIFIED) and spec.dims == original.dims and time.monotonic() < stop:
        extremes = _measure_extremes(box, spec, original, budget)
        if extremes:  # the edges are box points now (t = 513 runs natively or not): count them
            count = box.count(spec.dims, spec.constraint_set())
    pinning = [r for r in done_rounds if r is not None and any(str(p) in r.chosen for p in parts if _pins([p]))]
    if status in (FIXED, NOT_VERIFIED) and original.variables() and not spec.variables() and pinning:
        # a concrete export is no family: say that no constraint makes it symbolic, where and why
        first_pin = pinning[0]
        status = NO_SYMBOLIC
        detail = ("no constraint can make this export with symbolic sizes: every size had to be fixed, because "
                  f"{_first_line(first_pin.error, 200)}" + (f" (at {first_pin.location})" if first_pin.location else ""))
    if status == FIXED and count is not None and count.admitted > count.admitted_ok:
        # the family admits a traced shape where the function itself fails (a size model code special-cases,
        # a table's edge): the samples did not look there, the traces did; not verified
        status = NOT_VERIFIED
        detail = (f"it admits {count.admitted - count.admitted_ok} traced shape(s) where {name or 'the function'} "
                  "fails natively, e.g. " + "; ".join(format_valuation(v) for v in count.admitted_failing[:2]))
    lost = _lost(box, original, spec, sides) if status == FIXED and count is not None and not _pins(parts) else []
    if lost:
        # verified, but narrower than the function: honest words, not "fixed" (a pinned size excludes the
        # others by necessity: the program uses it as a number, or only one size settles the equation)
        status = NARROW
        detail = (f"it excludes {len(lost)} traced shape(s) where {name or 'the function'} runs on non-empty "
                  "arrays, e.g. " + "; ".join(format_valuation(v) for v in lost[:2]))
    stock = exports_on_stock(fn, spec, in_tree, plats) if status in (FIXED, NARROW, NOT_VERIFIED) else None
    return FixResult(
        status=status, detail=detail, parts=tuple(parts), in_avals=spec.aval_texts(), shapes=spec.shape_texts(),
        constraints=spec.constraints, rounds=tuple(done_rounds), dropped=tuple(dropped), box=count, verified=verified,
        verification=lines, function=name, seconds=time.perf_counter() - t_start, report=report,
        target=paste_target(fn), extremes=extremes, stock=stock,
        platforms=tuple(plats) if plats and tuple(plats) != (_local_platform(),) else None,
        timing=(("native traces", box.traces, box.trace_seconds), ("exports", exports[0], exports[1]),
                *((("verification", 0, verify_s),) if verify_s else ())),
    )


def _lost(box: NativeBox, original: Spec, spec: Spec, sides: Sequence[Expr]) -> list[dict[str, int]]:
    """The traced shapes where the function runs on non-empty arrays that the original specification admits
    and the fix excludes, apart from those the refusal itself excludes: where a size a refused equation
    compared is 1 (the function broadcasts it there; a symbolic dimension never broadcasts, so no
    specification that keeps it symbolic admits both ``b == 2*a`` and ``b == 1``)."""
    cs, fixed = original.constraint_set(), spec.constraint_set()
    out = []
    for s in sorted(box.nonempty, key=lambda s: sum(x for leaf in s for x in leaf)):
        env = box.env[s]
        if not box.admits(original.dims, cs, s) or box.admits(spec.dims, fixed, s):
            continue
        try:
            if any(e.evaluate(env) == 1 for e in sides):
                continue
        except (ZeroDivisionError, KeyError):
            pass
        out.append(env)
    return out


def _pins(parts: Sequence[FixPart]) -> bool:
    """Whether the fix pins a variable to a size (a spec rewrite to a constant)."""
    return any(p.kind == SPEC and p.text.strip().isdigit() for p in parts)


def _measure_extremes(box: NativeBox, spec: Spec, original: Spec,
                      budget: int | None) -> tuple[tuple[dict[str, int], bool, bool], ...]:
    """Each variable the fix bounds, at its bound and one past it (others at their least values), run
    natively: ``t <= 512`` is checked at ``t = 512`` (must run) and ``t = 513`` (fails, or the fix is too
    strong). Only valuations the original specification admits count; a box of small shapes never gets there."""
    fixed = spec.constraint_set()
    names = sorted(spec.variables())
    out = []
    try:
        session = Session(fixed, budget)
        least = {v: int(session.bounds(Expr.var(v)).lo) for v in names}
        for v in sorted(fixed.variables() & set(names)):
            b = session.bounds(Expr.var(v))
            for end, step in ((b.hi, 1), (b.lo, -1)):
                if not math.isfinite(end) or (step < 0 and end <= max(box.side, 1)):
                    continue
                for value in (int(end), int(end) + step):
                    env = {**least, v: value}
                    if value < 1 or not original.constraint_set().holds(env):
                        continue
                    box.add([env])
                    shapes = shapes_at(spec.dims, env)
                    if shapes is not None and shapes in box.ok:
                        out.append((env, box.ok[shapes], bool(fixed.holds(env))))
    except (SmtdimsError, ZeroDivisionError, KeyError):
        return tuple(out)
    return tuple(out)


def _as_rewrite(part: FixPart, spec: Spec) -> FixPart:
    """A constraint ``v == k`` (a size) or ``v == w`` (another variable) on a variable ``v`` of the
    specification, as the rewrite a person writes: ``k`` or ``w`` in place of ``v`` (``float32[b, t, 32]``,
    not ``c == 32``); any other part as it is.

    Sound: ``v`` is then determined by the other side, which is >= 1 (a constant >= 1, or a variable),
    so the rewritten specification admits exactly the shapes the constraint admits.
    """
    if part.kind == SPEC:
        return part
    try:
        c = Constraint.parse(part.text)
    except SmtdimsError:
        return part
    if c.kind != "==":
        return part
    names = spec.variables()
    for v in sorted(c.diff.variables() & names):
        coeff = sum(k for m, k in c.diff.terms if len(m) == 1 and m[0][1] == 1 and m[0][0] == Var(v))
        rest = c.diff - Expr.var(v) * coeff
        if abs(coeff) != 1 or v in rest.variables():
            continue
        other = -rest if coeff == 1 else rest  # coeff*v + rest == 0: v == other
        k = other.as_constant()
        if (k is not None and k >= 1) or (other.as_var() is not None and other.as_var() != v):
            if apply_all(spec, [FixPart(SPEC, str(other), v)]) is not None:
                return FixPart(SPEC, str(other), v, part.note or f"{v} equals {other}")
    return part


def _without_implied(spec: Spec, budget: int | None) -> Spec:
    """Drop each constraint the others prove (``b >= 2`` beside ``b >= 8``): the same valuations, fewer words.

    Sound: a constraint implied by the rest excludes nothing the rest admits, so the set is equivalent.
    """
    kept = list(spec.constraints)
    for text in reversed(spec.constraints):
        rest = [t for t in kept if t != text]
        try:
            c = Constraint.parse(text)
            if rest and Session(ConstraintSet.of(rest), budget).proves(c.diff, ">=" if c.kind == ">=" else "==",
                                                                        Expr.const(0)):
                kept = rest
        except SmtdimsError:
            continue
    return Spec(spec.dims, spec.dtypes, tuple(kept))


VERIFY_ROUNDS = 4  # verification passes: each may add the exclusion of natively failing samples


def as_parts(constraints: Sequence[str], spec: Spec) -> list[FixPart]:
    """The diagnosis's exclusions as a person writes them: ``mod(h, 7) == 0`` on a variable of the
    specification as the rewrite ``7*h`` for ``h`` (the form JAX's documentation teaches, and one JAX
    accepts where it refuses a ``mod`` constraint); every other one as a constraint.

    Sound: for integers ``h >= 1``, ``mod(h, k) == 0`` holds exactly for ``h = k*h'`` with ``h' >= 1``.
    """
    names = spec.variables()
    out: list[FixPart] = []
    for text in constraints:
        part = divisibility_rewrite(text)
        if part is not None and part.variable in names:
            out.append(part)
            continue
        try:
            Constraint.parse(text)
        except SmtdimsError:
            out.append(FixPart("constraint", text))
            continue
        out.append(FixPart("constraint", normalise_constraint(text)))
    return out


def exclusion(d: Any, spec: Spec, fn: Callable[..., Any], in_tree: Any, plats: tuple[str, ...] | None,
              budget: int | None, limit: float | None = None) -> tuple[list[FixPart], Spec, str] | None:
    """The exclusion of the natively failing samples a diagnosis (:class:`.diagnose.SampleDiagnosis`) found,
    applied to ``spec`` and re-exported (the spec rewrite first, the plain constraints if the rewrite does
    not export), with why; or None: no sample failed natively, or nothing found exports."""
    if d is None or not d.native_fails or not d.constraints:
        return None
    why = (f"the samples fail natively at {format_valuation(d.native_fails[0])}: {_first_line(d.native_error, 200)}")
    for group in (as_parts(d.constraints, spec), [FixPart("constraint", normalise_constraint(t)) for t in d.constraints]):
        trial = apply_all(spec, group)
        if trial is not None and jax_accepts(trial) and attempt(fn, trial, in_tree, plats, budget, limit).ok:
            return group, trial, why
    return None


def _exclusions(report: Any, spec: Spec, fn: Callable[..., Any], in_tree: Any, plats: tuple[str, ...] | None,
                budget: int | None, limit: float | None) -> tuple[list[FixPart], Spec, str] | None:
    """:func:`exclusion` of a verification's diagnosis (None when its samples did not run)."""
    return None if report.not_run else exclusion(getattr(report, "diagnosis", None), spec, fn, in_tree, plats,
                                                 budget, limit)


def exports_on_stock(fn: Callable[..., Any], spec: Spec, in_tree: Any, plats: tuple[str, ...] | None) -> bool:
    """Whether stock JAX (smtdims uninstalled for the call) exports ``fn`` with ``spec``: the printed code
    says ``smtdims.install()`` when it does not (a bound on ``floordiv(h, 8)*floordiv(w, 8)`` that only
    smtdims proves enough)."""
    try:
        with stock_jax():
            args, _ = spec.build(in_tree)
            export.export(jax.jit(fn), platforms=plats)(*args)
        return True
    except Exception:  # noqa: BLE001 - any refusal: the code needs smtdims
        return False


def group_text(parts: Sequence[FixPart]) -> str:
    return "; ".join(str(p) for p in parts)


__all__ = [
    "DEADLINE", "FIXED", "NARROW", "NOT_NEEDED", "NOT_VERIFIED", "NO_FIX", "NO_SYMBOLIC", "ROUND_LIMIT",
    "Attempt", "FixOptions", "FixPart", "FixResult", "FixRound", "Spec", "as_parts", "attempt", "cancel_common_factor",
    "candidates", "divisibility_fixes", "equation_fixes", "error_chain", "exclusion", "exports_on_stock",
    "first_round_fix", "last_resort", "normalise_constraint", "refusal_key", "render_constraint", "spec_of", "synthesize",
]
