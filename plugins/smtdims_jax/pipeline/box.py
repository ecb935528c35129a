"""How weak a fix is, measured: native traces at shapes chosen by reasoning, and what a spec admits.

The native oracle is the expensive part of a fix (a flax model: 0.1-0.2 s a trace; a grid of 400
small shapes is a minute), so it is spent where it decides something. By default no grid is
traced: the shapes are *chosen* (:class:`NativeBox`), and each is traced at most once (the verdicts
are kept for the whole fix, every round and candidate):

- anchors: the user's examples, the least valuation, and aligned sizes (the diagonal and each
  variable alone over 1, 2, 3, 4, 7, 8, 16, 17, 32, 64, 128, 256, 512, 1024 around a base point where
  the function runs on non-empty arrays): where kernels and CNNs start to run and where model code
  branches (a fix that admits a traced shape where the function fails is not verified);
- each candidate's edges: along each variable's line through the anchors, the sizes where the
  candidate starts or stops admitting (``t = 512`` and ``t = 513`` for ``t <= 512``);
- the failed samples.

A round ranks its candidates on the chosen shapes where they *disagree* (a shape every candidate
admits, or none does, cannot change their order, so it is not traced), plus one admitted shape per
candidate (a fix that admits only empty computations is degenerate). The final count traces the fix's
edges and the anchors. ``box=N`` (the ``--box`` option) asks for the grid instead: every valuation of
the variables in ``1..N`` that meets the user's constraints, traced eagerly.

On each shape the native function is traced with ``jax.make_jaxpr`` (what ``jax.eval_shape``
traces: no compilation, JAX checks shapes while tracing; ``native="run"`` runs it on zeros
instead). A fixed specification *admits* a shape when some valuation of its own variables (each
>= 1) meets its constraints and gives exactly those input shapes (:func:`valuation_of`: exact).

A shape *computes on something* when no array of the computation is empty: its inputs, its
outputs and every intermediate value of its traced program (``h <= 4`` makes a conv's output
empty; ``h <= 7`` before 8x8 patches leaves no patch, and the mean over the patches is NaN in an
output of the right shape). Fixes are ranked by the shapes that compute on something first
(:meth:`NativeBox.weakness`); a fix that admits none of them is degenerate.
"""

from __future__ import annotations

import itertools
import logging
import math
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from smtdims.errors import SmtdimsError, format_valuation
from smtdims.lang.constraints import ConstraintSet
from smtdims.lang.expr import Expr, Var

from ._common import Ticker

BOX_SHAPES = 400  # target size of a grid (box=N): N = 64 for one variable, 20 for two, 7 for three
MAX_SIDE = 64
_DIAGONAL_ENOUGH = 8  # non-empty shapes a grown grid seeks before it stops
# Sizes where models start to run and where their code branches: powers of two and one past them,
# the small odd sizes that break divisibility, the least sizes
ALIGNED = (1, 2, 3, 4, 7, 8, 16, 17, 32, 64, 128, 256, 512, 1024)
# the diagonal sizes a base is looked for at (0: the least valuation): powers of two, then sizes with many
# divisors (a conv of stride 3, windows of 7, a 224-pixel image), then the small ones
_BASE_ORDER = (8, 16, 32, 64, 0, 24, 48, 224, 96, 56, 12, 128, 4, 2)
_BASE_TRACES = 10  # traces spent looking for a base at most
_LINE = tuple(range(1, 257)) + tuple(sorted({k * 2**e + d for e in range(8, 21) for k in (1, 3) for d in (-1, 0, 1)}))
TRACES = 48  # native traces a fix spends at most with chosen shapes (the grid of box=N is traced whole)
_DISAGREE = 24  # shapes where a round's candidates disagree, traced at most per round
_EXCLUDED, _ADMITTED = 16, 12  # known shapes a fix excludes / admits, traced at most for its count
_EXCUSED = 4  # of the excluded ones, those a fix part's reason excuses (see NativeBox.count)

