"""The tutorial's closing checklist, automated: export -> serialize -> fresh process -> compile -> compare.

:func:`export_and_verify` exports ``jax.jit(fn)`` with smtdims installed, checks that the
dimensions the user made symbolic stayed symbolic, serializes the artifact, and then
deserializes, compiles and runs it in a *fresh Python process that never imports
smtdims* (so a pass also proves the artifact runs on stock JAX). The sample shapes are
chosen by the solver, not by hand: each variable's minimum, divisibility edges of every
``mod``/``floordiv``, large values, tight constraint boundaries, maxima. One shape that is
provably outside the specification must be rejected by JAX's shape checks.

Why a solver picks the shapes: the bugs shape polymorphism hides live at the edges
(``b == 1`` evaluated as False while tracing, ``mod(b, 3) == 0``, ``a == b`` under
``a >= b``); hand-picked "two shapes" rarely hit them.

A function that JAX refuses to export is a failed check, not an exception: the report's
``export`` check fails and :class:`ExportFailure` carries JAX's message, smtdims'
witnesses (valuations on either side of an inconclusive comparison), and a fix that was
re-exported to verify it (the constraint smtdims suggests, or for a reshape's "The
remainder mod(b, -2) should be 0" the spec rewrite ``2*b`` for ``b``). Bad arguments
(specs, dtypes) still raise. On the command line (:mod:`.pipeline_cli`): exit status 0
all checks passed, 1 a check failed (the export included), 2 usage or input error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import z3
from jax import export

from smtdims import options
from smtdims.constraints import ConstraintSet
from smtdims.errors import SmtdimsError, format_valuation
from smtdims.explain import Fix, suggest_fixes
from smtdims.expr import FLOORDIV, MOD, Expr, Op
from smtdims.parser import parse_expr
from smtdims.reasoner import Session
from smtdims.smt import SAT, UNSAT, Encoder

from . import adapter, enabled

_WORKER = Path(__file__).with_name("_verify_worker.py")
MAX_ELEMENTS = 1 << 22  # per sample, all inputs together: keeps "large" samples quick to run
_LARGE = (61, 53, 47, 43, 41, 37)  # "large" = minimum + one of these primes (no accidental divisibility)
_CAP_STEP = 64  # first solver attempt keeps every variable within minimum + 64
_SHAPE_ERRORS = ("Input shapes do not match the", "Shape mismatch for args")

Progress = Callable[[str], None]


# -- report ------------------------------------------------------------------------------------------
PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass(frozen=True)
class Check:
    """One line of the checklist: ``status`` is ``"pass"``, ``"fail"`` or ``"skip"``."""

    name: str
    status: str
    detail: str = ""


@dataclass(frozen=True)
class SampleResult:
    """One solver-chosen shape run through the artifact and the native function."""

    index: int
    valuation: dict[str, int]
    shapes: tuple[tuple[int, ...], ...]
    why: tuple[str, ...]
    status: str  # pass | fail | skip
    detail: str = ""
    native_s: float | None = None
    compile_s: float | None = None
    run_s: float | None = None


@dataclass(frozen=True)
class RejectionCheck:
    """A shape provably outside the specification, and how the artifact refused it.

    ``how``: ``"shape assertion"`` (JAX's "Input shapes do not match ..." error),
    ``"shape refinement"`` (refused while refining shapes, before the assertion was
    reached; deserialized artifacts of jax 0.10.2 carry no explicit constraints for the
    Python-side check), ``"other error"`` or ``"accepted"``; the first two pass.
    """

    shapes: tuple[tuple[int, ...], ...]
    why: str
    status: str  # pass | fail | skip
    how: str = ""
    error: str = ""


@dataclass(frozen=True)
class ExportFailure:
    """Why ``jax.export`` refused the function: JAX's message and smtdims' reading of it.

    ``witnesses``: smtdims' valuations on either side of an inconclusive comparison (as
    text; ``valuations`` the same as dicts). ``fix``: the first fix smtdims verified for
    that comparison, or for a reshape's "remainder ... should be 0" a spec rewrite such as
    writing ``2*b`` for ``b``. ``fix_verified``: True when exporting again with the fix
    succeeded, False when the export still failed (``fix_detail`` says how), None when
    not tried (then the fix is a suggestion only).
    """

    type: str
    message: str
    smtdims: tuple[str, ...] = ()  # smtdims' lines of the error message, verbatim
    witnesses: tuple[str, ...] = ()
    valuations: tuple[dict[str, int], ...] = ()
    location: str = ""
    fix: str = ""
    fix_kind: str = ""  # "constraint" | "spec" | ""
    fix_verified: bool | None = None
    fix_detail: str = ""
    fixed_specs: tuple[str, ...] = ()  # the in_avals with a spec fix applied
    fixed_constraints: tuple[str, ...] = ()  # the constraints with the fix applied


@dataclass(frozen=True)
class VerificationReport:
    """What :func:`export_and_verify` checked; ``ok`` only when everything ran and passed."""

    function: str
    platforms: tuple[str, ...]
    constraints: tuple[str, ...]
    in_avals: tuple[str, ...]
    out_avals: tuple[str, ...]
    checks: tuple[Check, ...]
    samples: tuple[SampleResult, ...]
    rejections: tuple[RejectionCheck, ...]
    artifact_bytes: int = 0
    artifact_path: str | None = None
    device: str = ""
    worker_jax: str = ""
    export_error: ExportFailure | None = None  # set when the export failed (then nothing else ran)
    exported: Any = field(default=None, repr=False, compare=False)  # the jax.export.Exported
    exception: BaseException | None = field(default=None, repr=False, compare=False)  # the export's error

    @property
    def ok(self) -> bool:
        return (
            all(c.status != FAIL for c in self.checks)
            and bool(self.samples)
            and all(s.status == PASS for s in self.samples)
            and all(r.status != FAIL for r in self.rejections)
        )

    @property
    def failures(self) -> list[str]:
        """One line per failed (or not run) check, sample or rejection."""
        out = [f"{c.name}: {c.detail}" for c in self.checks if c.status == FAIL and c.name != "samples"]
        out += [
            f"sample {s.index} ({format_valuation(s.valuation)}): {s.status}: {s.detail}"
            for s in self.samples if s.status != PASS
        ]
        out += [f"outside spec {', '.join(map(str, r.shapes))}: {r.how}: {_first_line(r.error, 300)}"
                for r in self.rejections if r.status == FAIL]
        return out

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(dataclasses.replace(self, exported=None, exception=None))
        d.pop("exported", None)
        d.pop("exception", None)
        d["ok"] = self.ok
        for s in d["samples"]:
            s["shapes"] = [list(x) for x in s["shapes"]]
            s["why"] = list(s["why"])
        for r in d["rejections"]:
            r["shapes"] = [list(x) for x in r["shapes"]]
        for k in ("platforms", "constraints", "in_avals", "out_avals", "checks", "samples", "rejections"):
            d[k] = list(d[k])
        return d

    def __str__(self) -> str:
        return self.table()

    def table(self) -> str:
        def t(x: float | None) -> str:
            return "-" if x is None else f"{x:.3f}s"

        lines = [f"smtdims export check of {self.function}"]
        head = [
            ("platforms", ", ".join(self.platforms)),
            ("constraints", ", ".join(self.constraints) or "none"),
            ("in_avals", ", ".join(self.in_avals)),
            ("out_avals", ", ".join(self.out_avals) or "-"),
            ("artifact", "none (the export failed)" if self.export_error else
             f"{self.artifact_bytes} bytes" + (f" -> {self.artifact_path}" if self.artifact_path else "")),
            ("ran on", f"{self.device} (fresh process, stock jax {self.worker_jax})" if self.device else "not run"),
        ]
        lines += [f"  {k:<12}{v}" for k, v in head]
        if self.export_error is not None:
            lines += ["", *self._error_lines()]
        rows = [("#", "valuation", "input shapes", "chosen for", "compile", "run", "result")]
        for s in self.samples:
            shapes = ", ".join(str(x) for x in s.shapes)
            rows.append((str(s.index), format_valuation(s.valuation), shapes, ", ".join(s.why),
                         t(s.compile_s), t(s.run_s), s.status.upper() if s.status != PASS else s.status))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        if self.samples:
            lines.append("")
            for r in rows:
                lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        for r in self.rejections:
            lines.append(f"  outside spec  {', '.join(str(x) for x in r.shapes)}: {r.why}")
            got = {PASS: f"rejected by {r.how}", SKIP: "not run"}.get(r.status, r.how.upper())
            lines.append(f"                -> {got}" + (f": {_first_line(r.error, 110)}" if r.error else ""))
        if any(r.how == "shape refinement" for r in self.rejections):
            lines.append("  (a deserialized artifact keeps its shape assertions in the module but not the scope's explicit "
                         "constraints, so JAX may refuse such shapes while refining them, before the assertion reports)")
        lines.append("")
        lines.append("  checks: " + " | ".join(f"{c.name} {c.status}" for c in self.checks))
        fails = self.failures
        if fails:
            lines.append("  FAILED:")
            lines += [f"    {f}" for f in fails]
        else:
            n = len(self.samples)
            lines.append(f"  OK: {n}/{n} sample shapes match native {self.function.split(':')[-1]}; "
                         f"{len(self.rejections)} outside-spec shape(s) rejected")
        return "\n".join(lines)

    def _error_lines(self) -> list[str]:
        e = self.export_error
        assert e is not None
        out = [f"  export failed: {e.type}"]
        out += [f"    {ln}" for ln in e.message.splitlines()]
        out += [f"    {ln}" for ln in e.smtdims if not ln.startswith("smtdims: suggested fix")]
        if e.fix:
            how = {True: "verified: the export succeeds with it", False: f"the export still fails with it: {e.fix_detail}",
                   None: f"a suggestion, not re-exported{': ' + e.fix_detail if e.fix_detail else ''}"}[e.fix_verified]
            out.append(f"    fix: {e.fix}")
            out.append(f"         ({how})")
            if e.fix_kind == "spec" and e.fixed_specs:
                out.append(f"         in_avals would be {', '.join(e.fixed_specs)}"
                           + (f"; constraints {', '.join(e.fixed_constraints)}" if e.fixed_constraints else ""))
            elif e.fixed_constraints:
                out.append(f"         constraints would be {', '.join(e.fixed_constraints)}")
        return out


def _first_line(text: str, limit: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


# -- argument specifications ------------------------------------------------------------------------------
_SPEC_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\[(.*)\]\s*$", re.S)


def _as_dtype(x: Any) -> np.dtype:
    """A dtype from a full name (``"int32"``, ``"bfloat16"``) or a type; shorthands like ``"float"``, ``"i4"`` are refused."""
    try:
        d = jnp.dtype(x)
    except TypeError:
        d = None
    if d is None:
        raise ValueError(f"unknown dtype {x!r}; write a full name such as 'int32', 'float32', 'float64' or 'bfloat16'")
    if isinstance(x, str) and d.name != x:
        raise ValueError(f"unknown dtype {x!r} (NumPy shorthand for {d.name}); write the full name, e.g. {d.name!r}")
    return d


def _is_pair_candidate(x: Any) -> bool:
    """A 2-tuple that reads as ``(shape, dtype)`` rather than as a pytree of two specs."""
    if not (isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str)):
        return False
    second = x[1]
    if isinstance(second, str):
        return not _SPEC_RE.match(second)  # ("int32[a]", "int32[b]") is a pytree of two specs
    if isinstance(second, (list, tuple, dict, jax.ShapeDtypeStruct)):
        return False
    return isinstance(second, (type, np.dtype)) or not hasattr(second, "shape")  # arrays are pytree leaves


def _pair(x: tuple[Any, Any]) -> _StringSpec:
    shape, dtype = x
    try:
        d = _as_dtype(dtype)
    except ValueError as err:
        if isinstance(dtype, str):
            raise ValueError(
                f"argument spec {x!r} is ambiguous: as a (shape, dtype) pair, {err}; as two bare shape specs, "
                f"give them as separate arguments or with their dtypes, e.g. ('float32[{shape}]', 'float32[{dtype}]')"
            ) from None
        raise TypeError(f"argument spec {x!r}: the second element of a (shape, dtype) pair must be a dtype; {err}") from None
    if _SPEC_RE.match(shape):
        raise ValueError(f"argument spec {x!r}: {shape!r} already names its dtype; write {shape!r} alone, or "
                         f"({_SPEC_RE.match(shape).group(2)!r}, {d.name!r})")
    return _StringSpec(shape, d)


def _split_top(text: str) -> list[str]:
    """Split a shape spec on the commas outside parentheses."""
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i < len(text) - 1:
                break
        else:
            text = text[1:-1]
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    if cur.strip() or parts:
        parts.append(cur)
    return [p.strip() for p in parts]


@dataclass
class _StringSpec:
    shape: str
    dtype: np.dtype


def parse_arg_spec(spec: Any, default_dtype: Any = "float32") -> Any:
    """One argument spec as given to :func:`export_and_verify`, before the scope exists.

    ``"int32[b, 4]"``, ``("b, 4", "int32")`` or a bare ``"b, 4"`` (``default_dtype``)
    become string specs (a ``(str, str)`` tuple whose second element is neither a dtype
    name nor a spec with a dtype, such as ``("b", "float")``, is refused as ambiguous);
    ``jax.ShapeDtypeStruct`` and arrays (static shapes) pass through;
    lists, dicts and other pytrees are converted leaf by leaf.
    """

    def leaf(x: Any) -> Any:
        if isinstance(x, str):
            m = _SPEC_RE.match(x)
            if m:
                return _StringSpec(m.group(2), _as_dtype(m.group(1)))
            return _StringSpec(x, _as_dtype(default_dtype))
        if _is_pair_candidate(x):
            return _pair(x)
        if isinstance(x, jax.ShapeDtypeStruct):
            return x
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return jax.ShapeDtypeStruct(tuple(x.shape), x.dtype)  # a concrete array: its shape is static
        raise TypeError(
            f"argument spec {x!r}: expected 'int32[b, 4]', ('b, 4', 'int32'), a jax.ShapeDtypeStruct "
            "(e.g. from jax.export.symbolic_args_specs) or an array"
        )

    return jax.tree_util.tree_map(
        leaf, spec, is_leaf=lambda x: isinstance(x, (str, jax.ShapeDtypeStruct)) or _is_pair_candidate(x)
    )


def _is_sym(d: Any) -> bool:
    return export.is_symbolic_dim(d)


def build_specs(arg_specs: Sequence[Any], constraints: Sequence[str] = ()) -> tuple[tuple[Any, ...], Any, list[str]]:
    """``jax.ShapeDtypeStruct`` pytrees sharing one scope, the scope, and the specialised dims found.

    String specs share one :class:`jax.export.SymbolicScope` built with ``constraints``, or
    the scope of the ``ShapeDtypeStruct``s given (constraints must then come with that scope).
    """
    if isinstance(constraints, str):
        raise TypeError(f"constraints must be a sequence of strings; write constraints=({constraints!r},)")
    parsed = [parse_arg_spec(a) for a in arg_specs]
    is_leaf = lambda x: isinstance(x, (_StringSpec, jax.ShapeDtypeStruct))
    scopes = {id(d.scope): d.scope for p in parsed for x in jax.tree_util.tree_leaves(p, is_leaf=is_leaf)
              if isinstance(x, jax.ShapeDtypeStruct) for d in x.shape if _is_sym(d)}
    if len(scopes) > 1:
        raise ValueError("Invalid mixing of symbolic scopes: the ShapeDtypeStructs come from different SymbolicScopes; "
                         "build them with one scope (symbolic_shape(..., scope=...))")
    if scopes and constraints:
        raise ValueError("constraints= cannot be added to the scope of ShapeDtypeStructs that already exist; "
                         "pass them where the scope is made: symbolic_shape(..., constraints=...)")
    scope = next(iter(scopes.values())) if scopes else export.SymbolicScope(tuple(constraints))
    specialised: list[str] = []

    def build(path: Any, x: Any) -> Any:
        if isinstance(x, jax.ShapeDtypeStruct):
            return x
        texts = _split_top(x.shape)
        if any(t in ("...", "_") for t in texts):
            raise ValueError(f"spec {x.shape!r}: '...' and '_' take their sizes from actual arguments; build the "
                             "specs with jax.export.symbolic_args_specs(args, spec) and pass those")
        shape = export.symbolic_shape(x.shape, scope=scope)
        for j, (text, d) in enumerate(zip(texts, shape, strict=True) if len(texts) == len(shape) else ()):
            if re.search(r"[A-Za-z_]", text) and not _is_sym(d):
                specialised.append(f"args{jax.tree_util.keystr(path)}.shape[{j}] written '{text}' came out as the "
                                   f"constant {d} (an equality constraint fixes it)")
        return jax.ShapeDtypeStruct(shape, x.dtype)

    specs = tuple(jax.tree_util.tree_map_with_path(build, p, is_leaf=is_leaf) for p in parsed)
    return specs, scope, specialised


# -- sample selection --------------------------------------------------------------------------------------
Cond = tuple[Expr, str, int]  # lhs op rhs, evaluated exactly and encoded for Z3


def _holds(conds: Sequence[Cond], env: dict[str, int]) -> bool:
    try:
        for e, op, k in conds:
            v = e.evaluate(env)
            if not {"==": v == k, "!=": v != k, ">=": v >= k, "<=": v <= k, "<": v < k}[op]:
                return False
    except (ZeroDivisionError, KeyError):
        return False
    return True


def _encode(enc: Encoder, conds: Sequence[Cond]) -> list[z3.BoolRef]:
    out = []
    for e, op, k in conds:
        t = enc.expr(e)
        out.append({"==": t == k, "!=": t != k, ">=": t >= k, "<=": t <= k, "<": t < k}[op])
    return out


class SampleChooser:
    """Solver-chosen valuations for the input shapes: edges first, all shapes distinct.

    Every chosen valuation is re-checked with exact Python arithmetic against the
    constraints, so an encoding bug cannot smuggle an out-of-spec shape into the samples.
    """

    def __init__(self, session: Session, dims: Sequence[Sequence[Expr]], extra_atoms: Sequence[Expr] = ()):
        self.session = session
        self.constraints: ConstraintSet = session.constraints
        self.dims = [tuple(d) for d in dims]
        self.flat = [d for leaf in self.dims for d in leaf if not d.is_constant]
        self.vars = sorted(frozenset().union(*(d.variables() for d in self.flat)) | self.constraints.variables())
        self.shape_vars = sorted(frozenset().union(*(d.variables() for d in self.flat)))
        atoms: set = set()
        for e in [*self.flat, *extra_atoms, *(c.diff for c in self.constraints)]:
            atoms |= {a for a in e.atoms() if isinstance(a, Op) and a.op in (FLOORDIV, MOD)}
        self.div_atoms = sorted(atoms, key=str)
        self.lo: dict[str, int] = {}
        self.hi: dict[str, int | float] = {}
        for v in self.shape_vars:
            b = session.bounds(Expr.var(v))
            self.lo[v] = int(b.lo) if math.isfinite(b.lo) else 1
            self.hi[v] = b.hi

    def shapes(self, env: dict[str, int]) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(d.evaluate(env) for d in leaf) for leaf in self.dims)

    def _solve(self, session: Session, conds: Sequence[Cond], avoid: Sequence[dict[str, int]]) -> dict[str, int] | None:
        """A model of constraints & conds & (shape differs from each of ``avoid``); small values first."""
        caps: list[Cond] = [(Expr.var(v), "<=", self.lo[v] + _CAP_STEP) for v in self.shape_vars]
        nonneg: list[Cond] = [(d, ">=", 0) for d in self.flat]
        exprs = [e for e, _, _ in [*conds, *nonneg]] or [Expr.const(0)]
        linear = all(e.is_linear() for e in exprs)

        def build(enc: Encoder, with_caps: bool) -> list[z3.BoolRef]:
            fs = _encode(enc, [*conds, *nonneg, *(caps if with_caps else [])])
            for prev in avoid:
                differs = [enc.expr(d) != d.evaluate(prev) for d in self.flat]
                fs.append(z3.Or(differs) if differs else z3.BoolVal(False, enc.ctx))
            return fs

        for with_caps in (True, False):
            with session.lock:
                res = session.solver.check(lambda enc, c=with_caps: build(enc, c), linear=linear and session.solver.linear,
                                           model_vars=frozenset(self.vars))
            if res.status == SAT and res.model is not None:
                env = {v: res.model.get(v, 1) for v in self.vars}
                ok = session.constraints.holds(env) and _holds([*conds, *nonneg], env)
                if ok and all(self.shapes(env) != self.shapes(p) for p in avoid):
                    return env
        return None

    def goals(self) -> list[tuple[str, list[Cond]]]:
        """Targets in priority order (a smaller ``samples`` keeps the first ones)."""
        v_ = Expr.var
        out: list[tuple[str, list[Cond]]] = []
        if self.shape_vars:
            out.append(("minimum", [(v_(v), "==", self.lo[v]) for v in self.shape_vars]))
        for a in self.div_atoms:
            k = a.rhs.as_constant()
            r = a.lhs.mod(a.rhs)
            out.append((f"{r} == 0", [(r, "==", 0)]))
            if k is not None and abs(k) > 2:
                edge = k - 1 if k > 0 else k + 1
                out.append((f"{r} == {edge}", [(r, "==", edge)]))
            else:
                out.append((f"{r} != 0", [(r, "!=", 0)]))
        # distinct large values per variable, so that e.g. (a, b) is not sampled only on a == b
        large = {v: int(min(self.hi[v], self.lo[v] + _LARGE[i % len(_LARGE)])) for i, v in enumerate(self.shape_vars)}
        if self.shape_vars:
            out.append(("large", [(v_(v), "==", large[v]) for v in self.shape_vars]))
        for c in self.constraints:
            if c.kind == ">=":
                out.append((f"{c.text} tight", [(c.diff, "==", 0)]))
        for v in self.shape_vars:
            if math.isfinite(self.hi[v]):
                out.append((f"max {v}", [(v_(v), "==", int(self.hi[v]))]))
        if len(self.shape_vars) > 1:
            for v in self.shape_vars:
                out.append((f"min {v}, others large",
                            [(v_(w), "==", self.lo[w] if w == v else large[w]) for w in self.shape_vars]))
        for v in self.shape_vars:
            out.append((f"min {v}", [(v_(v), "==", self.lo[v])]))
            out.append((f"large {v}", [(v_(v), "==", large[v])]))
        return out

    def choose(self, n: int) -> list[tuple[dict[str, int], list[str]]]:
        """Up to ``n`` valuations with distinct shapes, each with the goals it covers."""
        chosen: list[tuple[dict[str, int], list[str]]] = []
        if not self.flat:
            return [({v: self.lo.get(v, 1) for v in self.vars}, ["static shapes"])]
        for label, conds in self.goals():
            if len(chosen) >= n:
                break
            covered = [why for env, why in chosen if _holds(conds, env)]
            if covered:
                covered[0].append(label)
                continue
            env = self._fit(conds, [e for e, _ in chosen])
            if env is not None:
                chosen.append((env, [label]))
        for k in range(1, 4 * n):  # fill: small spread values first, then anything distinct
            if len(chosen) >= n:
                break
            for spread in ([(Expr.var(v), "==", self.lo[v] + k * (i + 1)) for i, v in enumerate(self.shape_vars)],
                           [(Expr.var(v), "==", self.lo[v] + k) for v in self.shape_vars]):
                env = self._fit(spread, [e for e, _ in chosen])
                if env is not None:
                    chosen.append((env, ["spread"]))
                    break
        while len(chosen) < n:
            env = self._fit([], [e for e, _ in chosen])
            if env is None:
                break  # the specification admits no more distinct shapes
            chosen.append((env, ["distinct"]))
        return chosen

    def _fit(self, conds: list[Cond], avoid: list[dict[str, int]]) -> dict[str, int] | None:
        env = self._solve(self.session, conds, avoid)
        if env is not None and sum(math.prod(s) for s in self.shapes(env)) > MAX_ELEMENTS:
            return None
        return env

    # -- a shape outside the specification ------------------------------------------------------------
    def is_outside(self, shapes: tuple[tuple[int, ...], ...]) -> bool:
        """Proven: no valuation meeting the constraints (and every variable >= 1) gives ``shapes``."""
        conds: list[Cond] = [
            (d, "==", s) for leaf, sl in zip(self.dims, shapes, strict=True) for d, s in zip(leaf, sl, strict=True)
        ]
        if any(e.is_constant and e.as_constant() != s for e, _, s in conds):
            return True
        conds = [c for c in conds if not c[0].is_constant]
        with self.session.lock:
            res = self.session.solver.check(
                lambda enc: _encode(enc, conds), linear=self.session.solver.linear and all(e.is_linear() for e, _, _ in conds),
                model_vars=frozenset(self.vars),
            )
        return res.status == UNSAT

    def outside(self, samples: Sequence[dict[str, int]], limit: int = 3) -> list[tuple[tuple[tuple[int, ...], ...], str]]:
        """Shapes provably outside the spec: one per violated constraint, then one dimension of a sample perturbed."""
        found: list[tuple[tuple[tuple[int, ...], ...], str]] = []
        for c in self.constraints:
            if len(found) >= limit - 1:
                break
            others = ConstraintSet(tuple(x for x in self.constraints if x is not c))
            negated: Cond = (c.diff, "<" if c.kind == ">=" else "!=", 0)
            env = self._solve(Session(others, self.session.budget), [negated], [])
            if env is not None and not c.holds(env):
                shapes = self.shapes(env)
                if self.is_outside(shapes) and shapes not in [f[0] for f in found]:
                    found.append((shapes, f"{format_valuation({v: env[v] for v in self.shape_vars})} violates {c.text}"))
        for env in samples:
            base = self.shapes(env)
            for i, leaf in enumerate(self.dims):
                for j, d in enumerate(leaf):
                    if d.is_constant and self.flat:
                        continue
                    for delta in (1, -1):
                        new = base[i][j] + delta
                        if new < 0:
                            continue
                        shapes = tuple(
                            tuple(new if (ii, jj) == (i, j) else s for jj, s in enumerate(sl)) for ii, sl in enumerate(base)
                        )
                        if self.is_outside(shapes):
                            found.append((shapes, f"input {i} dim {j} ({d}) of {base} set to {new}: no valuation gives it"))
                            return found
        return found


# -- inputs and comparison ---------------------------------------------------------------------------------
def random_input(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Seeded data: small ints (exact comparisons stay meaningful), normal floats."""
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(dtype)
    if jnp.issubdtype(dtype, jnp.unsignedinteger):
        return rng.integers(0, 20, size=shape).astype(dtype)
    if jnp.issubdtype(dtype, jnp.integer):
        return rng.integers(-9, 10, size=shape).astype(dtype)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _tolerance(dtype: np.dtype, rtol: float | None, atol: float | None) -> tuple[float, float]:
    default = 2e-2 if jnp.dtype(dtype).itemsize <= 2 else 1e-5
    return (default if rtol is None else rtol, default if atol is None else atol)


