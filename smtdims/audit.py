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

from .errors import format_valuation
from .expr import Expr
from .reasoner import NEED_BEST, NEED_SIGN_LEQ, NEED_SIGN_LT, Session, sufficient
from .results import FALSE, TRUE, UNDETERMINED, _fmt_bound

UNPROVEN_INEQUALITY = "unproven-inequality"
PROVABLY_EQUAL = "provably-equal"
REFUTED_STOCK = "refuted-stock"
INCONCLUSIVE = "inconclusive"


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

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "question": self.question, "answer": self.answer, "answered_by": self.answered_by,
                "location": self.location, "count": self.count, "flag": self.flag, "detail": self.detail,
                "witness": self.witness}


@dataclass
class _Raw:
    event: dict[str, Any]
    location: str
    by: str
    count: int = 1


# -- where the user asked ----------------------------------------------------------------------------
def _internal_dirs() -> tuple[str, ...]:
    dirs = [os.path.dirname(os.path.abspath(__file__))]
    for mod in ("jax", "jaxlib", "smtdims_jax"):
        m = sys.modules.get(mod)
        if m is not None and getattr(m, "__file__", None):
            dirs.append(os.path.dirname(os.path.abspath(m.__file__)))
    return tuple(d + os.sep for d in dirs)


_STDLIB_SKIP = tuple(os.path.abspath(m.__file__) for m in (contextlib, threading))


def user_location(skip_dirs: tuple[str, ...] | None = None) -> str:
    """``file:line in function`` of the first frame outside jax, smtdims, contextlib and threading."""
    dirs = skip_dirs if skip_dirs is not None else _internal_dirs()
    f = sys._getframe(1)
    while f is not None:
        path = os.path.abspath(f.f_code.co_filename)
        if not (path.startswith(dirs) or path in _STDLIB_SKIP or path.endswith(os.sep + "functools.py")):
            return f"{f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_name}"
        f = f.f_back
    return "<unknown>"


# -- the report ---------------------------------------------------------------------------------------------
def _private_session(scope: Any) -> Session:
    """A session of its own for the scope: the audit's questions must not touch the live one."""
    live = _adapter().session_for_scope(scope)
    return Session(live.constraints, live.budget)


