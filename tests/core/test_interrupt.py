"""Ctrl-C stops smtdims promptly.

Z3 handles SIGINT itself while a check runs and only cancels the check; smtdims used to take
the cancel for "unknown" and go on. Now a check cut by Ctrl-C re-delivers the signal to
Python's handler: KeyboardInterrupt in Python (also inside ``jax.export``), exit status 130 on
the command line, within about a second, and the cut answer is never cached.

Each test runs a query that takes far longer than the test (Fermat's cubes with a huge rlimit:
Z3 works until the deadline) in a subprocess, sends it SIGINT, and times the reaction. Timing
bounds are generous (the machine is shared); the measured reaction is about 0.01-0.4 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGINT delivery to a subprocess: POSIX only")

SLOW = "(a^3 + b^3 - c^3)^2"  # bounds: Z3 keeps searching until the deadline (minutes at this rlimit)
HUGE = 10**10  # rlimit: no budget stops it first
REACT = 3.0  # seconds allowed between SIGINT and the reaction (measured: well under 1 s)


def _spawn(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_line(p: subprocess.Popen, want: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    assert p.stdout is not None
    while time.monotonic() < end:
        line = p.stdout.readline()
        if not line:
            break
        if line.strip() == want:
            return
    p.kill()
    raise AssertionError(f"subprocess never printed {want!r}: {p.communicate()}")


def _interrupt(p: subprocess.Popen, after: float = 3.0) -> float:
    """SIGINT ``after`` seconds from now; the seconds until the process exits."""
    time.sleep(after)
    assert p.poll() is None, p.communicate()
    t = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError("SIGINT did not stop the query within 30 s") from None
    return time.monotonic() - t


def test_bounds_raises_keyboard_interrupt_and_caches_nothing():
    p = _spawn(f"""
        import time, smtdims
        smtdims.bounds("a + b")  # imports and first use out of the way
        print("ready", flush=True)
        t = time.monotonic()
        try:
            smtdims.bounds({SLOW!r}, budget={HUGE}, deadline=60)
            print("returned")
        except KeyboardInterrupt:
            print("interrupted", round(time.monotonic() - t, 2))
        s = smtdims.stats()
        print("interrupts", s["interrupts"], "clocked", s["clock_shaped_answers"])
        hits = s["cache_hits"]
        t = time.monotonic()
        b = smtdims.bounds({SLOW!r}, budget={HUGE}, deadline=2)  # the same question again
        took = time.monotonic() - t
        print("again", b.deterministic, smtdims.stats()["cache_hits"] - hits, took >= 1.5)
    """)
    _wait_line(p, "ready")
    time.sleep(3.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=90)
    lines = out.splitlines()
    assert lines[0].startswith("interrupted"), (out, err)
    assert float(lines[0].split()[1]) < 3.0 + REACT, out
    assert lines[1].startswith("interrupts 1"), out
    # not from a cache: the second call works (until its own deadline) and is clock-shaped itself
    assert lines[2] == "again False 0 True", out


def test_cli_exits_130_on_sigint_with_two_queries():
    p = subprocess.Popen([sys.executable, "-m", "smtdims", "bounds", SLOW, SLOW + " + 1",
                          "--budget", str(HUGE), "--deadline", "60"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    took = _interrupt(p, after=5.0)  # one Ctrl-C ends the whole run, not just the first query
    out, err = p.communicate()
    assert p.returncode == 130, (p.returncode, out, err)
    assert "interrupted" in err and "budget" not in err, err
    assert took < REACT, took


def test_sigint_ignored_does_not_cut_a_check():
    """SIG_IGN means "do not stop": Z3's handler is not enabled, the answer is the one a quiet run gives."""
    p = _spawn("""
        import signal, smtdims
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("ready", flush=True)
        b = smtdims.bounds("(a^3 + b^3 - c^3)^2", budget=5_000_000, deadline=60)  # about 1-4 s of checks
        print("done", b.deterministic, smtdims.stats()["interrupts"])
    """)
    _wait_line(p, "ready")
    for _ in range(5):
        time.sleep(0.3)
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert out.strip().splitlines()[-1] == "done True 0", (out, err)


def test_non_raising_handler_ends_the_question_as_clock_shaped():
    """A handler that does not raise (asyncio's first Ctrl-C cancels a task) still ends the question."""
    p = _spawn(f"""
        import signal, time, smtdims
        seen = []
        signal.signal(signal.SIGINT, lambda *a: seen.append(1))
        print("ready", flush=True)
        t = time.monotonic()
        b = smtdims.bounds({SLOW!r}, budget={HUGE}, deadline=60)
        print("done", b.deterministic, len(seen), round(time.monotonic() - t, 2))
    """)
    _wait_line(p, "ready")
    time.sleep(3.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=90)
    word, det, seen, took = out.split()
    assert (word, det, seen) == ("done", "False", "1"), (out, err)
    assert float(took) < 3.0 + REACT, out


def test_background_thread_does_not_swallow_ctrl_c():
    """A check in another thread must not take the main thread's SIGINT (Z3's handler is process-wide)."""
    p = _spawn(f"""
        import threading, time, smtdims
        def work():
            try:
                smtdims.bounds({SLOW!r}, budget={HUGE}, deadline=20)
            finally:
                print("worker done", flush=True)
        threading.Thread(target=work, daemon=True).start()
        print("ready", flush=True)
        t = time.monotonic()
        try:
            while True:
                time.sleep(0.05)
        except KeyboardInterrupt:
            print("interrupted", round(time.monotonic() - t, 2), flush=True)
    """)
    _wait_line(p, "ready")
    time.sleep(3.0)
    t = time.monotonic()
    p.send_signal(signal.SIGINT)
    assert p.stdout is not None
    line = p.stdout.readline()
    took = time.monotonic() - t
    p.kill()
    p.communicate()
    assert line.startswith("interrupted"), line
    assert took < REACT, took


def test_export_raises_keyboard_interrupt():
    pytest.importorskip("jax")
    p = _spawn(f"""
        import time
        import jax, jax.numpy as jnp
        from jax import export
        import smtdims
        smtdims.install(budget={HUGE}, deadline=60)
        a, b, c = export.symbolic_shape("a, b, c")
        n = (a**3 + b**3 - c**3) ** 2  # slicing 1 element asks whether n >= 1: Fermat's n = 3
        f = jax.jit(lambda x: jax.lax.slice_in_dim(x, 0, 1))
        print("ready", flush=True)
        t = time.monotonic()
        try:
            export.export(f)(jax.ShapeDtypeStruct((n,), jnp.float32))
            print("exported")
        except KeyboardInterrupt:
            print("interrupted", round(time.monotonic() - t, 2))
    """)
    _wait_line(p, "ready", timeout=120)
    time.sleep(3.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=90)
    assert out.startswith("interrupted"), (out, err[-2000:])
    assert float(out.split()[1]) < 3.0 + REACT, out