def compare_outputs(native: Sequence[np.ndarray], exported: Sequence[np.ndarray],
                    expected_shapes: Sequence[tuple[int, ...]] | None = None,
                    rtol: float | None = None, atol: float | None = None) -> str | None:
    """None when equal (exactly for integers and bools, within tolerance for floats), else why not."""
    if len(native) != len(exported):
        return f"{len(exported)} outputs from the artifact, {len(native)} from the native function"
    for i, (a, b) in enumerate(zip(native, exported, strict=True)):
        a, b = np.asarray(a), np.asarray(b)
        if expected_shapes is not None and tuple(b.shape) != tuple(expected_shapes[i]):
            return f"output {i}: shape {tuple(b.shape)} differs from out_avals evaluated here {tuple(expected_shapes[i])}"
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"output {i}: artifact gives {b.dtype}{list(b.shape)}, native gives {a.dtype}{list(a.shape)}"
        if jnp.issubdtype(a.dtype, jnp.inexact):
            wide = np.complex128 if jnp.issubdtype(a.dtype, jnp.complexfloating) else np.float64
            rt, at = _tolerance(a.dtype, rtol, atol)
            close = np.isclose(a.astype(wide), b.astype(wide), rtol=rt, atol=at, equal_nan=True)
        else:
            close = a == b
        if not np.all(close):
            idx = tuple(int(x) for x in np.argwhere(~close)[0])
            return (f"output {i} differs at index {list(idx)}: artifact {b[idx]!r}, native {a[idx]!r} "
                    f"({int(np.size(close) - np.count_nonzero(close))} of {np.size(close)} elements differ)")
    return None


