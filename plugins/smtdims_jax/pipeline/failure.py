"""A failed export: JAX's message, smtdims' witnesses, and one fix re-exported to verify it."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import jax
from jax import export

from smtdims.answers.fixes import Fix
from smtdims.lang.constraints import ConstraintSet
from smtdims.lang.parser import parse_expr
from smtdims.reasoner import Session

from ..conversion import session_for_scope, to_ir
from ..jax_internals import AnyInconclusive
from ..seam import enabled
from ._common import _raised_by_smtdims
from .refusals import REMAINDER_RE, Indivisible
from .report import ExportFailure, _first_line
from .result import FIXED, NARROW, NO_SYMBOLIC, NOT_VERIFIED
from .specs import _aval_text, _is_sym

# -- a failed export -----------------------------------------------------------------------------------
_UNDETERMINED_RE = re.compile(r"undetermined: (.*?) makes (.*) false; (.*?) makes it true\.")
_VALUATION_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*) = (-?\d+)")


def _valuation(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in _VALUATION_RE.findall(text)}


def describe_export_error(err: BaseException, fn: Callable[..., Any], plats: tuple[str, ...] | None,
                          spec_leaves: Sequence[Any], in_tree: Any, scope: Any,
                          budget: int | None = None, reexport: bool = True) -> ExportFailure:
    """JAX's message, smtdims' witness lines, and a fix that was re-exported to check it.

    An inconclusive comparison raised with smtdims installed already says (in its
    ``str()``) where both answers occur and the first fix smtdims verified for that
    comparison; a reshape's "The remainder mod(b, -2) should be 0" gets the spec rewrite
    (write ``2*b`` for ``b``) that makes the size divisible for every valuation. ``reexport``: export
    again with the fix to verify it (the whole fix does that in its first round: :func:`settled_by`).
    """
    text = str(err)
    help_msg = getattr(type(err), "_help_msg", None)
    if isinstance(help_msg, str) and help_msg.strip() and help_msg in text:
        text = text.replace(help_msg, "")
    lines = text.rstrip().splitlines()
    ours = tuple(ln.strip() for ln in lines if ln.strip().startswith("smtdims:"))
    message = "\n".join(ln for ln in lines if not ln.strip().startswith("smtdims:")).strip()
    witnesses: tuple[str, ...] = ()
    valuations: tuple[dict[str, int], ...] = ()
    location = fix = kind = ""
    for ln in ours:
        m = _UNDETERMINED_RE.search(ln)
        if m:
            witnesses = (f"{m.group(1)} makes {m.group(2)} false", f"{m.group(3)} makes it true")
            valuations = (_valuation(m.group(1)), _valuation(m.group(3)))
        if ln.startswith("smtdims: suggested fix: "):
            fix = ln[len("smtdims: suggested fix: "):]
        if ln.startswith("smtdims: the comparison arose at "):
            location = ln[len("smtdims: the comparison arose at "):]
    session = session_for_scope(scope)
    constraint = variable = new = None
    m = re.match(r"add the constraint '(.+?)'", fix)
    if m:
        kind, constraint = "constraint", m.group(1)
    m = re.match(r"write '(.+?)' in the shape specification in place of '(\w+)'", fix)
    if m:
        kind, new, variable = "spec", m.group(1), m.group(2)
    rem = REMAINDER_RE.search(message)
    if not fix and rem:
        found = _remainder_fix(session, rem.group(1))
        if found is not None:
            kind, new, variable, fix = "spec", found.text, found.variable, str(found)
    verified: bool | None = None
    detail = ""
    fixed_specs: tuple[str, ...] = ()
    fixed_constraints: tuple[str, ...] = ()
    if kind:
        try:
            rebuilt = _respec(spec_leaves, session.constraints, variable, new, constraint)
        except Exception as e:  # noqa: BLE001 - the rewritten spec is ours; if JAX will not take it, say so
            rebuilt, detail = None, f"the rewritten specification did not build ({type(e).__name__}: {_first_line(str(e))})"
        if rebuilt is not None:
            leaves, texts = rebuilt
            fixed_specs = tuple(_aval_text(x) for x in leaves)
            fixed_constraints = texts
            try:
                if not reexport:
                    raise _NotReexported
                with enabled(budget=budget):
                    export.export(jax.jit(fn), platforms=plats)(*jax.tree_util.tree_unflatten(in_tree, leaves))
                verified = True
            except _NotReexported:
                pass
            except Exception as e:  # noqa: BLE001 - any refusal: the fix is not enough
                if _raised_by_smtdims(e):
                    raise
                verified, detail = False, f"{type(e).__name__}: {_first_line(str(e), 200)}"
        elif not detail:
            detail = "the constraints could not be rewritten mechanically"
    return ExportFailure(
        type=type(err).__name__ if not isinstance(err, AnyInconclusive)
        else "InconclusiveDimensionOperation",
        message=message, smtdims=ours, witnesses=witnesses, valuations=valuations, location=location, fix=fix,
        fix_kind=kind, fix_verified=verified, fix_detail=detail, fixed_specs=fixed_specs,
        fixed_constraints=fixed_constraints,
    )


class _NotReexported(Exception):
    """The fix is left to the whole fix's first round to export (``reexport=False``)."""


