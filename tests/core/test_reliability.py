"""Names that are SMT-LIB or Z3 words, workers and temporary directories that outlive a
killed caller, a parse error 3,000 levels deep, and one rule for a divisor that can be 0."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
import traceback
from pathlib import Path

import pytest
import z3

import smtdims
from smtdims import clocks, options
from smtdims.engines import checks, encoding
from smtdims.errors import ParseError
from tests.fuzz_tool import FUZZ

ROOT = Path(__file__).resolve().parents[2]


# -- 1. names that are SMT-LIB or Z3 words reach Z3 intact ----------------------------------------------------
WORDS = FUZZ.SMT_WORDS  # the fuzzer's list: SMT-LIB reserved words, commands, theory symbols, Z3's own


def test_the_repro_an_empty_scope_is_refused_whatever_its_names():
    # before: Bounds(1, inf), tight, with the witness x = 1 (the worker misread `true*true`)
    with pytest.raises(smtdims.UnsatisfiableConstraintsError):
        smtdims.bounds("x", constraints=["x - x >= 4", "true*true >= 2"])


@pytest.mark.parametrize("w", ["true", "false", "and", "or", "not", "distinct", "as", "_", "let", "ite", "xor",
                               "div", "abs", "Int", "Bool", "assert", "push", "pi", "euler", "rem", "exists"])
def test_nonlinear_questions_in_the_worker_with_word_names(w):
    u = "y" if w != "y" else "z"
    cs = [f"{w}*{u} >= 6", f"{w} <= 3", f"{u} <= 4"]
    b = smtdims.bounds(f"{w}*{w} - {u}", constraints=cs)  # nonlinear: its checks run in the Z3 worker
    assert (b.lo, b.hi) == (0, 7) and b.lo_tight and b.hi_tight
    for end, wit in ((b.lo, b.lo_witness), (b.hi, b.hi_witness)):
        assert set(wit) == {w, u}  # the witnesses come back under the user's names
        assert wit[w] * wit[w] - wit[u] == end and smtdims.ConstraintSet.of(cs).holds(wit)
    assert smtdims.decide(f"{w}*{u}", ">=", "7", constraints=cs).status == "undetermined"
    assert smtdims.decide(f"{w}*{w}", ">=", "4", constraints=cs).status == "true"
    with pytest.raises(smtdims.UnsatisfiableConstraintsError) as info:
        smtdims.check_constraints([*cs, f"{w}*{w}*{u} >= 37"])
    assert f"{w}*{w}*{u} >= 37" in info.value.conflict


def test_every_word_through_the_worker_and_back():
    """Every word of the list at once, as the integers and as the core literals of one worker check."""
    names = [w for w in WORDS if w not in ("mod", "max", "min", "floordiv")]
    cs = [f"{a}*{b} >= 2" for a, b in zip(names, names[1:], strict=False)] + [f"{names[0]} <= 1"]
    r = smtdims.check_constraints(cs, deadline=30)
    assert r.satisfiable and smtdims.ConstraintSet.of(cs).holds(r.example)
    assert r.ranges[names[0]] == (1, 1)
    with pytest.raises(smtdims.UnsatisfiableConstraintsError) as info:
        smtdims.check_constraints([*cs, f"{names[0]}*{names[1]} <= 1"], deadline=30)
    assert set(info.value.conflict) == {f"{names[0]}*{names[1]} >= 2", f"{names[0]}*{names[1]} <= 1"}


def test_isl_keywords_as_names():
    # ISL's text gets positional aliases (v0, v1...): its keywords are names like any other
    cs = ["and <= 5", "or <= 7", "exists + infty >= 3", "floor >= ceil + 2"]
    b = smtdims.bounds("mod(and, 3) + or - floor + ceil", constraints=cs)
    assert (b.lo, b.hi) == (-math.inf, 7)
    assert b.hi_tight and smtdims.ConstraintSet.of(cs).holds(b.hi_witness)
    assert smtdims.decide("and + or", "<=", "12", constraints=cs).status == "true"


def test_the_symbol_is_quoted_injective_and_parses_back():
    tricky = ["true", "let", "_", "x|y", "x\\y", "a~3b;", "a~7c;", "x y", "x\ny", "β", "x̃"]
    syms = [encoding.symbol(n) for n in tricky]
    assert len(set(syms)) == len(tricky)
    ctx = z3.Context()
    xs = [z3.Int(s, ctx) for s in syms]
    # a check under a deadline runs in a Z3 worker, which reads the formulas as SMT-LIB text and answers
    # with its model by name: every name must be read as the variable it is (one model: x_i = i + 1)
    s = checks.make_solver(ctx, 200_000, killable=True)
    s.add(*[x >= i + 1 for i, x in enumerate(xs)], z3.Sum(xs) <= 66)
    with options.scoped(deadline=30.0), clocks.question() as d:
        assert s.check(deadline=d) == z3.sat
    m = s.model()
    assert not isinstance(m, z3.ModelRef)  # the worker's model (a check here would give Z3's own)
    assert [m.eval(x) for x in xs] == list(range(1, len(xs) + 1))


def test_ray_certificates_and_smtlib_scripts_with_word_names():
    b = smtdims.bounds("true*false - 3*true^2")
    assert (b.lo, b.hi) == (-math.inf, math.inf) and b.lo_tight and b.hi_tight
    from smtdims.cli import smtlib

    script = smtlib.decision_script(smtdims.ConstraintSet.of(["let >= 3"]), *smtdims.lang.parser.parse_comparison("let*as >= 3"),
                                  "true", 100_000)
    ctx = z3.Context()
    out = z3.Z3_eval_smtlib2_string(ctx.ref(), script)
    assert [ln for ln in out.splitlines() if ln in ("sat", "unsat")] == ["unsat", "sat"]



# -- 2. workers end with their caller, however it ends ---------------------------------------------------------
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

CALLER = textwrap.dedent("""
    import math, sys, smtdims
    smtdims.bounds("mod(x, 3) + y", constraints=["x <= 5", "y <= 7"])  # the ISL worker, where islpy is installed
    print("asking", flush=True)
    # Z3 busy in C code in its worker for minutes (rlimit 10**10, no deadline)
    smtdims.decide("a*a*a + b*b*b != c*c*c", budget=10**10, deadline=math.inf)
