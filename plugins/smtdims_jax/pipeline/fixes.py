"""The whole fix of a failed export: fix, re-export, repeat; minimise; verify end to end.

Each round reads JAX's refusal into its kinds (:mod:`.refusals`: an inconclusive comparison,
whose operands smtdims' hook reports; an equation JAX's shape checks could not prove; a
reshape's "The remainder ... should be 0"; a broadcast of two different dimensions), asks the
first kind that offers any for every verified fix of it
(:func:`smtdims.answers.explain.suggest_fixes`: constraints and spec rewrites, each re-decided
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
import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
from jax import export

from smtdims.answers.equations import (
    cancel_common_factor,
    equation_fixes,
    exact_divisions,
    normalise_constraint,
    render_constraint,
)
from smtdims.answers.explain import SPEC, settling_fix, suggest_fixes, weakest_first
from smtdims.errors import SmtdimsError, format_valuation
from smtdims.lang.constraints import Constraint, ConstraintSet
from smtdims.lang.expr import Expr, Var
from smtdims.lang.parser import parse_expr
from smtdims.reasoner import Session

from .. import adapter, enabled
from ..frames import raise_site
from ._common import Progress, Ticker, _raised_by_smtdims, paste_target
from .box import BoxCount, Dims, NativeBox, shapes_at, valuation_of
from .refusals import (
    Candidate,
    ConstantNeeded,
    FixPart,
    Refusal,
    candidates_of,
    divisibility_fixes,
    divisibility_rewrite,
    last_resort_of,
    message_key,
    refusals_of,
)
from .report import _first_line

NOT_NEEDED, FIXED, NO_FIX, ROUND_LIMIT, DEADLINE = "not needed", "fixed", "no fix found", "round limit", "deadline"
NOT_VERIFIED = "found, not verified"  # the export succeeds with the fix, but its end-to-end verification did not pass
# verified end to end, but it excludes traced shapes where the function runs on non-empty arrays
NARROW = "found, narrower than needed"
# the export succeeds only with every size fixed: no specification with a symbolic size exports it
NO_SYMBOLIC = "no symbolic family"
DEFAULT_ROUNDS = 8
DEFAULT_DEADLINE = 120.0  # seconds for the rounds and the minimisation (the final verification runs after)


@dataclass(frozen=True)
class FixOptions:
    """How far the loop may go: rounds, seconds, and the grid's side (None: shapes chosen by reasoning,
    :mod:`.box`)."""

    rounds: int = DEFAULT_ROUNDS
    deadline: float = DEFAULT_DEADLINE
    box: int | None = None


# -- value objects --------------------------------------------------------------------------------
@dataclass(frozen=True)
class FixRound:
    """One round: the error, the verified candidates with their box scores, the one chosen."""

    error: str
    # (fix, admitted shapes that run natively, admitted that fail, admitted that run with non-empty outputs)
    candidates: tuple[tuple[str, int, int, int], ...]
    chosen: str
    seconds: float
    location: str = ""  # the line of the user's code the refusal arose at ("" where none is the user's)

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.error, "chosen": self.chosen, "seconds": round(self.seconds, 3), "location": self.location,
                "candidates": [{"fix": f, "admitted_ok": ok, "admitted_failing": bad, "admitted_nonempty": ne}
                               for f, ok, bad, ne in self.candidates]}


@dataclass(frozen=True)
class FixResult:
    """The whole fix of a failed export, as the user would write it, with how it was found and checked.

    ``status``: ``"fixed"`` (the export succeeds with ``parts``, the fixed specification verified
    end to end, and it admits every traced shape where the function runs on non-empty arrays that the
    original specification admitted, apart from sizes the fix must pin), ``"found, narrower than
    needed"`` (verified, but it excludes such shapes: ``box.excluded_ok`` has examples), ``"found, not
    verified"`` (the export succeeds with ``parts``, but the verification failed or could not run:
    ``detail`` says which), ``"no symbolic family"`` (the export succeeds only with every size fixed:
    ``detail`` says which refusal and where), ``"no fix found"``, ``"round limit"``, ``"deadline"`` or
    ``"not needed"``.
    ``verified``: the whole pipeline passed with the fixed specification (None: not run). ``box``: the fixed
    specification measured against native runs on small shapes.
    """

    status: str
    detail: str
    parts: tuple[FixPart, ...]
    in_avals: tuple[str, ...]
    shapes: tuple[str, ...]  # the symbolic_shape text of each input
    constraints: tuple[str, ...]
    rounds: tuple[FixRound, ...]
    dropped: tuple[str, ...] = ()  # parts the minimisation removed
    box: BoxCount | None = None
    verified: bool | None = None
    verification: tuple[str, ...] = ()  # the final pipeline's checks, one line each
    function: str = ""
    seconds: float = 0.0
    report: Any = field(default=None, repr=False, compare=False)  # the final VerificationReport
    target: str = ""  # MODULE:FUNCTION or path/file.py:FUNCTION for `smtdims export`; "" if none names it
    # the fix's edges measured natively: (valuation, runs natively, the fix admits it); t = 512 and t = 513
    extremes: tuple[tuple[dict[str, int], bool, bool], ...] = ()
    stock: bool | None = None  # stock JAX exports with the fix too (None: not tried); code() says so

    @property
    def ok(self) -> bool:
        """The fixed specification exports and verified end to end (a narrower one too: it says so)."""
        return self.status in (FIXED, NARROW) and self.verified is True

    def code(self) -> str:
        """Ready-to-paste ``jax.export`` code for the fixed specification."""
        name = self.function.split(":")[-1].split(".")[-1]
        name = name if name.isidentifier() else "f"  # a lambda: name it
        cons = repr(tuple(self.constraints))
        lines = ["import jax", "import jax.numpy as jnp", "from jax import export"]
        if self.stock is False:
            lines += ["import smtdims", "smtdims.install()  # stock JAX does not export with this fix: smtdims proves it"]
        if len(self.shapes) == 1:
            dt = self.in_avals[0].split("[")[0]
            lines.append(f"spec = jax.ShapeDtypeStruct(export.symbolic_shape({self.shapes[0]!r}, constraints={cons}), "
                         f"jnp.{dt})")
            lines.append(f"exp = export.export(jax.jit({name}))(spec)")
        else:
            lines.append(f"scope = export.SymbolicScope({cons})")
            for i, (s, a) in enumerate(zip(self.shapes, self.in_avals, strict=True)):
                lines.append(f"x{i} = jax.ShapeDtypeStruct(export.symbolic_shape({s!r}, scope=scope), jnp.{a.split('[')[0]})")
            lines.append(f"exp = export.export(jax.jit({name}))({', '.join(f'x{i}' for i in range(len(self.shapes)))})")
        lines.append(f"# or: export.symbolic_args_specs(args, {list(self.shapes)!r}, constraints={cons})")
        return "\n".join(lines)

    def cli(self) -> str:
        """The same fix as ``smtdims export`` arguments."""
        return " ".join([*(f'--spec "{a}"' for a in self.in_avals), *(f'-c "{c}"' for c in self.constraints)])

    def command(self) -> str:
        """The whole ``smtdims export`` command, ready to paste (``MODULE:FUNCTION`` where one can be named)."""
        return f"smtdims export {self.target or 'MODULE:FUNCTION'} {self.cli()}"

    def lines(self) -> list[str]:
        out = [f"whole fix: {self.status}" + (f" ({self.detail})" if self.detail else "")
               + f", {len(self.rounds)} round(s), {self.seconds:.1f}s"]
        for i, r in enumerate(self.rounds, 1):
            out.append(f"  round {i}: {_first_line(r.error, 140)}")
            for f, ok, bad, ne in r.candidates[:4]:
                mark = "->" if f == r.chosen else "  "
                failing = f", {bad} native-failing" if bad else ""
                out.append(f"    {mark} {f}  [admits {ok} native-ok ({ne} non-empty){failing} traced shapes]")
        if self.dropped:
            out.append(f"  minimised: dropped {'; '.join(self.dropped)}")
        if self.parts:
            label = {FIXED: "the fix", NARROW: "the fix found (verified; NARROWER than needed: see the count below)",
                     NOT_VERIFIED: "the fix found (the export succeeds with it; NOT verified)"}.get(
                self.status, "partial fix (the export still fails with it)")
            out.append(f"  {label}: " + "; ".join(str(p) for p in self.parts))
            out.append(f"  in_avals {', '.join(self.in_avals)}; constraints {', '.join(self.constraints) or 'none'}")
            if self.status in (FIXED, NARROW, NOT_VERIFIED):  # a command and code only where the export succeeds
                out.append(f"  {self.command()}")
                if not self.target:
                    out.append("  (MODULE:FUNCTION: the function is a lambda or local; define it at module level to name it)")
                out += ["  " + ln for ln in self.code().splitlines()]
        if self.box is not None:
            out.append("  " + self.box.sentence(self.function.split(":")[-1]))
        for env, runs, admits in self.extremes:
            verdict = ("admitted, runs natively" if admits and runs else "excluded, fails natively" if not admits and not runs
                       else "admitted, FAILS natively" if admits else "excluded, but RUNS natively (the fix is too strong)")
            out.append(f"  at the fix's edge {format_valuation(env)}: {verdict}")
        if self.verified is not None:
            out.append("  verified end to end (export, fresh process, samples): " + ("yes" if self.verified else "NO"))
            if not self.verified:
                out += [f"    {ln}" for ln in self.verification]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status, "detail": self.detail, "ok": self.ok, "parts": [p.to_dict() for p in self.parts],
            "in_avals": list(self.in_avals), "shapes": list(self.shapes), "constraints": list(self.constraints),
            "rounds": [r.to_dict() for r in self.rounds], "dropped": list(self.dropped),
            "box": self.box.to_dict() if self.box is not None else None, "verified": self.verified,
            "extremes": [{"valuation": env, "runs_natively": runs, "admitted": admits} for env, runs, admits in self.extremes],
            "verification": list(self.verification),
            "code": self.code() if self.parts and self.status in (FIXED, NARROW, NOT_VERIFIED) else "",
            "cli": self.cli() if self.parts else "",
            "command": self.command() if self.parts and self.status in (FIXED, NARROW, NOT_VERIFIED) else "",
            "target": self.target, "seconds": round(self.seconds, 3), "stock": self.stock,
        }


# -- a specification as data: dims (IR) and constraint texts ------------------------------------------
@dataclass(frozen=True)
class Spec:
    dims: Dims
    dtypes: tuple[Any, ...]
    constraints: tuple[str, ...]

    def apply(self, part: FixPart) -> Spec:
        if part.kind != SPEC:
            return Spec(self.dims, self.dtypes, (*self.constraints, normalise_constraint(part.text)))
        assert part.variable is not None
        env = {part.variable: parse_expr(part.text)}
        dims = tuple(tuple(exact_divisions(d.substitute(env)) for d in leaf) for leaf in self.dims)
        texts = []
        for t in self.constraints:
            c = Constraint.parse(t)
            texts.append(render_constraint(exact_divisions(c.diff.substitute(env)), c.kind)
                         if part.variable in c.diff.variables() else t)
        return Spec(dims, self.dtypes, tuple(texts))

    def constraint_set(self) -> ConstraintSet:
        return ConstraintSet.of(self.constraints)

    def shape_texts(self) -> tuple[str, ...]:
        return tuple(", ".join(str(d) for d in leaf) for leaf in self.dims)

    def aval_texts(self) -> tuple[str, ...]:
        return tuple(f"{np.dtype(t).name}[{', '.join(str(d) for d in leaf)}]"
                     for leaf, t in zip(self.dims, self.dtypes, strict=True))

    def build(self, in_tree: Any) -> tuple[Any, Any]:
        """The ``ShapeDtypeStruct`` pytree in one fresh scope, and that scope."""
        scope = export.SymbolicScope(self.constraints)
        leaves = []
        for leaf, t in zip(self.dims, self.dtypes, strict=True):
            shape = export.symbolic_shape(", ".join(str(d) for d in leaf), scope=scope) if leaf else ()
            leaves.append(jax.ShapeDtypeStruct(shape, t))
        return jax.tree_util.tree_unflatten(in_tree, leaves), scope


def spec_of(leaves: Sequence[Any], scope: Any) -> Spec:
    dims = tuple(tuple(adapter.to_ir(d) if export.is_symbolic_dim(d) else Expr.const(int(d)) for d in x.shape) for x in leaves)
    return Spec(dims, tuple(np.dtype(x.dtype) for x in leaves), tuple(c.text for c in adapter.scope_constraints(scope)))


# -- one export attempt ----------------------------------------------------------------------------
@dataclass
class Attempt:
    ok: bool
    error: BaseException | None = None
    question: tuple[Expr, Expr] | None = None  # JAX asked lhs >= rhs and it stayed inconclusive
    scope: Any = None
    seconds: float = 0.0
    # the last equalities JAX's shape checks asked and smtdims could not prove, oldest first: the
    # equation a failed broadcast, concatenate, split or reshape needed is the last one
    equations: tuple[tuple[Expr, Expr], ...] = ()
    exported: Any = field(default=None, repr=False)  # the Exported where the export succeeded
    spec: Any = None  # the Spec exported, where it was one (:func:`attempt`)

    @property
    def message(self) -> str:
        if self.error is None:
            return ""
        text = str(self.error)
        kind = "InconclusiveDimensionOperation" if isinstance(self.error, adapter.AnyInconclusive) else type(self.error).__name__
        return f"{kind}: " + "\n".join(
            ln for ln in text.splitlines() if not ln.strip().startswith("smtdims:")).strip()

    @functools.cached_property
    def refusals(self) -> tuple[Refusal, ...]:
        """What the export refused, read once (:mod:`.refusals`), in the order the loop takes them."""
        if self.ok:
            return ()
        message = "\n".join(str(e) for e in error_chain(self.error)) if self.error is not None else ""
        return refusals_of(self.question, self.equations, message)


_EQUATIONS_KEPT = 4


def error_chain(err: BaseException) -> list[BaseException]:
    """``err`` and the errors it was raised from or during (``__cause__``, ``__context__``): a framework
    that re-raises a shape error as its own (Keras' ``e.__class__(message)``) keeps JAX's there."""
    out: list[BaseException] = []
    e: BaseException | None = err
    while e is not None and e not in out and len(out) < 16:
        out.append(e)
        e = e.__cause__ if e.__cause__ is not None else e.__context__
    return out


def attempt(fn: Callable[..., Any], spec: Spec, in_tree: Any, plats: tuple[str, ...] | None,
            budget: int | None) -> Attempt:
    """Export with ``spec``; the inconclusive comparison or the unproven equalities that stopped it."""
    t0 = time.perf_counter()
    try:
        args, scope = spec.build(in_tree)
    except Exception as err:  # noqa: BLE001 - JAX refused the rewritten specification itself
        return Attempt(False, err, seconds=time.perf_counter() - t0)
    got = export_attempt(fn, jax.tree_util.tree_leaves(args), in_tree, scope, plats, budget, t0)
    got.spec = spec
    return got


def export_attempt(fn: Callable[..., Any], leaves: Sequence[Any], in_tree: Any, scope: Any,
                   plats: tuple[str, ...] | None, budget: int | None, t0: float | None = None) -> Attempt:
    """Export ``fn`` at the spec ``leaves`` (in ``scope``) with smtdims installed, listening to what JAX
    asks: the one export of a specification, whose refusal the fix loop reads and whose success the
    verification uses."""
    t0 = time.perf_counter() if t0 is None else t0
    args = jax.tree_util.tree_unflatten(in_tree, list(leaves))
    seen: list[dict[str, Any]] = []
    equations: collections.deque[tuple[Any, Any]] = collections.deque(maxlen=_EQUATIONS_KEPT)
    # (lhs, rhs, asked by JAX?): JAX's unproven ones and the program's == that stock answered False, in order
    asked: collections.deque[tuple[Any, Any, bool]] = collections.deque(maxlen=_EQUATIONS_KEPT)

    def listener(ev: dict[str, Any]) -> None:
        if ev.get("answer") == "inconclusive":
            seen.append(ev)
        elif ev.get("kind") == "eq" and ev.get("asked_by") == adapter.ASKED_BY_JAX and not ev.get("proven_equal"):
            equations.append((ev["lhs"], ev["rhs"]))
            asked.append((ev["lhs"], ev["rhs"], True))
        elif ev.get("kind") == "eq" and ev.get("asked_by") == adapter.ASKED_BY_USER and not ev.get("answer"):
            asked.append((ev["lhs"], ev["rhs"], False))

    try:
        with enabled(budget=budget):
            adapter.add_listener(listener)
            try:
                exported = export.export(jax.jit(fn), platforms=plats)(*args)
            finally:
                adapter.remove_listener(listener)
    except Exception as err:  # noqa: BLE001 - a refusal is data
        chain = error_chain(err)
        if _raised_by_smtdims(chain[-1]):
            raise
        ev = next((e for e in reversed(seen) if any(e.get("error") is x for x in chain)), None)
        q = None
        if ev is not None:
            try:
                q = (adapter.to_ir(ev["lhs"]), adapter.to_ir(ev["rhs"]))
            except Exception:  # noqa: BLE001 - an operand smtdims cannot read: no comparison fix
                q = None
        # An error JAX raised needed the last equation JAX asked. One the program raised (an ``assert
        # h % 2 == 0``, flax's ScopeParamShapeError comparing a parameter's shape, a shape test in an
        # ``if``) came from the last == evaluated before it, by anyone: the program's own read included.
        by_program = not _raised_in_jax(chain[0])
        eqs = []
        for lhs, rhs in ([(a, b) for a, b, _ in asked] if by_program and asked else equations):
            try:
                eqs.append((adapter.to_ir(lhs), adapter.to_ir(rhs)))
            except Exception:  # noqa: BLE001 - an operand smtdims cannot read: not an equation it can fix
                continue
        return Attempt(False, err, q, scope, time.perf_counter() - t0, tuple(eqs))
    return Attempt(True, scope=scope, seconds=time.perf_counter() - t0, exported=exported)


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


def _raised_in_jax(err: BaseException) -> bool:
    """Whether the innermost frame of ``err``'s traceback runs JAX's own code (not the program's, a
    framework's or the standard library's)."""
    from ..frames import jax_dirs

    tb = err.__traceback__
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    if last is None:
        return True
    import os

    return os.path.abspath(last.tb_frame.f_code.co_filename).startswith(jax_dirs())


# -- candidates ------------------------------------------------------------------------------------
def candidates(att: Attempt, session: Session) -> list[Candidate]:
    """Verified fixes for the refusal, each a group of parts applied together (most are one part; the
    divisibilities that settle an equation may be several) with a tie-break rank (lower first among
    equal box scores): the fixes of the first of its refusals (:mod:`.refusals`) that offers any."""
    return candidates_of(att.refusals, session)


def specialisations(fn: Callable[..., Any], spec: Spec, in_tree: Any, plats: tuple[str, ...] | None,
                    budget: int | None, att: Attempt, box: NativeBox, name: str = "") -> list[Candidate]:
    """A variable fixed where the program uses it as a number (``s = int(math.sqrt(n))``): no constraint
    or rewrite makes a symbolic dimension a Python number, a constant does. For each variable of the
    specification, the value a person fixes: the user's example's, else the smallest traced size at
    which the function runs on non-empty arrays (the smallest the model is built for; on a grid, the
    value at which the most grid shapes run); kept only when the export then gets past this refusal
    (tried: one export per variable)."""
    if not any(isinstance(r, ConstantNeeded) for r in att.refusals):
        return []
    key = refusal_key(att)
    names = sorted(frozenset().union(*(d.variables() for leaf in spec.dims for d in leaf)))
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
        trial = _apply_all(spec, [part])
        if trial is None:
            continue
        got = attempt(fn, trial, in_tree, plats, budget)
        if got.ok or refusal_key(got) != key:
            out.append(((part,), 3))
    return out


Scored = tuple[tuple[int, int, int, int], tuple[FixPart, ...], int, int, int]  # (sort key, group, ok, bad, nonempty)


def _scored(offered: Sequence[Candidate], spec: Spec, box: NativeBox, some_nonempty: bool,
            tick: Callable[[str | Callable[[], str]], None] = lambda m: None) -> list[Scored]:
    """The candidates JAX accepts, each with its score on the traced shapes (those where they disagree
    traced first: :meth:`.box.NativeBox.prepare`); the degenerate ones dropped."""
    trials = []
    for group, rank in offered:
        trial = _apply_all(spec, group)
        if trial is None or not _jax_accepts(trial):
            continue  # a rewrite we cannot apply, or a constraint JAX's parser refuses: no candidate
        if not all(box.admits(trial.dims, trial.constraint_set(), x) for x in box.example_shapes()):
            continue  # the user runs the examples: a family without them is no fix for this user
        trials.append((group, rank, trial))
    tick(lambda: f"fix: tracing where {len(trials)} candidates disagree")
    box.prepare([(t.dims, t.constraint_set()) for _, _, t in trials])
    some_nonempty = some_nonempty or bool(box.nonempty & box.admitted_shapes(spec.dims, spec.constraint_set()))
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
    """The weakest verified fix of an inconclusive ``lhs >= rhs``: :func:`smtdims.answers.explain.settling_fix`
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
        spec = _apply_all(original, start) or original
    status, detail = ROUND_LIMIT, f"{rounds} rounds"
    errors_seen: set[tuple[str, str]] = set()
    last: Attempt | None = None
    sides: list[Expr] = []  # the sizes each refused equation compared, in the original variables
    done: Attempt | None = None  # the export that succeeded, of the specification it was made with
    for _ in range(rounds + 1):
        if time.monotonic() > stop:
            status, detail = DEADLINE, f"{deadline:.0f}s"
            break
        t0 = time.perf_counter()
        last = first if first is not None and spec is original else attempt(fn, spec, in_tree, plats, budget)
        first = None
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
        session = Session(spec.constraint_set(), budget) if last.scope is None else adapter.session_for_scope(last.scope)
        say(f"fix round {len(done_rounds) + 1}: {msg}")
        some_nonempty = box.weakness(spec.dims, spec.constraint_set())[0] > 0
        tick = Ticker(say)
        offered = candidates(last, session)
        round_no = len(done_rounds) + 1
        tick(f"fix round {round_no}: {len(offered)} verified candidate(s); measuring them")
        scored = _scored(offered, spec, box, some_nonempty, tick)

        def pinned(spec: Spec = spec, last: Attempt = last, tick: Ticker = tick, round_no: int = round_no,
                   some_nonempty: bool = some_nonempty) -> list[Scored]:
            tick(f"fix round {round_no}: trying each variable fixed")
            return _scored(specialisations(fn, spec, in_tree, plats, budget, last, box, name), spec, box,
                           some_nonempty, tick)

        number_needed = bool(last.refusals) and isinstance(last.refusals[0], ConstantNeeded)
        if not scored and number_needed:  # a size used as a number: a fixed size, before an earlier equation's
            scored = pinned()
        if not scored:
            scored = _scored(last_resort(last, session), spec, box, some_nonempty, tick)
        if not scored and not number_needed:
            scored = pinned()
        scored.sort(key=lambda x: x[0])
        if not scored:
            status, detail = NO_FIX, f"smtdims found no verified fix for: {msg}"
            done_rounds.append(FixRound(last.message, (), "", time.perf_counter() - t0))
            break
        chosen = tuple(_as_rewrite(p, spec) for p in _simplest_equivalent(scored, spec, budget))
        parts.extend(chosen)
        spec = _apply_all(spec, chosen) or spec
        done_rounds.append(FixRound(last.message, tuple((_group_text(g), ok, bad, ne) for _, g, ok, bad, ne in scored),
                                    _group_text(chosen), time.perf_counter() - t0,
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
            trial = _apply_all(original, trial_parts)
            if trial is not None:  # what the wider specification admits besides: traced before it is judged
                box.prepare([(spec.dims, spec.constraint_set()), (trial.dims, trial.constraint_set())])
                base_bad = -box.score(spec.dims, spec.constraint_set())[1]
            if trial is not None and -box.score(trial.dims, trial.constraint_set())[1] <= base_bad:
                got = attempt(fn, trial, in_tree, plats, budget)
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
        report = verify(args, new_scope, done.exported if done is not None and done.spec == spec else None)
        verified = bool(report.ok)
        lines = tuple(report.failures)
        more = _exclusions(report, spec, fn, in_tree, plats, budget) if not verified else None
        if more is None:
            break
        group, trial, why = more  # samples failed where the function fails: exclude them and go on
        say(f"fix: the fixed export's samples fail natively; excluding them: {_group_text(group)}")
        parts.extend(group)
        spec, done = _without_implied(trial, budget), None
        ne, ok, bad = box.weakness(spec.dims, spec.constraint_set())
        done_rounds.append(FixRound(why, ((_group_text(group), ok, -bad, ne),), _group_text(group), 0.0))
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
    if status in (FIXED, NOT_VERIFIED) and original_vars(original) and not original_vars(spec) and pinning:
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


def original_vars(spec: Spec) -> frozenset[str]:
    """The variables of a specification's dimensions."""
    return frozenset().union(*(d.variables() for leaf in spec.dims for d in leaf))


def _pins(parts: Sequence[FixPart]) -> bool:
    """Whether the fix pins a variable to a size (a spec rewrite to a constant)."""
    return any(p.kind == SPEC and p.text.strip().isdigit() for p in parts)


def _measure_extremes(box: NativeBox, spec: Spec, original: Spec,
                      budget: int | None) -> tuple[tuple[dict[str, int], bool, bool], ...]:
    """Each variable the fix bounds, at its bound and one past it (others at their least values), run
    natively: ``t <= 512`` is checked at ``t = 512`` (must run) and ``t = 513`` (fails, or the fix is too
    strong). Only valuations the original specification admits count; a box of small shapes never gets there."""
    fixed = spec.constraint_set()
    names = sorted(frozenset().union(*(d.variables() for leaf in spec.dims for d in leaf)))
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
    names = frozenset().union(*(d.variables() for leaf in spec.dims for d in leaf))
    for v in sorted(c.diff.variables() & names):
        coeff = sum(k for m, k in c.diff.terms if len(m) == 1 and m[0][1] == 1 and m[0][0] == Var(v))
        rest = c.diff - Expr.var(v) * coeff
        if abs(coeff) != 1 or v in rest.variables():
            continue
        other = -rest if coeff == 1 else rest  # coeff*v + rest == 0: v == other
        k = other.as_constant()
        if (k is not None and k >= 1) or (other.as_var() is not None and other.as_var() != v):
            if _apply_all(spec, [FixPart(SPEC, str(other), v)]) is not None:
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


def refusal_key(att: Attempt) -> tuple[str, str]:
    """What a refusal is, for "the same refusal came back": the comparison or the equation JAX asked
    (a framework's wrapper repeats its message for a different equation: an encoder's ``t`` table, then
    a decoder's ``u``), else the first line of the message."""
    return next((k for r in att.refusals if (k := r.key()) is not None), None) or message_key(att.message)


def as_parts(constraints: Sequence[str], spec: Spec) -> list[FixPart]:
    """The diagnosis's exclusions as a person writes them: ``mod(h, 7) == 0`` on a variable of the
    specification as the rewrite ``7*h`` for ``h`` (the form JAX's documentation teaches, and one JAX
    accepts where it refuses a ``mod`` constraint); every other one as a constraint.

    Sound: for integers ``h >= 1``, ``mod(h, k) == 0`` holds exactly for ``h = k*h'`` with ``h' >= 1``.
    """
    names = frozenset().union(*(d.variables() for leaf in spec.dims for d in leaf))
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
              budget: int | None) -> tuple[list[FixPart], Spec, str] | None:
    """The exclusion of the natively failing samples a diagnosis (:class:`.diagnose.SampleDiagnosis`) found,
    applied to ``spec`` and re-exported (the spec rewrite first, the plain constraints if the rewrite does
    not export), with why; or None: no sample failed natively, or nothing found exports."""
    if d is None or not d.native_fails or not d.constraints:
        return None
    why = (f"the samples fail natively at {format_valuation(d.native_fails[0])}: {_first_line(d.native_error, 200)}")
    for group in (as_parts(d.constraints, spec), [FixPart("constraint", normalise_constraint(t)) for t in d.constraints]):
        trial = _apply_all(spec, group)
        if trial is not None and _jax_accepts(trial) and attempt(fn, trial, in_tree, plats, budget).ok:
            return group, trial, why
    return None


def _exclusions(report: Any, spec: Spec, fn: Callable[..., Any], in_tree: Any, plats: tuple[str, ...] | None,
                budget: int | None) -> tuple[list[FixPart], Spec, str] | None:
    """:func:`exclusion` of a verification's diagnosis (None when its samples did not run)."""
    return None if report.not_run else exclusion(getattr(report, "diagnosis", None), spec, fn, in_tree, plats, budget)


def exports_on_stock(fn: Callable[..., Any], spec: Spec, in_tree: Any, plats: tuple[str, ...] | None) -> bool:
    """Whether stock JAX (smtdims uninstalled for the call) exports ``fn`` with ``spec``: the printed code
    says ``smtdims.install()`` when it does not (a bound on ``floordiv(h, 8)*floordiv(w, 8)`` that only
    smtdims proves enough)."""
    from .. import install, installed_options, is_installed, uninstall

    was = installed_options() if is_installed() else None
    uninstall()
    try:
        args, _ = spec.build(in_tree)
        export.export(jax.jit(fn), platforms=plats)(*args)
        return True
    except Exception:  # noqa: BLE001 - any refusal: the code needs smtdims
        return False
    finally:
        if was is not None:
            install(equality=was.get("equality", True))


def _group_text(parts: Sequence[FixPart]) -> str:
    return "; ".join(str(p) for p in parts)


def _jax_accepts(spec: Spec) -> bool:
    """Whether jax.export's parser takes the constraints (an equality's left side must be one term
    times a coefficient, ``4*b*P*Q + ... == 64*b*...`` is refused): a fix must be writable in JAX."""
    try:
        export.SymbolicScope(spec.constraints)
    except Exception:  # noqa: BLE001 - any refusal: JAX cannot take this fix as written
        return False
    return True


def _apply_all(spec: Spec, parts: Sequence[FixPart]) -> Spec | None:
    try:
        for p in parts:
            spec = spec.apply(p)
    except Exception:  # noqa: BLE001 - a later rewrite no longer applies without an earlier one
        return None
    return spec


__all__ = [
    "FixOptions", "FixPart", "FixResult", "FixRound", "Spec", "attempt", "cancel_common_factor", "candidates",
    "divisibility_fixes",
    "equation_fixes", "error_chain", "first_round_fix", "normalise_constraint", "render_constraint", "synthesize",
]
