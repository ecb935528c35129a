"""``smtdims export MODULE:FUNCTION --spec ...``: the export pipeline from the command line.

Its module level imports nothing of its package (nor JAX), so that ``smtdims export``
reads its parser from this file alone (:func:`smtdims.cli.export.load_parser`) and starts the
verification process (:func:`start_early`) before it imports ``smtdims_jax``, which
imports JAX (1.5-2 s); :func:`run_export` imports the pipeline when the command runs.

Exit status: 0 every check passed; 1 a check failed, the export included (JAX refused
the function, e.g. an inconclusive comparison: the report shows JAX's message,
smtdims' witnesses and a fix re-exported to verify it); 2 usage or input error (bad
arguments, unknown dtype, a module that does not import): one ``smtdims export:
error:`` line on stderr (with ``--json``, also ``{"error": {"type": ..., "message":
...}}`` on stdout); 70 internal error (a bug in smtdims, said so on stderr); 130
interrupted (Ctrl-C); 141 stdout closed early (``... | head -1``), quietly, as
``smtdims``' other commands.

``--json``, ``--budget N`` and ``--debug`` work before ``export`` too
(``smtdims --json export ...``); so does ``--deadline SECONDS``.

``--fix``: a failed export gets its whole fix (:mod:`smtdims_jax.pipeline.fixes`): the
report (and ``--json``'s ``"fix"``) holds the fixed specification as ``--spec``/``-c``
arguments and as ready-to-paste ``jax.export`` code, the rounds, and how it compares
with native runs at shapes chosen by reasoning. The exit status stays 1 (the specification
given failed); the fix says what to change.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

# as smtdims' other commands (smtdims.cli); "a check failed" is this command's 1
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL, EXIT_BROKEN_PIPE = 0, 1, 2, 70, 141

EPILOG = """\
examples:
  smtdims export mymodel:predict --spec "b, 4" --dtype float32
  smtdims export mymodel.py:f --spec "int32[a, b]" -c "a >= b" -c "b >= 16" --platform cpu,cuda
  smtdims export pkg.mod:f --spec "b, 4" --spec "b" --dtype int32 --dtype float32 --out f.bin
  smtdims export mymodel:predict --spec "b" --fix     # a failed export: its whole fix, verified

