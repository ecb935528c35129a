"""``smtdims run [options] (SCRIPT | -m MODULE) [ARGS ...]``: run a program unmodified with smtdims
installed (the plugin's ``run_program``), then summarise.

Its arguments are read here by hand, not by argparse, because everything after SCRIPT or
``-m MODULE`` must reach the program untouched, options that look like smtdims' own included
(``smtdims run train.py --json --budget 3``), and argparse cannot do that with these messages:

- ``nargs=REMAINDER``, argparse's way to pass the rest through, drops a ``--`` that follows
  SCRIPT (``smtdims run prog.py -- x`` would hand the program ``['x']``, not ``['--', 'x']``;
  so on Python 3.11 to 3.13);
- ``-m MODULE`` (or ``-mMODULE``) ends smtdims' options at the option's value, as ``python -m``
  does; argparse ends them only at a positional argument or ``--``;
- the first bad argument is named, before or after ``run`` ("unknown option '--x' after 'run'"),
  where argparse collects unknown ones and reports them after it has acted on ``-h`` or a bad
  value; ``--budget`` takes the next argument whatever it looks like;
- options before ``run`` (``smtdims --json run ...``) are read by the same rules, and ``-h``
  there gives this command's help, not the top-level one.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..reasoner import CONFIG
from .common import EXIT_OK, UsageError, limits, plugin_command

RUN_USAGE = ("smtdims run [--json] [--json-out FILE] [--budget N] [--deadline SECONDS] (SCRIPT.py | -m MODULE) "
             "[ARGS ...]")
RUN_HELP = f"""usage: {RUN_USAGE}

Run a Python program unmodified with smtdims installed (like `coverage run` or
`python -m cProfile`): SCRIPT runs as __main__ with sys.argv = [SCRIPT, ARGS...].
Every argument after SCRIPT (or -m MODULE) belongs to the program. At exit, the
summary goes to stderr: who answered JAX's dimension questions and every comparison
that stayed inconclusive, with the user code line that asked it and a verified fix.

options:
  --json               also print the summary as JSON on stdout, after the program's
                       own output (one object, the last thing printed)
  --json-out FILE      also write the summary as JSON to FILE (never the program, one
                       of its arguments or an existing .py file)
  --budget N           Z3 rlimit per check (default {CONFIG.budget})
  --deadline SECONDS   wall-clock limit per question (default {CONFIG.deadline:g} s)
  -m MODULE            run a module as a script (like python -m)
  -h, --help           show this help

