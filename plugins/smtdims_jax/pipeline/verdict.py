"""The whole fix's words and its verdict: how a fix is written, what the verification's exclusions add,
and what the fix is called once it is measured.

A fix is written as a person writes it (a constraint ``v == k`` as the rewrite ``k`` for ``v``, a
divisibility of a spec variable as ``7*h``, implied constraints dropped). After a verification whose
samples fail where the function itself fails, :func:`exclude` adds the diagnosis's exclusion (re-exported
first). :func:`conclude` then says what the fix is: "fixed" only when the export succeeds with it, it
verified end to end, and it admits every traced shape where the function runs on non-empty arrays;
else "found, not verified", "found, narrower than needed" or "no symbolic family", with why and an
example. The traces' counts are reported, never trusted as a proof.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
from jax import export

from smtdims.answers.equations import diagonal_sizes, normalise_constraint
from smtdims.answers.fixes import SPEC
from smtdims.errors import SmtdimsError, format_valuation
from smtdims.lang.constraints import Constraint, ConstraintSet
from smtdims.lang.expr import Expr, Var
from smtdims.lang.parser import parse_expr
from smtdims.reasoner import session_for

from ..seam import stock_jax
from ._common import local_platform, paste_target
from .attempt import Spec, apply_all, jax_accepts
from .box import NativeBox, shapes_at, valuation_of
from .diagnose import load_bounds
from .forms import without_implied
from .fresh import slow_load
from .job import ExportJob, FixDraft
from .picture import traced_shapes
from .refusals import FixPart, Why, divisibility_rewrite
from .report import first_line
from .result import FIXED, NARROW, NO_SYMBOLIC, NOT_VERIFIED, FixResult, FixRound, group_text


# -- the fix as a person writes it ---------------------------------------------------------------------------
def as_rewrite(part: FixPart, spec: Spec) -> FixPart:
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
                return dataclasses.replace(part, kind=SPEC, text=str(other), variable=v,
                                           note=part.note or f"{v} equals {other}")
    return part


def counted_names(draft: FixDraft) -> dict[str, str]:
    """For each variable a part rewrote once as ``m*v + c`` (``|m| >= 2``), a fresh name for what ``v``
    then counts: ``8*t`` makes ``t`` a number of blocks that still reads as a length, so a person
    writes ``8*k`` (and ``k >= 10`` after it); where several are rewritten, ``k_h`` and ``k_w`` keep
    apart which is which. A variable rewritten twice keeps its name."""
    taken = set(draft.original.variables()) | draft.spec.variables()
    for text in (*draft.original.constraints, *draft.spec.constraints):
        try:
            taken |= Constraint.parse(text).diff.variables()
        except SmtdimsError:
            continue
    rewritten = [p.variable for p in draft.parts if p.kind == SPEC and p.variable is not None]
    counted: list[str] = []
    for p in draft.parts:
        v = p.variable
        if p.kind != SPEC or v is None or rewritten.count(v) != 1 or v not in draft.spec.variables():
            continue
        try:
            e = parse_expr(p.text)
        except SmtdimsError:
            continue
        scaled = e - e.constant_part()
        if e.variables() == {v} and len(scaled.terms) == 1 and scaled.terms[0][0] == ((Var(v), 1),) \
                and abs(scaled.terms[0][1]) >= 2:
            counted.append(v)
    out: dict[str, str] = {}
    for v in counted:
        base = "k" if len(counted) == 1 else f"k_{v}"
        name = next(n for n in (base, *(f"{base}{i}" for i in range(2, 100))) if n not in taken)
        taken.add(name)
        out[v] = name
    return out


def with_counted_names(job: ExportJob, draft: FixDraft) -> None:
    """Rename each variable :func:`counted_names` picks, in the specification, the parts and the rounds'
    record, where the renamed specification exports too (then it is the fix's ``done``).

    Sound: a renaming of variables is a bijection of valuations, so the family is the same; the parts
    before the rewrite mention the variable as the user wrote it, and keep it."""
    renames = counted_names(draft)
    if not renames:
        return
    spec = draft.spec
    for v, name in renames.items():
        spec = spec.apply(FixPart(SPEC, name, v))
    got = job.attempt(spec)
    if not got.ok:
        return
    new_parts: dict[FixPart, FixPart] = {}
    active: dict[str, Expr] = {}
    for p in draft.parts:
        env = dict(active)
        if p.kind == SPEC and p.variable in renames:
            env[p.variable] = Expr.var(renames[p.variable])
            active[p.variable] = env[p.variable]
            new_parts[p] = dataclasses.replace(p, text=str(parse_expr(p.text).substitute(env)))
        elif env and p.kind == SPEC:
            new_parts[p] = dataclasses.replace(p, text=str(parse_expr(p.text).substitute(env)))
        elif env:
            c = Constraint.parse(p.text)
            new_parts[p] = dataclasses.replace(
                p, text=normalise_constraint(f"{c.diff.substitute(env)} {'>=' if c.kind == '>=' else '=='} 0")) \
                if c.diff.variables() & set(env) else p
    words = {str(old): str(new) for old, new in new_parts.items()}
    draft.parts = [new_parts.get(p, p) for p in draft.parts]
    draft.rounds = [dataclasses.replace(r, parts=tuple(new_parts.get(p, p) for p in r.parts),
                                        candidates=tuple((words.get(f, f), *rest) for f, *rest in r.candidates))
                    for r in draft.rounds]
    draft.spec, draft.done = spec, got


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


# -- the verification's exclusions ---------------------------------------------------------------------------
NAN_NOTE = "past it the program computes NaN everywhere (measured by running it)"


def exclusion(job: ExportJob, d: Any, spec: Spec, *, limited: bool = True) -> tuple[list[FixPart], Spec, str] | None:
    """The exclusion of the natively failing samples a diagnosis (:class:`.diagnose.SampleDiagnosis`) found,
    applied to ``spec`` and re-exported (the spec rewrite first, the plain constraints if the rewrite does
    not export; ``limited``: as a candidate's export), with why; or None: no sample failed natively, or
    nothing found exports."""
    if d is None or not d.native_fails or not d.constraints:
        return None
    why = (f"the samples fail natively at {format_valuation(d.native_fails[0])}: {first_line(d.native_error, 200)}")
    nan = set(d.nan_bounds)
    for group in (as_parts(d.constraints, spec), [FixPart("constraint", normalise_constraint(t)) for t in d.constraints]):
        group = [dataclasses.replace(p, note=NAN_NOTE, why=Why.NAN) if p.kind != SPEC and p.text in nan else p
                 for p in group]
        trial = apply_all(spec, group)
        if trial is not None and jax_accepts(trial) and job.attempt(trial, limited=limited).ok:
            return group, trial, why
    return None


OTHER_BRANCH = "the size where the program takes its other branch"  # a pin's note without an example


def pinned_where_paths_differ(job: ExportJob, d: Any, spec: Spec, *,
                              limited: bool = True) -> tuple[list[FixPart], Spec, str] | None:
    """Samples that run natively but differ from the artifact, where the user's code branched on a shape
    comparison JAX answered False without proof (the audit's lines): each variable of those comparisons
    fixed at the user's example's size (without one, at the failing sample's: the size the program
    special-cases), re-exported (``limited``: as a candidate's export); None where there is no such
    comparison or the pinned specification does not export.

    A Python ``if`` on ``num_patches == num_positions`` (a DINOv2's position table, interpolated unless
    the image is the size it was learned for) takes one branch for every symbolic size and the other at
    the example: no family with the variable free reproduces the program there, so the person pins the
    size. Sound: a pin is a narrower family; the verification runs again on it."""
    if d is None or not d.artifact_only or not d.audit:
        return None
    names: list[str] = []
    questions: list[Constraint] = []
    for line in d.audit:
        question = line.rpartition(": ")[2]
        try:
            c = Constraint.parse(question)
        except SmtdimsError:
            continue
        questions.append(c)
        names += [v for v in sorted(c.diff.variables()) if v in spec.variables() and v not in names]
    if job.examples:
        original = job.spec()  # the examples are valuations of its variables; the fix may have renamed them
        shapes = shapes_at(original.dims, job.examples[0])
        example = valuation_of(spec.dims, spec.constraint_set(), shapes, job.budget) if shapes is not None else None
    else:  # no example: where the program took the other branch (a size it special-cases), the least
        # such size on the diagonal (a DINOv2's square 32x32, not the 39x39 sample in the same branch)
        example = dict(d.artifact_only[0])
        for x in range(1, max((example.get(v, 1) for v in names), default=1) + 1):
            env = {**example, **dict.fromkeys(names, x)}
            try:
                if all(c.holds(env) for c in questions):
                    example = env
                    break
            except (ZeroDivisionError, KeyError):
                continue
    if not names or example is None or any(v not in example for v in names):
        return None
    where = "the example's size" if job.examples else OTHER_BRANCH
    group = [FixPart(SPEC, str(example[v]), v, f"fixed at {where}: the program branches on a shape comparison "
                     "there", Why.BRANCH, " and ".join(str(c) for c in questions)) for v in names]
    trial = apply_all(spec, group)
    if trial is None or not job.attempt(trial, limited=limited).ok:
        return None
    why = (f"samples differ from the native function at {format_valuation(d.artifact_only[0])}: the program branches "
           f"on {first_line(d.audit[0], 200)}, which JAX answered False without proof")
    return group, trial, why


def exclude(job: ExportJob, draft: FixDraft, report: Any) -> bool:
    """After a verification that failed: the exclusion of its natively failing samples joins the fix (a
    divisibility of a spec variable as the spec rewrite a person writes, ``7*h`` for ``h``), so that the
    fixed specification is verified again. False: nothing to add (the samples did not run, none failed
    natively, or nothing found exports)."""
    if report.not_run:
        more = load_bounds(job, draft.spec) if slow_load(report.not_run) else None
    else:
        more = exclusion(job, getattr(report, "diagnosis", None), draft.spec)
    if more is None and not report.not_run:
        more = pinned_where_paths_differ(job, getattr(report, "diagnosis", None), draft.spec)
    if more is None:
        return False
    group, trial, why = more  # samples failed where the function fails: exclude them and go on
    job.say(f"fix: the fixed export's samples fail; {group_text(group)}")
    draft.parts.extend(group)
    draft.spec, draft.done = without_implied(trial, job.budget), None
    assert job.box is not None
    ne, ok, bad = job.box.weakness(draft.spec.dims, draft.spec.constraint_set())
    draft.rounds.append(FixRound(why, ((group_text(group), ok, -bad, ne),), tuple(group), 0.0))
    with_counted_names(job, draft)  # 7*k_h, not 7*h: what is verified next is what the user reads
    draft.count = job.box.count(draft.spec.dims, draft.spec.constraint_set(), excused=excuses(draft.parts))
    return True


# -- the verdict ---------------------------------------------------------------------------------------------
def conclude(job: ExportJob, draft: FixDraft) -> FixResult:
    """The fix as a person reads it: its status said by what was shown (:func:`_judge`), its edges, whether
    stock JAX exports with it, and where the time went."""
    extremes = _judge(job, draft)
    spec, box = draft.spec, job.box
    assert box is not None
    stock = exports_on_stock(job.fn, spec, job.in_tree, job.plats) if draft.status in (FIXED, NARROW, NOT_VERIFIED) else None
    plats = job.plats
    return FixResult(
        status=draft.status, detail=draft.detail, parts=tuple(draft.parts), in_avals=spec.aval_texts(),
        shapes=spec.shape_texts(), constraints=spec.constraints, rounds=tuple(draft.rounds),
        dropped=tuple(draft.dropped), box=draft.count, verified=draft.verified, verification=draft.lines,
        function=job.name, seconds=time.perf_counter() - draft.t_start, report=draft.report,
        target=paste_target(job.fn), extremes=tuple(x[:3] for x in extremes),
        extremes_nonempty=tuple(x[3] for x in extremes), stock=stock,
        platforms=tuple(plats) if plats and tuple(plats) != (local_platform(),) else None,
        timing=(("native traces", box.traces, box.trace_seconds), ("exports", draft.exports, draft.export_seconds),
                *((("verification", 0, draft.verify_seconds),) if draft.verify_seconds else ())),
        excluded=tuple(draft.excluded) if draft.status == FIXED else (),
        traced=traced_shapes(box, spec.dims, spec.constraint_set()) if draft.parts else (),
    )


def _judge(job: ExportJob, draft: FixDraft) -> tuple[tuple[dict[str, int], bool, bool, bool], ...]:
    """Settle the draft's status and detail by what the verification and the native traces showed (a
    "fixed" that failed any of them says so), and return the fix's edges measured natively."""
    box, spec, original, parts, name = job.box, draft.spec, draft.original, draft.parts, job.name
    assert box is not None
    if draft.status == FIXED and draft.report is not None and not draft.verified:
        # "fixed" means verified end to end: say what was found and what failed
        draft.status = NOT_VERIFIED
        draft.detail = (f"the fixed export did not run: {draft.report.not_run}" if draft.report.not_run else
                        "the fixed export failed its verification: "
                        + (first_line(draft.lines[0], 200) if draft.lines else "a check failed"))
    extremes: tuple[tuple[dict[str, int], bool, bool, bool], ...] = ()
    if draft.status in (FIXED, NOT_VERIFIED) and spec.dims == original.dims and job.running():
        extremes = _measure_extremes(box, spec, original, job.budget)
        if extremes:  # the edges are box points now (t = 513 runs natively or not): count them
            draft.count = box.count(spec.dims, spec.constraint_set(), excused=excuses(parts))
    pinning = [r for r in draft.rounds if r is not None and any(p in r.parts for p in parts if pins([p]))]
    if draft.status in (FIXED, NOT_VERIFIED) and original.variables() and not spec.variables() and pinning:
        # a concrete export is no family: say that no constraint makes it symbolic, where and why
        first_pin = pinning[0]
        draft.status = NO_SYMBOLIC
        draft.detail = ("no constraint can make this export with symbolic sizes: every size had to be fixed, because "
                        f"{first_line(first_pin.error, 200)}" + (f" (at {first_pin.location})" if first_pin.location else ""))
    if draft.status == FIXED and any(p.why == Why.EQUATION for p in parts):
        _trace_equation_class(box, original, parts)  # the class the fix keeps, and its neighbours, natively
        draft.count = box.count(spec.dims, spec.constraint_set(), excused=excuses(parts))
    count = draft.count
    if draft.status == FIXED and count is not None and count.admitted > count.admitted_ok:
        # the family admits a traced shape where the function itself fails (a size model code special-cases,
        # a table's edge): the samples did not look there, the traces did; not verified
        draft.status = NOT_VERIFIED
        draft.detail = (f"it admits {count.admitted - count.admitted_ok} traced shape(s) where {name or 'the function'} "
                        "fails natively, e.g. " + "; ".join(format_valuation(v) for v in count.admitted_failing[:2]))
    lost = _lost(box, original, spec, draft.sides) if draft.status == FIXED and count is not None else []
    # The headline rule: "fixed" only where every traced shape the fix excludes, and the function runs at on
    # non-empty arrays, is excluded for a reason a part carries (the program uses the size as a number, takes
    # another branch there, or it is another solution of an equation no constraint JAX takes admits whole);
    # a shape past a bound beyond which the program computes NaN everywhere is nothing a user runs.
    reasons: dict[str, list[dict[str, int]]] = {}
    unexplained = []
    freed = _pins_freed(original, spec, parts)
    for env in lost:
        why = _excused(env, parts)
        if why is None and freed is not None:
            shapes = shapes_at(original.dims, env)
            if shapes is not None and box.admits(freed[0], freed[1], shapes):
                why = freed[2]
        if why is None:
            unexplained.append(env)
        elif why:
            reasons.setdefault(why, []).append(env)
    draft.excluded = [(why, len(envs), envs[0]) for why, envs in reasons.items()]
    if unexplained:
        # verified, but narrower than the function: honest words, not "fixed"
        draft.status = NARROW
        draft.detail = (f"it excludes {len(unexplained)} traced shape(s) where {name or 'the function'} runs on "
                        "non-empty arrays, e.g. " + "; ".join(format_valuation(v) for v in unexplained[:2]))
    return extremes


def excuses(parts: Sequence[FixPart]) -> Callable[[dict[str, int]], bool]:
    """Whether a shape the fix excludes is excused by a part's reason (for :meth:`.box.NativeBox.count`)."""
    return lambda env: _excused(env, parts) is not None


def _excused(env: dict[str, int], parts: Sequence[FixPart]) -> str | None:
    """Why the fix may exclude ``env``, a traced shape where the function runs on non-empty arrays: the
    reason one of its parts carries, "" where nothing a user runs is lost (past a NaN bound), None where
    no part explains it (the fix is narrower than needed there)."""
    for p in parts:
        try:
            if p.why == Why.NAN and not Constraint.parse(p.text).holds(env):
                return ""
            if p.why in (Why.NUMBER, Why.BRANCH) and p.variable in env and p.text.strip().isdigit() \
                    and env[p.variable] != int(p.text):
                return _pin_reason(p)
            if p.why == Why.EQUATION and p.because and Constraint.parse(p.because).holds(env):
                return (f"other solutions of {p.because}: no constraint JAX takes admits them beside the fix "
                        "(export with one of them in its place to get it)")
        except (SmtdimsError, KeyError, ZeroDivisionError):  # a part on a variable a later rewrite named
            continue
    return None


def _pins_freed(original: Spec, spec: Spec, parts: Sequence[FixPart]) -> tuple[Any, ConstraintSet, str] | None:
    """Where the fix pins sizes the program needs as numbers or branches on (a variable renamed since, too):
    the fixed specification with every dimension a pin made constant free again (a fresh variable), its
    constraints, and the reason; a shape it admits is excluded by the pins alone. None without such pins."""
    pinned = [p for p in parts if p.kind == SPEC and p.text.strip().isdigit()]
    reasons = [p for p in pinned if p.why in (Why.NUMBER, Why.BRANCH)]
    if not reasons or len(reasons) < len(pinned) or len(spec.dims) != len(original.dims):
        return None  # no such pin, or another pin made a size constant too (its own reason applies there)
    dims, k = [], 0
    for was, now in zip(original.dims, spec.dims, strict=True):
        if len(was) != len(now):
            return None
        leaf = []
        for a, b in zip(was, now, strict=True):
            # a size the pins made constant (through a rewrite too: 4*k_h with k_h pinned at 4 is 16)
            if b.as_constant() is not None and a.as_constant() is None:
                leaf.append(Expr.var(f"_pinned{k}"))
                k += 1
            else:
                leaf.append(b)
        dims.append(tuple(leaf))
    return tuple(dims), spec.constraint_set(), _pin_reason(reasons[0])


def _pin_reason(p: FixPart) -> str:
    """Why a pin (:attr:`Why.NUMBER` or :attr:`Why.BRANCH`) excludes the other sizes of its variable."""
    if p.why == Why.NUMBER:
        return f"the program uses {p.variable} as a number: one size of it, by necessity"
    return f"the program takes another branch where {p.variable} != {p.text}" + (f" ({p.because})" if p.because else "")


def _trace_equation_class(box: NativeBox, original: Spec, parts: Sequence[FixPart]) -> None:
    """Trace the sizes on the diagonal where a fixed-size part's equation holds (25..28 for two strided
    'same' convs to 7x7), and one each side, the other variables at 1: whether the fix keeps the sizes
    the model runs at is then measured, not assumed."""
    names = original.variables()
    envs: list[dict[str, int]] = []
    for because in dict.fromkeys(p.because for p in parts if p.why == Why.EQUATION and p.because):
        try:
            c = Constraint.parse(because)
        except SmtdimsError:
            continue
        vs = sorted(c.diff.variables())
        if not vs or not set(vs) <= names:
            continue
        base = dict.fromkeys(sorted(names), 1)
        run = diagonal_sizes(c.diff, vs)[:16]
        for x in sorted({*run, max(run[0] - 1, 1), run[-1] + 1} if run else ()):
            env = {**base, **dict.fromkeys(vs, x)}
            if env not in envs and original.constraint_set().holds(env):
                envs.append(env)
    if envs:
        box.add(envs)


def _lost(box: NativeBox, original: Spec, spec: Spec, sides: Sequence[tuple[Expr, Any]]) -> list[dict[str, int]]:
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
        if any(_side_is_one(e, dims, original, env, s) for e, dims in sides):
            continue
        out.append(env)
    return out


def _side_is_one(e: Expr, dims: Any, original: Spec, env: dict[str, int], shapes: Any) -> bool:
    """Whether the compared size ``e`` (of the specification with ``dims``) is 1 at the traced ``shapes``
    (``env`` in the original variables; a renamed specification's read from the shapes themselves)."""
    try:
        if dims != original.dims:
            env = valuation_of(dims, ConstraintSet.of([]), shapes)
            if env is None:
                return False
        return e.evaluate(env) == 1
    except (ZeroDivisionError, KeyError, SmtdimsError):
        return False


def pins(parts: Sequence[FixPart]) -> bool:
    """Whether the fix pins a variable to a size (a spec rewrite to a constant)."""
    return any(p.kind == SPEC and p.text.strip().isdigit() for p in parts)


def _measure_extremes(box: NativeBox, spec: Spec, original: Spec,
                      budget: int | None) -> tuple[tuple[dict[str, int], bool, bool, bool], ...]:
    """Each variable the fix bounds, at its bound and one past it (others at their least values), run
    natively: ``t <= 512`` is checked at ``t = 512`` (must run) and ``t = 513`` (fails, or the fix is too
    strong, unless it computes on empty arrays only there). Only valuations the original specification
    admits count; a box of small shapes never gets there. Each: (valuation, runs natively, admitted,
    computes on something)."""
    fixed = spec.constraint_set()
    names = sorted(spec.variables())
    out = []
    try:
        session = session_for(fixed, budget, trial=True)
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
                        out.append((env, box.ok[shapes], bool(fixed.holds(env)), shapes in box.nonempty))
    except (SmtdimsError, ZeroDivisionError, KeyError):
        return tuple(out)
    return tuple(out)


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


__all__ = ["as_parts", "as_rewrite", "conclude", "counted_names", "exclude", "exclusion", "exports_on_stock", "group_text",
           "pinned_where_paths_differ", "pins", "with_counted_names"]
