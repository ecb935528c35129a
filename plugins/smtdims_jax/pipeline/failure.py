"""A failed export: JAX's message, smtdims' witnesses, and one fix re-exported to verify it."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import jax
from jax import export

from smtdims.answers.fixes import SPEC, Fix
from smtdims.errors import format_valuation
from smtdims.lang.constraints import ConstraintSet
from smtdims.lang.parser import parse_expr
from smtdims.reasoner import Session

from ..conversion import session_for_scope, to_ir
from ..inconclusive import InconclusiveExplanation, InconclusiveWithWitnesses
from ..jax_internals import AnyInconclusive, inconclusive_help_msg
from ..seam import enabled
from ._common import raised_by_smtdims
from .attempt import error_chain
from .refusals import REMAINDER_RE, FixPart, Indivisible
from .report import ExportFailure, first_line
from .result import FIXED, NARROW, NO_SYMBOLIC, NOT_VERIFIED
from .specs import aval_text, is_sym


# -- a failed export -----------------------------------------------------------------------------------
def describe_export_error(err: BaseException, fn: Callable[..., Any], plats: tuple[str, ...] | None,
                          spec_leaves: Sequence[Any], in_tree: Any, scope: Any,
                          budget: int | None = None, reexport: bool = True) -> ExportFailure:
    """JAX's message, smtdims' witness lines, and a fix that was re-exported to check it.

    An inconclusive comparison raised with smtdims installed carries smtdims' reading of it as values
    (:attr:`.InconclusiveWithWitnesses.reading`: where both answers occur, the first fix smtdims verified
    for that comparison, where it arose); its ``str()`` shows the same in words. A reshape's "The
    remainder mod(b, -2) should be 0" (JAX's words) gets the spec rewrite (write ``2*b`` for ``b``) that
    makes the size divisible for every valuation. ``reexport``: export again with the fix to verify it
    (the whole fix does that in its first round: :func:`settled_by`).
    """
    text = str(err)
    help_msg = inconclusive_help_msg(type(err))
    if isinstance(help_msg, str) and help_msg.strip() and help_msg in text:
        text = text.replace(help_msg, "")
    lines = text.rstrip().splitlines()
    ours = tuple(ln.strip() for ln in lines if ln.strip().startswith("smtdims:"))
    message = "\n".join(ln for ln in lines if not ln.strip().startswith("smtdims:")).strip()
    witnesses: tuple[str, ...] = ()
    valuations: tuple[dict[str, int], ...] = ()
    location = ""
    reading = _reading_shown(err, text) if ours else None
    found = reading.suggested_fix if reading is not None else None
    if reading is not None:
        location = reading.location
        if reading.question:
            witnesses = (f"{format_valuation(reading.false_at)} makes {reading.question} false",
                         f"{format_valuation(reading.true_at)} makes it true")
            valuations = (dict(reading.false_at or {}), dict(reading.true_at or {}))
    session = session_for_scope(scope)
    rem = REMAINDER_RE.search(message)
    if found is None and rem:
        found = remainder_fix(session, rem.group(1))
    fix, kind = (str(found), found.kind) if found is not None else ("", "")
    constraint = found.text if found is not None and found.kind != SPEC else None
    variable, new = (found.variable, found.text) if found is not None and found.kind == SPEC else (None, None)
    verified: bool | None = None
    detail = ""
    fixed_specs: tuple[str, ...] = ()
    fixed_constraints: tuple[str, ...] = ()
    if kind:
        try:
            rebuilt = _respec(spec_leaves, session.constraints, variable, new, constraint)
        except Exception as e:  # noqa: BLE001 - the rewritten spec is ours; if JAX will not take it, say so
            rebuilt, detail = None, f"the rewritten specification did not build ({type(e).__name__}: {first_line(str(e))})"
        if rebuilt is not None:
            leaves, texts = rebuilt
            fixed_specs = tuple(aval_text(x) for x in leaves)
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
                if raised_by_smtdims(e):
                    raise
                verified, detail = False, f"{type(e).__name__}: {first_line(str(e), 200)}"
        elif not detail:
            detail = "the constraints could not be rewritten mechanically"
    return ExportFailure(
        type=type(err).__name__ if not isinstance(err, AnyInconclusive)
        else "InconclusiveDimensionOperation",
        message=message, smtdims=ours, witnesses=witnesses, valuations=valuations, location=location, fix=fix,
        fix_kind=kind, fix_verified=verified, fix_detail=detail, fixed_specs=fixed_specs,
        fixed_constraints=fixed_constraints, suggested_fix=found,
    )


def _reading_shown(err: BaseException, text: str) -> InconclusiveExplanation | None:
    """smtdims' reading of the comparison whose explanation ``err``'s message (``text``) shows: ``err``'s
    own, or that of the error it was re-raised from (Keras re-creates JAX's error from its message,
    ``e.__class__(message)``, in the handler: the explained one is its ``__context__``)."""
    for e in error_chain(err):
        if isinstance(e, InconclusiveWithWitnesses) and e.explanation and e.explanation in text:
            return e.reading
    return None


class _NotReexported(Exception):
    """The fix is left to the whole fix's first round to export (``reexport=False``)."""


def settled_by(failure: ExportFailure, whole: Any) -> ExportFailure:
    """``failure`` with its fix's verdict read from the whole fix's first round, where that round chose
    the same fix: the export succeeds with it (one round) or still fails (the next round's refusal)."""
    found = failure.suggested_fix
    if found is None or failure.fix_verified is not None or whole is None or not whole.rounds:
        return failure
    if not _is_round_choice(found, whole.rounds[0].parts):
        return failure
    if len(whole.rounds) > 1:
        return replace(failure, fix_verified=False, fix_detail=first_line(whole.rounds[1].error, 200))
    # one round, and the export succeeded (whatever its verification then found): the first fix was enough
    return replace(failure, fix_verified=whole.status in (FIXED, NARROW, NOT_VERIFIED, NO_SYMBOLIC))


def _is_round_choice(fix: Fix, parts: Sequence[FixPart]) -> bool:
    """Whether a round chose exactly ``fix``: one part of its kind and text (and, for a spec rewrite, of
    the variable it replaces; a note does not make it another fix)."""
    if len(parts) != 1:
        return False
    (part,) = parts
    return (part.kind, part.text) == (fix.kind, fix.text) and (fix.kind != SPEC or part.variable == fix.variable)


def remainder_fix(session: Session, remainder: str) -> Fix | None:
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
        dims = [str(to_ir(d).substitute(env)) if is_sym(d) else str(int(d)) for d in x.shape]
        shape = export.symbolic_shape(", ".join(dims), scope=scope) if dims else ()
        out.append(jax.ShapeDtypeStruct(shape, x.dtype))
    return out, tuple(texts)