exit status: the program's (an uncaught exception prints its traceback and exits 1);
2 when smtdims run itself is misused.
"""


def add_parser(subs: argparse._SubParsersAction) -> None:
    """``run`` in the top-level help; its arguments are read by :func:`parse_run_args`."""
    p = subs.add_parser("run", help="run a Python program with smtdims installed, then summarise",
                        usage=RUN_USAGE, add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)


@dataclass
class RunArgs:
    target: str
    args: list[str]
    module: bool = False
    json_path: str | None = None  # --json-out FILE
    json: bool = False  # --json: the summary as JSON on stdout
    budget: int | None = None
    deadline: float | None = None
    debug: bool = False
    help: bool = False


def parse_run_args(argv: Sequence[str]) -> RunArgs:
    """``[global options] run [run options] (SCRIPT | -m MODULE) [ARGS...]``: everything after
    SCRIPT or MODULE is the program's, untouched."""
    out = RunArgs(target="", args=[])
    argv = list(argv)
    i = 0

    def value(opt: str, conv: Callable[[str], Any]) -> Any:
        nonlocal i
        if "=" in argv[i]:
            raw = argv[i].split("=", 1)[1]
        else:
            if i + 1 >= len(argv):
                raise UsageError(f"run: {opt} needs a value")
            i += 1
            raw = argv[i]
        try:
            return conv(raw)
        except ValueError:
            raise UsageError(f"run: invalid {opt} value {raw!r}") from None

    seen_run = False
    while i < len(argv):
        a = argv[i]
        name = a.split("=", 1)[0]
        if not seen_run and a == "run":
            seen_run = True
        elif name == "--budget":
            out.budget = value("--budget", int)
            if out.budget <= 0:
                raise UsageError(f"--budget must be a positive integer (a Z3 rlimit), got {out.budget}")
        elif name == "--deadline":
            out.deadline = value("--deadline", float)
        elif a == "--debug":
            out.debug = True
        elif a == "--json":  # a flag, as for every other command
            out.json = True
        elif seen_run and name == "--json-out":
            out.json_path = value("--json-out", str)
        elif name == "--json":
            raise UsageError(f"run: --json is a flag (the summary as JSON on stdout) and takes no value; "
                             f"to write the summary to a file use --json-out FILE; usage: {RUN_USAGE}")
        elif a in ("-h", "--help"):
            out.help = True
            return out
        elif seen_run and (a == "-m" or (a.startswith("-m") and len(a) > 2)):
            mod = a[2:] if len(a) > 2 else None
            if mod is None:
                if i + 1 >= len(argv):
                    raise UsageError("run: -m needs a module name")
                i += 1
                mod = argv[i]
            out.target, out.module, out.args = mod, True, argv[i + 1:]
            return out
        elif seen_run and a == "--":
            if i + 1 >= len(argv):
                break
            out.target, out.args = argv[i + 1], argv[i + 2:]
            return _checked(out)
        elif seen_run and not a.startswith("-"):
            out.target, out.args = a, argv[i + 1:]
            return _checked(out)
        else:
            where = "after 'run'" if seen_run else "before 'run'"
            raise UsageError(f"run: unknown option {a!r} {where}; usage: {RUN_USAGE}")
        i += 1
    raise UsageError(f"run: no program given; usage: {RUN_USAGE}")


def _checked(ra: RunArgs) -> RunArgs:
    """Refuse what would run the wrong thing or overwrite the user's files: a ``.json`` program
    (``--json FILE`` read as a flag and a program), a ``--json-out`` that is the program, one of
    its arguments or an existing ``.py`` file."""
    if ra.target.endswith(".json"):
        raise UsageError(f"run: {ra.target!r} is not a Python program; --json is a flag now (the summary as JSON "
                         f"on stdout): to write the summary to a file use --json-out {ra.target}")
    if ra.json_path is not None:
        out = os.path.realpath(ra.json_path)
        theirs = [ra.target, *ra.args] if not ra.module else list(ra.args)
        taken = next((a for a in theirs if a and os.path.realpath(a) == out), None)
        if taken is not None:
            what = "the program" if taken == ra.target and not ra.module else "an argument of the program"
            raise UsageError(f"run: --json-out {ra.json_path!r} is {what}; it would be overwritten: "
                             "write the summary to another file")
        if ra.json_path.endswith(".py") and os.path.exists(ra.json_path):
            raise UsageError(f"run: --json-out {ra.json_path!r} is an existing Python file; it would be overwritten: "
                             "write the summary to another file (e.g. summary.json)")
    return ra


def own_arguments(argv: Sequence[str]) -> list[str]:
    """``smtdims [opts] run [run opts]``: the arguments before the program (the rest are the program's),
    where the caller looks for ``--json`` and ``--debug`` before :func:`parse_run_args` has run."""
    seen_run, i = False, 0
    while i < len(argv):
        a = argv[i]
        if not seen_run:
            seen_run = a == "run"
        elif a in ("--budget", "--deadline", "--json-out"):
            i += 1
        elif a == "--" or a.startswith("-m") or not a.startswith("-"):
            return list(argv[:i])
        i += 1
    return list(argv)


def run(argv: Sequence[str]) -> int:
    """``smtdims ... run ...`` (the whole command line): the program's exit status, or 0 after ``--help``."""
    ra = parse_run_args(argv)
    if ra.help:
        print(RUN_HELP, end="")
        return EXIT_OK
    runner = plugin_command("run", "'smtdims run' needs JAX support", package_only=True)
    with limits(None, ra.deadline):
        return runner.run_program(ra.target, ra.args, module=ra.module, budget=ra.budget, json_path=ra.json_path,
                                  json_stdout=ra.json)
