"""Memory is bounded by what is in use, not by how many scopes were ever asked about.

A session's Z3 side (its solvers and encoded terms in the shared context, a recession cone's LP)
costs 0.1-4 MB of Z3 memory; at most ``memory.LIVE_Z3_FAMILIES`` scopes' worth of them (a scope with its
focus sessions) live at once, the least recently used released and rebuilt on its next use, with the
same answers.
"""

from __future__ import annotations

import gc
import math
import platform
import weakref

import pytest

from smtdims import ConstraintSet, clocks, options, parse_expr
from smtdims.engines import context, memory
from smtdims.reasoner import Session


def _constraints(i: int) -> ConstraintSet:
    return ConstraintSet.of(["c <= a + b", "a + c >= 3*b", f"a + b + c <= {60 + i}"])


def _question(i: int) -> tuple:
    """True, and proven only by combining constraints: the interval and point rungs leave it to a
    solver (ISL is off in these tests: Z3 proves it)."""
    return parse_expr("3*a"), ">=", parse_expr(f"b + c - {i % 3}")


def _started(sessions: list[Session]) -> int:
    return sum(s.scope.solver.started for s in sessions)


@pytest.fixture
def four_live(monkeypatch):
    monkeypatch.setattr(memory, "LIVE_Z3_FAMILIES", 4)
    with options.scoped(presburger=False):
        yield


def test_at_most_the_limit_of_z3_sides_live_and_answers_do_not_change(four_live):
    sessions = [Session(_constraints(i)) for i in range(12)]
    first = []
    for i, s in enumerate(sessions):
        d = s.decide(*_question(i))
        assert d.status == "true" and d.answered_by == "solver-linear"
        first.append(d.status)
        assert _started(sessions) <= 4
    assert _started(sessions) == 4  # the four most recent
    assert not sessions[0].scope.solver.started  # released: its next check rebuilds it
    again = [Session(_constraints(i)).decide(*_question(i)).status for i in range(12)]
    assert again == first
    # a released session answers a new question (its solver rebuilt) as a fresh one does
    q = (parse_expr("4*a"), ">=", parse_expr("2*b + c"))
    assert sessions[0].decide(*q).status == Session(_constraints(0)).decide(*q).status
    assert sessions[0].scope.solver.started


def _living_in(ctx: object, sessions: list[Session]) -> list[bool]:
    return [s.scope.solver._z3_ctx is ctx for s in sessions]  # private: which context a session's Z3 side lives in


def test_a_retired_shared_context_is_freed_with_every_session_in_it(four_live):
    sessions = [Session(_constraints(i)) for i in range(3)]
    for i, s in enumerate(sessions):
        s.decide(*_question(i))
    old = context.shared_context()
    assert _living_in(old, sessions) == [True] * 3
    gone = weakref.ref(old)
    memory.retire_shared(old)
    assert _living_in(None, sessions) == [True] * 3
    del old
    gc.collect()
    assert gone() is None, "a session that is not asked again kept the retired context (and its terms) alive"
    assert sessions[1].decide(*_question(4)).status == "true"


def test_families_whose_objects_are_gone_do_not_push_out_live_ones(four_live):
    sessions = [Session(_constraints(i)) for i in range(3)]
    for i, s in enumerate(sessions):
        s.decide(*_question(i))
    for i in range(10):  # short-lived sessions (as explain's temporary solvers are), dropped at once
        Session(_constraints(10 + i)).decide(*_question(i))
    gc.collect()
    Session(_constraints(30)).decide(*_question(0))
    assert _living_in(context.shared_context(), sessions) == [True] * 3


class _Trims(list):
    """The heap trim's calls (recorded, not made), and whether one is owed (``due``)."""

    def __init__(self, state: dict) -> None:
        super().__init__()
        self.state = state

    @property
    def due(self) -> bool:
        return bool(self.state["due"])


@pytest.fixture
def trims(monkeypatch):
    """The calls of the heap trim (recorded, not made), with its clock reset."""
    state = memory._trim_state  # private: the trim's clock (memory.py has no reader): reset here, read through _Trims
    monkeypatch.setitem(state, "due", False)
    monkeypatch.setitem(state, "last", -math.inf)
    calls = _Trims(state)
    monkeypatch.setattr(memory, "_MALLOC_TRIM", lambda pad: calls.append(pad) or 1)  # private: recorded, not made
    return calls


def test_freed_memory_is_given_back_after_a_release_at_most_once_a_second(four_live, trims, monkeypatch):
    first = [Session(_constraints(i)) for i in range(4)]
    for i, s in enumerate(first):  # four families: nothing released, nothing to give back
        s.decide(*_question(i))
    assert trims == []
    kept = [Session(_constraints(10 + i)) for i in range(3)]
    for i, s in enumerate(kept):  # each pushes out the oldest family
        s.decide(*_question(i))
    assert trims == [0], "one trim after the first release; the next ones fall within TRIM_EVERY"
    assert trims.due  # still owed for the later releases
    monkeypatch.setattr(memory, "TRIM_EVERY", 0.0)
    kept[0].decide(*_question(1))  # no release by this question, but one is owed
    assert trims == [0, 0] and not trims.due
    kept[0].decide(*_question(2))
    assert trims == [0, 0], "nothing released since the last trim"


