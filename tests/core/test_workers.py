"""The Z3 worker processes (smtdims.engines.workers, smtdims.engines.checks.KillableSolver): the same answers
as a check in the caller, cores and models that come back right, several threads at once, a dead worker
replaced."""

from __future__ import annotations

import random
import threading
import time

import z3

import smtdims
from smtdims import clocks, options
from smtdims.engines import checks, counters


def _formulas(ctx: z3.Context, rng: random.Random) -> tuple[list[z3.BoolRef], list[z3.ArithRef]]:
    xs = [z3.Int(n, ctx) for n in "abc"]

    def term() -> z3.ArithRef:
        a, b = rng.choice(xs), rng.choice(xs)
        return rng.randint(-3, 3) * a * b + rng.randint(-5, 5) * rng.choice(xs) + rng.randint(-9, 9)

    fs = [x >= 1 for x in xs] + [x <= rng.randint(2, 12) for x in xs]
    fs += [term() >= term() for _ in range(rng.randint(1, 3))]
    return fs, xs


def _check(fs: list[z3.BoolRef], deadline: float | None) -> tuple[z3.CheckSatResult, checks.KillableSolver]:
    s = checks.make_solver(fs[0].ctx, 200_000, nonlinear=True, killable=True)
    s.add(*fs)
    if deadline is None:
        return s.check(), s
    with options.scoped(deadline=deadline), clocks.question() as d:
        return s.check(deadline=d), s


def test_the_worker_answers_as_the_caller_does():
    """60 random nonlinear formulas, checked in the caller (no deadline) and in a worker: the same
    status; every model satisfies the formulas."""
    rng = random.Random(7)
    seen = set()
    for _ in range(60):
        ctx = z3.Context()
        fs, xs = _formulas(ctx, rng)
        here, _ = _check(fs, None)
        there, s = _check(fs, 30.0)
        assert here == there, [str(f) for f in fs]
        seen.add(str(there))
        if there == z3.sat:
            m = s.model()
            values = {str(x): m.eval(x, model_completion=True) for x in xs}
            assert all(isinstance(v, int) for v in values.values())
            solver = z3.Solver(ctx=ctx)
            solver.add(*fs, *(x == values[str(x)] for x in xs))
            assert solver.check() == z3.sat  # the worker's point satisfies the caller's formulas
    assert seen == {"sat", "unsat"}


def test_an_unsat_core_comes_back_as_the_callers_literals():
    ctx = z3.Context()
    a, b = z3.Int("a", ctx), z3.Int("b", ctx)
    on = [z3.Bool(f"!c{i}", ctx) for i in range(3)]
    s = checks.make_solver(ctx, 200_000, killable=True)
    s.add(z3.Implies(on[0], a * b >= 10), z3.Implies(on[1], a <= 2), z3.Implies(on[2], b <= 3), a >= 1, b >= 1)
    with options.scoped(deadline=30.0), clocks.question() as d:
        assert s.check(*on, deadline=d) == z3.unsat
        core = s.unsat_core()
    assert {str(x) for x in core} == {"!c0", "!c1", "!c2"} and all(x.ctx is ctx for x in core)


def test_questions_from_several_threads_use_several_workers():
    answers: dict[int, str] = {}

    def ask(i: int) -> None:
        answers[i] = smtdims.decide(f"a*a - 2*a*b + b*b + {i}", ">=", f"{i}", deadline=60).status

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert answers == dict.fromkeys(range(6), "true")
    assert 1 <= len(checks.Z3_WORKERS.workers()) <= checks.Z3_WORKERS.size


def test_a_worker_that_died_is_replaced():
    q = ("a*b", ">=", "a")
    assert smtdims.decide(*q, deadline=30).status == "true"
    for w in checks.Z3_WORKERS.workers():
        if w.proc is not None:
            w.proc.kill()
            w.proc.wait()
    assert smtdims.decide("a*b + 1", ">=", "a", deadline=30).status == "true"