def _pack(arrays: Sequence[np.ndarray], f: Any) -> list[dict[str, Any]]:
    leaves = []
    for a in arrays:
        a = np.ascontiguousarray(a)
        data = a.tobytes()
        leaves.append({"dtype": a.dtype.name, "shape": list(a.shape), "offset": f.tell(), "nbytes": len(data)})
        f.write(data)
    return leaves


def _unpack(blob: bytes, leaves: Sequence[dict[str, Any]]) -> list[np.ndarray]:
    return [
        np.frombuffer(blob[x["offset"]: x["offset"] + x["nbytes"]], dtype=jnp.dtype(x["dtype"])).reshape(x["shape"])
        for x in leaves
    ]


# -- the fresh process ------------------------------------------------------------------------------------
def run_fresh_process(artifact: bytes, samples: Sequence[Sequence[np.ndarray]], reject: Sequence[Sequence[np.ndarray]],
                      say: Progress, timeout: float = 900.0) -> tuple[dict[str, Any], list[list[np.ndarray] | None]]:
    """Deserialize, compile and run ``artifact`` in a new interpreter that never imports smtdims.

    The worker script is copied into a private directory and run from there, so its
    ``sys.path`` holds nothing of this project; it inherits the environment (JAX_PLATFORMS...).
    """
    with tempfile.TemporaryDirectory(prefix="smtdims-verify-") as d:
        job: dict[str, Any] = {"samples": [], "reject": []}
        with open(os.path.join(d, "inputs.bin"), "wb") as f:
            for i, leaves in enumerate(samples, 1):
                job["samples"].append({"index": i, "inputs": _pack(leaves, f)})
            job["reject"] = [{"inputs": _pack(leaves, f)} for leaves in reject]
        Path(d, "artifact.bin").write_bytes(artifact)
        Path(d, "job.json").write_text(json.dumps(job))
        shutil.copy(_WORKER, os.path.join(d, "worker.py"))
        say(f"fresh process: starting {Path(sys.executable).name} (deserialize, compile, run without smtdims)")
        with open(os.path.join(d, "stderr.txt"), "w+") as err:
            env = dict(os.environ)
            if jax.config.jax_enable_x64:  # the artifact's dtypes need the same mode there
                env["JAX_ENABLE_X64"] = "1"
            proc = subprocess.Popen([sys.executable, "worker.py", d], cwd=d, stdout=subprocess.PIPE, stderr=err,
                                    stdin=subprocess.DEVNULL, text=True, env=env)
            timer = threading.Timer(timeout, proc.kill)
            timer.start()
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue
                    s = ev.get("sample")
                    total = len(samples)
                    if s == "outside":
                        say(f"outside-spec shape {ev.get('phase')}: calling, expecting a shape error")
                    else:
                        say(f"sample {s}/{total}: {'compiling' if ev.get('phase') == 'compile' else 'running'}")
                rc = proc.wait()
            finally:
                timer.cancel()
            err.seek(0)
            stderr = err.read()
        result_path = Path(d, "result.json")
        if not result_path.exists():
            why = "timed out" if rc < 0 else f"exited with {rc}"
            raise RuntimeError(f"the verification process {why} before writing results:\n{stderr[-4000:]}")
        result = json.loads(result_path.read_text())
        blob = Path(d, "outputs.bin").read_bytes()
        outs = [None if s["outputs"] is None else [x.copy() for x in _unpack(blob, s["outputs"])]
                for s in result["samples"]]
        return result, outs


