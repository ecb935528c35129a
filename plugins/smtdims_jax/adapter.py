"""The only module that touches JAX internals (``jax._src.export.shape_poly``).

It converts JAX's symbolic dimensions to smtdims' IR, registers JAX as the core's
host (conversion, scope constraints, sessions) and the "stock JAX where sound" rung
(:mod:`.exact_stock`), and installs smtdims at JAX's decision seam: the module-level
``_bounds_decision`` function pointer (every symbolic ``>= <= > <``, ``max``/``min``
and ``bounds``), ``_geq_decision`` (to add witnesses to inconclusive-comparison
errors) and, optionally, ``_DimExpr.__eq__`` (provable equality). Uninstalling
restores the saved originals exactly.

JAX versions: ``SUPPORTED_JAX`` is the tested range. An older JAX fails at import; a
newer one is used after the seam check below passes, with one warning naming the
tested range. A JAX whose seam differs fails loudly.
"""

from __future__ import annotations

import collections
import contextlib
import dis
import functools
import importlib
import os
import re
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from smtdims import host as _host
from smtdims import options
from smtdims.errors import SmtdimsError, UnsatisfiableConstraintsError, UnsupportedJaxError, format_valuation
from smtdims.lang.constraints import Constraint, ConstraintSet
from smtdims.lang.expr import CACHE_MAX_TERMS, FLOORDIV, MAX, MIN, MOD, Expr, SizedMemo
from smtdims.lang.results import UNDETERMINED, UNKNOWN, unknown_advice
from smtdims.reasoner import NEED_BEST, NEED_SIGN_LEQ, NEED_SIGN_LT, REGISTRY, Session, register_stock_rung
from smtdims.rungs.question import sufficient

from . import exact_stock, frames

SUPPORTED_JAX = ((0, 7, 0), (0, 12, 0, 1))  # inclusive range, tested in CI (0.7.2, 0.10.2, 0.12.0.1)


def _version_tuple(v: str) -> tuple[int, ...]:
    """The release segment, all of it: 0.12.0.1 and 0.12.0.2 differ; '0.12.1.dev2026' is (0, 12, 1)."""
    m = re.match(r"\d+(?:\.\d+)*", v)
    return tuple(int(x) for x in m.group().split(".")) if m else ()


def _fmt(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v))


def _check_jax() -> bool:
    """True when this JAX is newer than the tested range (warned once, after the seam check)."""
    v = _version_tuple(jax.__version__)
    lo, hi = SUPPORTED_JAX
    if v < lo:
        raise UnsupportedJaxError(
            f"smtdims needs jax >= {_fmt(lo)} (tested up to {_fmt(hi)}); found jax {jax.__version__}. "
            f"Upgrade, e.g. pip install 'jax>={_fmt(lo)}'"
        )
    return v > hi


_NEWER_THAN_TESTED = _check_jax()

try:  # every private name the adapter uses, checked once, here
    from jax._src import core as _core
    from jax._src import source_info_util as _siu
    from jax._src import xla_bridge as _xb
    from jax._src.export import shape_poly as sp
    from jax._src.export import shape_poly_decision as spd

    _DimExpr = sp._DimExpr
    _DimFactor = sp._DimFactor
    SymbolicScope = sp.SymbolicScope
    Comparator = sp.Comparator
    BoundsPrecision = sp.BoundsPrecision
    InconclusiveDimensionOperation = sp.InconclusiveDimensionOperation
    AnyInconclusive = _core.InconclusiveDimensionOperation  # the base class JAX raises in places
    _STOCK_BOUNDS = spd.bounds_decision
    _STOCK_GEQ = sp._geq_decision
    _STOCK_EQ = _DimExpr.__eq__
    _STOCK_NE = _DimExpr.__ne__
    assert callable(_core.is_constant_dim)
    for _attr in ("_sorted_terms", "scope", "_size", "_to_constant", "_evaluate", "_get_vars"):
        assert hasattr(_DimExpr, _attr), _attr
    assert hasattr(sp, "_bounds_decision") and hasattr(SymbolicScope, "__init__")
    assert callable(_xb.backends_are_initialized) and isinstance(_xb._backends, dict)
    assert callable(_siu.register_exclusion)
    for _p in ("FOR_GEQ0_OR_LEQ0", "FOR_GEQ0_OR_LT0", "BEST"):
        assert hasattr(BoundsPrecision, _p), _p
    assert sp._bounds_decision is _STOCK_BOUNDS or getattr(sp._bounds_decision, "__module__", "").startswith("smtdims")
    _OPS = {_DimFactor.FLOORDIV: FLOORDIV, _DimFactor.MOD: MOD, _DimFactor.MAX: MAX, _DimFactor.MIN: MIN}
except (ImportError, AttributeError, AssertionError) as err:  # pragma: no cover - depends on JAX
    raise UnsupportedJaxError(
        f"jax {jax.__version__} lacks the shape-polymorphism internals smtdims plugs into ({err!r}); "
        f"tested: jax {_fmt(SUPPORTED_JAX[0])} to {_fmt(SUPPORTED_JAX[1])}"
    ) from err

