"""From example inputs to the most general verified export: ``dims="auto"``.

Every dimension of every example input starts as a variable of its own (``a, b, c, ...`` in the order
of the inputs), except sizes 0 and 1, which stay constants (a size-1 dimension broadcasts, and a
symbolic dimension never does: ``torch.export``'s AUTO specialises them too) and those the user pins
with a partial specification (``dims=("b, _", None)``: ``_`` is inferred, a name or a number is kept).
The export then runs through the whole fix (:mod:`.fixes`) with the examples as its examples: every
candidate must admit them, a size the program needs as a number is pinned at the example's value,
the native traces start there, and the verification samples them first. What the loop adds is the
weakest verified family it finds:

- two dimensions that must agree become one variable (a mask's length and the sequence's);
- a bound where a table or a user check bounds a size (``t <= 512``);
- a multiple where a reshape, a patch grid or a kernel's block needs one (``8*k``);
- a size fixed at its example value only where nothing weaker verifies.

:class:`AutoReport` says, per dimension, which of these it is and why (the refusal that forced it and
the line of the user's code it came from), with the specification as strings, the ``jax.export`` code
that reproduces it, and the verification on the device at solver-chosen shapes, the examples included.
"""

from __future__ import annotations

import string
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from smtdims.errors import SmtdimsError
from smtdims.lang.constraints import Constraint, ConstraintSet
from smtdims.lang.expr import Expr
from smtdims.lang.parser import parse_expr
from smtdims.reasoner import session_for

from ..frames import raise_site
from .box import affine_in_one
from .report import VerificationReport, first_line
from .result import FIXED, NARROW, FixResult
from .specs import jax_form, split_dims

FREE, AT_LEAST, AT_MOST, MULTIPLE, EQUAL, FIXED_SIZE, FORMULA = (
    "free", "at least", "at most", "multiple of", "equal to", "fixed", "as")


@dataclass(frozen=True)
class DimRow:
    """One dimension of one input: where it is, its example size, what the family says of it, and why."""

    input: str  # "args[0].shape[1]"
    example: int
    expr: str  # the dimension in the specification: "t", "8*k", "7"
    kinds: tuple[str, ...]  # FREE, or e.g. ("multiple of 8", "at most 512")
    cause: str = ""  # the refusal that forced it and where it arose ("" where nothing did)

    def to_dict(self) -> dict[str, Any]:
        return {"input": self.input, "example": self.example, "expr": self.expr, "kinds": list(self.kinds),
                "cause": self.cause}


