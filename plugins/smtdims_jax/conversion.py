"""JAX's symbolic dimensions as smtdims' IR, a scope's constraints and its reasoning session.

smtdims keeps its per-scope state (conversion memos, sessions) on JAX's ``SymbolicScope`` itself and
registers JAX as the core's host (:mod:`smtdims.host`): the core never imports JAX.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from smtdims import host, options
from smtdims.lang.constraints import Constraint, ConstraintSet
from smtdims.lang.expr import FLOORDIV, MAX, MIN, MOD, Expr
from smtdims.lang.memos import CACHE_MAX_TERMS, SizedMemo
from smtdims.reasoner import Session

from . import exact_stock
from .jax_internals import (
    Comparator,
    DimExpr,
    DimFactor,
    SymbolicScope,
    explicit_constraints,
    sorted_terms,
    term_factors,
)

_OPS = {DimFactor.FLOORDIV: FLOORDIV, DimFactor.MOD: MOD, DimFactor.MAX: MAX, DimFactor.MIN: MIN}


def to_ir(e: Any) -> Expr:
    """smtdims IR of a JAX dimension (``_DimExpr`` or int)."""
    if not isinstance(e, DimExpr):
        return Expr.const(int(e))
    state = scope_state(e.scope)
    # Keyed by the term tuple: hashing/comparing it never calls _DimExpr.__eq__.
    key = sorted_terms(e)
    hit = state.ir_cache.get(key)
    if hit is None:
        hit = _convert(e)
        if len(state.ir_cache) < 100_000:
            state.ir_cache[key] = hit
    return hit


def _convert(e: Any) -> Expr:
    """One pass over JAX's terms (adding them one by one re-sorts the sum each time: quadratic).

    Each term is built as its monomial directly: every factor of a JAX term is a variable or an
    operation, which is one atom of the IR (kept per scope, as JAX shares a scope's factors between
    its expressions), and the monomial is the atoms with their exponents in the IR's order, as
    ``Expr``'s own product builds it (the same ``Expr``: equal, with the same terms). A factor whose IR
    is not a single atom (an operation the IR folds, ``mod(b, 1)``) takes the arithmetic path.
    """
    atoms = scope_state(e.scope).atoms
    acc: dict[Any, int] = {}
    for term, coeff in sorted_terms(e):
        powers: dict[Any, int] = {}
        for factor, exponent in term_factors(term):
            a = atoms.get(factor)
            if a is None:
                a = _factor_atom(factor)
                if a is None:
                    return _convert_by_arithmetic(e)
                if len(atoms) < 100_000:
                    atoms[factor] = a
            powers[a] = powers.get(a, 0) + exponent
        mono = tuple(powers.items())
        if len(mono) > 1:
            mono = tuple(sorted(mono, key=_atom_order))
        acc[mono] = acc.get(mono, 0) + coeff
    return Expr.from_coefficients(acc)


def _atom_order(ae: tuple[Any, int]) -> tuple:
    return ae[0].sort_key()  # the IR's order of a monomial's atoms (polynomial.mono_mul)


def _factor_atom(f: Any) -> Any:
    """The IR atom of a JAX factor (a ``Var``, or an ``Op`` of converted operands), or None where
    the IR of the factor is not one atom."""
    x = _convert_factor(f)
    if len(x.terms) == 1:
        m, c = x.terms[0]
        if c == 1 and len(m) == 1 and m[0][1] == 1:
            return m[0][0]
    return None


def _convert_by_arithmetic(e: Any) -> Expr:
    """:func:`_convert` by the IR's arithmetic (where a factor folds to more than one atom)."""
    parts = []
    for term, coeff in sorted_terms(e):
        prod = Expr.const(coeff)
        for factor, exponent in term_factors(term):
            prod = prod * _convert_factor(factor) ** exponent
        parts.append(prod)
    return Expr.sum(parts)


def _convert_factor(f: Any) -> Expr:
    if f.var is not None:
        return Expr.var(f.var)
    op = _OPS[f.operation]
    lhs, rhs = (to_ir(o) for o in f.operands)
    return {FLOORDIV: lhs.floordiv, MOD: lhs.mod, MAX: lhs.max, MIN: lhs.min}[op](rhs)


def scope_constraints(scope: Any) -> ConstraintSet:
    """The scope's explicit constraints as smtdims constraints (texts as the user wrote them).

    One set per constraint texts, recently used ones kept (:data:`_SETS_BY_TEXT`): a scope's
    constraints are JAX's parse of its strings (the derived ones too), so equal texts give equal
    sets, and fresh scopes with the same constraints (each export, each trace of a test) share
    one set and what is derived from it (:meth:`ConstraintSet.derived`: ranges, points).
    """
    cs = explicit_constraints(scope)
    if not cs:
        return _NO_CONSTRAINTS
    key = tuple(c.debug_str for c in cs)
    got = _SETS_BY_TEXT.peek(key)
    if got is not None:
        return got
    out = []
    for c in cs:
        op = "==" if c.cmp == Comparator.EQ else ">="
        out.append(Constraint.make(to_ir(c.e1), op, to_ir(c.e2), c.debug_str))
    return _SETS_BY_TEXT.keep(key, ConstraintSet(tuple(out)))  # a large set is not kept: not worth holding


