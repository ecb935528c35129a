"""Platform names and the local backend, checked before anything is exported.

Why up front: stock JAX reports a misspelt lowering platform late (``--platform cpux``
exported, then every sample was skipped) and a ``JAX_PLATFORMS`` that names a backend
this machine lacks as ``assert _default_backend is not None`` from deep inside
``xla_bridge``. Both are input errors: say which names work and what to change.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
from collections.abc import Mapping, Sequence

import jax

KNOWN = ("cpu", "cuda", "rocm", "tpu")  # the lowering platforms jax.export accepts
GPU = "gpu"  # JAX's alias: the GPU backend installed here (cuda or rocm)


class PlatformError(ValueError):
    """A platform name that jax.export cannot lower for (exit 2 on the command line)."""


class BackendUnavailable(RuntimeError):
    """JAX cannot start any backend here (e.g. ``JAX_PLATFORMS=cuda`` on a machine without CUDA)."""


def normalise_platforms(platforms: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """Lower-cased platform names, ``gpu`` mapped as JAX maps it; unknown names refused with the valid ones."""
    if platforms is None:
        return None
    items = platforms.split(",") if isinstance(platforms, str) else list(platforms)
    out: list[str] = []
    for raw in items:
        if not isinstance(raw, str):
            raise PlatformError(f"platform names are strings such as 'cpu'; got {raw!r}")
        p = raw.strip().lower()
        if not p:
            continue
        if p == GPU:
            p = _gpu_platform()
        elif p not in KNOWN:
            close = difflib.get_close_matches(p, [*KNOWN, GPU], n=1)
            raise PlatformError(f"unknown platform {raw.strip()!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                                + f"; jax.export lowers for {', '.join(KNOWN)} (and {GPU!r}, JAX's name for the "
                                "installed cuda or rocm backend)")
        if p not in out:
            out.append(p)
    return tuple(out) or None


def _gpu_platform() -> str:
    from ..jax_internals import canonical_platform

    try:
        return canonical_platform(GPU)
    except (RuntimeError, AssertionError) as err:
        why = str(err).strip() or "no GPU backend is installed"
        raise PlatformError(f"platform 'gpu': JAX maps it to the GPU backend installed here, and there is none ({why}). "
                            "Name the target instead: --platform cuda or --platform rocm (exporting for a GPU works "
                            "on a machine without one; the samples then run only where that GPU is)") from None


# What installs a backend beside the CPU: TPU's runtime, and the PJRT plugins (CUDA, ROCm, Metal...), which JAX
# finds in the ``jax_plugins`` namespace package or as jax_cuda*/jax_rocm* modules
_ACCELERATOR_MODULES = ("libtpu", "jax_plugins", "jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm60_plugin",
                        "jax_rocm7_plugin")


def foreseen_platform(env: Mapping[str, str]) -> str | None:
    """The platform a fresh process's JAX starts with ``env``, where it can be told without starting one:
    "cpu" where ``JAX_PLATFORMS`` names the CPU first, or nothing but the CPU is installed; None where the
    process must be asked (an accelerator's runtime or plugin is installed, or another platform is named).
    The pipeline then exports while the verification process starts, instead of waiting for it; the
    process's own answer is checked before the samples run."""
    named = [p.strip() for p in env.get("JAX_PLATFORMS", "").split(",") if p.strip()]
    if named:
        return "cpu" if named[0] == "cpu" else None
    try:
        if any(importlib.util.find_spec(m) is not None for m in _ACCELERATOR_MODULES):
            return None
    except (ImportError, ValueError):  # a broken install: ask the process
        return None
    return "cpu"


def backend_problem() -> str | None:
    """Why JAX cannot start a backend here (what is wrong and what to do), or None when it can."""
    try:
        jax.devices()
        return None
    except (AssertionError, RuntimeError) as err:
        return explain_backend_error(type(err).__name__, str(err))


def explain_backend_error(kind: str, text: str) -> str:
    """What a failed backend start means and what to do (JAX's own text is an assertion or a lockfile)."""
    from ..jax_internals import known_backends

    env = os.environ.get("JAX_PLATFORMS", "")
    known = ", ".join(known_backends()) or "none"
    detail = text.strip().splitlines()[0] if text.strip() else ""
    if env:
        return (f"JAX cannot start a backend: JAX_PLATFORMS={env!r} asks for a platform that is not installed or not "
                f"usable on this machine (JAX knows: {known})" + (f"; JAX says: {detail}" if detail else "")
                + ". Unset JAX_PLATFORMS or set JAX_PLATFORMS=cpu (to export for a GPU from here, keep the local "
                "backend and pass --platform cuda); or install the jaxlib plugin, e.g. pip install 'jax[cuda12]'")
    return (f"JAX cannot start a backend ({kind}{': ' + detail if detail else ''}; JAX knows: {known}). "
            "Check the jaxlib installation, or set JAX_PLATFORMS=cpu")


def check_backend() -> None:
    """Raise :class:`BackendUnavailable` with :func:`backend_problem`'s advice when JAX has no backend."""
    problem = backend_problem()
    if problem is not None:
        raise BackendUnavailable(problem)


__all__ = ["GPU", "KNOWN", "BackendUnavailable", "PlatformError", "backend_problem", "check_backend",
           "explain_backend_error", "foreseen_platform", "normalise_platforms"]
