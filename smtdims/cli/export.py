"""``smtdims export`` and ``smtdims verify``: the export pipeline's commands, which a plugin declares
(entry-point group smtdims.commands) and implements: this module finds it and hands over."""

from __future__ import annotations

import argparse
import importlib.util
import os
from typing import Any

from .. import plugins
from .common import EXIT_OK, plugin_command

COMMANDS = ("export", "verify")


def load(command: str = "export") -> Any:
    """The plugin's module for ``command``: ``add_export_parser(subparsers)``, ``run_export(args)``,
    ``run_verify(args)``."""
    return plugin_command(command, "'smtdims export' needs the export pipeline",
                          hint=". Install smtdims with JAX support (pip install smtdims) or use the Python API.")


def load_parser(command: str = "export") -> Any:
    """The plugin's module for ``command`` read from its file alone, for its parser: its package is not
    imported (``smtdims_jax`` imports JAX, 1.5-2 s, which the help does not need, and which the command
    imports only once the verification process started: :func:`start_early`). The module's
    own top level must import nothing of its package (``smtdims_jax.pipeline_cli``'s does not). Falls back
    to :func:`load` where the file cannot be found or run alone."""
    entry = plugins.find(plugins.COMMANDS, command)
    if entry is not None and ":" not in entry.value:
        try:
            module = _from_file(entry.module)
        except Exception:  # an installation laid out otherwise: the ordinary import decides
            module = None
        if module is not None and hasattr(module, "add_export_parser"):
            return module
    return load(command)


def _from_file(name: str) -> Any | None:
    """Module ``name`` (``pkg.sub``) executed from its source file without importing ``pkg``, or None."""
    top, _, rest = name.partition(".")
    spec = importlib.util.find_spec(top)  # finds a top-level package without importing it
    if not rest or spec is None or not spec.submodule_search_locations:
        return None
    for where in spec.submodule_search_locations:
        path = os.path.join(where, *rest.split(".")) + ".py"
        if os.path.isfile(path):
            alone = importlib.util.spec_from_file_location(f"_smtdims_help_{name.replace('.', '_')}", path)
            if alone is None or alone.loader is None:
                return None
            module = importlib.util.module_from_spec(alone)
            alone.loader.exec_module(module)
            return module
    return None


def add_placeholders(subs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``export`` and ``verify`` in the top-level help when the pipeline is not loaded (any other command)."""
    p = subs.add_parser("export", parents=[common],
                        help="export a JAX function with symbolic shapes, fix and verify (needs JAX)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p = subs.add_parser("verify", parents=[common],
                        help="check a serialized artifact on this host's device against its function (needs JAX)")
    p.add_argument("rest", nargs=argparse.REMAINDER)


def start_early(pipeline: Any, args: argparse.Namespace) -> None:
    """Let the plugin start what the command will wait for (its verification process) before its package
    is imported: ``pipeline`` is the module :func:`load_parser` read, ``start_early(args)`` where it has one."""
    start = getattr(pipeline, "start_early", None)
    if start is not None:
        start(args)


def run(pipeline: Any, args: argparse.Namespace) -> int:
    """The plugin's answer to ``args.command``: its exit status (0 when it returns None)."""
    rc = pipeline.run_export(args) if args.command == "export" else pipeline.run_verify(args)
    return EXIT_OK if rc is None else int(rc)
