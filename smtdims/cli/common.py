"""What every command shares: the exit statuses, the options and their limits, the reading of
arguments into questions, the one-line error text, and the printing of answers."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import math
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, NoReturn

import z3

from .. import __version__, options, plugins
from ..errors import ParseError
from ..lang.constraints import ConstraintSet
from ..lang.expr import OPERATIONS, Expr
from ..lang.parser import COMPARISONS, tokenize
from ..lang.results import FALSE, TRUE, UNDETERMINED, UNKNOWN, json_dumps, unknown_advice, unknown_cause
from ..reasoner import CONFIG, Session, session_for

# -- exit statuses --------------------------------------------------------------------------------------
EXIT_TRUE = EXIT_OK = 0  # proven true / bounds proven tight / constraints satisfiable / success
EXIT_FALSE = 1  # proven false / constraints unsatisfiable (check-constraints prints the conflict)
EXIT_USAGE = 2  # usage or input error: bad arguments, syntax, possible division by 0, ...
EXIT_UNDETERMINED = 3  # true for some valuations, false for others (witnesses printed)
EXIT_UNKNOWN = 4  # the solver gave up (budget, deadline, or nonlinear incompleteness)
EXIT_INTERNAL = 70  # a bug in smtdims (EX_SOFTWARE): please report it
EXIT_INTERRUPTED = 130  # Ctrl-C
EXIT_BROKEN_PIPE = 141  # stdout closed early (128 + SIGPIPE, as shells report it)

EXIT_STATUS_TABLE = (
    (EXIT_TRUE, "true: every query proven true (bounds: both ends tight; check-constraints: satisfiable)"),
    (EXIT_FALSE, "false: a query proven false (check-constraints: unsatisfiable, conflict printed)"),
    (EXIT_USAGE, "usage or input error (one line on stderr naming the position)"),
    (EXIT_UNDETERMINED, "undetermined: true for some valuations, false for others"),
    (EXIT_UNKNOWN, "unknown: the solver gave up (budget, deadline, nonlinear incompleteness)"),
    (EXIT_INTERNAL, "internal error (a bug in smtdims)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    (EXIT_BROKEN_PIPE, "stdout was closed early (e.g. piped into head)"),
)
STATUS_EXIT = {TRUE: EXIT_TRUE, FALSE: EXIT_FALSE, UNDETERMINED: EXIT_UNDETERMINED, UNKNOWN: EXIT_UNKNOWN}


def combined_status(codes: Sequence[int]) -> int:
    """The status of several answers: 0 only if every answer is 0, otherwise the largest code
    (so unknown 4 > undetermined 3 > false 1)."""
    return max(codes, default=EXIT_OK)


class UsageError(Exception):
    """Bad command-line input that is not an expression (exit status 2)."""


# -- options and the parser -----------------------------------------------------------------------------
class Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line (exit status 2) like every other input error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def version_text() -> str:
    """``smtdims X.Y.Z (jax A.B.C, z3 D.E.F)``; reads JAX's version without importing it."""
    try:
        jax_version = f"jax {metadata.version('jax')}"
    except metadata.PackageNotFoundError:
        jax_version = "jax not installed"
    return f"smtdims {__version__} ({jax_version}, z3 {z3.get_version_string()}, python {sys.version.split()[0]})"


def common_options() -> argparse.ArgumentParser:
    """The options of every command, as a parent parser: they work before or after the subcommand."""
    # SUPPRESS defaults: a default of the subcommand's parser would overwrite what the user gave
    # before the subcommand, and the other way round.
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="machine-readable output (a list when several queries are given)")
    p.add_argument("--smtlib", action="store_true", default=argparse.SUPPRESS,
                   help="print the SMT-LIB2 script of the query (z3 reproduces the answer)")
    p.add_argument("--budget", type=int, metavar="N", default=argparse.SUPPRESS,
                   help=f"Z3 rlimit per check (deterministic; default {CONFIG.budget})")
    p.add_argument("--deadline", type=float, metavar="SECONDS", default=argparse.SUPPRESS,
                   help=f"wall-clock limit per question, a backstop to the budget (default {CONFIG.deadline:g} s)")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    return p


def constraints_option(p: argparse.ArgumentParser) -> None:
    """``-c CONSTRAINT``, repeatable: the constraints every question is asked under."""
    p.add_argument("-c", "--constraint", action="append", default=[], metavar="CONSTRAINT",
                   help="a jax.export constraint such as 'a >= b' (repeatable)")


def budget_of(args: argparse.Namespace) -> int:
    """``--budget``, checked, or the configured budget."""
    budget = getattr(args, "budget", None)
    if budget is None:
        return CONFIG.budget
    if budget <= 0:
        raise UsageError(f"--budget must be a positive integer (a Z3 rlimit), got {budget}")
    return budget


@contextlib.contextmanager
def limits(budget: int | None, seconds: float | None) -> Iterator[None]:
    """``--budget`` and ``--deadline`` in force for the block (scoped: nothing to restore by hand)."""
    if budget is not None and budget <= 0:
        raise UsageError(f"--budget must be a positive integer (a Z3 rlimit), got {budget}")
    if seconds is not None and (not (seconds > 0) or math.isinf(seconds)):
        raise UsageError(f"--deadline must be a positive number of seconds, got {seconds}")
    with options.scoped(budget=budget, deadline=seconds):
        yield


