"""Failed samples diagnosed: who fails (the artifact, the native function, both), and what to change.

A sample where the native function fails too means the specification admits shapes the
function does not support (``y.reshape(b*d // 4, 4)`` under ``"b, d"``: the artifact
stops with "Error refining shapes", numpy with "cannot reshape array of shape (1, 1)
into shape (0, 4)"). The excluding constraint is searched among the divisibilities the
exported shapes need (``mod(b*d, 4) == 0`` for a ``floordiv(b*d, 4)``) and the lower
bounds the failing shapes suggest; each candidate is re-exported, and the one that
excludes every natively failing shape of the box while keeping the most that run is
reported, with its box counts (with ``fix=True`` it is also verified end to end).

A sample where only the artifact fails (the native function runs there) points at a
decision JAX took while tracing: the audit (:mod:`smtdims_jax.audit`) re-traces the
export and names the lines where JAX's ``==`` answered False without proof (the
``x.shape[0] == 1`` trap).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
from jax import export

from smtdims.answers.equations import normalise_constraint
from smtdims.errors import format_valuation
from smtdims.lang.expr import FLOORDIV, MOD, Expr, Op

from .attempt import Spec
from .box import BoxCount, NativeBox
from .job import ExportJob
from .refusals import FixPart
from .report import first_line


@dataclass(frozen=True)
class SampleDiagnosis:
    """Why samples failed, and the verified change that excludes the unsupported shapes."""

    native_fails: tuple[dict[str, int], ...]  # failed samples where the native function fails too
    native_error: str  # the native function's error at the first of them
    artifact_only: tuple[dict[str, int], ...]  # failed samples where the native function runs
    constraints: tuple[str, ...] = ()  # the excluding constraint(s), when found and re-exported
    exported: bool | None = None  # the export succeeds with them
    box: BoxCount | None = None  # the specification with them, on the box
    verified: bool | None = None  # the whole pipeline passed with them (fix=True only)
    audit: tuple[str, ...] = ()  # "<location>: <question>" for each unproven == the audit flags
    tried: tuple[tuple[str, int, int], ...] = ()  # (constraint, admitted native-ok, admitted native-failing)
    seconds: float = 0.0
    report: Any = field(default=None, repr=False, compare=False)
    nan_bounds: tuple[str, ...] = ()  # the constraints beyond which the program computes NaN everywhere (measured)

    def lines(self, name: str) -> list[str]:
        out = []
        if self.native_fails:
            out.append(f"{len(self.native_fails)} failed sample(s) fail natively too ({format_valuation(self.native_fails[0])}: "
                       f"{first_line(self.native_error, 160)}): the specification admits shapes {name} does not support")
            if self.constraints:
                out.append(f"  exclude them: add the constraint(s) {', '.join(repr(c) for c in self.constraints)}"
                           + (" (re-exported: the export succeeds with it)" if self.exported else " (NOT exportable)"))
                if self.box is not None:
                    out.append("  " + self.box.sentence(name))
                if self.verified is not None:
                    out.append("  verified end to end (export, fresh process, samples): " + ("yes" if self.verified else "NO"))
            else:
                out.append("  no single constraint smtdims tried excludes them (tried: "
                           + ", ".join(c for c, _, _ in self.tried[:4]) + ")" if self.tried else
                           "  no candidate constraint was found")
        if self.artifact_only:
            out.append(f"{len(self.artifact_only)} failed sample(s) run natively ({format_valuation(self.artifact_only[0])}): "
                       "the artifact took a different path while tracing")
            if self.audit:
                out += [f"  JAX's == answered False without proof at {a}" for a in self.audit]
            else:
                out.append("  the audit flags no unproven == in user code")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"native_fails": list(self.native_fails), "native_error": self.native_error,
                "artifact_only": list(self.artifact_only), "constraints": list(self.constraints),
                "exported": self.exported, "box": self.box.to_dict() if self.box is not None else None,
                "verified": self.verified, "audit": list(self.audit),
                "tried": [{"constraint": c, "admitted_ok": ok, "admitted_failing": bad} for c, ok, bad in self.tried],
                "seconds": round(self.seconds, 3)}


def _divisibilities(exprs: Sequence[Expr]) -> list[str]:
    """``mod(E, k) == 0`` for each ``floordiv(E, k)`` / ``mod(E, k)`` by a constant ``k >= 2``."""
    out: list[str] = []
    for e in exprs:
        for a in sorted(e.atoms(), key=lambda a: a.sort_key()):
            if isinstance(a, Op) and a.op in (FLOORDIV, MOD):
                k = a.rhs.as_constant()
                if k is not None and abs(k) >= 2:
                    text = f"mod({a.lhs}, {abs(k)}) == 0"
                    if text not in out:
                        out.append(text)
    return out


def _lower_bounds(box: NativeBox) -> list[str]:
    """``v >= k``: k one above the largest ``v`` of a natively failing box shape, the smallest ``v`` that
    runs, and between them the least ``v`` that runs found by bisection from the smallest running shape
    (an audio front end's convolutions run from one exact length up: ``n >= 720``, not a bound per sample)."""
    out: list[str] = []
    for v in box.variables:
        bad = [box.env[s][v] for s, ok in box.ok.items() if not ok and v in box.env[s]]
        good = [(env[v], env) for s, ok in box.ok.items() if ok and v in (env := box.env[s])]
        edge = []
        if good:
            least, base = min(good, key=lambda g: g[0])
            below = [x for x in bad if x < least]
            if below:
                edge = [box.first_running(v, base, max(below), least)]
        for k in edge + ([max(bad) + 1] if bad else []) + ([min(g for g, _ in good)] if good else []):
            if k >= 2 and good and max(g for g, _ in good) >= k and f"{v} >= {k}" not in out:
                out.append(f"{v} >= {k}")
    return out


def diagnose(job: ExportJob, exp: Any, native_fails: Sequence[dict[str, int]], native_error: str,
             artifact_only: Sequence[dict[str, int]], *, box_side: int | None = None,
             verify: Callable[[Any, Any], Any] | None = None, deadline: float = 60.0,
             nan: Sequence[dict[str, int]] = (), finite: Sequence[dict[str, int]] = ()) -> SampleDiagnosis:
    """See the module docstring; ``exp``: the job's export whose samples failed; ``verify(specs, scope)``
    (optional) runs the whole pipeline on the fix."""
    fn, spec_leaves, in_tree, budget = job.fn, job.leaves, job.in_tree, job.budget
    t0 = time.perf_counter()
    stop = time.monotonic() + deadline
    audit_lines: tuple[str, ...] = ()
    nan_bounds: tuple[str, ...] = ()
    if artifact_only:
        audit_lines = _audit(fn, spec_leaves, in_tree, job.plats, budget)
    constraints: tuple[str, ...] = ()
    exported = verified = None
    count = None
    report = None
    tried: list[tuple[str, int, int]] = []
    if nan and finite and len(nan) == len(native_fails):
        # the program computes NaN everywhere at these samples: no shape error for the box to see; the
        # bounds come from running it (values, not shapes) between a finite sample and a NaN one
        spec = job.spec()
        bounds = finite_bounds(job, spec, nan, finite, stop)
        if bounds:
            current = spec
            for text in bounds:
                current = current.apply(FixPart("constraint", text))
            if not any(current.constraint_set().holds(e) for e in nan) and all(current.constraint_set().holds(e)
                                                                                for e in finite):
                constraints, nan_bounds = tuple(bounds), tuple(bounds)
                exported = job.attempt(current, limited=False).ok
                if exported and verify is not None:
                    args, new_scope = current.build(in_tree)
                    report = verify(args, new_scope)
                    verified = bool(report.ok)
        return SampleDiagnosis(tuple(native_fails), native_error, tuple(artifact_only), constraints, exported, count,
                               verified, audit_lines, tuple(tried), time.perf_counter() - t0, report, nan_bounds)
    if native_fails:
        spec = job.spec()
        box = NativeBox(fn, spec.dims, spec.dtypes, in_tree, spec.constraint_set(), side=box_side, deadline=stop,
                        extra=[*native_fails, *artifact_only], budget=budget)
        box.measure(list(box.env))  # chosen shapes (the failed samples first): what the lower bounds read
        exprs = [d for leaf in spec.dims for d in leaf] + [dim_ir(d) for a in exp.out_avals for d in a.shape]
        exprs += intermediate_dims(fn, spec_leaves, in_tree, budget)
        chosen: list[str] = []
        current = spec
        # Greedy, at most three constraints: each step takes the candidate with the fewest misjudged box
        # shapes (failing ones admitted plus running ones with non-empty outputs excluded; then running
        # ones with empty outputs excluded), and only if that is fewer than before. Why not "fewest failing
        # admitted": a bound such as b >= 33 admits no failing shape because it admits almost nothing. Why
        # empty outputs count last: past a stride-2 conv most small shapes give empty arrays, which run
        # whatever the fix says, and a user runs none of them.
        ne_all, ok_all = box.weakness(spec.dims, spec.constraint_set())[:2]

        def misjudged(weak: tuple[int, int, int]) -> tuple[int, int, int]:
            ne, ok, bad = weak
            return -bad + (ne_all - ne), (ok_all - ok) - (ne_all - ne), -bad

        for _ in range(3):
            before = misjudged(box.weakness(current.dims, current.constraint_set()))
            if before[2] == 0 or time.monotonic() > stop:
                break
            scored = []
            trials = []
            for text in [*_divisibilities(exprs), *_lower_bounds(box)]:
                if text in chosen:
                    continue
                try:
                    text = normalise_constraint(text)
                    trials.append((text, current.apply(FixPart("constraint", text))))
                except Exception:  # noqa: BLE001 - a candidate we cannot state is no candidate
                    continue
            box.prepare([(current.dims, current.constraint_set()), *((t.dims, t.constraint_set()) for _, t in trials)])
            ne_all, ok_all = box.weakness(spec.dims, spec.constraint_set())[:2]
            before = misjudged(box.weakness(current.dims, current.constraint_set()))
            for text, trial in trials:
                weak = box.weakness(trial.dims, trial.constraint_set())
                tried.append((text, weak[1], -weak[2]))
                scored.append((misjudged(weak), text, trial))
            if not scored:
                break
            scored.sort(key=lambda x: x[0])
            score, text, trial = scored[0]
            if score >= before:
                break  # no candidate misjudges fewer shapes
            chosen.append(text)
            current = trial
        if chosen:
            constraints = tuple(chosen)
            exported = job.attempt(current, limited=False).ok
            count = box.count(current.dims, current.constraint_set())
            if exported and verify is not None:
                args, new_scope = current.build(in_tree)
                report = verify(args, new_scope)
                verified = bool(report.ok)
    return SampleDiagnosis(tuple(native_fails), native_error, tuple(artifact_only), constraints, exported, count,
                           verified, audit_lines, tuple(tried), time.perf_counter() - t0, report)


NAN_BISECTIONS = 12  # concrete runs per variable when bisecting for the last size the program computes at


def finite_bounds(job: ExportJob, spec: Spec, nan: Sequence[dict[str, int]], finite: Sequence[dict[str, int]],
                  stop: float) -> list[str]:
    """A bound for each variable along which the program turns from computing to NaN everywhere, measured
    from the smallest finite sample where it computes (:func:`_computes`): ``v <= k`` where a NaN sample is
    larger (a learned table of 64 positions looked up past its end: ``t <= 64``; the powers of two first,
    then bisection), ``v >= k`` where one is smaller (a strided conv front end that gives zero frames below
    16 samples, whose mean over no frames is NaN: ``n >= 16``; by bisection). Each step runs the program
    at a new shape (a compile); the bound is then re-exported and verified like any fix, so a wrong step
    costs a fix, never a wrong verdict."""
    # the smallest finite sample where the program computes (a sample on empty arrays may be NaN too)
    base = next((e for e in sorted(finite, key=lambda e: sum(e.values()))[:3] if _computes(job, spec, e)), None)
    if base is None:
        return []
    out: list[str] = []
    unexplained = list(nan)  # the NaN samples no bound found so far excludes
    # the variable that grew most from the base first (the likelier cause: a length, before a batch); a
    # variable whose NaN samples the bounds found already exclude is not run at all (each run compiles)
    for v in sorted(spec.variables(), key=lambda v: (-max((e.get(v, 0) / max(1, base.get(v, 1)) for e in nan),
                                                          default=0), v)):
        if not unexplained:
            break
        above = [e[v] for e in unexplained if e.get(v, 0) > base.get(v, 0)]
        below = [e[v] for e in unexplained if v in e and e[v] < base.get(v, 0)]
        if above:
            lo, hi = base[v], min(above)
            nan_along_v = False  # seen NaN with v alone changed from the base: v is a cause
            p = 1 << ((hi - 1).bit_length() - 1)  # tables end at powers of two: the powers below hi, down
            while lo < p < hi:
                if _computes(job, spec, {**base, v: p}):
                    lo = p
                    if p + 1 < hi and not _computes(job, spec, {**base, v: p + 1}):
                        hi, nan_along_v = p + 1, True
                    break
                hi, p, nan_along_v = p, p // 2, True
            if not nan_along_v and _computes(job, spec, {**base, v: hi}):
                continue  # along v alone the program still computes at the NaN sample's size: not v's bound
            lo, hi = _bisect(job, spec, base, v, lo, hi, stop, computes_low=True)
            if hi - lo <= 1:
                out.append(f"{v} <= {lo}")
                unexplained = [e for e in unexplained if not e.get(v, 0) > lo]
        elif below:
            lo, hi = max(below), base[v]
            if _computes(job, spec, {**base, v: lo}):
                continue
            lo, hi = _bisect(job, spec, base, v, lo, hi, stop, computes_low=False)
            if hi - lo <= 1:
                out.append(f"{v} >= {hi}")
                unexplained = [e for e in unexplained if not (v in e and e[v] < hi)]
    return out


def _bisect(job: ExportJob, spec: Spec, base: dict[str, int], v: str, lo: int, hi: int, stop: float, *,
            computes_low: bool) -> tuple[int, int]:
    """Narrow ``lo < hi`` along ``v`` to neighbours, the program computing at one end (``lo`` where
    ``computes_low``, else ``hi``) and NaN everywhere at the other."""
    for _ in range(NAN_BISECTIONS):
        if hi - lo <= 1 or time.monotonic() > stop:
            break
        mid = (lo + hi) // 2
        if _computes(job, spec, {**base, v: mid}) == computes_low:
            lo = mid
        else:
            hi = mid
    return lo, hi


def _computes(job: ExportJob, spec: Spec, env: dict[str, int]) -> bool:
    """Whether ``jax.jit`` of the program, at ``env``'s shapes, gives some non-NaN output for each of a few
    inputs: random, all zeros, all ones. Where NaN begins may depend on the values (a RoBERTa counts
    positions past its padding id, so random ids that hit it lag behind real text by t/10): the bound is
    the last size every one of them computes at, the narrower side."""
    import numpy as np

    from ..seam import stock_jax
    from .box import shapes_at
    from .compare import nan_everywhere, random_input

    shapes = shapes_at(spec.dims, env)
    if shapes is None:
        return False
    rng = np.random.default_rng(0)
    draws = [[random_input(rng, s, np.dtype(t)) for s, t in zip(shapes, spec.dtypes, strict=True)],
             *([np.full(s, fill, np.dtype(t)) for s, t in zip(shapes, spec.dtypes, strict=True)] for fill in (0, 1))]
    f = jax.jit(job.fn)  # one compile for the shape, three runs
    try:
        with stock_jax():
            for args in draws:
                outs = jax.tree_util.tree_leaves(f(*jax.tree_util.tree_unflatten(job.in_tree, args)))
                if nan_everywhere([np.asarray(o) for o in outs]):
                    return False
    except Exception:  # noqa: BLE001 - the program fails at this shape: it computes nothing there
        return False
    return True


_BRANCHES_KEPT = 8  # the program's unproven == kept as sample goals (a few samples cover a few)
_WORK_SHAPES = 256  # distinct intermediate shapes whose sizes measure a sample's cost


def intermediate_dims(fn: Callable[..., Any], spec_leaves: Sequence[Any], in_tree: Any, budget: int | None,
                      limit: int = 2_000, branches: list[tuple[Expr, Expr]] | None = None,
                      work: list[Expr] | None = None) -> list[Expr]:
    """The symbolic sizes of every intermediate array of ``fn`` (its jaxpr, sub-jaxprs included).

    A size the function needs divisible may never reach an input or output shape:
    ``x.reshape(b*(t//16), 16, d)`` reshaped back to ``(b, -1, d)`` shows ``floordiv(t, 16)``
    only in between. Empty when tracing fails (the export succeeded, so it should not).
    ``branches``, where given, receives each ``==`` of the program's own code that JAX answered False
    without proof while tracing (``if num_patches == num_positions``): where it holds, the program
    takes the other branch, so the samples look there. ``work``, where given, receives the element count
    of each distinct symbolic intermediate shape (``b*4*t*t`` for attention's scores): what running the
    program at a valuation costs, to size the samples by compute rather than by their inputs' bytes.
    """
    from ..conversion import to_ir
    from ..equality import ASKED_BY_USER
    from ..listeners import add_listener, remove_listener
    from ..seam import enabled

    def listener(ev: dict[str, Any]) -> None:
        if ev.get("kind") == "eq" and ev.get("asked_by") == ASKED_BY_USER and not ev.get("answer") and branches is not None:
            try:
                pair = (to_ir(ev["lhs"]), to_ir(ev["rhs"]))
            except Exception:  # noqa: BLE001 - an operand smtdims cannot read: no sample for it
                return
            if pair not in branches and len(branches) < _BRANCHES_KEPT:
                branches.append(pair)

    try:
        with enabled(budget=budget):
            add_listener(listener)
            try:
                # a fresh callable where the program's == are wanted: JAX's trace cache (the export traced
                # ``fn`` at these avals) would otherwise hand back the jaxpr without running the program
                traced = fn if branches is None else (lambda *a: fn(*a))
                closed = jax.make_jaxpr(traced)(*jax.tree_util.tree_unflatten(in_tree, list(spec_leaves)))
            finally:
                remove_listener(listener)
    except Exception:  # noqa: BLE001 - the divisibilities of the inputs and outputs still stand
        return []
    out: list[Expr] = []
    seen: set[Expr] = set()
    shapes_seen: set[tuple[Any, ...]] = set()
    todo = [closed.jaxpr]
    while todo and len(out) < limit:
        jaxpr = todo.pop()
        for eqn in jaxpr.eqns:
            for v in eqn.outvars:
                shape = tuple(getattr(getattr(v, "aval", None), "shape", ()))
                for d in shape:
                    if export.is_symbolic_dim(d):
                        e = to_ir(d)
                        if e not in seen:
                            seen.add(e)
                            out.append(e)
                if work is not None and len(shapes_seen) < _WORK_SHAPES and shape not in shapes_seen and any(
                        export.is_symbolic_dim(d) for d in shape):
                    shapes_seen.add(shape)
                    size = Expr.const(1)
                    for d in shape:
                        size = size * (to_ir(d) if export.is_symbolic_dim(d) else Expr.const(int(d)))
                    work.append(size)
            for p in eqn.params.values():
                for sub in (p if isinstance(p, (tuple, list)) else (p,)):
                    inner = getattr(sub, "jaxpr", sub)
                    if hasattr(inner, "eqns"):
                        todo.append(inner)
    return out


def dim_ir(d: Any) -> Expr:
    from ..conversion import to_ir

    return to_ir(d) if export.is_symbolic_dim(d) else Expr.const(int(d))


def _audit(fn: Callable[..., Any], spec_leaves: Sequence[Any], in_tree: Any, plats: tuple[str, ...] | None,
           budget: int | None) -> tuple[str, ...]:
    """The user-code lines where JAX's ``==`` answered False without proof, from a re-traced export."""
    from ..audit import audit

    try:
        with audit(budget=budget) as rep:
            # a fresh callable: jax.jit's trace cache would otherwise replay the first export without a decision
            export.export(jax.jit(lambda *a: fn(*a)), platforms=plats)(*jax.tree_util.tree_unflatten(in_tree, list(spec_leaves)))
    except Exception:  # noqa: BLE001 - the export succeeded before; if it does not now, report what was seen
        pass
    return tuple(f"{r.location}: {r.question}" for r in rep.flagged if r.flag == "unproven-inequality")


__all__ = ["SampleDiagnosis", "diagnose"]


LOAD_NOTE = "below it some array is empty; stock JAX loads the artifact in time only where those sizes' clamps resolve"


def nonempty_bounds(job: ExportJob, spec: Spec) -> list[str]:
    """``v >= k`` for each variable: the least ``v`` at which every intermediate array of the program can
    be non-empty (exact bounds under the specification's constraints and ``d >= 1`` for each symbolic
    intermediate size ``d``; :func:`intermediate_dims`). Under them the ``max(x - 2, 0)`` clamps of a
    VALID conv chain resolve, so the artifact's shapes are plain (``4*floordiv(floordiv(a - 6, 2) - 5, 2)
    - 20``, not nested ``max``), which stock JAX parses at once. Only a candidate: the caller re-exports
    and verifies it, and the sizes it excludes are ones where some array is empty."""
    from smtdims.lang.constraints import Constraint, ConstraintSet
    from smtdims.reasoner import session_for

    args, _ = spec.build(job.in_tree)
    dims = intermediate_dims(job.fn, jax.tree_util.tree_leaves(args), job.in_tree, job.budget)
    sizes = [d for d in dict.fromkeys(dims) if not d.is_constant and d.variables() <= spec.variables()]
    if not sizes:
        return []
    cs = ConstraintSet(spec.constraint_set().constraints + tuple(Constraint(d - 1, ">=", f"{d} >= 1") for d in sizes))
    session = session_for(cs, job.budget, trial=True)
    out: list[str] = []
    for v in sorted(spec.variables()):
        try:
            b = session.bounds(Expr.var(v))
        except Exception:  # noqa: BLE001 - no bound found in time: no candidate for this variable
            continue
        if b.lo_tight and isinstance(b.lo, int) and b.lo > 1:
            out.append(f"{v} >= {b.lo}")
    return out


def load_bounds(job: ExportJob, spec: Spec, *, limited: bool = True) -> tuple[list[FixPart], Spec, str] | None:
    """After a verification stopped at stock JAX's load of the artifact (:func:`.fresh.slow_load`): the
    lower bounds where every array can be non-empty (:func:`nonempty_bounds`) as fix parts, applied to
    ``spec`` and re-exported (``limited``: as a candidate's export), with why; None where there is none
    or it does not export."""
    bounds = [t for t in nonempty_bounds(job, spec) if t not in spec.constraints]
    if not bounds:
        return None
    group = [FixPart("constraint", t, note=LOAD_NOTE) for t in bounds]
    trial = spec
    for p in group:
        trial = trial.apply(p)
    if not job.attempt(trial, limited=limited).ok:
        return None
    why = ("stock JAX's export.deserialize of the artifact did not finish in time: its shapes nest max/floordiv "
           "clamps that only sizes this small need")
    return group, trial, why
