"""Every private name of JAX smtdims uses, imported and checked once, here; the JAX version check.

Nothing else in the plugins imports ``jax._src``: they take JAX's internals from this module, so a
JAX release that moves or renames one fails here, at import, with the tested range in the message.

``SUPPORTED_JAX`` is the tested range. An older JAX fails at import; a newer one is used after the
checks below pass, with one warning naming the tested range. A JAX whose internals differ fails loudly.

The private attributes of JAX's objects are read here too, and only here: each through one small
accessor below (:func:`sorted_terms`, :func:`term_factors`, :func:`constant_value`,
:func:`explicit_constraints`, :func:`scope_initialized`, :func:`inconclusive_help_msg`), with the JAX
releases it is tested on beside it (tests/docs/test_structure.py checks that no other module of the
plugins reads one). The plugins read these public attributes of JAX's objects directly: a dimension's
``.scope``, a factor's ``.var``/``.operation``/``.operands``, a constraint's ``.cmp``/``.e1``/``.e2``/
``.diff``/``.debug_str``.
"""

from __future__ import annotations

import os
import re
import warnings
from typing import Any

import jax

from smtdims import host as _host
from smtdims.errors import UnsupportedJaxError

SUPPORTED_JAX = ((0, 7, 0), (0, 12, 0, 1))  # inclusive range, tested in CI (0.7.2, 0.10.2, 0.12.0.1)


def version_tuple(v: str) -> tuple[int, ...]:
    """The release segment, all of it: 0.12.0.1 and 0.12.0.2 differ; '0.12.1.dev2026' is (0, 12, 1)."""
    m = re.match(r"\d+(?:\.\d+)*", v)
    return tuple(int(x) for x in m.group().split(".")) if m else ()


def _fmt(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v))


def _newer_than_tested() -> bool:
    """True when this JAX is newer than the tested range (warned once, after the checks below)."""
    v = version_tuple(jax.__version__)
    lo, hi = SUPPORTED_JAX
    if v < lo:
        raise UnsupportedJaxError(
            f"smtdims needs jax >= {_fmt(lo)} (tested up to {_fmt(hi)}); found jax {jax.__version__}. "
            f"Upgrade, e.g. pip install 'jax>={_fmt(lo)}'"
        )
    return v > hi


NEWER_THAN_TESTED = _newer_than_tested()

try:  # every private name of JAX's the plugins use: one versioned block, tested on jax 0.7.2, 0.10.2, 0.12.0.1
    from jax._src import core
    from jax._src import source_info_util as _siu
    from jax._src import xla_bridge as _xb
    from jax._src.export import shape_poly as sp
    from jax._src.export import shape_poly_decision as spd

    DimExpr = sp._DimExpr
    DimFactor = sp._DimFactor
    SymbolicScope = sp.SymbolicScope
    Comparator = sp.Comparator
    BoundsPrecision = sp.BoundsPrecision
    Tracer = core.Tracer
    InconclusiveDimensionOperation = sp.InconclusiveDimensionOperation
    AnyInconclusive = core.InconclusiveDimensionOperation  # the base class JAX raises in places
    # Stock JAX's decision seam, saved before anything patches it: uninstalling restores these.
    STOCK_BOUNDS = spd.bounds_decision
    STOCK_GEQ = sp._geq_decision
    STOCK_EQ = DimExpr.__eq__
    STOCK_NE = DimExpr.__ne__
    STOCK_DEFINITELY_EQUAL = core.definitely_equal
    assert callable(core.is_constant_dim) and callable(core.max_dim)
    for _attr in ("_sorted_terms", "scope", "_size", "_to_constant", "_evaluate", "_get_vars"):
        assert hasattr(DimExpr, _attr), _attr
    for _attr in ("FLOORDIV", "MOD", "MAX", "MIN"):
        assert hasattr(DimFactor, _attr), _attr
    assert hasattr(sp, "_bounds_decision") and hasattr(SymbolicScope, "__init__")
    assert hasattr(InconclusiveDimensionOperation, "_help_msg")
    assert callable(_xb.backends_are_initialized) and isinstance(_xb._backends, dict)
    assert callable(_xb.canonicalize_platform)
    assert callable(_siu.register_exclusion)
    for _p in ("FOR_GEQ0_OR_LEQ0", "FOR_GEQ0_OR_LT0", "BEST"):
        assert hasattr(BoundsPrecision, _p), _p
    assert sp._bounds_decision is STOCK_BOUNDS or getattr(sp._bounds_decision, "__module__", "").startswith("smtdims")
