"""JAX dimensions to IR: the direct construction of each term gives the IR's own arithmetic's result.

``conversion.to_ir`` builds each JAX term's monomial directly (the arithmetic was slower in fresh
scopes); :func:`by_arithmetic` here is the IR's ``*``, ``**`` and sum over
JAX's terms, the reference. Both must give the same ``Expr`` (equal, the same terms in the same
order, the same hash): caches, the interval memo and every rung key on it.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings

from tests import strategies as S

pytest.importorskip("jax")

from jax import export  # noqa: E402
from jax._src.export.shape_poly import _DimExpr  # noqa: E402
from smtdims_jax import conversion  # noqa: E402

from smtdims.lang.expr import Expr  # noqa: E402


def by_arithmetic(e) -> Expr:
    """The reference: each JAX term as the IR's product of its coefficient and factors, the terms summed."""
    if not isinstance(e, _DimExpr):
        return Expr.const(int(e))
    parts = []
    for term, coeff in e._sorted_terms:
        prod = Expr.const(coeff)
        for factor, exponent in term._factors:
            prod = prod * factor_by_arithmetic(factor) ** exponent
        parts.append(prod)
    return Expr.sum(parts)


def factor_by_arithmetic(f) -> Expr:
    """A JAX factor: its variable, or its operation (``floordiv``, ``mod``, ``max``, ``min``) of its operands'."""
    if f.var is not None:
        return Expr.var(f.var)
    lhs, rhs = (by_arithmetic(o) for o in f.operands)
    return getattr(lhs, f.operation)(rhs)


def _same(e) -> None:
    try:
        fast = conversion.to_ir(e)
    except Exception as err:  # a zero divisor raises in both
        with pytest.raises(type(err)):
            by_arithmetic(e)
        return
    ref = by_arithmetic(e)
    assert fast == ref and fast.terms == ref.terms and hash(fast) == hash(ref), (str(e), str(fast), str(ref))


def _dims(texts, scope):
    for text in texts:
        try:
            (d,) = export.symbolic_shape(text, scope=scope)
        except Exception:  # JAX refuses some rendered texts (e.g. a constant divisor 0): not ours
            continue
        if isinstance(d, _DimExpr):
            yield d


def _check_case(case: S.Case) -> None:
    scope = export.SymbolicScope()
    texts = [case.expr_text, case.rhs_text, *(S.render(p) for l, _, r in case.constraints for p in (l, r))]
    for d in _dims(texts, scope):
        _same(d)
        for other in (1, 3, -7):  # what JAX asks about: differences, scaled sums
            for derived in (d - other, d * 2 + other, d * d - other):
                if isinstance(derived, _DimExpr):
                    _same(derived)


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(S.cases(S.GenConfig(linear=None, max_depth=2, max_vars=4, odd_names=0.0)))
def test_direct_terms_equal_the_arithmetic(case):
    _check_case(case)


def test_direct_terms_equal_the_arithmetic_seeded():
    rng = random.Random("ir-conversion")
    for _ in range(300):
        _check_case(S.random_case(rng, S.GenConfig(linear=None, max_depth=2, max_vars=4, odd_names=0.0)))


@pytest.mark.parametrize("text", ["mod(b, 1)", "floordiv(b, -1)", "floordiv(b*b, 1)"])
def test_factor_the_ir_folds_takes_the_arithmetic(text):
    """A JAX factor whose IR is not one atom (``mod(b, 1)`` is 0) is converted by the arithmetic."""
    scope = export.SymbolicScope()
    (d,) = export.symbolic_shape(text, scope=scope)
    e = 3 * d + export.symbolic_shape("c", scope=scope)[0] * d + 1
    ((f, _),) = d._sorted_terms[0][0]._factors  # JAX keeps the factor; the IR folds it to more than one atom
    folded = factor_by_arithmetic(f)
    assert not (len(folded.terms) == 1 and folded.terms[0][1] == 1 and len(folded.terms[0][0]) == 1
                and folded.terms[0][0][0][1] == 1), str(folded)
    _same(e)
    assert conversion.to_ir(e) == by_arithmetic(e)


def test_factors_are_kept_per_scope():
    scope = export.SymbolicScope()
    b, t = export.symbolic_shape("b, t", scope=scope)
    m = export.symbolic_shape("max(b, 4)", scope=scope)[0]
    first = conversion.to_ir(m - b)
    again = conversion.to_ir(m - t + 2)
    (atom_a,) = [a for mono, _ in first.terms for a, _ in mono if not hasattr(a, "name")]
    (atom_b,) = [a for mono, _ in again.terms for a, _ in mono if not hasattr(a, "name")]
    assert atom_a is atom_b  # one IR atom for the scope's factor max(b, 4)
    other = export.SymbolicScope()
    m2 = export.symbolic_shape("max(b, 4)", scope=other)[0]
    assert conversion.to_ir(m2) == conversion.to_ir(m)  # equal across scopes, each scope its own memo