def test_the_trim_waits_for_the_end_of_the_outermost_question(four_live, trims, monkeypatch):
    monkeypatch.setattr(memory, "TRIM_EVERY", 0.0)
    sessions = [Session(_constraints(20 + i)) for i in range(8)]
    with clocks.question():
        for i, s in enumerate(sessions):
            s.decide(*_question(i))
        assert trims.due and trims == [], "a trim inside a question costs that question's time"
    assert trims == [0]


def test_the_trim_is_glibcs_where_glibc_is():
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        pytest.skip("no glibc here: nothing to trim with")
    trim = memory._find_malloc_trim()  # private: the libc lookup itself is what is tested
    assert trim is not None and trim(0) in (0, 1)


def test_a_scope_asked_again_and_again_keeps_a_bounded_number_of_answers(monkeypatch):
    """The empty constraint set of public calls is one session for the whole process: its answer
    caches grew with every question asked of it. Now each keeps the newest CACHE_ENTRIES answers,
    and a forgotten one is computed again, the same."""
    from smtdims import reasoner, scope

    monkeypatch.setattr(scope, "CACHE_ENTRIES", 8)
    s = Session(ConstraintSet.of(["a >= 2"]))
    questions = [(parse_expr(f"{i}*a - b"), ">=", parse_expr(f"{i % 5}")) for i in range(1, 30)]
    first = [s.decide(*q).status for q in questions]
    first_bounds = [s.bounds(parse_expr(f"a + {i}*b")) for i in range(30)]
    caches = s.caches
    assert {"interval", "sign", "bounds", "decision", "proof"} <= set(caches)
    assert all(len(v) <= 8 for v in caches.values()), {k: len(v) for k, v in caches.items()}
    assert (questions[-1][0], ">=", questions[-1][2]) in caches["decision"]  # the newest are kept
    hits = reasoner.stats()["cache_hits"]
    assert [s.decide(*q).status for q in questions] == first
    assert [s.bounds(parse_expr(f"a + {i}*b")) for i in range(30)] == first_bounds
    assert reasoner.stats()["cache_hits"] - hits < 20, "most were forgotten and computed again"
    fresh = Session(ConstraintSet.of(["a >= 2"]))
    assert [fresh.decide(*q).status for q in questions] == first


def test_a_scope_cache_holds_a_bounded_size_of_expressions(monkeypatch):
    """Bounded in entries only, the empty constraint set's interval cache held 75,000 objects after
    4,000 fuzz questions: its keys are the questions' expressions. It also keeps at most CACHE_SIZE
    units of Expr.size(), and the interval evaluator's atom memo at most MEMO_ENTRIES atoms."""
    from smtdims import scope
    from smtdims.rungs import intervals

    monkeypatch.setattr(scope, "CACHE_SIZE", 200)
    monkeypatch.setattr(intervals, "MEMO_ENTRIES", 16)
    s = Session(ConstraintSet.of(["a >= 2"]))
    exprs = [parse_expr(" + ".join(f"max(a, {i}*b + {j})" for j in range(5))) for i in range(1, 40)]
    first = [s.interval(e) for e in exprs]
    assert exprs[-1] in s.caches["interval"] and exprs[0] not in s.caches["interval"]  # the newest are kept
    decided = [s.decide(e, ">=", parse_expr("7")).status for e in exprs]
    for cache in (s.caches["interval"], s.caches["decision"]):
        assert 0 < cache.held <= 200 and cache.held == sum(cache.sizes.values()) == sum(
            sum(x.size() for x in ((k,) if not isinstance(k, tuple) else k) if hasattr(x, "size")) for k in cache)
        assert set(cache.sizes) == set(cache)
    assert s.scope.evaluator.memo_entries <= 16
    assert [s.interval(e) for e in exprs] == first  # forgotten answers come back the same
    assert [s.decide(e, ">=", parse_expr("7")).status for e in exprs] == decided
    assert [Session(ConstraintSet.of(["a >= 2"])).interval(e) for e in exprs] == first
    too_big = parse_expr(" + ".join(f"max(a, {i}*b)" for i in range(1, 1200)))  # size over CACHE_MAX_TERMS
    s.interval(too_big)
    assert too_big not in s.caches["interval"]


def test_a_sized_store_keeps_the_first_value_the_newest_keys_and_nothing_too_large():
    """``SizedMemo(None, ...)``: a store whose values the caller computes (the adapter's constraint sets
    by their texts). ``keep`` hands back the value kept first (threads that raced to compute one all
    get it), ``peek`` computes nothing and marks the key recently used, the least recently used key
    goes first, and a value over CACHE_MAX_TERMS is returned but not kept."""
    from smtdims.lang.memos import CACHE_MAX_TERMS, SizedMemo

    store = SizedMemo(None, entries=2, total=10 * CACHE_MAX_TERMS, size=len)
    first, second = [1], [2]
    assert store.peek("a") is None and store.keep("a", first) is first
    assert store.keep("a", second) is first and store.peek("a") is first
    store.keep("b", [3])
    assert store.peek("a") is first  # now "b" is the least recently used
    store.keep("c", [4])
    assert store.peek("b") is None and store.peek("a") is first and store.peek("c") == [4]
    big = [0] * (CACHE_MAX_TERMS + 1)
    assert store.keep("big", big) is big and store.peek("big") is None
    with pytest.raises(TypeError, match="peek"):
        store("never kept")