""")


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def children(pid: int) -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit() and (st := _stat(int(d))) and int(st[1]) == pid]


def running(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] != "Z"  # a zombie has ended (whoever adopted it reaps it)


def cpu_seconds(pid: int) -> float:
    st = _stat(pid)
    return 0.0 if st is None else (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")


def kill_the_caller(sig: int, script: str = CALLER, settle: float = 1.0) -> tuple[list[int], float, list[int]]:
    """Start ``script``, let its question run ``settle`` s, send ``sig``: (its workers, seconds until
    the last ended, those still running after 5 s, killed then)."""
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "asking"
        time.sleep(settle)
        workers = children(p.pid)
        assert workers and all(running(w) for w in workers)
        t = time.monotonic()
        p.send_signal(sig)
        p.wait(timeout=10)
        while any(running(w) for w in workers) and time.monotonic() - t < 5:
            time.sleep(0.002)
        left = [w for w in workers if running(w)]
        return workers, time.monotonic() - t, left
    finally:
        p.kill()
        p.wait()
        for w in children(p.pid) if p.poll() is None else []:
            os.kill(w, signal.SIGKILL)


@linux_only
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_workers_end_within_a_second_of_their_killed_caller(sig):
    workers, took, left = kill_the_caller(sig)
    for w in left:
        os.kill(w, signal.SIGKILL)
    assert not left, f"workers {left} still running 5 s after the caller's {signal.Signals(sig).name}"
    assert took < 1.0, took  # measured: about 0.01 s, with Z3 busy in C code


def test_no_deadline_at_all():
    # deadline=math.inf: the wait for the worker raised OverflowError (select, and the watchdog
    # thread's wait, which ended that thread for the rest of the process)
    d = smtdims.decide("a*b*c", ">=", "a + b", constraints=["c >= 2"], deadline=math.inf)
    assert d.status == "true"
    assert smtdims.watchdog.WATCHDOG.thread is None or smtdims.watchdog.WATCHDOG.thread.is_alive()
    assert smtdims.decide("a*b", ">=", "a", deadline=5).status == "true"


@linux_only
def test_a_worker_holding_the_interpreter_ends_when_its_request_expires():
    """ISL holds the interpreter while it runs: no thread of the worker can notice its caller is gone,
    so each request carries its expiry and the kernel's timer ends the process then."""
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT / "smtdims" / "engines")!r})
        import _lifeline
        _lifeline.watch()
        _lifeline.alarm(time.monotonic() + 0.3)
        sum(range(10**11))  # C code that keeps the interpreter for minutes
    """)
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-c", script], timeout=30)
    assert p.returncode == -signal.SIGALRM and time.monotonic() - t < 5



# -- 3. temporary directories: removed on SIGTERM, and after a SIGKILL by the next process -------------------
MAKER = textwrap.dedent("""
    import signal, sys, time
    from smtdims.engines import tempdirs
    if sys.argv[1] == "own-handler":
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(3))  # the program's own: kept as it is
    a = tempdirs.mkdtemp("verify-worker")
    with tempdirs.TemporaryDirectory("verify") as b:
        open(b + "/job.json", "w").write("{}")
        print(a, b, flush=True)
        time.sleep(60)
