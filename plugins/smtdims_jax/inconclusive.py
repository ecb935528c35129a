"""JAX's inconclusive-comparison error, with smtdims' witnesses and suggested fix."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from smtdims.answers.fixes import Fix, settling_fix
from smtdims.errors import SmtdimsError, format_valuation
from smtdims.lang.results import UNDETERMINED, UNKNOWN, unknown_advice

from .conversion import session_for_scope, to_ir
from .jax_internals import DimExpr, InconclusiveDimensionOperation, inconclusive_help_msg

_CMP_RE = re.compile(r"' (>=|<=|>|<) '")


@dataclass(frozen=True)
class InconclusiveExplanation:
    """smtdims' reading of an inconclusive comparison: the lines its error message adds (``text``) and
    the values they were written from, so that a reader (the export pipeline) takes the values, not the words.

    ``question``: JAX's comparison as its message reads it, where witnesses on both sides were found
    ("" otherwise); ``suggested_fix``: the first fix smtdims verified for it; ``location``: the user's
    line it arose at ("" where none is known).
    """

    text: str
    false_at: dict[str, int] | None = None
    true_at: dict[str, int] | None = None
    location: str = ""
    question: str = ""
    suggested_fix: Fix | None = None

    @property
    def fix(self) -> str:
        """The suggested fix in words ('' if none)."""
        return str(self.suggested_fix) if self.suggested_fix is not None else ""


class InconclusiveWithWitnesses(InconclusiveDimensionOperation):
    """JAX's inconclusive-comparison error with smtdims' explanation.

    Stock's class and constructor (a subclass: every handler written for stock catches it;
    ``type(e)(message)`` and ``type(e)(*e.args)`` work, as Keras' traceback filtering needs);
    ``args`` are exactly the arguments stock's error had. The explanation (witnesses, a
    suggested fix) costs solver calls, and JAX catches this error as control flow in places
    (``core.definitely_equal``, ``top_k``), so it is computed on first use (``str()``,
    :attr:`explanation`, :attr:`witnesses`, :attr:`reading`), not when raised. A copy or pickle
    carries it computed (its values, no JAX objects).
    """

    _explain: Callable[[], InconclusiveExplanation] | None = None
    _explained: InconclusiveExplanation | None = None

    @classmethod
    def wrap(cls, err: BaseException, explain: Callable[[], InconclusiveExplanation]) -> InconclusiveWithWitnesses:
        """The same error as ``err`` (stock's), with smtdims' explanation to come."""
        exc = cls.__new__(cls, *err.args)
        BaseException.__init__(exc, *err.args)  # stock's args as they are (its __init__ adds the help text)
        exc._explain = explain
        return exc

    def _explanation(self) -> InconclusiveExplanation | None:
        if self._explained is None and self._explain is not None:
            try:
                self._explained = self._explain()
            except SmtdimsError as err:  # e.g. a divisor that may be 0: that is the explanation
                self._explained = InconclusiveExplanation(f"smtdims: {err}")
            except Exception as err:  # the explanation must never hide the error itself
                self._explained = InconclusiveExplanation(f"smtdims: could not explain ({err!r})")
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

    @property
    def reading(self) -> InconclusiveExplanation | None:
        """smtdims' reading as values (witnesses, the structured fix, the location); None where this
        error has none (one re-created from a message: ``type(e)(str(e))``)."""
        return self._explanation()

    def __str__(self) -> str:
        text = super().__str__()
        detail = self.explanation
        if not detail:
            return text
        help_msg = inconclusive_help_msg()
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


def explain_inconclusive(e1: Any, e2: Any, question: str, where: str) -> InconclusiveExplanation:
    """Witnesses on either side of ``e1 >= e2`` (the comparison JAX asked, as ``question`` reads it) and
    the weakest fix that settles it; ``where``: the user's line it arose at (or "<unknown>")."""
    scope = e1.scope if isinstance(e1, DimExpr) else e2.scope
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
        return InconclusiveExplanation(f"smtdims: {unknown_advice(d.reason, d.budget, d.deadline)}{at}",
                                       location=location)
    if d.status != UNDETERMINED:  # pragma: no cover - would mean the hook missed a proof
        return InconclusiveExplanation(f"smtdims: proves {d.question} is {d.status}{at}", location=location)
    text = (f"smtdims: the comparison is undetermined: {format_valuation(w_false)} makes {question} false; "
            f"{format_valuation(w_true)} makes it true.")
    # Settling either direction settles the comparison JAX asked; the weakest first (one policy: explain).
    found = settling_fix(session, lhs, rhs, decision=d)
    if found is not None:
        text += f"\nsmtdims: suggested fix: {found}"
    else:
        text += " Add a constraint or change the shape specification so that it holds for every valuation."
    return InconclusiveExplanation(text + at, false_at=w_false, true_at=w_true, location=location, question=question,
                                   suggested_fix=found)


__all__ = ["InconclusiveExplanation", "InconclusiveWithWitnesses", "explain_inconclusive"]