# Exported modules' debug locations name the user's code as on stock JAX. JAX records the innermost
# frame outside its own files (source_info_util); smtdims' wrappers (the export hint, `smtdims run`,
# the pipeline) sit between the user's code and JAX's, so without this the locations (and the
# serialized bytes) of every export named smtdims_jax/adapter.py. Each package's own folder, never
# the folder above it (installed, that is site-packages: every library's frames would be hidden).
for _file in (_host.__file__, __file__):  # smtdims' folder, this plugin's folder
    _siu.register_exclusion(os.path.dirname(os.path.abspath(_file)) + os.sep)

if _NEWER_THAN_TESTED:
    warnings.warn(
        f"smtdims was tested with jax {_fmt(SUPPORTED_JAX[0])} to {_fmt(SUPPORTED_JAX[1])}; found jax "
        f"{jax.__version__}. Its decision seam checks out, so smtdims is active; please report problems.",
        stacklevel=2,
    )

_EXACT_STOCK = exact_stock.build(spd)


def started_backends() -> frozenset[str]:
    """The platforms whose backends JAX has started in this process (none yet: empty), without starting any.

    The export pipeline asks before it runs anything: a process that started a TPU backend holds the chip,
    and no other process may open it while this one lives.
    """
    return frozenset(_xb._backends) if _xb.backends_are_initialized() else frozenset()

_NEED = {
    BoundsPrecision.FOR_GEQ0_OR_LEQ0: NEED_SIGN_LEQ,
    BoundsPrecision.FOR_GEQ0_OR_LT0: NEED_SIGN_LT,
    BoundsPrecision.BEST: NEED_BEST,
}


# -- conversion ------------------------------------------------------------------------------
def to_ir(e: Any) -> Expr:
    """smtdims IR of a JAX dimension (``_DimExpr`` or int)."""
    if not isinstance(e, _DimExpr):
        return Expr.const(int(e))
    state = _state(e.scope)
    # Keyed by the term tuple: hashing/comparing it never calls _DimExpr.__eq__.
    key = e._sorted_terms
    hit = state.ir_cache.get(key)
    if hit is None:
        hit = _convert(e)
        if len(state.ir_cache) < 100_000:
            state.ir_cache[key] = hit
    return hit


def _convert(e: Any) -> Expr:
    """One pass over JAX's terms (adding them one by one re-sorted the sum each time: 0.9 s at 1,000 terms).

    Each term is built as its monomial directly: every factor of a JAX term is a variable or an
    operation, which is one atom of the IR (kept per scope, as JAX shares a scope's factors between
    its expressions), and the monomial is the atoms with their exponents in the IR's order, as
    ``Expr``'s own product builds it (the same ``Expr``: equal, with the same terms). A factor whose IR
    is not a single atom (an operation the IR folds, ``mod(b, 1)``) takes the arithmetic path. The
    arithmetic cost 16 us an expression of benchmark 1b (fresh scopes: every expression is new).
    """
    atoms = _state(e.scope).atoms
    acc: dict[Any, int] = {}
    for term, coeff in e._sorted_terms:
        powers: dict[Any, int] = {}
        for factor, exponent in term._factors:
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
    return Expr._from_dict(acc)


def _atom_order(ae: tuple[Any, int]) -> tuple:
    return ae[0].sort_key()  # the IR's order of a monomial's atoms (expr._mono_mul)


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
    for term, coeff in e._sorted_terms:
        prod = Expr.const(coeff)
        for factor, exponent in term._factors:
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
    cs = scope._explicit_constraints
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
# constraint texts -> their set, least recently used first: 64 sets of at most CACHE_MAX_TERMS (2,000)
# units each (a set holds its derived facts; a larger one is converted again when asked again)
_SETS_BY_TEXT_ENTRIES = 64
_SETS_BY_TEXT = SizedMemo(None, _SETS_BY_TEXT_ENTRIES, _SETS_BY_TEXT_ENTRIES * CACHE_MAX_TERMS,
                          lambda cs: sum(c.diff.size() for c in cs.constraints))


@dataclass
class _ScopeState:
    ir_cache: dict = field(default_factory=dict)
    atoms: dict = field(default_factory=dict)  # JAX factor -> its IR atom (_convert)
    sessions: dict = field(default_factory=dict)  # budget -> Session (at most _SESSIONS_PER_SCOPE)
    linear: bool | None = None  # the scope's constraints are in the Presburger fragment


_SESSIONS_PER_SCOPE = 4  # budgets a scope keeps a session for (install(budget=...), scoped budgets)
_STATE_ATTR = "_smtdims_state"
# Every attribute smtdims keeps on a JAX object (the scope is the only one: dimensions are slotted).
_PRIVATE_ATTRS = frozenset({_STATE_ATTR, *exact_stock.SCOPE_ATTRS})


def _state(scope: Any) -> _ScopeState:
    """The scope's smtdims state, stored on the scope itself.

    Not a WeakKeyDictionary: the caches' keys (JAX term tuples) reference the scope,
    so a weak-keyed table would keep every scope, its session and its Z3 context alive
    forever. As an attribute the references form a cycle that the GC collects with the scope.
    The attribute is a cache, not meaning: :func:`_scope_getstate` leaves it out of copies
    and pickles, so a copied scope starts empty and rebuilds it from its constraints.
    """
    st = scope.__dict__.get(_STATE_ATTR)
    if st is None:
        # dict.setdefault is one step (the GIL; a free-threaded build locks the dict): threads that
        # race on a new scope all get the one state kept
        st = scope.__dict__.setdefault(_STATE_ATTR, _ScopeState())
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


