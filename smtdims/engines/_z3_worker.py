"""The Z3 worker process of :mod:`smtdims.engines.checks`: checks that Z3 may not stop at its interrupt run here.

Z3's nonlinear core can go on long past ``ctx.interrupt()`` (many seconds on high-degree
products; for good on a monomial of a hundred factors), and a thread cannot be killed. So every
check under a deadline in a context of its own (nonlinear checks, unsat cores, ``check_constraints``
on a nonlinear set) runs in this process, which the caller kills when the answer is late
(:mod:`smtdims.engines.workers`).

Started as a script; imports nothing of smtdims but :mod:`smtdims.engines._z3_strategy` (by path), so the
check has the caller's strategy and parameters, and :mod:`smtdims.engines._lifeline`, so that it ends with
its caller. One JSON request per line on stdin, one JSON
answer per line on stdout; exits at end of input.

Request: ``{"ctx": int, "key": int, "reset": bool, "smt2": text, "budget": int, "fast": bool,
"nonlinear": bool, "assume": [Bool constant names], "until": monotonic time | null, "expires": monotonic
time | null}`` (``expires``: :func:`smtdims.engines._lifeline.alarm`). The
solver of ``key`` is kept between requests (``reset`` starts it afresh, in the context that
mirrors the caller's context ``ctx``: a new context per caller context, as in process); ``smt2``
holds the declarations and assertions added since the last request for the key. A request for a
key this process does not hold, without ``reset``, gets ``{"missing": true}``. At ``until`` (the
question's deadline, on the machine's monotonic clock) a timer interrupts the check, as the
caller's watchdog does in process.

Answer: ``{"r": "sat" | "unsat" | "unknown", "reason": text, "deadline": bool, "model": {name:
decimal text} (sat: every integer constant of the model), "core": [names] (unsat with assumptions),
"bye": true (this process ends after this answer: it is past MAX_RSS_MB even after dropping what it
held)}``.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import threading
import time
from collections import OrderedDict
from typing import Any

SOLVERS = 16  # solvers held at once (least recently used dropped)
# Contexts held at once: one per context of the caller (a question's), as in process; a context's
# solvers go with it. Each costs about 17 MB with its tactic: 16 solvers each holding a context of
# its own, long after their questions ended, were most of a worker's 500 MB.
CONTEXTS = 4
# Past this resident size (MiB) after an answer, the worker drops every solver and context it holds
# (a caller whose solver is gone gets "missing" and sends it afresh, as after a restart) and gives
# freed memory back (glibc's malloc_trim); still past it, it ends after the answer ("bye"), and the
# caller's next check starts another. Why: a worker that answered the fuzzer's mix for 4 minutes
# held 2.6 GB beside a caller of 190 MB. Replayed, 140 of its requests left 415 MB after every
# solver and context was dropped, and 39 MB after malloc_trim: the pages glibc kept after large
# nonlinear checks, not what the worker held.
MAX_RSS_MB = float(os.environ.get("SMTDIMS_Z3_WORKER_RSS_MB", "256") or 256)
# Seconds each check first sleeps, deaf to its timer: a check Z3 does not stop at the interrupt, for
# the tests of the caller's kill (tests/core/test_bounded_time.py); 0 in normal use.
STALL = float(os.environ.get("SMTDIMS_Z3_WORKER_STALL", "0") or 0)


def handle(z3: Any, strategy: Any, state: dict, req: dict) -> dict:
    solvers: OrderedDict = state["solvers"]
    key = req["key"]
    if req.get("reset"):
        ctx = _context(z3, strategy, state, req["ctx"])
        solvers[key] = (ctx, strategy.solver(ctx, req["budget"], fast=req["fast"], nonlinear=req["nonlinear"]))
        while len(solvers) > SOLVERS:
            solvers.popitem(last=False)
    held = solvers.get(key)
    if held is None:
        return {"missing": True}
    solvers.move_to_end(key)
    ctx, s = held
    if req["smt2"]:
        s.from_string(req["smt2"])
    assume = [z3.Bool(n, ctx) for n in req.get("assume", ())]
    fired: list[bool] = []
    timer = None
    until = req.get("until")
    if until is not None:
        left = until - time.monotonic()
        if left <= 0:
            return {"r": "unknown", "reason": "canceled", "deadline": True}
        timer = threading.Timer(left, lambda: (fired.append(True), ctx.interrupt()))
        timer.daemon = True
        timer.start()
    try:
        if STALL:
            time.sleep(STALL)
        r = s.check(*assume)
    finally:
        if timer is not None:
            timer.cancel()
    answer: dict = {"r": str(r), "deadline": bool(fired)}
    if r == z3.sat:
        m = s.model()
        answer["model"] = {d.name(): m[d].as_string() for d in m.decls()
                           if d.arity() == 0 and d.range() == z3.IntSort(ctx) and z3.is_int_value(m[d])}
    elif r == z3.unsat and assume:
        answer["core"] = [b.decl().name() for b in s.unsat_core()]
    else:
        answer["reason"] = s.reason_unknown()
    return answer


def _context(z3: Any, strategy: Any, state: dict, key: int) -> Any:
    """The context mirroring the caller's context ``key``: the checks of one caller context share
    one here too, so a check sees the same history of terms as it would in process."""
    contexts: OrderedDict = state["contexts"]
    ctx = contexts.get(key)
    if ctx is None:
        ctx = state.pop("spare", None) or _new_context(z3, strategy)
        contexts[key] = ctx
        while len(contexts) > CONTEXTS:
            _, gone = contexts.popitem(last=False)
            solvers = state["solvers"]
            for k in [k for k, (c, _) in solvers.items() if c is gone]:
                del solvers[k]  # a caller that asks again gets "missing" and sends its solver afresh
            _free(gone)
    contexts.move_to_end(key)
    return ctx


def _free(ctx: Any) -> None:
    """Let ``ctx`` go as soon as nothing else holds it. The tactic cached on it (``_smtdims_nia``)
    holds it back: a reference cycle that waits for a full garbage collection, which this process,
    making few Python objects, seldom runs. Dropped contexts piled up, about 17 MB each."""
    vars(ctx).pop("_smtdims_nia", None)


def _new_context(z3: Any, strategy: Any) -> Any:
    ctx = z3.Context()
    strategy.nonlinear_tactic(ctx)  # built once per context, in milliseconds: the spare has it ready
    return ctx


def _rss_mb() -> float:
    """Resident size in MiB (Linux /proc; 0.0 elsewhere: no recycling there)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def _shed(state: dict) -> bool:
    """Past MAX_RSS_MB: drop what is held and give memory back; whether the process may go on."""
    if _rss_mb() <= MAX_RSS_MB:
        return True
    held = [*state["contexts"].values(), *(c for c, _ in state["solvers"].values())]
    spare = state.pop("spare", None)
    state["solvers"].clear()
    state["contexts"].clear()
    for ctx in (*held, *([spare] if spare is not None else [])):
        _free(ctx)
    del held, spare
    gc.collect()  # anything else in a cycle
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)  # glibc keeps freed pages otherwise
    except (OSError, AttributeError):
        pass
    return _rss_mb() <= MAX_RSS_MB


