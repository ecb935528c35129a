"""Immutable, printable answers: :class:`Bounds` and :class:`Decision`."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field, fields
from typing import Any

from ..errors import format_valuation
from ..show.html import left_align
from .bigints import int_text, readable_int, text_int

TRUE, FALSE, UNDETERMINED, UNKNOWN = "true", "false", "undetermined", "unknown"


def _configured() -> tuple[int, float]:
    """``(budget, deadline)`` as configured (:func:`smtdims.options.current`): what an answer quotes
    when whoever built it gave no limits. The session gives the limits of the question it answered
    (:func:`smtdims.clocks.limits_in_force`); the answers never read a question's state themselves."""
    from ..options import current

    return current().budget, current().deadline


# Z3's own words for an unknown check. The engines name the cause instead (clocks.REASON_*); should
# these reach an answer all the same, they are read as the cause they name and never shown.
Z3_WORDING = ("max. resource limit exceeded", "canceled", "timeout", "interrupted from keyboard")


def unknown_cause(reason: str) -> str:
    """The limit behind an "unknown" answer: ``"budget"`` (Z3's rlimit ran out), ``"deadline"`` (the
    wall clock or Ctrl-C stopped the solver) or ``"incomplete"`` (the solver gave up). Reads the
    reasons smtdims gives (clocks.REASON_*, a satisfiability gate's included) and Z3's own words alike."""
    from ..clocks import REASON_BUDGET, REASON_DEADLINE, REASON_INCOMPLETE

    r = " ".join(reason.lower().split())
    if "resource limit" in r or "rlimit" in r or "budget" in r:
        return REASON_BUDGET
    if any(word in r for word in ("cancel", "deadline", "timeout", "interrupt")):
        return REASON_DEADLINE
    return REASON_INCOMPLETE


def unknown_advice(reason: str, budget: int | None = None, deadline: float | None = None) -> str:
    """What an "unknown" answer means and how to raise the limit that stopped it: the one text that
    answers, explanations, reports and the command line all print (never Z3's raw wording).

    ``budget``/``deadline``: the limits in force for that answer (``Decision.budget``...);
    the current ones when not given. A reason that is a sentence of smtdims' own ("solver model
    failed exact re-evaluation", "interrupted") is its own text.
    """
    from ..clocks import REASON_BUDGET, REASON_DEADLINE, REASON_INCOMPLETE, REASON_SATISFIABILITY

    if reason.startswith(REASON_SATISFIABILITY):
        why = reason[len(REASON_SATISFIABILITY):].lstrip(": ")
        return ("whether any valuation meets all the constraints is unknown, so no valuation is claimed "
                "(no witness, no end claimed attained, no \"undetermined\"); the bounds and true/false "
                "answers still hold, vacuously if none does. Satisfiability: "
                + unknown_advice(why, budget, deadline))
    if reason not in (REASON_BUDGET, REASON_DEADLINE, REASON_INCOMPLETE, "") and reason not in Z3_WORDING:
        return reason
    now_budget, now_deadline = _configured()
    budget = now_budget if budget is None else budget
    deadline = now_deadline if deadline is None else deadline
    cause = unknown_cause(reason)
    if cause == REASON_BUDGET:
        return (f"the solver ran out of budget (Z3 rlimit {budget} per check); raise it with budget=N "
                "(per call), smtdims.install(budget=N), smtdims.options.scoped(budget=N) "
                f"or --budget N on the command line, e.g. {budget * 10}")
    if cause == REASON_DEADLINE:
        return (f"the question hit its deadline ({deadline:g} s, a wall-clock limit, not the budget); raise it "
                "with deadline=SECONDS (per call), smtdims.install(deadline=SECONDS), "
                "smtdims.options.scoped(deadline=SECONDS) or --deadline SECONDS on the command line")
    return ("the solver gave up (integer arithmetic with products of variables is undecidable in general; "
            f"Z3 rlimit {budget} per check); a larger budget (budget=N, --budget N) or a constraint that "
            "bounds the variables may help")


# Explanations live in smtdims.answers.explain, which registers them here when imported (importing any
# smtdims module runs the package's __init__, which imports it): results are values and do not
# import the module that reasons about them.
EXPLAINERS: dict[str, Any] = {}