# Installed at import, not by install(): scopes keep their caches after uninstall(), and must
# still copy. Observable behaviour is stock's (see _scope_getstate).
SymbolicScope.__getstate__ = _scope_getstate


def session_for_scope(scope: Any) -> Session:
    """The reasoning session of a fully built scope (one per budget, dropped with the scope)."""
    sessions = _state(scope).sessions
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


def _scope_is_linear(scope: Any) -> bool:
    st = _state(scope)
    if st.linear is None:
        cs = scope._explicit_constraints
        # JAX's elimination combines constraints pairwise: on long chains it does not finish.
        linear = len(cs) <= _STOCK_MAX_CONSTRAINTS and all(_stock_is_sound_for(c.diff) for c in cs)
        if not scope._initialized:
            return linear  # of the constraints read so far: the scope's final ones may not be
        st.linear = linear
    return st.linear


_STOCK_MAX_CONSTRAINTS = 64


def _stock_is_sound_for(e: Any) -> bool:
    """Where JAX's procedure (made exact) is sound: checked on JAX's structure (cheaper than converting).

    The Presburger fragment, plus products and powers of plain variables (always >= 1,
    so JAX's corner-product bounds are right). Its known unsound corner, products and
    powers of factors whose range includes values <= 0 (``floordiv(b - 10, 3)^2``), and
    symbolic divisors stay with smtdims. No limit on magnitudes: the exact copy has no
    floating point (see :mod:`.exact_stock`).
    """
    if not isinstance(e, _DimExpr):
        return True
    for term, _ in e._sorted_terms:
        factors = term._factors
        if not factors:
            continue
        if len(factors) > 1 or factors[0][1] != 1:
            if all(f.var is not None for f, _ in factors):
                continue
            return False
        f = factors[0][0]
        if f.var is not None:
            continue
        a, b = f.operands
        if f.operation in (_DimFactor.FLOORDIV, _DimFactor.MOD) and _DimExpr._to_constant(b) is None:
            return False  # operands are always _DimExprs; only a constant divisor is linear
        if not (_stock_is_sound_for(a) and _stock_is_sound_for(b)):
            return False
    return True


_NEED_PREC = {NEED_SIGN_LEQ: BoundsPrecision.FOR_GEQ0_OR_LEQ0, NEED_SIGN_LT: BoundsPrecision.FOR_GEQ0_OR_LT0,
              NEED_BEST: BoundsPrecision.BEST}


def _stock_rung(e: Any, need: Any) -> tuple[float, float] | None:
    """Rung 4 of the ladder: stock JAX's procedure, exact, where it is sound; None elsewhere.

    Errors (JAX's own crashes, its "Possible division by 0", its unsatisfiable-constraint
    ValueError) propagate to the ladder, which skips this rung and counts it.
    """
    if _EXACT_STOCK is None or not isinstance(e, _DimExpr):
        return None
    if not (_stock_is_sound_for(e) and _scope_is_linear(e.scope)):
        return None
    return _EXACT_STOCK(e, _NEED_PREC[need])


register_stock_rung(_stock_rung)


class _JaxHost:
    """What the core needs from JAX (see :mod:`smtdims.host`)."""

    def is_dim(self, x: Any) -> bool:
        return isinstance(x, _DimExpr)

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


_host.register(_JaxHost())


_INSTALL_LOCK = options.fork_safe(threading.RLock())


# -- observers (audit mode, the pytest plugin) ------------------------------------------------
_LISTENERS: list[Callable[[dict[str, Any]], None]] = []


def add_listener(fn: Callable[[dict[str, Any]], None]) -> None:
    """Call ``fn(event)`` for every decision made while installed (see ``_emit`` for the keys)."""
    with _INSTALL_LOCK:
        _LISTENERS.append(fn)


def remove_listener(fn: Callable[[dict[str, Any]], None]) -> None:
    with _INSTALL_LOCK:
        if fn in _LISTENERS:
            _LISTENERS.remove(fn)


def listeners() -> tuple[Callable[[dict[str, Any]], None], ...]:
    """The listeners now called for every decision (a copy)."""
    with _INSTALL_LOCK:
        return tuple(_LISTENERS)


def exact_stock_rung() -> Callable[..., Any] | None:
    """The exact-arithmetic copy of stock JAX's bounds procedure, or None where it could not be built."""
    return _EXACT_STOCK


def _emit(**event: Any) -> None:
    """Events: ``kind`` ("bounds" | "compare" | "eq"), ``question``, ``answer``, ``answered_by``
    ("stock" | "smtdims"), plus kind-specific keys (``expr``, ``prec``, ``stock``, ``lhs``, ``rhs``,
    ``proven``, ``scope``). Listener errors are reported as warnings, never raised into JAX.

    ``eq`` events are the ``==``/``!=`` that code wrote, not the key comparisons of dict/set
    lookups and JAX's caches (see :func:`_key_comparison`)."""
    for fn in list(_LISTENERS):
        try:
            fn(event)
        except Exception as err:  # pragma: no cover - a broken listener must not break exports
            warnings.warn(f"smtdims listener {fn!r} failed: {err!r}", stacklevel=3)