# -- the pipeline ------------------------------------------------------------------------------------------
def _rejection(shapes: tuple[tuple[int, ...], ...], why: str, r: dict[str, Any] | None) -> RejectionCheck:
    """Classify what the fresh process did with an outside-spec shape."""
    if r is None:
        return RejectionCheck(shapes, why, SKIP, "not run")
    errors = r.get("errors") or []
    text = "\n".join(errors)
    if not r["rejected"]:
        return RejectionCheck(shapes, why, FAIL, "accepted", "the artifact compiled and ran a shape outside its specification")
    for p in _SHAPE_ERRORS:  # the assertion's own message, wherever in the cause chain it surfaced
        at = text.find(p)
        if at >= 0:
            return RejectionCheck(shapes, why, PASS, "shape assertion", text[at:])
    if r["stage"] in ("lower", "compile") and "refin" in text:
        cause = errors[-1]
        detail = cause[cause.find("error: ") + 7:] if "error: " in cause else cause
        return RejectionCheck(shapes, why, PASS, "shape refinement", detail)
    return RejectionCheck(shapes, why, FAIL, "other error", text)


def _progress_fn(progress: bool | Progress | None) -> Progress:
    if callable(progress):
        return progress
    if progress:
        return lambda msg: print(f"smtdims: {msg}", file=sys.stderr, flush=True)
    return lambda msg: None


