"""The ladder is one table: every rung is in it, and the one walk follows it for
decisions, signs and bounds alike; adding a rung is a module and one line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import smtdims
from smtdims.ladder import walk
from smtdims.lang.constraints import ConstraintSet
from smtdims.lang.parser import parse_expr
from smtdims.reasoner import Precision, Session
from smtdims.rungs import table
from smtdims.rungs.question import BoundsQuestion, End, Side, SignQuestion, all_settled

RUNGS = Path(smtdims.__file__).parent / "rungs"


def _defines_a_rung(path: Path) -> bool:
    names = {t.id for n in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(t, ast.Name)}
    funcs = {n.name for n in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(n, ast.FunctionDef)}
    return "NAME" in names and "answer" in funcs


def test_every_rung_module_stands_in_the_table():
    modules = {p.stem for p in RUNGS.glob("*.py") if _defines_a_rung(p)}
    in_table = {r.answer.__module__.rsplit(".", 1)[1] for r in table.TABLE}
    assert modules == in_table and len(modules) == 8, (modules, in_table)


def test_each_ladder_is_the_table_in_order():
    for kind, ladder in table.LADDERS.items():
        positions = [table.TABLE.index(r) for r in ladder]
        assert positions == sorted(positions) and ladder, kind
    # the bounds ladder ends with the rung that always answers; the others with the solver
    assert table.LADDERS[table.BOUNDS][-1].name == "search"
    assert table.LADDERS[table.DECISION][-1].name == table.LADDERS[table.SIGN][-1].name == "solver"


class _Spy:
    """A rung that only records what it was asked, placed first in every ladder."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, q, scope) -> None:
        self.asked.append("bounds" if isinstance(q, BoundsQuestion) else f"sides:{len(q.sides)}")
        return None


@pytest.fixture
def spy(monkeypatch):
    s = _Spy()
    rung = table.Rung("spy", s, frozenset(table.LADDERS))
    for kind, ladder in table.LADDERS.items():
        monkeypatch.setitem(table.LADDERS, kind, (rung, *ladder))
    return s


def test_the_one_walk_asks_the_table_for_every_kind_of_question(spy):
    s = Session(ConstraintSet.of(["a >= b + 2", "b <= 10"]))
    a_b = parse_expr("a - b")
    assert s.decide(parse_expr("a"), ">=", parse_expr("b")).status == "true"  # two sides
    assert s.proves(parse_expr("a"), ">", parse_expr("b"))  # one side
    assert s.sign_bounds(parse_expr("a*b - 3*b"), Precision.STRICT_SIGN)[0] >= 0  # b*(a - 3), a >= 3
    b = s.bounds(a_b)
    assert (b.lo, b.lo_tight) == (2, True)
    assert "sides:2" in spy.asked and "sides:1" in spy.asked and "bounds" in spy.asked


def test_a_rung_added_first_answers_and_the_rest_are_not_asked(monkeypatch):
    """One table line: a rung that closes a bound first is the rung that answered (the rest unasked)."""
    later: list[str] = []

    def fake(q, scope):
        if isinstance(q, BoundsQuestion):
            q.answer(End(2, False, None), End(float("inf"), False, None))
            return "fake"
        return None

    def never(q, scope):
        later.append(type(q).__name__)
        return None

    monkeypatch.setitem(table.LADDERS, table.BOUNDS, (table.Rung("fake", fake, frozenset({table.BOUNDS})),
                                                      table.Rung("never", never, frozenset({table.BOUNDS}))))
    before = smtdims.stats()["answers_by_rung"].get("fake", 0)
    b = Session(ConstraintSet.of(["a >= b + 2"])).bounds(parse_expr("a - b"))
    assert (b.lo, b.hi, b.answered_by) == (2, float("inf"), "fake") and later == []
    assert smtdims.stats()["answers_by_rung"]["fake"] == before + 1


def test_a_sign_question_stops_at_the_first_rung_that_has_enough(monkeypatch):
    """Two known points of opposite sign settle both sides of ``a - 5``: the rungs after are not asked."""
    later: list[str] = []

    def never(q, scope):
        later.append(type(q).__name__)
        return None

    points_rung = next(r for r in table.TABLE if r.name == "points" and table.SIGN in r.kinds)
    monkeypatch.setitem(table.LADDERS, table.SIGN, (points_rung, table.Rung("never", never, frozenset({table.SIGN}))))
    s = Session(ConstraintSet.of(["a <= 9"]))
    q = SignQuestion(parse_expr("a - 5"), [Side("<"), Side(">=")], (-4, 4), all_settled, smtdims.clocks.asking())
    q = walk(q, table.SIGN, s.scope)
    assert q.by == "points" and [side.status for side in q.sides] == ["sat", "sat"] and later == []


def test_the_sessions_scope_is_a_scope():
    """Every member of the rungs' Scope protocol exists on the session's scope (a ConstraintScope)
    with its parameters: the protocol is the whole surface the rungs see, so a member it lacks would
    fail only when a rung first needed it."""
    import inspect

    from smtdims.rungs.protocol import KnownPoints, Scope

    s = Session(ConstraintSet.of(["a >= 2"])).scope
    members = {n for n in vars(Scope) if not n.startswith("_")} | set(Scope.__annotations__)
    assert {"check", "focus", "isl_engine", "subscope", "points", "search"} <= members
    for name in members:
        assert hasattr(s, name), name
        proto = vars(Scope).get(name)
        if inspect.isfunction(proto):  # the protocol's parameters, then only ones with defaults
            want = list(inspect.signature(proto).parameters)[1:]
            have = list(inspect.signature(getattr(s, name)).parameters.values())
            assert [p.name for p in have[:len(want)]] == want, name
            assert all(p.default is not inspect.Parameter.empty for p in have[len(want):]), name
    for name in ("base", "values"):
        assert name in vars(KnownPoints) and hasattr(s.points, name)


def test_one_bounds_question_is_one_block_and_one_gate(monkeypatch):
    """People's bounds (the exact ends, then their smallest witnesses) open one question block and
    run the satisfiability gate once; the session is the one door (its scope is a member, not a base)."""
    from smtdims import gate, scope

    blocks: list[int] = []
    gates: list[bool] = []
    question, ensure = scope.ConstraintScope.question, gate.Gate.ensure

    def counted_question(self, *exprs):
        blocks.append(len(exprs))
        return question(self, *exprs)

    def counted_ensure(self, *, make_points=True):
        gates.append(make_points)
        return ensure(self, make_points=make_points)

    monkeypatch.setattr(scope.ConstraintScope, "question", counted_question)
    monkeypatch.setattr(gate.Gate, "ensure", counted_ensure)
    s = Session(ConstraintSet.of(["a >= 3", "b >= a + 2", "mod(b, 4) == 1"]))
    assert not isinstance(s, scope.ConstraintScope)
    b = s.bounds(parse_expr("2*b - a"), readable=True)
    assert b.lo == 7 and b.lo_tight
    assert len(blocks) == 1 and gates == [False]
    blocks.clear(), gates.clear()
    s.bounds(parse_expr("3*b - a"))
    assert len(blocks) == 1 and gates == [True]