""")


def _make_dirs_then(sig: int, tmp_path: Path, mode: str = "") -> tuple[subprocess.CompletedProcess, list[Path]]:
    env = dict(os.environ, TMPDIR=str(tmp_path))
    p = subprocess.Popen([sys.executable, "-c", MAKER, mode], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    assert p.stdout is not None
    dirs = [Path(d) for d in p.stdout.readline().split()]
    assert len(dirs) == 2 and all(d.is_dir() and d.parent == tmp_path for d in dirs)
    p.send_signal(sig)
    p.wait(timeout=10)
    return p, dirs


def test_sigterm_removes_the_directories_and_still_ends_the_process_as_sigterm(tmp_path):
    p, dirs = _make_dirs_then(signal.SIGTERM, tmp_path)
    assert p.returncode == -signal.SIGTERM  # the default action's exit status, after the cleanup
    assert not any(d.exists() for d in dirs)


def test_a_programs_own_sigterm_handler_is_kept_and_the_directories_go_at_its_exit(tmp_path):
    p, dirs = _make_dirs_then(signal.SIGTERM, tmp_path, "own-handler")
    assert p.returncode == 3 and not any(d.exists() for d in dirs)


def test_what_a_sigkilled_process_left_is_removed_by_the_next_one(tmp_path):
    from smtdims.engines import tempdirs

    p, dirs = _make_dirs_then(signal.SIGKILL, tmp_path)
    assert p.returncode == -signal.SIGKILL and all(d.exists() for d in dirs)
    other = tmp_path / "smtdims-verify-unrelated"  # not one of ours by name: kept
    other.mkdir()
    assert sorted(tempdirs.sweep(str(tmp_path))) == sorted(map(str, dirs))
    assert not any(d.exists() for d in dirs) and other.is_dir()
    mine = Path(tempdirs.mkdtemp("mine", root=str(tmp_path)))  # a running owner's: kept
    try:
        assert tempdirs.sweep(str(tmp_path)) == [] and mine.is_dir()
    finally:
        tempdirs.remove(str(mine))
    assert not mine.exists()
    # the next process that makes a directory sweeps by itself
    p, dirs = _make_dirs_then(signal.SIGKILL, tmp_path)
    env = dict(os.environ, TMPDIR=str(tmp_path))
    subprocess.run([sys.executable, "-c", "from smtdims.engines import tempdirs; tempdirs.remove(tempdirs.mkdtemp())"],
                   env=env, cwd=ROOT, check=True)
    assert not any(d.exists() for d in dirs)


def test_the_sigterm_handler_exists_only_while_a_directory_does():
    from smtdims.engines import tempdirs

    fresh = sys.modules.get("smtdims_jax.pipeline.fresh")
    if fresh is not None:  # an earlier test's verification process keeps its directory: end it first
        fresh.close_workers()
    assert not tempdirs.live(), tempdirs.live()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    with tempdirs.TemporaryDirectory("x") as d:
        assert os.path.isdir(d) and tempdirs.handles_sigterm()
    assert not os.path.exists(d) and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


# -- 4. a parse error 3,000 levels deep: raised from the top, with the limit -----------------------------------
@pytest.mark.parametrize("call", [smtdims.parse_expr, smtdims.bounds, lambda t: smtdims.decide(t, ">=", "1"),
                                  lambda t: smtdims.check_constraints([f"{t} >= 1"])])
def test_a_parse_error_deep_down_has_a_short_traceback_and_says_the_limit(call):
    text = "(" * 3000 + "x" + ")" * 3000
    with pytest.raises(ParseError) as info:
        call(text)
    frames = traceback.extract_tb(info.value.__traceback__)
    assert len(frames) < 20, len(frames)  # was 2,008
    assert info.value.position == smtdims.lang.parser.MAX_NESTING - 1  # the first parenthesis past the limit
    assert "3000 levels" in info.value.detail and f"MAX_NESTING = {smtdims.lang.parser.MAX_NESTING}" in info.value.detail
    ok = "(" * (smtdims.lang.parser.MAX_NESTING - 1) + "x" + ")" * (smtdims.lang.parser.MAX_NESTING - 1)
    assert smtdims.parse_expr(ok) == smtdims.parse_expr("x")
    with pytest.raises(ParseError):
        smtdims.parse_expr("(" + ok + ")")


# -- 5. one rule for a divisor that can be 0: the constraints' own, everywhere ------------------------------------
def test_a_constraints_own_divisor_one_rule_in_every_entry_point():
    cs = ["mod(a, b - 2) == 1"]  # holds only where b != 2 (docs/semantics.md)
    r = smtdims.check_constraints(cs)  # before: PossibleDivisionByZeroError
    assert r.satisfiable and r.self_guarded == ("b - 2",)
    # b = 1 and b = 3 make the divisor -1 and 1 (remainder 0), b = 2 makes it 0: the constraint holds from b = 4
    assert r.example["b"] >= 4 and r.ranges["a"] == (1, math.inf) and r.ranges["b"] == (4, math.inf)
    assert smtdims.decide("b", "!=", "2", constraints=cs).status == "true"
    assert smtdims.bounds("b", constraints=cs) == (4, math.inf)
    assert smtdims.bounds("a", constraints=cs) == (1, math.inf)
    assert smtdims.bounds("mod(a, b - 2)", constraints=cs) == (1, 1)  # the question's divisor is nonzero there
    # a divisor of the question that can be 0 under the constraints stays an error, everywhere
    with pytest.raises(smtdims.PossibleDivisionByZeroError):
        smtdims.bounds("floordiv(a, b - 5)", constraints=cs)
    with pytest.raises(smtdims.PossibleDivisionByZeroError):
        smtdims.decide("floordiv(a, b - 5)", ">=", "0", constraints=cs)


# -- the fuzzer's modes for names and workers, in CI's soak step (seconds each) -----------------------------------
@pytest.mark.soak
def test_fuzz_names_compare_finds_no_difference():
    rep = FUZZ.names_compare(40, seed=3)  # names as Z3 read them before: 8 of 120 answers less precise, 0 plain
    assert rep["differ"] == 0, rep["examples"]
    assert not FUZZ.names_compare_failed(rep), rep
    assert rep["answers_compared"] >= 70


@pytest.mark.soak
@pytest.mark.needs_jax  # the fuzzer's oracle asks JAX's seam too
def test_fuzz_run_with_every_case_named_with_words():
    """The oracle's run (brute force, ISL, JAX's seam) with every case's names drawn from the words."""
    p = subprocess.run([sys.executable, "tools/fuzz.py", "--queries", "60", "--smt-names", "1", "--seed", "4",
                        "--no-write", "--seam-big", "0", "--progress", "1000"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert '"cases named with SMT/Z3 words"' in p.stdout


@pytest.mark.soak
@linux_only
def test_fuzz_kill_callers_leaves_no_worker_and_no_directory():
    rep = FUZZ.kill_callers(4, seed=2, settle=(0.1, 1.2))
    assert rep["runs"] == 4 and rep["errors"] == 0, rep["examples"]
    assert rep["workers_left"] == 0 and rep["dirs_left"] == 0, rep["examples"]