class AuditReport:
    """Every distinct dimension decision made in an :func:`audit` block; analysed when the block exits.

    Prints as a table; ``records``, ``flagged``, ``to_dicts()``, ``to_json()``, ``_repr_html_``.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._local = threading.local()  # per thread: who answered the last bounds question; analysing?
        self._raw: dict[tuple, _Raw] = {}
        self._records: list[AuditRecord] | None = None
        self._skip = _internal_dirs()
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
        location = user_location(self._skip)
        key = (kind, event.get("question"), str(event.get("answer")), by, location)
        with self._lock:
            self.events += 1
            raw = self._raw.get(key)
            if raw is None:
                self._raw[key] = _Raw(event, location, by)
                self._records = None
            else:
                raw.count += 1
                self._records = None

    # -- analysis ----------------------------------------------------------------------------------------------
    @property
    def records(self) -> list[AuditRecord]:
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
        return f"{self.events} decisions ({len(rs)} distinct): {tail}"

    def __str__(self) -> str:
        rs = self.records
        header = ("flag", "kind", "question", "answer", "by", "n", "where")
        rows = [(r.flag or "", r.kind, r.question, r.answer, r.answered_by, str(r.count), _short(r.location)) for r in rs]
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
            rows.append(
                f"<tr><td>{flag}</td><td>{esc(r.kind)}</td><td><code>{esc(r.question)}</code></td>"
                f"<td>{esc(r.answer)}</td><td>{esc(r.answered_by)}</td><td>{r.count}</td>"
                f"<td><small>{esc(_short(r.location))}</small></td><td><small>{esc(r.detail)}</small></td></tr>"
            )
        return (f"<div><b>smtdims audit</b>: {esc(self.summary())}<table><tr><th>flag</th><th>kind</th>"
                "<th>question</th><th>answer</th><th>by</th><th>n</th><th>where</th><th>detail</th></tr>"
                + "".join(rows) + "</table></div>")


def _short(location: str) -> str:
    path, _, rest = location.partition(":")
    return f"{os.path.basename(path)}:{rest}" if rest else location


# -- per-event analysis -----------------------------------------------------------------------------------
def _analyse(raw: _Raw, sessions: dict[int, Session]) -> AuditRecord:
    ev, kind = raw.event, raw.event.get("kind", "?")

    def session_of(*objs: Any) -> Session:
        scope = next(o.scope for o in objs if hasattr(o, "scope"))
        s = sessions.get(id(scope))
        if s is None:
            s = sessions[id(scope)] = _private_session(scope)
        return s

    base = dict(kind=kind, question=str(ev.get("question", "")), location=raw.location, count=raw.count)
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


def _adapter():
    from smtdims_jax import adapter

    return adapter


def _fmt_interval(iv: Any) -> str:
    lo, hi = iv
    return f"[{_fmt_bound(lo)}, {_fmt_bound(hi)}]"


def _analyse_bounds(ev: dict[str, Any], raw: _Raw, base: dict[str, Any], session_of: Callable) -> AuditRecord:
    ad = _adapter()
    e = ev["expr"]
    ir = ad.to_ir(e)
    session = session_of(e)
    need = ev.get("prec", NEED_BEST)
    by = raw.by
    if by == "smtdims":
        by = "smtdims fast path" if sufficient(need, *session.interval(ir)) else "smtdims solver"
    answer = _fmt_interval(ev["answer"])
    stock = ev.get("stock")
    would = "gave"
    if stock is None:  # not consulted: ask what stock JAX would have said
        prec = {NEED_SIGN_LEQ: ad.BoundsPrecision.FOR_GEQ0_OR_LEQ0, NEED_SIGN_LT: ad.BoundsPrecision.FOR_GEQ0_OR_LT0,
                NEED_BEST: ad.BoundsPrecision.BEST}.get(need, ad.BoundsPrecision.BEST)
        try:
            stock = ad.stock_bounds(e, prec)
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
    ad = _adapter()
    question = base["question"]
    geq = ev.get("answer")
    inverted = "' > '" in question or "' < '" in question  # JAX computes > and < as not(>=)
    by = raw.by
    if geq == "inconclusive":
        e1, e2 = ev["lhs"], ev["rhs"]
        session = session_of(e1, e2)
        l_ir, r_ir = ad.to_ir(e1), ad.to_ir(e2)
        d = session.decide(l_ir, ">=", r_ir)
        from .explain import suggest_fixes

        fixes = suggest_fixes(session, l_ir, ">=", r_ir, limit=1, decision=d)
        w_true, w_false = (d.witness_false, d.witness_true) if inverted else (d.witness_true, d.witness_false)
        detail = f"true at {format_valuation(w_true)}; false at {format_valuation(w_false)}"
        if fixes:
            detail += f"; fix: {fixes[0]}"
        return AuditRecord(**base, answer="inconclusive", answered_by=by, flag=INCONCLUSIVE, detail=detail,
                           witness=w_false)
    answer = (not geq) if inverted and isinstance(geq, bool) else geq
    if by == "smtdims":
        e1, e2 = ev["lhs"], ev["rhs"]
        diff = ad.to_ir(e1) - ad.to_ir(e2)
        by = "smtdims fast path" if sufficient(NEED_SIGN_LT, *session_of(e1, e2).interval(diff)) else "smtdims solver"
    return AuditRecord(**base, answer=str(answer), answered_by=by)


def _analyse_eq(ev: dict[str, Any], raw: _Raw, base: dict[str, Any], session_of: Callable) -> AuditRecord:
    answer = ev.get("answer")
    by = raw.by
    if answer is True:
        return AuditRecord(**base, answer="True", answered_by=by)
    ad = _adapter()
    e1, e2 = ev["lhs"], ev["rhs"]
    session = session_of(e1, e2)
    diff = ad.to_ir(e1) - ad.to_ir(e2)
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
def audit(*, budget: int | None = None) -> Iterator[AuditReport]:
    """Record and check every dimension decision made in the block.

    Installs smtdims for the block if it is not installed (and uninstalls after);
    an existing installation is left as it is.
    """
    import smtdims_jax

    from .reasoner import CONFIG

    report = AuditReport()
    was = smtdims_jax.is_installed()
    old_budget = CONFIG.budget
    if not was:
        smtdims_jax.install(budget=budget)
    elif budget is not None:
        smtdims_jax.install(budget=budget, equality=smtdims_jax.installed_options().get("equality", True))
    smtdims_jax.add_listener(report.record)
    try:
        yield report
    finally:
        smtdims_jax.remove_listener(report.record)
        if not was:
            smtdims_jax.uninstall()
        CONFIG.budget = old_budget
        report.close()


__all__ = ["AuditRecord", "AuditReport", "audit", "user_location"]
