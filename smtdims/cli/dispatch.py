"""From the command line to a command: the top-level parser, the choice of command, and what every
command's failure becomes (one line on stderr and an exit status; Ctrl-C, 130)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ParseError, SmtdimsError, UnsatisfiableConstraintsError
from ..lang.results import json_dumps
from . import bounds, check_constraints, decide, explain, export, run
from .common import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_STATUS_TABLE,
    EXIT_USAGE,
    Parser,
    UsageError,
    common_options,
    format_error,
    limits,
    located,
    version_text,
)
from .interrupts import Interrupts, forget_unhandled_interrupt, interrupted

# The questions, in the order of the help: each module names its subcommand, adds it and answers it.
QUESTIONS = (bounds, decide, explain, check_constraints)
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {q.NAME: q.run for q in QUESTIONS}

_OPTIONS_WITH_VALUES = ("--budget", "--deadline")

EPILOG = """\
queries:
  bounds EXPR [EXPR ...]      one answer per expression
  decide COMPARISON [COMPARISON ...] | LHS OP RHS
                              when every argument contains a comparison operator, each is one
                              query; otherwise the arguments are joined into one comparison
                              (e.g. 'a + 1' '>=' b)
  with --json, one query prints one object and several print a list of objects

exit status:
""" + "\n".join(f"  {code:<4}{text}" for code, text in EXIT_STATUS_TABLE) + """
  several queries: 0 only if all answers are 0, otherwise the largest status
"""


def build_parser(add_export: Callable[[Any], Any] | None = None) -> argparse.ArgumentParser:
    """The argument parser; ``add_export(subparsers)`` adds the plugin's ``export`` and ``verify``
    when the pipeline is loaded (otherwise they appear in the help only)."""
    common = common_options()
    parser = Parser(prog="smtdims", parents=[common], epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter,
                    description="Exact reasoning about jax.export symbolic dimensions (Z3-backed).")
    parser.add_argument("--version", action="version", version=version_text())
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    subs.required = True
    for question in QUESTIONS:
        question.add_parser(subs, common)
    run.add_parser(subs)
    if add_export is not None:
        add_export(subs)
    else:
        export.add_placeholders(subs, common)
    return parser


def first_command(argv: Sequence[str]) -> str | None:
    """The subcommand: the first argument that is neither an option nor an option's value."""
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in _OPTIONS_WITH_VALUES:
            skip = True
            continue
        if a == "--":
            return None
        if a.startswith("-"):
            continue
        return a
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (see :data:`~smtdims.cli.common.EXIT_STATUS_TABLE`)."""
    argv_given = argv
    argv = list(sys.argv[1:] if argv is None else argv)
    command = first_command(argv)
    # Options after the subcommand's program belong to the program (smtdims run script.py --json).
    own = run.own_arguments(argv) if command == "run" else argv
    json_out = "--json" in own
    # `run`: the program's Ctrl-C is the program's (it may catch KeyboardInterrupt and go on)
    guard = Interrupts(main.__code__) if command == "run" else Interrupts(main.__code__).install()
    was_interrupted = False
    try:
        rc = _dispatch(argv, command, own)
    except KeyboardInterrupt:
        was_interrupted = True
    guard.done = True  # here, in main's frame, the handler raises nothing any more
    if was_interrupted or guard.seen:
        rc = interrupted(json_out and command != "run")
    # the program ends with 130 now: a second Ctrl-C, or one delivered late, must not end it by SIGINT
    guard.close(ignore_after=rc == EXIT_INTERRUPTED and argv_given is None and command != "run")
    if rc == EXIT_INTERRUPTED:
        forget_unhandled_interrupt()  # else CPython may still end the process by SIGINT (status -2)
    return rc


def _dispatch(argv: list[str], command: str | None, own: list[str]) -> int:
    debug = "--debug" in own
    json_out = "--json" in own
    try:
        if command == "run":
            return run.run(argv)
        # `export` reads the plugin's parser from its file alone: its package imports JAX (seconds), which
        # the help does not need, and which the verification process imports meanwhile (start_early)
        pipeline = export.load_parser(command) if command in export.COMMANDS else None
        parser = build_parser(pipeline.add_export_parser if pipeline is not None else None)
        try:
            args = parser.parse_args(argv)
        except SystemExit as exit_:  # usage errors (status 2), --help and --version (0): return, do not raise
            return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
        if args.command in export.COMMANDS:
            export.start_early(pipeline, args)
            return export.run(export.load(args.command), args)
        with limits(getattr(args, "budget", None), getattr(args, "deadline", None)):
            return COMMANDS[args.command](args)
    except (SmtdimsError, UsageError) as err:
        # Input errors: syntax, unknown operators, non-integer constants, unsupported
        # comparisons, possible division by 0, unsatisfiable constraints (outside
        # check-constraints), bad budgets or deadlines.
        if debug:
            traceback.print_exc()
        if json_out:
            info: dict[str, Any] = {"type": type(err).__name__, "message": format_error(err)}
            if isinstance(err, ParseError):
                where = located(err)
                info.update(text=where.text, position=where.position, detail=where.detail)
            if isinstance(err, UnsatisfiableConstraintsError):
                info.update(conflict=list(err.conflict))
            print(json_dumps({"error": info}))
        print(f"smtdims: error: {format_error(err)}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # stdout closed early (smtdims ... | head): not an error of smtdims
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as err:  # a bug; say so in one line unless debugging
        if debug:
            traceback.print_exc()
        print(f"smtdims: internal error: {format_error(err)} (rerun with --debug for the traceback; "
              f"exit status {EXIT_INTERNAL})", file=sys.stderr)
        return EXIT_INTERNAL
