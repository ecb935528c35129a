"""Exception types. Each names the input it rejects and what to do about it."""

from __future__ import annotations


class SmtdimsError(Exception):
    """Base class for every error smtdims raises on purpose."""

    #: False when a clock shaped the refusal (a check cut by the deadline, or not started while the
    #: solver was busy): the same call may be answered when asked again, as ``Decision.deterministic``.
    deterministic: bool = True


class ParseError(SmtdimsError, ValueError):
    """Malformed expression or constraint text; ``position`` indexes into ``text``."""

    def __init__(self, text: str, position: int, detail: str):
        self.text = text
        self.position = position
        self.detail = detail
        super().__init__(f"{detail} at position {position} in {text!r}\n  {text}\n  {' ' * position}^")


class UnsatisfiableConstraintsError(SmtdimsError, ValueError):
    """No valuation of the variables (all >= 1) satisfies the constraints."""

    def __init__(self, conflict: list[str], message: str | None = None):
        self.conflict = conflict
        super().__init__(
            message
            or "the constraints are unsatisfiable (no dimension values >= 1 meet them all); "
            f"this subset already conflicts: {'; '.join(conflict)}. Remove or relax one of them."
        )


class PossibleDivisionByZeroError(SmtdimsError, ValueError):
    """A ``floordiv``/``mod`` divisor can be 0 under the constraints (an error in JAX too)."""

    def __init__(self, divisor: str, witness: dict[str, int] | None, clock: str | None = None):
        self.divisor = divisor
        self.witness = witness
        # a valuation where it is 0 is a fact; "not proven nonzero" under a clock may change
        self.deterministic = witness is not None or clock is None
        at = f" (for example at {format_valuation(witness)})" if witness else ""
        why = "" if self.deterministic else f" (not proven nonzero before a clock stopped the check: {clock})"
        super().__init__(
            f"possible division by zero: divisor '{divisor}' can be 0{at}{why}; "
            "add a constraint that keeps it nonzero, e.g. '" + divisor + " >= 1'"
        )


class ScopeMismatchError(SmtdimsError, ValueError):
    """Expressions from different JAX symbolic scopes were mixed."""


class UnsupportedJaxError(SmtdimsError, ImportError):
    """The installed JAX lacks the internals the adapter was written against."""


def format_valuation(env: dict[str, int] | None) -> str:
    if not env:
        return "(no variables)"
    from .expr import int_text

    return ", ".join(f"{k} = {int_text(v)}" for k, v in sorted(env.items()))