# -- the hooks ---------------------------------------------------------------------------------
def _as_stock_on_zero_divisor(e: Any, zero: tuple) -> None:
    """Where a divisor may be 0, raise exactly when stock JAX raises ("Possible division by 0"
    for a floordiv); otherwise the ladder answers over the valuations where ``e`` is defined."""
    if e is None or _EXACT_STOCK is None:
        return
    try:
        _EXACT_STOCK(e, BoundsPrecision.BEST)
    except InconclusiveDimensionOperation as err:
        if "division by 0" in str(err):
            divisor, witness = zero
            at = f" (for example at {format_valuation(witness)})" if witness else ""
            raise InconclusiveDimensionOperation(
                f"Possible division by 0 in division by {divisor}{at}; add a constraint that keeps it "
                f"nonzero, e.g. '{divisor} >= 1'") from None
    except Exception:  # stock's other failures are not an answer: the ladder's stands
        return


_NOTHING = contextlib.nullcontext()  # reusable: it holds no state


def _and_stock_while_reading(e: Any, need: Any, lo: float, hi: float) -> tuple[float, float]:
    """While a scope's constraints are read, what stock's procedure proves under those read so far,
    where it is sound, added to the ladder's answer under none: never less precise than stock there
    (`-max(-a, -6)` after `2*a == 3*a - 28` is 6 on stock: under no constraints it stayed a max, and
    the scope failed with another error than stock's), at about stock's cost (stock asks its procedure
    for every such question; here only where the ladder was not enough). Sound: the constraints read so
    far are a subset of the scope's.
    Stock's own failures here are not an answer: the ladder's stands."""
    try:
        got = _stock_rung(e, need)
    except Exception:
        return lo, hi
    if got is None:
        return lo, hi
    return max(lo, got[0]), min(hi, got[1])


def _smt_bounds_decision(e: Any, prec: Any) -> tuple[float, float]:
    """Replacement for ``shape_poly._bounds_decision``: the ladder, at JAX's precision.

    Answers as JAX does where a divisor may be 0 (sound bounds over the valuations
    where ``e`` is defined; it never raises where stock JAX answers), and never lets an
    internal failure become a wrong answer.
    """
    if not isinstance(e, _DimExpr):
        return (int(e), int(e))
    scope = e.scope
    need = _NEED[prec]
    reading = not scope._initialized
    if reading:
        # Constraints are still being read (JAX simplifies max/min and normalises equalities as it
        # reads them): the ladder under none of them (fewer constraints, sound; a session for each
        # prefix of a long list cost seconds: benchmark 5's scopes), then stock's procedure below.
        session = REGISTRY.get(ConstraintSet())
    else:
        session = session_for_scope(scope)
    listening, rung = bool(_LISTENERS), None
    try:
        # who answered is the question's to tell: a listener's question is opened here, read before it ends
        with options.question() if listening else _NOTHING:
            lo, hi = session.sign_bounds(to_ir(e), need, origin=None if reading else e,
                                         zero_divisors=_as_stock_on_zero_divisor)
            if reading and not sufficient(need, lo, hi):
                lo, hi = _and_stock_while_reading(e, need, lo, hi)
            if listening:
                rung = options.this_question().rung
    except UnsatisfiableConstraintsError as err:
        # A ValueError, as stock JAX raises for the conflicts it finds, with its message prefix
        # (handlers match "Unsatisfiable constraint"), and smtdims' minimal conflict.
        raise UnsatisfiableConstraintsError(
            f"Unsatisfiable constraints in the symbolic scope: {err}", conflict=err.conflict) from None
    except (SmtdimsError, InconclusiveDimensionOperation, RecursionError):
        raise
    except Exception as err:  # never let an internal failure become a wrong answer
        warnings.warn(f"smtdims could not decide bounds of {e}: {err!r}; answering 'unknown'", stacklevel=2)
        return (float("-inf"), float("inf"))
    if listening:
        by = "stock" if rung == "stock" else "smtdims"
        _emit(kind="bounds", question=f"bounds of {e}", expr=e, prec=need, answer=(lo, hi),
              answered_by=by, stock=None, scope=scope)
    return (lo, hi)


_CMP_RE = re.compile(r"' (>=|<=|>|<) '")