def settled_by(failure: ExportFailure, whole: Any) -> ExportFailure:
    """``failure`` with its fix's verdict read from the whole fix's first round, where that round chose
    the same fix: the export succeeds with it (one round) or still fails (the next round's refusal)."""
    if not failure.fix or failure.fix_verified is not None or whole is None or not whole.rounds:
        return failure
    first = whole.rounds[0]
    if not first.chosen or not failure.fix.startswith(first.chosen):  # the fix text may carry its note after
        return failure
    if len(whole.rounds) > 1:
        return replace(failure, fix_verified=False, fix_detail=_first_line(whole.rounds[1].error, 200))
    # one round, and the export succeeded (whatever its verification then found): the first fix was enough
    return replace(failure, fix_verified=whole.status in (FIXED, NARROW, NOT_VERIFIED, NO_SYMBOLIC))


def _remainder_fix(session: Session, remainder: str) -> Fix | None:
    """``mod(E, k)`` must be 0: the first verified spec rewrite (``v -> m*v``) that makes it so."""
    refusal = Indivisible.parse(remainder)
    return next((f for f in refusal.rewrites(session) if f.kind == "spec"), None) if refusal is not None else None


def _respec(leaves: Sequence[Any], cs: ConstraintSet, variable: str | None, new: str | None,
            constraint: str | None) -> tuple[list[Any], tuple[str, ...]] | None:
    """The spec leaves rebuilt in a fresh scope with a fix applied (None: cannot rewrite it)."""
    env = {variable: parse_expr(new)} if variable and new else {}
    texts = []
    for c in cs:
        if not env or variable not in c.diff.variables():
            texts.append(c.text)
        elif re.fullmatch(r"\d+\*[A-Za-z_]\w*", new or "") and "^" not in c.text:  # 'b >= 3' -> '2*b >= 3'
            texts.append(re.sub(rf"(?<![\w.]){re.escape(variable)}(?!\w)", new, c.text))
        elif c.kind == ">=":
            texts.append(f"{c.diff.substitute(env)} >= 0")
        else:
            return None
    if constraint:
        texts.append(constraint)
    scope = export.SymbolicScope(tuple(texts))
    out = []
    for x in leaves:
        dims = [str(to_ir(d).substitute(env)) if _is_sym(d) else str(int(d)) for d in x.shape]
        shape = export.symbolic_shape(", ".join(dims), scope=scope) if dims else ()
        out.append(jax.ShapeDtypeStruct(shape, x.dtype))
    return out, tuple(texts)