Shapes = tuple[tuple[int, ...], ...]
Dims = tuple[tuple[Expr, ...], ...]


def box_side(n_vars: int, shapes: int = BOX_SHAPES) -> int:
    """``N`` such that ``N ** n_vars`` stays about ``shapes`` (at least 3, at most 64)."""
    if n_vars <= 0:
        return 1
    return max(3, min(MAX_SIDE, int(round(shapes ** (1.0 / n_vars)))))


def shapes_at(dims: Dims, env: dict[str, int]) -> Shapes | None:
    """The input shapes at ``env``; None where a dimension is negative or undefined (division by 0)."""
    try:
        out = tuple(tuple(d.evaluate(env) for d in leaf) for leaf in dims)
    except (ZeroDivisionError, KeyError):
        return None
    return None if any(x < 0 for leaf in out for x in leaf) else out


MAX_VALUATIONS = 4 * BOX_SHAPES  # past this many (3^8 for 8 variables), the box is a fixed-seed sample


def valuations(names: Sequence[str], side: int) -> Iterator[dict[str, int]]:
    """Every valuation of ``names`` in ``1..side``, or ``MAX_VALUATIONS`` of them drawn with a fixed seed
    when there are more: a model with ten symbolic dimensions must not trace 59,049 shapes."""
    if side ** len(names) <= MAX_VALUATIONS:
        for values in itertools.product(range(1, side + 1), repeat=len(names)):
            yield dict(zip(names, values, strict=True))
        return
    rng = random.Random(0)
    for _ in range(MAX_VALUATIONS):
        yield {v: rng.randint(1, side) for v in names}


def _box_shapes(dims: Dims, constraints: ConstraintSet, names: Sequence[str],
                side: int) -> Iterator[tuple[Shapes, dict[str, int]]]:
    """``(shapes, valuation)`` for every valuation of ``names`` in ``1..side`` the constraints admit."""
    for env in valuations(names, side):
        if _holds(constraints, env):
            s = shapes_at(dims, env)
            if s is not None:
                yield s, env


def _holds(constraints: ConstraintSet, env: dict[str, int]) -> bool:
    try:
        return constraints.holds(env)
    except (ZeroDivisionError, KeyError):
        return False


def affine_in_one(e: Expr) -> tuple[str, int, int] | None:
    """``(v, m, c)`` where ``e`` is ``m*v + c`` in one variable ``v`` (``m != 0``); else None."""
    var, m, c = None, 0, 0
    for mono, coeff in e.terms:
        if not mono:
            c += coeff
        elif len(mono) == 1 and mono[0][1] == 1 and isinstance(mono[0][0], Var) and var in (None, mono[0][0].name):
            var, m = mono[0][0].name, m + coeff
        else:
            return None
    return (var, m, c) if var is not None and m != 0 else None


