#!/usr/bin/env python
"""Fuzz smtdims against brute force and ISL; optionally audit stock JAX the same way.

    python tools/fuzz.py --queries 100000 [--seed N] [--jobs 2] [--audit-stock]

Each generated case (``tests/strategies.py``) asks smtdims ``bounds`` and ``decide``
(2 queries), and -- with smtdims installed into JAX -- JAX's own questions at the seam:
``_bounds_decision`` at each precision, ``>= > <= <`` and ``max_dim``/``min_dim`` (up to 9
queries). Every answer is checked against brute force over a grid of valuations
(``tests/properties/oracle.py``); on the Presburger fragment, bounds and decisions must also equal
ISL's exact answers. A failing case is shrunk to a minimal reproducer and written to
``tests/properties/regressions/`` as JSON, which ``tests/properties/test_regressions.py`` replays (marked
``xfail(strict=True)`` until the bug is fixed: delete the ``"xfail"`` key then).

``--audit-stock`` runs the same cases through stock JAX (smtdims uninstalled) and counts
where stock is wrong (an answer a valuation contradicts), loose (wider bounds than
smtdims' verified ones) or inconclusive where smtdims decides.

Budgets: Presburger cases run with smtdims' default budget (exactness is claimed
there); nonlinear ones with ``--budget`` (a Z3 rlimit per check; default 30,000) so that
a long run stays fast. Soundness must hold at every budget.

Large inputs under a short deadline (issue 18): ``--large N --large-deadline 1`` asks every
public call about N large cases and counts each call past the deadline + 1 s.

Fresh process vs warmed-up process (issue 18)::

    python tools/fuzz.py --fresh-vs-warm N [--seed S] [--budget-scales 1,0.1] [--fvw-deadline 10]
                         [--time-limit SECONDS] [--report out.json]

asks N questions (``smtdims.bounds`` / ``smtdims.decide``, each one public call, about the normal
cases above and ``--fvw-large-share`` of large ones), each at smtdims' default budget times every
scale, twice: "fresh", each in its own fork of a server that imported smtdims and asked nothing; and
"warm", all in one process that first answers ``--fvw-warmup`` unrelated questions, then every
(question, budget) in a shuffled order with the budgets interleaved. Both sides use the same
deadline. ``differs`` counts answers that differ although both are deterministic (the defect count;
an error's example valuation is not compared), ``clock_shaped`` those where a side was cut by the
deadline (``deterministic=False``: allowed to differ); crashes, calls past the deadline + 1 s and
seconds per answer are reported too, with up to 20 replayable examples of each kind, and each
differing answer is replayed in fresh forks, after 5 unrelated ``z3.Context()`` (Z3's memory-layout
dependence) and after the warm process's earlier questions about the same constraints (``diagnosis``). Exit status 1 when ``differs`` or ``crashes`` is nonzero.

Names that are the solvers' own words (issue 42): ``--smt-names P`` (default 0.1) renames the
variables of that share of the cases above to words of ``SMT_WORDS`` (``true``, ``and``, ``let``,
``_``, ``div``, ``pi``, ISL's keywords...); ``--smt-names-compare N`` asks N cases with such names and
with plain names in the same texts and counts answers that contradict each other, and answers less
precise on one side (a misread name loses precision long before it makes an answer unsound, as
smtdims re-checks every model: the oracle alone would not see it).

Killed callers (issue 42)::

    python tools/fuzz.py --kill-callers N [--seed S]

starts N caller processes that make temporary directories (``smtdims.engines.tempdirs``) and ask a question
that keeps a Z3 (and ISL) worker busy, kills each with SIGKILL or SIGTERM at a random moment, and
counts workers still running 1 s later and directories left (after SIGKILL: once the next process
has swept). Exit status 1 when either is nonzero.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import re
import sys
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository's root, never tests/ (where tests/jax would pass for JAX)
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from tests import strategies as S  # noqa: E402
from tests.properties import oracle as O  # noqa: E402

REGRESSIONS = ROOT / "tests" / "properties" / "regressions"
# Problems worth a regression file: unsound answers, crashes, and inexactness on Presburger.
REPORTABLE = O.UNSOUND_KINDS | O.CRASH_KINDS | O.INEXACT_KINDS | O.TIME_KINDS | {"jax-warning"}
FAILURES = O.UNSOUND_KINDS | O.CRASH_KINDS | O.TIME_KINDS

# Dimension names that are words of the solvers' languages (issue 42.1): SMT-LIB's reserved words,
# commands and theory symbols (Core, Ints, Reals, Arrays, bit-vectors, strings), Z3's own functions,
# constants and answers, and ISL's keywords, each one a name the parser takes as one word. ``_`` and
# the operations' names are words jax.export refuses as dimension names: they go to smtdims' API only.
SMT_WORDS = tuple(sorted(set("""
    _ as let exists forall match par BINARY DECIMAL HEXADECIMAL NUMERAL STRING
    assert push pop reset exit echo check_sat declare_fun define_fun get_model minimize maximize simplify eval
    true false not and or xor distinct ite implies iff if
    Int Bool Real Array String Seq RegLan BitVec FloatingPoint div mod rem abs to_real to_int is_int divisible
    select store const concat extract bvadd bvmul str seq re lambda map default as_array card
    pi euler e oo epsilon root_obj sat unsat unknown model k x
    floor ceil min max infty NaN domain range floordiv
""".split())))
JAX_REFUSES = frozenset({"_", "mod", "min", "max", "floordiv"})  # jax.export's symbolic_shape does not take these


def _rename_poly(p: tuple, names: dict[str, str]) -> tuple:
    return S.normalize([(c, tuple(((names.get(a, a) if isinstance(a, str) else
                                    (a[0], _rename_poly(a[1], names), _rename_poly(a[2], names))), k) for a, k in m))
                        for c, m in p])


def word_names(case: S.Case, rng: random.Random, jax: bool) -> S.Case:
    """``case`` with its variables renamed to distinct words of SMT_WORDS (those jax.export takes,
    when JAX's answers are checked too): the same question, names that are the solvers' own words."""
    pool = [w for w in SMT_WORDS if w not in ("mod", "min", "max", "floordiv") and not (jax and w in JAX_REFUSES)]
    old = case.all_vars()
    names = dict(zip(old, rng.sample(pool, len(old)), strict=True))
    return S.Case(vars=tuple(names.get(v, v) for v in case.vars), expr=_rename_poly(case.expr, names),
                  constraints=tuple((_rename_poly(lhs, names), op, _rename_poly(rhs, names))
                                    for lhs, op, rhs in case.constraints),
                  op=case.op, rhs=_rename_poly(case.rhs, names), note=(case.note + " [smt-words]").strip())


# -- checking one case ----------------------------------------------------------------------
def check_case(case: S.Case, *, budget: int, jax: bool) -> O.Outcome:
    grid = O.Grid.of(case)
    try:
        return O.run_smtdims(case, grid, budget=None if case.presburger else budget, jax=jax)
    except Exception as err:  # the oracle itself must not stop a long run
        out = O.Outcome()
        out.add("oracle", [("oracle-error", f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=4)}")])
        return out


# -- shrinking ----------------------------------------------------------------------------------
def _poly_variants(p: tuple):
    """Simpler polynomials than ``p``, simplest first."""
    seen = set()

    def emit(q):
        key = S.render(q)
        if key not in seen and key != S.render(p):
            seen.add(key)
            return True
        return False

    for v in sorted(S.variables(p)):
        if emit(S.var(v)):
            yield S.var(v)
    for q in (S.const(0), S.const(1)):
        if emit(q):
            yield q
    if len(p) > 1:
        for i in range(len(p)):
            q = S.normalize([t for j, t in enumerate(p) if j != i])
            if emit(q):
                yield q
    for i, (c, m) in enumerate(p):
        for c2 in (1, -1, c // 2, 2 if c > 0 else -2):
            if c2 and abs(c2) < abs(c):
                q = S.normalize([(c2 if j == i else cc, mm) for j, (cc, mm) in enumerate(p)])
                if emit(q):
                    yield q
        for k, (a, e) in enumerate(m):
            if e > 1:
                m2 = tuple((aa, 1 if kk == k else ee) for kk, (aa, ee) in enumerate(m))
                q = S.normalize([(cc, m2 if j == i else mm) for j, (cc, mm) in enumerate(p)])
                if emit(q):
                    yield q
            if len(m) > 1:
                m2 = tuple(x for kk, x in enumerate(m) if kk != k)
                q = S.normalize([(cc, m2 if j == i else mm) for j, (cc, mm) in enumerate(p)])
                if emit(q):
                    yield q
            if not isinstance(a, str):
                op, x, y = a
                for repl in (x, y):
                    q = _substitute_poly(p, i, k, repl)
                    if emit(q):
                        yield q
                for x2 in _poly_variants(x):
                    q = _substitute_atom(p, i, k, (op, x2, y))
                    if q is not None and emit(q):
                        yield q
                for y2 in _poly_variants(y):
                    if op in S.DIV_OPS and S.as_constant(y2) == 0:
                        continue
                    q = _substitute_atom(p, i, k, (op, x, y2))
                    if q is not None and emit(q):
                        yield q


def _substitute_atom(p: tuple, i: int, k: int, atom) -> tuple:
    c, m = p[i]
    m2 = tuple((atom if kk == k else a, e) for kk, (a, e) in enumerate(m))
    return S.normalize([(cc, m2 if j == i else mm) for j, (cc, mm) in enumerate(p)])


def _substitute_poly(p: tuple, i: int, k: int, repl: tuple) -> tuple:
    """Replace factor k of term i (an atom, with its exponent) by the polynomial ``repl``."""
    c, m = p[i]
    rest = ((c, tuple(x for kk, x in enumerate(m) if kk != k)),)
    e = m[k][1]
    prod = rest
    for _ in range(e):
        prod = S.mul(prod, repl)
    others = [t for j, t in enumerate(p) if j != i]
    return S.normalize(others + list(prod))


def _case_variants(case: S.Case):
    for i in range(len(case.constraints)):
        yield S.Case(case.vars, case.expr, case.constraints[:i] + case.constraints[i + 1:], case.op, case.rhs)
    for q in _poly_variants(case.rhs):
        yield S.Case(case.vars, case.expr, case.constraints, case.op, q)
    for q in _poly_variants(case.expr):
        if q:
            yield S.Case(case.vars, q, case.constraints, case.op, case.rhs)
    for i, (l, op, r) in enumerate(case.constraints):
        for q in _poly_variants(l):
            if q:
                yield S.Case(case.vars, case.expr, case.constraints[:i] + ((q, op, r),) + case.constraints[i + 1:], case.op, case.rhs)
        for q in _poly_variants(r):
            yield S.Case(case.vars, case.expr, case.constraints[:i] + ((l, op, q),) + case.constraints[i + 1:], case.op, case.rhs)
    used = set(case.all_vars()) - set(case.vars)
    shown = tuple(v for v in case.vars if v in (S.variables(case.expr) | S.variables(case.rhs) | _cons_vars(case)))
    if shown != case.vars:
        yield S.Case(tuple(sorted(set(shown) | used)), case.expr, case.constraints, case.op, case.rhs)


def _cons_vars(case: S.Case) -> set[str]:
    out: set[str] = set()
    for l, _, r in case.constraints:
        out |= S.variables(l) | S.variables(r)
    return out


def _size(case: S.Case) -> int:
    return len(json.dumps(case.to_json()["expr"])) + len(json.dumps(case.to_json()["constraints"])) + len(
        json.dumps(case.to_json()["rhs"]))


def write_regression(case: S.Case, problem: tuple[str, str, str], *, seed: int, budget: int, jax: bool,
                     directory: Path = REGRESSIONS) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    body = case.to_json()
    digest = hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()[:10]
    q, kind, msg = problem
    path = directory / f"{kind}-{digest}.json"
    record = {
        "case": body,
        "query": q,
        "kind": kind,
        "message": msg,
        "jax": jax,
        "budget": budget,
        "found_by": f"tools/fuzz.py --seed {seed}",
        "xfail": f"open: {kind} found by the fuzz driver; remove this key once fixed",
    }
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


# -- stock JAX audit ---------------------------------------------------------------------------------
def stock_jax_answers(case: S.Case) -> O.JaxAnswers:
    """Stock JAX's answers (smtdims uninstalled; its JAX shim checks the seam is stock's)
    through the same builder the tests use (tests/properties/oracle.py: jax_answers)."""
    import smtdims_jax

    smtdims_jax.uninstall()
    assert not smtdims_jax.is_installed(), "stock JAX's decision procedure is not in place"
    return O.jax_answers(case)


def audit_stock(case: S.Case, grid: O.Grid, counts: collections.Counter, examples: dict) -> None:
    """Classify stock JAX's answers on ``case`` against brute force and smtdims."""
    import smtdims
    from smtdims.lang.constraints import ConstraintSet
    from smtdims.lang.parser import parse_expr
    from smtdims.reasoner import Session

    ja = stock_jax_answers(case)
    if ja.error is not None:
        if ja.error.startswith("CRASH"):
            counts["stock crashes building the case"] += 1
            _example(examples, "stock crashes building the case", case, ja.error)
        else:
            counts["stock refuses the case (parse/constraint form)"] += 1
        return
    probs = O.check_jax(case, grid, ja, unsound_prefix="stock")
    kinds = {k for k, _ in probs}
    for k, m in probs:
        _example(examples, k, case, m)
    for k in kinds:
        counts[k] += 1
    # smtdims on the same questions (API, not the seam), verified on the grid
    budget = None if case.presburger else ARGS_BUDGET[0]
    session = Session(ConstraintSet.of(case.constraint_texts), budget=budget)
    e, r = parse_expr(case.expr_text), parse_expr(case.rhs_text)
    stock_best = ja.bounds.get("BEST")
    if isinstance(stock_best, tuple):
        counts["bounds questions"] += 1
        try:
            b = session.bounds(e)
        except smtdims.SmtdimsError:
            b = None
        if b is not None and not O.check_bounds(case, grid, b):
            slo, shi = stock_best
            if "stock-unsound-bound" in kinds:
                counts["bounds: stock wrong, smtdims right"] += 1
            elif slo < b.lo or shi > b.hi:
                counts["bounds: stock loose, smtdims tighter"] += 1
                _example(examples, "bounds: stock loose, smtdims tighter", case,
                         f"stock ({slo}, {shi}) vs smtdims ({b.lo}, {b.hi})")
            elif slo > b.lo or shi < b.hi:
                counts["bounds: stock tighter than smtdims"] += 1
                _example(examples, "bounds: stock tighter than smtdims", case,
                         f"stock ({slo}, {shi}) vs smtdims ({b.lo}, {b.hi})")
            else:
                counts["bounds: same"] += 1
    for op, res in ja.compares.items():
        counts["comparison questions"] += 1
        if isinstance(res, BaseException):
            try:
                d = session.decide(e, op, r)
            except smtdims.SmtdimsError:
                continue
            if d.status in ("true", "false") and not O.check_decision(
                    S.Case(case.vars, case.expr, case.constraints, op, case.rhs), grid, d):
                counts["comparison: stock inconclusive, smtdims decides"] += 1
                _example(examples, "comparison: stock inconclusive, smtdims decides", case, f"{op}: {d.status}")