class InconclusiveWithWitnesses(InconclusiveDimensionOperation):
    """JAX's inconclusive-comparison error with smtdims' explanation.

    Stock's class and constructor (a subclass: every handler written for stock catches it;
    ``type(e)(message)`` and ``type(e)(*e.args)`` work, as Keras' traceback filtering needs);
    ``args`` are exactly the arguments stock's error had. The explanation (witnesses, a
    suggested fix) costs solver calls, and JAX catches this error as control flow in places
    (``core.definitely_equal``, ``top_k``), so it is computed on first use (``str()``,
    :attr:`explanation`, :attr:`witnesses`), not when raised. A copy or pickle carries it as text.
    """

    _explain: Callable[[], Explanation] | None = None
    _explained: Explanation | None = None

    @classmethod
    def wrap(cls, err: BaseException, explain: Callable[[], Explanation]) -> InconclusiveWithWitnesses:
        """The same error as ``err`` (stock's), with smtdims' explanation to come."""
        exc = cls.__new__(cls, *err.args)
        BaseException.__init__(exc, *err.args)  # stock's args as they are (its __init__ adds the help text)
        exc._explain = explain
        return exc

    def _explanation(self) -> Explanation | None:
        if self._explained is None and self._explain is not None:
            try:
                self._explained = self._explain()
            except SmtdimsError as err:  # e.g. a divisor that may be 0: that is the explanation
                self._explained = Explanation(f"smtdims: {err}")
            except Exception as err:  # the explanation must never hide the error itself
                self._explained = Explanation(f"smtdims: could not explain ({err!r})")
            self._explain = None  # it holds JAX objects; the text is what is kept
        return self._explained

    @property
    def explanation(self) -> str:
        """smtdims' lines: witnesses on either side, the suggested fix, where it arose ('' if none)."""
        ex = self._explanation()
        return ex.text if ex is not None else ""

    @property
    def witnesses(self) -> tuple[dict[str, int] | None, dict[str, int] | None]:
        """(a valuation where the comparison JAX asked is false, one where it is true); None where unknown."""
        ex = self._explanation()
        return (ex.false_at, ex.true_at) if ex is not None else (None, None)

    @property
    def fix(self) -> str:
        """The first fix smtdims suggests for the comparison ('' if none)."""
        ex = self._explanation()
        return ex.fix if ex is not None else ""

    def __str__(self) -> str:
        text = super().__str__()
        detail = self.explanation
        if not detail:
            return text
        help_msg = InconclusiveDimensionOperation._help_msg
        if text.endswith(help_msg):
            return f"{text[: -len(help_msg)]}\n{detail}{help_msg}"
        return f"{text}\n{detail}"

    def __reduce__(self):  # type: ignore[override]
        self._explanation()
        state = {k: v for k, v in self.__dict__.items() if k != "_explain"}
        return (_restore_inconclusive, (type(self), self.args, state))


def _restore_inconclusive(cls: type, args: tuple, state: dict) -> BaseException:
    exc = cls.__new__(cls, *args)
    BaseException.__init__(exc, *args)
    exc.__dict__.update(state)
    return exc


@dataclass(frozen=True)
class Explanation:
    """smtdims' reading of an inconclusive comparison (the lines its error message adds)."""

    text: str
    false_at: dict[str, int] | None = None
    true_at: dict[str, int] | None = None
    fix: str = ""
    location: str = ""


def _smt_geq_decision(e1: Any, e2: Any, cmp_str: Callable[[], str]) -> bool:
    """Stock ``_geq_decision`` (which now calls smtdims), with witnesses on failure."""
    try:
        answer = _STOCK_GEQ(e1, e2, cmp_str)
    except InconclusiveDimensionOperation as err:
        question = cmp_str()
        where = _user_location()
        exc = InconclusiveWithWitnesses.wrap(err, lambda: _explain_inconclusive(e1, e2, question, where))
        if _LISTENERS:
            _emit(kind="compare", question=question, lhs=e1, rhs=e2, answer="inconclusive",
                  answered_by="smtdims", error=exc)
        raise exc from None
    if _LISTENERS:
        _emit(kind="compare", question=cmp_str(), lhs=e1, rhs=e2, answer=answer, answered_by="smtdims")
    return answer


def _user_location() -> str:
    return frames.where(sys._getframe(1))[0]


def _explain_inconclusive(e1: Any, e2: Any, question: str, where: str) -> Explanation:
    from smtdims.answers.explain import settling_fix

    scope = e1.scope if isinstance(e1, _DimExpr) else e2.scope
    m = _CMP_RE.search(question)
    # '<' and '>' are computed by JAX as 'not (e1 >= e2)'.
    inverted = bool(m and m.group(1) in (">", "<"))
    session = session_for_scope(scope)
    lhs, rhs = to_ir(e1), to_ir(e2)
    d = session.decide(lhs, ">=", rhs)
    w_true, w_false = (d.witness_false, d.witness_true) if inverted else (d.witness_true, d.witness_false)
    location = where if where != "<unknown>" else ""
    at = f"\nsmtdims: the comparison arose at {where}" if location else ""
    if d.status == UNKNOWN:
        return Explanation(f"smtdims: {unknown_advice(d.reason, d.budget, d.deadline)}{at}", location=location)
    if d.status != UNDETERMINED:  # pragma: no cover - would mean the hook missed a proof
        return Explanation(f"smtdims: proves {d.question} is {d.status}{at}", location=location)
    text = (f"smtdims: the comparison is undetermined: {format_valuation(w_false)} makes {question} false; "
            f"{format_valuation(w_true)} makes it true.")
    # Settling either direction settles the comparison JAX asked; the weakest first (one policy: explain).
    found = settling_fix(session, lhs, rhs, decision=d)
    fix = str(found) if found is not None else ""
    if fix:
        text += f"\nsmtdims: suggested fix: {fix}"
    else:
        text += " Add a constraint or change the shape specification so that it holds for every valuation."
    return Explanation(text + at, false_at=w_false, true_at=w_true, fix=fix, location=location)


# -- equality: stock's for programs, proofs for JAX's own shape checks -----------------------------
# Which code asked is told by the comparison's nearest frame outside ``__eq__``/``__ne__`` methods
# (so a key's own ``__eq__``, e.g. ``ShapedArray.__eq__`` comparing shapes for a cache, is walked
# through): its module, and whether it is executing a written ``==``/``!=`` (from ``dis``, which
# names the instruction on every CPython, not raw opcodes).
_EQ_METHODS = frozenset({"__eq__", "__ne__", "_smt_eq", "_smt_ne"})
ASKED_BY_JAX = "jax"  # JAX's own code wrote the comparison: a shape check, answered by proof
ASKED_BY_USER = "user"  # code outside JAX wrote it: stock's answer (the audit may flag it)
KEY_COMPARISON = "key"  # no code wrote it (a dict/set/cache lookup, list.count, ...): stock's answer
# Keyed by (code, module): code objects compare by value, not by where they were compiled.
_CODE_INFO: dict[tuple[Any, str], tuple[bool, frozenset[int], frozenset[int]]] = {}


