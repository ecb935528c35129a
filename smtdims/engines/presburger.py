"""The ``presburger`` rung: exact bounds and signs of small Presburger questions by ISL (islpy).

On the Presburger fragment (linear; ``floordiv``/``mod`` by nonzero constants; ``max``/``min``)
ISL computes the exact minimum and maximum of an expression over the integer points of the
constraints, and whether a sign condition can hold, with exact arithmetic, in about a
millisecond where Z3 needs a few checks. It is an optional accelerator
(``pip install "smtdims[isl]"``): without islpy, or when a question is not eligible, the ladder
goes on to Z3 exactly as before.

What is trusted, and what is checked:

- Each finite end comes with a witness (a known satisfying point that attains it, else ISL's
  sample point of ``{constraints, e == end}``), re-checked with exact Python arithmetic
  (constraints hold, ``e`` evaluates to the end). A witness that fails declines the answer.
- The ends must agree with what the ladder already knows: the proven interval contains them and
  no known satisfying point lies outside them; disagreement declines the answer (counted:
  ``stats()["presburger_declined"]``).
- That no valuation lies beyond an end, or meets a sign condition, is ISL's claim, as "unsat" is
  Z3's: two independent exact engines, compared with brute force and with each other by the
  test suite and ``tools/fuzz.py``. ``smtdims.options.set_defaults(presburger=False)`` turns the
  rung off.

Bounded time, in two tiers, as Z3's rlimit and the deadline are: ISL cannot be interrupted while
it runs (islpy holds the interpreter, so the deadline's watchdog would wait for it), and its
operation quota does not count everything (under the worker's quota, one call on a few dozen
constraints with nested mods can run for seconds).

1. In this process, under a small quota (``LOCAL_OPERATIONS``, deterministic) and on sets with at
   most ``LOCAL_DIVS`` local variables (deterministic too: where one ISL operation costs much, the
   quota stops it late): the common questions (those of ``benchmarks/bench_oracle.py`` fit under both
   limits, in a fraction of a millisecond each) are answered without a round trip to a process
   that, on a busy machine, first waits for a core. The limits are sized so that a call stays far
   from any deadline on a machine ten times slower (``tests/core/test_presburger.py`` bounds the worst
   CPU time of a call under both on random eligible questions; the quota alone does not keep it
   under that bound). Over either, the call is handed on.
2. In a worker process (:mod:`smtdims.engines._isl_worker`, started when first needed)
   under the full quota (``OPERATIONS`` there): a call that has not answered within
   ``CALL_LIMIT`` seconds, or by the question's deadline if that comes first, is abandoned: the
   worker is killed (a new one starts on the next call), ISL is not asked again in that scope,
   and the question goes to Z3 with what is left of its deadline.

Both tiers run the same code (:func:`smtdims.engines._isl_worker.handle`) and their answers are checked
alike. The rung takes only small questions (limits below).
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import threading
from collections import OrderedDict
from typing import Any

from .. import clocks, forking
from ..lang.constraints import ConstraintSet
from ..lang.expr import FLOORDIV, MAX, MIN, MOD, Expr, Op, Var
from . import workers

MAX_VARS = 12
MAX_PARTS = 16
MAX_CASES = 6  # max/min atoms: each a case split
MAX_DIVISIONS = 8  # floordiv/mod atoms: each an existential variable
MAX_DEPTH = 6  # nesting of operations
MAX_DIGITS = 1000  # constants are passed as decimal text (Python refuses str() past 4300 digits)
_DIGITS_LIMIT = 10**MAX_DIGITS
CALL_LIMIT = 1.0  # seconds one ISL call may take before it is abandoned
START_LIMIT = 10.0  # seconds for a worker to start (import islpy) before the rung gives up
_WORKER = workers.Worker("_isl_worker.py")
# ISL operations a call may take in this process: above what the common questions need (the
# domain's parse included), below the knee of the worst case. The quota does not bound time
# linearly: on a few variables under mod/floordiv constraints, doubling it from here multiplies the
# worst call's time by more than twenty, past the CPU bound of ``tests/core/test_presburger.py``
# (docs/performance.md, "Measurements behind constants").
LOCAL_OPERATIONS = 10_000
# Local (existential) variables a set may have in this process: where one ISL operation costs much, the
# quota stops it late, and with many local variables one ``max_val`` alone runs past the test's CPU
# bound before the quota ends it. The common questions have at most this many; over it, the call is
# handed on to the worker.
LOCAL_DIVS = 4
LOCAL = True  # tier 1 on (tests of the worker turn it off)


class LocalISL:
    """ISL in this process, under :data:`LOCAL_OPERATIONS` (see the module's docstring, tier 1).

    One thread at a time (an ISL context is not shared between threads): a call that finds it busy
    goes to the worker. islpy is imported on the first call: its import costs far more than an answer,
    and a program that asks nothing eligible never pays it."""

    def __init__(self) -> None:
        self.lock = forking.fork_safe(threading.Lock())
        self.engine: tuple[Any, Any, Any] | None = None  # (islpy, the worker's module, a context)
        self.broken = False
        self.domains: OrderedDict = OrderedDict()
        self.answered = self.handed_on = 0

    def call(self, request: dict) -> dict | None:
        """The answer, or None: over the quota (or ISL's error), busy in another thread, or no islpy."""
        if not LOCAL or self.broken or not self.lock.acquire(blocking=False):
            return None
        try:
            if self.engine is None:
                try:
                    import islpy

                    from . import _isl_worker
                except Exception:  # noqa: BLE001 - islpy that does not import: the worker alone (it says why)
                    self.broken = True
                    return None
                self.engine = (islpy, _isl_worker, islpy.Context())
            isl, worker, ctx = self.engine
            ctx.set_max_operations(LOCAL_OPERATIONS)  # read per call: a test may lower it
            try:
                answer = worker.handle(isl, ctx, self.domains, request, LOCAL_DIVS)
            except Exception:  # noqa: BLE001 - isl.Error (the quota, mostly) or a request it refuses
                self.handed_on += 1
                return None
            self.answered += 1
            return answer
        finally:
            self.lock.release()


_LOCAL = LocalISL()


def local_tier() -> LocalISL:
    """The process's in-process ISL (tier 1): tests and diagnostics read its ``answered`` and ``handed_on``."""
    return _LOCAL
_LEAST_ENTRIES = 10_000  # least-sum witnesses kept per constraint set


def worker() -> workers.Worker:
    """The process's ISL worker (one per process; tests and diagnostics read its ``kills``, ``proc``,
    ``generation`` and ``broken`` here rather than in module state)."""
    return _WORKER


def prestart() -> None:
    """Have the ISL worker's process starting now, without waiting for it (see
    :func:`smtdims.reasoner.prestart_workers`)."""
    if not available():
        return
    with _WORKER.lock:
        # none yet, or one that died since (the next call would pay its start)
        if not _WORKER.down and (_WORKER.proc is None or _WORKER.proc.poll() is not None):
            _WORKER.spawn()


_KEYS = itertools.count(1)  # domain keys, unique in the process (next() on a count is atomic in CPython)


# whether islpy is importable, looked up once (find_spec searches sys.path: too slow per question)
_INSTALLED: list[bool] = []


def available() -> bool:
    """islpy is installed in this interpreter, and its worker is not off (a failed start's back-off)."""
    if not _INSTALLED:
        _INSTALLED.append(importlib.util.find_spec("islpy") is not None)
    return _INSTALLED[0] and not _WORKER.down


def _time_left(clock: clocks.Deadline) -> tuple[float, float]:
    """Seconds for one call and for starting a worker: never past the question's deadline (``clock``)."""
    left = max(clock.remaining(), 0.0)
    return min(CALL_LIMIT, left), min(START_LIMIT, left)


def _ops(e: Expr, seen: set[Op]) -> tuple[int, int]:
    """(``max``/``min`` atoms, ``floordiv``/``mod`` atoms) of ``e`` not in ``seen`` (which grows)."""
    cases = divisions = 0
    for m, _ in e.terms:
        for a, _ in m:
            if isinstance(a, Op) and a not in seen:
                seen.add(a)
                cases += a.op in (MAX, MIN)
                divisions += a.op in (FLOORDIV, MOD)
                for x in (a.lhs, a.rhs):
                    c, d = _ops(x, seen)
                    cases, divisions = cases + c, divisions + d
    return cases, divisions


def _small(e: Expr, depth: int = 0) -> bool:
    """Shallow enough, and every constant short enough, for ISL's text syntax (stops at the limit)."""
    if depth > MAX_DEPTH:
        return False
    for m, c in e.terms:
        if abs(c) >= _DIGITS_LIMIT:
            return False
        for a, _ in m:
            if isinstance(a, Op) and not (_small(a.lhs, depth + 1) and _small(a.rhs, depth + 1)):
                return False
    return True


class Engine:
    """ISL's view of one constraint set: its integer set, sent to the worker once per variable list."""

    def __init__(self, constraints: ConstraintSet):
        self.constraints = constraints
        self.parts = constraints.parts()
        self._keys: dict[tuple[str, ...], int] = {}
        self._sent: dict[tuple[str, ...], int] = {}  # worker generation each domain was sent to
        self._local: set[tuple[str, ...]] = set()  # variable lists whose domain this process's ISL holds
        self.disabled = False  # ISL was late here once: Z3 answers the rest of this scope
        self._least: dict[tuple[Expr, int], dict[str, int]] = {}  # least-sum witnesses ISL gave with bounds
        seen: set[Op] = set()
        self._constraint_ops = [0, 0]
        for p in self.parts:
            c, d = _ops(p.diff, seen)
            self._constraint_ops[0] += c
            self._constraint_ops[1] += d
        self._seen = frozenset(seen)
        self._usable_parts = all(p.diff.is_linear() and _small(p.diff) for p in self.parts)

    def eligible(self, e: Expr, *, ignore_clock: bool = False) -> bool:
        if (self.disabled and not ignore_clock) or not e.is_linear() or len(self.parts) > MAX_PARTS \
                or not self._usable_parts:
            return False
        if len(self.constraints.variables() | e.variables()) > MAX_VARS or not _small(e):
            return False
        cases, divisions = _ops(e, set(self._seen))
        return (self._constraint_ops[0] + cases <= MAX_CASES
                and self._constraint_ops[1] + divisions <= MAX_DIVISIONS)

    def _ask(self, e: Expr, request: dict, clock: clocks.Deadline) -> tuple[dict, tuple[str, ...]] | None:
        """The worker's answer about ``e`` and the variable order of its points, or None."""
        names = tuple(sorted(self.constraints.variables() | e.variables()))
        alias = {n: f"v{i}" for i, n in enumerate(names)}  # ISL-safe names for any user name
        tup = ", ".join(alias[n] for n in names)
        key = self._keys.get(names)
        if key is None:
            key = self._keys[names] = next(_KEYS)
        index = {n: i for i, n in enumerate(names)}
        request = {**request, "key": key, "tup": tup, "tree": _tree(e, index), "dom": None}

        def domain() -> dict:
            # built through ISL's API from trees, as the expression is (a quarter of the text's parse)
            return {"n": len(names), "parts": [[_tree(p.diff, index), p.kind] for p in self.parts]}

        for _ in range(2):  # tier 1; once more, with the domain, if this process's ISL no longer holds it
            local = {**request, "dom": None if names in self._local else domain()}
            answer = _LOCAL.call(local)
            if answer is None:
                break  # over the quota: the worker
            if answer.get("missing"):
                self._local.discard(names)
                continue
            self._local.add(names)
            return None if "error" in answer else (answer, names)
        for _ in range(2):  # once more, with the domain, if the worker does not hold it
            if self._sent.get(names) != _WORKER.generation:
                request["dom"] = domain()
            answer, generation = _WORKER.call(request, *_time_left(clock), START_LIMIT)
            if answer is None:
                self.disabled = True
                return None
            if request["dom"] is not None:
                self._sent[names] = generation
            if not answer.get("missing"):
                return None if "error" in answer else (answer, names)
            self._sent.pop(names, None)
        return None

    def bounds(self, e: Expr, known: dict[int, dict[str, int]] | None = None, *, clock: clocks.Deadline,
               least: bool = False
               ) -> tuple[int | float, int | float, dict[str, int] | None, dict[str, int] | None] | None:
        """``(lo, hi, lo_witness, hi_witness)``, exact; None when ISL could not answer (in time).

        ``known`` maps values of ``e`` to satisfying valuations already at hand: an end that one
        of them attains needs no sample point from ISL. ``least``: the witness ISL gives for any
        other finite end is one with the least sum of the variables (kept for :meth:`least_witness`:
        a readable witness in the same call); ``known`` then holds only the caller's least-sum
        valuations (:meth:`smtdims.scope.ConstraintScope.least_of`), kept as ISL's are.
        """
        known = known or {}
        if not available() or not self.eligible(e):
            return None
        got = self._ask(e, {"op": "bounds", "known": sorted(known), "least": least}, clock)
        if got is None:
            return None
        answer, names = got
        lo, hi = _end(answer["lo"]), _end(answer["hi"])
        witnesses: list[dict[str, int] | None] = []
        for end, field in ((lo, "wlo"), (hi, "whi")):
            if _infinite(end):
                witnesses.append(None)
                continue
            pt = answer.get(field)
            from_isl = pt is not None and len(pt) == len(names)
            w = dict(zip(names, pt, strict=True)) if from_isl else known.get(int(end))
            if w is None or not self.constraints.holds(w) or e.evaluate(w) != end:
                return None  # never trust an end without a witness that re-evaluates exactly
            witnesses.append(w)
            if least and len(self._least) < _LEAST_ENTRIES:
                self._least[(e, int(end))] = w
        return lo, hi, witnesses[0], witnesses[1]

    def given_least(self, e: Expr, value: int) -> dict[str, int] | None:
        """The least-sum witness of ``e == value`` that ISL gave with the bounds of ``e``, if it did."""
        return self._least.get((e, value))

    def least_witness(self, e: Expr, value: int, *, clock: clocks.Deadline) -> dict[str, int] | None:
        """A valuation meeting the constraints where ``e == value``, with the least sum of the
        variables (readable witnesses, one ISL call); None when ISL could not answer. Re-checked
        exactly, like every point ISL gives."""
        hit = self._least.get((e, value))
        if hit is not None:
            return hit
        if not available() or not self.eligible(e):
            return None
        got = self._ask(e, {"op": "least", "value": str(value)}, clock)
        if got is None or got[0].get("point") is None or len(got[0]["point"]) != len(got[1]):
            return None
        w = dict(zip(got[1], got[0]["point"], strict=True))
        return w if self.constraints.holds(w) and e.evaluate(w) == value else None

    def conflict(self, *, clock: clocks.Deadline) -> tuple[dict[str, int] | None, list[str] | None] | None:
        """``(point, None)`` with a valuation meeting every constraint, or ``(None, core)`` with a
        minimal conflicting subset, labelled as :meth:`smtdims.engines.z3side.Z3Side.unsat_core`
        labels it (texts as written, ``'v >= 1 (dimension variable)'``); None when ISL could not
        answer. One round trip, the minimisation by deletion inside ISL's operation quota (through Z3,
        an unsatisfiable scope's error message costs a fresh context and a check per fact: an order of
        magnitude more on JAX's DimExprTest). The point is re-checked exactly; "no point" is
        ISL's proof, as "unsat" is Z3's."""
        cs = self.constraints
        if not available() or not self.eligible(Expr.const(0)):  # the constraints' own limits
            return None
        names = tuple(sorted(cs.variables()))
        alias = {n: f"v{i}" for i, n in enumerate(names)}
        labels = [c.text for c in cs] + [f"{n} >= 1 (dimension variable)" for n in names]
        facts = [" and ".join(f"{_text(p.diff, alias)} {'>=' if p.kind == '>=' else '='} 0" for p in c.parts())
                 or "true" for c in cs]
        facts += [f"{alias[n]} >= 1" for n in names]
        request = {"op": "conflict", "tup": ", ".join(alias[n] for n in names), "facts": facts}
        answer = _LOCAL.call(request)
        if answer is None:
            answer, _ = _WORKER.call(request, *_time_left(clock), START_LIMIT)
        if answer is None:
            self.disabled = True
            return None
        if "core" in answer:
            return None, [labels[i] for i in answer["core"]]
        pt = answer.get("point")
        if pt is None or len(pt) != len(names):
            return None
        w = dict(zip(names, pt, strict=True))
        return (w, None) if cs.holds(w) else None

    def point(self, *, clock: clocks.Deadline) -> tuple[dict[str, int] | None] | None:
        """``(valuation,)`` meeting every constraint, ``(None,)`` where ISL proved there is none, or
        None when ISL could not answer. The domain is built as the bounds' is (through ISL's API, kept
        for the questions after: a bounds question on the same variables does not build it again),
        a quarter of :meth:`conflict`'s cost, which parses every fact's text to name a conflict.
        The point is re-checked exactly; "none" is ISL's proof, as "unsat" is Z3's."""
        if not available() or not self.eligible(Expr.const(0)):
            return None
        got = self._ask(Expr.const(0), {"op": "point"}, clock)
        if got is None:
            return None
        pt, names = got[0].get("point"), got[1]
        if pt is None:
            return (None,)
        if len(pt) != len(names):
            return None
        w = dict(zip(names, pt, strict=True))
        return (w,) if self.constraints.holds(w) else None

    def satisfiable(self, e: Expr, rel: str, *, clock: clocks.Deadline) -> bool | None:
        """Whether some valuation meets the constraints and ``e rel 0`` (``rel`` in ``<``, ``>``, ``>=``).

        None when ISL could not answer. "No" is ISL's proof (as "unsat" is Z3's); "yes" only
        ever costs precision if wrong, never soundness: the ladder then proves nothing.
        """
        if not available() or not self.eligible(e):
            return None
        got = self._ask(e, {"op": "sat", "rel": rel}, clock)
        return None if got is None else bool(got[0]["sat"])


def clock_stopped(engine: Engine | None, constraints: ConstraintSet, e: Expr) -> bool:
    """Whether a clock kept ISL from answering ``e``, which it takes: its answer was late (in this
    question or earlier in the scope, after which the scope no longer asks), or the worker was
    slower than ``START_LIMIT`` to start. The ladder's answer is then the one a run without
    clocks gives only where it is exact (both ends tight); otherwise it is clock-shaped.
    """
    if not _INSTALLED or not _INSTALLED[0] or not (_WORKER.broken_by_clock or (engine and engine.disabled)):
        return False
    return (engine or Engine(constraints)).eligible(e, ignore_clock=True)


def _end(v: int | str) -> int | float:
    return math.inf if v == "inf" else -math.inf if v == "-inf" else int(v)


def _infinite(x: int | float) -> bool:
    return isinstance(x, float)  # ends are ints or +-inf; math.isinf(int) overflows past 1e308


def _text(e: Expr, alias: dict[str, str]) -> str:
    """ISL syntax for a linear ``e`` (every coefficient an integer literal, atoms parenthesised)."""
    parts = []
    for m, c in e.terms:
        if not m:
            parts.append(f"({c})")
            continue
        ((a, k),) = m
        assert k == 1, "not linear"
        parts.append(f"{c}*{_atom(a, alias)}")
    return "(" + (" + ".join(parts) if parts else "0") + ")"


def _tree(e: Expr, index: dict[str, int]) -> list:
    """``e`` as the worker builds it through ISL's API: ``[[coefficient, atom], ...]`` (a constant
    term's atom is None; coefficients and divisors as decimal text, exact at any size), an atom a
    variable's position or ``[op, lhs, rhs]`` (``rhs`` a divisor's text for floordiv and mod).
    Building costs about half of parsing the same expression's text."""
    out: list = []
    for m, c in e.terms:
        if not m:
            out.append([str(c), None])
            continue
        ((a, k),) = m
        assert k == 1, "not linear"
        out.append([str(c), _tree_atom(a, index)])
    return out


def _tree_atom(a: Var | Op, index: dict[str, int]) -> int | list:
    if isinstance(a, Var):
        return index[a.name]
    if a.op in (MAX, MIN):
        return [a.op, _tree(a.lhs, index), _tree(a.rhs, index)]
    d = a.rhs.as_constant()
    assert d, "a symbolic or zero divisor is not Presburger"
    return [a.op, _tree(a.lhs, index), str(d)]


def _atom(a: Var | Op, alias: dict[str, str]) -> str:
    if isinstance(a, Var):
        return alias[a.name]
    x = _text(a.lhs, alias)
    if a.op in (MAX, MIN):
        return f"{a.op}({x}, {_text(a.rhs, alias)})"
    d = a.rhs.as_constant()
    assert d, "a symbolic or zero divisor is not Presburger"
    # Python's floor division: x // d == floor(x / d) == floor(-x / -d); ISL's floor is exact
    if a.op == FLOORDIV:
        return f"floor({x}/{d})" if d > 0 else f"floor((-{x})/{-d})"
    assert a.op == MOD
    # ISL's "mod" by a positive constant is Python's %; x % d == -((-x) % -d) for d < 0.
    # (Each argument is written once: x - d*floor(x/d) would double the text per nesting level.)
    return f"({x} mod {d})" if d > 0 else f"(-((-{x}) mod {-d}))"
