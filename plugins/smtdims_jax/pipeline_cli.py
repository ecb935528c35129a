"""``smtdims export MODULE:FUNCTION --spec ...``: the export pipeline from the command line.

Kept free of JAX imports at module level, so that building the ``smtdims`` argument
parser stays fast; :func:`run_export` imports the pipeline when the command runs.
Exit codes: 0 every check passed, 1 a check failed, 2 the command could not run
(bad arguments, import error, export error such as an inconclusive comparison).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from typing import Any

EPILOG = """\
examples:
  smtdims export mymodel:predict --spec "b, 4" --dtype float32
  smtdims export mymodel.py:f --spec "int32[a, b]" -c "a >= b" -c "b >= 16" --platform cpu,cuda
  smtdims export pkg.mod:f --spec "b, 4" --spec "b" --dtype int32 --dtype float32 --out f.bin

A spec may carry its dtype ("int32[b, 4]"); otherwise --dtype applies (once for all
specs, or once per spec in order; default float32). All specs share one symbolic scope
with the -c constraints. Exit code: 0 all checks passed, 1 a check failed, 2 error.
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
    p.add_argument("--spec", action="append", required=True, metavar="SPEC",
                   help='shape spec of one positional argument, e.g. "b, 4" or "int32[b, 4]"; repeat per argument')
    p.add_argument("--dtype", action="append", default=[], metavar="DTYPE",
                   help="dtype of the specs that name none (once for all, or once per --spec); default float32")
    p.add_argument("-c", "--constraint", action="append", default=[], metavar="CONSTRAINT",
                   help='symbolic constraint, e.g. "a >= b" (repeatable)')
    p.add_argument("--platform", action="append", default=[], metavar="PLATFORMS",
                   help="lowering platforms, comma-separated, e.g. cpu,cuda (default: the local platform)")
    p.add_argument("--samples", type=int, default=6, metavar="N", help="number of sample shapes (default 6)")
    p.add_argument("--out", metavar="PATH", help="write the serialized artifact here")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress messages on stderr")
    return p


def load_target(target: str) -> Callable[..., Any]:
    """``pkg.mod:fn``, ``pkg.mod:Class.method`` or ``path/to/file.py:fn`` -> the callable."""
    mod_name, sep, attr = target.rpartition(":")
    if not sep or not mod_name or not attr:
        raise ValueError(f"expected MODULE:FUNCTION, got {target!r}")
    if mod_name.endswith(".py") or os.sep in mod_name or "/" in mod_name:
        path = os.path.abspath(mod_name)
        if not os.path.exists(path):
            raise ValueError(f"no such file: {mod_name}")
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
    from .pipeline import _SPEC_RE  # the spec grammar lives in one place

    if len(dtypes) not in (0, 1, len(specs)):
        raise ValueError(f"give --dtype once, or once per --spec ({len(specs)}); got {len(dtypes)}")
    out: list[Any] = []
    for i, s in enumerate(specs):
        if _SPEC_RE.match(s):
            out.append(s)
        else:
            dtype = dtypes[i] if len(dtypes) == len(specs) and len(dtypes) > 1 else (dtypes[0] if dtypes else "float32")
            out.append((s, dtype))
    return out


def run_export(args: argparse.Namespace) -> int:
    """Run the pipeline for parsed ``export`` arguments; print the report; return the exit code."""
    def error(msg: str) -> int:
        print(f"smtdims export: error: {msg}", file=sys.stderr)
        return 2

    try:
        fn = load_target(args.target)
        arg_specs = _arg_specs(args.spec, args.dtype)
    except Exception as err:
        return error(f"{type(err).__name__}: {err}")
    platforms = [p for group in args.platform for p in group.split(",") if p.strip()] or None
    from .pipeline import export_and_verify

    try:
        report = export_and_verify(
            fn, *arg_specs, constraints=tuple(args.constraint), platforms=platforms, samples=args.samples,
            out=args.out, seed=args.seed, progress=not args.quiet,
        )
    except Exception as err:  # export errors are the user's to read: print them whole
        return error(f"{type(err).__name__}: {err}")
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.table())
    return 0 if report.ok else 1


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (``python -m smtdims_jax.pipeline_cli export ...``) until ``smtdims`` wires it in."""
    parser = argparse.ArgumentParser(prog="smtdims")
    sub = parser.add_subparsers(dest="command", required=True)
    add_export_parser(sub)
    args = parser.parse_args(argv)
    return run_export(args)


if __name__ == "__main__":
    sys.exit(main())
