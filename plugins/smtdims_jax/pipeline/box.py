"""How weak a fix is, measured: a box of small shapes, the native verdict on each, and what a spec admits.

The box is every valuation of the original specification's variables in ``1..N`` that
meets the user's constraints (``N`` = 64 for one variable, fewer for several, so that
the box stays a few hundred shapes). On each box shape the native function is traced
with ``jax.eval_shape`` (no compilation: JAX checks shapes while tracing, so a shape
error shows there; ``native="run"`` runs it on zeros instead). A fixed specification
*admits* a box shape when some valuation of its own variables (each in ``1..N``; the
rewrites smtdims makes, ``v -> m*v + c`` with ``m >= 1``, ``c >= 0``, never need a
larger value) meets its constraints and gives exactly those input shapes.

A shape *computes on something* when no array of the computation is empty: its inputs, its
outputs and every intermediate value of its traced program (``h <= 4`` makes a conv's output
empty; ``h <= 7`` before 8x8 patches leaves no patch, and the mean over the patches is NaN in an
output of the right shape). A box whose runnable shapes all compute on nothing says nothing about
a fix: then the box grows along its diagonal (every variable ``v``, ``v`` in ``N+1..64``) until it
holds shapes that compute on something, and fixes are ranked by those they admit first
(:meth:`NativeBox.weakness`); a fix that admits none of them is degenerate.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from smtdims.errors import format_valuation
from smtdims.lang.constraints import ConstraintSet
from smtdims.lang.expr import Expr

from ._common import Ticker

BOX_SHAPES = 400  # target size of the box: N = 64 for one variable, 20 for two, 7 for three
MAX_SIDE = 64
_DIAGONAL_ENOUGH = 8  # non-empty shapes the grown box seeks before it stops

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


def admitted(dims: Dims, constraints: ConstraintSet, side: int) -> set[Shapes]:
    """Every input-shapes tuple the specification gives with its variables in ``1..side``."""
    names = sorted(frozenset().union(*(d.variables() for leaf in dims for d in leaf)) | constraints.variables())
    return {s for s, _ in _box_shapes(dims, constraints, names, side)}


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
        try:
            if not constraints.holds(env):
                continue
        except (ZeroDivisionError, KeyError):
            continue
        s = shapes_at(dims, env)
        if s is not None:
            yield s, env


@dataclass(frozen=True)
class BoxCount:
    """A fixed specification measured on the box (counts of input-shape tuples)."""

    side: int  # every variable in 1..side
    variables: tuple[str, ...]
    shapes: int  # box shapes the original specification admits
    native_ok: int  # of those, where the native function runs
    admitted: int  # of those, the ones the fixed specification admits
    admitted_ok: int  # admitted and run natively
    excluded_ok: tuple[dict[str, int], ...] = ()  # examples: run natively but excluded by the fix
    admitted_failing: tuple[dict[str, int], ...] = ()  # examples: admitted but the native function fails
    native: str = "eval_shape"
    seconds: float = 0.0
    beyond: int = 0  # of ``shapes``, those measured beyond the box (failed samples, the fix's edges, the diagonal)
    native_nonempty: int | None = None  # of ``native_ok``, those that compute on something (no empty array)
    admitted_nonempty: int | None = None  # of ``admitted_ok``, likewise

    @property
    def excluded(self) -> int:
        return self.shapes - self.admitted

    @property
    def weakest(self) -> bool:
        """Admits every box shape where the function runs natively, and no other."""
        return self.admitted_ok == self.native_ok and self.admitted == self.admitted_ok

    def sentence(self, name: str) -> str:
        box = f"{', '.join(self.variables)} in 1..{self.side}" if self.variables else "static shapes"
        if self.beyond:
            box += f" and {self.beyond} point{'s' if self.beyond > 1 else ''} beyond it"
        s = (f"on the box {box} ({self.shapes} shapes): the fix admits {self.admitted_ok} of the {self.native_ok} "
             f"shapes where {name} runs natively ({self.native})")
        fail_excluded = self.excluded - (self.native_ok - self.admitted_ok)
        s += f"; excludes {self.excluded}" + (", all of which fail natively" if self.excluded and
                                               self.admitted_ok == self.native_ok else "")
        lost = self.native_ok - self.admitted_ok
        real = lost if self.native_nonempty is None or self.admitted_nonempty is None else \
            self.native_nonempty - self.admitted_nonempty
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
                "admitted_failing": list(self.admitted_failing), "weakest": self.weakest, "native": self.native,
                "beyond": self.beyond, "native_nonempty": self.native_nonempty,
                "admitted_nonempty": self.admitted_nonempty, "seconds": round(self.seconds, 3)}


class NativeBox:
    """The box of the original specification and the native verdict on each of its shapes."""

    def __init__(self, fn: Callable[..., Any], dims: Dims, dtypes: Sequence[Any], in_tree: Any,
                 constraints: ConstraintSet, *, side: int | None = None, native: str = "eval_shape",
                 deadline: float | None = None, extra: Sequence[dict[str, int]] = (),
                 say: Callable[[str], None] | None = None) -> None:
        if native not in ("eval_shape", "run"):
            raise ValueError(f"native must be 'eval_shape' or 'run', got {native!r}")
        self.fn, self.dims, self.dtypes, self.in_tree, self.native = fn, dims, list(dtypes), in_tree, native
        self.variables = tuple(sorted(frozenset().union(*(d.variables() for leaf in dims for d in leaf))))
        self.side = side if side is not None else box_side(len(self.variables))
        t0 = time.perf_counter()
        self.env: dict[Shapes, dict[str, int]] = {}  # box shapes -> a valuation giving them
        for s, env in _box_shapes(dims, constraints, self.variables, self.side):
            self.env.setdefault(s, env)
        # points beyond the box (failed samples): where small shapes are all empty, the failures are there
        self.extra: dict[Shapes, dict[str, int]] = {}
        self._deadline = deadline
        self._tick = Ticker(say) if say is not None else None
        self._add_points(extra, measure=False)
        self.ok: dict[Shapes, bool] = {}
        self.nonempty: set[Shapes] = set()  # shapes that run natively with every input and output non-empty
        self.errors: dict[Shapes, str] = {}
        self.complete = True
        # JAX's traceback filtering costs ~10x the trace of a refused shape (measured: 15 ms vs 1.3 ms)
        filtering = jax.config.jax_traceback_filtering
        jax.config.update("jax_traceback_filtering", "off")
        try:
            self._measure(list(self.env))
            if not self.nonempty and self.variables:
                self._add_points(self._diagonal(constraints), measure=True)
        finally:
            jax.config.update("jax_traceback_filtering", filtering)
        self.seconds = time.perf_counter() - t0

    def _diagonal(self, constraints: ConstraintSet) -> Iterator[dict[str, int]]:
        """Every variable ``v`` for ``v`` in ``side+1..MAX_SIDE``, where the constraints admit it, until a
        few shapes run with non-empty outputs (the box is grown only while that is all it lacks)."""
        for v in range(self.side + 1, MAX_SIDE + 1):
            if len(self.nonempty) >= _DIAGONAL_ENOUGH:
                return
            env = dict.fromkeys(self.variables, v)
            try:
                if constraints.holds(env):
                    yield env
            except (ZeroDivisionError, KeyError):
                continue

    def _measure(self, shapes: Sequence[Shapes]) -> None:
        for i, s in enumerate(shapes):
            if self._deadline is not None and time.monotonic() > self._deadline:
                self.complete = False  # the rest is not measured: the counts cover fewer shapes
                return
            if self._tick is not None:
                self._tick(lambda i=i: f"fix: box: {len(self.ok)} shapes traced, {len(shapes) - i} to go")
            self.ok[s], err = self.runs(s)
            if err:
                self.errors[s] = err

    def _add_points(self, envs: Iterable[dict[str, int]], *, measure: bool) -> list[Shapes]:
        """Add valuations beyond the box (measured one by one when ``measure``, so that a generator can
        stop on what was measured)."""
        added = []
        for env in envs:
            shapes = shapes_at(self.dims, env)
            if shapes is not None and shapes not in self.env:
                self.env[shapes] = self.extra[shapes] = dict(env)
                added.append(shapes)
                if measure:
                    self._measure([shapes])
                    if not self.complete:
                        break
        return added

    def add(self, envs: Sequence[dict[str, int]]) -> None:
        """Measure more valuations of the original variables (a fix's extremes: ``t = 512`` and ``t = 513``
        for ``t <= 512``); they count like box shapes from then on."""
        filtering = jax.config.jax_traceback_filtering
        jax.config.update("jax_traceback_filtering", "off")
        try:
            self._add_points(envs, measure=True)
        finally:
            jax.config.update("jax_traceback_filtering", filtering)

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

    def _admitted(self, dims: Dims, constraints: ConstraintSet) -> set[Shapes]:
        """The measured shapes ``dims`` under ``constraints`` admit. With the original dims (a constraint
        added) a shape is admitted when its own valuation meets the constraints; a spec rewrite is
        enumerated over its own variables (:func:`admitted`)."""
        if dims != self.dims:
            return admitted(dims, constraints, self.side)
        got: set[Shapes] = set()
        for shapes, env in self.env.items():
            try:
                if constraints.holds(env):
                    got.add(shapes)
            except (ZeroDivisionError, KeyError):
                continue
        return got

    def count(self, dims: Dims, constraints: ConstraintSet) -> BoxCount:
        """Measure a (fixed) specification on the box."""
        got = self._admitted(dims, constraints)
        known = list(self.ok)
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
            native=self.native, seconds=self.seconds, beyond=sum(1 for s in known if s in self.extra),
        )

    def weakness(self, dims: Dims, constraints: ConstraintSet) -> tuple[int, int, int]:
        """(admitted shapes that run with non-empty outputs, that run, -admitted that fail): larger is weaker.

        Non-empty first: a fix that admits only shapes whose outputs are empty (``h <= 4`` before a
        stride-2 conv and a pool) keeps nothing a user runs, however many such shapes it admits."""
        got = self._admitted(dims, constraints)
        ok, bad = self.score(dims, constraints, got)
        return sum(1 for s in self.nonempty if s in got), ok, bad

    def score(self, dims: Dims, constraints: ConstraintSet, got: set[Shapes] | None = None) -> tuple[int, int]:
        """(admitted shapes that run natively, -admitted shapes that fail natively): larger is weaker and better."""
        got = self._admitted(dims, constraints) if got is None else got
        ok = sum(1 for s, good in self.ok.items() if good and s in got)
        bad = sum(1 for s, good in self.ok.items() if not good and s in got)
        return ok, -bad


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


__all__ = ["BOX_SHAPES", "MAX_VALUATIONS", "BoxCount", "NativeBox", "admitted", "box_side", "intermediate_shapes", "shapes_at",
           "valuations"]
