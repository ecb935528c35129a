"""Sample shapes chosen by the solver: minima, divisibility edges, large values, tight constraints."""

from __future__ import annotations

import math
from collections.abc import Sequence

import z3

from smtdims.engines.checks import SAT, UNSAT
from smtdims.engines.encoding import Encoder
from smtdims.errors import format_valuation
from smtdims.lang.constraints import ConstraintSet
from smtdims.lang.expr import FLOORDIV, MOD, Expr, Op
from smtdims.reasoner import Session, session_for

SAMPLES = 6  # at most this many samples by default: the goals that decide something, each compiled twice
MAX_ELEMENTS = 1 << 22  # per sample, all inputs together: keeps "large" samples quick to run
SAMPLE_BYTES = 4 << 20  # default memory budget of one sample (inputs and outputs): what "largest" fills
# the compute budget of the "largest" sample: the elements of every intermediate array together (a CPU runs
# ~1e9 a second, twice: the artifact and the reference). A transformer's attention scores grow as b*t*t:
# filling 4 MiB of token ids alone sampled batch 497 at length 863, minutes of CPU for what batch 3 shows
WORK_ELEMENTS = 1 << 25
_HALTON = (2, 3, 5, 7, 11, 13, 17, 19)  # one base per variable: spread samples vary them independently
_LARGE = (61, 53, 47, 43, 41, 37)  # "large" = minimum + one of these primes (no accidental divisibility)
_CAP_STEP = 64  # first solver attempt keeps every variable within minimum + 64


Cond = tuple[Expr, str, int]
FILL_IN = "fill: "  # a goal label's prefix: the goal decides nothing the others do not (a sample to make up a count)
NONEMPTY = "every array non-empty"  # lhs op rhs, evaluated exactly and encoded for Z3


def _holds(conds: Sequence[Cond], env: dict[str, int]) -> bool:
    try:
        for e, op, k in conds:
            v = e.evaluate(env)
            if not {"==": v == k, "!=": v != k, ">=": v >= k, "<=": v <= k, "<": v < k}[op]:
                return False
    except (ZeroDivisionError, KeyError):
        return False
    return True


def _encode(enc: Encoder, conds: Sequence[Cond]) -> list[z3.BoolRef]:
    out = []
    for e, op, k in conds:
        t = enc.expr(e)
        out.append({"==": t == k, "!=": t != k, ">=": t >= k, "<=": t <= k, "<": t < k}[op])
    return out