except (ImportError, AttributeError, AssertionError) as err:  # pragma: no cover - depends on JAX
    raise UnsupportedJaxError(
        f"jax {jax.__version__} lacks the shape-polymorphism internals smtdims plugs into ({err!r}); "
        f"tested: jax {_fmt(SUPPORTED_JAX[0])} to {_fmt(SUPPORTED_JAX[1])}"
    ) from err

# Exported modules' debug locations name the user's code as on stock JAX. JAX records the innermost
# frame outside its own files (source_info_util); smtdims' wrappers (the export hint, `smtdims run`,
# the pipeline) sit between the user's code and JAX's, so without this the locations (and the
# serialized bytes) of every export named a file of this plugin. Each package's own folder, never
# the folder above it (installed, that is site-packages: every library's frames would be hidden).
for _file in (_host.__file__, __file__):  # smtdims' folder, this plugin's folder
    _siu.register_exclusion(os.path.dirname(os.path.abspath(_file)) + os.sep)

if NEWER_THAN_TESTED:
    warnings.warn(
        f"smtdims was tested with jax {_fmt(SUPPORTED_JAX[0])} to {_fmt(SUPPORTED_JAX[1])}; found jax "
        f"{jax.__version__}. Its decision seam checks out, so smtdims is active; please report problems.",
        stacklevel=2,
    )


# -- JAX's objects: their private attributes, read here only ---------------------------------------------
# One accessor per attribute, so that a JAX release renaming one breaks one function; the comment on each
# read names the JAX releases the plugin's tests pass on with it (CI runs them on each).
def sorted_terms(e: Any) -> tuple:
    """``_DimExpr._sorted_terms``: ``e`` as ``(term, coefficient)`` pairs in JAX's order; a tuple (hashing
    or comparing it never calls ``_DimExpr.__eq__``, so it can key a cache)."""
    return e._sorted_terms  # tested on jax 0.7.2, 0.10.2, 0.12.0.1


def term_factors(term: Any) -> Any:
    """``_DimTerm._factors``: a term of :func:`sorted_terms` as ``(factor, exponent)`` pairs; none for the
    constant term. A factor is a variable (``.var``) or an operation (``.operation``, ``.operands``)."""
    return term._factors  # tested on jax 0.7.2, 0.10.2, 0.12.0.1


def constant_value(e: Any) -> int | None:
    """``_DimExpr._to_constant``: the value of ``e`` where it is a constant (an int or a constant
    ``_DimExpr``), else None."""
    return DimExpr._to_constant(e)  # tested on jax 0.7.2, 0.10.2, 0.12.0.1


def explicit_constraints(scope: Any) -> Any:
    """``SymbolicScope._explicit_constraints``: the scope's constraints as JAX parsed them, in the order read
    (while the scope is read, those read so far): ``_SymbolicConstraint`` objects with ``.cmp`` (``Comparator.EQ`` or
    ``GEQ``), ``.e1``, ``.e2``, ``.diff`` (``e1 - e2``) and ``.debug_str`` (the user's text)."""
    return scope._explicit_constraints  # tested on jax 0.7.2, 0.10.2, 0.12.0.1


def scope_initialized(scope: Any) -> bool:
    """``SymbolicScope._initialized``: False while JAX still reads the scope's constraints (it simplifies
    each with those read before it), True once all are read."""
    return scope._initialized  # tested on jax 0.7.2, 0.10.2, 0.12.0.1


def inconclusive_help_msg(exc_type: Any = InconclusiveDimensionOperation) -> str | None:
    """``InconclusiveDimensionOperation._help_msg``: the help text JAX appends to an inconclusive
    comparison's message (checked at import for JAX's class); None for a type that has none."""
    return getattr(exc_type, "_help_msg", None)  # tested on jax 0.7.2, 0.10.2, 0.12.0.1


