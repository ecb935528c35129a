"""One export of a specification, read: the specification as data, the export with what JAX asked
listened to, and the refusal it ended in (:mod:`.refusals`), for the fix loop and the verification."""

from __future__ import annotations

import collections
import functools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
from jax import export

from smtdims.answers.equations import exact_divisions, normalise_constraint, render_constraint
from smtdims.answers.fixes import SPEC
from smtdims.lang.constraints import Constraint, ConstraintSet
from smtdims.lang.expr import Expr
from smtdims.lang.parser import parse_expr

from ..conversion import scope_constraints, to_ir
from ..equality import ASKED_BY_JAX, ASKED_BY_USER
from ..jax_internals import AnyInconclusive
from ..listeners import add_listener, remove_listener
from ..seam import enabled
from ._common import raised_by_smtdims
from .box import Dims
from .refusals import FixPart, Refusal, message_key, refusals_of
from .specs import jax_form
from .time_limit import TimeLimitExceeded, time_limit


class ExportTookTooLong(Exception):  # noqa: N818 - what happened, in the words the fix reports
    """An export under a candidate specification ran past its limit (JAX's own arithmetic, not a refusal)."""


# -- a specification as data: dims (IR) and constraint texts ------------------------------------------
@dataclass(frozen=True)
class Spec:
    dims: Dims
    dtypes: tuple[Any, ...]
    constraints: tuple[str, ...]

    def apply(self, part: FixPart) -> Spec:
        if part.kind != SPEC:
            return Spec(self.dims, self.dtypes, (*self.constraints, jax_form(normalise_constraint(part.text))))
        assert part.variable is not None
        env = {part.variable: parse_expr(part.text)}
        dims = tuple(tuple(exact_divisions(d.substitute(env)) for d in leaf) for leaf in self.dims)
        texts = []
        for t in self.constraints:
            c = Constraint.parse(t)
            texts.append(jax_form(render_constraint(exact_divisions(c.diff.substitute(env)), c.kind))
                         if part.variable in c.diff.variables() else t)
        return Spec(dims, self.dtypes, tuple(texts))

    def variables(self) -> frozenset[str]:
        """The variables of its dimensions (a constraint's alone not included)."""
        return frozenset().union(*(d.variables() for leaf in self.dims for d in leaf))

    def constraint_set(self) -> ConstraintSet:
        return ConstraintSet.of(self.constraints)

    def shape_texts(self) -> tuple[str, ...]:
        return tuple(", ".join(str(d) for d in leaf) for leaf in self.dims)

    def aval_texts(self) -> tuple[str, ...]:
        return tuple(f"{np.dtype(t).name}[{', '.join(str(d) for d in leaf)}]"
                     for leaf, t in zip(self.dims, self.dtypes, strict=True))

    def build(self, in_tree: Any) -> tuple[Any, Any]:
        """The ``ShapeDtypeStruct`` pytree in one fresh scope, and that scope."""
        scope = export.SymbolicScope(self.constraints)
        leaves = []
        for leaf, t in zip(self.dims, self.dtypes, strict=True):
            shape = export.symbolic_shape(", ".join(str(d) for d in leaf), scope=scope) if leaf else ()
            leaves.append(jax.ShapeDtypeStruct(shape, t))
        return jax.tree_util.tree_unflatten(in_tree, leaves), scope


def spec_of(leaves: Sequence[Any], scope: Any) -> Spec:
    dims = tuple(tuple(to_ir(d) if export.is_symbolic_dim(d) else Expr.const(int(d)) for d in x.shape) for x in leaves)
    return Spec(dims, tuple(np.dtype(x.dtype) for x in leaves), tuple(c.text for c in scope_constraints(scope)))


# -- one export attempt ----------------------------------------------------------------------------
@dataclass
class Attempt:
    ok: bool
    error: BaseException | None = None
    question: tuple[Expr, Expr] | None = None  # JAX asked lhs >= rhs and it stayed inconclusive
    scope: Any = None
    seconds: float = 0.0
    # the last equalities JAX's shape checks asked and smtdims could not prove, oldest first: the
    # equation a failed broadcast, concatenate, split or reshape needed is the last one
    equations: tuple[tuple[Expr, Expr], ...] = ()
    exported: Any = field(default=None, repr=False)  # the Exported where the export succeeded
    spec: Any = None  # the Spec exported, where it was one (:func:`attempt`)

    @property
    def timed_out(self) -> bool:
        """The export ran past its limit: no answer about this specification, refused or not."""
        return isinstance(self.error, ExportTookTooLong)

    @property
    def message(self) -> str:
        if self.error is None:
            return ""
        text = str(self.error)
        kind = "InconclusiveDimensionOperation" if isinstance(self.error, AnyInconclusive) else type(self.error).__name__
        return f"{kind}: " + "\n".join(
            ln for ln in text.splitlines() if not ln.strip().startswith("smtdims:")).strip()

    @functools.cached_property
    def refusals(self) -> tuple[Refusal, ...]:
        """What the export refused, read once (:mod:`.refusals`), in the order the loop takes them."""
        if self.ok:
            return ()
        message = "\n".join(str(e) for e in error_chain(self.error)) if self.error is not None else ""
        return refusals_of(self.question, self.equations, message)


_EQUATIONS_KEPT = 4


def error_chain(err: BaseException) -> list[BaseException]:
    """``err`` and the errors it was raised from or during (``__cause__``, ``__context__``): a framework
    that re-raises a shape error as its own (Keras' ``e.__class__(message)``) keeps JAX's there."""
    out: list[BaseException] = []
    e: BaseException | None = err
    while e is not None and e not in out and len(out) < 16:
        out.append(e)
        e = e.__cause__ if e.__cause__ is not None else e.__context__
    return out


