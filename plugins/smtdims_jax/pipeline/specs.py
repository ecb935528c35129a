"""Argument specifications: ``"int32[b, 4]"``, ``("b, 4", "int32")``, ShapeDtypeStructs -> one symbolic scope."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

from smtdims.errors import SmtdimsError
from smtdims.lang.constraints import Constraint
from smtdims.lang.expr import Expr, Monomial, Op
from smtdims.lang.parser import parse_expr

SPEC_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\[(.*)\]\s*$", re.S)


def as_dtype(x: Any) -> np.dtype:
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
        return not SPEC_RE.match(second)  # ("int32[a]", "int32[b]") is a pytree of two specs
    if isinstance(second, (list, tuple, dict, jax.ShapeDtypeStruct)):
        return False
    return isinstance(second, (type, np.dtype)) or not hasattr(second, "shape")  # arrays are pytree leaves


def check_brackets(text: str, spec: Any) -> None:
    """A spec with a bracket that is not ``DTYPE[DIMENSIONS]`` (``"float32[b"``): said so here; JAX's parser
    would report a syntax error in "dimension 0" of a remainder."""
    if ("[" in text or "]" in text) and not SPEC_RE.match(text):
        raise ValueError(f"argument spec {spec!r}: a bracket is missing or extra; write DTYPE[DIMENSIONS] such as "
                         "'float32[b, 4]', or the dimensions alone ('b, 4')")


def _pair(x: tuple[Any, Any]) -> _StringSpec:
    shape, dtype = x
    check_brackets(shape, x)
    try:
        d = as_dtype(dtype)
    except ValueError as err:
        if isinstance(dtype, str):
            raise ValueError(
                f"argument spec {x!r} is ambiguous: as a (shape, dtype) pair, {err}; as two bare shape specs, "
                f"give them as separate arguments or with their dtypes, e.g. ('float32[{shape}]', 'float32[{dtype}]')"
            ) from None
        raise TypeError(f"argument spec {x!r}: the second element of a (shape, dtype) pair must be a dtype; {err}") from None
    if SPEC_RE.match(shape):
        raise ValueError(f"argument spec {x!r}: {shape!r} already names its dtype; write {shape!r} alone, or "
                         f"({SPEC_RE.match(shape).group(2)!r}, {d.name!r})")
    return _StringSpec(shape, d)


def split_dims(text: str) -> list[str]:
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
            check_brackets(x, x)
            m = SPEC_RE.match(x)
            if m:
                return _StringSpec(m.group(2), as_dtype(m.group(1)))
            if _names_a_dtype(x):  # "double": a value's type, not a dimension named double
                name = jnp.dtype(x.strip()).name
                raise ValueError(f"argument spec {x!r} is a dtype's name, not a shape: write {name}[b, 4] for an "
                                 f"array of that dtype with its dimensions ({name}[] for a scalar), or give an "
                                 "example value with dims='auto'")
            return _StringSpec(x, as_dtype(default_dtype))
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


def _names_a_dtype(text: str) -> bool:
    """A bare spec that is a dtype's name (``"double"``, ``"float32"``, ``"int"``), where a dimension's name
    would be expected: three letters at least, so that a dimension ``b`` (NumPy's code for int8) stays one."""
    word = text.strip()
    if len(word) < 3 or not word.isidentifier():
        return False
    try:
        jnp.dtype(word)  # a full name or NumPy's alias ("double", "single", "int")
    except (TypeError, ValueError):
        return False
    return True


def is_sym(d: Any) -> bool:
    return export.is_symbolic_dim(d)


def check_constraints(constraints: Sequence[str], shapes: Sequence[str]) -> None:
    """smtdims reads the constraints before JAX does, so that a mistake gets a precise error.

    A typo (``"t >== 64"``) raises smtdims' :class:`~smtdims.errors.ParseError` with its
    position (JAX reports a mangled fragment of it); a variable found in no argument shape
    (``bacth`` for ``batch``) raises ``ValueError`` naming it and the closest spelling
    (JAX either accepts it silently or says only that the variable does not appear).
    """
    known: set[str] = set()
    readable = True
    for text in shapes:
        for dim in split_dims(text):
            try:
                known |= parse_expr(dim).variables()
            except SmtdimsError:
                readable = False  # a dimension smtdims cannot read: JAX will judge it, and the names in it
    for c in constraints:
        if not isinstance(c, str):
            raise TypeError(f"constraints must be strings like 'a >= 16', got {type(c).__name__}: {c!r}")
        parsed = Constraint.parse(c)  # ParseError (a ValueError) with the position of the mistake
        unknown = sorted(parsed.diff.variables() - known)
        if unknown and readable and shapes:
            v = unknown[0]
            close = difflib.get_close_matches(v, sorted(known), n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"constraint {c!r} names {v!r}, which appears in no argument shape "
                             f"(the shapes use {', '.join(sorted(known)) or 'no variables'}){hint}")


# -- constraints in JAX's syntax ----------------------------------------------------------------------------
_JAX_LACKS = ("**", "//", "%")  # smtdims' parser takes these (Python's spelling); jax.export's does not


def jax_constraint(text: str, *, x64: bool = False) -> str:
    """``text`` as jax.export's parser reads it, after smtdims' parser has read it.

    JAX's parser has no ``**``, ``//``, ``%`` or grouping parentheses (``2*(n + 1)``), and its
    error names "dimension 0" of a "symbolic shape" for a constraint; smtdims reads them all, so
    such a constraint is written back in JAX's syntax (``n <= 2**40`` -> ``n <= 1099511627776``,
    ``n >= n // 2`` -> ``n >= floordiv(n, 2)``); any other text goes to JAX as written. Every
    constant must fit JAX's dimension values: int32 (int64 with ``jax_enable_x64``, which a 64-bit
    input dtype turns on), else JAX fails late with a bare ``OverflowError``; here it is a
    ``ValueError`` that names the limit and what to write.
    """
    from smtdims.lang.parser import parse_comparison, tokenize

    lhs, op, rhs = parse_comparison(text)  # ParseError (a ValueError) with the position of the mistake
    _check_dim_constants(text, (lhs, rhs, lhs - rhs), x64)
    if op == "==":
        rule = rule_form(lhs, rhs)
        if rule is not None:
            return f"{rule[0]} == {rule[1]}"
    toks = tokenize(text)
    grouping = any(t.text == "(" and (i == 0 or toks[i - 1].kind != "name") for i, t in enumerate(toks) if t.kind == "op")
    if grouping or any(t.kind == "op" and t.text in _JAX_LACKS for t in toks):
        return f"{lhs} {op} {rhs}"
    return text


def jax_form(text: str) -> str:
    """A constraint as JAX's parser takes it (smtdims' own syntax and equalities written back); the
    text as it is where smtdims cannot read it or a constant is out of range (JAX then says why)."""
    try:
        return jax_constraint(text, x64=True)
    except ValueError:
        return text


def rule_form(lhs: Expr, rhs: Expr) -> tuple[Expr, Expr] | None:
    """``lhs == rhs`` as JAX takes an equality, where it does not as written; None where it does.

    JAX makes an equality a rewrite rule: the left side must be one term times a coefficient, and
    every later expression has that term replaced by the right side. A sum on the left is refused
    ("The left-hand-side must be of the form `term * coefficient`"), and a term that occurs on the
    right, even inside a ``max`` or ``floordiv`` (``n == 16*max(0, floordiv(n - 64, 16) + 1) + 48``, an
    overlap-add whose length refers to the input's), is rewritten without end: a RecursionError deep
    in JAX. The same equation with another of its terms on the left (``16*max(...) == n - 48``) has
    exactly the same solutions (both are ``lhs - rhs == 0``), so it is written so where one exists.
    """
    def occurs(mono: Monomial, e: Expr) -> bool:
        inside = e.atoms()
        return any(a in inside for a, _ in mono)

    if len(lhs.terms) == 1 and lhs.terms[0][0] != () and not occurs(lhs.terms[0][0], rhs):
        return None
    diff = lhs - rhs
    # the user's right side first where it is one term (a + b == c is c == a + b), then operations
    order = sorted(((m, k) for m, k in diff.terms if m),
                   key=lambda t: (not (len(rhs.terms) == 1 and t[0] == rhs.terms[0][0]),
                                  not any(isinstance(a, Op) for a, _ in t[0])))
    for mono, k in order:
        term = Expr.from_coefficients({mono: abs(k)})
        rest = diff - Expr.from_coefficients({mono: k})
        if not occurs(mono, rest):
            return term, (-rest if k > 0 else rest)
    return None


def _check_dim_constants(text: str, exprs: Sequence[Any], x64: bool, what: str = "constraint") -> None:
    """Every integer in ``exprs`` (coefficients, constants, divisors) fits JAX's dimension dtype; ``what``
    names where ``text`` came from (``"constraint"``, ``"argument spec"``)."""
    bits = 64 if x64 else 32
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    for c in _constants(exprs):
        if not lo <= c <= hi:
            from smtdims.lang.bigints import readable_int

            more = ("" if x64 else "; with a 64-bit input dtype (float64, int64) or JAX_ENABLE_X64=1 "
                    f"the limit is {2**63 - 1} (2^63 - 1)")
            todo = "a bound within that range or drop the constraint" if what == "constraint" else "a smaller size"
            fails = "raises OverflowError" if what == "constraint" else "fails (a TypeError in MLIR)"
            raise ValueError(
                f"{what} {text!r}: the constant {readable_int(c)} is out of range for JAX's dimension values, "
                f"int{bits} ({lo} to {hi}: JAX {fails} while exporting), so no dimension can exceed "
                f"{hi} here: write {todo}{more}")


def jax_shape(spec: Any, shape: str, *, x64: bool = False) -> str:
    """``shape`` (the dimensions of argument spec ``spec``) as jax.export's parser reads it, each dimension
    read by smtdims' parser first, as :func:`jax_constraint` does for a constraint.

    JAX's parser names "dimension 0" of a mangled remainder and has no ``**``, ``//``, ``%`` or grouping,
    and a constant past the dimension dtype fails deep in the lowering (``TypeError: get(): incompatible
    function arguments``). Here a dimension that neither parser reads is a ``ValueError`` naming the spec,
    the dimension and the position; a constant out of range names the limit; a dimension in Python's
    spelling is written back in JAX's (``2**4`` -> ``16``); any other text goes to JAX as written.
    """
    from smtdims.errors import ParseError
    from smtdims.lang.parser import tokenize

    dims = split_dims(shape)
    out, changed = [], False
    for j, dim in enumerate(dims):
        if dim in ("...", "_"):
            out.append(dim)
            continue
        try:
            e = parse_expr(dim)
        except ParseError as err:
            try:
                export.symbolic_shape(dim)  # JAX reads a few spellings smtdims' parser does not (1_000)
            except Exception:
                where = f" at position {err.position}" if err.position is not None else ""
                raise ValueError(
                    f"argument spec {spec!r}: dimension {j} {dim!r} does not parse: {err.detail}{where}; write "
                    "each dimension as jax.export does, e.g. 'b', '2*b + 1', 'floordiv(b, 2)'") from None
            out.append(dim)
            continue
        _check_dim_constants(str(spec), (e,), x64, what="argument spec")
        toks = tokenize(dim)
        grouping = any(t.text == "(" and (i == 0 or toks[i - 1].kind != "name")
                       for i, t in enumerate(toks) if t.kind == "op")
        if grouping or any(t.kind == "op" and t.text in _JAX_LACKS for t in toks):
            out.append(str(e))
            changed = True
        else:
            out.append(dim)
    return ", ".join(out) if changed else shape


def _constants(exprs: Sequence[Any]) -> list[int]:
    """The integers of ``exprs`` in order (the sides as written first, then their difference)."""
    out: list[int] = []
    todo = list(exprs)
    while todo:
        e = todo.pop(0)
        for mono, coeff in e.terms:
            out.append(coeff)
            for a, _ in mono:
                if hasattr(a, "lhs"):  # floordiv/mod/max/min: their operands too
                    todo += [a.lhs, a.rhs]
    return out


def build_specs(arg_specs: Sequence[Any], constraints: Sequence[str] = ()) -> tuple[tuple[Any, ...], Any, list[str]]:
    """``jax.ShapeDtypeStruct`` pytrees sharing one scope, the scope, and the specialised dims found.

    String specs share one :class:`jax.export.SymbolicScope` built with ``constraints``, or
    the scope of the ``ShapeDtypeStruct``s given (constraints must then come with that scope).
    """
    parsed, scopes, wide, jax_texts = _read_specs(arg_specs, constraints)
    is_leaf = lambda x: isinstance(x, (_StringSpec, jax.ShapeDtypeStruct))
    scope = next(iter(scopes.values())) if scopes else export.SymbolicScope(jax_texts)
    specialised: list[str] = []

    def build(path: Any, x: Any) -> Any:
        if isinstance(x, jax.ShapeDtypeStruct):
            return x
        texts = split_dims(x.shape)
        if any(t in ("...", "_") for t in texts):
            raise ValueError(f"spec {x.shape!r}: '...' and '_' take their sizes from actual arguments; build the "
                             "specs with jax.export.symbolic_args_specs(args, spec) and pass those")
        shape = export.symbolic_shape(jax_shape(_spec_text(x), x.shape, x64=wide), scope=scope)
        for j, (text, d) in enumerate(zip(texts, shape, strict=True) if len(texts) == len(shape) else ()):
            if re.search(r"[A-Za-z_]", text) and not is_sym(d):
                specialised.append(f"args{jax.tree_util.keystr(path)}.shape[{j}] written '{text}' came out as the "
                                   f"constant {d} (an equality constraint fixes it)")
        return jax.ShapeDtypeStruct(shape, x.dtype)

    specs = tuple(jax.tree_util.tree_map_with_path(build, p, is_leaf=is_leaf) for p in parsed)
    return specs, scope, specialised


def check_specs(arg_specs: Sequence[Any], constraints: Sequence[str] = ()) -> None:
    """What :func:`build_specs` refuses in the specs' and constraints' text, without building a scope or
    exporting: the command line checks it before it starts a device or imports the user's module."""
    parsed, _, wide, _ = _read_specs(arg_specs, constraints)
    for p in parsed:
        for x in jax.tree_util.tree_leaves(p, is_leaf=lambda x: isinstance(x, (_StringSpec, jax.ShapeDtypeStruct))):
            if isinstance(x, _StringSpec):
                jax_shape(_spec_text(x), x.shape, x64=wide)


def _read_specs(arg_specs: Sequence[Any], constraints: Sequence[str]) -> tuple[list[Any], dict[int, Any], bool,
                                                                                  tuple[str, ...]]:
    """The specs parsed, the scopes of the ShapeDtypeStructs among them, whether dimensions are int64,
    and the constraints in JAX's syntax (every text read by smtdims' parser)."""
    if isinstance(constraints, str):
        raise TypeError(f"constraints must be a sequence of strings; write constraints=({constraints!r},)")
    parsed = [parse_arg_spec(a) for a in arg_specs]
    is_leaf = lambda x: isinstance(x, (_StringSpec, jax.ShapeDtypeStruct))
    scopes = {id(d.scope): d.scope for p in parsed for x in jax.tree_util.tree_leaves(p, is_leaf=is_leaf)
              if isinstance(x, jax.ShapeDtypeStruct) for d in x.shape if is_sym(d)}
    if len(scopes) > 1:
        raise ValueError("Invalid mixing of symbolic scopes: the ShapeDtypeStructs come from different SymbolicScopes; "
                         "build them with one scope (symbolic_shape(..., scope=...))")
    if scopes and constraints:
        raise ValueError("constraints= cannot be added to the scope of ShapeDtypeStructs that already exist; "
                         "pass them where the scope is made: symbolic_shape(..., constraints=...)")
    leaves = [x for p in parsed for x in jax.tree_util.tree_leaves(p, is_leaf=is_leaf)]
    check_constraints(constraints, [x.shape for x in leaves if isinstance(x, _StringSpec)])
    wide = bool(jax.config.jax_enable_x64) or needs_x64(leaves)  # as export_and_verify will run it
    return parsed, scopes, wide, tuple(jax_constraint(c, x64=wide) for c in constraints)


def _spec_text(x: _StringSpec) -> str:
    return f"{x.dtype.name}[{x.shape}]"



def needs_x64(leaves: Sequence[Any]) -> bool:
    """Whether some input dtype (float64, int64, ...) exists only with ``jax_enable_x64``."""
    return any(jax.dtypes.canonicalize_dtype(x.dtype) != np.dtype(x.dtype) for x in leaves
               if not jnp.issubdtype(x.dtype, jax.dtypes.extended))


def aval_text(x: Any) -> str:
    return f"{np.dtype(x.dtype).name}[{','.join(str(d) for d in x.shape)}]"  # as JAX prints in_avals


def x64_on():
    """``jax_enable_x64`` for a block: ``jax.enable_x64(True)`` (newer JAX) or ``jax.experimental.enable_x64()``."""
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64

    return enable_x64()

