"""Equality of dimensions: stock's answer for programs, a proof for JAX's own shape checks.

JAX asks for equality in two ways. Through ``core.definitely_equal`` (and ``definitely_equal_shape``,
``definitely_equal_one_of_dim``, ``is_empty_shape``, ``divide_shape_sizes``, which call it through
``core``'s globals): broadcasting, ``dot_general``, ``reshape``, ``einsum``, and on jax >= 0.10 the
type checks of ``cond``/``scan``/``while_loop``. That function is replaced while installed
(:func:`definitely_equal`): no frame is read. And by ``==``/``!=`` written in JAX's own code, in shape
rules registered inside primitives (``concatenate``, ``select``, ``clamp``, ``sort``, on jax 0.7
``reshape``, ``core.typematch`` and ``jnp.stack``): no function reaches those, so ``_DimExpr.__eq__``
tells who asked by reading the calling frame's module and bytecode offset (:func:`asker`).

A program's ``==``, ``!=``, ``in``, ``list.index`` and dict lookups get stock's answer, so they agree
with each other and with ``hash`` as on stock JAX, and no answer depends on hash values.
"""

from __future__ import annotations

import collections
import dis
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from smtdims.lang.expr import Expr

from . import listeners
from .conversion import session_for_scope, to_ir
from .jax_internals import (
    STOCK_DEFINITELY_EQUAL,
    DimExpr,
    InconclusiveDimensionOperation,
    Tracer,
    explicit_constraints,
    is_constant_dim,
    scope_initialized,
    sorted_terms,
    term_factors,
)

ASKED_BY_JAX = "jax"  # JAX's own code wrote the comparison: a shape check, answered by proof
ASKED_BY_USER = "user"  # code outside JAX wrote it: stock's answer (the audit may flag it)
KEY_COMPARISON = "key"  # no code wrote it (a dict/set/cache lookup, list.count, ...): stock's answer

_PROVING = [True]  # provable equality on/off (install(equality=...)); a list so the hot path reads one cell


def set_proving(on: bool) -> None:
    """Whether JAX's shape checks get proofs (off: every answer is stock's; listeners still hear them)."""
    _PROVING[0] = bool(on)


# -- the two hooks ----------------------------------------------------------------------------------------
def smt_eq(self: Any, other: Any) -> bool:
    """``_DimExpr.__eq__``: stock's answer, except for JAX's own shape checks, which get a proof.

    Stock's steps first (its answer is exact when the difference is a constant). A symbolic
    difference gets stock's False unless JAX's code wrote the comparison (:func:`asker`).
    Never raises (``__eq__`` serves hashing).
    """
    diff = _symbolic_difference(self, other)
    if diff is None or not isinstance(diff, DimExpr):
        return diff is not None and diff == 0  # None: different scopes or not a dimension
    if not (_PROVING[0] or listeners.CALLED):
        return False
    who = asker(sys._getframe(1))
    if who == KEY_COMPARISON:
        return False
    return _answer(self, other, diff, who)


def smt_ne(self: Any, other: Any) -> bool:
    return not smt_eq(self, other)


def definitely_equal(x: Any, y: Any) -> bool:
    """``core.definitely_equal`` while installed: stock's function, whose ``x == y`` reaches
    :func:`smt_eq` from a frame of JAX's, answered here as :func:`smt_eq` answers it there, without
    reading a frame. Tracers and what is neither a dimension nor an int go to stock's function."""
    if isinstance(x, DimExpr) and not isinstance(y, Tracer):
        return x is y or _asked_by_jax(x, y)
    if isinstance(y, DimExpr) and type(x) is int:  # `x == y`: int's __eq__ declines, Python asks y's
        return _asked_by_jax(y, x)
    return STOCK_DEFINITELY_EQUAL(x, y)


def _asked_by_jax(dim: Any, other: Any) -> bool:
    try:
        diff = _symbolic_difference(dim, other)
    except InconclusiveDimensionOperation:  # as stock's function catches it
        return False
    if diff is None or not isinstance(diff, DimExpr):
        return diff is not None and diff == 0
    if not (_PROVING[0] or listeners.CALLED):
        return False
    return _answer(dim, other, diff, ASKED_BY_JAX)


def _symbolic_difference(self: Any, other: Any) -> Any:
    """``self - other`` (a ``_DimExpr``, or an int where constant), or None where stock answers False
    without subtracting (another scope, or not a dimension)."""
    if isinstance(other, DimExpr):
        if other.scope is not self.scope:
            return None
    elif not is_constant_dim(other):
        return None
    return self - other


def _answer(lhs: Any, rhs: Any, diff: Any, who: str) -> bool:
    """The answer to ``lhs == rhs`` (symbolic ``diff``) asked by ``who``: proven where JAX asked, and
    reported to listeners."""
    prove = who == ASKED_BY_JAX and _PROVING[0]
    if not (prove or listeners.CALLED):
        return False
    try:
        proven = _provably_zero(diff)
    except Exception:  # __eq__ serves hashing: it must never raise
        proven = False
    answer = proven if prove else False
    if prove and not proven:
        _note_unproven(lhs, rhs)
    if listeners.CALLED:
        listeners.emit(kind="eq", question=f"{lhs} == {rhs}", lhs=lhs, rhs=rhs, answer=answer, proven_equal=proven,
                       asked_by=who, answered_by="smtdims" if prove else "stock")
    return answer


