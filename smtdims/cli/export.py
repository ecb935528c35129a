"""``smtdims export`` and ``smtdims verify``: the export pipeline's commands, which a plugin declares
(entry-point group smtdims.commands) and implements: this module finds it and hands over."""

from __future__ import annotations

import argparse
from typing import Any

from .common import EXIT_OK, plugin_command

COMMANDS = ("export", "verify")


def load(command: str = "export") -> Any:
    """The plugin's module for ``command``: ``add_export_parser(subparsers)``, ``run_export(args)``,
    ``run_verify(args)``."""
    return plugin_command(command, "'smtdims export' needs the export pipeline",
                          hint=". Install smtdims with JAX support (pip install smtdims) or use the Python API.")


def add_placeholders(subs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``export`` and ``verify`` in the top-level help when the pipeline is not loaded (any other command)."""
    p = subs.add_parser("export", parents=[common],
                        help="export a JAX function with symbolic shapes, fix and verify (needs JAX)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p = subs.add_parser("verify", parents=[common],
                        help="check a serialized artifact on this host's device against its function (needs JAX)")
    p.add_argument("rest", nargs=argparse.REMAINDER)


def run(pipeline: Any, args: argparse.Namespace) -> int:
    """The plugin's answer to ``args.command``: its exit status (0 when it returns None)."""
    rc = pipeline.run_export(args) if args.command == "export" else pipeline.run_verify(args)
    return EXIT_OK if rc is None else int(rc)
