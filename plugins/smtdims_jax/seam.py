"""smtdims at JAX's decision seam: the hooks, the "stock JAX where sound" rung, install and uninstall.

Installing points JAX's module-level function pointers at smtdims: ``_bounds_decision`` (every symbolic
``>= <= > <``, ``max``/``min`` and ``bounds``), ``_geq_decision`` (to add witnesses to
inconclusive-comparison errors), ``_DimExpr.__eq__``/``__ne__`` and ``core.definitely_equal``
(provable equality for JAX's shape checks, :mod:`.equality`), and wraps ``jax.export.export`` (the
hint on a failed broadcast, :mod:`.hints`). Uninstalling restores the saved originals exactly.
:func:`stock_jax` and :func:`enabled` change the installation for a block and restore it after.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from smtdims import clocks, forking, options
from smtdims.errors import SmtdimsError, UnsatisfiableConstraintsError, format_valuation
from smtdims.lang.constraints import ConstraintSet
from smtdims.reasoner import NEED_BEST, NEED_SIGN_LEQ, NEED_SIGN_LT, register_stock_rung, session_for
from smtdims.rungs.question import sufficient

from . import exact_stock, frames, listeners
from . import jax_internals as jx
from .conversion import scope_state, session_for_scope, to_ir
from .equality import definitely_equal, set_proving, smt_eq, smt_ne
from .hints import hinted
from .inconclusive import InconclusiveWithWitnesses, explain_inconclusive
from .jax_internals import (
    BoundsPrecision,
    DimExpr,
    DimFactor,
    InconclusiveDimensionOperation,
    constant_value,
    explicit_constraints,
    scope_initialized,
    sorted_terms,
    term_factors,
)

_NEED = {
    BoundsPrecision.FOR_GEQ0_OR_LEQ0: NEED_SIGN_LEQ,
    BoundsPrecision.FOR_GEQ0_OR_LT0: NEED_SIGN_LT,
    BoundsPrecision.BEST: NEED_BEST,
}
_NEED_PREC = {need: prec for prec, need in _NEED.items()}

# -- the "stock JAX where sound" rung ---------------------------------------------------------------------
_EXACT_STOCK = exact_stock.build(jx.spd)
_STOCK_MAX_CONSTRAINTS = 64  # JAX's elimination combines constraints pairwise: on long chains it does not finish


def exact_stock_rung() -> Callable[..., Any] | None:
    """The exact-arithmetic copy of stock JAX's bounds procedure, or None where it could not be built."""
    return _EXACT_STOCK


def _scope_is_linear(scope: Any) -> bool:
    st = scope_state(scope)
    if st.linear is None:
        cs = explicit_constraints(scope)
        linear = len(cs) <= _STOCK_MAX_CONSTRAINTS and all(_stock_is_sound_for(c.diff) for c in cs)
        if not scope_initialized(scope):
            return linear  # of the constraints read so far: the scope's final ones may not be
        st.linear = linear
    return st.linear


def _stock_is_sound_for(e: Any) -> bool:
    """Where JAX's procedure (made exact) is sound: checked on JAX's structure (cheaper than converting).

    The Presburger fragment, plus products and powers of plain variables (always >= 1,
    so JAX's corner-product bounds are right). Its known unsound corner, products and
    powers of factors whose range includes values <= 0 (``floordiv(b - 10, 3)^2``), and
    symbolic divisors stay with smtdims. No limit on magnitudes: the exact copy has no
    floating point (see :mod:`.exact_stock`).
    """
    if not isinstance(e, DimExpr):
        return True
    for term, _ in sorted_terms(e):
        factors = term_factors(term)
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
        if f.operation in (DimFactor.FLOORDIV, DimFactor.MOD) and constant_value(b) is None:
            return False  # operands are always _DimExprs; only a constant divisor is linear
        if not (_stock_is_sound_for(a) and _stock_is_sound_for(b)):
            return False
    return True


def _stock_rung(e: Any, need: Any) -> tuple[float, float] | None:
    """Rung 4 of the ladder: stock JAX's procedure, exact, where it is sound; None elsewhere.

    Errors (JAX's own crashes, its "Possible division by 0", its unsatisfiable-constraint
    ValueError) propagate to the ladder, which skips this rung and counts it.
    """
    if _EXACT_STOCK is None or not isinstance(e, DimExpr):
        return None
    if not (_stock_is_sound_for(e) and _scope_is_linear(e.scope)):
        return None
    return _EXACT_STOCK(e, _NEED_PREC[need])


register_stock_rung(_stock_rung)