def _normalise_platforms(platforms: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if platforms is None:
        return None
    items = platforms.split(",") if isinstance(platforms, str) else list(platforms)
    out = tuple(p.strip().lower() for p in items if p.strip())
    return out or None


def _local_platform() -> str:
    return export.default_export_platform()  # "cpu", "cuda", "rocm", "tpu": the names export uses


def _fn_name(fn: Callable[..., Any]) -> str:
    mod = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{mod}:{name}" if mod else name


_OWN_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                  for m in (sys.modules["smtdims"], sys.modules[__name__.rpartition(".")[0]]))


def _raised_by_smtdims(err: BaseException) -> bool:
    """Whether ``err`` is a bug in smtdims' code (raised there, not one of JAX's or smtdims' documented errors)."""
    if isinstance(err, (adapter.AnyInconclusive, SmtdimsError)):
        return False
    tb = err.__traceback__
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last is not None and os.path.abspath(last.tb_frame.f_code.co_filename).startswith(_OWN_DIRS)


def _needs_x64(leaves: Sequence[Any]) -> bool:
    """Whether some input dtype (float64, int64, ...) exists only with ``jax_enable_x64``."""
    return any(jax.dtypes.canonicalize_dtype(x.dtype) != np.dtype(x.dtype) for x in leaves
               if not jnp.issubdtype(x.dtype, jax.dtypes.extended))


