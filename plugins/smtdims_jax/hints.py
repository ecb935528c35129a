"""The hint on a failed broadcast: which equation it needed, a verified fix, the command that finds one.

The commonest failed export is a broadcast of two sizes JAX cannot prove equal (``x + pos_table[:t]``:
``t`` against ``min(512, t)``). JAX raises its own TypeError/ValueError; while installed, smtdims adds
(as ``add_note`` notes and ``smtdims_*`` attributes; class, args and message stay stock's) the
equation the broadcast needed, read at the seam (the last ``==`` JAX's shape checks asked that
smtdims could not prove, as the fix loop reads it), a verified fix where one is found in time (the
fix loop's candidates, first by its rank; no box is run here, so not necessarily the weakest), and
the ``smtdims export ... --fix`` command that finds the weakest and verifies the whole fix. Only
``jax.export.export`` is wrapped, and only while installed; recording the equations costs nothing
outside an export.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from smtdims import options
from smtdims.errors import SmtdimsError

from .conversion import scope_constraints, session_for_scope, to_ir
from .equality import not_recording, recording_unproven
from .frames import paste_target
from .jax_internals import AnyInconclusive, DimExpr, InconclusiveDimensionOperation, scope_initialized

_HINTED_EQUATIONS = 4
_HINT_DEADLINE = 0.5  # seconds per question while computing the fix of a hint
_BROADCAST_MSG = re.compile(r"incompatible shapes for broadcasting", re.IGNORECASE)


def hinted(real: Callable[..., Any], active: Callable[[], bool]) -> Callable[..., Any]:
    """``jax.export.export`` whose exporting function adds the hint to a failed broadcast while
    ``active()`` (smtdims installed); otherwise exactly ``real``'s."""

    @functools.wraps(real)
    def export(*args: Any, **kwargs: Any) -> Any:
        do_export = real(*args, **kwargs)
        fun = args[0] if args else kwargs.get("fun_jit")

        @functools.wraps(do_export)
        def do_export_hinted(*a: Any, **k: Any) -> Any:
            if not active():
                return do_export(*a, **k)
            with recording_unproven(_HINTED_EQUATIONS) as eqs:
                try:
                    return do_export(*a, **k)
                except Exception as err:
                    with not_recording():  # the hint's own questions are not the program's
                        add_broadcast_hint(err, tuple(eqs), fun, a, k)
                    raise

        return do_export_hinted

    return export


def add_broadcast_hint(err: BaseException, equations: tuple[tuple[Any, Any], ...], fun: Any = None,
                       args: tuple = (), kwargs: dict | None = None) -> bool:
    """Add the hint to ``err`` when it is a failed broadcast and ``equations`` (oldest first) hold the
    equation it needed; True when added. Never raises: a hint must not replace the error.

    Sets ``err.smtdims_equation`` ("t == min(512, t)"), ``err.smtdims_fix`` ("add the constraint
    't <= 512'", or "" when none was found in time) and ``err.smtdims_command`` (the
    ``smtdims export ... --fix`` command, ready to paste), and adds one note with the same in words.
    """
    try:
        if (not equations or isinstance(err, AnyInconclusive) or not isinstance(err, (TypeError, ValueError))
                or hasattr(err, "smtdims_equation") or not _BROADCAST_MSG.search(str(err))):
            return False
        hint = _broadcast_hint(equations, fun, args, kwargs or {})
        if hint is None:
            return False
        equation, fix, command = hint
        err.smtdims_equation, err.smtdims_fix, err.smtdims_command = equation, fix, command
        lines = [f"smtdims: the broadcast needs {equation}, which smtdims cannot prove from the scope's constraints"]
        if fix:
            lines.append(f"smtdims: suggested fix: {fix}")
        lines.append(f"smtdims: {'the whole fix, verified end to end' if fix else 'to search for a fix'}: {command}")
        err.add_note("\n".join(lines))
        return True
    except Exception:  # noqa: BLE001 - the hint is extra; the error is what the program gets
        return False


def _broadcast_hint(equations: tuple[tuple[Any, Any], ...], fun: Any, args: tuple,
                    kwargs: dict) -> tuple[str, str, str] | None:
    """(the equation, a verified fix or "", the ``smtdims export ... --fix`` command)."""
    from smtdims.answers.equations import equation_fixes, fix_text  # loaded on a failed broadcast only

    chosen = None  # (equation, fix, scope): the last equation JAX asked; the one before if only it has a fix
    for lhs, rhs in reversed(equations[-2:]):
        dim = lhs if isinstance(lhs, DimExpr) else rhs
        if not isinstance(dim, DimExpr) or not scope_initialized(dim.scope):
            continue
        a, b = to_ir(lhs), to_ir(rhs)
        try:
            with options.scoped(deadline=_HINT_DEADLINE):
                found = equation_fixes(session_for_scope(dim.scope), a, b)
        except (SmtdimsError, InconclusiveDimensionOperation):
            found = []
        fix = ""
        if found:
            kind, text, variable, _note, _rank = min(found, key=lambda f: f[4])  # the fix loop's order
            fix = fix_text(kind, text, variable)
        if chosen is None or fix:
            chosen = (f"{a} == {b}", fix, dim.scope)
        if fix:
            break
    if chosen is None:
        return None
    equation, fix, scope = chosen
    target = paste_target(getattr(fun, "__wrapped__", fun)) if fun is not None else ""
    parts = ["smtdims export", target or "MODULE:FUNCTION"]
    leaves = jax.tree_util.tree_leaves((args, kwargs))
    if not kwargs and leaves and all(isinstance(x, jax.ShapeDtypeStruct) for x in leaves) and len(leaves) == len(args):
        parts += [f'--spec "{np.dtype(x.dtype).name}[{",".join(str(d) for d in x.shape)}]"' for x in leaves]
    else:
        parts.append("--spec SPEC")
    parts += [f'-c "{c.text}"' for c in scope_constraints(scope)]
    return equation, fix, " ".join([*parts, "--fix"])


__all__ = ["add_broadcast_hint", "hinted"]