A spec may carry its dtype ("int32[b, 4]"); otherwise --dtype applies (once for all
specs, or once per spec in order; default float32; one that contradicts a spec's own
dtype is a usage error). All specs share one symbolic scope
with the -c constraints. 64-bit dtypes (float64, int64) turn on jax_enable_x64 for
the run. --spec and --like cannot be combined: --spec gives the family, --like an
example from which smtdims infers it. Exit status: 0 all checks passed; 1 a check
failed (a failed export too: the report says why and how to fix it); 2 usage or
input error; 70 internal error; 130 interrupted (Ctrl-C); 141 stdout closed early
(| head).
"""


def add_export_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``export`` subcommand on an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "export",
        help="export a function with smtdims, then verify the artifact on solver-chosen shapes",
        description="Export jax.jit(FUNCTION) with smtdims installed, serialize it, and in a fresh process "
                    "(stock JAX, no smtdims) compile and run it on solver-chosen shapes, comparing with the "
                    "native function; check that a shape outside the specification is rejected.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="MODULE:FUNCTION",
                   help="importable module (or path/to/file.py) and function, e.g. mypkg.model:predict")
    p.add_argument("--spec", action="append", default=[], metavar="SPEC",
                   help='shape spec of one positional argument, e.g. "b, 4" or "int32[b, 4]"; repeat per argument')
    p.add_argument("--like", action="append", default=[], metavar="EXAMPLE",
                   help='the shape of one example argument, e.g. "int32[2, 7]"; repeat per argument: smtdims '
                        'infers the most general verified family of shapes (dims="auto"; instead of --spec)')
    p.add_argument("--dtype", action="append", default=[], metavar="DTYPE",
                   help="dtype of the specs that name none (once for all, or once per --spec); default float32")
    p.add_argument("-c", "--constraint", action="append", default=[], metavar="CONSTRAINT",
                   help='symbolic constraint, e.g. "a >= b" (repeatable)')
    p.add_argument("--platform", action="append", default=[], metavar="PLATFORMS",
                   help="lowering platforms, comma-separated, e.g. cpu,cuda (default: the local platform)")
    p.add_argument("--samples", type=int, default=None, metavar="N",
                   help="number of sample shapes (default: one where each decides something, at most 6)")
    p.add_argument("--out", metavar="PATH", help="write the serialized artifact here")
    p.add_argument("--sample-mb", type=float, default=4.0, metavar="MB",
                   help="memory budget of one sample, inputs and outputs (default 4); the largest sample fills it")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--fix", action="store_true",
                   help="a failed export gets its whole fix: fix, re-export and repeat, minimise, verify end to end, "
                        "and measure it against native runs at shapes chosen by reasoning")
    p.add_argument("--fix-rounds", type=int, default=8, metavar="N", help="at most N fix rounds (default 8)")
    p.add_argument("--fix-deadline", type=float, default=120.0, metavar="SECONDS",
                   help="time for the fix rounds and the minimisation (default 120)")
    p.add_argument("--box", type=int, metavar="N",
                   help="rank fixes on the grid 1..N of every variable (default: no grid; at most 48 shapes "
                        "chosen by reasoning: aligned sizes, the fixes' edges, the examples)")
    # SUPPRESS defaults, as smtdims' own options: given before `export` they must survive the subparser
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="print the report as JSON instead of a table")
    from smtdims.options import CONFIG  # the defaults in force (smtdims' other commands print the same)

    p.add_argument("--budget", type=int, metavar="N", default=argparse.SUPPRESS,
                   help=f"Z3 rlimit per check, for the export and the sample choice (default {CONFIG.budget})")
    p.add_argument("--deadline", type=float, metavar="SECONDS", default=argparse.SUPPRESS,
                   help=f"wall-clock limit per solver question, as smtdims' other commands (default {CONFIG.deadline:g} s)")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show tracebacks (of usage errors and of a failed export)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress messages on stderr")
    p.add_argument("-v", "--verbose", action="store_true", help="every check's detail and every sample's reasons")
    add_verify_parser(subparsers)
    return p


VERIFY_EPILOG = """\
examples:
  smtdims export mymodel.py:predict --spec "b, 4" --platform cpu,tpu --out predict.bin   # on a laptop
  smtdims verify predict.bin --against mymodel.py:predict                                # on the TPU host