def valuation_of(dims: Dims, constraints: ConstraintSet, shapes: Shapes,
                 budget: int | None = None) -> dict[str, int] | None:
    """A valuation of the specification's variables (each >= 1) that meets ``constraints`` and gives
    exactly ``shapes``; None where none does.

    Exact: each dimension ``m*v + c`` in one unknown variable fixes ``v = (s - c) / m`` (an integer
    >= 1, or no valuation gives ``s``), and every dimension is then evaluated against its size. A
    variable no such dimension fixes (``a*b``, ``floordiv(h, 2)``, or a constraint's alone) is left to
    smtdims: the equations ``d == s`` with the constraints are satisfiable exactly when such a
    valuation exists (an unknown answer counts as none: a shape is then not claimed admitted).
    """
    if len(dims) != len(shapes) or any(len(d) != len(s) for d, s in zip(dims, shapes, strict=True)):
        return None
    pairs = [(d, n) for leaf, sl in zip(dims, shapes, strict=True) for d, n in zip(leaf, sl, strict=True)]
    env: dict[str, int] = {}
    todo = list(pairs)
    progress = True
    while todo and progress:
        progress = False
        rest = []
        for d, n in todo:
            e = d.substitute({k: Expr.const(v) for k, v in env.items()}) if env and d.variables() & env.keys() else d
            k = e.as_constant()
            if k is not None:
                if k != n:
                    return None
                progress = True
                continue
            aff = affine_in_one(e)
            if aff is None:
                rest.append((d, n))
                continue
            v, m, c = aff
            q, r = divmod(n - c, m)
            if r or q < 1:
                return None
            env[v] = q
            progress = True
        todo = rest
    free = (frozenset().union(*(d.variables() for d, _ in pairs)) | constraints.variables()) - env.keys()
    if not free:
        return dict(env) if _holds(constraints, env) else None
    # the rest by smtdims: the constraints with the sizes as equations, the known values substituted
    from smtdims.errors import UnsatisfiableConstraintsError
    from smtdims.lang.constraints import Constraint
    from smtdims.reasoner import session_for

    known = {k: Expr.const(v) for k, v in env.items()}
    eqs = [Constraint.make(d.substitute(known), "==", Expr.const(n)) for d, n in todo]
    cons = [Constraint.make(c.diff.substitute(known), c.kind, Expr.const(0)) for c in constraints]
    try:
        session = session_for(ConstraintSet(tuple(x for x in (*cons, *eqs) if not x.diff.is_constant)), budget, trial=True)
        if any(x.diff.is_constant and not x.holds({}) for x in (*cons, *eqs)):
            return None
        session.ensure_satisfiable()
        point = session.any_point() if session.sat_proven else None
    except (UnsatisfiableConstraintsError, SmtdimsError, ZeroDivisionError):
        return None
    if point is None:
        return None
    full = {**{v: 1 for v in free}, **point, **env}
    return full if _holds(constraints, full) and shapes_at(dims, full) == shapes else None