class SampleChooser:
    """Solver-chosen valuations for the input shapes: edges first, all shapes distinct.

    Every chosen valuation is re-checked with exact Python arithmetic against the
    constraints, so an encoding bug cannot smuggle an out-of-spec shape into the samples.
    """

    def __init__(self, session: Session, dims: Sequence[Sequence[Expr]], extra_atoms: Sequence[Expr] = (), *,
                 itemsizes: Sequence[int] | None = None, out_dims: Sequence[Sequence[Expr]] = (),
                 out_itemsizes: Sequence[int] | None = None, max_bytes: int = SAMPLE_BYTES,
                 nonempty: Sequence[Expr] = (), branches: Sequence[tuple[Expr, Expr]] = (),
                 work: Sequence[Expr] = (), max_work: int = WORK_ELEMENTS):
        self.session = session
        self.work, self.max_work = tuple(work), max_work  # the intermediates' element counts, and their budget
        self.work_bound = False  # the largest sample was sized by its compute, not its bytes
        # the program's own == that JAX answered False without proof: where one holds, the program takes
        # the branch no symbolic size took while exporting (a position table used as learned at 32x32)
        self.branches = [(lhs, rhs) for lhs, rhs in branches if not (lhs - rhs).is_constant]
        # sizes of the outputs and intermediates: one sample makes them all >= 1, so that some run computes
        # something (a box of small shapes can hold only empty outputs: a comparison of nothing)
        self.nonempty = list(dict.fromkeys(e for e in nonempty if not e.is_constant))[:200]
        self._nonempty_set = frozenset(self.nonempty)
        self.max_bytes = max_bytes
        self.itemsizes = list(itemsizes) if itemsizes is not None else [4] * len(dims)
        self.out_dims = [tuple(d) for d in out_dims]
        self.out_itemsizes = list(out_itemsizes) if out_itemsizes is not None else [4] * len(self.out_dims)
        self.constraints: ConstraintSet = session.constraints
        self.dims = [tuple(d) for d in dims]
        self.flat = [d for leaf in self.dims for d in leaf if not d.is_constant]
        self.vars = sorted(frozenset().union(*(d.variables() for d in self.flat)) | self.constraints.variables())
        self.shape_vars = sorted(frozenset().union(*(d.variables() for d in self.flat)))
        atoms: set = set()
        for e in [*self.flat, *extra_atoms, *(c.diff for c in self.constraints)]:
            atoms |= {a for a in e.atoms() if isinstance(a, Op) and a.op in (FLOORDIV, MOD)}
        self.div_atoms = sorted(atoms, key=str)
        self.lo: dict[str, int] = {}
        self.hi: dict[str, int | float] = {}
        for v in self.shape_vars:
            b = session.bounds(Expr.var(v))
            self.lo[v] = int(b.lo) if math.isfinite(b.lo) else 1
            self.hi[v] = b.hi

    def is_nonempty(self, env: dict[str, int]) -> bool:
        """Every output and intermediate array has at least one element at ``env``."""
        return _holds([(e, ">=", 1) for e in self.nonempty], env) and all(
            _holds([(d, ">=", 1) for d in leaf], env) for leaf in self.out_dims)

    def shapes(self, env: dict[str, int]) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(d.evaluate(env) for d in leaf) for leaf in self.dims)

    def nbytes(self, env: dict[str, int]) -> int:
        """Bytes of the inputs and outputs at ``env`` (what one sample holds at least)."""
        total = 0
        for leaves, sizes in ((self.dims, self.itemsizes), (self.out_dims, self.out_itemsizes)):
            for leaf, size in zip(leaves, sizes, strict=True):
                try:
                    total += math.prod(max(0, d.evaluate(env)) for d in leaf) * size
                except (ZeroDivisionError, KeyError):
                    continue
        return total

    def work_elements(self, env: dict[str, int]) -> int:
        """The elements of every intermediate array at ``env``: what running the program there costs."""
        total = 0
        for e in self.work:
            try:
                total += max(0, e.evaluate(env))
            except (ZeroDivisionError, KeyError):
                continue
        return total

    def _fits(self, env: dict[str, int]) -> bool:
        return self.nbytes(env) <= self.max_bytes and self.work_elements(env) <= self.max_work

    def largest(self) -> dict[str, int] | None:
        """The valuation that fills the budgets, memory (inputs and outputs) and compute (the intermediates'
        elements): every variable scaled up together (each by its own weight, so that they stay distinct),
        values not divisible by 2, 3 or 5 (no accidental divisibility), within the variables' proven
        maxima. None if even the minimum does not fit."""
        vs = self.shape_vars
        if not vs:
            return None
        weights = {v: 1.0 + 0.37 * i for i, v in enumerate(vs)}

        def at(t: int) -> dict[str, int]:
            env = {}
            for v in vs:
                x = self.lo[v] + int(t * weights[v])
                if math.isfinite(self.hi[v]):
                    x = min(x, int(self.hi[v]))
                while x > self.lo[v] and math.gcd(x, 30) != 1:
                    x -= 1
                env[v] = x
            return env

        if not self._fits(at(0)):
            return None
        lo, hi = 0, 1
        while self._fits(at(hi)) and hi < 1 << 40:
            lo, hi = hi, hi * 2
        while hi - lo > 1:  # bytes and work grow with t (dimensions grow with their variables): bisect
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self._fits(at(mid)) else (lo, mid)
        # which budget stopped it: said in the sample's reason
        self.work_bound = self.nbytes(at(hi)) <= self.max_bytes
        return at(lo) if lo > 0 else None

    def _solve(self, session: Session, conds: Sequence[Cond], avoid: Sequence[dict[str, int]]) -> dict[str, int] | None:
        """A model of constraints & conds & (shape differs from each of ``avoid``); small values first."""
        caps: list[Cond] = [(Expr.var(v), "<=", self.lo[v] + _CAP_STEP) for v in self.shape_vars]
        nonneg: list[Cond] = [(d, ">=", 0) for d in self.flat]
        exprs = [e for e, _, _ in [*conds, *nonneg]]

        def build(enc: Encoder, with_caps: bool) -> list[z3.BoolRef]:
            fs = _encode(enc, [*conds, *nonneg, *(caps if with_caps else [])])
            for prev in avoid:
                differs = [enc.expr(d) != d.evaluate(prev) for d in self.flat]
                fs.append(z3.Or(differs) if differs else z3.BoolVal(False, enc.ctx))
            return fs

        for with_caps in (True, False):
            # the session's question (its lock, its deadline); the model is re-checked exactly against
            # the constraints there, and against the goal's conditions here
            res = session.model(lambda enc, c=with_caps: build(enc, c), *exprs, names=self.vars)
            if res.status == SAT and res.model is not None:
                env = {v: res.model.get(v, 1) for v in self.vars}
                ok = session.constraints.holds(env) and _holds([*conds, *nonneg], env)
                if ok and all(self.shapes(env) != self.shapes(p) for p in avoid):
                    return env
        return None

    def goals(self) -> list[tuple[str, list[Cond]]]:
        """Targets in priority order (a smaller ``samples`` keeps the first ones); those labelled
        :data:`FILL_IN` come last and decide nothing the others do not (:meth:`choose` with ``fill=False``
        stops before them)."""
        v_ = Expr.var
        out: list[tuple[str, list[Cond]]] = []
        if self.shape_vars:
            out.append(("minimum", [(v_(v), "==", self.lo[v]) for v in self.shape_vars]))
        if self.nonempty:
            out.append((NONEMPTY, [(e, ">=", 1) for e in self.nonempty]))
        full = [(e, ">=", 1) for e in self.nonempty]  # preferred with each edge: a residue on empty arrays shows little
        for lhs, rhs in self.branches:
            # on the diagonal first: a short-circuited ``p == 16 and h == w`` shows JAX only its first
            # comparison, and square images are the size a model special-cases
            names = sorted((lhs - rhs).variables())
            diagonal: list[Cond] = [(v_(v) - v_(names[0]), "==", 0) for v in names[1:]]
            if diagonal:
                out.append((f"{lhs} == {rhs}, square (the program branches there)",
                            [(lhs - rhs, "==", 0), *diagonal, *full]))
            out.append((f"{lhs} == {rhs} (the program branches there)", [(lhs - rhs, "==", 0), *full]))
        for a in self.div_atoms:
            k = a.rhs.as_constant()
            r = a.lhs.mod(a.rhs)
            out.append((f"{r} == 0", [(r, "==", 0), *full]))
            if k is not None and abs(k) > 2:
                edge = k - 1 if k > 0 else k + 1
                out.append((f"{r} == {edge}", [(r, "==", edge), *full]))
            else:
                out.append((f"{r} != 0", [(r, "!=", 0), *full]))
        # distinct large values per variable, so that e.g. (a, b) is not sampled only on a == b
        large = {v: int(min(self.hi[v], self.lo[v] + _LARGE[i % len(_LARGE)])) for i, v in enumerate(self.shape_vars)}
        if self.shape_vars:
            out.append(("large", [(v_(v), "==", large[v]) for v in self.shape_vars]))
        biggest = self.largest()
        if biggest is not None:
            budget = (f"{self.max_work / 1e6:.0f}M intermediate elements" if self.work_bound else _mib(self.max_bytes))
            out.append((f"largest within {budget}", [(v_(v), "==", biggest[v]) for v in self.shape_vars]))
        for c in self.constraints:
            if c.kind == ">=":
                out.append((f"{c.text} tight", [(c.diff, "==", 0)]))
        for v in self.shape_vars:
            if math.isfinite(self.hi[v]):
                out.append((f"max {v}", [(v_(v), "==", int(self.hi[v]))]))
        if len(self.shape_vars) > 1:
            for v in self.shape_vars:
                out.append((f"{FILL_IN}min {v}, others large",
                            [(v_(w), "==", self.lo[w] if w == v else large[w]) for w in self.shape_vars]))
        for v in self.shape_vars:
            out.append((f"{FILL_IN}min {v}", [(v_(v), "==", self.lo[v])]))
            out.append((f"{FILL_IN}large {v}", [(v_(v), "==", large[v])]))
        for a in self.div_atoms:  # the residues between the edges: mod(E, k) == 1 .. k - 2
            k = a.rhs.as_constant()
            if k is not None and 3 < abs(k) <= 8:
                r = a.lhs.mod(a.rhs)
                for res in range(1, abs(k) - 1):
                    out.append((f"{FILL_IN}{r} == {res if k > 0 else -res}", [(r, "==", res if k > 0 else -res)]))
        return out

    def choose(self, n: int, seeds: Sequence[dict[str, int]] = (),
               fill: bool = True) -> list[tuple[dict[str, int], list[str]]]:
        """Up to ``n`` valuations with distinct shapes, each with the goals it covers; ``seeds`` first (the
        user's examples: valuations the constraints admit, within the byte budget, each once). ``fill``:
        make up ``n`` with the goals that decide nothing of their own (the other variables large, spread
        points); without it a sample is spent only where it decides something (each compile is most of
        a sample's cost), and goals a sample already meets ride on it."""
        chosen: list[tuple[dict[str, int], list[str]]] = []
        if not self.flat:
            return [({v: self.lo.get(v, 1) for v in self.vars}, ["static shapes"])]
        for env in seeds:
            env = {v: env.get(v, self.lo.get(v, 1)) for v in self.vars}
            fits = _holds([(d, ">=", 0) for d in self.flat], env) and self.nbytes(env) <= self.max_bytes
            if (len(chosen) < n and fits and self.constraints.holds(env)
                    and all(self.shapes(env) != self.shapes(e) for e, _ in chosen)):
                chosen.append((env, ["the example"]))
        for label, conds in self.goals():
            if len(chosen) >= n or (not fill and label.startswith(FILL_IN)):
                break
            label = label.removeprefix(FILL_IN)
            covered = [why for env, why in chosen if _holds(conds, env)]
            if covered:
                covered[0].append(label)
                continue
            env = self._fit(conds, [e for e, _ in chosen])
            if env is None and self.nonempty and label != NONEMPTY:  # no such edge with every array non-empty
                base = [c for c in conds if not (c[1] == ">=" and c[2] == 1 and c[0] in self._nonempty_set)]
                if len(base) < len(conds):
                    covered = [why for env, why in chosen if _holds(base, env)]
                    if covered:
                        covered[0].append(label)
                        continue
                    env = self._fit(base, [e for e, _ in chosen])
            if env is not None:
                chosen.append((env, [label]))
        for k in range(1, 4 * n):  # fill: spread over the region, then anything distinct
            if len(chosen) >= n or not fill:
                break
            for spread in (self._spread(k), [(Expr.var(v), "==", self.lo[v] + k) for v in self.shape_vars]):
                env = self._fit(spread, [e for e, _ in chosen])
                if env is not None:
                    chosen.append((env, ["spread"]))
                    break
        while fill and len(chosen) < n:
            env = self._fit([], [e for e, _ in chosen])
            if env is None:
                break  # the specification admits no more distinct shapes
            chosen.append((env, ["distinct"]))
        return chosen

    def _spread(self, k: int) -> list[Cond]:
        """The k-th point of a Halton sequence over ``lo .. lo + 64`` (capped by each maximum): each variable
        has its own base, so the points fill the box instead of a line, and their residues vary."""
        out: list[Cond] = []
        for i, v in enumerate(self.shape_vars):
            base, f, x, j = _HALTON[i % len(_HALTON)], 1.0, 0.0, k
            while j > 0:
                f /= base
                x += f * (j % base)
                j //= base
            span = _CAP_STEP if not math.isfinite(self.hi[v]) else max(0, min(_CAP_STEP, int(self.hi[v]) - self.lo[v]))
            out.append((Expr.var(v), "==", self.lo[v] + int(x * (span + 1))))
        return out

    def _fit(self, conds: list[Cond], avoid: list[dict[str, int]]) -> dict[str, int] | None:
        env = self._solve(self.session, conds, avoid)
        if env is not None and self.nbytes(env) > self.max_bytes:
            return None
        return env

    # -- a shape outside the specification ------------------------------------------------------------
    def is_outside(self, shapes: tuple[tuple[int, ...], ...]) -> bool:
        """Proven: no valuation meeting the constraints (and every variable >= 1) gives ``shapes``."""
        conds: list[Cond] = [
            (d, "==", s) for leaf, sl in zip(self.dims, shapes, strict=True) for d, s in zip(leaf, sl, strict=True)
        ]
        if any(e.is_constant and e.as_constant() != s for e, _, s in conds):
            return True
        conds = [c for c in conds if not c[0].is_constant]
        res = self.session.model(lambda enc: _encode(enc, conds), *(e for e, _, _ in conds), names=self.vars)
        return res.status == UNSAT

    def outside(self, samples: Sequence[dict[str, int]], limit: int = 3) -> list[tuple[tuple[tuple[int, ...], ...], str]]:
        """Shapes provably outside the spec: one per violated constraint, then one dimension of a sample perturbed."""
        found: list[tuple[tuple[tuple[int, ...], ...], str]] = []
        for c in self.constraints:
            if len(found) >= limit - 1:
                break
            others = session_for(ConstraintSet(tuple(x for x in self.constraints if x is not c)), self.session.budget, trial=True)
            # at the constraint's edge first (t = 65 for t <= 64, n = 39 for n >= 40): the shape a
            # person tries, and one the artifact's own shape check sees, not a size whose dimensions
            # go negative and fail to compile before any check runs
            edges: list[Cond] = [(c.diff, "==", -1)] if c.kind == ">=" else [(c.diff, "==", 1), (c.diff, "==", -1)]
            env = None
            for negated in [*edges, (c.diff, "<" if c.kind == ">=" else "!=", 0)]:
                env = self._solve(others, [negated], [])
                if env is not None:
                    break
            if env is not None and not c.holds(env):
                shapes = self.shapes(env)
                if self.is_outside(shapes) and shapes not in [f[0] for f in found]:
                    found.append((shapes, f"{format_valuation({v: env[v] for v in self.shape_vars})} violates {c.text}"))
        for env in samples:
            base = self.shapes(env)
            for i, leaf in enumerate(self.dims):
                for j, d in enumerate(leaf):
                    if d.is_constant and self.flat:
                        continue
                    for delta in (1, -1):
                        new = base[i][j] + delta
                        if new < 0:
                            continue
                        shapes = tuple(
                            tuple(new if (ii, jj) == (i, j) else s for jj, s in enumerate(sl)) for ii, sl in enumerate(base)
                        )
                        if self.is_outside(shapes):
                            found.append((shapes, f"input {i} dim {j} ({d}) of {base} set to {new}: no valuation gives it"))
                            return found
        return found



def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n / 1024:g} KiB"