def _code_info(code: Any, module: str) -> tuple[bool, frozenset[int], frozenset[int]]:
    """(is the code JAX's, offsets of its ``==``/``!=``, offsets of its ``in``/``not in``), once per code object."""
    info = _CODE_INFO.get((code, module))
    if info is None:
        eq, contains = set(), set()
        try:
            for i in dis.get_instructions(code):
                if i.opname == "COMPARE_OP" and ("==" in i.argrepr or "!=" in i.argrepr):
                    eq.add(i.offset)
                elif i.opname == "CONTAINS_OP":
                    contains.add(i.offset)
        except Exception:  # pragma: no cover - code dis cannot read: nothing there counts as written
            pass
        info = (module == "jax" or module.startswith("jax."), frozenset(eq), frozenset(contains))
        if len(_CODE_INFO) < 100_000:
            _CODE_INFO[(code, module)] = info
    return info


def asker(frame: Any) -> str:
    """Who asked the ``==`` that reached ``_DimExpr.__eq__`` (``frame``: the caller of ``__eq__``).

    ``ASKED_BY_JAX`` when a function of JAX's own modules executes ``==``/``!=`` (on dimensions,
    or on shape tuples and lists): ``core.definitely_equal`` (the seam broadcasting, dot_general
    and reshape ask) and the comparisons JAX writes itself (concatenate, select, clamp, ...).
    ``ASKED_BY_USER`` for ``==``, ``!=``, ``in`` written in any other module (answered as stock;
    the audit records it). ``KEY_COMPARISON`` otherwise: the frame is calling something (``dict.get``,
    ``list.index``, JAX's C++ caches compare keys, and which do depends on hash values), or
    JAX's code runs ``in`` (stock's answer there, as for the ``list.index`` that may follow it).
    """
    f = frame
    while f is not None and f.f_code.co_name in _EQ_METHODS:
        f = f.f_back
    if f is None:
        return KEY_COMPARISON
    is_jax, eq, contains = _code_info(f.f_code, f.f_globals.get("__name__") or "")
    at = f.f_lasti
    if at in eq:
        return ASKED_BY_JAX if is_jax else ASKED_BY_USER
    if at in contains and not is_jax:
        return ASKED_BY_USER
    return KEY_COMPARISON


def _smt_eq(self: Any, other: Any) -> bool:
    """``_DimExpr.__eq__``: stock's answer, except for JAX's own shape checks, which get a proof.

    Stock's steps first (its answer is exact when the difference is a constant). A symbolic
    difference gets stock's False unless JAX's code wrote the comparison (:func:`asker`);
    then it is True exactly when smtdims proves the difference 0 for every valuation.
    So a program's ``==``, ``!=``, ``in``, ``list.index`` and dict lookups agree with each
    other and with ``hash`` as on stock JAX, and no answer depends on hash values.
    Never raises (``__eq__`` serves hashing).
    """
    if isinstance(other, _DimExpr):
        if other.scope is not self.scope:
            return False
    elif not _core.is_constant_dim(other):
        return False
    diff = self - other
    if not isinstance(diff, _DimExpr):
        return diff == 0  # a constant difference: JAX's answer is exact
    if not (_EQUALITY[0] or _LISTENERS):
        return False
    who = asker(sys._getframe(1))
    if who == KEY_COMPARISON:
        return False
    prove = who == ASKED_BY_JAX and _EQUALITY[0]
    if not (prove or _LISTENERS):
        return False
    try:
        proven = _provably_zero(diff)
    except Exception:  # __eq__ serves hashing: it must never raise
        proven = False
    answer = proven if prove else False
    if prove and not proven:
        _note_equation(self, other)
    if _LISTENERS:
        _emit(kind="eq", question=f"{self} == {other}", lhs=self, rhs=other, answer=answer, proven_equal=proven,
              asked_by=who, answered_by="smtdims" if prove else "stock")
    return answer


def _smt_ne(self: Any, other: Any) -> bool:
    return not _smt_eq(self, other)


def _provably_zero(diff: Any) -> bool:
    """Whether ``diff`` is 0 for every valuation; the session's proof cache keeps only answers no
    clock shaped (a deadline-cut False is asked again)."""
    scope = diff.scope
    if not scope._initialized:
        return False
    if not scope._explicit_constraints and _nonzero_at_small_values(diff):
        return False  # refuted: every valuation (all >= 1) counts, all ones too
    ir = to_ir(diff)
    if ir.is_constant:
        return ir.as_constant() == 0
    if not scope._explicit_constraints and _nonzero_somewhere(ir):
        return False  # refuted: any valuation (all >= 1) is a witness
    return session_for_scope(scope).proves(ir, "==", Expr.const(0))


