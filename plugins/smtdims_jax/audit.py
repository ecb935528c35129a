"""Audit mode: record every dimension decision JAX makes inside a block, and flag the doubtful ones.

``with smtdims.audit() as report:`` around an export installs smtdims for the block
(if it was not installed), listens to every decision, and on exit checks each one
with the solver. Flags:

- ``unproven-inequality``: JAX's ``==`` answered False although the expressions are
  equal at some valuation (``witness`` shows one). JAX's ``==`` returns False when
  it cannot tell, so code that branches on it may silently take the wrong branch;
- ``provably-equal``: ``==`` answered False although the expressions are equal for
  every valuation (stock equality is syntactic);
- ``refuted-stock``: a bound stock JAX gave, or would have given, for an expression
  is contradicted by a valuation (``witness``), i.e. stock JAX's answer is unsound;
- ``inconclusive``: a comparison JAX could not decide (the export fails there);
  the detail carries the witnesses and the first verified fix.

Recording is cheap (the solver work happens when the block exits), and identical
decisions from the same source line are merged (``count``).

Who asked. JAX asks many questions of its own (``d == 1`` while broadcasting,
``d == 0`` in ``concatenate``, shape assertions of an export) whose ``==`` answers
are unproven by design. A question *arose in user code* when the chain of frames
from the user's frame to the decision holds nothing but JAX's symbolic-dimension
machinery: the user's frame called a ``_DimExpr`` operator (``==``, ``>=``, ``%``, ...),
a ``jax.export`` shape function or a dimension helper of ``jax.core``
(``max_dim``, ``min_dim``, ``definitely_equal``, ...) directly. A question asked
from any other JAX code (``jnp.mean``, ``lax.concatenate``, tracing, lowering) arose
inside JAX. The report shows the questions from user code, plus the JAX-internal
ones that are flagged ``inconclusive`` (the export fails there) or ``refuted-stock``
(a bound the solver refutes); the other internal ones are counted
(``report.internal``), and ``audit(show_internal=True)`` shows them all.

This module is the JAX side of audit mode (it imports JAX); the reasoning core
``smtdims`` does not import it.
"""

from __future__ import annotations

import contextlib
import html
import json
import math
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from smtdims import forking
from smtdims.errors import format_valuation
from smtdims.lang.expr import Expr
from smtdims.lang.results import FALSE, TRUE, UNDETERMINED, format_bound, json_answer
from smtdims.reasoner import NEED_BEST, NEED_SIGN_LEQ, NEED_SIGN_LT, Session, sufficient
from smtdims.show.html import html_table

from . import frames
from .conversion import session_for_scope, to_ir
from .jax_internals import BoundsPrecision, stock_bounds
from .listeners import add_listener, remove_listener
from .seam import enabled

UNPROVEN_INEQUALITY = "unproven-inequality"
PROVABLY_EQUAL = "provably-equal"
REFUTED_STOCK = "refuted-stock"
INCONCLUSIVE = "inconclusive"
USER, JAX = frames.USER, frames.JAX
# Flags shown even when JAX asked the question itself: they concern the export whoever asked.
_ALWAYS_SHOWN = frozenset({INCONCLUSIVE, REFUTED_STOCK})


@dataclass(frozen=True)
class AuditRecord:
    """One distinct decision: what was asked, the answer, who answered, where, and any flag."""

    kind: str  # "bounds" | "compare" | "eq"
    question: str
    answer: str
    answered_by: str  # "stock JAX" | "smtdims fast path" | "smtdims solver" | "smtdims"
    location: str
    count: int = 1
    flag: str | None = None
    detail: str = ""
    witness: dict[str, int] | None = None
    origin: str = USER  # "user": asked by user code; "jax": asked inside JAX (see the module docstring)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "question": self.question, "answer": json_answer(self.answer), "answered_by": self.answered_by,
                "location": self.location, "count": self.count, "flag": self.flag, "detail": self.detail,
                "witness": self.witness, "origin": self.origin}


@dataclass
class _Raw:
    event: dict[str, Any]
    location: str
    by: str
    origin: str
    count: int = 1


# -- where the user asked: one rule (frames.py) ----------------------------------------------------------
user_location = frames.user_location
question_origin = frames.question_origin
cell_name = frames.cell_name
display_filename = frames.display_filename


# -- the report ---------------------------------------------------------------------------------------------
def _private_session(scope: Any) -> Session:
    """A session of its own for the scope: the audit's questions must not touch the live one."""
    live = session_for_scope(scope)
    return Session(live.constraints, live.budget)


