"""Random dimension expressions and constraint sets, for property tests and the fuzz driver.

The generator builds its own tiny polynomial AST, independent of smtdims' IR and
parser, so that the oracle (``tests/properties/oracle.py``) judges smtdims from the outside:

* ``Poly``: a tuple of ``(coeff, monomial)``; a monomial is a tuple of ``(atom, exponent)``;
  ``()`` is the constant monomial. Like terms are combined, zero coefficients dropped.
* ``Atom``: a variable name (``str``) or ``(op, Poly, Poly)`` with op in
  ``floordiv mod max min``.
* A :class:`Case`: variables, an expression, constraints ``(lhs, op, rhs)`` with op in
  ``>= <= ==``, and a comparison question ``expr op rhs`` with op in ``>= <= > < == !=``.

Everything renders to jax.export syntax (``render``) -- normalised polynomial form,
which is all JAX's own parser accepts -- and round-trips through JSON
(``Case.to_json`` / ``Case.from_json``) for regression files.

One generator serves two drivers through the small :class:`Chooser` interface:
:class:`RandomChooser` (``random.Random``; the fuzz driver) and hypothesis' ``draw``
(:func:`cases`). Choices are ordered simplest-first so that hypothesis shrinks towards
small, readable counterexamples.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

OPS = ("floordiv", "mod", "max", "min")
DIV_OPS = ("floordiv", "mod")
CONSTRAINT_OPS = (">=", "<=", "==")
DECIDE_OPS = (">=", "<=", ">", "<", "==", "!=")
PLAIN_NAMES = ("a", "b", "c", "d")
ODD_NAMES = ("batch", "x_1", "B2", "_n", "seq_len", "q1", "r2", "inf")

# Large magnitudes that stress 32/64-bit boundaries (all exact in Python and Z3).
_BIG = (2**31 - 1, 2**31, 2**32 + 1, 2**62 + 3, 2**63 - 1, 2**63, 2**64 + 1, 3**45, 10**30 + 7)
_DIVISORS = (2, 3, 4, 5, 8, -2, -3, 7, 16, 6, -5, 1, -1, 2**64 + 1)


# -- the AST ---------------------------------------------------------------------------------
def atom_key(a: Any) -> str:
    return a if isinstance(a, str) else render_atom(a)


def mono_key(m: tuple) -> str:
    return "*".join(f"{atom_key(a)}^{k}" for a, k in m)


def normalize(terms: list[tuple[int, tuple]]) -> tuple:
    """Combine like terms and equal atoms in monomials; drop zero coefficients."""
    acc: dict[str, list] = {}
    for c, m in terms:
        # merge repeated atoms inside the monomial
        f: dict[str, list] = {}
        for a, k in m:
            key = atom_key(a)
            if key in f:
                f[key][1] += k
            else:
                f[key] = [a, k]
        mono = tuple(sorted(((a, k) for a, k in f.values() if k > 0), key=lambda ak: atom_key(ak[0])))
        key = mono_key(mono)
        if key in acc:
            acc[key][0] += c
        else:
            acc[key] = [c, mono]
    out = [(c, m) for c, m in acc.values() if c != 0]
    # constant last, higher degree first, then by text: a stable order for rendering
    out.sort(key=lambda cm: (not cm[1], -sum(k for _, k in cm[1]), mono_key(cm[1])))
    return tuple(out)


def const(n: int) -> tuple:
    return normalize([(n, ())])


def var(name: str) -> tuple:
    return ((1, ((name, 1),)),)


def atom_poly(a: Any) -> tuple:
    return ((1, ((a, 1),)),)


def add(*ps: tuple) -> tuple:
    return normalize([t for p in ps for t in p])


def scale(p: tuple, c: int) -> tuple:
    return normalize([(c * k, m) for k, m in p])


def mul(p: tuple, q: tuple) -> tuple:
    return normalize([(c1 * c2, m1 + m2) for c1, m1 in p for c2, m2 in q])


def as_constant(p: tuple) -> int | None:
    if not p:
        return 0
    if len(p) == 1 and p[0][1] == ():
        return p[0][0]
    return None


def variables(p: tuple) -> set[str]:
    out: set[str] = set()
    for _, m in p:
        for a, _ in m:
            if isinstance(a, str):
                out.add(a)
            else:
                out |= variables(a[1]) | variables(a[2])
    return out


def is_presburger(p: tuple) -> bool:
    """Linear, with every floordiv/mod divisor a nonzero constant."""
    for _, m in p:
        if len(m) > 1 or (m and m[0][1] != 1):
            return False
        for a, _ in m:
            if not isinstance(a, str):
                op, x, y = a
                if op in DIV_OPS and not as_constant(y):
                    return False
                if not (is_presburger(x) and is_presburger(y)):
                    return False
    return True


def depth(p: tuple) -> int:
    best = 0
    for _, m in p:
        for a, _ in m:
            if not isinstance(a, str):
                best = max(best, 1 + max(depth(a[1]), depth(a[2])))
    return best


# -- rendering ---------------------------------------------------------------------------------
def render_atom(a: Any) -> str:
    if isinstance(a, str):
        return a
    op, x, y = a
    return f"{op}({render(x)}, {render(y)})"


def render(p: tuple) -> str:
    """jax.export syntax, e.g. ``2*a^2*b - mod(a, 3) + 5``."""
    if not p:
        return "0"
    parts = []
    for i, (c, m) in enumerate(p):
        body = "*".join(render_atom(a) if k == 1 else f"{render_atom(a)}^{k}" for a, k in m)
        mag = abs(c)
        text = str(mag) if not body else body if mag == 1 else f"{mag}*{body}"
        if i == 0:
            parts.append(text if c > 0 else f"-{text}")
        else:
            parts.append(f" + {text}" if c > 0 else f" - {text}")
    return "".join(parts)


def render_python(p: tuple) -> str:
    """A Python expression over the variable names with exact integer semantics."""
    if not p:
        return "0"
    terms = []
    for c, m in p:
        fs = [f"({c})"]
        for a, k in m:
            base = a if isinstance(a, str) else f"_{a[0]}({render_python(a[1])}, {render_python(a[2])})"
            fs.append(base if k == 1 else f"({base})**{k}")
        terms.append("*".join(fs))
    return "(" + " + ".join(terms) + ")"


# -- cases ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    vars: tuple[str, ...]
    expr: tuple
    constraints: tuple[tuple[tuple, str, tuple], ...] = ()
    op: str = ">="
    rhs: tuple = ()
    note: str = field(default="", compare=False)

    @property
    def expr_text(self) -> str:
        return render(self.expr)

    @property
    def rhs_text(self) -> str:
        return render(self.rhs)

    @property
    def constraint_texts(self) -> tuple[str, ...]:
        return tuple(f"{render(l)} {op} {render(r)}" for l, op, r in self.constraints)

    @property
    def presburger(self) -> bool:
        return (
            is_presburger(self.expr) and is_presburger(self.rhs)
            and all(is_presburger(l) and is_presburger(r) for l, _, r in self.constraints)
        )

    def all_vars(self) -> tuple[str, ...]:
        vs = set(self.vars) | variables(self.expr) | variables(self.rhs)
        for l, _, r in self.constraints:
            vs |= variables(l) | variables(r)
        return tuple(sorted(vs))

    def describe(self) -> str:
        cons = ", ".join(self.constraint_texts) or "none"
        return f"expr: {self.expr_text} | question: {self.expr_text} {self.op} {self.rhs_text} | constraints: {cons}"

    # JSON: polys as nested lists, atoms as a name or [op, poly, poly]; ints stay exact.
    def to_json(self) -> dict:
        return {
            "vars": list(self.vars),
            "expr": _poly_to_json(self.expr),
            "constraints": [[_poly_to_json(l), op, _poly_to_json(r)] for l, op, r in self.constraints],
            "op": self.op,
            "rhs": _poly_to_json(self.rhs),
            "text": self.describe(),
            "note": self.note,
        }

    @staticmethod
    def from_json(d: dict) -> Case:
        return Case(
            vars=tuple(d["vars"]),
            expr=_poly_from_json(d["expr"]),
            constraints=tuple((_poly_from_json(l), op, _poly_from_json(r)) for l, op, r in d["constraints"]),
            op=d["op"],
            rhs=_poly_from_json(d["rhs"]),
            note=d.get("note", ""),
        )


def _poly_to_json(p: tuple) -> list:
    return [[c, [[_atom_to_json(a), k] for a, k in m]] for c, m in p]


def _atom_to_json(a: Any) -> Any:
    return a if isinstance(a, str) else [a[0], _poly_to_json(a[1]), _poly_to_json(a[2])]


def _poly_from_json(p: list) -> tuple:
    return normalize([(c, tuple((_atom_from_json(a), k) for a, k in m)) for c, m in p])


def _atom_from_json(a: Any) -> Any:
    return a if isinstance(a, str) else (a[0], _poly_from_json(a[1]), _poly_from_json(a[2]))


def dumps(case: Case) -> str:
    return json.dumps(case.to_json(), indent=1)


# -- choosers ------------------------------------------------------------------------------------
class Chooser:
    """Where the randomness comes from. ``int`` shrinks towards ``lo``; ``chance`` towards False."""

    def int(self, lo: int, hi: int) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def chance(self, p: float) -> bool:
        return self.int(0, 999) >= round(1000 * (1 - p))

    def pick(self, seq):
        return seq[self.int(0, len(seq) - 1)]


class RandomChooser(Chooser):
    def __init__(self, rng: random.Random):
        self.rng = rng

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


class DrawChooser(Chooser):
    def __init__(self, draw):
        from hypothesis import strategies as st

        self.draw = draw
        self.st = st

    def int(self, lo: int, hi: int) -> int:
        return self.draw(self.st.integers(lo, hi))


# -- the generator ---------------------------------------------------------------------------------
@dataclass
class GenConfig:
    max_vars: int = 4
    linear: bool | None = None  # None: choose per case
    max_depth: int = 2
    big: float = 0.03  # chance of a coefficient beyond 32 bits
    symbolic_div: float = 0.3  # in nonlinear cases: chance that a divisor is an expression
    odd_names: float = 0.05
    max_constraints: int = 3
    planted: float = 0.9  # chance that constraints are made to hold at a chosen point


def grid_size(nvars: int) -> int:
    """Values 1..G per variable in the brute-force grid (and where points are planted)."""
    return {0: 1, 1: 40, 2: 14, 3: 8}.get(nvars, 6)


class _Gen:
    def __init__(self, ch: Chooser, cfg: GenConfig, names: tuple[str, ...], linear: bool):
        self.ch, self.cfg, self.names, self.linear = ch, cfg, names, linear

    def coeff(self, allow_big: bool = True) -> int:
        ch = self.ch
        kind = ch.int(0, 99)
        sign = -1 if ch.chance(0.35) else 1
        if allow_big and kind >= 100 - round(100 * self.cfg.big):
            return sign * (ch.pick(_BIG) + ch.int(-2, 2))
        if kind >= 75:
            return sign * ch.int(5, 100)
        return sign * ch.int(1, 4)

    def constant(self) -> int:
        ch = self.ch
        if ch.chance(self.cfg.big / 2):
            return (-1 if ch.chance(0.3) else 1) * ch.pick(_BIG)
        return ch.int(-12, 12)

    def var(self) -> str:
        return self.names[self.ch.int(0, len(self.names) - 1)]

    def poly(self, depth: int, max_terms: int = 3) -> tuple:
        ch = self.ch
        terms = []
        for _ in range(ch.int(1, max_terms)):
            terms.append((self.coeff(), self.monomial(depth)))
        if ch.chance(0.4):
            terms.append((self.constant(), ()))
        p = normalize(terms)
        return p if p else var(self.var())

    def monomial(self, depth: int) -> tuple:
        ch = self.ch
        factors = [(self.atom(depth), 1)]
        if not self.linear:
            if ch.chance(0.45):
                factors.append((self.atom(depth), 1))
            if ch.chance(0.2):
                factors[0] = (factors[0][0], ch.int(2, 3))
        return tuple(factors)

    def atom(self, depth: int):
        ch = self.ch
        if depth <= 0 or not ch.chance(0.45):
            return self.var()
        op = ch.pick(OPS)
        x = self.poly(depth - 1, 2)
        if op in DIV_OPS:
            if not self.linear and ch.chance(self.cfg.symbolic_div):
                y = self.divisor(depth - 1)
            else:
                y = const(ch.pick(_DIVISORS))
            if not variables(y) and _eval_at(y, {}) in (0, None):
                y = const(2)  # a constant zero divisor is a parse error, not a question
            if not variables(x) and _eval_at(x, {}) is None:
                x = var(self.var())
            # avoid ops that every parser folds away (x // 1, mod(x, -1)): keep them, but rarely
            return (op, x, y)
        y = self.poly(depth - 1, 2) if ch.chance(0.6) else const(self.constant())
        return (op, x, y)

    def divisor(self, depth: int) -> tuple:
        """A symbolic divisor: sometimes provably nonzero, sometimes possibly zero."""
        ch = self.ch
        k = ch.int(0, 4)
        v = var(self.var())
        if k == 0:
            return v  # >= 1
        if k == 1:
            return add(v, const(ch.int(-2, 3)))  # zero at small values when the shift is negative
        if k == 2:
            return add(v, scale(var(self.var()), -1))  # a - b: may be 0
        if k == 3:
            return atom_poly(("max", v, const(ch.int(1, 3))))  # >= 1
        return self.poly(max(depth, 0), 2)


def gen_case(ch: Chooser, cfg: GenConfig | None = None) -> Case:
    cfg = cfg or GenConfig()
    nvars = ch.int(1, cfg.max_vars)
    odd = ch.chance(cfg.odd_names)
    pool = ODD_NAMES if odd else PLAIN_NAMES
    names = tuple(pool[:nvars])
    linear = cfg.linear if cfg.linear is not None else not ch.chance(0.4)
    g = _Gen(ch, cfg, names, linear)
    expr = g.poly(ch.int(0, cfg.max_depth))
    # a point in the grid at which the constraints are made to hold
    G = grid_size(nvars)
    point = {n: ch.int(1, G) for n in names}
    plant = ch.chance(cfg.planted)
    cons = []
    for _ in range(ch.int(0, cfg.max_constraints)):
        c = _constraint(g, point if plant else None)
        if c is not None:
            cons.append(c)
    op = ch.pick(DECIDE_OPS)
    kind = ch.int(0, 3)
    if kind == 0:
        rhs = const(0)
    elif kind == 1:
        rhs = var(g.var())
    elif kind == 2:
        v = _eval_at(expr, point)
        rhs = const((v if v is not None else 0) + ch.int(-2, 2))
    else:
        rhs = g.poly(ch.int(0, 1), 2)
    return Case(vars=names, expr=expr, constraints=tuple(cons), op=op, rhs=rhs)


def _constraint(g: _Gen, point: dict[str, int] | None):
    ch = g.ch
    op = ch.pick(CONSTRAINT_OPS)
    lin = g.linear or not ch.chance(0.3)
    sub = _Gen(ch, GenConfig(big=g.cfg.big / 3, symbolic_div=g.cfg.symbolic_div / 2), g.names, lin)
    if op == "==":
        # JAX wants `coefficient * term` on the left of an equality
        lhs = normalize([(ch.pick((1, 1, 2, 3, -1)), sub.monomial(ch.int(0, 1)))])
        rhs = sub.poly(0, 2) if ch.chance(0.6) else const(ch.int(0, 6))
    else:
        lhs = sub.poly(ch.int(0, 1), 2)
        rhs = const(ch.int(1, 12)) if ch.chance(0.5) else sub.poly(0, 2)
    if point is not None:
        lv, rv = _eval_at(lhs, point), _eval_at(rhs, point)
        if lv is None or rv is None:
            return None
        if op == "==":
            rhs = add(rhs, const(lv - rv))
        elif (op == ">=" and lv < rv) or (op == "<=" and lv > rv):
            op = "<=" if op == ">=" else ">="
    if not lhs or (as_constant(lhs) is not None and as_constant(rhs) is not None):
        return None
    return (lhs, op, rhs)


def _apply(op: str, x: int, y: int) -> int:
    if op == "floordiv":
        return x // y  # Python: floor division, ZeroDivisionError for 0
    if op == "mod":
        return x % y  # Python: the remainder has the divisor's sign
    return max(x, y) if op == "max" else min(x, y)


def evaluate(p: tuple, env: dict[str, int]) -> int:
    """Exact value of ``p`` at ``env`` (slow, recursive; see ``oracle.compile_poly``)."""
    total = 0
    for c, m in p:
        prod = c
        for a, k in m:
            v = env[a] if isinstance(a, str) else _apply(a[0], evaluate(a[1], env), evaluate(a[2], env))
            prod *= v**k
        total += prod
    return total


def _eval_at(p: tuple, point: dict[str, int]) -> int | None:
    try:
        return evaluate(p, point)
    except ZeroDivisionError:
        return None


def random_case(rng: random.Random, cfg: GenConfig | None = None) -> Case:
    return gen_case(RandomChooser(rng), cfg)


def cases(cfg: GenConfig | None = None):
    """Hypothesis strategy of :class:`Case`."""
    from hypothesis import strategies as st

    @st.composite
    def _cases(draw):
        return gen_case(DrawChooser(draw), cfg)

    return _cases()