The artifact's sidecar (ARTIFACT.smtdims.json, written by --out) carries the constraints and the
shapes it was verified on; without it the shapes are chosen again from the artifact's in_avals and
the -c constraints. Exit status: 0 verified; 1 a check failed or nothing ran (the report says why);
2 usage or input error; 70 internal error; 130 interrupted (Ctrl-C); 141 stdout closed early (| head).
"""


def add_verify_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``verify`` subcommand: an artifact made elsewhere, checked on this host's device."""
    p = subparsers.add_parser(
        "verify", help="check a serialized artifact on this host's device against the function it came from",
        description="Deserialize ARTIFACT with stock JAX and run it, in a fresh process that holds this host's "
                    "device (the TPU or GPU where there is one), beside JAX's own run of the function on the same "
                    "shapes; check that a shape outside the specification is rejected.",
        epilog=VERIFY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("artifact", metavar="ARTIFACT", help="a file written by smtdims export --out (or Exported.serialize())")
    p.add_argument("--against", required=True, metavar="MODULE:FUNCTION",
                   help="the function the artifact was exported from, e.g. mymodel.py:predict")
    p.add_argument("-c", "--constraint", action="append", default=None, metavar="CONSTRAINT",
                   help="the specification's constraints (default: the sidecar's)")
    p.add_argument("--samples", type=int, default=6, metavar="N", help="number of sample shapes without a sidecar")
    p.add_argument("--sample-mb", type=float, default=4.0, metavar="MB", help="memory budget of one sample (default 4)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the report as JSON")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress messages on stderr")
    p.add_argument("-v", "--verbose", action="store_true", help="every check's detail and every sample's reasons")
    return p


def start_early(args: argparse.Namespace) -> None:
    """Start the verification process before this process imports JAX, for a command line that will verify.

    Called by ``smtdims`` on this module read from its file alone (its package imports JAX): the process's
    JAX import (1.5-2 s) then overlaps this one's, where :func:`run_export` would start it only after.
    Only once the arguments parsed and name a target and shapes: a command that stops at a usage error
    starts nothing. Never raises (an early start is an optimisation; the run reports what fails)."""
    try:
        if args.command == "export":
            _target_parts(args.target)
            _check_shapes_given(args.spec, args.like)
        else:
            _target_parts(args.against)
            if not os.path.isfile(args.artifact):
                return
        module = _module_alone("worker_proc")
        if module is not None:
            module.start_before_jax()
    except Exception:  # noqa: BLE001 - see the docstring
        return


def _module_alone(name: str) -> Any:
    """``smtdims_jax.pipeline.<name>``, a module that imports nothing of its package, without importing the
    package (which imports JAX): executed from its file under its own name, so that the package's later
    import finds it in ``sys.modules`` and uses that one (its processes are the same objects then)."""
    full = f"smtdims_jax.pipeline.{name}"
    if full in sys.modules or "smtdims_jax.pipeline" in sys.modules:
        return importlib.import_module(full)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pipeline", f"{name}.py")
    spec = importlib.util.spec_from_file_location(full, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[full] = module  # before it runs: its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[full]
        raise
    return module


def _target_parts(target: str) -> tuple[str, str, str | None]:
    """``(module, attribute, absolute path or None)`` of ``target``; a malformed target or a missing file is a
    ValueError (checked before anything slow: a device, the user's module)."""
    mod_name, sep, attr = target.rpartition(":")
    if not sep or not mod_name or not attr:
        raise ValueError(f"expected MODULE:FUNCTION, got {target!r}")
    if not (mod_name.endswith(".py") or os.sep in mod_name or "/" in mod_name):
        return mod_name, attr, None
    path = os.path.abspath(mod_name)
    if not os.path.exists(path):
        raise ValueError(f"no such file: {mod_name}")
    return mod_name, attr, path


def load_target(target: str) -> Callable[..., Any]:
    """``pkg.mod:fn``, ``pkg.mod:Class.method`` or ``path/to/file.py:fn`` -> the callable."""
    mod_name, attr, path = _target_parts(target)
    if path is not None:
        stem = os.path.splitext(os.path.basename(path))[0]
        name = stem if stem.isidentifier() and stem not in sys.modules else "_smtdims_target_" + stem
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # like `python -m`: modules beside you are importable
        module = importlib.import_module(mod_name)
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{target} is not callable")
    return obj


def _arg_specs(specs: list[str], dtypes: list[str]) -> list[Any]:
    from .pipeline.specs import SPEC_RE, as_dtype, check_brackets  # the spec grammar lives in one place

    if len(dtypes) not in (0, 1, len(specs)):
        raise ValueError(f"give --dtype once, or once per --spec ({len(specs)}); got {len(dtypes)}")
    for d in dtypes:
        try:
            as_dtype(d)
        except ValueError as err:
            raise ValueError(f"--dtype {d!r}: {err}") from None
    out: list[Any] = []
    for i, s in enumerate(specs):
        check_brackets(s, s)
        m = SPEC_RE.match(s)
        if m:
            try:
                named = as_dtype(m.group(1))
            except ValueError as err:
                raise ValueError(f"--spec {s!r}: {err}") from None
            given = dtypes[i] if len(dtypes) == len(specs) and len(dtypes) > 1 else (dtypes[0] if dtypes else None)
            if given is not None and as_dtype(given) != named:
                raise ValueError(f"--spec {s!r} names the dtype {named.name} and --dtype names {given}: give the dtype "
                                 f"once, in the spec ({as_dtype(given).name}[{m.group(2)}]) or as --dtype with the "
                                 f"dimensions alone ({m.group(2)})")
            out.append(s)
        else:
            dtype = dtypes[i] if len(dtypes) == len(specs) and len(dtypes) > 1 else (dtypes[0] if dtypes else "float32")
            out.append((s, dtype))
    return out


class _ClosedPipe(Exception):
    """stdout went away (``| head -1``): stop writing, exit quietly."""


def _print(text: str) -> None:
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # Point stdout at /dev/null so that the interpreter's final flush does not raise again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        raise _ClosedPipe from None


def _error_printer(args: argparse.Namespace, command: str) -> Callable[..., int]:
    """``error(err, status=2, kind="error")`` for ``smtdims COMMAND``: one stderr line (with ``--json`` also
    ``{"error": ...}`` on stdout for a usage error), the traceback with ``--debug``; returns ``status``."""
    debug = getattr(args, "debug", False)

    def error(err: BaseException, status: int = EXIT_USAGE, kind: str = "error") -> int:
        if debug:
            traceback.print_exception(err)
        named = "" if type(err) is ValueError else f"{type(err).__name__}: "  # our own messages name the argument
        text = str(err)
        if type(err).__name__ == "ParseError":  # its last two lines draw a caret under the position it names
            text = text.splitlines()[0] if text.strip() else text
        msg = " ".join(f"{named}{text}".split())
        hint = "" if debug or status == EXIT_USAGE else " (rerun with --debug for the traceback)"
        if getattr(args, "json", False) and status == EXIT_USAGE:  # like smtdims' other commands: {"error": ...}
            try:
                _print(json.dumps({"error": {"type": type(err).__name__, "message": msg}}))
            except _ClosedPipe:
                pass
        print(f"smtdims {command}: {kind}: {msg}{hint}", file=sys.stderr)
        return status

    return error


def run_export(args: argparse.Namespace) -> int:
    """Run the pipeline for parsed ``export`` arguments; print the report; return the exit code."""
    error = _error_printer(args, "export")

    platforms = [p for group in args.platform for p in group.split(",") if p.strip()] or None
    try:
        from .pipeline import check_specs
        from .pipeline.platforms import normalise_platforms

        normalise_platforms(platforms)  # a misspelt --platform first, before anything is imported or run
        budget = getattr(args, "budget", None)
        if budget is not None and budget <= 0:
            raise ValueError(f"--budget must be a positive integer (a Z3 rlimit), got {budget}")
        deadline = getattr(args, "deadline", None)
        if deadline is not None and (not deadline > 0 or deadline == float("inf")):
            raise ValueError(f"--deadline must be a positive number of seconds, got {deadline}")
        for flag, value in (("--fix-rounds", args.fix_rounds), ("--box", args.box)):
            if value is not None and value < 1:
                raise ValueError(f"{flag} must be a positive integer, got {value}")
        if not args.sample_mb > 0:
            raise ValueError(f"--sample-mb must be a positive number, got {args.sample_mb}")
        if not args.fix_deadline > 0:
            raise ValueError(f"--fix-deadline must be a positive number of seconds, got {args.fix_deadline}")
        # the cheap checks (the target's file, the specs' and constraints' text) before a device starts
        # (seconds) or the user's module runs
        _target_parts(args.target)
        _check_shapes_given(args.spec, args.like)
        arg_specs = _arg_specs(args.spec or args.like, args.dtype)
        check_specs(arg_specs, tuple(args.constraint))
        examples = _examples(arg_specs) if args.like else None
        # every export verifies (or fixes, then verifies): the verification process starts now and imports
        # JAX while this one imports the user's module; JAX_PLATFORMS=cuda without CUDA is said after that
        check_device = _leave_device_to_verification()
        fn = load_target(args.target)
        check_device()
    except Exception as err:
        return error(err)
    from smtdims import options
    from smtdims.errors import SmtdimsError

    from .pipeline import export_and_verify

    try:
        with options.scoped(deadline=deadline):
            report = export_and_verify(
                fn, *(examples if examples is not None else arg_specs), constraints=tuple(args.constraint),
                platforms=platforms, samples=args.samples,
                out=args.out, seed=args.seed, progress=not args.quiet, budget=budget, fix=args.fix,
                fix_rounds=args.fix_rounds, fix_deadline=args.fix_deadline, box=args.box,
                sample_bytes=max(1, int(args.sample_mb * (1 << 20))), dims="auto" if examples is not None else None,
            )
    except (ValueError, TypeError, OSError, SmtdimsError) as err:  # specs, constraints, --samples, --out
        return error(err)
    except Exception as err:  # a bug in the pipeline: say so, not "usage error"
        return error(err, EXIT_INTERNAL, "internal error")
    return _finish(report, args, error)


def _check_shapes_given(spec: list[str], like: list[str]) -> None:
    """Exactly one of ``--spec`` and ``--like``: each gives every argument's shape, in its own way."""
    if spec and like:
        raise ValueError("--spec and --like cannot be combined: give every argument's shape with --spec (symbolic, "
                         "e.g. 'int32[b, t]': the family you want) or with --like (an example's, e.g. 'int32[2, 7]': "
                         "smtdims infers the most general family), not some of each")
    if not spec and not like:
        raise ValueError("give the argument shapes with --spec (symbolic, e.g. 'int32[b, t]') or with --like "
                         "(an example's, e.g. 'int32[2, 7]': smtdims infers the family), one per argument")


def _examples(arg_specs: list[Any]) -> list[Any]:
    """``--like`` shapes as example arguments (``jax.ShapeDtypeStruct`` of concrete shapes)."""
    import jax

    from .pipeline.specs import parse_arg_spec

    out = []
    for given in arg_specs:
        spec = parse_arg_spec(given)
        dims = [d.strip() for d in spec.shape.split(",") if d.strip()]
        if not all(d.isdigit() for d in dims):
            text = given if isinstance(given, str) else given[0]
            raise ValueError(f"--like {text!r}: an example's shape is sizes, e.g. 'int32[2, 7]' (symbolic "
                             "dimensions go in --spec)")
        out.append(jax.ShapeDtypeStruct(tuple(int(d) for d in dims), spec.dtype))
    return out


def _leave_device_to_verification() -> Callable[[], None]:
    """This process exports on the CPU and leaves the accelerator to the verification process (one process
    at a time may hold a TPU), which starts now (``fresh.prestart``, where the pipeline has it): it imports
    JAX and opens the device while this process imports the user's module. Returns the check to call after
    that import: a backend that cannot start there is a usage error, as it is here."""
    from .pipeline import fresh
    from .pipeline.platforms import BackendUnavailable, check_backend, explain_backend_error, foreseen_platform

    pinned = fresh.keep_off_accelerator()  # False: a backend runs here already (a test, a program calling main())
    # a TPU this process holds runs the jobs here (fresh.IN_PROCESS): no process to start
    held_here = not pinned and bool(fresh.started_backends() & fresh.EXCLUSIVE)
    prestart: Callable[[], Any] | None = getattr(fresh, "prestart", None)
    if prestart is not None and not held_here:
        prestart()
    if not pinned:
        check_backend()
        return lambda: None

    def check() -> None:
        if foreseen_platform(os.environ) == "cpu":  # nothing but the CPU: its backend starts; export now
            return
        dev = fresh.locate()  # waits for the process started above (or starts it, without prestart)
        if dev.cause == "backend unavailable":
            kind, _, text = dev.error.partition(": ")
            raise BackendUnavailable(explain_backend_error(kind, text))

    return check


def run_verify(args: argparse.Namespace) -> int:
    """``smtdims verify ARTIFACT --against MODULE:FUNCTION``: print the report; return the exit code."""
    error = _error_printer(args, "verify")

    try:
        if args.samples < 1:
            raise ValueError(f"--samples must be a positive integer, got {args.samples}")
        if not args.sample_mb > 0:
            raise ValueError(f"--sample-mb must be a positive number, got {args.sample_mb}")
        check_device = _leave_device_to_verification()  # verification starts beside the user's import
        fn = load_target(args.against)
        check_device()
    except Exception as err:
        return error(err)
    from smtdims.errors import SmtdimsError

    from .pipeline import VerifyOptions, verify_artifact

    try:
        report = verify_artifact(args.artifact, fn, constraints=args.constraint, progress=not args.quiet,
                                 options=VerifyOptions(samples=args.samples, seed=args.seed,
                                                       sample_bytes=max(1, int(args.sample_mb * (1 << 20)))))
    except (ValueError, TypeError, OSError, SmtdimsError) as err:
        return error(err)
    except Exception as err:  # a bug: say so, not "usage error"
        return error(err, EXIT_INTERNAL, "internal error")
    return _finish(report, args, error)


def _auto_text(report: Any, target: str) -> str:
    """An auto export's report for a terminal (which says the export's own error where it failed), and the
    command to paste only for a family that verified (one that did not is no command to run)."""
    text = str(report)
    if report.ok:
        text += "\n  " + report.command(target)
    return text


def _finish(report: Any, args: argparse.Namespace, error: Callable[..., int]) -> int:
    if getattr(args, "like", None):  # --like: the family found, per dimension (an AutoReport)
        try:
            _print(json.dumps(report.to_dict(), indent=2) if getattr(args, "json", False)
                   else _auto_text(report, args.target))
        except _ClosedPipe:
            return EXIT_BROKEN_PIPE
        return EXIT_OK if report.ok else EXIT_FAILED
    debug = getattr(args, "debug", False)
    if debug and report.exception is not None:
        traceback.print_exception(report.exception)
    overflow = _overflow(report.exception)
    if overflow is not None:  # a constant JAX cannot hold (a spec's; the constraints' are checked first)
        return error(ValueError(overflow))
    if report.exception is not None and report.export_error is not None and not report.export_error.location \
            and not report.export_error.smtdims and report.export_error.type != "InconclusiveDimensionOperation":
        _say_where(report.exception, debug)  # an ordinary bug: the shape questions smtdims located say where
    try:
        _print(json.dumps(report.to_dict(), indent=2) if getattr(args, "json", False)
               else report.table(verbose=getattr(args, "verbose", False)))
    except _ClosedPipe:
        return EXIT_BROKEN_PIPE
    return EXIT_OK if report.ok else EXIT_FAILED


def _overflow(err: BaseException | None) -> str | None:
    """JAX's bare "Python integer N out of bounds for int32" (a dimension constant past its dimension
    dtype) as what it means and what to do, or None."""
    if not isinstance(err, OverflowError) or "out of bounds for int" not in str(err):
        return None
    bits = "64" if "int64" in str(err) else "32"
    more = "" if bits == "64" else "; a 64-bit input dtype (float64, int64) or JAX_ENABLE_X64=1 makes them int64"
    return (f"{' '.join(str(err).split())}: JAX computes dimension values as int{bits}, so every constant in the "
            f"specs and constraints must lie within -2^{int(bits) - 1} .. 2^{int(bits) - 1} - 1; write a smaller "
            f"one{more}")


def _say_where(err: BaseException, debug: bool) -> None:
    """A failed export that is an ordinary bug (an IndexError, an einsum mismatch: no comparison smtdims
    located) names the innermost frame of the user's code, and how to see the whole traceback."""
    from .frames import raise_site

    try:
        site = raise_site(err)
    except Exception:  # the report is out already; this line is a courtesy
        site = ""
    where = f" at {site} (the innermost frame of your code)" if site else ""
    hint = "" if debug else "; rerun with --debug for the traceback"
    print(f"smtdims export: the export raised {type(err).__name__}{where}{hint}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (``python -m smtdims_jax.pipeline_cli export ...``) until ``smtdims`` wires it in."""
    parser = argparse.ArgumentParser(prog="smtdims")
    sub = parser.add_subparsers(dest="command", required=True)
    add_export_parser(sub)
    args = parser.parse_args(argv)
    return run_export(args)


if __name__ == "__main__":
    sys.exit(main())