def _aval_text(x: Any) -> str:
    return f"{np.dtype(x.dtype).name}[{','.join(str(d) for d in x.shape)}]"  # as JAX prints in_avals


def _x64_on():
    """``jax_enable_x64`` for a block: ``jax.enable_x64(True)`` (newer JAX) or ``jax.experimental.enable_x64()``."""
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64

    return enable_x64()


def _solver_budget(budget: int | None):
    return options.scoped(budget=budget)


def export_and_verify(
    fn: Callable[..., Any],
    *arg_specs: Any,
    constraints: Sequence[str] = (),
    platforms: str | Sequence[str] | None = None,
    samples: int = 6,
    out: str | os.PathLike[str] | None = None,
    seed: int = 0,
    progress: bool | Progress | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    timeout: float = 900.0,
    budget: int | None = None,
) -> VerificationReport:
    """Export ``jax.jit(fn)`` with smtdims, then verify the artifact on solver-chosen shapes.

    ``arg_specs``: one per positional argument of ``fn``: ``"int32[b, 4]"``,
    ``("b, 4", "int32")``, a bare ``"b, 4"`` (float32), a ``jax.ShapeDtypeStruct`` (e.g. from
    ``jax.export.symbolic_args_specs``), an array (static shape), or a pytree of these.
    String specs share one scope with ``constraints``. ``platforms``: lowering targets
    (default: the local one); samples run on the local device when it is among them.
    64-bit dtypes (``float64``, ``int64``, ...) turn ``jax_enable_x64`` on for the export,
    the native runs and the fresh process, and back off afterwards. ``budget``: Z3 rlimit
    for the export and the sample choice (default: smtdims' configured budget).

    Bad arguments (specs, dtypes, ``samples``) raise ``TypeError``/``ValueError``. An
    export that JAX refuses (e.g. an inconclusive comparison) is a failed check: the
    report has ``ok`` False, the ``export`` check failed, and ``export_error`` carries JAX's
    message, smtdims' witnesses and a fix (re-exported to verify it). Everything after
    the export is reported too.
    """
    if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
        raise ValueError(f"samples must be a positive int, got {samples!r}")
    if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0):
        raise ValueError(f"budget must be a positive int (a Z3 rlimit), got {budget!r}")
    specs, scope, specialised = build_specs(arg_specs, constraints)
    x64 = not jax.config.jax_enable_x64 and _needs_x64(jax.tree_util.tree_leaves(specs))
    with _x64_on() if x64 else contextlib.nullcontext(), _solver_budget(budget):
        return _verify(fn, specs, scope, specialised, _normalise_platforms(platforms), samples, out, seed,
                       _progress_fn(progress), rtol, atol, timeout, budget, x64)