_NO_CONSTRAINTS = ConstraintSet()
# constraint texts -> their set, least recently used first: 64 sets of at most CACHE_MAX_TERMS units each
# (a set holds its derived facts; a larger one is converted again when asked again)
_SETS_BY_TEXT_ENTRIES = 64
_SETS_BY_TEXT = SizedMemo(None, _SETS_BY_TEXT_ENTRIES, _SETS_BY_TEXT_ENTRIES * CACHE_MAX_TERMS,
                          lambda cs: sum(c.diff.size() for c in cs.constraints))


# -- the per-scope state ----------------------------------------------------------------------------------
@dataclass
class ScopeState:
    """What smtdims keeps for one JAX scope: conversion memos, sessions, whether it is linear."""

    ir_cache: dict = field(default_factory=dict)
    atoms: dict = field(default_factory=dict)  # JAX factor -> its IR atom (_convert)
    sessions: dict = field(default_factory=dict)  # budget -> Session (at most _SESSIONS_PER_SCOPE)
    linear: bool | None = None  # the scope's constraints are in the Presburger fragment (the stock rung's gate)


_SESSIONS_PER_SCOPE = 4  # budgets a scope keeps a session for (install(budget=...), scoped budgets)
STATE_ATTR = "_smtdims_state"
# Every attribute smtdims keeps on a JAX object (the scope is the only one: dimensions are slotted).
_PRIVATE_ATTRS = frozenset({STATE_ATTR, *exact_stock.SCOPE_ATTRS})


def scope_state(scope: Any) -> ScopeState:
    """The scope's smtdims state, stored on the scope itself.

    Not a WeakKeyDictionary: the caches' keys (JAX term tuples) reference the scope,
    so a weak-keyed table would keep every scope, its session and its Z3 context alive
    forever. As an attribute the references form a cycle that the GC collects with the scope.
    The attribute is a cache, not meaning: :func:`_scope_getstate` leaves it out of copies
    and pickles, so a copied scope starts empty and rebuilds it from its constraints.
    """
    st = scope.__dict__.get(STATE_ATTR)
    if st is None:
        # dict.setdefault is one step (the GIL; a free-threaded build locks the dict): threads that
        # race on a new scope all get the one state kept
        st = scope.__dict__.setdefault(STATE_ATTR, ScopeState())
    return st


_SCOPE_GETSTATE = SymbolicScope.__dict__.get("__getstate__")  # JAX's own, if a release defines one


def _scope_getstate(self: Any) -> Any:
    """``SymbolicScope.__getstate__`` without smtdims' caches (copy, deepcopy and pickle use it).

    Real clients deep-copy dimensions (``_DimExpr.__deepcopy__`` copies the scope), and a
    session holds locks and Z3 objects that cannot be copied. Without smtdims attributes the
    state is exactly what stock JAX copies and pickles (the same dict, so the same bytes).
    """
    state = _SCOPE_GETSTATE(self) if _SCOPE_GETSTATE is not None else self.__dict__
    if isinstance(state, dict) and not _PRIVATE_ATTRS.isdisjoint(state):
        state = {k: v for k, v in state.items() if k not in _PRIVATE_ATTRS}
    return state


# Set at import, not by install(): scopes keep their caches after uninstall(), and must
# still copy. Observable behaviour is stock's (see _scope_getstate).
SymbolicScope.__getstate__ = _scope_getstate


def session_for_scope(scope: Any) -> Session:
    """The reasoning session of a fully built scope (one per budget, dropped with the scope)."""
    sessions = scope_state(scope).sessions
    budget = options.current().budget
    session = sessions.get(budget)
    if session is None:
        if len(sessions) >= _SESSIONS_PER_SCOPE:  # the oldest budget's first; one asked again starts anew
            try:
                del sessions[next(iter(sessions))]
            except (StopIteration, KeyError, RuntimeError):  # another thread made room
                pass
        # One session per scope and budget (two would keep two caches): racing threads may each make
        # one (cheap: its state is built on first use), and setdefault hands them all the one kept.
        session = sessions.setdefault(budget, Session(scope_constraints(scope), budget))
    return session


class _JaxHost:
    """What the core needs from JAX (see :mod:`smtdims.host`)."""

    def is_dim(self, x: Any) -> bool:
        return isinstance(x, DimExpr)

    def is_scope(self, x: Any) -> bool:
        return isinstance(x, SymbolicScope)

    def scope_of(self, x: Any) -> Any:
        return x.scope

    def to_ir(self, x: Any) -> Expr:
        return to_ir(x)

    def scope_constraints(self, scope: Any) -> ConstraintSet:
        return scope_constraints(scope)

    def session_for_scope(self, scope: Any) -> Session:
        return session_for_scope(scope)


host.register(_JaxHost())

__all__ = ["STATE_ATTR", "ScopeState", "scope_constraints", "scope_state", "session_for_scope", "to_ir"]