def _example(examples: dict, kind: str, case: S.Case, msg: str) -> None:
    lst = examples.setdefault(kind, [])
    if len(lst) < 3:
        lst.append({"case": case.describe(), "detail": msg[:300]})


ARGS_BUDGET = [30_000]


# -- workers: each check runs in a child process, so a slow or stuck query cannot stall the run --
def _outcome_to_dict(out: O.Outcome) -> dict:
    return {"queries": out.queries, "problems": out.problems, "exact_checked": out.exact_checked,
            "exact_ok": out.exact_ok, "statuses": out.statuses}


def _worker(conn, budget: int, jax: bool, audit: bool, deadline: float, presburger: bool = True) -> None:
    ARGS_BUDGET[0] = budget
    from smtdims import options

    # every query's wall limit (checked by the oracle); --no-presburger: Z3 answers what ISL would
    options.set_defaults(deadline=deadline, presburger=presburger)
    if jax and not audit:
        import smtdims

        smtdims.install(budget=budget)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        case = S.Case.from_json(msg)
        t = time.time()
        if audit:
            counts: collections.Counter = collections.Counter()
            examples: dict = {}
            try:
                audit_stock(case, O.Grid.of(case), counts, examples)
            except Exception as err:
                counts["audit errors"] += 1
                _example(examples, "audit errors", case, f"{type(err).__name__}: {err}")
            conn.send({"counts": dict(counts), "examples": examples, "seconds": time.time() - t})
        else:
            res = _outcome_to_dict(check_case(case, budget=budget, jax=jax))
            res["seconds"] = time.time() - t
            conn.send(res)


class Pool:
    """``jobs`` worker processes; ``timeout`` seconds per case, after which the worker is replaced."""

    def __init__(self, jobs: int, budget: int, jax: bool, audit: bool, timeout: float, deadline: float,
                 presburger: bool = True):
        import multiprocessing as mp

        self.ctx = mp.get_context("spawn")
        self.args = (budget, jax, audit, deadline, presburger)
        self.timeout = timeout
        self.workers = [self._start() for _ in range(jobs)]

    def _start(self):
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker, args=(child, *self.args), daemon=True)
        proc.start()
        return {"proc": proc, "conn": parent, "task": None, "deadline": None}

    def _restart(self, w: dict) -> None:
        w["proc"].kill()
        w["proc"].join()
        w.update(self._start())

    def idle(self):
        return [w for w in self.workers if w["task"] is None]

    def submit(self, w: dict, case: S.Case, tag=None) -> None:
        w["conn"].send(case.to_json())
        w["task"] = (case, tag)
        w["deadline"] = time.time() + self.timeout

    def collect(self, wait: float = 1.0):
        """Finished tasks as ``(case, tag, result or None on timeout/death)``."""
        from multiprocessing.connection import wait as mp_wait

        busy = [w for w in self.workers if w["task"] is not None]
        if not busy:
            return []
        ready = mp_wait([w["conn"] for w in busy], timeout=wait)
        done = []
        for w in busy:
            case, tag = w["task"]
            if w["conn"] in ready:
                try:
                    res = w["conn"].recv()
                except EOFError:  # the worker died (a crash inside Z3?)
                    res = {"died": True}
                    self._restart(w)
                done.append((case, tag, res))
                w["task"] = None
            elif time.time() > w["deadline"] or not w["proc"].is_alive():
                res = {"timeout": self.timeout} if w["proc"].is_alive() else {"died": True}
                self._restart(w)
                done.append((case, tag, res))
                w["task"] = None
        return done

    def run_one(self, case: S.Case) -> dict:
        w = self.idle()[0] if self.idle() else self.workers[0]
        while w["task"] is not None:  # pragma: no cover - callers drain first
            self.collect()
        self.submit(w, case)
        while True:
            for c, _, res in self.collect():
                return res

    def close(self) -> None:
        for w in self.workers:
            try:
                w["conn"].send(None)
            except (BrokenPipeError, OSError):
                pass
        for w in self.workers:
            w["proc"].join(timeout=5)
            if w["proc"].is_alive():
                w["proc"].kill()


def _targets(res: dict) -> set[tuple[str, str]]:
    return {(q, k) for q, k, _ in res.get("problems", []) if k in REPORTABLE}


def shrink_remote(pool: Pool, case: S.Case, target: tuple[str, str], time_limit: float) -> S.Case:
    """Greedy shrinking: the first simpler variant that still shows the ``(query, kind)`` problem wins."""
    t0 = time.time()
    improved = True
    while improved and time.time() - t0 < time_limit:
        improved = False
        for cand in _case_variants(case):
            if time.time() - t0 > time_limit:
                break
            if _size(cand) >= _size(case) and len(cand.constraints) >= len(case.constraints) and cand.vars == case.vars:
                continue
            if target in _targets(pool.run_one(cand)):
                case, improved = cand, True
                break
    return case