def _nonzero_at_small_values(diff: Any) -> bool:
    """Whether JAX's ``diff``, every factor a variable, is nonzero with every variable 1 (each term is
    then its coefficient) or with the variables 2, 3, 4, ... in the order they first occur. Read on
    JAX's terms, before the IR is made: most of JAX's shape checks' differences end here (a fresh
    difference's conversion is about 10 us; a transformer export asks 44). False where a factor
    is an operation (the IR's evaluation decides, :func:`_nonzero_somewhere`). It only ever
    answers False, stock's own answer for a symbolic difference."""
    ones = spread = 0
    values: dict[str, int] = {}
    for term, coeff in diff._sorted_terms:
        value = coeff
        for factor, exponent in term._factors:
            name = factor.var
            if name is None:
                return False
            v = values.get(name)
            if v is None:
                v = values[name] = len(values) + 2
            value *= v**exponent
        ones += coeff
        spread += value
    return ones != 0 or spread != 0


def _nonzero_somewhere(ir: Expr) -> bool:
    """Exact evaluation of the difference at a few valuations (unconstrained scopes only: every
    valuation >= 1 counts); a nonzero value refutes ``== 0`` before any question.

    On the IR (the conversion is memoised per scope, and a proof needs it anyway), not by JAX's
    ``_evaluate``: 10-15 us a valuation there against under 1 here; JAX's shape checks ask this
    for most of their ``==`` (44 times in one export of benchmark 3's transformer block: 2.3 ms).
    It only ever answers False, stock's own answer for a symbolic difference."""
    names = sorted(ir.variables())
    for fill in ((1,) * len(names), (2,) * len(names), tuple(range(2, 2 + len(names)))):
        try:
            if ir.evaluate(dict(zip(names, fill, strict=True))) != 0:
                return True
        except ArithmeticError:
            continue
    return False


# -- the hint on a failed broadcast ---------------------------------------------------------------------
# The commonest failed export is a broadcast of two sizes JAX cannot prove equal (``x + pos_table[:t]``:
# ``t`` against ``min(512, t)``). JAX raises its own TypeError/ValueError; while installed, smtdims adds
# (as ``add_note`` notes and ``smtdims_*`` attributes; class, args and message stay stock's) the
# equation the broadcast needed, read at the seam (the last ``==`` JAX's shape checks asked that
# smtdims could not prove, as the fix loop reads it), a verified fix where one is found in time (the
# fix loop's candidates, first by its rank; no box is run here, so not necessarily the weakest), and
# the ``smtdims export ... --fix`` command that finds the weakest and verifies the whole fix. Only
# ``jax.export.export`` is wrapped, and only while installed; recording the equations costs nothing
# outside an export.
_jax_export = importlib.import_module("jax.export")
_STOCK_EXPORT = _jax_export.export
_HINTS = threading.local()  # .equations: a deque while an export runs on this thread, else None
_HINTED_EQUATIONS = 4
_HINT_DEADLINE = 0.5  # seconds per question while computing the fix of a hint
_BROADCAST_MSG = re.compile(r"incompatible shapes for broadcasting", re.IGNORECASE)


def _note_equation(lhs: Any, rhs: Any) -> None:
    """Keep ``lhs == rhs`` (a shape check of JAX's that smtdims could not prove) while an export runs."""
    eqs = getattr(_HINTS, "equations", None)
    if eqs is not None:
        eqs.append((lhs, rhs))


def _hinted(real: Callable[..., Any]) -> Callable[..., Any]:
    """``jax.export.export`` whose exporting function adds the hint to a failed broadcast (else stock's)."""

    @functools.wraps(real)
    def export(*args: Any, **kwargs: Any) -> Any:
        do_export = real(*args, **kwargs)
        fun = args[0] if args else kwargs.get("fun_jit")

        @functools.wraps(do_export)
        def do_export_hinted(*a: Any, **k: Any) -> Any:
            if not is_installed():
                return do_export(*a, **k)
            outer = getattr(_HINTS, "equations", None)
            eqs = _HINTS.equations = collections.deque(maxlen=_HINTED_EQUATIONS)
            try:
                return do_export(*a, **k)
            except Exception as err:
                _HINTS.equations = None  # the hint's own questions are not the program's
                add_broadcast_hint(err, tuple(eqs), fun, a, k)
                raise
            finally:
                _HINTS.equations = outer

        return do_export_hinted

    return export


_HINTED_EXPORT = _hinted(_STOCK_EXPORT)


def add_broadcast_hint(err: BaseException, equations: tuple[tuple[Any, Any], ...], fun: Any = None,
                       args: tuple = (), kwargs: dict | None = None) -> bool:
    """Add the hint to ``err`` when it is a failed broadcast and ``equations`` (oldest first) hold the
    equation it needed; True when added. Never raises: a hint must not replace the error.

    Sets ``err.smtdims_equation`` ("t == min(512, t)"), ``err.smtdims_fix`` ("add the constraint
    't <= 512'", or "" when none was found in time) and ``err.smtdims_command`` (the
    ``smtdims export ... --fix`` command, ready to paste), and adds one note with the same in words.
    """
    try:
        if (not equations or isinstance(err, AnyInconclusive) or not isinstance(err, (TypeError, ValueError))
                or hasattr(err, "smtdims_equation") or not _BROADCAST_MSG.search(str(err))):
            return False
        hint = _broadcast_hint(equations, fun, args, kwargs or {})
        if hint is None:
            return False
        equation, fix, command = hint
        err.smtdims_equation, err.smtdims_fix, err.smtdims_command = equation, fix, command
        lines = [f"smtdims: the broadcast needs {equation}, which smtdims cannot prove from the scope's constraints"]
        if fix:
            lines.append(f"smtdims: suggested fix: {fix}")
        lines.append(f"smtdims: {'the whole fix, verified end to end' if fix else 'to search for a fix'}: {command}")
        err.add_note("\n".join(lines))
        return True
    except Exception:  # noqa: BLE001 - the hint is extra; the error is what the program gets
        return False