@dataclass(frozen=True)
class BoxCount:
    """A fixed specification measured natively (counts of input-shape tuples)."""

    side: int  # every variable in 1..side (0: shapes chosen by reasoning, not a grid)
    variables: tuple[str, ...]
    shapes: int  # measured shapes the original specification admits
    native_ok: int  # of those, where the native function runs
    admitted: int  # of those, the ones the fixed specification admits
    admitted_ok: int  # admitted and run natively
    excluded_ok: tuple[dict[str, int], ...] = ()  # examples: run natively but excluded by the fix
    admitted_failing: tuple[dict[str, int], ...] = ()  # examples: admitted but the native function fails
    native: str = "eval_shape"
    seconds: float = 0.0
    beyond: int = 0  # of ``shapes``, those measured beyond the grid (failed samples, the fix's edges, the diagonal)
    native_nonempty: int | None = None  # of ``native_ok``, those that compute on something (no empty array)
    admitted_nonempty: int | None = None  # of ``admitted_ok``, likewise
    traces: int = 0  # native traces the whole fix spent (each shape once)

    @property
    def excluded(self) -> int:
        return self.shapes - self.admitted

    @property
    def excluded_running(self) -> int:
        """Excluded shapes where the function runs on non-empty arrays (what a user loses)."""
        if self.native_nonempty is None or self.admitted_nonempty is None:
            return self.native_ok - self.admitted_ok
        return self.native_nonempty - self.admitted_nonempty

    @property
    def weakest(self) -> bool:
        """Admits every measured shape where the function runs natively, and no other."""
        return self.admitted_ok == self.native_ok and self.admitted == self.admitted_ok

    def sentence(self, name: str) -> str:
        if self.side:
            box = f"on the box {', '.join(self.variables)} in 1..{self.side}" if self.variables else "on static shapes"
            if self.beyond:
                box += f" and {self.beyond} point{'s' if self.beyond > 1 else ''} beyond it"
            box += f" ({self.shapes} shapes)"
        else:
            box = (f"on {self.shapes} shape{'s' if self.shapes != 1 else ''} traced natively (aligned sizes, "
                   "the fix's edges, the examples and failed samples)")
        s = (f"{box}: the fix admits {self.admitted_ok} of the {self.native_ok} "
             f"shapes where {name} runs natively ({self.native})")
        fail_excluded = self.excluded - (self.native_ok - self.admitted_ok)
        s += f"; excludes {self.excluded}" + (", all of which fail natively" if self.excluded and
                                               self.admitted_ok == self.native_ok else "")
        lost = self.native_ok - self.admitted_ok
        real = self.excluded_running
        if real > 0:
            s += (f". It EXCLUDES {real} shape(s) where {name} runs natively on non-empty arrays, e.g. "
                  + "; ".join(format_valuation(v) for v in self.excluded_ok[:3])
                  + (f" ({fail_excluded} excluded shapes fail natively)" if fail_excluded else ""))
        if lost > real:
            s += (f". The {lost - real} shape(s) it excludes {'' if real else 'where ' + name + ' runs natively '}"
                  "compute on empty arrays (an empty intermediate value: nothing a user runs)")
        bad = self.admitted - self.admitted_ok
        if bad:
            s += (f". It ADMITS {bad} shape(s) where {name} fails natively, e.g. "
                  + "; ".join(format_valuation(v) for v in self.admitted_failing[:3]))
        return s

    def to_dict(self) -> dict[str, Any]:
        return {"side": self.side, "variables": list(self.variables), "shapes": self.shapes,
                "native_ok": self.native_ok, "admitted": self.admitted, "admitted_ok": self.admitted_ok,
                "excluded": self.excluded, "excluded_ok": list(self.excluded_ok),
                "excluded_running": self.excluded_running,
                "admitted_failing": list(self.admitted_failing), "weakest": self.weakest, "native": self.native,
                "beyond": self.beyond, "native_nonempty": self.native_nonempty,
                "admitted_nonempty": self.admitted_nonempty, "seconds": round(self.seconds, 3),
                "traces": self.traces}