def _verify(fn: Callable[..., Any], specs: tuple[Any, ...], scope: Any, specialised: list[str],
            plats: tuple[str, ...] | None, samples: int, out: Any, seed: int, say: Progress,
            rtol: float | None, atol: float | None, timeout: float, budget: int | None, x64: bool) -> VerificationReport:
    name = _fn_name(fn)
    spec_leaves, in_tree = jax.tree_util.tree_flatten(specs)
    say(f"exporting {name} for {', '.join(plats) if plats else 'the default platform'} with smtdims installed"
        + (" (jax_enable_x64 on for the 64-bit inputs)" if x64 else ""))
    t0 = time.perf_counter()
    try:
        with enabled(budget=budget):
            exp = export.export(jax.jit(fn), platforms=plats)(*specs)
    except Exception as err:  # JAX refused the function: a failed check, reported like the others
        if _raised_by_smtdims(err):
            raise  # a bug of smtdims' own (not JAX refusing the function): not the user's to fix
        say(f"export failed: {type(err).__name__}; looking for a fix")
        failure = describe_export_error(err, fn, plats, spec_leaves, in_tree, scope, budget)
        skipped = "not run: the export failed"
        checks = [Check("export", FAIL, f"{failure.type}: {_first_line(failure.message, 300)}")]
        checks += [Check(c, SKIP, skipped) for c in
                   ("symbolic dims kept", "serialize", "fresh process", "samples", "outside spec rejected")]
        return VerificationReport(
            function=name, platforms=plats or (_local_platform(),),
            constraints=tuple(c.text for c in adapter.scope_constraints(scope)),
            in_avals=tuple(_aval_text(x) for x in spec_leaves), out_avals=(), checks=tuple(checks),
            samples=(), rejections=(), export_error=failure, exception=err,
        )
    export_s = time.perf_counter() - t0
    checks = [Check("export", PASS, f"{export_s:.2f}s for {', '.join(exp.platforms)}"
                    + ("; jax_enable_x64 on for the 64-bit inputs" if x64 else ""))]
    mismatched = [f"input {i}: exported as {a}, specified as {s.dtype.name}{list(s.shape)}"
                  for i, (a, s) in enumerate(zip(exp.in_avals, spec_leaves, strict=True))
                  if str(a.shape) != str(tuple(s.shape)) or np.dtype(a.dtype) != np.dtype(s.dtype)]
    bad = specialised + mismatched
    checks.append(Check("symbolic dims kept", FAIL if bad else PASS, "; ".join(bad)))

    artifact = bytes(exp.serialize())
    if out is not None:
        Path(out).write_bytes(artifact)
    checks.append(Check("serialize", PASS, f"{len(artifact)} bytes" + (f" -> {out}" if out else "")))

    session = adapter.session_for_scope(scope)
    dims = [tuple(adapter.to_ir(d) for d in s.shape) for s in spec_leaves]
    out_dims = [tuple(adapter.to_ir(d) for d in a.shape) for a in exp.out_avals]
    say(f"choosing {samples} sample shapes with the solver")
    chooser = SampleChooser(session, dims, [e for leaf in out_dims for e in leaf])
    chosen = chooser.choose(samples)
    outside = chooser.outside([env for env, _ in chosen])

    inputs, natives, native_s = [], [], []
    for i, (env, _) in enumerate(chosen, 1):
        rng = np.random.default_rng(seed + i)
        leaves = [random_input(rng, shape, np.dtype(s.dtype)) for shape, s in zip(chooser.shapes(env), spec_leaves, strict=True)]
        inputs.append(leaves)
        say(f"sample {i}/{len(chosen)}: native {name.split(':')[-1]} at {format_valuation(env)}")
        t0 = time.perf_counter()
        try:
            res = fn(*jax.tree_util.tree_unflatten(in_tree, leaves))
            natives.append([np.asarray(x) for x in jax.tree_util.tree_leaves(jax.block_until_ready(res))])
        except Exception as err:  # the tutorial's guarantee presumes native success
            natives.append(f"the native function raised {type(err).__name__}: {_first_line(str(err))}")
        native_s.append(time.perf_counter() - t0)
    rng = np.random.default_rng(seed)
    reject_inputs = [[random_input(rng, shape, np.dtype(s.dtype)) for shape, s in zip(shapes, spec_leaves, strict=True)]
                     for shapes, _ in outside]

    local = _local_platform()
    worker: dict[str, Any] = {}
    not_run = ""
    outs: list[list[np.ndarray] | None] = [None] * len(chosen)
    if local in exp.platforms:
        try:
            worker, outs = run_fresh_process(artifact, inputs, reject_inputs, say, timeout)
        except RuntimeError as err:  # crashed or timed out: a failed check, with its stderr
            worker = {"fatal": str(err)}
        stray = worker.get("smtdims_loaded")
        if worker.get("fatal"):
            lines = [x for x in worker["fatal"].strip().splitlines() if x.strip()]
            detail = lines[0] + (f" ... {lines[-1].strip()}" if len(lines) > 1 else "")
            checks.append(Check("fresh process", FAIL, detail))
        elif stray:
            checks.append(Check("fresh process", FAIL, f"smtdims was imported there: {stray}"))
        else:
            checks.append(Check("fresh process", PASS, f"stock jax {worker['jax_version']}, smtdims not imported"))
    else:
        not_run = f"not run: the artifact has no code for the local platform {local!r}; run on {'/'.join(exp.platforms)}"
        checks.append(Check("fresh process", SKIP, not_run))

    results = []
    wsamples = {s["index"]: s for s in worker.get("samples", [])}
    for i, (env, why) in enumerate(chosen, 1):
        w = wsamples.get(i, {})
        native = natives[i - 1]
        if not worker:
            status, detail = SKIP, not_run
        elif w.get("error"):
            status, detail = FAIL, f"the artifact raised {_first_line(w['error'], 300)}"
        elif isinstance(native, str):
            status, detail = FAIL, native
        elif outs[i - 1] is None:
            status, detail = FAIL, "no result from the fresh process"
        else:
            expected = [tuple(e.evaluate(env) for e in leaf) for leaf in out_dims]
            diff = compare_outputs(native, outs[i - 1], expected, rtol, atol)
            status, detail = (FAIL, diff) if diff else (PASS, "")
        results.append(SampleResult(
            i, {v: env[v] for v in chooser.shape_vars}, chooser.shapes(env), tuple(why), status, detail,
            native_s[i - 1], w.get("compile_s"), w.get("run_s"),
        ))
    checks.append(Check("samples", PASS if results and all(r.status == PASS for r in results) else FAIL,
                        f"{sum(r.status == PASS for r in results)}/{len(results)} match the native function"))

    done = worker.get("reject") or []
    rejections = tuple(_rejection(shapes, why, done[k] if k < len(done) else None) for k, (shapes, why) in enumerate(outside))
    if rejections:
        bad = [r for r in rejections if r.status != PASS]
        checks.append(Check("outside spec rejected", (bad[0].status if bad else PASS),
                            f"{len(rejections) - len(bad)}/{len(rejections)} rejected"))
    else:
        checks.append(Check("outside spec rejected", SKIP, "no shape outside the specification was found"))

    return VerificationReport(
        function=name,
        platforms=tuple(exp.platforms),
        constraints=tuple(c.text for c in session.constraints),
        in_avals=tuple(str(a) for a in exp.in_avals),
        out_avals=tuple(str(a) for a in exp.out_avals),
        checks=tuple(checks),
        samples=tuple(results),
        rejections=rejections,
        artifact_bytes=len(artifact),
        artifact_path=str(out) if out is not None else None,
        device=worker.get("device", ""),
        worker_jax=worker.get("jax_version", ""),
        exported=exp,
    )