def _broadcast_hint(equations: tuple[tuple[Any, Any], ...], fun: Any, args: tuple,
                    kwargs: dict) -> tuple[str, str, str] | None:
    """(the equation, a verified fix or "", the ``smtdims export ... --fix`` command)."""
    from smtdims.answers.equations import equation_fixes, fix_text

    from .frames import paste_target

    chosen = None  # (equation, fix, scope): the last equation JAX asked; the one before if only it has a fix
    for lhs, rhs in reversed(equations[-2:]):
        dim = lhs if isinstance(lhs, _DimExpr) else rhs
        if not isinstance(dim, _DimExpr) or not dim.scope._initialized:
            continue
        a, b = to_ir(lhs), to_ir(rhs)
        try:
            with options.scoped(deadline=_HINT_DEADLINE):
                found = equation_fixes(session_for_scope(dim.scope), a, b)
        except (SmtdimsError, InconclusiveDimensionOperation):
            found = []
        fix = ""
        if found:
            kind, text, variable, _note, _rank = min(found, key=lambda f: f[4])  # the fix loop's order
            fix = fix_text(kind, text, variable)
        if chosen is None or fix:
            chosen = (f"{a} == {b}", fix, dim.scope)
        if fix:
            break
    if chosen is None:
        return None
    equation, fix, scope = chosen
    target = paste_target(getattr(fun, "__wrapped__", fun)) if fun is not None else ""
    parts = ["smtdims export", target or "MODULE:FUNCTION"]
    leaves = jax.tree_util.tree_leaves((args, kwargs))
    if not kwargs and leaves and all(isinstance(x, jax.ShapeDtypeStruct) for x in leaves) and len(leaves) == len(args):
        parts += [f'--spec "{np.dtype(x.dtype).name}[{",".join(str(d) for d in x.shape)}]"' for x in leaves]
    else:
        parts.append("--spec SPEC")
    parts += [f'-c "{c.text}"' for c in scope_constraints(scope)]
    return equation, fix, " ".join([*parts, "--fix"])


# -- installation -----------------------------------------------------------------------------------
_installed: dict[str, Any] = {}
_EQUALITY = [True]  # provable equality on/off; a list so the hot path reads one cell


def install(*, budget: int | None = None, deadline: float | None = None, equality: bool = True) -> None:
    """Route jax.export's dimension reasoning through smtdims (idempotent; not reference counted).

    ``budget`` (Z3 rlimit per check) and ``deadline`` (seconds per question) become the
    process defaults; see :mod:`smtdims.options`.
    """
    with _INSTALL_LOCK:
        options.set_defaults(budget=budget, deadline=deadline)
        sp._bounds_decision = _smt_bounds_decision
        sp._geq_decision = _smt_geq_decision
        _EQUALITY[0] = bool(equality)
        # With equality off, the wrapper answers exactly as stock (it only reports to listeners).
        _DimExpr.__eq__ = _smt_eq
        _DimExpr.__ne__ = _smt_ne
        if getattr(_jax_export, "export", None) is _STOCK_EXPORT:
            _jax_export.export = _HINTED_EXPORT
        _installed.update(active=True, equality=equality)


def uninstall() -> None:
    """Restore stock JAX exactly (idempotent)."""
    with _INSTALL_LOCK:
        sp._bounds_decision = _STOCK_BOUNDS
        sp._geq_decision = _STOCK_GEQ
        _DimExpr.__eq__ = _STOCK_EQ
        _DimExpr.__ne__ = _STOCK_NE
        if getattr(_jax_export, "export", None) is _HINTED_EXPORT:
            _jax_export.export = _STOCK_EXPORT
        _installed.clear()


def is_installed() -> bool:
    return sp._bounds_decision is _smt_bounds_decision


def installed_options() -> dict[str, Any]:
    with _INSTALL_LOCK:
        return dict(_installed)


def definitely_equal(x: Any, y: Any) -> bool:
    """JAX's ``core.definitely_equal`` (the equality its shape checks ask; proven while installed)."""
    return _core.definitely_equal(x, y)


def jax_bounds(e: Any) -> tuple[float, float]:
    """The bounds JAX itself now computes for ``e`` (smtdims' when installed, else stock's)."""
    return sp._bounds_decision(e, BoundsPrecision.BEST)


def max_dim(a: Any, b: Any) -> Any:
    """JAX's ``core.max_dim`` (for tools and tests that must not import ``jax._src``)."""
    return _core.max_dim(a, b)


def stock_bounds(e: Any, prec: Any = None) -> tuple[float, float]:
    """Stock JAX's bounds of ``e`` (for comparisons in tests, audits and benchmarks)."""
    return _STOCK_BOUNDS(e, prec if prec is not None else BoundsPrecision.BEST)
