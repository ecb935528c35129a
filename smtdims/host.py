"""What the core needs from a host framework (JAX), registered by the host's adapter.

The core never imports JAX. The adapter registers a :class:`Host` (JAX's own trick:
``shape_poly`` declares ``_bounds_decision`` and the decision module installs
itself). The package face may register a loader that imports the adapter the first
time a foreign object shows up, so ``smtdims.bounds(jax_dim)`` works without an
explicit ``import smtdims_jax``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Host(Protocol):
    def is_dim(self, x: Any) -> bool: ...
    def is_scope(self, x: Any) -> bool: ...
    def scope_of(self, x: Any) -> Any: ...
    def to_ir(self, x: Any) -> Any: ...
    def scope_constraints(self, scope: Any) -> Any: ...
    def session_for_scope(self, scope: Any) -> Any: ...


_HOSTS: list[Host] = []
_LOADERS: list[tuple[Callable[[Any], bool], Callable[[], None]]] = []


def register(host: Host) -> None:
    if host not in _HOSTS:
        _HOSTS.append(host)


def register_loader(recognises: Callable[[Any], bool], load: Callable[[], None]) -> None:
    """``load()`` (which registers a host) runs the first time ``recognises(x)`` holds."""
    _LOADERS.append((recognises, load))


def find(x: Any) -> Host | None:
    """The host that owns ``x`` (a foreign dimension or scope), loading it if needed."""
    for h in _HOSTS:
        if h.is_dim(x) or h.is_scope(x):
            return h
    for recognises, load in list(_LOADERS):
        if recognises(x):
            load()
            for h in _HOSTS:
                if h.is_dim(x) or h.is_scope(x):
                    return h
    return None


def looks_like_jax(x: Any) -> bool:
    """A cheap test by type name (no import): JAX's ``_DimExpr`` or ``SymbolicScope``."""
    t = type(x)
    return t.__name__ in ("_DimExpr", "SymbolicScope") and t.__module__.startswith("jax")