def test_a_worker_that_cannot_start_answers_unknown_in_time_then_is_tried_again(monkeypatch):
    """CI, stop 46: one explain ran an hour past its 1 s deadline. A start that fails (here: no
    interpreter answers) used to turn the worker off for the process's life, and its checks then
    ran in process, where Z3 may ignore the interrupt. Now: "unknown" (clock-shaped) at once, never
    in process, and the worker is tried again after its back-off."""
    from smtdims.engines import workers

    checks.Z3_WORKERS.stop()
    monkeypatch.setattr(workers.sys, "executable", "/bin/false")  # starts, says nothing, exits
    ran_here = []
    monkeypatch.setattr(checks.KillableSolver, "local", property(lambda self: ran_here.append(1) or z3.Solver(ctx=self.ctx)))
    ctx = z3.Context()
    a, b = z3.Int("a", ctx), z3.Int("b", ctx)
    before = counters.COUNTERS.workers_down
    assert _check([a * b == 6, a >= 2, b >= 2], 30.0)[0] == z3.unknown  # the start fails: no answer
    (w,) = [w for w in checks.Z3_WORKERS.workers() if w.failed_starts]
    assert w.down and not w.broken and w.retry_at > 0
    generation = w.generation
    assert _check([a * b == 6, a >= 2], 30.0)[0] == z3.unknown  # inside the back-off: not started again
    assert w.generation == generation and counters.COUNTERS.workers_down > before and not ran_here
    monkeypatch.undo()  # an interpreter again; the back-off over
    w.retry_at = 0.0
    assert _check([a * b == 6, a >= 2, b >= 2], 30.0)[0] == z3.sat  # tried again, and it answers
    assert w.failed_starts == 0 and not w.down and w.generation == generation + 1


def test_a_worker_backing_off_is_passed_over_while_the_pool_has_room(monkeypatch):
    """One failed start must not cost the other threads' questions: the pool starts another worker
    rather than hand out the one backing off."""
    from smtdims.engines import workers

    checks.Z3_WORKERS.stop()
    with monkeypatch.context() as m:
        m.setattr(workers.sys, "executable", "/bin/false")
        ctx = z3.Context()
        a, b = z3.Int("a", ctx), z3.Int("b", ctx)
        assert _check([a * b == 6, a >= 2, b >= 2], 30.0)[0] == z3.unknown
    down = [w for w in checks.Z3_WORKERS.workers() if w.down]
    assert down and len(checks.Z3_WORKERS.workers()) < checks.Z3_WORKERS.size
    assert _check([a * b == 6, a >= 2, b >= 2], 30.0)[0] == z3.sat  # a fresh worker, in the back-off
    assert all(w.down and w.proc is None for w in down)
    for w in down:
        w.retry_at = 0.0


def test_back_off_doubles_to_its_limit(tmp_path):
    """Each start that fails (here: slower than its limit, a process that never says it is ready) doubles
    the wait before the next, up to RETRY_MOST; the back-off is skipped here by moving ``retry_at``."""
    from smtdims.engines import workers

    silent = tmp_path / "silent_worker.py"
    silent.write_text("import sys\nsys.stdin.read()\n")  # ends when its input does
    w = workers.Worker(str(silent))
    waits = []
    for _ in range(9):
        w.retry_at = 0.0
        assert w.call({}, 1.0, 0.05) == (None, w.generation)
        waits.append(round(w.retry_at - time.monotonic()))
        assert w.down and w.proc is None  # killed, and off until retry_at
    assert waits == [1, 2, 4, 8, 16, 32, 60, 60, 60] and w.broken_by_clock and not w.broken
    assert w.failed_starts == 9 and w.kills == 0  # failed starts, not late answers


def test_a_worker_past_its_memory_limit_retires_after_its_answer(monkeypatch):
    """A worker past SMTDIMS_Z3_WORKER_RSS_MB drops what it holds and, still past it, says "bye" with
    its answer and ends: the answer is used, and the next check starts another worker."""
    checks.Z3_WORKERS.stop()  # workers started before read the limit at their start
    monkeypatch.setenv("SMTDIMS_Z3_WORKER_RSS_MB", "1")  # every worker is past it
    local = checks.KillableSolver.local
    ran_here: list = []  # the solvers that checked in this process rather than in a worker
    monkeypatch.setattr(checks.KillableSolver, "local", property(lambda self: ran_here.append(self) or local.fget(self)))
    rng = random.Random(11)
    started = sum(w.generation for w in checks.Z3_WORKERS.workers())
    for _ in range(6):
        ctx = z3.Context()
        fs, _ = _formulas(ctx, rng)
        here, _ = _check(fs, None)
        there, s = _check(fs, 30.0)
        assert here == there and s not in ran_here, [str(f) for f in fs]  # the worker's answer, used
        assert all(w.proc is None for w in checks.Z3_WORKERS.workers())  # retired at its "bye"
    assert sum(w.generation for w in checks.Z3_WORKERS.workers()) - started == 6  # a process for each check
    checks.Z3_WORKERS.stop()  # the next tests' workers start without the limit