def attempt(fn: Callable[..., Any], spec: Spec, in_tree: Any, plats: tuple[str, ...] | None,
            budget: int | None, limit: float | None = None) -> Attempt:
    """Export with ``spec``; the inconclusive comparison or the unproven equalities that stopped it.
    ``limit``: seconds the export may take (a candidate's; :mod:`.time_limit`), else no limit."""
    t0 = time.perf_counter()
    try:
        args, scope = spec.build(in_tree)
    except Exception as err:  # noqa: BLE001 - JAX refused the rewritten specification itself
        return Attempt(False, err, seconds=time.perf_counter() - t0)
    got = export_attempt(fn, jax.tree_util.tree_leaves(args), in_tree, scope, plats, budget, t0, limit)
    got.spec = spec
    return got


def export_attempt(fn: Callable[..., Any], leaves: Sequence[Any], in_tree: Any, scope: Any,
                   plats: tuple[str, ...] | None, budget: int | None, t0: float | None = None,
                   limit: float | None = None) -> Attempt:
    """Export ``fn`` at the spec ``leaves`` (in ``scope``) with smtdims installed, listening to what JAX
    asks: the one export of a specification, whose refusal the fix loop reads and whose success the
    verification uses."""
    t0 = time.perf_counter() if t0 is None else t0
    args = jax.tree_util.tree_unflatten(in_tree, list(leaves))
    seen: list[dict[str, Any]] = []
    equations: collections.deque[tuple[Any, Any]] = collections.deque(maxlen=_EQUATIONS_KEPT)
    # (lhs, rhs, asked by JAX?): JAX's unproven ones and the program's == that stock answered False, in order
    asked: collections.deque[tuple[Any, Any, bool]] = collections.deque(maxlen=_EQUATIONS_KEPT)

    def listener(ev: dict[str, Any]) -> None:
        if ev.get("answer") == "inconclusive":
            seen.append(ev)
        elif ev.get("kind") == "eq" and ev.get("asked_by") == ASKED_BY_JAX and not ev.get("proven_equal"):
            equations.append((ev["lhs"], ev["rhs"]))
            asked.append((ev["lhs"], ev["rhs"], True))
        elif ev.get("kind") == "eq" and ev.get("asked_by") == ASKED_BY_USER and not ev.get("answer"):
            asked.append((ev["lhs"], ev["rhs"], False))

    try:
        with time_limit(limit), enabled(budget=budget):
            add_listener(listener)
            try:
                exported = export.export(jax.jit(fn), platforms=plats)(*args)
            finally:
                remove_listener(listener)
    except TimeLimitExceeded:
        took = time.perf_counter() - t0
        return Attempt(False, ExportTookTooLong(f"the export did not finish within {took:.0f} s under this "
                                                "specification (JAX's own shape arithmetic)"), None, scope, took)
    except Exception as err:  # noqa: BLE001 - a refusal is data
        chain = error_chain(err)
        if raised_by_smtdims(chain[-1]):
            raise
        ev = next((e for e in reversed(seen) if any(e.get("error") is x for x in chain)), None)
        q = None
        if ev is not None:
            try:
                q = (to_ir(ev["lhs"]), to_ir(ev["rhs"]))
            except Exception:  # noqa: BLE001 - an operand smtdims cannot read: no comparison fix
                q = None
        # An error JAX raised needed the last equation JAX asked. One the program raised (an ``assert
        # h % 2 == 0``, flax's ScopeParamShapeError comparing a parameter's shape, a shape test in an
        # ``if``) came from the last == evaluated before it, by anyone: the program's own read included.
        by_program = not raised_in_jax(chain[0])
        eqs = []
        for lhs, rhs in ([(a, b) for a, b, _ in asked] if by_program and asked else equations):
            try:
                eqs.append((to_ir(lhs), to_ir(rhs)))
            except Exception:  # noqa: BLE001 - an operand smtdims cannot read: not an equation it can fix
                continue
        return Attempt(False, err, q, scope, time.perf_counter() - t0, tuple(eqs))
    return Attempt(True, scope=scope, seconds=time.perf_counter() - t0, exported=exported)


def raised_in_jax(err: BaseException) -> bool:
    """Whether the innermost frame of ``err``'s traceback runs JAX's own code (not the program's, a
    framework's or the standard library's)."""
    from ..frames import jax_dirs

    tb = err.__traceback__
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    if last is None:
        return True

    return os.path.abspath(last.tb_frame.f_code.co_filename).startswith(jax_dirs())


def refusal_key(att: Attempt) -> tuple[str, str]:
    """What a refusal is, for "the same refusal came back": the comparison or the equation JAX asked
    (a framework's wrapper repeats its message for a different equation: an encoder's ``t`` table, then
    a decoder's ``u``), else the first line of the message."""
    return next((k for r in att.refusals if (k := r.key()) is not None), None) or message_key(att.message)


def jax_accepts(spec: Spec) -> bool:
    """Whether jax.export's parser takes the constraints (an equality's left side must be one term
    times a coefficient, ``4*b*P*Q + ... == 64*b*...`` is refused): a fix must be writable in JAX."""
    try:
        export.SymbolicScope(spec.constraints)
    except Exception:  # noqa: BLE001 - any refusal: JAX cannot take this fix as written
        return False
    return True


def apply_all(spec: Spec, parts: Sequence[FixPart]) -> Spec | None:
    try:
        for p in parts:
            spec = spec.apply(p)
    except Exception:  # noqa: BLE001 - a later rewrite no longer applies without an earlier one
        return None
    return spec


__all__ = ["Attempt", "Spec", "apply_all", "attempt", "error_chain", "export_attempt", "jax_accepts", "raised_in_jax",
           "refusal_key", "spec_of"]