# -- the driver -------------------------------------------------------------------------------------------
def run(args) -> dict:
    ARGS_BUDGET[0] = args.budget
    rng = random.Random(args.seed)
    # --smt-names: names drawn apart, so a seed's cases are the same questions with or without it
    names_rng = random.Random(args.seed ^ 0x5EED)
    cfg = S.GenConfig()
    # --nonlinear-share: that share of cases is nonlinear (products, symbolic divisors)
    cfg_lin, cfg_nl = S.GenConfig(linear=True), S.GenConfig(linear=False)
    jax_on = not args.no_jax
    pool = Pool(args.jobs, args.budget, jax_on, args.audit_stock, args.case_timeout, args.deadline,
                not args.no_presburger)
    counts: collections.Counter = collections.Counter()
    statuses: collections.Counter = collections.Counter()
    problems: collections.Counter = collections.Counter()
    examples: dict = {}
    written: list[str] = []
    seen_targets: set[tuple[str, str]] = set()
    exact_checked = exact_ok = 0
    cases = 0
    t0 = last = time.time()
    case_seconds: list[float] = []

    def out_of_time() -> bool:
        return bool(args.time_limit) and time.time() - t0 > args.time_limit

    try:
        while True:
            more = counts["queries"] < args.queries and not out_of_time()
            if more:
                for w in pool.idle():
                    if args.nonlinear_share is None:
                        case = S.random_case(rng, cfg)
                    else:
                        case = S.random_case(rng, cfg_nl if rng.random() < args.nonlinear_share else cfg_lin)
                    if names_rng.random() < args.smt_names:
                        case = word_names(case, names_rng, jax_on)
                        counts["cases named with SMT/Z3 words"] += 1
                    cases += 1
                    pool.submit(w, case)
            done = pool.collect()
            if not done and not more and not pool.idle() == pool.workers:
                continue
            for case, _, res in done:
                if "timeout" in res or "died" in res:
                    kind = "slow-case" if "timeout" in res else "worker-died"
                    problems[kind] += 1
                    counts["cases skipped (timeout/died)"] += 1
                    _example(examples, kind, case, f"no answer within {args.case_timeout}s" if kind == "slow-case" else "worker process died")
                    continue
                case_seconds.append(res["seconds"])
                if args.audit_stock:
                    counts.update(res["counts"])
                    counts["queries"] += 11  # stock: bounds x3, compares x4, max/min x2; smtdims: bounds, decide
                    for k, lst in res["examples"].items():
                        for ex in lst:
                            if len(examples.setdefault(k, [])) < 3:
                                examples[k].append(ex)
                    continue
                counts["queries"] += res["queries"]
                counts["presburger cases"] += case.presburger
                counts["nonlinear cases"] += not case.presburger
                counts["nonlinear queries" if not case.presburger else "presburger queries"] += res["queries"]
                exact_checked += res["exact_checked"]
                exact_ok += res["exact_ok"]
                statuses.update(res["statuses"])
                for q, k, m in res["problems"]:
                    problems[k] += 1
                    _example(examples, k, case, f"{q}: {m}")
                for target in sorted(_targets(res)):
                    if target in seen_targets and not args.shrink_all:
                        continue
                    seen_targets.add(target)
                    while pool.idle() != pool.workers:  # drain before shrinking
                        for c2, _, r2 in pool.collect():
                            done.append((c2, None, r2))
                    small = shrink_remote(pool, case, target, args.shrink_time)
                    again = pool.run_one(small)
                    prob = next((tuple(p) for p in again.get("problems", []) if (p[0], p[1]) == target), None)
                    if prob is None:
                        small = case
                        prob = next(tuple(p) for p in res["problems"] if (p[0], p[1]) == target)
                    if not args.no_write:
                        path = write_regression(small, prob, seed=args.seed, budget=args.budget, jax=jax_on,
                                                directory=Path(args.out))
                        written.append(str(path))
                    print(f"[fuzz] {target[1]} in {target[0]}: {prob[2][:200]}\n        shrunk: {small.describe()[:300]}",
                          flush=True)
            if time.time() - last > args.progress:
                last = time.time()
                el = last - t0
                print(f"[fuzz] {cases} cases, {counts['queries']} queries, {el:.0f}s, {counts['queries'] / el:.1f} q/s, "
                      f"problems {dict(problems)}", flush=True)
            if not more and pool.idle() == pool.workers:
                break
    finally:
        pool.close()
    elapsed = time.time() - t0
    unsound = sum(v for k, v in problems.items() if k in O.UNSOUND_KINDS)
    crashes = sum(v for k, v in problems.items() if k in O.CRASH_KINDS | {"worker-died"})
    past_deadline = sum(v for k, v in problems.items() if k in O.TIME_KINDS | {"slow-case"})
    if args.seam_big and not args.audit_stock:
        seam = seam_big(args.seam_big, args.seed, args.deadline)
        unsound += seam["unsound"]
        crashes += seam["crashes"]
        past_deadline += seam["past_deadline"]
        counts["queries"] += seam["queries"]
        for k, lst in seam["examples"].items():
            examples.setdefault(k, []).extend(lst[:3])
    case_seconds.sort()
    report = {
        "mode": "audit-stock" if args.audit_stock else "smtdims",
        "seed": args.seed,
        "jobs": args.jobs,
        "budget_nonlinear": args.budget,
        "cases": cases,
        "queries": counts["queries"],
        "seconds": round(elapsed, 1),
        "queries_per_second": round(counts["queries"] / elapsed, 2) if elapsed else None,
        "case_seconds_median_p99_max": [round(case_seconds[len(case_seconds) // 2], 3),
                                        round(case_seconds[int(len(case_seconds) * 0.99)], 3),
                                        round(case_seconds[-1], 3)] if case_seconds else None,
        "counts": dict(counts),
    }
    if not args.audit_stock:
        report.update({
            "unsound_answers": unsound,
            "crashes": crashes,
            "past_deadline": past_deadline,
            "deadline_seconds": args.deadline,
            "presburger_rung": not args.no_presburger,
            "problems": dict(problems),
            "presburger_queries_checked_exactly": exact_checked,
            "presburger_exact": exact_ok,
            "exactness_percent": round(100 * exact_ok / exact_checked, 3) if exact_checked else None,
            "statuses": dict(statuses),
            "regressions_written": written,
        })
    report["examples"] = examples
    return report


# -- large magnitudes at the seam ----------------------------------------------------------------------
_MAGNITUDES = (2**31 - 2, 2**31, 2**32 - 2, 2**32, 2**32 + 3, 2**52 + 1, 2**53 - 3, 2**53, 2**53 + 5, 2**62)


def seam_case(rng: random.Random) -> dict:
    """A question whose numbers sit where a float would round: variables far from 1, products."""
    names = ["a", "b", "c", "d"][: rng.randint(2, 4)]
    base = {v: rng.choice(_MAGNITUDES) + rng.randint(-3, 3) for v in names}
    cons, box = [], {}
    for v in names:
        if rng.random() < 0.5:
            cons.append(f"{v} >= {base[v]}")
            box[v] = range(base[v], base[v] + 4)
        else:
            cons.append(f"{v} <= {base[v]}")
            cons.append(f"{v} >= {base[v] - 3}")
            box[v] = range(base[v] - 3, base[v] + 1)
    x, y = rng.sample(names, 2)
    k = rng.choice((3, 65535, 2**16 + 1, 2**31 - 1))
    if rng.random() < 0.3:
        cons.append(f"{3 * k}*{x} <= {k * k}*{y} + {rng.randint(0, 9)}")
    lo_x, lo_y = min(box[x]), min(box[y])
    kind = rng.choice(("product", "floordiv", "scaled", "difference"))
    if kind == "product" and len(names) >= 4:
        u, w = [n for n in names if n not in (x, y)][:2]
        lhs, rhs = f"{x}*{y}", f"{u}*{w}"
    elif kind == "floordiv":
        m = rng.choice((2**32, 2**31, 2**53))
        lhs, rhs = f"floordiv({x}*{y}, {m})", str((lo_x * lo_y) // m + rng.randint(-1, 1))
    elif kind == "scaled":
        lhs, rhs = f"{k}*{x}", f"{k}*{y} + {rng.randint(-2, 2)}"
    else:
        lhs, rhs = f"{x}*{y} - {k}*{x}", str(lo_x * lo_y - k * lo_x + rng.randint(-1, 1))
    return {"constraints": cons, "lhs": lhs, "rhs": rhs, "box": {v: (r.start, r.stop) for v, r in box.items()}}


def seam_big(n: int, seed: int, deadline: float) -> dict:
    """Ask JAX (smtdims installed) bounds, comparisons and max/min on :func:`seam_case`s; judge each
    answer on every valuation of a 4^k box around the constants that meets the constraints."""
    import itertools

    from jax import export
    from smtdims_jax import jax_internals as jx

    import smtdims
    from smtdims import options
    from smtdims.lang.constraints import ConstraintSet
    from smtdims.lang.parser import parse_expr

    options.set_defaults(deadline=deadline)
    smtdims.install()
    rng = random.Random(f"seam-big-{seed}")
    out = {"cases": 0, "queries": 0, "unsound": 0, "crashes": 0, "past_deadline": 0, "examples": {}}

    def bad(kind: str, case: dict, msg: str) -> None:
        out[kind] += 1
        out["examples"].setdefault(f"seam-{kind}", []).append(f"{case['constraints']} | {case['lhs']} vs {case['rhs']}: {msg}")

    try:
        for _ in range(n):
            case = seam_case(rng)
            out["cases"] += 1
            cs = ConstraintSet.of(case["constraints"])
            e = parse_expr(case["lhs"]) - parse_expr(case["rhs"])
            names = sorted(case["box"])
            pts = [dict(zip(names, p)) for p in itertools.product(*(range(*case["box"][v]) for v in names))]
            values = [e.evaluate(p) for p in pts if cs.holds(p)]
            try:
                scope = export.SymbolicScope(tuple(case["constraints"]))
                lhs, = export.symbolic_shape(case["lhs"], scope=scope)
                rhs, = export.symbolic_shape(case["rhs"], scope=scope)
            except ValueError as err:  # JAX refuses the scope (e.g. unsatisfiable constraints)
                if values and "nsatisfiable" in str(err):
                    bad("unsound", case, f"building: claimed unsatisfiable: {err}")
                continue
            except Exception as err:
                bad("crashes", case, f"building: {type(err).__name__}: {err}")
                continue
            for q, ask in (("bounds", lambda: jx.jax_bounds(lhs - rhs)),
                           (">=", lambda: lhs >= rhs), ("<", lambda: lhs < rhs),
                           ("max", lambda: jx.max_dim(lhs, rhs))):
                out["queries"] += 1
                t = time.monotonic()
                try:
                    ans = ask()
                except jx.InconclusiveDimensionOperation:
                    ans = None
                except ValueError as err:
                    if "nsatisfiable" not in str(err):
                        bad("crashes", case, f"{q}: {type(err).__name__}: {err}")
                    elif values:  # a refusal, but a point of the box meets every constraint
                        bad("unsound", case, f"{q}: claimed unsatisfiable: {err}")
                    continue
                except Exception as err:
                    bad("crashes", case, f"{q}: {type(err).__name__}: {err}")
                    continue
                finally:
                    if time.monotonic() - t > deadline + O.DEADLINE_SLACK:
                        bad("past_deadline", case, f"{q}: {time.monotonic() - t:.1f} s")
                if ans is None or not values:
                    continue
                if q == "bounds" and not all(ans[0] <= v <= ans[1] for v in values):
                    bad("unsound", case, f"bounds {ans} miss {min(values)}..{max(values)}")
                elif q == ">=" and ans is True and any(v < 0 for v in values):
                    bad("unsound", case, f">= answered True; min value {min(values)}")
                elif q == ">=" and ans is False and any(v >= 0 for v in values):
                    bad("unsound", case, f">= answered False; max value {max(values)}")
                elif q == "<" and ans is True and any(v >= 0 for v in values):
                    bad("unsound", case, f"< answered True; max value {max(values)}")
                elif q == "<" and ans is False and any(v < 0 for v in values):
                    bad("unsound", case, f"< answered False; min value {min(values)}")
                elif q == "max":
                    m = parse_expr(str(ans).replace(" ", "")) if not isinstance(ans, int) else None
                    for p in pts:
                        if cs.holds(p):
                            want = max(parse_expr(case["lhs"]).evaluate(p), parse_expr(case["rhs"]).evaluate(p))
                            got = ans if m is None else m.evaluate(p)
                            if got != want:
                                bad("unsound", case, f"max_dim gave {ans}: {got} != {want} at {p}")
                                break
    finally:
        smtdims.uninstall()
    return out


# -- large inputs under a short deadline (issue 18.1) ----------------------------------------------------
# Every public call must return within its deadline + 1 s however large the input: powers up to
# 500, sums of 1,000 variables, 500 constraints, nested divisions, nonlinear checks that Z3 does
# not stop at the interrupt. The answers are judged too, at a few satisfying points.
LARGE_KINDS = ("power", "sum", "constraints", "divisions", "nonlinear")
LARGE_SLACK = 1.0  # seconds past the deadline that count as "within it"


def large_case(rng: random.Random, kind: str | None = None) -> dict:
    """One large question: ``{"kind", "expr", "constraints"}`` (texts in jax.export syntax)."""
    kind = kind or rng.choice(LARGE_KINDS)
    cons: list[str] = []
    if kind == "power":
        names = rng.sample(["a", "b", "c"], rng.choice((1, 2, 2, 2, 3)))
        parts = [f"{rng.choice(('', '-'))}{rng.choice(('', '2*', '3*'))}{v}" for v in names]
        if rng.random() < 0.5:
            parts.append(str(rng.randint(-5, 5)))
        base = " + ".join(parts).replace("+ -", "- ")
        # t terms expand to C(n + t - 1, t - 1) terms: kept under the expansion limit of 20,000
        n = rng.randint(2, {1: 500, 2: 500, 3: 190, 4: 45}[len(parts)])
        tail = rng.choice(("", " + c", " - c*a", " + a*b*c", " - 3*d"))
        e = f"({base})^{n}{tail}"
        if rng.random() < 0.3:
            cons = [f"a <= {rng.randint(1, 50)}"]
    elif kind == "sum":
        n = rng.choice((100, 500, 1000, 1000))
        e = "".join((" - " if i % 2 else (" + " if i else "")) + f"x{i}" for i in range(n))
        if rng.random() < 0.5:
            e += " - 3*y"
        if rng.random() < 0.6:
            cons = [f"x0 <= {rng.randint(1, 9)}"]
        if rng.random() < 0.2:
            cons += [f"x{i} >= x{i + 1}" for i in range(0, n - 1, max(1, n // 50))]
    elif kind == "constraints":
        n = rng.choice((100, 300, 500))
        cons = []
        for i in range(n):
            r = rng.random()
            if r < 0.5:
                cons.append(f"v{i + 1} >= v{i} + {rng.randint(0, 3)}")
            elif r < 0.7:
                cons.append(f"v{i} <= {rng.randint(5, 10**6)}")
            elif r < 0.85:
                cons.append(f"mod(v{i} + v{i + 1}, {rng.randint(2, 7)}) == {rng.randint(0, 1)}")
            else:
                cons.append(f"2*v{i} + 3*v{rng.randint(0, n)} >= {rng.randint(1, 50)}")
        e = " + ".join(f"{rng.randint(-5, 5) or 1}*v{rng.randint(0, n)}" for _ in range(rng.randint(1, 8)))
    elif kind == "divisions":
        depth = rng.randint(3, 40)
        e = rng.choice(("a", "b", "a + b"))
        for _ in range(depth):
            op = rng.choice(("floordiv", "mod", "max", "min"))
            d = rng.choice((str(rng.randint(2, 9)), f"b + {rng.randint(0, 3)}", f"a + c + {rng.randint(0, 3)}"))
            e = f"{op}({e} + {rng.choice(('a', 'c', '1', '2*b'))}, {d})"
        if rng.random() < 0.5:
            cons = [f"floordiv(a + b, c + 1) >= {rng.randint(0, 3)}"]
    else:  # nonlinear: checks Z3 may run past its interrupt
        cons = rng.choice((
            ["mod(b, b + 2) == 2", "floordiv(3*b + a - 2, 2*c - 3) == 3*a - 2*c - 4"],
            ["a*b >= c*c + 1", f"floordiv(a*c, b + 1) <= {rng.randint(3, 30)}"],
            [f"mod(a*b, c + 2) == {rng.randint(0, 1)}", "a <= b"],
        ))
        e = rng.choice(("floordiv(a - 3, a - 2)", "a*b - c^2", "(a^3 + b^3 - c^3)^2", "mod(a*b*c, b + 5)",
                        "floordiv(a*b, c + 1) - a"))
    return {"kind": kind, "expr": e, "constraints": cons}


def large_questions(case: dict) -> list[tuple[str, object]]:
    """The public calls asked about one large case: (name, thunk)."""
    import smtdims

    e, cons = case["expr"], case["constraints"]
    return [
        ("bounds", lambda: smtdims.bounds(e, constraints=cons)),
        ("decide", lambda: smtdims.decide(e, ">=", "1", constraints=cons)),
        ("explain", lambda: smtdims.explain(e, "<=", "7", constraints=cons)),
        ("check_constraints", lambda: smtdims.check_constraints(cons) if cons else None),
    ]


def large_jax_questions(case: dict) -> list[tuple[str, object]]:
    """The answers JAX gets at the seam (smtdims installed): ``>=`` and bounds of a symbolic dimension.

    JAX builds the dimension itself (not timed). Powers are left out: jax.export's parser has no
    ``^`` (and JAX's polynomial arithmetic takes seconds on a power past 60 before smtdims is asked).
    """
    from jax import export
    from smtdims_jax import jax_internals as jx

    if "^" in case["expr"] or any("^" in c for c in case["constraints"]):
        return []  # jax.export's parser has no power operator (and JAX's own expansion takes seconds)
    scope = export.SymbolicScope(tuple(case["constraints"]))
    d, = export.symbolic_shape(case["expr"], scope=scope)
    return [("jax >=", lambda: d >= 1), ("jax bounds", lambda: jx.jax_bounds(d))]


def _points_of(case: dict, rng: random.Random, tries: int = 200) -> list[dict[str, int]]:
    from smtdims.lang.constraints import ConstraintSet
    from smtdims.lang.parser import parse_expr

    cs = ConstraintSet.of(case["constraints"])
    names = sorted(set(cs.variables()) | parse_expr(case["expr"]).variables())
    out = []
    for _ in range(tries):
        p = {v: rng.choice((1, 1, 2, 3, rng.randint(1, 40))) for v in names}
        try:
            if cs.holds(p):
                out.append(p)
        except ZeroDivisionError:
            continue
        if len(out) >= 8:
            break
    return out


def large_run(n: int, seed: int, deadline: float, jax: bool, time_limit: float = 0) -> dict:
    """Ask every public call about ``n`` large cases under ``deadline``; count calls past deadline + 1 s.

    An answer is also judged at a few satisfying points found by sampling (bounds contain the
    value, a True/False decision holds there): no wrong answer is allowed under any deadline.
    """
    import smtdims
    from smtdims import options
    from smtdims.lang.parser import parse_expr

    options.set_defaults(deadline=deadline)
    if jax:
        smtdims.install()
    rng = random.Random(f"large-{seed}")
    out: dict = {"cases": 0, "queries": 0, "past_deadline": 0, "max_seconds": 0.0, "unsound": 0, "crashes": 0,
                 "refused": 0, "by_kind": {}, "examples": {}}
    start = time.monotonic()

    def note(kind: str, case: dict, msg: str) -> None:
        out[kind] += 1
        ex = out["examples"].setdefault(kind, [])
        if len(ex) < 10:
            ex.append(f"[{case['kind']}] {case['expr'][:120]} | {case['constraints'][:4]}: {msg}")

    try:
        for _ in range(n):
            if time_limit and time.monotonic() - start > time_limit:
                break
            case = large_case(rng)
            out["cases"] += 1
            k = out["by_kind"].setdefault(case["kind"], {"queries": 0, "past_deadline": 0, "max_seconds": 0.0})
            try:
                e = parse_expr(case["expr"])
            except smtdims.ParseError as err:  # an expansion past the limit: a clear refusal
                out["refused"] += 1
                if "expands to" not in str(err):
                    note("crashes", case, f"parse: {err}")
                continue
            pts = _points_of(case, rng)
            values = []
            for p in pts:
                try:
                    values.append(e.evaluate(p))
                except (ZeroDivisionError, KeyError):
                    pass
            qs = large_questions(case)
            if jax:
                try:
                    qs += large_jax_questions(case)
                except Exception as err:  # JAX refuses the scope or the text
                    note("crashes", case, f"jax building: {type(err).__name__}: {err}")
            for name, ask in qs:
                out["queries"] += 1
                k["queries"] += 1
                t = time.monotonic()
                try:
                    ans = ask()
                except (smtdims.PossibleDivisionByZeroError, smtdims.UnsatisfiableConstraintsError):
                    ans = None
                except Exception as err:
                    if any(c.__name__ == "InconclusiveDimensionOperation" for c in type(err).__mro__):
                        ans = None
                    else:
                        note("crashes", case, f"{name}: {type(err).__name__}: {str(err)[:300]}")
                        continue
                finally:
                    took = time.monotonic() - t
                    out["max_seconds"] = max(out["max_seconds"], round(took, 2))
                    k["max_seconds"] = max(k["max_seconds"], round(took, 2))
                    if took > deadline + LARGE_SLACK:
                        k["past_deadline"] += 1
                        note("past_deadline", case, f"{name}: {took:.2f} s")
                if ans is None or not values:
                    continue
                if name in ("bounds", "jax bounds"):
                    lo, hi = (ans.lo, ans.hi) if name == "bounds" else ans
                    if not all(lo <= v <= hi for v in values):
                        note("unsound", case, f"{name} {lo}..{hi} misses {min(values)}..{max(values)}")
                elif name == "decide" and ans.status in ("true", "false"):
                    if any((v >= 1) != (ans.status == "true") for v in values):
                        note("unsound", case, f"decide >= 1 said {ans.status}; values {min(values)}..{max(values)}")
                elif name == "jax >=" and isinstance(ans, bool):
                    if any((v >= 1) != ans for v in values):
                        note("unsound", case, f"jax >= 1 said {ans}; values {min(values)}..{max(values)}")
    finally:
        if jax:
            smtdims.uninstall()
    return out


# -- fresh process vs warmed-up process (issue 18) -------------------------------------------------------
# The same question must get the same answer in a process that has done nothing else ("fresh": a
# fork of a pristine server that imported smtdims and asked nothing) and in one that has answered
# many other questions first ("warm"), at every budget. Answers the deadline cut (deterministic=False)
# may differ: they are counted apart, as clock-shaped.
FVW_SCALES = (1.0, 0.1)
FVW_HANG_SLACK = 60.0  # seconds past the deadline after which an answer counts as a hang (a crash)
FVW_EXAMPLES = 20
FVW_BIG_TEXT = 200  # ends longer than this many digits are compared by digest
FVW_PRELUDE = 50  # at most this many earlier questions are replayed by the diagnosis
FVW_JUNK = 5  # unrelated z3.Context() made before a diagnosis replay (tests/core/test_budget.py's history query)


def _fvw_limit(q: dict) -> float:
    """Seconds after which the answer to ``q`` (and its prelude) counts as hung."""
    return (1 + len(q.get("prelude", ()))) * (q["deadline"] + LARGE_SLACK) + FVW_HANG_SLACK


def fvw_questions(n: int, seed: int, large_share: float = 0.1) -> list[dict]:
    """``n`` questions (one public call each, no budget yet): ``bounds`` and ``decide`` about cases of
    ``tests/strategies.py`` (the normal mode's mix) and, for ``large_share`` of the cases, ``large_case``."""
    rng = random.Random(f"fvw-{seed}")
    cfg = S.GenConfig()
    out: list[dict] = []
    while len(out) < n:
        if rng.random() < large_share:
            lc = large_case(rng)
            base = {"source": f"large-{lc['kind']}", "expr": lc["expr"], "constraints": list(lc["constraints"])}
            calls = [("bounds", None, None), ("decide", ">=", "1")]
        else:
            case = S.random_case(rng, cfg)
            base = {"source": "presburger" if case.presburger else "nonlinear", "expr": case.expr_text,
                    "constraints": list(case.constraint_texts)}
            calls = [("bounds", None, None), ("decide", case.op, case.rhs_text)]
        for call, op, rhs in calls:
            if len(out) < n:
                q = {"id": len(out), **base, "call": call}
                if call == "decide":
                    q.update(op=op, rhs=rhs)
                out.append(q)
    return out


def fvw_replay(q: dict) -> str:
    """The public call of question ``q`` as Python text."""
    lim = f"constraints={q['constraints']!r}, budget={q['budget']}, deadline={q['deadline']}"
    if q["call"] == "bounds":
        return f"smtdims.bounds({q['expr']!r}, {lim})"
    return f"smtdims.decide({q['expr']!r}, {q['op']!r}, {q['rhs']!r}, {lim})"


def _fvw_end(x) -> str:
    s = str(x)
    if len(s) > FVW_BIG_TEXT:
        return f"{s[:20]}...({len(s)} chars, sha1 {hashlib.sha1(s.encode()).hexdigest()[:16]})"
    return s


def fvw_answer(q: dict) -> dict:
    """Ask question ``q`` (with its ``budget`` and ``deadline``); a canonical, JSON-able answer."""
    import smtdims

    t = time.monotonic()
    try:
        if q["call"] == "bounds":
            b = smtdims.bounds(q["expr"], constraints=q["constraints"], budget=q["budget"], deadline=q["deadline"])
            ans = {"kind": "bounds", "lo": _fvw_end(b.lo), "hi": _fvw_end(b.hi), "lo_tight": b.lo_tight,
                   "hi_tight": b.hi_tight, "deterministic": b.deterministic, "reason": b.reason}
        else:
            d = smtdims.decide(q["expr"], q["op"], q["rhs"], constraints=q["constraints"], budget=q["budget"],
                               deadline=q["deadline"])
            ans = {"kind": "decision", "status": d.status, "deterministic": d.deterministic, "reason": d.reason}
    except smtdims.SmtdimsError as err:  # a refusal is an answer too, and must not depend on history
        ans = {"kind": "error", "error": type(err).__name__, "message": str(err)[:300],
               "deterministic": err.deterministic}
    except Exception as err:
        ans = {"kind": "crash", "error": f"{type(err).__name__}: {str(err)[:300]}",
               "traceback": traceback.format_exc(limit=6)[-1500:]}
    ans["seconds"] = round(time.monotonic() - t, 4)
    return ans


def fvw_canon(ans: dict) -> tuple:
    """What must be equal between two deterministic answers."""
    if ans["kind"] == "bounds":
        return ("bounds", ans["lo"], ans["hi"], ans["lo_tight"], ans["hi_tight"])
    if ans["kind"] == "decision":
        return ("decision", ans["status"])
    if ans["kind"] == "error":  # the message's example valuation is a witness: not compared
        return ("error", ans["error"])
    return (ans["kind"], ans.get("error"))


def _fvw_resolve(spec: str):
    """The answer function named by ``module:function`` ('' : :func:`fvw_answer`)."""
    if not spec:
        return fvw_answer
    import importlib

    mod, _, fn = spec.partition(":")
    return getattr(importlib.import_module(mod), fn)


def _fvw_fork_answer(answer, q: dict) -> tuple[int, int, float]:
    """Fork a child that answers ``q`` alone and writes one JSON line to a pipe: (pid, read fd, fork time).

    A ``prelude`` in ``q`` (questions) is asked first in the same child (to replay a history), and
    ``junk_contexts`` unrelated ``z3.Context()`` are made first (another memory layout, nothing asked).
    """
    r, w = os.pipe()
    t = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: one question, then out without cleanup handlers
        code = 0
        try:
            os.close(r)
            junk = []
            if q.get("junk_contexts"):
                import z3

                junk = [z3.Context() for _ in range(q["junk_contexts"])]
            for p in q.get("prelude", ()):
                answer(p)
            started = time.monotonic()
            ans = answer(q)
            ans["child_started"] = round(started - t, 4)
            del junk
            data = (json.dumps(ans) + "\n").encode()
            while data:
                data = data[os.write(w, data):]
            try:  # its ISL worker (if one started) goes with it
                from smtdims.engines import presburger

                presburger._WORKER._kill()
            except Exception:
                pass
        except BaseException:
            code = 3
        finally:
            os._exit(code)
    os.close(w)
    return pid, r, t


def _fvw_reap(pid: int, r: int, t: float, q: dict, *, kill: bool = False) -> dict:
    import signal

    if kill:
        os.kill(pid, signal.SIGKILL)
    chunks = []
    while not kill:
        b = os.read(r, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    wall = round(time.monotonic() - t, 4)
    text = b"".join(chunks).decode()
    if kill:
        return {"kind": "crash", "error": f"hang: no answer within {_fvw_limit(q):.0f} s", "seconds": wall}
    if not text.strip():
        how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit status {os.WEXITSTATUS(status)}"
        return {"kind": "crash", "error": f"the fresh child died ({how}) without an answer", "seconds": wall}
    ans = json.loads(text)
    ans["wall"] = wall
    return ans


def _fvw_serve(role: str, spec: str, warmup: int, seed: int, jobs: int) -> None:
    """A server on stdin/stdout: one JSON batch of questions a line in, one JSON answer a line out, in order.

    ``fresh``: each question in its own fork of this (pristine) process, up to ``jobs`` at a time.
    ``warm``: every question here, after ``warmup`` unrelated questions.
    """
    import select

    import smtdims  # noqa: F401 -- imported before any fork, as an application would

    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints (Z3, warnings) must not corrupt the protocol
    sys.set_int_max_str_digits(0)
    answer = _fvw_resolve(spec)
    if role == "warm" and warmup:
        for i, q in enumerate(fvw_questions(warmup, seed=seed + 7919)):
            q.update(budget=max(1, int(smtdims.options.DEFAULT_BUDGET * FVW_SCALES[i % len(FVW_SCALES)])),
                     deadline=smtdims.options.DEFAULT_DEADLINE)
            answer(q)
    out.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        batch = json.loads(line)
        if role == "warm":
            for q in batch:
                out.write(json.dumps(answer(q)) + "\n")
            continue
        answers: dict[int, dict] = {}
        running: dict[int, tuple] = {}  # read fd -> (pid, fd, fork time, index, question)
        nxt = sent = 0
        while sent < len(batch):
            while nxt < len(batch) and len(running) < jobs:
                pid, r, t = _fvw_fork_answer(answer, batch[nxt])
                running[r] = (pid, r, t, nxt, batch[nxt])
                nxt += 1
            soonest = min(t + _fvw_limit(q) for _, _, t, _, q in running.values())
            ready = select.select(list(running), [], [], max(0.0, soonest - time.monotonic()))[0]
            for r in ready:
                pid, _, t, i, q = running.pop(r)
                answers[i] = _fvw_reap(pid, r, t, q)
            for r in [r for r, v in running.items() if time.monotonic() > v[2] + _fvw_limit(v[4])]:
                pid, _, t, i, q = running.pop(r)
                answers[i] = _fvw_reap(pid, r, t, q, kill=True)
            while sent in answers:  # in order
                out.write(json.dumps(answers.pop(sent)) + "\n")
                sent += 1


class _FvwServer:
    """The driver's end of a :func:`_fvw_serve` process (restarted, warm-up included, if it dies)."""

    def __init__(self, role: str, spec: str, warmup: int, seed: int, jobs: int):
        self.argv = [sys.executable, str(Path(__file__).resolve()), "--fvw-serve", role, "--fvw-answer", spec,
                     "--fvw-warmup", str(warmup), "--seed", str(seed), "--jobs", str(jobs)]
        self.restarts = -1
        self.start()

    def start(self) -> None:
        import subprocess

        self.restarts += 1
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.buffer = b""
        if self._line(3600.0) != {"ready": True}:
            raise RuntimeError(f"the {self.argv[3]} server did not start")

    def _line(self, timeout: float) -> dict | None:
        """The next answer line, or None after ``timeout`` seconds or at EOF (raw reads: no hidden buffer)."""
        import select

        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def ask(self, batch: list[dict]):
        """Answers of ``batch``, in order, as they come."""
        assert self.proc.stdin is not None
        data = (json.dumps(batch) + "\n").encode()
        while data:
            data = data[self.proc.stdin.write(data):]
        for i, q in enumerate(batch):
            ans = self._line(_fvw_limit(q) + FVW_HANG_SLACK)
            if ans is None:  # hung or died: that answer is a crash, and the rest of the batch starts again
                self.proc.kill()
                self.proc.wait()
                yield {"kind": "crash", "error": f"the {self.argv[3]} server hung or died"}
                self.start()
                yield from self.ask(batch[i + 1:])
                return
            yield ans

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except Exception:
            self.proc.kill()


def _fvw_diagnose(fresh: _FvwServer, diffs: list[tuple], history: list[dict], warm_answers: list[dict],
                  until: float = 0) -> list[dict]:
    """Why a warm answer differed: each differing question asked again in fresh forks, (1) alone,
    (2) after ``FVW_JUNK`` unrelated ``z3.Context()`` (a changed memory layout, nothing asked), and
    (3) after the warm process's earlier questions about the same constraints (same session), in
    their order (the last ``FVW_PRELUDE`` of them). Stops at monotonic time ``until`` (0: never).

    ``cause``: ``"z3 memory layout"`` when (2) gives the warm answer (Z3's search under an rlimit
    depends on the process's memory layout: tests/core/test_budget.py's xfail), else ``"same-constraints
    history"`` when (3) does (the session's state from earlier questions; a replay also moves the
    layout, so this is a hint, not a proof), else ``"other history"`` (``"undecided (prelude cut)"``
    when (3) was cut).
    """
    out = []
    for item, f, w, pos in diffs:
        if until and time.monotonic() > until:
            break
        earlier = [j for j, it in enumerate(history[:pos - 1]) if tuple(it["constraints"]) == tuple(item["constraints"])]
        alone, junk, replay = fresh.ask([item, {**item, "junk_contexts": FVW_JUNK},
                                         {**item, "prelude": [history[j] for j in earlier[-FVW_PRELUDE:]]}])
        cut = len(earlier) > FVW_PRELUDE
        if fvw_canon(junk) == fvw_canon(w):
            cause = "z3 memory layout"
        elif fvw_canon(replay) == fvw_canon(w):
            cause = "same-constraints history"
        else:
            cause = "undecided (prelude cut)" if cut else "other history"
        keep = ("lo", "hi", "lo_tight", "hi_tight", "status", "error", "deterministic", "reason")
        out.append({"replay": fvw_replay(item), "warm_position": pos, "fresh_again_same": fvw_canon(alone) == fvw_canon(f),
                    "after_junk_contexts": {k: junk.get(k) for k in keep if k in junk},
                    "earlier_same_constraints": len(earlier), "replayed": min(len(earlier), FVW_PRELUDE),
                    "earlier_clock_shaped_in_warm": sum(not warm_answers[j].get("deterministic", True) for j in earlier),
                    "replayed_after_same_constraints": {k: replay.get(k) for k in keep if k in replay},
                    "cause": cause})
    return out


def _pct(xs: list[float]) -> dict:
    xs = sorted(xs)
    if not xs:
        return {}
    return {"n": len(xs), "median": round(xs[len(xs) // 2], 4), "p99": round(xs[int(len(xs) * 0.99)], 4),
            "max": round(xs[-1], 4), "total": round(sum(xs), 1)}


def fresh_vs_warm(n: int, seed: int = 0, *, scales: tuple[float, ...] = FVW_SCALES, deadline: float | None = None,
                  large_share: float = 0.1, warmup: int = 100, jobs: int = 1, chunk: int = 100,
                  time_limit: float = 0, answer: str = "", progress: float = 60.0, diagnose: bool = True,
                  concurrent: bool = False) -> dict:
    """Ask ``n`` questions, each at every budget scale, fresh and warm; compare the answers.

    The warm process answers all (question, budget) pairs in one shuffled order (not the order of
    generation; budgets interleaved; whole questions per chunk), chunk by chunk, and the fresh server
    forks once per pair of the same chunk. ``time_limit`` stops before a chunk that would start past it. ``answer``: a
    ``module:function`` to ask instead of :func:`fvw_answer` (the tests feed it a history-dependent one).
    ``diagnose``: replay each differing answer in fresh forks (:func:`_fvw_diagnose`). ``concurrent``:
    the warm process answers a chunk while the fresh forks answer it (half the wall time on two cores;
    each side still answers one question at a time).
    """
    from smtdims import options

    deadline = options.DEFAULT_DEADLINE if deadline is None else deadline
    budgets = {s: max(1, int(round(options.DEFAULT_BUDGET * s))) for s in scales}
    qs = fvw_questions(n, seed, large_share)
    items = [{**q, "scale": s, "budget": budgets[s], "deadline": deadline} for q in qs for s in scales]
    # the warm order: questions shuffled, then taken block by block (a chunk's worth: every budget of
    # each), shuffled again inside the block, so that a run cut by --time-limit compares whole questions
    orng = random.Random(f"fvw-order-{seed}")
    qorder = list(range(len(qs)))
    orng.shuffle(qorder)
    per = max(1, chunk // len(scales))
    chunk = per * len(scales)
    order: list[int] = []
    for b in range(0, len(qorder), per):
        block = [qi * len(scales) + si for qi in qorder[b:b + per] for si in range(len(scales))]
        orng.shuffle(block)
        order += block
    rep: dict = {"mode": "fresh-vs-warm", "seed": seed, "scales": list(scales), "budgets": list(budgets.values()),
                 "deadline": deadline, "large_share": large_share, "warmup": warmup, "jobs": jobs,
                 "questions_generated": n, "questions_compared": 0, "answers_compared": 0, "differs": 0,
                 "clock_shaped": 0, "clock_shaped_differ": 0, "crashes": 0, "past_deadline": 0,
                 "past_deadline_fresh": 0, "past_deadline_warm": 0,
                 "error_message_differs": 0,
                 "by_scale": {str(s): collections.Counter() for s in scales}, "by_source": {},
                 "examples": {"differs": [], "clock_shaped": [], "crashes": [], "past_deadline": [],
                              "error_message_differs": []}}
    t0 = last = time.monotonic()
    fresh = _FvwServer("fresh", answer, 0, seed, jobs)
    warm = _FvwServer("warm", answer, warmup, seed, 1)
    rep["startup_seconds"] = round(time.monotonic() - t0, 1)
    secs: dict[str, list[float]] = {"fresh": [], "warm": [], "fork_overhead": []}
    done_per_q: collections.Counter = collections.Counter()

    def example(kind: str, item: dict, f: dict, w: dict, pos: int) -> None:
        if len(rep["examples"][kind]) < FVW_EXAMPLES:
            q = {k: item[k] for k in ("source", "call", "expr", "constraints", "op", "rhs", "budget", "deadline") if k in item}
            key = (item["expr"], tuple(item["constraints"]))
            before = [f"#{j + 1}: {it['call']} {it.get('op', '')} {it.get('rhs', '')} at budget {it['budget']}".replace("  ", " ")
                      for j, it in enumerate(history[:pos - 1]) if tuple(it["constraints"]) == key[1]][-8:]
            rep["examples"][kind].append({"question": q, "replay": fvw_replay(item), "fresh": f, "warm": w,
                                          "warm_position": pos, "warm_earlier_same_constraints": before})

    pos = 0
    history: list[dict] = []  # the warm process's questions so far, in its order
    diffs: list[tuple] = []
    warm_answers: list[dict] = []  # the warm process's answers, in its order
    try:
        for c0 in range(0, len(order), chunk):
            if time_limit and time.monotonic() - t0 > time_limit:
                rep["stopped_by_time_limit"] = True
                break
            batch = [items[i] for i in order[c0:c0 + chunk]]
            history.extend(batch)
            if concurrent:
                box: list = []

                def warm_side(b: list[dict] = batch) -> None:
                    try:
                        box.append(list(warm.ask(b)))
                    except BaseException as err:  # noqa: BLE001 - re-raised in the driver's thread
                        box.append(err)

                th = threading.Thread(target=warm_side)
                th.start()
                fa = list(fresh.ask(batch))
                th.join()
                if isinstance(box[0], BaseException):
                    raise box[0]
                wa = box[0]
            else:
                fa = list(fresh.ask(batch))
                wa = list(warm.ask(batch))
            warm_answers.extend(wa)
            for item, f, w in zip(batch, fa, wa):
                pos += 1
                src = rep["by_source"].setdefault(item["source"], collections.Counter())
                sc = rep["by_scale"][str(item["scale"])]
                rep["answers_compared"] += 1
                sc["answers"] += 1
                src["answers"] += 1
                done_per_q[item["id"]] += 1
                late = False
                for side, a in (("fresh", f), ("warm", w)):
                    if "seconds" in a:
                        secs[side].append(a["seconds"])
                        src[f"{side}_seconds"] = round(src[f"{side}_seconds"] + a["seconds"], 2)
                    if a.get("seconds", 0) > deadline + LARGE_SLACK:  # counted per call, listed per question
                        rep["past_deadline"] += 1
                        rep[f"past_deadline_{side}"] += 1
                        sc["past_deadline"] += 1
                        late = True
                if late:
                    example("past_deadline", item, f, w, pos)
                if "wall" in f and "seconds" in f:
                    secs["fork_overhead"].append(f["wall"] - f["seconds"])
                if f["kind"] == "crash" or w["kind"] == "crash":
                    rep["crashes"] += 1
                    sc["crashes"] += 1
                    src["crashes"] += 1
                    example("crashes", item, f, w, pos)
                elif not (f.get("deterministic", True) and w.get("deterministic", True)):
                    rep["clock_shaped"] += 1
                    sc["clock_shaped"] += 1
                    src["clock_shaped"] += 1
                    if fvw_canon(f) != fvw_canon(w):
                        rep["clock_shaped_differ"] += 1
                        sc["clock_shaped_differ"] += 1
                        example("clock_shaped", item, f, w, pos)
                elif fvw_canon(f) != fvw_canon(w):
                    rep["differs"] += 1
                    diffs.append((item, f, w, pos))
                    sc["differs"] += 1
                    src["differs"] += 1
                    example("differs", item, f, w, pos)
                elif f.get("message") != w.get("message"):
                    rep["error_message_differs"] += 1  # same refusal, another example valuation in its text
                    example("error_message_differs", item, f, w, pos)
            if progress and time.monotonic() - last > progress:
                last = time.monotonic()
                print(f"[fvw] {rep['answers_compared']}/{len(items)} answers, {last - t0:.0f} s, differs {rep['differs']}, "
                      f"clock-shaped {rep['clock_shaped']}, crashes {rep['crashes']}", file=sys.stderr, flush=True)
        if diagnose and diffs:
            until = t0 + time_limit + max(300.0, 0.15 * time_limit) if time_limit else 0
            rep["diagnosis"] = _fvw_diagnose(fresh, diffs[:FVW_EXAMPLES], history, warm_answers, until)
    finally:
        fresh.close()
        warm.close()
    elapsed = time.monotonic() - t0
    rep["questions_compared"] = sum(1 for v in done_per_q.values() if v == len(scales))
    rep["server_restarts"] = {"fresh": fresh.restarts, "warm": warm.restarts}
    rep["seconds"] = round(elapsed, 1)
    rep["answers_per_second"] = round(rep["answers_compared"] / elapsed, 2) if elapsed else None
    rep["seconds_per_answer"] = {k: _pct(v) for k, v in secs.items()}
    rep["by_scale"] = {k: dict(v) for k, v in rep["by_scale"].items()}
    rep["by_source"] = {k: dict(v) for k, v in sorted(rep["by_source"].items())}
    return rep


# -- names that are the solvers' words, compared with plain names (issue 42.1) ---------------------------------
def _answer_of(call) -> tuple:
    """A comparable answer: the ends or status with tightness, or the exception's class; and whether
    a clock shaped it (such answers may differ)."""
    try:
        r = call()
    except Exception as err:  # smtdims' refusals are answers too (ParseError, unsat, division by 0)
        # a division refusal without a valuation only says the divisor was not proven nonzero
        proven = type(err).__name__ != "PossibleDivisionByZeroError" or getattr(err, "witness", None) is not None
        return (type(err).__name__, proven), getattr(err, "deterministic", True) is not False
    if hasattr(r, "lo"):
        return ("bounds", str(r.lo), str(r.hi), r.lo_tight, r.hi_tight, r.reason), r.deterministic
    return ("decision", r.status, r.reason), r.deterministic


def _precise(ans: tuple) -> bool:
    return ans[0] == "decision" and ans[1] in ("true", "false", "undetermined") or \
        ans[0] == "bounds" and ans[3] and ans[4] or ans[0] not in ("decision", "bounds")


def _consistent(a: tuple, b: tuple) -> str:
    """How two answers to the same question compare: "same"; "words-less-precise" / "plain-less-precise"
    (one side stopped short: names order Z3's rewriting, so a search that runs out of budget may stop
    elsewhere); else how they contradict each other (a defect: one of them is wrong)."""
    if a == b:
        return "same"
    unproven = [x[0] == "PossibleDivisionByZeroError" and not x[1] for x in (a, b)]
    if unproven[0] != unproven[1]:  # one side could not prove a divisor nonzero
        return "words-less-precise" if unproven[0] else "plain-less-precise"
    if a[0] != b[0]:  # a refusal on one side only: satisfiability and a divisor's zero are facts
        return "answer-vs-refusal"
    if a[0] == "decision":
        if _precise(a) and _precise(b):
            return "decisions-differ"
        return "words-less-precise" if _precise(b) else "plain-less-precise"
    if a[0] != "bounds":
        return "refusals-differ" if a[0] != b[0] else "same"
    from fractions import Fraction

    def num(x: str) -> Fraction | float:
        return float(x) if "inf" in x else Fraction(x)

    (alo, ahi, alt, aht), (blo, bhi, blt, bht) = (num(a[1]), num(a[2]), a[3], a[4]), (num(b[1]), num(b[2]), b[3], b[4])
    # a tight end is attained: the other side's sound bound must not pass it; two tight ends are equal
    if (alt and blt and alo != blo) or (alt and blo > alo) or (blt and alo > blo):
        return "lower-ends-contradict"
    if (aht and bht and ahi != bhi) or (aht and bhi < ahi) or (bht and ahi < bhi):
        return "upper-ends-contradict"
    words_behind = (blt and not alt) or (bht and not aht)
    plain_behind = (alt and not blt) or (aht and not bht)
    if words_behind and not plain_behind:
        return "words-less-precise"
    if plain_behind and not words_behind:
        return "plain-less-precise"
    return "same"  # both loose, or each ahead on one end: sound, and as precise as each search got


def names_compare(n: int, seed: int, *, nonlinear_share: float = 0.7, deadline: float = 10.0, budget: int = 30_000,
                  time_limit: float = 0) -> dict:
    """``n`` random cases asked twice in this process (``bounds`` and ``decide``): once with their
    variables renamed to SMT-LIB/Z3/ISL words (``true``, ``and``, ``let``, ``_``...), once to plain
    names of the same rank (``n00``, ``n01``...) in the same texts, so that every solver sees the same
    problem but for the names. ``differ`` counts answers that contradict each other (must be 0). Names
    also order Z3's rewriting, so a search that runs out of budget may stop elsewhere: one side less
    precise than the other is counted apart, per side; a misread name shows there, on the words' side
    only (names as Z3 read them before 2026-12-05: 8 and 7 of 120 answers, against 0 and 1 for plain
    names; :func:`names_compare_failed` says when the words' side is behind by more than noise)."""
    import smtdims

    rng, names_rng = random.Random(seed), random.Random(seed ^ 0x5EED)
    cfg_lin, cfg_nl = S.GenConfig(linear=True), S.GenConfig(linear=False)
    rep: dict = {"mode": "smt-names-compare", "seed": seed, "cases": 0, "answers_compared": 0, "clock_shaped": 0,
                 "differ": 0, "words-less-precise": 0, "plain-less-precise": 0, "examples": []}
    t0 = time.time()
    for _ in range(n):
        if time_limit and time.time() - t0 > time_limit:
            break
        case = S.random_case(rng, cfg_nl if rng.random() < nonlinear_share else cfg_lin)
        worded = word_names(case, names_rng, jax=False)
        # the same texts with each word replaced by a plain name of the same rank: the parser, the IR's
        # order and every solver see the same problem, term for term, but for the names
        order = sorted(worded.all_vars())
        plain = dict(zip(order, (f"n{i:02d}" for i in range(len(order))), strict=True))

        def swap(text: str, plain: dict[str, str] = plain) -> str:
            return re.sub(r"\w+", lambda m: plain.get(m.group(0), m.group(0)), text)

        sides = [(worded.expr_text, worded.rhs_text, list(worded.constraint_texts))]
        sides.append((swap(sides[0][0]), swap(sides[0][1]), [swap(t) for t in sides[0][2]]))
        rep["cases"] += 1
        for kind in ("bounds", "decide"):
            got = []
            for expr, rhs, cs in sides:
                if kind == "bounds":
                    got.append(_answer_of(lambda e=expr, cs=cs: smtdims.bounds(e, cs, budget=budget, deadline=deadline)))
                else:
                    got.append(_answer_of(lambda e=expr, r=rhs, cs=cs: smtdims.decide(e, worded.op, r, cs, budget=budget,
                                                                                      deadline=deadline)))
            (a, a_det), (b, b_det) = got
            if not (a_det and b_det):
                rep["clock_shaped"] += 1
                continue
            rep["answers_compared"] += 1
            verdict = _consistent(a, b)
            if verdict in ("words-less-precise", "plain-less-precise"):
                rep[verdict] = rep.get(verdict, 0) + 1
            elif verdict != "same":
                rep["differ"] += 1
            if verdict != "same" and len(rep["examples"]) < 20:
                rep["examples"].append({"verdict": verdict, "question": kind, "words": sides[0], "plain": sides[1],
                                        "answer_words": a, "answer_plain": b})
    rep["seconds"] = round(time.time() - t0, 1)
    return rep


def names_compare_failed(rep: dict) -> bool:
    """A contradiction, or the words' side less precise clearly more often than the plain names' side."""
    return bool(rep["differ"]) or rep["words-less-precise"] > 2 * rep["plain-less-precise"] + 2


# -- kill the caller (issue 42.2-3) ------------------------------------------------------------------------
# A caller that makes temporary directories (one by tempdirs.mkdtemp, one by its context manager), then
# asks a question that keeps a worker busy, in the main thread or another; names may be SMT words.
_KILL_CALLER = """
import json, math, sys, threading
from smtdims.engines import tempdirs
import smtdims
kind, a, b, c = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
keep = tempdirs.mkdtemp("fuzz-kill")
with tempdirs.TemporaryDirectory("fuzz-kill-block") as d:
    print(json.dumps([keep, d]), flush=True)
    def ask():
        if kind == "isl-then-z3":
            smtdims.bounds(f"mod({a}, 3) + {b}", constraints=[f"{a} <= 5", f"{b} <= 7"])
        if kind == "explain":
            smtdims.explain(f"{a}*{a}*{a} + {b}*{b}*{b} != {c}*{c}*{c}", budget=10**10, deadline=math.inf)
        else:
            smtdims.decide(f"{a}*{a}*{a} + {b}*{b}*{b} != {c}*{c}*{c}", budget=10**10, deadline=math.inf)
    if kind == "thread":
        t = threading.Thread(target=ask)
        t.start()
        t.join()
    else:
        ask()
"""
_KILL_KINDS = ("main", "thread", "isl-then-z3", "explain")


def _proc_stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _children(pid: int) -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit() and (st := _proc_stat(int(d))) and int(st[1]) == pid]


def _running(pid: int) -> bool:
    st = _proc_stat(pid)
    return st is not None and st[0] != "Z"  # a zombie has ended; its new parent reaps it


def kill_callers(n: int, seed: int, *, time_limit: float = 0, settle: tuple[float, float] = (0.0, 1.5)) -> dict:
    """``n`` caller processes (:data:`_KILL_CALLER`), each killed with SIGKILL or SIGTERM after a random
    time (from its start up to a busy Z3 check), asking about plain names or SMT words. Counts workers
    still running 1 s after their caller ended (``workers_left``: must be 0), directories left after
    SIGTERM, and after SIGKILL once the next process (this one) has swept (``dirs_left``: must be 0).
    Linux (reads /proc)."""
    import signal
    import subprocess
    import tempfile

    from smtdims.engines import tempdirs

    rng = random.Random(seed)
    root = tempfile.mkdtemp(prefix="fuzz-kill-root-")
    env = dict(os.environ, TMPDIR=root, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    rep: dict = {"mode": "kill-callers", "seed": seed, "runs": 0, "by_signal": collections.Counter(),
                 "by_kind": collections.Counter(), "workers_seen": 0, "workers_left": 0, "dirs_left": 0, "errors": 0,
                 "worker_end_seconds_max": 0.0, "examples": []}
    t0 = time.time()
    try:
        for i in range(n):
            if time_limit and time.time() - t0 > time_limit:
                break
            sig = rng.choice((signal.SIGKILL, signal.SIGTERM))
            kind = rng.choice(_KILL_KINDS)
            names = rng.sample([w for w in SMT_WORDS if w not in JAX_REFUSES], 3) if rng.random() < 0.5 else ["a", "b", "c"]
            wait = rng.uniform(*settle)
            p = subprocess.Popen([sys.executable, "-c", _KILL_CALLER, kind, *names], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
            try:
                assert p.stdout is not None
                dirs = json.loads(p.stdout.readline() or "[]")
                time.sleep(wait)
                workers = _children(p.pid)
                p.send_signal(sig)
                p.wait(timeout=30)
                ended = time.monotonic()
                while any(_running(w) for w in workers) and time.monotonic() - ended < 1.0:
                    time.sleep(0.002)
                took = time.monotonic() - ended
                left = [w for w in workers if _running(w)]
                for w in left:
                    os.kill(w, signal.SIGKILL)
                if sig == signal.SIGKILL:
                    tempdirs.sweep(root)  # what the next process that makes a directory does
                stale = [d for d in dirs if os.path.exists(d)]
            except Exception as err:  # the harness must not stop a run
                rep["errors"] += 1
                rep["examples"].append({"run": i, "error": f"{type(err).__name__}: {err}"})
                continue
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            rep["runs"] += 1
            rep["by_signal"][signal.Signals(sig).name] += 1
            rep["by_kind"][kind] += 1
            rep["workers_seen"] += len(workers)
            rep["workers_left"] += len(left)
            rep["dirs_left"] += len(stale)
            if workers:
                rep["worker_end_seconds_max"] = max(rep["worker_end_seconds_max"], round(took, 3))
            if (left or stale) and len(rep["examples"]) < 20:
                rep["examples"].append({"run": i, "signal": signal.Signals(sig).name, "kind": kind, "names": names,
                                        "after": round(wait, 3), "workers_left": left, "dirs_left": stale})
    finally:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    rep["by_signal"], rep["by_kind"] = dict(rep["by_signal"]), dict(rep["by_kind"])
    rep["seconds"] = round(time.time() - t0, 1)
    return rep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--queries", type=int, default=1000, help="stop after this many checked queries")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1, help="worker processes (--fresh-vs-warm: fresh forks at a time)")
    p.add_argument("--budget", type=int, default=30_000, help="Z3 rlimit per check for nonlinear cases")
    p.add_argument("--case-timeout", type=float, default=120.0, help="seconds before a case counts as slow")
    p.add_argument("--audit-stock", action="store_true", help="audit stock JAX's answers instead")
    p.add_argument("--no-jax", action="store_true", help="only smtdims' API, not the answers JAX gets")
    p.add_argument("--time-limit", type=float, default=0, help="stop after this many seconds (0: no limit)")
    p.add_argument("--out", default=str(REGRESSIONS), help="where regression cases go")
    p.add_argument("--no-write", action="store_true", help="do not write regression files")
    p.add_argument("--shrink-all", action="store_true", help="shrink every failure, not one per kind")
    p.add_argument("--shrink-time", type=float, default=120.0)
    p.add_argument("--progress", type=float, default=60.0, help="seconds between progress lines")
    p.add_argument("--report", help="write the JSON report here too")
    p.add_argument("--nonlinear-share", type=float, default=None, metavar="P",
                   help="make that share of cases nonlinear (default: the generator's own mix)")
    p.add_argument("--deadline", type=float, default=10.0,
                   help="seconds per query (smtdims' deadline); a query past it (+1 s) is a failure")
    p.add_argument("--no-presburger", action="store_true",
                   help="turn the ISL rung off: Presburger answers come from Z3 (checked against ISL)")
    p.add_argument("--seam-big", type=int, default=200, metavar="N",
                   help="also N cases at JAX's seam with constants near 2**31, 2**32 and 2**53 and "
                        "products of variables, checked on a grid around the constants (0: none)")
    p.add_argument("--large", type=int, default=0, metavar="N",
                   help="only N large cases (powers to 500, 1,000-variable sums, 500 constraints, nested and "
                        "nonlinear divisions) under --large-deadline; counts every call past it + 1 s")
    p.add_argument("--large-deadline", type=float, default=1.0)
    p.add_argument("--fresh-vs-warm", type=int, default=0, metavar="N",
                   help="only N questions (bounds/decide about normal and large cases), each at every --budget-scales "
                        "budget, answered in a fresh fork and in one warmed-up process; counts answers that differ")
    p.add_argument("--budget-scales", default="1,0.1", metavar="S,S",
                   help="--fresh-vs-warm: budgets as multiples of smtdims' default budget")
    p.add_argument("--fvw-deadline", type=float, default=None, metavar="SECONDS",
                   help="--fresh-vs-warm: the deadline of every question on both sides (default: smtdims' default)")
    p.add_argument("--fvw-large-share", type=float, default=0.1, metavar="P", help="--fresh-vs-warm: share of large cases")
    p.add_argument("--fvw-warmup", type=int, default=100, metavar="N",
                   help="--fresh-vs-warm: unrelated questions the warm process answers first")
    p.add_argument("--fvw-chunk", type=int, default=100, metavar="N", help="--fresh-vs-warm: answers per round trip")
    p.add_argument("--fvw-concurrent", action="store_true",
                   help="--fresh-vs-warm: the warm process and the fresh forks answer each chunk at the same time")
    p.add_argument("--fvw-no-diagnose", action="store_true",
                   help="--fresh-vs-warm: do not replay differing answers after the same-constraints history")
    p.add_argument("--smt-names", type=float, default=0.1, metavar="P",
                   help="rename the variables of that share of cases to SMT-LIB/Z3/ISL words (true, and, let, _, ...)")
    p.add_argument("--smt-names-compare", type=int, default=0, metavar="N",
                   help="only N cases asked with SMT/Z3 words as names and with plain names: answers must agree")
    p.add_argument("--kill-callers", type=int, default=0, metavar="N",
                   help="only N runs of a caller process killed (SIGKILL or SIGTERM) mid-question: counts workers "
                        "still running 1 s after it and temporary directories left (see kill_callers)")
    p.add_argument("--fvw-answer", default="", help=argparse.SUPPRESS)  # module:function instead of fvw_answer
    p.add_argument("--fvw-serve", choices=("fresh", "warm"), help=argparse.SUPPRESS)  # internal: a server process
    args = p.parse_args(argv)
    if args.fvw_serve:
        _fvw_serve(args.fvw_serve, args.fvw_answer, args.fvw_warmup, args.seed, args.jobs)
        return 0
    if args.smt_names_compare:
        report = names_compare(args.smt_names_compare, args.seed, deadline=args.deadline, budget=args.budget,
                               time_limit=args.time_limit)
        print(json.dumps(report, indent=1, default=str))
        if args.report:
            Path(args.report).write_text(json.dumps(report, indent=1, default=str) + "\n")
        return 1 if names_compare_failed(report) else 0
    if args.kill_callers:
        report = kill_callers(args.kill_callers, args.seed, time_limit=args.time_limit)
        text = json.dumps(report, indent=1, default=str)
        print(text)
        if args.report:
            Path(args.report).write_text(text + "\n")
        return 1 if report["workers_left"] or report["dirs_left"] or report["errors"] else 0
    if args.fresh_vs_warm:
        scales = tuple(float(x) for x in args.budget_scales.split(",") if x.strip())
        report = fresh_vs_warm(args.fresh_vs_warm, args.seed, scales=scales, deadline=args.fvw_deadline,
                               large_share=args.fvw_large_share, warmup=args.fvw_warmup, jobs=args.jobs,
                               chunk=args.fvw_chunk, time_limit=args.time_limit, answer=args.fvw_answer,
                               progress=args.progress, diagnose=not args.fvw_no_diagnose,
                               concurrent=args.fvw_concurrent)
        text = json.dumps(report, indent=1, default=str)
        print(text)
        if args.report:
            Path(args.report).write_text(text + "\n")
        return 1 if report["differs"] or report["crashes"] else 0
    if args.large:
        report = {"mode": "large", "deadline": args.large_deadline,
                  **large_run(args.large, args.seed, args.large_deadline, jax=not args.no_jax, time_limit=args.time_limit)}
        print(json.dumps(report, indent=1, default=str))
        if args.report:
            Path(args.report).write_text(json.dumps(report, indent=1, default=str) + "\n")
        return 1 if report["unsound"] or report["crashes"] or report["past_deadline"] else 0
    report = run(args)
    text = json.dumps(report, indent=1, default=str)
    print(text)
    if args.report:
        Path(args.report).write_text(text + "\n")
    if report["mode"] == "smtdims":
        return 1 if report["unsound_answers"] or report["crashes"] or report["past_deadline"] else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