# -- who asked: the calling frame's bytecode ----------------------------------------------------------------
# Which code asked is told by the comparison's nearest frame outside ``__eq__``/``__ne__`` methods
# (so a key's own ``__eq__``, e.g. ``ShapedArray.__eq__`` comparing shapes for a cache, is walked
# through): its module, and whether it is executing a written ``==``/``!=`` (from ``dis``, which
# names the instruction on every CPython, not raw opcodes). Relies on ``frame.f_lasti`` being the
# offset ``dis`` gives the executing COMPARE_OP/CONTAINS_OP: tested on CPython 3.11, 3.12 and 3.13.
_EQ_METHODS = frozenset({"__eq__", "__ne__", "smt_eq", "smt_ne"})
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
    or on shape tuples and lists): the comparisons JAX writes itself (concatenate, select, clamp,
    ...) and ``core.definitely_equal`` where it is called as stock's function (a reference taken
    before installing). ``ASKED_BY_USER`` for ``==``, ``!=``, ``in`` written in any other module
    (answered as stock; the audit records it). ``KEY_COMPARISON`` otherwise: the frame is calling
    something (``dict.get``, ``list.index``, JAX's C++ caches compare keys, and which do depends on
    hash values), or JAX's code runs ``in`` (stock's answer there, as for the ``list.index`` that
    may follow it).
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


# -- the proof, refutations first ---------------------------------------------------------------------------
def _provably_zero(diff: Any) -> bool:
    """Whether ``diff`` is 0 for every valuation; the session's proof cache keeps only answers no
    clock shaped (a deadline-cut False is asked again)."""
    scope = diff.scope
    if not scope_initialized(scope):
        return False
    if not explicit_constraints(scope) and _nonzero_at_small_values(diff):
        return False  # refuted: every valuation (all >= 1) counts, all ones too
    ir = to_ir(diff)
    if ir.is_constant:
        return ir.as_constant() == 0
    if not explicit_constraints(scope) and _nonzero_somewhere(ir):
        return False  # refuted: any valuation (all >= 1) is a witness
    return session_for_scope(scope).proves(ir, "==", Expr.const(0))


def _nonzero_at_small_values(diff: Any) -> bool:
    """Whether JAX's ``diff``, every factor a variable, is nonzero with every variable 1 (each term is
    then its coefficient) or with the variables 2, 3, 4, ... in the order they first occur. Read on
    JAX's terms, before the IR is made: most of JAX's shape checks' differences end here, without a
    conversion. False where a factor is an operation (the IR's evaluation decides,
    :func:`_nonzero_somewhere`). It only ever answers False, stock's own answer for a symbolic
    difference."""
    ones = spread = 0
    values: dict[str, int] = {}
    for term, coeff in sorted_terms(diff):
        value = coeff
        for factor, exponent in term_factors(term):
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
    ``_evaluate``, which is an order of magnitude slower a valuation. It only ever answers False,
    stock's own answer for a symbolic difference."""
    names = sorted(ir.variables())
    for fill in ((1,) * len(names), (2,) * len(names), tuple(range(2, 2 + len(names)))):
        try:
            if ir.evaluate(dict(zip(names, fill, strict=True))) != 0:
                return True
        except ArithmeticError:
            continue
    return False


# -- the equations JAX needed and smtdims could not prove (for the hint on a failed broadcast) ------------
_UNPROVEN = threading.local()  # .equations: a deque while recording on this thread, else None


def _note_unproven(lhs: Any, rhs: Any) -> None:
    eqs = getattr(_UNPROVEN, "equations", None)
    if eqs is not None:
        eqs.append((lhs, rhs))


@contextmanager
def recording_unproven(keep: int) -> Iterator[collections.deque]:
    """The last ``keep`` equations JAX's shape checks asked in the block (this thread) that smtdims
    could not prove, oldest first; the recording of an enclosing block resumes after it."""
    outer = getattr(_UNPROVEN, "equations", None)
    eqs = _UNPROVEN.equations = collections.deque(maxlen=keep)
    try:
        yield eqs
    finally:
        _UNPROVEN.equations = outer


@contextmanager
def not_recording() -> Iterator[None]:
    """Questions asked in the block are not recorded (a hint's own questions are not the program's)."""
    outer = getattr(_UNPROVEN, "equations", None)
    _UNPROVEN.equations = None
    try:
        yield
    finally:
        _UNPROVEN.equations = outer


__all__ = ["ASKED_BY_JAX", "ASKED_BY_USER", "KEY_COMPARISON", "asker", "definitely_equal", "not_recording",
           "recording_unproven", "set_proving", "smt_eq", "smt_ne"]
