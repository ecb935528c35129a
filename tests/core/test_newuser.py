"""What a new user meets first. Big constants printed everywhere; ``smtdims run --json-out`` never
overwrites the program; Ctrl-C never lost; readable witnesses; the smaller items (help, stats). At the export
and run commands (export constraints, a failed export's user frame, report columns):
tests/pipeline/test_newuser_export.py."""

from __future__ import annotations

import gc
import json
import signal
import time

import pytest
from hypothesis import HealthCheck, given, settings

import smtdims
from smtdims import cli
from smtdims.cli import common, dispatch
from smtdims.lang.bigints import int_text, readable_int, text_int
from smtdims.lang.constraints import ConstraintSet
from smtdims.lang.parser import parse_expr
from smtdims.reasoner import REGISTRY
from tests import strategies as S


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# -- 1. integers past Python's 4,300-digit str() limit ------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["bounds", "a", "-c", "a <= 10**5000"],
    ["bounds", "10**5000"],
    ["decide", "a <= 10**4500"],
    ["explain", "a", "-c", "a <= 10**5000"],
    ["explain", "a <= 10**4500"],
    ["check-constraints", "a <= 10**5000", "a >= 10**4999"],
], ids=["bounds-constraint", "bounds-constant", "decide", "explain-bounds", "explain-decision", "check-constraints"])
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_huge_constants_print_in_text_and_json(capsys, argv, as_json):
    rc, out, err = run(capsys, *argv, *(["--json"] if as_json else []))
    assert rc in (common.EXIT_OK, common.EXIT_UNDETERMINED), err
    if as_json:
        data = json.loads(out)  # valid JSON; ints past 4,000 digits as exact decimal text
        texts = [v for v in _leaves(data) if isinstance(v, str) and len(v) > 4000]
        assert texts and all(10**4499 <= text_int(v) <= 10**5000 + 1 for v in texts)
    else:
        assert "10^5000" in out or "10^4500" in out or "10^4999" in out
        assert max(len(line) for line in out.splitlines()) < 200  # exact, and readable


def _leaves(data):
    if isinstance(data, dict):
        for v in data.values():
            yield from _leaves(v)
    elif isinstance(data, list):
        for v in data:
            yield from _leaves(v)
    else:
        yield data


def test_readable_int_is_exact_and_reads_back():
    for v in (10**5000, 10**5000 - 1, 5 * 10**4999, 2**20000, 3 * 2**20000 + 7, -(10**200 + 3), 12345 * 10**300 - 999999,
              3**9000, 10**99, 2**64 + 1):
        text = readable_int(v)
        assert parse_expr(text).as_constant() == v, text
        assert text_int(int_text(v)) == v
    assert readable_int(10**5000) == "10^5000" and readable_int(10**5000 - 1) == "10^5000 - 1"
    assert readable_int(2**64 + 1) == str(2**64 + 1)  # below 10**100: as Python prints it
    e = parse_expr("(10**5000 - 1)*a - 10**5000 - 1")
    assert parse_expr(str(e)) == e and str(e) == "(10^5000 - 1)*a - (10^5000 + 1)"
    # every near-power form is found past the one-division filter (the residue test): m*B^k + r
    # for random m, k, and r at and around the remainder's limit (10**6, exclusive)
    import random

    rng = random.Random(3)
    for _ in range(300):
        base, k = rng.choice(((10, rng.randint(101, 400)), (2, rng.randint(340, 1400))))
        m = rng.randint(1, base**rng.randint(1, 19))  # a lead of at most 19 digits (bits): the form's limit is 20
        r = rng.choice((0, 1, -1, 999_999, -999_999, 10**6, -(10**6), rng.randint(-(10**6) + 1, 10**6 - 1)))
        v = m * base**k + r
        text = readable_int(v)
        assert parse_expr(text).as_constant() == v, text
        if abs(r) < 10**6:
            assert "^" in text and len(text) < 60, (m, base, k, r, text)


def test_bounds_and_explanations_of_huge_values_describe():
    b = smtdims.bounds("a", constraints=("a <= 10**5000",))
    assert b.hi == 10**5000 and "hi = 10^5000: tight, attained at a = 10^5000" in b.describe()
    assert "hi = 10^5000" in str(b.explain())
    d = b.to_dict()
    assert d["hi"] == int_text(10**5000) and d["hi_witness"] == {"a": int_text(10**5000)}
    import pickle

    assert pickle.loads(pickle.dumps(b)).hi_witness == {"a": 10**5000}
    ex = smtdims.decide("a <= 10**4500").explain()
    assert "a <= 10^4500" in str(ex) and json.dumps(smtdims.lang.results.json_safe(ex.to_dict()))


# -- 2. smtdims run --json-out never overwrites the program ---------------------------------
@pytest.mark.parametrize("which", ["program", "argument", "existing-py"])
def test_run_json_out_refuses_to_overwrite(tmp_path, capsys, monkeypatch, which):
    monkeypatch.chdir(tmp_path)
    for name in ("prog.py", "victim.py", "data.txt"):
        (tmp_path / name).write_text(f"# {name}\n")
    target = {"program": "prog.py", "argument": "data.txt", "existing-py": "victim.py"}[which]
    rc = cli.main(["run", "--json-out", target, "prog.py", "data.txt"])
    assert rc == 2 and "would be overwritten" in capsys.readouterr().err
    assert (tmp_path / target).read_text() == f"# {target}\n"