@dataclass(frozen=True)
class AutoReport:
    """The most general verified family found from the examples (``dims="auto"``).

    ``specs``: one specification string per input leaf (``"int32[b, 8*k]"``); ``constraints``: the
    family's constraints; ``table``: one :class:`DimRow` per dimension; ``report``: the final
    verification (of the family: export, fresh process on stock JAX, solver-chosen samples, the
    examples among them); ``fix``: the whole fix that found it (None where the all-variables
    specification verified as it was).
    """

    function: str
    examples: tuple[tuple[tuple[int, ...], ...], ...]
    specs: tuple[str, ...]
    constraints: tuple[str, ...]
    table: tuple[DimRow, ...]
    report: VerificationReport = field(repr=False)
    fix: FixResult | None = field(default=None, repr=False)
    seconds: float = 0.0
    status: str = ""  # "verified", or the fix's status where it did not verify
    # the arguments' pytree where an argument is a pytree of several leaves (a dict of parameters); None
    # where every argument is one array
    tree: Any = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status in ("verified", FIXED, NARROW) and (self.report.ok or (self.fix is not None and self.fix.ok))

    @property
    def stock(self) -> bool | None:
        """Stock JAX exports the family too (None: not tried); :meth:`code` says when smtdims must be installed."""
        return self.fix.stock if self.fix is not None else True

    def code(self) -> str:
        """``jax.export`` code for the family: one ``ShapeDtypeStruct`` per leaf, in the arguments' pytree."""
        if self.tree is None and self.fix is not None and self.fix.parts:
            return self.fix.code()
        name = self.function.split(":")[-1].split(".")[-1]
        name = name if name.isidentifier() else "f"
        lines = ["import jax", "import jax.numpy as jnp", "from jax import export"]
        if self.stock is False:
            lines += ["import smtdims", "smtdims.install()  # stock JAX does not export this family: smtdims proves it"]
        lines.append(f"scope = export.SymbolicScope({tuple(jax_form(c) for c in self.constraints)!r})")
        for i, s in enumerate(self.specs):
            dt, dims = s.split("[", 1)
            lines.append(f"x{i} = jax.ShapeDtypeStruct(export.symbolic_shape({dims.rstrip(']')!r}, scope=scope), "
                         f"jnp.{dt})")
        lines.append(f"exp = export.export(jax.jit({name}))({', '.join(self._arguments())})")
        return "\n".join(lines)

    def _arguments(self) -> list[str]:
        """The call's arguments as Python text over the leaves ``x0, x1, ...``: ``{'w': x0, 'b': x1}`` for a
        dict of parameters (a custom pytree node is rebuilt with ``jax.tree_util``)."""
        names = [f"x{i}" for i in range(len(self.specs))]
        if self.tree is None:
            return names

        class Name(str):
            def __repr__(self) -> str:
                return str(self)

        args = jax.tree_util.tree_unflatten(self.tree, [Name(n) for n in names])
        return [_literal(a) for a in args]

    def command(self, target: str = "MODULE:FUNCTION") -> str:
        """The ``smtdims export`` command that exports the family as a specification: one ``--spec`` per
        argument, so only where every argument is one array (else a comment that says to use :meth:`code`)."""
        if self.tree is not None:
            return ("# an argument is a pytree of arrays (a dict of parameters): the command line takes one array "
                    "per --spec; export it from Python with the code above (auto.code())")
        return " ".join(["smtdims export", target, *(f'--spec "{sp}"' for sp in self.specs),
                         *(f'-c "{c}"' for c in self.constraints)])

    def lines(self) -> list[str]:
        short = self.function.split(":")[-1]
        head = {True: "VERIFIED", False: "NOT VERIFIED"}[self.ok]
        out = [f"auto export of {short} from {len(self.examples)} example(s): {head}"
               + (f" ({self.status})" if self.status not in ("verified", FIXED) else "")
               + f", {self.seconds:.1f}s",
               f"  specs       {'; '.join(self.specs)}",
               f"  constraints {', '.join(self.constraints) or 'none'}"]
        width = max((len(r.input) for r in self.table), default=5)
        out.append(f"  {'input'.ljust(width)}  example  dimension  family")
        for r in self.table:
            out.append(f"  {r.input.ljust(width)}  {str(r.example).ljust(7)}  {r.expr.ljust(9)}  {', '.join(r.kinds)}")
            if r.cause:
                out.append(f"  {' ' * width}  {' ' * 7}  {' ' * 9}    because {r.cause}")
        if self.fix is not None and self.fix.box is not None:
            out.append("  " + self.fix.box.sentence(short))
        if not self.ok:
            out.append("  " + self.report.verdict())
            err = self.report.export_error  # the export's own error says what to change: its first line
            if err is not None and err.message.strip():
                where = err.location or _raise_site(self.report.exception)
                out.append(f"  {err.type}: {err.message.strip().splitlines()[0]}" + (f"\n    at {where}" if where else ""))
        if self.stock is False:
            out.append("  (stock JAX does not export this family: the code installs smtdims first)")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "ok": self.ok, "status": self.status,
                "examples": [list(map(list, e)) for e in self.examples], "specs": list(self.specs),
                "constraints": list(self.constraints), "table": [r.to_dict() for r in self.table],
                "code": self.code(), "seconds": round(self.seconds, 3),
                "fix": self.fix.to_dict() if self.fix is not None else None, "report": self.report.to_dict()}

    def plot(self, x: str | None = None, y: str | None = None) -> Any:
        """The family drawn over two sizes with the example marked (a matplotlib ``Figure``):
        :func:`.picture.plot_auto`."""
        from .picture import plot_auto
        return plot_auto(self, x=x, y=y)

    def _repr_html_(self) -> str:
        """In a notebook: the picture above the report's text (the text alone where it cannot be drawn)."""
        from .picture import report_html
        return report_html(str(self), self.plot)