# -- the hooks ---------------------------------------------------------------------------------------------
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
    (`-max(-a, -6)` after `2*a == 3*a - 28` is 6 on stock: under no constraints it stays a max, and
    the scope would fail with another error than stock's), at about stock's cost (stock asks its
    procedure for every such question; here only where the ladder was not enough). Sound: the
    constraints read so far are a subset of the scope's.
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
    if not isinstance(e, DimExpr):
        return (int(e), int(e))
    scope = e.scope
    need = _NEED[prec]
    reading = not scope_initialized(scope)
    if reading:
        # Constraints are still being read (JAX simplifies max/min and normalises equalities as it
        # reads them): the ladder under none of them (fewer constraints, sound; a session for each
        # prefix of a long list would cost seconds), then stock's procedure below.
        session = session_for(ConstraintSet())
    else:
        session = session_for_scope(scope)
    listening, rung = bool(listeners.CALLED), None
    try:
        # who answered is the question's to tell: a listener's question is opened here, read before it ends
        with clocks.question() if listening else _NOTHING:
            lo, hi = session.sign_bounds(to_ir(e), need, origin=None if reading else e,
                                         zero_divisors=_as_stock_on_zero_divisor)
            if reading and not sufficient(need, lo, hi):
                lo, hi = _and_stock_while_reading(e, need, lo, hi)
            if listening:
                rung = clocks.this_question().rung
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
        listeners.emit(kind="bounds", question=f"bounds of {e}", expr=e, prec=need, answer=(lo, hi),
                       answered_by=by, stock=None, scope=scope)
    return (lo, hi)


def _smt_geq_decision(e1: Any, e2: Any, cmp_str: Callable[[], str]) -> bool:
    """Stock ``_geq_decision`` (which now calls smtdims), with witnesses on failure."""
    try:
        answer = jx.STOCK_GEQ(e1, e2, cmp_str)
    except InconclusiveDimensionOperation as err:
        question = cmp_str()
        where = frames.where(sys._getframe(1))[0]
        exc = InconclusiveWithWitnesses.wrap(err, lambda: explain_inconclusive(e1, e2, question, where))
        if listeners.CALLED:
            listeners.emit(kind="compare", question=question, lhs=e1, rhs=e2, answer="inconclusive",
                           answered_by="smtdims", error=exc)
        raise exc from None
    if listeners.CALLED:
        listeners.emit(kind="compare", question=cmp_str(), lhs=e1, rhs=e2, answer=answer, answered_by="smtdims")
    return answer


# -- installation ------------------------------------------------------------------------------------------
_jax_export = importlib.import_module("jax.export")
_STOCK_EXPORT = _jax_export.export
_INSTALL_LOCK = forking.fork_safe(threading.RLock())
_installed: dict[str, Any] = {}


def is_installed() -> bool:
    return jx.bounds_decision() is _smt_bounds_decision


_HINTED_EXPORT = hinted(_STOCK_EXPORT, is_installed)


def install(*, budget: int | None = None, deadline: float | None = None, equality: bool = True) -> None:
    """Route jax.export's dimension reasoning through smtdims (idempotent; not reference counted).

    ``budget`` (Z3 rlimit per check) and ``deadline`` (seconds per question) become the
    process defaults; see :mod:`smtdims.options`. ``equality=False``: every ``==`` answers as
    stock (listeners still hear them).
    """
    with _INSTALL_LOCK:
        options.set_defaults(budget=budget, deadline=deadline)
        set_proving(equality)
        jx.set_seam(bounds=_smt_bounds_decision, geq=_smt_geq_decision, eq=smt_eq, ne=smt_ne,
                    definitely_equal=definitely_equal)
        if getattr(_jax_export, "export", None) is _STOCK_EXPORT:
            _jax_export.export = _HINTED_EXPORT
        _installed.update(active=True, equality=equality)


def uninstall() -> None:
    """Restore stock JAX exactly (idempotent)."""
    with _INSTALL_LOCK:
        jx.restore_stock_seam()
        if getattr(_jax_export, "export", None) is _HINTED_EXPORT:
            _jax_export.export = _STOCK_EXPORT
        _installed.clear()


def installed_options() -> dict[str, Any]:
    """How smtdims is installed (``active``, ``equality``); empty when it is not."""
    with _INSTALL_LOCK:
        return dict(_installed)


@contextlib.contextmanager
def stock_jax() -> Iterator[None]:
    """Stock JAX for the block (smtdims uninstalled), then the installation as it was, exception or not.

    For code that must see stock JAX's own answers: an artifact run in this process, "does stock
    JAX export this?", comparisons in tests and tools. The installation is process-wide, as JAX's
    seam is: other threads see stock JAX during the block too.
    """
    with _INSTALL_LOCK:
        was = installed_options() if is_installed() else {}
        uninstall()
    try:
        yield
    finally:
        if was:
            install(equality=was.get("equality", True))


@contextlib.contextmanager
def enabled(*, budget: int | None = None, deadline: float | None = None,
            equality: bool | None = True) -> Iterator[None]:
    """smtdims installed for the block only, then the installation as it was, exception or not.

    ``budget``/``deadline`` apply to this block (this thread or task) only; without either, the options
    in force are not pinned (a session-long block, as the pytest plugin's, still sees ``install(budget=...)``).
    ``equality=None`` keeps an existing installation's setting (True where smtdims was not installed).
    """
    with _INSTALL_LOCK:
        was = installed_options() if is_installed() else {}
        install(equality=was.get("equality", True) if equality is None else equality)
    try:
        with options.scoped(budget=budget, deadline=deadline) if budget is not None or deadline is not None \
                else _NOTHING:
            yield
    finally:
        if was:
            install(equality=was.get("equality", True))
        else:
            uninstall()

__all__ = ["enabled", "exact_stock_rung", "install", "installed_options", "is_installed", "stock_jax", "uninstall"]