def test_a_worker_lets_go_of_the_contexts_it_drops():
    """The worker keeps CONTEXTS contexts; the ones it drops are freed at once, not at a full garbage
    collection (the tactic cached on a context holds it in a cycle; such contexts, 17 MB each, took a
    worker that answered the fuzzer's mix to 2.6 GB)."""
    import gc
    import sys
    import weakref
    from collections import OrderedDict
    from pathlib import Path

    sys.path.insert(0, str(Path(checks.__file__).parent))
    try:
        import _z3_strategy as strategy
        import _z3_worker as worker
    finally:
        sys.path.pop(0)
    state: dict = {"solvers": OrderedDict(), "contexts": OrderedDict()}
    seen = []
    gc.disable()
    try:
        for key in range(1, 25):
            answer = worker.handle(z3, strategy, state, {
                "ctx": key, "key": key, "reset": True, "budget": 100_000, "fast": False, "nonlinear": True,
                "smt2": "(declare-fun a () Int)\n(assert (>= (* a a) 9))\n(assert (<= a 5))\n(assert (>= a 1))\n"})
            assert answer["r"] == "sat" and answer["model"]["a"] in ("3", "4", "5")
            seen.append(weakref.ref(state["contexts"][key]))
        alive = sum(r() is not None for r in seen)
        assert alive <= worker.CONTEXTS, alive
    finally:
        gc.enable()


def test_prestarted_workers_are_the_ones_the_first_questions_use():
    """``prestart_workers`` (pytest --smtdims, smtdims run) starts the ISL and Z3 processes without
    waiting; the first questions then use those processes rather than starting their own."""
    from smtdims.engines import presburger
    from smtdims.reasoner import prestart_workers

    checks.Z3_WORKERS.stop()
    isl = presburger.worker()
    with isl.lock:
        if isl.proc is not None:  # ended, so that prestart has one to start
            isl.proc.kill()
            isl.proc.wait()
    dead = isl.proc
    prestart_workers()
    z3_procs = [w.proc for w in checks.Z3_WORKERS.workers() if w.proc is not None]
    assert z3_procs, "no Z3 worker was started"
    isl_proc, generation = isl.proc, isl.generation
    if presburger.available():
        assert isl_proc is not None and isl_proc is not dead
    assert smtdims.decide("a*b", ">=", "a", deadline=30).status == "true"  # nonlinear: a Z3 worker
    assert any(w.proc is p for w in checks.Z3_WORKERS.workers() for p in z3_procs)
    if presburger.available():
        b = smtdims.bounds("mod(a + 3, 5) + 2*b", constraints=["a + b <= 9"], deadline=30)
        assert (b.lo, b.hi, b.answered_by) == (2, 20, "presburger")
        assert isl.proc is isl_proc and isl.generation == generation  # the prestarted process answered


def test_polling_stops_as_soon_as_every_core_is_taken():
    """``idle_core`` reads how many processes run now, not the 1-minute load average (which trails
    a new load by a minute, while every poll took the core from the worker it waited for): with
    as many CPU-bound processes as cores started a moment ago, it says no core is idle."""
    import os
    import subprocess
    import sys
    import time

    from smtdims.engines import workers

    cores = os.cpu_count() or 1
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]
    try:
        time.sleep(0.3)
        assert workers.runnable() >= cores + 1  # the hogs and this process
        time.sleep(0.6)  # idle_core's reading is kept 0.5 s: past it, the next call looks it up again
        assert not workers.idle_core()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