def main() -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _lifeline

    _lifeline.watch()  # first: a caller gone while z3 imports takes this process with it
    # Ctrl-C at a terminal reaches the whole process group: the caller turns it into
    # KeyboardInterrupt and kills this worker if a request was in flight; it must not die first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.set_int_max_str_digits(0) if hasattr(sys, "set_int_max_str_digits") else None
    import _z3_strategy as strategy
    import z3

    state: dict = {"solvers": OrderedDict(), "contexts": OrderedDict()}
    out = sys.stdout
    out.write('{"ready": true}\n')
    out.flush()
    for line in sys.stdin.buffer:
        try:
            req = json.loads(line)
            _lifeline.alarm(req.get("expires"))  # past it the caller, if alive, has killed this process
            answer = handle(z3, strategy, state, req)
        except Exception as err:  # a malformed request must not end the worker
            answer = {"r": "unknown", "reason": f"smtdims worker: {type(err).__name__}: {err}"[:300]}
        finally:
            _lifeline.alarm(None)
        bye = not _shed(state)
        if bye:
            answer["bye"] = True  # the caller retires this process once it has the answer
        out.write(json.dumps(answer) + "\n")
        out.flush()
        if bye:
            return
        if "spare" not in state:  # the next caller context's, built while the caller is busy elsewhere
            state["spare"] = _new_context(z3, strategy)


if __name__ == "__main__":
    main()