# -- the seam's current state (installed: smtdims' functions; else stock's) -------------------------------
def bounds_decision() -> Any:
    """The function JAX now calls for bounds (``shape_poly._bounds_decision``)."""
    return sp._bounds_decision  # tested on jax 0.7.2, 0.10.2, 0.12.0.1


def set_seam(*, bounds: Any, geq: Any, eq: Any, ne: Any, definitely_equal: Any) -> None:
    """Point JAX's decision seam at these functions (the caller holds the install lock)."""
    sp._bounds_decision = bounds  # tested on jax 0.7.2, 0.10.2, 0.12.0.1 (as the next line)
    sp._geq_decision = geq
    DimExpr.__eq__ = eq
    DimExpr.__ne__ = ne
    core.definitely_equal = definitely_equal


def restore_stock_seam() -> None:
    """Stock JAX's seam exactly as it was at import."""
    set_seam(bounds=STOCK_BOUNDS, geq=STOCK_GEQ, eq=STOCK_EQ, ne=STOCK_NE, definitely_equal=STOCK_DEFINITELY_EQUAL)


# -- JAX's functions, for the plugins, tools and tests that must not import jax._src ----------------------
def is_constant_dim(x: Any) -> bool:
    return core.is_constant_dim(x)


def definitely_equal(x: Any, y: Any) -> bool:
    """JAX's ``core.definitely_equal`` (the equality its shape checks ask; proven while installed)."""
    return core.definitely_equal(x, y)


def max_dim(a: Any, b: Any) -> Any:
    """JAX's ``core.max_dim``."""
    return core.max_dim(a, b)


def jax_bounds(e: Any) -> tuple[float, float]:
    """The bounds JAX itself now computes for ``e`` (smtdims' when installed, else stock's)."""
    return sp._bounds_decision(e, BoundsPrecision.BEST)  # tested on jax 0.7.2, 0.10.2, 0.12.0.1


def stock_bounds(e: Any, prec: Any = None) -> tuple[float, float]:
    """Stock JAX's bounds of ``e`` (for comparisons in tests, audits and benchmarks)."""
    return STOCK_BOUNDS(e, prec if prec is not None else BoundsPrecision.BEST)


# -- backends (read, never started here) -----------------------------------------------------------------
def started_backends() -> frozenset[str]:
    """The platforms whose backends JAX has started in this process (none yet: empty), without starting any.

    The export pipeline asks before it runs anything: a process that started a TPU backend holds the chip,
    and no other process may open it while this one lives.
    """
    # xla_bridge._backends: tested on jax 0.7.2, 0.10.2, 0.12.0.1
    return frozenset(_xb._backends) if _xb.backends_are_initialized() else frozenset()


def canonical_platform(name: str) -> str:
    """JAX's platform for ``name`` (the one place JAX maps 'gpu' to 'cuda' or 'rocm'); JAX's error if none."""
    return _xb.canonicalize_platform(name)


def known_backends() -> tuple[str, ...]:
    """The backends JAX can start here (its registered factories), sorted."""
    return tuple(sorted(getattr(_xb, "_backend_factories", {}) or ()))  # tested on jax 0.7.2, 0.10.2, 0.12.0.1


__all__ = [
    "NEWER_THAN_TESTED", "SUPPORTED_JAX", "AnyInconclusive", "BoundsPrecision", "Comparator", "DimExpr", "DimFactor",
    "InconclusiveDimensionOperation", "STOCK_BOUNDS", "STOCK_DEFINITELY_EQUAL", "STOCK_EQ", "STOCK_GEQ", "STOCK_NE",
    "SymbolicScope", "Tracer", "bounds_decision", "canonical_platform", "constant_value", "core", "definitely_equal",
    "explicit_constraints", "inconclusive_help_msg", "is_constant_dim", "jax_bounds", "known_backends", "max_dim",
    "restore_stock_seam", "scope_initialized", "set_seam", "sorted_terms", "sp", "spd", "started_backends",
    "stock_bounds", "term_factors", "version_tuple",
]
