"""Where the core finds its plugins: package entry points, read on first use.

Nothing in smtdims imports a plugin; the core knows only these entry-point groups, and a plugin
declares its parts under them in its ``pyproject.toml``:

- ``smtdims.api``: ``NAME = "module:object"`` is ``smtdims.NAME`` (``smtdims.install``), loaded on first use;
- ``smtdims.commands``: ``NAME = "module"`` is the module behind ``smtdims NAME`` (``export``, ``verify``, ``run``);
- ``smtdims.hosts``: ``NAME = "module"`` is imported the first time an object of host NAME (``jax``)
  reaches the core; importing it registers a :class:`smtdims.host.Host`.

Why entry points: the layers point down (plugins -> smtdims, ``tests/docs/test_structure.py`` checks it),
and a further plugin needs no edit here. Reading them costs tens of milliseconds (importing
``importlib.metadata`` and scanning the installed distributions), so it happens once, on the first
use of a plugin's name, never at ``import smtdims``. Where the installed metadata lacks a group (a
source checkout run through ``PYTHONPATH=.:plugins``, as ``scripts/accelerator_check.sh`` does, or an
install older than the group), the checkout's own ``pyproject.toml`` declares the same entries.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

API = "smtdims.api"
COMMANDS = "smtdims.commands"
HOSTS = "smtdims.hosts"
GROUPS = (API, COMMANDS, HOSTS)


@dataclass(frozen=True)
class Entry:
    """One declared part: ``value`` is ``module`` or ``module:attribute`` (entry-point syntax)."""

    group: str
    name: str
    value: str

    @property
    def module(self) -> str:
        return self.value.partition(":")[0].strip()

    def load(self) -> Any:
        """Import it now (through ``sys.modules``, so nothing is held here); ImportError is the import's."""
        obj = importlib.import_module(self.module)
        attr = self.value.partition(":")[2].strip()
        return functools.reduce(getattr, attr.split("."), obj) if attr else obj


# Read once; a race between two first readers reads twice and stores the same table (no lock needed).
_TABLE: dict[str, dict[str, Entry]] | None = None


def entries(group: str) -> dict[str, Entry]:
    """Name -> entry of ``group``, from the installed metadata or else the checkout's pyproject.toml."""
    global _TABLE
    table = _TABLE
    if table is None:
        table = _TABLE = _read()
    return table.get(group, {})


def find(group: str, name: str) -> Entry | None:
    return entries(group).get(name)


def _read() -> dict[str, dict[str, Entry]]:
    from importlib.metadata import entry_points

    found = entry_points()
    table = {g: {ep.name: Entry(g, ep.name, ep.value) for ep in found.select(group=g)} for g in GROUPS}
    missing = [g for g in GROUPS if not table[g]]
    if missing:
        checkout = checkout_entries()
        for g in missing:
            table[g] = checkout.get(g, {})
    return table


def checkout_entries(pyproject: Path | None = None) -> dict[str, dict[str, Entry]]:
    """The groups as the source checkout's pyproject.toml declares them (empty outside a checkout)."""
    import tomllib

    path = pyproject or Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        with path.open("rb") as f:
            project = tomllib.load(f).get("project", {})
    except (OSError, ValueError):
        return {}
    if project.get("name") != "smtdims":
        return {}
    declared = project.get("entry-points", {})
    return {g: {n: Entry(g, n, v) for n, v in declared.get(g, {}).items()} for g in GROUPS}
