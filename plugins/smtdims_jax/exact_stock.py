"""Stock JAX's decision procedure with exact arithmetic: the "stock JAX where sound" rung.

JAX's procedure (``jax/_src/export/shape_poly_decision.py``) computes in Python
integers except at three kinds of places, where it divides in floating point:
``np.floor(x / y)``, ``np.ceil(x / y)`` and ``math.floor(x / y)``. A float quotient is
exact only while the dividend stays below 2**53, and the procedure multiplies
coefficients and bounds together across elimination steps, so no gate on the input
bounds what it computes (``a*b >= c*d`` near 2**64 came out True when ``a*b - c*d = -1``
was attainable).

So we do not gate the numbers: we remove the floats. At import, the seam (:mod:`.seam`) reads the
installed module's source, and :func:`build` rewrites its syntax tree:

- every ``np.floor(x / y)`` and ``math.floor(x / y)`` becomes ``_floor_div(x, y)``, and
  every ``np.ceil(x / y)`` becomes ``_ceil_div(x, y)``: exact integer floor/ceil for
  integer operands, and the float behaviour for infinite ones;
- the line that installs the procedure into ``shape_poly`` is dropped;
- the scope caches it uses get names of their own, so stock JAX's (possibly inexact)
  cached bounds are never read back as ours.

- every method of the procedure first calls ``_tick()``, which counts steps and stops the
  procedure (``StockBudgetExceeded``) after ``STEP_BUDGET`` of them or when the question's
  deadline has passed: the procedure recurses without bound on some inputs (stock JAX
  itself ends in ``RecursionError`` on ``-a == (10**30 + 8)*a - ...``), and Python code
  cannot be interrupted from outside. The count is deterministic.

Then the tree is checked: no true division (``/``) may remain anywhere, and the
number of rewritten sites must be the one this module was written against. If the
check fails (a JAX release changed the procedure), the rung is disabled with a
warning: smtdims stays sound and only loses speed.

Why the result is sound (the proof the rung rests on): with the divisions exact,
every number the procedure computes is an exact integer or +-inf, and its reasoning
steps (Fourier-Motzkin style elimination, interval products, the floordiv/mod/max/min
rules) are valid over the integers for the questions the seam routes to it:
linear expressions under linear constraints, plus products and powers of plain
variables (always >= 1, so the corner products it takes are the true extremes and
``0 * inf`` never arises). Its known unsound corner, products of factors whose range
includes values <= 0, and symbolic divisors, are never routed to it.
"""

from __future__ import annotations

import ast
import inspect
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from smtdims import clocks

# Rewritten division sites in jax 0.7.x-0.11.x: add_to_state (1 ceil + 1 floor),
# _bounds_for_sorted_terms (2 floor + 2 ceil), math_floor_with_inf (1 floor).
EXPECTED_SITES = 7
STEP_BUDGET = 1_000  # method calls per question; the benchmark corpora need at most ~600
_STEPS = [0]


class StockBudgetExceeded(RuntimeError):
    """The exact stock procedure ran out of steps or time; the ladder skips the rung."""


def _tick() -> None:
    _STEPS[0] += 1
    if _STEPS[0] > STEP_BUDGET:
        raise StockBudgetExceeded(f"stock JAX's procedure took more than {STEP_BUDGET} steps")
    if _STEPS[0] % 64 == 0:
        d = clocks.active_deadline()
        if d is not None and d.expired:
            raise StockBudgetExceeded("the question's deadline passed inside stock JAX's procedure")


_CACHE_ATTRS = {"_bounds_cache": "_smtdims_exact_bounds_cache",
                "_decision_initial_state": "_smtdims_exact_decision_state"}
SCOPE_ATTRS = frozenset(_CACHE_ATTRS.values())  # left out of copies and pickles (conversion.py)


def _floor_div(x: Any, y: Any) -> Any:
    if isinstance(x, float) or isinstance(y, float):
        if math.isinf(x) or math.isinf(y):
            return np.floor(x / y)
        x, y = int(x), int(y)
    return x // y


def _ceil_div(x: Any, y: Any) -> Any:
    if isinstance(x, float) or isinstance(y, float):
        if math.isinf(x) or math.isinf(y):
            return np.ceil(x / y)
        x, y = int(x), int(y)
    return -((-x) // y)


class _Rewrite(ast.NodeTransformer):
    def __init__(self) -> None:
        self.sites = 0
        self.functions = 0

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        f = node.func
        if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and len(node.args) == 1
                and not node.keywords and isinstance(node.args[0], ast.BinOp) and isinstance(node.args[0].op, ast.Div)):
            which = (f.value.id, f.attr)
            if which in (("np", "floor"), ("math", "floor"), ("np", "ceil")):
                self.sites += 1
                name = "_ceil_div" if f.attr == "ceil" else "_floor_div"
                div = node.args[0]
                return ast.copy_location(ast.Call(ast.Name(name, ast.Load()), [div.left, div.right], []), node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if node.attr in _CACHE_ATTRS:
            node.attr = _CACHE_ATTRS[node.attr]
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        tick = ast.Expr(ast.Call(ast.Name("_tick", ast.Load()), [], []))
        node.body.insert(1 if ast.get_docstring(node) else 0, tick)
        self.functions += 1
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.AST | None:
        self.generic_visit(node)
        for t in node.targets:  # `shape_poly._bounds_decision = bounds_decision`: installing is ours to do
            if isinstance(t, ast.Attribute) and t.attr == "_bounds_decision":
                return None
        return node


def _divisions_left(tree: ast.AST) -> int:
    return sum(1 for n in ast.walk(tree)
               if (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div))
               or (isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Div)))


def build(module: Any) -> Callable[[Any, Any], tuple[Any, Any]] | None:
    """The exact ``bounds_decision`` of ``module`` (JAX's decision module), or None with a warning."""
    try:
        tree = ast.parse(inspect.getsource(module))
        rw = _Rewrite()
        tree = ast.fix_missing_locations(rw.visit(tree))
        left = _divisions_left(tree)
        if rw.sites != EXPECTED_SITES or left:
            raise RuntimeError(f"found {rw.sites} float-division sites (expected {EXPECTED_SITES}) "
                               f"and {left} other true divisions")
        ns: dict[str, Any] = {"__name__": "smtdims_jax._exact_stock_decision", "_floor_div": _floor_div,
                              "_ceil_div": _ceil_div, "_tick": _tick}
        exec(compile(tree, f"<smtdims exact copy of {module.__name__}>", "exec"), ns)
        fn = ns["bounds_decision"]
    except Exception as err:  # pragma: no cover - depends on the JAX release
        warnings.warn(f"smtdims: JAX's decision procedure could not be made exact ({err}); "
                      "smtdims answers every question itself (sound, slower)", stacklevel=2)
        return None

    def exact_bounds(e: Any, prec: Any) -> tuple[Any, Any]:
        _STEPS[0] = 0  # callers hold no lock across questions: one count per call is enough
        scope = getattr(e, "scope", None)
        if scope is not None:
            d = scope.__dict__
            if "_smtdims_exact_bounds_cache" not in d:
                d["_smtdims_exact_bounds_cache"] = {}
                d["_smtdims_exact_decision_state"] = None
        return fn(e, prec)

    return exact_bounds