def _names(taken: set[str]) -> Callable[[], str]:
    """Fresh variable names in order: ``a, b, ..., z``, then ``a1, b1, ...``, skipping ``taken``."""
    state = {"i": 0}

    def fresh() -> str:
        while True:
            i = state["i"]
            state["i"] += 1
            name = string.ascii_lowercase[i % 26] + (str(i // 26) if i >= 26 else "")
            if name not in taken:
                taken.add(name)
                return name
    return fresh


def auto_specs(leaves: Sequence[Any], pins: Sequence[str | None]) -> tuple[list[str], list[tuple[int, ...]]]:
    """One specification string per example leaf (every dimension a variable of its own, sizes 0 and 1
    kept, the pinned ones as given) and the examples' shapes."""
    taken: set[str] = set()
    pinned: list[list[str] | None] = []
    for leaf, pin in zip(leaves, pins, strict=True):
        shape = tuple(np.shape(leaf))
        if pin is None:
            pinned.append(None)
            continue
        texts = split_dims(pin)
        if texts == [""] and not shape:
            texts = []
        if len(texts) != len(shape):
            raise ValueError(f"dims {pin!r} has {len(texts)} dimension(s); the example has shape {shape}: give one "
                             "per dimension, '_' for those smtdims infers")
        for t in texts:
            if t != "_":
                try:
                    taken |= parse_expr(t).variables()
                except SmtdimsError as err:
                    raise ValueError(f"dims {pin!r}: {t!r} is not a dimension ({err})") from None
        pinned.append(texts)
    fresh = _names(taken)
    specs, shapes = [], []
    for leaf, texts in zip(leaves, pinned, strict=True):
        shape = tuple(int(n) for n in np.shape(leaf))
        dims = []
        for j, n in enumerate(shape):
            t = texts[j] if texts is not None else "_"
            dims.append(t if t != "_" else (str(n) if n <= 1 else fresh()))
        specs.append(f"{np.dtype(_dtype(leaf)).name}[{', '.join(dims)}]")
        shapes.append(shape)
    return specs, shapes


def _dtype(leaf: Any) -> Any:
    """An array's dtype; a Python number's as JAX takes it (``0.5``: float32 unless 64-bit mode is on)."""
    dt = getattr(leaf, "dtype", None)
    return dt if dt is not None else jax.numpy.asarray(leaf).dtype


def _pins(dims: Any, leaves: Sequence[Any], tree: Any) -> list[str | None]:
    """``dims`` ("auto", or a pytree prefix of partial specs per argument) as one pin per leaf."""
    if dims == "auto":
        return [None] * len(leaves)
    if not isinstance(dims, (list, tuple)):
        raise TypeError(f'dims must be "auto" or a sequence with one partial spec (or None) per argument, got {dims!r}')
    args = jax.tree_util.tree_unflatten(tree, list(range(len(leaves))))
    if len(dims) != len(args):
        raise ValueError(f"dims has {len(dims)} entries for {len(args)} argument(s): one per argument (None: infer all)")
    pins: list[str | None] = [None] * len(leaves)
    for d, arg in zip(dims, args, strict=True):
        idx = jax.tree_util.tree_leaves(arg)
        if d is None or d == "auto":
            continue
        if not isinstance(d, str) or len(idx) != 1:
            raise ValueError(f"dims entry {d!r}: a partial spec string such as 'b, _' for an argument that is one array")
        pins[idx[0]] = d.split("[", 1)[1].rstrip("]") if "[" in d else d
    return pins


def table(leaf_paths: Sequence[str], shapes: Sequence[tuple[int, ...]], fix: FixResult | None,
          specs: Sequence[str], constraints: Sequence[str], budget: int | None) -> tuple[DimRow, ...]:
    """One row per dimension: what the family says of it (:data:`FREE`, a multiple, bounds, an equality
    with an earlier dimension, a fixed size) and the round of the fix that made it so."""
    final = [split_dims(s.split("[", 1)[1].rstrip("]")) if s.split("[", 1)[1].rstrip("]") else [] for s in specs]
    cs = ConstraintSet.of(constraints)
    try:
        session = session_for(cs, budget, trial=True)
    except SmtdimsError:
        session = None
    seen: dict[str, str] = {}
    rows = []
    for path, shape, dims in zip(leaf_paths, shapes, final, strict=True):
        for j, (n, text) in enumerate(zip(shape, dims, strict=True)):
            where = f"{path}.shape[{j}]"
            e = parse_expr(text)
            kinds: list[str] = []
            k = e.as_constant()
            if k is not None:
                kinds.append(f"{FIXED_SIZE} at {k}")
            else:
                aff = affine_in_one(e)
                if aff is not None and aff[1] > 1 and aff[2] == 0:
                    kinds.append(f"{MULTIPLE} {aff[1]}")
                elif aff is None or aff[1] != 1 or aff[2] != 0:
                    kinds.append(f"{FORMULA} {text}")
                if text in seen:
                    kinds.append(f"{EQUAL} {seen[text]}")
                seen.setdefault(text, where)
                if session is not None:
                    try:
                        b = session.bounds(e)
                        lo_floor = 1 if aff is None else aff[1] + aff[2]
                        if b.lo > max(lo_floor, 1):
                            kinds.append(f"{AT_LEAST} {int(b.lo)}")
                        if b.hi != float("inf"):
                            kinds.append(f"{AT_MOST} {int(b.hi)}")
                    except SmtdimsError:
                        pass
            rows.append(DimRow(where, n, text, tuple(kinds) or (FREE,), _cause(fix, e, k, n)))
    return tuple(rows)


def _cause(fix: FixResult | None, e: Expr, k: int | None, example: int) -> str:
    """The round of the fix whose part names this dimension's variable (or pinned it), with where it arose."""
    if k is not None:
        if example <= 1 and (fix is None or not any(p.text == str(k) for p in fix.parts)):
            return f"size {example} in the example: kept (a size-1 dimension broadcasts; a symbolic one never does)"
    names = e.variables()
    if fix is None:
        return ""
    for r in fix.rounds:
        for p in fix.parts:
            if str(p) not in r.chosen:
                continue
            mentioned = (p.variable in names or bool(names & _vars(p.text, expr=True))) if p.kind == "spec" \
                else bool(names & _vars(p.text))
            if mentioned or (k is not None and p.kind == "spec" and p.text == str(k)):
                return f"{first_line(r.error, 160)}" + (f" (at {r.location})" if r.location else "")
    return ""


def _vars(text: str, expr: bool = False) -> set[str]:
    """The variables of a constraint's text (``expr``: of an expression's)."""
    try:
        return set(parse_expr(text).variables() if expr else Constraint.parse(text).diff.variables())
    except SmtdimsError:
        return set()


def _raise_site(err: BaseException | None) -> str:
    """``file:line in fn`` of the innermost frame of the user's code that raised ``err``, or ``""``."""
    try:
        return raise_site(err) if err is not None else ""
    except Exception:  # noqa: BLE001 - a courtesy line: never the reason a report is not printed
        return ""


def _literal(x: Any) -> str:
    """A pytree of leaf names as Python text (dicts, lists, tuples and None as literals)."""
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {_literal(v)}" for k, v in x.items()) + "}"
    if isinstance(x, list):
        return "[" + ", ".join(_literal(v) for v in x) + "]"
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return "(" + ", ".join(_literal(v) for v in x) + ("," if len(x) == 1 else "") + ")"
    if x is None or isinstance(x, str):
        return repr(x)
    leaves, tree = jax.tree_util.tree_flatten(x)  # a namedtuple, a dataclass node: rebuilt from its leaves
    return f"jax.tree_util.tree_unflatten({tree!r}, [{', '.join(map(str, leaves))}])"


def leaf_paths(examples: Sequence[Any]) -> list[str]:
    """``args[0]``, ``args[1]['mask']``, ...: where each example leaf is."""
    paths, _ = jax.tree_util.tree_flatten_with_path(tuple(examples))
    return [f"args{jax.tree_util.keystr(p)}" for p, _ in paths]


def auto_export(fn: Callable[..., Any], examples: Sequence[Any], dims: Any, run: Callable[..., VerificationReport],
                budget: int | None, name: str) -> AutoReport:
    """See the module docstring; ``run(specs, example_shapes)`` is the pipeline with the whole fix on."""
    t0 = time.perf_counter()
    leaves, tree = jax.tree_util.tree_flatten(tuple(examples))
    if not leaves:
        raise ValueError("dims='auto' needs example inputs (arrays, or jax.ShapeDtypeStruct with concrete shapes)")
    for path, x in zip(leaf_paths(examples), leaves, strict=True):
        if isinstance(x, (str, bytes)):
            raise ValueError(f"dims='auto': the example {path} is the string {x!r}; the examples are the function's "
                             "array arguments (arrays, numbers, or jax.ShapeDtypeStruct with concrete shapes)")
        if any(not isinstance(n, (int, np.integer)) for n in np.shape(x)):
            raise ValueError(f"dims='auto': an example has the symbolic shape {np.shape(x)}; give concrete "
                             "example inputs (arrays or jax.ShapeDtypeStruct((2, 7), jnp.int32))")
    specs, shapes = auto_specs(leaves, _pins(dims, leaves, tree))
    spec_tree = jax.tree_util.tree_unflatten(tree, specs)
    report = run(tuple(spec_tree), (tuple(shapes),))
    fix = report.fix
    if fix is not None and fix.parts and fix.report is not None:
        final, constraints, status = fix.in_avals, fix.constraints, fix.status
        verified_report = fix.report
    else:
        final, constraints = tuple(specs), tuple(report.constraints)
        status = "verified" if report.ok else (fix.status if fix is not None else "failed")
        verified_report = report
    rows = table(leaf_paths(examples), shapes, fix if fix is not None and fix.parts else None, final, constraints, budget)
    nested = tree.num_leaves != len(examples)  # an argument of several leaves (or none): its pytree is kept
    return AutoReport(function=name, examples=(tuple(shapes),), specs=tuple(final), constraints=tuple(constraints),
                      table=rows, report=verified_report, fix=fix if fix is not None and fix.parts else None,
                      seconds=time.perf_counter() - t0, status=status, tree=tree if nested else None)


__all__ = ["AutoReport", "DimRow", "auto_export", "auto_specs"]