def plugin_command(command: str, needs: str, *, package_only: bool = False, hint: str = "") -> Any:
    """The module a plugin declares for ``smtdims COMMAND`` (entry-point group smtdims.commands).

    ``needs`` ("'smtdims run' needs JAX support") leads the usage error when it cannot be had; the
    error names the declared module (its package where ``package_only``): what to install or repair.
    """
    entry = plugins.find(plugins.COMMANDS, command)
    if entry is None:
        raise UsageError(f"{needs}, which no installed plugin declares (entry point {plugins.COMMANDS}: {command})"
                         f"{hint or '. Install smtdims with JAX support (pip install smtdims).'}")
    try:
        return entry.load()
    except ImportError as err:
        where = entry.module.partition(".")[0] if package_only else entry.module
        raise UsageError(f"{needs} ({where}), which could not be imported: {err}{hint}") from err


# -- input ------------------------------------------------------------------------------------------------
def comparison_text(parts: Sequence[str]) -> str:
    """Join arguments into one comparison; ``a >> b`` style operators are named, not mis-tokenized."""
    parts = [p.strip() for p in parts]
    if len(parts) == 3 and parts[1] not in COMPARISONS and parts[1] and not any(ch.isalnum() for ch in parts[1]):
        text = " ".join(parts)
        raise ParseError(text, len(parts[0]) + 1,
                         f"unknown comparison operator {parts[1]!r}; use one of {', '.join(COMPARISONS)}")
    return " ".join(parts)


def has_comparison(text: str) -> bool:
    """Whether ``text`` is a comparison (its tokens, or its characters where it does not tokenize)."""
    try:
        return any(t.kind == "op" and t.text in COMPARISONS for t in tokenize(text))
    except ParseError:
        return any(op in text for op in COMPARISONS) or "=" in text


def session_of(args: argparse.Namespace) -> tuple[Session, ConstraintSet]:
    """The session that answers under ``-c`` constraints at ``--budget``, and those constraints."""
    cs = ConstraintSet.of(list(getattr(args, "constraint", [])))
    return session_for(cs, budget_of(args)), cs


def warn_near_misses(cs: ConstraintSet, exprs: Sequence[Expr]) -> list[str]:
    """Warnings for constraint variables that no question mentions but that look like a typo of one
    that does (``bacth`` for ``batch``): such a constraint constrains nothing the question asks about."""
    asked = sorted(frozenset().union(*(e.variables() for e in exprs)))
    out = []
    for v in sorted(cs.variables() - set(asked)):
        close = difflib.get_close_matches(v, asked, n=1, cutoff=0.75)
        if close:
            out.append(f"smtdims: warning: the constraints name {v!r}, which no question mentions; "
                       f"did you mean {close[0]!r}?")
    return out


def warn(cs: ConstraintSet, exprs: Sequence[Expr]) -> None:
    """Print :func:`warn_near_misses` on stderr."""
    for line in warn_near_misses(cs, exprs):
        print(line, file=sys.stderr)


# -- errors -------------------------------------------------------------------------------------------------
def _unknown_function(err: ParseError) -> ParseError:
    """``foo(a, b)`` parses as a name then a stray '(': name the unknown operation instead."""
    text, pos = err.text, err.position
    if pos < len(text) and text[pos] == "(":
        head = text[:pos].rstrip()
        i = len(head)
        while i > 0 and (head[i - 1].isalnum() or head[i - 1] == "_"):
            i -= 1
        name = head[i:]
        if name and not name[0].isdigit() and name not in OPERATIONS:
            return ParseError(text, i, f"unknown operation {name!r}; use one of {', '.join(OPERATIONS)}")
    return err


def _found_token(err: ParseError) -> ParseError:
    """One side of a comparison ends at the operator: "found end of input" there means "found '>='"."""
    rest = err.text[err.position:]
    if "found end of input" not in err.detail or not rest.strip():
        return err
    pos = err.position + len(rest) - len(rest.lstrip())
    try:
        found = tokenize(err.text[pos:])[0].text
    except ParseError:
        found = err.text[pos]
    return ParseError(err.text, pos, err.detail.replace("found end of input", f"found {found!r}"))


def located(err: ParseError) -> ParseError:
    """The parse error as the user reads it: the unknown operation named, the operator found."""
    return _found_token(_unknown_function(err))


def format_error(err: BaseException) -> str:
    """One line: what was wrong and, for syntax errors, where."""
    if isinstance(err, ParseError):
        err = located(err)
        rest = err.text[err.position:]
        here = f"here: {rest!r}" if rest.strip() else "at the end"
        return f"{err.detail} at position {err.position} in {err.text!r} ({here})"
    return " ".join(str(err).split())


# -- output -------------------------------------------------------------------------------------------------
@dataclass
class Answer:
    """One query's answer: the text, the JSON object, the SMT-LIB2 script (with --smtlib), the status."""

    text: str
    data: dict[str, Any]
    script: str | None
    status: int


def wants_smtlib(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "smtlib", False))


def unknown_info(reason: str, budget: int | None, deadline: float | None) -> dict[str, str]:
    """``"unknown"`` of a JSON answer: the cause (budget, deadline, incomplete) and the advice, the text
    the answer itself prints (``budget``/``deadline``: the limits it was answered under)."""
    return {"cause": unknown_cause(reason), "message": unknown_advice(reason, budget, deadline)}


def emit(args: argparse.Namespace, answers: Sequence[Answer]) -> int:
    """Print the answers (one JSON object for one query, a list for several) and return the status."""
    if getattr(args, "json", False):
        items = [{**a.data, "smtlib": a.script} if a.script is not None else a.data for a in answers]
        print(json_dumps(items[0] if len(items) == 1 else items, indent=2))
    elif wants_smtlib(args):
        # Several scripts in one stream: (reset) between them keeps each self-contained.
        print("(reset)\n".join(a.script or "" for a in answers), end="")
    else:
        print("\n".join(a.text for a in answers))
    return combined_status([a.status for a in answers])