# -- 4. Ctrl-C is never lost ------------------------------------------------------------------------------------
def _command(monkeypatch, body):
    monkeypatch.setitem(dispatch.COMMANDS, "bounds", lambda args: body())


def _busy(seconds: float = 3.0) -> int:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.01)
    return common.EXIT_OK


def test_ctrl_c_swallowed_by_a_bare_except_still_ends_the_run(capsys, monkeypatch):
    def body() -> int:
        try:
            signal.raise_signal(signal.SIGINT)
        except BaseException:  # noqa: BLE001 - what a library's bare except does
            pass
        return _busy()

    _command(monkeypatch, body)
    t = time.monotonic()
    rc, out, err = run(capsys, "bounds", "a")
    assert rc == common.EXIT_INTERRUPTED and time.monotonic() - t < 2.0 and "interrupted" in err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # given back


def test_ctrl_c_during_a_gc_callback_is_not_lost(capsys, monkeypatch):
    """JAX's _xla_gc_callback: a KeyboardInterrupt raised inside it is printed as "Exception ignored" and dropped."""
    fired: list[int] = []

    def hook(phase: str, info: dict) -> None:
        if phase == "start" and not fired:
            fired.append(1)
            signal.raise_signal(signal.SIGINT)  # the handler runs here, inside the gc callback

    def body() -> int:
        gc.callbacks.append(hook)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(hook)
        return _busy()

    _command(monkeypatch, body)
    rc, out, err = run(capsys, "bounds", "a", "--json")
    assert fired and rc == common.EXIT_INTERRUPTED and "Exception ignored" not in err
    assert json.loads(out)["error"]["type"] == "KeyboardInterrupt"  # --json: an error object, as other errors


# -- 6. the typo hint for every -c; witnesses a reader checks at a glance --------------------------------------------
def test_bounds_gives_the_typo_hint(capsys):
    rc, out, err = run(capsys, "bounds", "2*batch", "-c", "bacth >= 3")
    assert "did you mean 'batch'?" in err


@pytest.mark.parametrize("expr,constraints,end,witness", [
    ("2*b", ("bacth >= 3",), "lo", {"b": 1, "bacth": 3}),
    ("max(a, b) - min(a, b)", (), "lo", {"a": 1, "b": 1}),
    ("max(a, b) - min(a, b)", ("a >= 1000",), "lo", {"a": 1000, "b": 1000}),
    ("a - b", ("a >= b + 100", "a <= 5000"), "lo", {"a": 101, "b": 1}),
    ("mod(a, 7)", ("a <= 1000",), "lo", {"a": 7}),
])
def test_witnesses_are_the_smallest(expr, constraints, end, witness):
    REGISTRY.clear()
    b = smtdims.bounds(expr, constraints=constraints)
    assert getattr(b, f"{end}_witness") == witness


@settings(max_examples=60, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(S.cases(S.GenConfig(max_vars=3, max_constraints=2, big=0.0)))
def test_bound_witnesses_meet_the_constraints_and_attain_the_end(case):
    """Soundness of the smaller witnesses: every tight finite end's witness meets the constraints and
    attains the end exactly; and its values are small (<= 8) or no grid valuation attains it with a
    smaller sum (a valuation with a smaller sum lies inside the grid, so the grid decides)."""
    cs = ConstraintSet.of(case.constraint_texts)
    e = parse_expr(case.expr_text)
    try:
        b = smtdims.bounds(e, constraints=case.constraint_texts, budget=20_000)
    except smtdims.SmtdimsError:
        return
    for value, tight, w in ((b.lo, b.lo_tight, b.lo_witness), (b.hi, b.hi_tight, b.hi_witness)):
        if not tight or value in (float("inf"), float("-inf")):
            continue
        assert w is not None and cs.holds(w) and e.evaluate(w) == value, (case.describe(), value, w)
        if max(w.values(), default=1) <= 8 or not b.deterministic:
            continue
        names = sorted(w)
        g = S.grid_size(len(names))
        best = None
        import itertools

        for vals in itertools.product(range(1, g + 1), repeat=len(names)):
            env = dict(zip(names, vals, strict=True))
            try:
                if cs.holds(env) and e.evaluate(env) == value and (best is None or sum(vals) < best):
                    best = sum(vals)
            except ZeroDivisionError:
                continue
        if best is not None and best - len(names) + 1 <= g:
            assert sum(w.values()) <= best, (case.describe(), value, w, best)


# -- 8. the smaller ones ------------------------------------------------------------------------------------------------
def test_solver_answers_count_only_answers_that_ran_z3():
    REGISTRY.clear()
    smtdims.reset_stats()
    smtdims.bounds("a*b", constraints=("a >= 16", "b >= a"))  # rays and known points: no Z3 check
    s = smtdims.stats()
    assert s["answers_by_rung"]["search"] == 1 and s["solver_checks"] == 0 and s["solver_answers"] == 0
    REGISTRY.clear()
    smtdims.bounds("mod(a*b, 7)")
    s = smtdims.stats()
    assert s["solver_checks"] > 0 and s["solver_answers"] == 1


def test_check_constraints_documents_clean(capsys):
    rc, out, _ = run(capsys, "check-constraints", "--help")
    assert rc == 0 and "clean (true when satisfiable" in " ".join(out.split())
    rc, out, _ = run(capsys, "check-constraints", "a >= 2", "--json")
    assert json.loads(out)["clean"] is True