# -- a failed export -----------------------------------------------------------------------------------
_UNDETERMINED_RE = re.compile(r"undetermined: (.*?) makes (.*) false; (.*?) makes it true\.")
_VALUATION_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*) = (-?\d+)")
_REMAINDER_RE = re.compile(r"The remainder (.+?) should be 0")


def _valuation(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in _VALUATION_RE.findall(text)}


def describe_export_error(err: BaseException, fn: Callable[..., Any], plats: tuple[str, ...] | None,
                          spec_leaves: Sequence[Any], in_tree: Any, scope: Any,
                          budget: int | None = None) -> ExportFailure:
    """JAX's message, smtdims' witness lines, and a fix that was re-exported to check it.

    An inconclusive comparison raised with smtdims installed already says (in its
    ``str()``) where both answers occur and the first fix smtdims verified for that
    comparison; a reshape's "The remainder mod(b, -2) should be 0" gets the spec rewrite
    (write ``2*b`` for ``b``) that makes the size divisible for every valuation.
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
    session = adapter.session_for_scope(scope)
    constraint = variable = new = None
    m = re.match(r"add the constraint '(.+?)'", fix)
    if m:
        kind, constraint = "constraint", m.group(1)
    m = re.match(r"write '(.+?)' in the shape specification in place of '(\w+)'", fix)
    if m:
        kind, new, variable = "spec", m.group(1), m.group(2)
    rem = _REMAINDER_RE.search(message)
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
                with enabled(budget=budget):
                    export.export(jax.jit(fn), platforms=plats)(*jax.tree_util.tree_unflatten(in_tree, leaves))
                verified = True
            except Exception as e:  # noqa: BLE001 - any refusal: the fix is not enough
                if _raised_by_smtdims(e):
                    raise
                verified, detail = False, f"{type(e).__name__}: {_first_line(str(e), 200)}"
        elif not detail:
            detail = "the constraints could not be rewritten mechanically"
    return ExportFailure(
        type=type(err).__name__ if not isinstance(err, adapter.AnyInconclusive)
        else "InconclusiveDimensionOperation",
        message=message, smtdims=ours, witnesses=witnesses, valuations=valuations, location=location, fix=fix,
        fix_kind=kind, fix_verified=verified, fix_detail=detail, fixed_specs=fixed_specs,
        fixed_constraints=fixed_constraints,
    )


def _remainder_fix(session: Session, remainder: str) -> Fix | None:
    """``mod(E, k)`` must be 0: the first verified spec rewrite (``v -> m*v``) that makes it so."""
    try:
        e = parse_expr(remainder)
    except SmtdimsError:
        return None
    atoms = [a for a in e.atoms() if isinstance(a, Op) and a.op == MOD]
    if len(atoms) != 1 or e != Expr.atom(atoms[0]):
        return None
    k = atoms[0].rhs.as_constant()
    if k is None or abs(k) < 2:
        return None
    target = atoms[0].lhs.mod(abs(k))  # mod(E, -k) == 0 exactly when mod(E, k) == 0
    try:
        fixes = suggest_fixes(session, target, "==", Expr.const(0))
    except SmtdimsError:
        return None
    return next((f for f in fixes if f.kind == "spec"), None)


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
        dims = [str(adapter.to_ir(d).substitute(env)) if _is_sym(d) else str(int(d)) for d in x.shape]
        shape = export.symbolic_shape(", ".join(dims), scope=scope) if dims else ()
        out.append(jax.ShapeDtypeStruct(shape, x.dtype))
    return out, tuple(texts)


__all__ = [
    "Check", "ExportFailure", "RejectionCheck", "SampleChooser", "SampleResult", "VerificationReport", "build_specs",
    "compare_outputs", "describe_export_error", "export_and_verify", "parse_arg_spec", "random_input", "run_fresh_process",
]

