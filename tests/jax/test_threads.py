"""Concurrency: JAX traces in thread pools, so smtdims must answer the same from 8 threads.

* 8 threads export the same functions (each in its own symbolic scope) with smtdims
  installed: the exported modules are identical to sequential exports, no errors.
* 8 threads ask comparisons, max/min and bounds on ONE shared scope (one shared
  session, one Z3 context): identical to the sequential answers.
* install()/uninstall() from many threads at once: no error, and afterwards the last
  call wins (install is idempotent, not reference counted) and uninstall restores stock.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import export, lax  # noqa: E402

import smtdims  # noqa: E402

THREADS = 8


def _exports():
    """(name, function, spec, constraints) -- several need smtdims to export at all."""
    return [
        ("slice-mod", lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3), "b", ()),
        ("slice-constrained", lambda x: x[: x.shape[1], :16], "a, b", ("a >= b", "b >= 16")),
        ("concat", lambda x: jnp.concatenate([x, x], axis=1), "a, b", ()),
        ("flatten", lambda x: jnp.reshape(x, (x.shape[0] * x.shape[1],)), "b, 4", ()),
        ("pad-mod", lambda x: jnp.pad(x, (0, 3 - x.shape[0] % 4)), "n", ()),
        ("floordiv", lambda x: x[: x.shape[0] // 2 + 1], "n", ("n >= 2",)),
    ]


def _without_locations(mlir: str) -> str:
    """Location metadata is numbered by tracing history; the program itself must be identical."""
    import re

    lines = [ln for ln in mlir.splitlines() if not ln.startswith("#loc")]
    return re.sub(r" loc\((?:[^()]|\([^()]*\))*\)", "", "\n".join(lines))


def _export_one(item) -> tuple[str, str, str]:
    name, fn, spec, constraints = item
    shape = export.symbolic_shape(spec, constraints=constraints)
    exp = export.export(jax.jit(fn))(jax.ShapeDtypeStruct(shape, jnp.int32))
    return name, str(exp.out_avals), _without_locations(exp.mlir_module())


@pytest.fixture
def installed_module():
    smtdims.install()
    try:
        yield
    finally:
        smtdims.uninstall()


def test_concurrent_exports_match_sequential(installed_module):
    items = _exports()
    sequential = {name: (avals, mlir) for name, avals, mlir in map(_export_one, items)}
    work = [item for _ in range(2) for item in items]  # each function twice, interleaved
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        results = list(pool.map(_export_one, work))
    assert len(results) == len(work)
    for name, avals, mlir in results:
        assert (avals, mlir) == sequential[name], name


def _shared_questions():
    a, b, c = export.symbolic_shape("a, b, c", constraints=("a >= b", "b >= 4", "c <= 10"))
    # Presburger only: exact answers, so equality with the sequential run is required. (Under a
    # budget, nonlinear answers can depend on process history: see test_budget.)
    exprs = [a, b, c, a - b, a % 3, b // 2, 2 * a - 3 * b + c, (a + c) % 5, 5 * c - a, 3 * (b // 4) - c]
    return a.scope, exprs


def _answers(pairs):
    from jax._src import core  # JAX-private: tests only
    from jax._src.export import shape_poly as sp  # JAX-private: tests only

    out = []
    for e1, e2 in pairs:
        row = []
        for q in (lambda: e1 >= e2, lambda: e1 < e2, lambda: str(core.max_dim(e1, e2)), lambda: str(core.min_dim(e1, e2)),
                  lambda: sp._bounds_decision(e1 - e2, sp.BoundsPrecision.BEST)):
            try:
                row.append(q())
            except core.InconclusiveDimensionOperation:
                row.append("inconclusive")
        out.append(tuple(row))
    return out


def test_concurrent_queries_on_one_shared_scope(installed_module):
    _, exprs = _shared_questions()
    pairs = list(itertools.permutations(exprs, 2))
    sequential = _answers(pairs)
    # fresh scope and fresh session for the concurrent run: nothing cached from above
    _, exprs = _shared_questions()
    pairs = list(itertools.permutations(exprs, 2))
    chunks = [pairs[i::THREADS] for i in range(THREADS)]
    barrier = threading.Barrier(THREADS)

    def work(chunk):
        barrier.wait()
        return _answers(chunk)

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        parts = list(pool.map(work, chunks))
    concurrent = {}
    for chunk, part in zip(chunks, parts):
        for pair, ans in zip(chunk, part):
            concurrent[(str(pair[0]), str(pair[1]))] = ans
    for pair, ans in zip(pairs, sequential):
        assert concurrent[(str(pair[0]), str(pair[1]))] == ans, pair


def test_concurrent_api_queries_share_sessions():
    """smtdims.bounds/decide from 8 threads on the same constraint set (one cached session)."""
    cons = ("a >= 2*b", "b >= 3", "mod(a, 4) == 1")
    qs = ["a - 2*b", "floordiv(a, 4) - b", "mod(a + b, 5)", "max(a - 7, b) - min(a, 3*b)", "a*b - 6*b", "a - b*b"]
    sequential = [tuple(smtdims.bounds(q, cons)) for q in qs]
    barrier = threading.Barrier(THREADS)

    def work(i):
        barrier.wait()
        return [tuple(smtdims.bounds(q, cons)) for q in qs[i % len(qs):] + qs[: i % len(qs)]]

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        results = list(pool.map(work, range(THREADS)))
    for i, res in enumerate(results):
        k = i % len(qs)
        assert res == sequential[k:] + sequential[:k]


def test_install_uninstall_from_threads():
    from jax._src.export import shape_poly as sp  # JAX-private: tests only
    from jax._src.export import shape_poly_decision as spd  # JAX-private: tests only

    stock_eq = sp._DimExpr.__eq__
    errors = []
    barrier = threading.Barrier(THREADS)

    def toggle(i):
        barrier.wait()
        try:
            for k in range(40):
                if (i + k) % 2:
                    smtdims.install()
                else:
                    smtdims.uninstall()
                smtdims.is_installed()
                # the reasoner itself does not depend on installation
                assert smtdims.decide("b", ">=", "mod(b, 3)").status == "true"
        except Exception as err:  # pragma: no cover - reported below
            errors.append(repr(err))

    threads = [threading.Thread(target=toggle, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "install/uninstall deadlocked"
    assert not errors, errors
    smtdims.install()
    assert smtdims.is_installed() and sp._bounds_decision is not spd.bounds_decision
    smtdims.uninstall()
    assert not smtdims.is_installed()
    assert sp._bounds_decision is spd.bounds_decision and sp._DimExpr.__eq__ is stock_eq
    (b,) = export.symbolic_shape("b")
    with pytest.raises(sp.InconclusiveDimensionOperation):
        b >= b % 3  # noqa: B015  -- stock is inconclusive again (seed row 13)


def test_a_question_block_leaves_every_part_when_one_fails_to_leave(monkeypatch):
    """A question's block is one class over three blocks (the session's lock, the recursion limit, the
    question's state): when leaving one raises (an after-question hook), the outer ones are still
    left: the session's lock is free again for other threads and the recursion limit is restored, and
    the error reaches the caller."""
    import sys

    from smtdims import ConstraintSet, clocks, parse_expr
    from smtdims.reasoner import Session

    s = Session(ConstraintSet.of(["a >= 2"]))
    limit = sys.getrecursionlimit()
    inside: list[int] = []

    def boom() -> None:
        inside.append(sys.getrecursionlimit())  # run while the question's outer blocks still hold
        raise RuntimeError("hook failed")

    deep = parse_expr("max(" * 150 + "a" + ", 1)" * 150)  # nested past the limit: the block raises it
    monkeypatch.setattr(clocks, "AFTER_QUESTION", [boom])
    with pytest.raises(RuntimeError, match="hook failed"):
        s.bounds(deep)
    monkeypatch.setattr(clocks, "AFTER_QUESTION", [])
    assert inside and inside[0] > limit
    assert sys.getrecursionlimit() == limit
    free = []
    t = threading.Thread(target=lambda: free.append(s.scope.lock.acquire(timeout=5)))
    t.start()
    t.join(10)
    assert free == [True]