def _explainer(kind: str) -> Any:
    return EXPLAINERS[kind]


def format_bound(v: int | float) -> str:
    """A bound for people: ``inf``, ``-inf`` or :func:`~smtdims.lang.bigints.readable_int` (``10^5000``)."""
    if v == math.inf:
        return "inf"
    if v == -math.inf:
        return "-inf"
    return readable_int(v)


def json_bound(v: int | float) -> int | str:
    """An int, or "inf"/"-inf"; integers of more than 4,000 digits as exact decimal text
    (``json.dumps`` refuses ints past Python's 4,300-digit limit; text also survives readers
    whose numbers are doubles)."""
    if isinstance(v, float):
        return format_bound(v)
    return v if -_JSON_INT < v < _JSON_INT else int_text(v)


_JSON_INT = 10**4000


def json_safe(data: Any) -> Any:
    """``data`` (dicts, lists, tuples, scalars) in the JSON convention of every ``--json`` output:
    an int of more than 4,000 digits becomes its exact decimal text (a string), so that
    ``json.dumps`` never fails on a big constant; every other value is kept. Why one pass at the
    end: witnesses, fixes and reports hold ints in many places, and one missed is a crash."""
    if isinstance(data, bool) or data is None:
        return data
    if isinstance(data, int):
        return data if -_JSON_INT < data < _JSON_INT else int_text(data)
    if isinstance(data, dict):
        return {k: json_safe(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [json_safe(v) for v in data]
    return data


def json_dumps(data: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`json_safe` ``(data)``: valid JSON for integers of any size."""
    import json

    return json.dumps(json_safe(data), **kwargs)


def json_answer(text: str) -> Any:
    """An answer recorded as text, in the JSON convention of every ``--json`` output.

    ``"True"``/``"False"`` become JSON booleans, ``"[lo, hi]"`` a list of two bounds (ints, or
    ``"inf"``/``"-inf"``: JSON has no infinity); anything else (``"inconclusive"``) stays text.
    """
    if text in ("True", "False"):
        return text == "True"
    if text.startswith("[") and text.endswith("]") and text.count(",") == 1:
        ends = [x.strip() for x in text[1:-1].split(",")]
        try:
            return [x if x in ("inf", "-inf") else int(x) for x in ends]
        except ValueError:
            return text
    return text


class Bounds(tuple):
    """``(lo, hi)`` of an expression, with tightness and a witness for each end.

    A tuple subclass so that ``lo, hi = b`` and ``b == (lo, hi)`` work; the extra
    fields are read-only attributes.
    """

    lo: int | float
    hi: int | float
    lo_tight: bool
    hi_tight: bool
    lo_witness: dict[str, int] | None
    hi_witness: dict[str, int] | None
    expr: str
    constraints: tuple[str, ...]
    answered_by: str
    deterministic: bool
    reason: str
    budget: int
    deadline: float

    def __new__(
        cls,
        lo: int | float,
        hi: int | float,
        *,
        lo_tight: bool = False,
        hi_tight: bool = False,
        lo_witness: dict[str, int] | None = None,
        hi_witness: dict[str, int] | None = None,
        expr: str = "",
        constraints: tuple[str, ...] = (),
        answered_by: str = "",
        context: Any = None,
        deterministic: bool = True,
        reason: str | None = None,
        budget: int | None = None,
        deadline: float | None = None,
        clocked: str | None = None,
    ) -> Bounds:
        self = super().__new__(cls, (lo, hi))
        if reason is None:  # why an end is not tight: the clock that shaped it (``clocked``, the question's:
            # a check cut by Ctrl-C), else the budget / incompleteness
            from ..clocks import CLOCK_INTERRUPTED, REASON_DEADLINE, REASON_INCOMPLETE

            reason = ("" if lo_tight and hi_tight else REASON_INCOMPLETE if deterministic
                      else clocked if clocked == CLOCK_INTERRUPTED else REASON_DEADLINE)
        if budget is None or deadline is None:
            now_budget, now_deadline = _configured()
            budget = now_budget if budget is None else budget
            deadline = now_deadline if deadline is None else deadline
        # the instance's own attributes, written past __setattr__ (which refuses: Bounds is immutable)
        vars(self).update(
            # (ConstraintSet, budget, Expr): what explain() needs to find the session again; values only
            _context=context,
            # False when the deadline cut the search short: then an end may be looser than the budget allows
            deterministic=deterministic,
            reason=reason, budget=budget, deadline=deadline,
            lo=lo, hi=hi, lo_tight=lo_tight, hi_tight=hi_tight,
            lo_witness=dict(lo_witness) if lo_witness is not None else None,
            hi_witness=dict(hi_witness) if hi_witness is not None else None,
            expr=expr, constraints=tuple(constraints), answered_by=answered_by,
        )
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Bounds is immutable")

    def explain(self):
        """Why these bounds: the witness of each end and the constraints that bound it."""
        return _explainer("bounds")(self)

    def __reduce__(self):
        return (_rebuild_bounds, (self.to_dict(),))

    @property
    def tight(self) -> bool:
        return self.lo_tight and self.hi_tight

    def to_dict(self) -> dict[str, Any]:
        return {
            "expr": self.expr,
            "constraints": list(self.constraints),
            "lo": json_bound(self.lo),
            "hi": json_bound(self.hi),
            "lo_tight": self.lo_tight,
            "hi_tight": self.hi_tight,
            "lo_witness": json_safe(self.lo_witness),
            "hi_witness": json_safe(self.hi_witness),
            "answered_by": self.answered_by,
            "deterministic": self.deterministic,
            "reason": self.reason,
            "budget": self.budget,
            "deadline": self.deadline,
        }

    @property
    def advice(self) -> str:
        """Why an end is not proven tight and how to raise the limit that stopped it ("" when tight)."""
        return unknown_advice(self.reason, self.budget, self.deadline) if self.reason else ""

    def __repr__(self) -> str:
        return f"Bounds({format_bound(self.lo)}, {format_bound(self.hi)})"

    def describe(self) -> str:
        def end(name: str, v: int | float, tight: bool, w: dict[str, int] | None) -> str:
            if v in (math.inf, -math.inf):
                state = "unbounded (proven)" if tight else "no finite bound found"
                return f"{name} = {format_bound(v)}: {state}"
            state = f"tight, attained at {format_valuation(w)}" if tight else "sound, maybe not tight"
            return f"{name} = {format_bound(v)}: {state}"

        where = f" under {', '.join(self.constraints)}" if self.constraints else ""
        return (
            f"bounds of {self.expr}{where}: [{format_bound(self.lo)}, {format_bound(self.hi)}]\n"
            f"  {end('lo', self.lo, self.lo_tight, self.lo_witness)}\n"
            f"  {end('hi', self.hi, self.hi_tight, self.hi_witness)}"
        )

    def _repr_html_(self) -> str:
        rows = []
        for name, v, tight, w in (
            ("lo", self.lo, self.lo_tight, self.lo_witness),
            ("hi", self.hi, self.hi_tight, self.hi_witness),
        ):
            rows.append(
                f"<tr><td>{name}</td><td>{html.escape(format_bound(v))}</td>"
                f"<td>{'tight' if tight else 'sound'}</td>"
                f"<td>{html.escape(format_valuation(w)) if w else ''}</td></tr>"
            )
        cons = html.escape(", ".join(self.constraints)) or "none"
        return left_align(
            f"<div><b>bounds of</b> <code>{html.escape(self.expr)}</code> "
            f"<small>(constraints: {cons})</small><table>"
            "<tr><th>end</th><th>value</th><th>status</th><th>witness</th></tr>"
            + "".join(rows) + "</table></div>"
        )


def _rebuild_bounds(d: dict[str, Any]) -> Bounds:
    def back(v: Any) -> int | float:
        if isinstance(v, str):
            return float(v) if v in ("inf", "-inf") else text_int(v)
        return v

    def witness(w: dict[str, Any] | None) -> dict[str, int] | None:
        return None if w is None else {k: text_int(x) if isinstance(x, str) else x for k, x in w.items()}

    return Bounds(
        back(d["lo"]), back(d["hi"]), lo_tight=d["lo_tight"], hi_tight=d["hi_tight"],
        lo_witness=witness(d["lo_witness"]), hi_witness=witness(d["hi_witness"]), expr=d["expr"],
        constraints=tuple(d["constraints"]), answered_by=d["answered_by"],
        deterministic=d.get("deterministic", True), reason=d.get("reason"), budget=d.get("budget"),
        deadline=d.get("deadline"),
    )


@dataclass(frozen=True)
class Decision:
    """A three-valued (plus "unknown") answer to ``lhs op rhs`` for all valuations.

    ``status``: ``"true"`` (proven for every valuation), ``"false"`` (proven false
    for every valuation), ``"undetermined"`` (true for some, false for others:
    see the witnesses) or ``"unknown"`` (the solver's budget ran out).
    """

    lhs: str
    op: str
    rhs: str
    status: str
    witness_true: dict[str, int] | None = None
    witness_false: dict[str, int] | None = None
    constraints: tuple[str, ...] = ()
    answered_by: str = ""
    reason: str = ""
    budget: int | None = field(default=None, compare=False)  # the limits in force for this answer
    deadline: float | None = field(default=None, compare=False)
    _context: Any = field(default=None, repr=False, compare=False)  # (ConstraintSet, budget, lhs, op, rhs)
    _clock: str | None = field(default=None, repr=False, compare=False)  # what shaped it, if a clock did

    def __post_init__(self) -> None:
        budget, deadline = _configured()  # the session gives the question's own limits and clock
        if self.budget is None:
            object.__setattr__(self, "budget", budget)
        if self.deadline is None:
            object.__setattr__(self, "deadline", deadline)

    @property
    def deterministic(self) -> bool:
        """False when a clock (the deadline, Ctrl-C, ISL's call limit, the fast solver's timeout) shaped
        the answer: then it is not cached, and may differ. The final reason alone missed a clock that
        shaped the path to it."""
        from ..clocks import REASON_DEADLINE, REASON_INTERRUPTED

        return self._clock is None and self.reason not in (REASON_DEADLINE, REASON_INTERRUPTED)

    @property
    def value(self) -> bool | None:
        return True if self.status == TRUE else False if self.status == FALSE else None

    @property
    def asked(self) -> Any:
        """What was asked, parsed (constraints, budget, lhs, op, rhs), for :func:`smtdims.explain` to ask
        again; None for a decision made by hand."""
        return self._context

    @property
    def question(self) -> str:
        return f"{self.lhs} {self.op} {self.rhs}"

    def __bool__(self) -> bool:
        raise TypeError(
            f"Decision of {self.question!r} is three-valued ({self.status}); "
            "use .value (True/False/None) or .status"
        )

    def explain(self):
        """Why this answer: the constraints a proof rests on, or witnesses and suggested fixes."""
        return _explainer("decision")(self)

    def to_dict(self) -> dict[str, Any]:
        # Not asdict(): _context (the parsed question) and _clock are not data of the answer.
        d = {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}
        d["constraints"] = list(self.constraints)
        d["witness_true"], d["witness_false"] = json_safe(self.witness_true), json_safe(self.witness_false)
        d["value"] = self.value
        d["deterministic"] = self.deterministic
        return d

    def describe(self) -> str:
        where = f" under {', '.join(self.constraints)}" if self.constraints else ""
        text = f"{self.question}{where}: {self.status}"
        if self.status == UNDETERMINED:
            text += (
                f"\n  true  at {format_valuation(self.witness_true)}"
                f"\n  false at {format_valuation(self.witness_false)}"
            )
        elif self.status == UNKNOWN:
            text += f": {unknown_advice(self.reason, self.budget, self.deadline)}"
        return text

    def __str__(self) -> str:
        return self.describe()

    def _repr_html_(self) -> str:
        color = {TRUE: "#1a7f37", FALSE: "#cf222e", UNDETERMINED: "#9a6700"}.get(self.status, "#57606a")
        rows = ""
        if self.witness_true is not None:
            rows += f"<tr><td>true at</td><td>{html.escape(format_valuation(self.witness_true))}</td></tr>"
        if self.witness_false is not None:
            rows += f"<tr><td>false at</td><td>{html.escape(format_valuation(self.witness_false))}</td></tr>"
        cons = html.escape(", ".join(self.constraints)) or "none"
        return left_align(
            f"<div><code>{html.escape(self.question)}</code> is "
            f"<b style='color:{color}'>{self.status}</b> "
            f"<small>(constraints: {cons}; by {html.escape(self.answered_by)})</small>"
            f"<table>{rows}</table></div>"
        )
