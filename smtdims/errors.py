"""Exception types. Each names the input it rejects and what to do about it."""

from __future__ import annotations

from collections.abc import Sequence


class SmtdimsError(Exception):
    """Base class for every error smtdims raises on purpose.

    Constructed as Python's exceptions are: ``args[0]`` is the whole message, and
    ``type(e)(*e.args)`` (how Keras and other frameworks re-raise) makes the same error with
    the same message (its structured attributes keep their class defaults). Copies and pickles
    keep the class, the arguments and the attributes.
    """

    #: False when a clock shaped the refusal (a check cut by the deadline, or not started while the
    #: solver was busy): the same call may be answered when asked again, as ``Decision.deterministic``.
    deterministic: bool = True

    def __reduce__(self):  # type: ignore[override]
        # BaseException's reduce calls ``cls(*args)``, which a structured constructor cannot take
        return (_restore, (type(self), self.args, dict(self.__dict__)))


def _restore(cls: type[SmtdimsError], args: tuple, state: dict) -> SmtdimsError:
    err = cls.__new__(cls, *args)
    err.args = args
    err.__dict__.update(state)
    return err


class ParseError(SmtdimsError, ValueError):
    """Malformed expression or constraint text; ``position`` indexes into ``text``.

    ``ParseError(text, position, detail)`` formats the message with a caret under the position;
    ``ParseError(message)`` (how frameworks re-create an error: ``type(e)(*e.args)``) keeps the
    message as it is, with ``position`` None.
    """

    def __init__(self, text: str, position: int | None = None, detail: str | None = None):
        self.text = text
        self.position = position
        self.detail = detail if detail is not None else text
        if position is None:
            super().__init__(text)
        else:
            super().__init__(f"{detail} at position {position} in {text!r}\n  {text}\n  {' ' * position}^")


class UnsatisfiableConstraintsError(SmtdimsError, ValueError):
    """No valuation of the variables (all >= 1) satisfies the constraints; ``conflict`` is a minimal subset."""

    conflict: list[str] = []

    def __init__(self, message: str, *, conflict: Sequence[str] = ()):
        super().__init__(message)
        self.conflict = list(conflict)

    @classmethod
    def from_conflict(cls, conflict: Sequence[str], message: str | None = None) -> UnsatisfiableConstraintsError:
        text = message or (
            "the constraints are unsatisfiable (no dimension values >= 1 meet them all); "
            f"this subset already conflicts: {'; '.join(conflict)}. Remove or relax one of them.")
        return cls(text, conflict=conflict)


class PossibleDivisionByZeroError(SmtdimsError, ValueError):
    """A ``floordiv``/``mod`` divisor can be 0 under the constraints (an error in JAX too)."""

    divisor: str = ""
    witness: dict[str, int] | None = None

    def __init__(self, message: str, *, divisor: str = "", witness: dict[str, int] | None = None,
                 deterministic: bool = True):
        super().__init__(message)
        self.divisor = divisor
        self.witness = witness
        self.deterministic = deterministic

    @classmethod
    def from_divisor(cls, divisor: str, witness: dict[str, int] | None,
                     clock: str | None = None) -> PossibleDivisionByZeroError:
        # a valuation where it is 0 is a fact; "not proven nonzero" under a clock may change
        deterministic = witness is not None or clock is None
        if witness is not None:
            claim = f"can be 0 (for example at {format_valuation(witness)})"
        elif clock is not None:
            claim = f"may be 0: it was not proven nonzero before a clock stopped the check ({clock})"
        else:  # no valuation found: saying "can be 0" would claim what nobody showed
            claim = "may be 0: the solver gave up before proving it nonzero (a larger budget may prove it)"
        return cls(f"possible division by zero: divisor '{divisor}' {claim}; "
                   "add a constraint that keeps it nonzero, e.g. '" + divisor + " >= 1'",
                   divisor=divisor, witness=witness, deterministic=deterministic)


class ScopeMismatchError(SmtdimsError, ValueError):
    """Expressions from different JAX symbolic scopes were mixed."""


class UnsupportedJaxError(SmtdimsError, ImportError):
    """The installed JAX lacks the internals the adapter was written against."""


def format_valuation(env: dict[str, int] | None) -> str:
    if not env:
        return "(no variables)"
    from .lang.bigints import readable_int

    return ", ".join(f"{k} = {readable_int(v)}" for k, v in sorted(env.items()))
