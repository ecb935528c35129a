"""The state of a question lives in one object, found in one place: ``clocks.QuestionState``.

What these guard: a sub-question shares its question's clock and state; a thread that inherits
another thread's context (``contextvars.copy_context().run``, ``asyncio.to_thread``) shares the
deadline but never the per-thread state (fresh Z3 contexts are not thread-safe); the fresh contexts
are dropped when the outermost outer question ends; the solver-answer count reads the question's
own checks.
"""

from __future__ import annotations

import contextvars
import threading

import smtdims
from smtdims import clocks, options


def test_a_question_is_open_only_inside_its_block_and_nested_blocks_share_it():
    assert clocks.this_question() is None and clocks.active_deadline() is None
    with options.scoped(deadline=30), clocks.question() as d:
        q = clocks.this_question()
        assert q is not None and q.deadline is d and clocks.active_deadline() is d
        with clocks.question() as inner, clocks.outer_question():
            assert inner is d and clocks.this_question() is q and q.depth == 1
        assert q.depth == 0
    assert clocks.this_question() is None and clocks.active_deadline() is None


def test_a_thread_with_an_inherited_context_shares_the_deadline_not_the_state():
    seen = {}

    def in_thread() -> None:
        seen["inherited"] = clocks.this_question()  # another thread's: not this one's
        seen["deadline"] = clocks.active_deadline()
        seen["asked"] = clocks.asking()  # what the layers below are handed here: the clock, no state
        with clocks.outer_question() as d:
            q = clocks.this_question()
            seen.update(own=q, own_deadline=d, depth=q.depth, thread=q.thread)

    with options.scoped(deadline=30), clocks.outer_question() as d:
        parent = clocks.this_question()
        ctx = contextvars.copy_context()
        t = threading.Thread(target=ctx.run, args=(in_thread,))
        t.start()
        t.join()
        assert seen["inherited"] is None and seen["deadline"] is d
        assert seen["asked"] is not parent and seen["asked"].deadline is d and seen["asked"].bounded
        assert seen["own"] is not parent and seen["own_deadline"] is d  # one clock, two states
        assert seen["thread"] == t.ident and seen["depth"] == 1 and parent.depth == 1
    assert clocks.this_question() is None


def test_fresh_contexts_live_as_long_as_the_outermost_outer_question():
    cs = smtdims.ConstraintSet.of(["a >= 2", "b >= 2"])
    from smtdims.engines.z3side import Z3Side

    solver = Z3Side(cs, smtdims.options.current().budget)
    with options.scoped(deadline=30), clocks.question():
        q = clocks.this_question()
        assert clocks.asking() is q
        assert solver.fresh(q) is not solver.fresh(q)  # outside an outer question: one per check
        with clocks.outer_question():
            f = solver.fresh(q)
            with clocks.outer_question():
                assert solver.fresh(q) is f  # a sub-question shares it
            assert solver.fresh(q) is f and q.contexts
        assert q.contexts == {} and q.keep == []  # dropped: the next question starts from nothing
        with clocks.outer_question():
            assert solver.fresh(q) is not f


def test_the_solver_answer_count_reads_the_questions_own_checks():
    smtdims.reset_stats()
    # nonlinear and true: only a solver proves it (the interval rules and known points cannot)
    d = smtdims.decide("a*b", ">=", "a + b", ["a >= 2", "b >= 2"], deadline=30)
    assert d.value is True and d.answered_by.startswith("solver")
    st = smtdims.stats()
    assert st["solver_checks"] >= 1 and st["solver_answers"] == 1
    smtdims.reset_stats()
    smtdims.decide("a + 1", ">=", "a", [], deadline=30)  # the interval rules: no solver, no solver answer
    assert smtdims.stats()["solver_answers"] == 0


def test_asking_hands_down_the_open_question_or_a_stand_in_without_a_deadline():
    """What the scope hands the engines: the open question itself; outside any, a stand-in
    that is not ``bounded`` (the Z3 engine checks in process then, as with no question) and whose clock
    never passes."""
    outside = clocks.asking()
    assert not outside.bounded and not outside.deadline.expired and outside is not clocks.asking()
    with options.scoped(deadline=30), clocks.question() as d:
        q = clocks.asking()
        assert q is clocks.this_question() and q.bounded and q.deadline is d
        assert clocks.clock() is d


def test_the_engine_reads_the_question_it_is_handed():
    """A check for a question whose deadline has passed is not run, whatever question the thread has
    open: the engine reads the one it is given (``ask``), nothing ambient."""
    import time

    from smtdims.clocks import REASON_DEADLINE
    from smtdims.engines.z3side import Z3Side

    cs = smtdims.ConstraintSet.of(["a*b >= 4"])
    solver = Z3Side(cs, options.current().budget)
    late = clocks.QuestionState(clocks.Deadline(0.001))
    time.sleep(0.01)
    res = solver.check(lambda enc: [], linear=False, ask=late)
    assert res.status == "unknown" and res.reason == REASON_DEADLINE and late.checks == 1
    with options.scoped(deadline=30), clocks.question():
        assert solver.check(lambda enc: [], linear=False, ask=late).reason == REASON_DEADLINE
    assert solver.check(lambda enc: [], linear=False, ask=clocks.asking()).status == "sat"