class NativeBox:
    """The native verdicts of one fix: chosen shapes (or the grid of ``side``), each traced once.

    ``env`` holds every shape known to the fix with a valuation of the original variables that
    gives it; ``ok`` the verdicts of those traced so far (``nonempty``: those that ran with every array
    non-empty; ``errors``: why the others failed). What is traced next is asked for by what decides:
    :meth:`prepare` (a round's candidates), :meth:`count` (the final count), :meth:`add` (points).
    """

    def __init__(self, fn: Callable[..., Any], dims: Dims, dtypes: Sequence[Any], in_tree: Any,
                 constraints: ConstraintSet, *, side: int | None = None, native: str = "eval_shape",
                 deadline: float | None = None, extra: Sequence[dict[str, int]] = (),
                 say: Callable[[str], None] | None = None, examples: Sequence[dict[str, int]] = (),
                 traces: int = TRACES, budget: int | None = None) -> None:
        if native not in ("eval_shape", "run"):
            raise ValueError(f"native must be 'eval_shape' or 'run', got {native!r}")
        self.fn, self.dims, self.dtypes, self.in_tree, self.native = fn, dims, list(dtypes), in_tree, native
        self.constraints, self.budget = constraints, budget
        self.variables = tuple(sorted(frozenset().union(*(d.variables() for leaf in dims for d in leaf))))
        self.grid = side is not None
        self.side = side if side is not None else 0
        t0 = time.perf_counter()
        self.env: dict[Shapes, dict[str, int]] = {}  # known shapes -> a valuation giving them
        self.extra: dict[Shapes, dict[str, int]] = {}  # of those, the ones beyond the grid
        self.ok: dict[Shapes, bool] = {}
        self.nonempty: set[Shapes] = set()  # shapes that run natively with every array non-empty
        self.errors: dict[Shapes, str] = {}
        self.complete = True
        self.traces = 0
        self.trace_seconds = 0.0  # spent tracing (what the native oracle cost)
        self.slowest_run = 0.0  # the longest trace of a shape where the function runs: a whole trace's cost
        self._limit = traces
        self._deadline = deadline
        self._tick = Ticker(say) if say is not None else None
        self._admits: dict[tuple[Any, Shapes], bool] = {}
        self.examples = [dict(e) for e in examples]
        self.base: dict[str, int] | None = None
        if self.grid:
            for s, env in _box_shapes(dims, constraints, self.variables, self.side):
                self.env.setdefault(s, env)
            self._add_points(extra)
            self.measure(list(self.env), budgeted=False)
            if not self.nonempty and self.variables:
                for env in self._diagonal(constraints):
                    self.measure(self._add_points([env]), budgeted=False)
        else:
            self._add_points(extra)
            self._add_points(self.examples)
            self._anchor(constraints)
        self.seconds = time.perf_counter() - t0

    # -- the shapes -------------------------------------------------------------------------------------
    def _diagonal(self, constraints: ConstraintSet) -> Iterator[dict[str, int]]:
        """Every variable ``v`` for ``v`` in ``side+1..MAX_SIDE``, where the constraints admit it, until a
        few shapes run with non-empty outputs (the grid is grown only while that is all it lacks)."""
        for v in range(self.side + 1, MAX_SIDE + 1):
            if len(self.nonempty) >= _DIAGONAL_ENOUGH or not self.complete:
                return
            env = dict.fromkeys(self.variables, v)
            if _holds(constraints, env):
                yield env

    def _anchor(self, constraints: ConstraintSet) -> None:
        """The base point (the first example, else the first diagonal size in :data:`_BASE_ORDER`, where the
        function runs on non-empty arrays; traced in that order until one does: aligned sizes before the
        least, which is where a model least often runs), the least valuation, the diagonal and each
        variable alone over :data:`ALIGNED` around the base."""
        if not self.variables:
            self.measure(self._add_points([{}]), budgeted=False)
            return
        tried = [*self.examples, *(dict.fromkeys(self.variables, v or 1) for v in _BASE_ORDER)]
        for env in tried:
            env = {**env, **{v: 1 for v in self.variables if v not in env}}
            if not _holds(constraints, env):
                continue
            self._add_points([env])
            shapes = shapes_at(self.dims, env)
            if shapes is None:
                continue
            self.measure([shapes], budgeted=False)
            if shapes in self.nonempty:
                self.base = env
                break
            if not self.complete or self.traces >= _BASE_TRACES:  # it runs nowhere near: stop looking
                break
        least = dict.fromkeys(self.variables, 1)
        points = [least] + [dict.fromkeys(self.variables, v) for v in ALIGNED]
        for base in ([self.base] if self.base is not None else []):
            for v in self.variables:
                points += [{**base, v: k} for k in ALIGNED]
        self._add_points(e for e in points if _holds(constraints, e))

    def _add_points(self, envs: Iterable[dict[str, int]]) -> list[Shapes]:
        """Make valuations of the original variables known (not traced); their shapes, in order."""
        added = []
        for env in envs:
            shapes = shapes_at(self.dims, env)
            if shapes is None:
                continue
            if shapes not in self.env:
                self.env[shapes] = dict(env)
                if self.grid:  # the grid itself is filled without this: what comes here lies beyond it
                    self.extra[shapes] = self.env[shapes]
            added.append(shapes)
        return added

    def edges(self, dims: Dims, constraints: ConstraintSet) -> list[Shapes]:
        """The shapes where a (fixed) specification starts or stops admitting, along each variable's line
        through the base and the least valuation (:data:`_LINE`: every size to 256, then around powers of
        two to 2**20), the first two changes of each line: ``t = 512`` and ``t = 513`` for ``t <= 512``."""
        out: list[Shapes] = []
        bases = [b for b in (self.base, dict.fromkeys(self.variables, 1)) if b is not None]
        for base in bases:
            for v in self.variables:
                if self._deadline is not None and time.monotonic() > self._deadline:
                    return out  # the fix's deadline: what is found so far (each line costs exact checks)
                prev: tuple[Shapes, dict[str, int], bool] | None = None
                changes = 0
                for k in _LINE:
                    env = {**base, v: k}
                    if not _holds(self.constraints, env):
                        continue
                    shapes = shapes_at(self.dims, env)
                    if shapes is None:
                        continue
                    now = self.admits(dims, constraints, shapes)
                    if prev is not None and now != prev[2]:
                        out += [s for s in (prev[0], shapes) if s not in out]
                        self._add_points([prev[1], env])
                        changes += 1
                        if changes >= 2:
                            break
                    prev = (shapes, env, now)
        return out

    def example_shapes(self) -> list[Shapes]:
        """The examples' input shapes."""
        return [x for x in (shapes_at(self.dims, e) for e in self.examples) if x is not None]

    # -- the native verdicts ------------------------------------------------------------------------------
    def measure(self, shapes: Sequence[Shapes], budgeted: bool = True) -> None:
        """Trace the native function at each of ``shapes`` not traced yet, in order, while the deadline and
        (where ``budgeted``, with chosen shapes) the fix's trace budget allow."""
        filtering = jax.config.jax_traceback_filtering
        # JAX's traceback filtering costs ~10x the trace of a refused shape (measured: 15 ms vs 1.3 ms)
        jax.config.update("jax_traceback_filtering", "off")
        # a shape chosen to fail is a question, not the user's error: the log records a framework writes
        # for it (Keras logs a traceback per attention implementation it falls back from) are not shown
        quiet = logging.root.manager.disable
        logging.disable(logging.ERROR)
        try:
            for s in shapes:
                if s in self.ok:
                    continue
                if budgeted and not self.grid and self.traces >= self._limit:
                    self.complete = False
                    return
                if self._deadline is not None and time.monotonic() > self._deadline:
                    self.complete = False  # the rest is not traced: the counts cover fewer shapes
                    return
                if self._tick is not None:
                    self._tick(lambda: f"fix: {self.traces} native traces so far")
                t0 = time.perf_counter()
                self.ok[s], err = self.runs(s)
                took = time.perf_counter() - t0
                self.trace_seconds += took
                if self.ok[s]:
                    self.slowest_run = max(self.slowest_run, took)
                self.traces += 1
                if err:
                    self.errors[s] = err
        finally:
            jax.config.update("jax_traceback_filtering", filtering)
            logging.disable(quiet)

    def add(self, envs: Sequence[dict[str, int]]) -> None:
        """Trace more valuations of the original variables (a fix's extremes: ``t = 512`` and ``t = 513``
        for ``t <= 512``); they count like the other traced shapes from then on."""
        self.measure(self._add_points(envs), budgeted=False)

    def runs(self, shapes: Shapes) -> tuple[bool, str]:
        """Whether the native function accepts inputs of these shapes (and JAX's message if not)."""
        leaves = [jax.ShapeDtypeStruct(s, d) for s, d in zip(shapes, self.dtypes, strict=True)]
        args = jax.tree_util.tree_unflatten(self.in_tree, leaves)
        inner: list[tuple[int, ...]] = []
        try:
            if self.native == "eval_shape":
                # the program, not only its outputs' shapes: the same trace as eval_shape's
                closed, out = jax.make_jaxpr(self.fn, return_shape=True)(*args)
                inner = list(intermediate_shapes(closed.jaxpr))
            else:
                zeros = [np.zeros(x.shape, x.dtype) for x in leaves]
                out = jax.block_until_ready(self.fn(*jax.tree_util.tree_unflatten(self.in_tree, zeros)))
        except Exception as err:  # any refusal is "does not run here"
            return False, f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
        sizes = [math.prod(s) for s in shapes] + [math.prod(getattr(x, "shape", ())) for x in jax.tree_util.tree_leaves(out)]
        if all(n > 0 for n in sizes) and all(math.prod(s) > 0 for s in inner):
            self.nonempty.add(shapes)
        return True, ""

    # -- what a specification admits ------------------------------------------------------------------------
    def admits(self, dims: Dims, constraints: ConstraintSet, shapes: Shapes) -> bool:
        """Whether the specification ``dims`` under ``constraints`` gives ``shapes`` (exact, kept)."""
        if dims == self.dims and shapes in self.env and self.env[shapes].keys() >= constraints.variables():
            return _holds(constraints, self.env[shapes]) or valuation_of(dims, constraints, shapes, self.budget) is not None
        key = ((dims, constraints), shapes)
        got = self._admits.get(key)
        if got is None:
            got = self._admits[key] = valuation_of(dims, constraints, shapes, self.budget) is not None
        return got

    def admitted_shapes(self, dims: Dims, constraints: ConstraintSet) -> set[Shapes]:
        """The traced shapes the specification admits."""
        return {s for s in self.ok if self.admits(dims, constraints, s)}

    def prepare(self, specs: Sequence[tuple[Dims, ConstraintSet]]) -> None:
        """Trace what ranks these (a round's candidates): the known shapes and each one's edges where
        they disagree (at most :data:`_DISAGREE`, anchors first), and one admitted shape of each."""
        if self.grid:
            return
        for dims, cs in specs:
            self.edges(dims, cs)
        known = [s for s in self.env if _holds(self.constraints, self.env[s])]
        votes = {s: tuple(self.admits(d, c, s) for d, c in specs) for s in known}
        split = [s for s in known if len(set(votes[s])) > 1]
        self.measure(split[:_DISAGREE])
        for i in range(len(specs)):
            mine = [s for s in known if votes[s][i]]
            if mine and not any(s in self.nonempty for s in mine):
                # its largest known shape first: where arrays are least likely to be empty
                self.measure(sorted(mine, key=lambda s: -sum(x for leaf in s for x in leaf))[:2])

    def count(self, dims: Dims, constraints: ConstraintSet,
              excused: Callable[[dict[str, int]], bool] | None = None) -> BoxCount:
        """Measure a (fixed) specification: its edges and the anchors are traced first (chosen shapes).
        ``excused``: whether a fix part's reason excludes a shape (past a NaN bound, off a pin); whether
        one runs decides nothing of the verdict, so a few are traced (:data:`_EXCUSED`) and the budget goes
        to the excluded shapes no reason covers, where a fix narrower than needed shows."""
        if not self.grid:  # the edges, then the known shapes it excludes (what a user may lose), then a few it admits
            edges = self.edges(dims, constraints)
            rest = [s for s in self.env if s not in edges and _holds(self.constraints, self.env[s])]
            self.measure(edges)
            excluded = [s for s in rest if not self.admits(dims, constraints, s)]
            why = {s: excused is not None and excused(self.env[s]) for s in excluded}
            self.measure([s for s in excluded if not why[s]][:_EXCLUDED] + [s for s in excluded if why[s]][:_EXCUSED])
            # the powers of two first among those it admits: where model code special-cases sizes
            admitted = sorted((s for s in rest if self.admits(dims, constraints, s)),
                              key=lambda s: not all(x & (x - 1) == 0 for x in self.env[s].values()))
            self.measure(admitted[:_ADMITTED])
        known = [s for s in self.ok if _holds(self.constraints, self.env[s])]
        got = self.admitted_shapes(dims, constraints)
        adm = [s for s in known if s in got]
        lost = [s for s in known if self.ok[s] and s not in got]
        lost.sort(key=lambda s: s not in self.nonempty)  # the examples that matter first
        return BoxCount(
            side=self.side, variables=self.variables, shapes=len(known), native_ok=sum(self.ok[s] for s in known),
            admitted=len(adm), admitted_ok=sum(self.ok[s] for s in adm),
            native_nonempty=sum(1 for s in known if s in self.nonempty),
            admitted_nonempty=sum(1 for s in adm if s in self.nonempty),
            excluded_ok=tuple(self.env[s] for s in lost)[:5],
            admitted_failing=tuple(self.env[s] for s in adm if not self.ok[s])[:5],
            native=self.native, seconds=self.seconds, beyond=sum(1 for s in known if s in self.extra) if self.grid else 0,
            traces=self.traces,
        )

    def weakness(self, dims: Dims, constraints: ConstraintSet) -> tuple[int, int, int]:
        """(admitted shapes that run with non-empty outputs, that run, -admitted that fail): larger is weaker.

        Non-empty first: a fix that admits only shapes whose outputs are empty (``h <= 4`` before a
        stride-2 conv and a pool) keeps nothing a user runs, however many such shapes it admits."""
        got = self.admitted_shapes(dims, constraints)
        ok, bad = self.score(dims, constraints, got)
        return sum(1 for s in self.nonempty if s in got), ok, bad

    def score(self, dims: Dims, constraints: ConstraintSet, got: set[Shapes] | None = None) -> tuple[int, int]:
        """(admitted shapes that run natively, -admitted shapes that fail natively): larger is weaker and better."""
        got = self.admitted_shapes(dims, constraints) if got is None else got
        ok = sum(1 for s, good in self.ok.items() if good and s in got)
        bad = sum(1 for s, good in self.ok.items() if not good and s in got)
        return ok, -bad

    def first_running(self, v: str, base: dict[str, int], lo: int, hi: int, traces: int = 12) -> int:
        """The least value of ``v`` in ``(lo, hi]`` at which the function runs, the other variables at
        ``base``, by bisection between a failing ``lo`` and a running ``hi``: a convolution's or a window's
        least input runs from there up. Each step is traced (the counts see it), so a function that is
        not monotone there shows in the counts of the bound this gives, which is never taken on trust."""
        for _ in range(traces):
            if hi - lo <= 1:
                break
            mid = (lo + hi) // 2
            shapes = self._add_points([{**base, v: mid}])
            if not shapes:
                break
            self.measure(shapes, budgeted=False)
            lo, hi = (lo, mid) if self.ok.get(shapes[0]) else (mid, hi)
        return hi

    def smallest_running(self, v: str) -> int | None:
        """The least traced value of ``v`` at which the function runs on non-empty arrays, the other
        variables at the base (the smallest size the model is built for), else anywhere; None if none."""
        for pick in (lambda env: self.base is not None and all(env.get(w) == x for w, x in self.base.items() if w != v),
                     lambda env: True):
            values = sorted(env[v] for s, env in self.env.items() if s in self.nonempty and v in env and pick(env))
            if values:
                return values[0]
        return None


def intermediate_shapes(jaxpr: Any) -> Iterator[tuple[int, ...]]:
    """The shape of every value a traced program computes, inner programs (jit, scan, cond, custom
    derivatives) included: found through the equations' parameters, whatever the primitive."""
    for eqn in jaxpr.eqns:
        for v in eqn.outvars:
            shape = getattr(getattr(v, "aval", None), "shape", None)
            if shape is not None and all(isinstance(d, int) for d in shape):
                yield tuple(shape)
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                inner = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr holds its Jaxpr
                if hasattr(inner, "eqns"):
                    yield from intermediate_shapes(inner)


__all__ = ["BOX_SHAPES", "MAX_VALUATIONS", "TRACES", "BoxCount", "NativeBox", "box_side",
           "intermediate_shapes", "shapes_at", "valuation_of", "valuations"]