class AuditReport:
    """Every distinct dimension decision made in an :func:`audit` block; analysed when the block exits.

    Prints as a table; ``records`` (those shown), ``flagged``, ``internal`` (how many JAX-internal
    decisions are not shown), ``all_records``, ``to_dicts()``, ``to_json()``, ``_repr_html_``.
    """

    def __init__(self, *, show_internal: bool = False) -> None:
        self._lock = forking.fork_safe(threading.RLock())
        self._local = threading.local()  # per thread: who answered the last bounds question; analysing?
        self._raw: dict[tuple, _Raw] = {}
        self._records: list[AuditRecord] | None = None
        self._skip = frames.library_dirs()
        self._jax = frames.jax_dirs()
        self.show_internal = show_internal
        self.events = 0
        self._closed = False

    # -- recording (called by JAX's decisions; must be cheap and never raise) -------------------------
    def record(self, event: dict[str, Any]) -> None:
        if self._closed or getattr(self._local, "analysing", False):
            return  # after the block, or JAX arithmetic done by the analysis itself
        kind = event.get("kind")
        by = "stock JAX" if event.get("answered_by") == "stock" else "smtdims"
        if kind == "bounds":
            self._local.last_bounds_by = by
        elif kind == "compare":
            # JAX's >= asks for bounds of the difference first: whoever answered that answered this.
            if getattr(self._local, "last_bounds_by", None) == "stock JAX":
                by = "stock JAX"
            self._local.last_bounds_by = None
        location, origin = frames.where(sys._getframe(1), self._skip, self._jax)
        key = (kind, event.get("question"), str(event.get("answer")), by, location, origin)
        with self._lock:
            self.events += 1
            raw = self._raw.get(key)
            if raw is None:
                self._raw[key] = _Raw(event, location, by, origin)
                self._records = None
            else:
                raw.count += 1
                self._records = None

    # -- analysis ----------------------------------------------------------------------------------------------
    @property
    def records(self) -> list[AuditRecord]:
        """The records shown: questions from user code, and flagged ones JAX asked (see the module
        docstring); every record with ``show_internal=True``."""
        return [r for r in self.all_records if self._shown(r)]

    def _shown(self, r: AuditRecord) -> bool:
        return self.show_internal or r.origin == USER or r.flag in _ALWAYS_SHOWN

    @property
    def internal(self) -> int:
        """How many distinct decisions JAX asked itself and the report does not show."""
        return sum(1 for r in self.all_records if not self._shown(r))

    @property
    def all_records(self) -> list[AuditRecord]:
        """Every distinct decision, shown or not (``origin`` says who asked)."""
        with self._lock:
            if self._records is None:
                sessions: dict[int, Session] = {}
                self._local.analysing = True
                try:
                    self._records = [_analyse(raw, sessions) for raw in list(self._raw.values())]
                finally:
                    self._local.analysing = False
            return list(self._records)

    def close(self) -> None:
        """Analyse everything now and drop the JAX objects the events held (scopes, expressions)."""
        self.records  # noqa: B018
        with self._lock:
            self._closed = True
            self._raw = {}

    @property
    def flagged(self) -> list[AuditRecord]:
        return [r for r in self.records if r.flag is not None]

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[AuditRecord]:
        return iter(self.records)

    def to_dicts(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.records]

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dicts(), **kw)

    def summary(self) -> str:
        rs = self.records
        flags: dict[str, int] = {}
        for r in rs:
            if r.flag:
                flags[r.flag] = flags.get(r.flag, 0) + 1
        tail = ", ".join(f"{n} {k}" for k, n in sorted(flags.items())) or "nothing flagged"
        hidden = self.internal
        more = f"; {hidden} asked inside JAX, not shown" if hidden else ""
        noun = "decision" if self.events == 1 else "decisions"
        return f"{self.events} {noun} ({len(rs) + hidden} distinct{more}): {tail}"

    def _columns(self) -> tuple[str, ...]:
        base = ("flag", "kind", "question", "answer", "by", "n", "where")
        return (*base, "asked by") if self.show_internal else base

    def _cells(self, r: AuditRecord) -> tuple[str, ...]:
        cells = (r.flag or "", r.kind, r.question, r.answer, r.answered_by, str(r.count), _short(r.location))
        return (*cells, "JAX" if r.origin == JAX else "user code") if self.show_internal else cells

    def __str__(self) -> str:
        rs = self.records
        if not rs:  # a header and a rule over no rows read as a broken table
            return self.summary()
        header = self._columns()
        rows = [self._cells(r) for r in rs]
        widths = [min(60, max([len(h)] + [len(row[i]) for row in rows])) for i, h in enumerate(header)]

        def line(cells: tuple[str, ...]) -> str:
            return "  ".join(c[:w].ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

        out = [self.summary(), line(header), line(tuple("-" * w for w in widths))]
        out += [line(row) for row in rows]
        for r in rs:
            if r.flag:
                out.append(f"[{r.flag}] {r.question}: {r.detail}")
        return "\n".join(out)

    def __repr__(self) -> str:
        return f"<AuditReport: {self.summary()}>"

    def _repr_html_(self) -> str:
        esc = html.escape
        colors = {UNPROVEN_INEQUALITY: "#9a6700", PROVABLY_EQUAL: "#9a6700", REFUTED_STOCK: "#cf222e",
                  INCONCLUSIVE: "#cf222e"}
        rows = []
        for r in self.records:
            flag = (f"<b style='color:{colors.get(r.flag, '#57606a')}'>{esc(r.flag)}</b>" if r.flag else "")
            cells = self._cells(r)
            row = [flag, esc(r.kind), f"<code>{esc(r.question)}</code>", esc(r.answer), esc(r.answered_by),
                   str(r.count), f"<small>{esc(cells[6])}</small>", *map(esc, cells[7:]),
                   f"<small>{esc(r.detail)}</small>"]
            rows.append(row)
        table = html_table(rows, header=(*self._columns(), "detail")) if rows else ""
        return f"<div><b>smtdims audit</b>: {esc(self.summary())}{table}</div>"


def _short(location: str) -> str:
    """``basename:line in function`` of ``path:line in function`` (``In [n]:...`` stays as it is)."""
    head, sep, func = location.rpartition(" in ")
    path, colon, line = head.rpartition(":")  # the last ':' (a Windows path holds one more)
    if not (sep and colon):
        return location
    return f"{os.path.basename(path) or path}:{line} in {func}"


# -- per-event analysis -----------------------------------------------------------------------------------
def _analyse(raw: _Raw, sessions: dict[int, Session]) -> AuditRecord:
    ev, kind = raw.event, raw.event.get("kind", "?")

    def session_of(*objs: Any) -> Session:
        scope = next(o.scope for o in objs if hasattr(o, "scope"))
        s = sessions.get(id(scope))
        if s is None:
            s = sessions[id(scope)] = _private_session(scope)
        return s

    base = dict(kind=kind, question=str(ev.get("question", "")), location=raw.location, count=raw.count,
                origin=raw.origin)
    try:
        if kind == "bounds":
            return _analyse_bounds(ev, raw, base, session_of)
        if kind == "compare":
            return _analyse_compare(ev, raw, base, session_of)
        if kind == "eq":
            return _analyse_eq(ev, raw, base, session_of)
    except Exception as err:  # an audit must report, not crash the user's block
        return AuditRecord(**base, answer=str(ev.get("answer")), answered_by=raw.by, detail=f"not analysed: {err!r}")
    return AuditRecord(**base, answer=str(ev.get("answer")), answered_by=raw.by)


def _fmt_interval(iv: Any) -> str:
    lo, hi = iv
    return f"[{format_bound(lo)}, {format_bound(hi)}]"


def _analyse_bounds(ev: dict[str, Any], raw: _Raw, base: dict[str, Any], session_of: Callable) -> AuditRecord:
    e = ev["expr"]
    ir = to_ir(e)
    session = session_of(e)
    need = ev.get("prec", NEED_BEST)
    by = raw.by
    if by == "smtdims":
        by = "smtdims fast path" if sufficient(need, *session.interval(ir)) else "smtdims solver"
    answer = _fmt_interval(ev["answer"])
    stock = ev.get("stock")
    would = "gave"
    if stock is None:  # not consulted: ask what stock JAX would have said
        prec = {NEED_SIGN_LEQ: BoundsPrecision.FOR_GEQ0_OR_LEQ0, NEED_SIGN_LT: BoundsPrecision.FOR_GEQ0_OR_LT0,
                NEED_BEST: BoundsPrecision.BEST}.get(need, BoundsPrecision.BEST)
        try:
            stock = stock_bounds(e, prec)
        except Exception:
            stock = None
        would = "would have given"
    if stock is not None:
        lb, ub = stock
        for bound, op in ((lb, ">="), (ub, "<=")):
            if math.isinf(bound):
                continue
            d = session.decide(ir, op, Expr.const(int(bound)))
            if d.status in (FALSE, UNDETERMINED) and d.witness_false is not None:
                value = ir.evaluate(d.witness_false)
                return AuditRecord(
                    **base, answer=answer, answered_by=by, flag=REFUTED_STOCK, witness=d.witness_false,
                    detail=(f"stock JAX {would} bounds {_fmt_interval(stock)}, claiming {ir} {op} {int(bound)}; "
                            f"at {format_valuation(d.witness_false)} it is {value}"),
                )
    return AuditRecord(**base, answer=answer, answered_by=by)


def _analyse_compare(ev: dict[str, Any], raw: _Raw, base: dict[str, Any], session_of: Callable) -> AuditRecord:
    question = base["question"]
    geq = ev.get("answer")
    inverted = "' > '" in question or "' < '" in question  # JAX computes > and < as not(>=)
    by = raw.by
    if geq == "inconclusive":
        e1, e2 = ev["lhs"], ev["rhs"]
        session = session_of(e1, e2)
        l_ir, r_ir = to_ir(e1), to_ir(e2)
        d = session.decide(l_ir, ">=", r_ir)
        from smtdims.answers.fixes import settling_fix

        fix = settling_fix(session, l_ir, r_ir, decision=d)
        w_true, w_false = (d.witness_false, d.witness_true) if inverted else (d.witness_true, d.witness_false)
        detail = f"true at {format_valuation(w_true)}; false at {format_valuation(w_false)}"
        if fix is not None:
            detail += f"; fix: {fix}"
        return AuditRecord(**base, answer="inconclusive", answered_by=by, flag=INCONCLUSIVE, detail=detail,
                           witness=w_false)
    answer = (not geq) if inverted and isinstance(geq, bool) else geq
    if by == "smtdims":
        e1, e2 = ev["lhs"], ev["rhs"]
        diff = to_ir(e1) - to_ir(e2)
        by = "smtdims fast path" if sufficient(NEED_SIGN_LT, *session_of(e1, e2).interval(diff)) else "smtdims solver"
    return AuditRecord(**base, answer=str(answer), answered_by=by)


def _analyse_eq(ev: dict[str, Any], raw: _Raw, base: dict[str, Any], session_of: Callable) -> AuditRecord:
    answer = ev.get("answer")
    by = raw.by
    if answer is True:
        return AuditRecord(**base, answer="True", answered_by=by)
    e1, e2 = ev["lhs"], ev["rhs"]
    session = session_of(e1, e2)
    diff = to_ir(e1) - to_ir(e2)
    if ev.get("proven_equal"):
        return AuditRecord(**base, answer=str(answer), answered_by=by, flag=PROVABLY_EQUAL,
                           detail=f"{e1} and {e2} are equal for every valuation; JAX's syntactic == said False")
    d = session.decide(diff, "==", Expr.const(0))
    if d.status == TRUE:
        return AuditRecord(**base, answer=str(answer), answered_by=by, flag=PROVABLY_EQUAL,
                           detail=f"{e1} and {e2} are equal for every valuation; == said False")
    if d.status == FALSE:
        return AuditRecord(**base, answer=str(answer), answered_by=by,
                           detail="proven unequal for every valuation")
    w = d.witness_true
    where = f"they are equal at {format_valuation(w)}" if w is not None else "the solver could not decide"
    return AuditRecord(**base, answer=str(answer), answered_by=by, flag=UNPROVEN_INEQUALITY, witness=w,
                       detail=f"== answered False without proof: {where}")


# -- the context manager -----------------------------------------------------------------------------------
@contextlib.contextmanager
def audit(*, budget: int | None = None, show_internal: bool = False) -> Iterator[AuditReport]:
    """Record and check every dimension decision made in the block.

    Installs smtdims for the block if it is not installed (and uninstalls after);
    an existing installation is left as it is. The report shows the questions user
    code asked (and flagged ones JAX asked: see the module docstring);
    ``show_internal=True`` shows every question.
    """
    report = AuditReport(show_internal=show_internal)
    try:
        with enabled(budget=budget, equality=None):  # the budget: this block only
            add_listener(report.record)
            try:
                yield report
            finally:
                remove_listener(report.record)
    finally:
        report.close()


__all__ = [
    "INCONCLUSIVE", "JAX", "PROVABLY_EQUAL", "REFUTED_STOCK", "UNPROVEN_INEQUALITY", "USER", "AuditRecord",
    "AuditReport", "audit", "cell_name", "display_filename", "question_origin", "user_location",
]
