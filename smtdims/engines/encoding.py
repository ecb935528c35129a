"""The IR in Z3: one term per expression, one place per operator, and models read back as integers.

Each operator is encoded in exactly one place (:meth:`Encoder._encode_op`). ``floordiv``/``mod``
follow Python: floor division, remainder with the divisor's sign. Every division ``x / y`` gets ONE
quotient/remainder pair ``(q, r)`` shared by ``floordiv(x, y)`` and ``mod(x, y)`` with
``x == y*q + r`` and the remainder's range (so ``mod(a, b) == a - b*floordiv(a, b)`` is a one-step
consequence). Z3's own ``div``/``mod`` are Euclidean and are not used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import z3

from .. import clocks
from ..lang.bigints import int_text, text_int
from ..lang.constraints import Constraint
from ..lang.expr import FLOORDIV, MAX, MIN, MOD, Atom, Expr, Op, Var, symbolic_divisors
from ..lang.memos import CACHE_MAX_TERMS

_DIGITS = 10**4000  # Python refuses str()/int() of integers with more than 4,300 digits


def symbol(name: str, kind: str = "dim") -> str:
    """The Z3 name of the dimension variable ``name``: ``kind:name`` (``dim`` for its integer, ``d`` for
    the recession LP's real, ``!v`` for the literal of its ``>= 1`` fact...). The one place where a
    user's name becomes a solver's name; models are read back through the terms, never by name.
    (``--smtlib`` scripts name the ``>= 1`` facts ``|v:name|`` and the constraints ``|c<i>|``: a
    variable's name must be neither, or Z3 takes the label for the variable.)

    Why not ``name`` itself: Z3 writes a name into SMT-LIB text as it is (``Z3_benchmark_to_smtlib_string``
    and ``sexpr`` check only its characters), and the text's reader (the Z3 worker, ``--smtlib``
    scripts) takes ``true``, ``and``, ``let``, ``_``, ``div``, ``abs``, ``pi``... as the language's own
    words: ``true*true >= 2`` would be parsed as something else, and the worker's answers be wrong or
    errors. ``:`` is not a simple-symbol character, so ``kind:name`` is always written quoted
    (``|dim:true|``), and no SMT-LIB reserved word, Z3 function or keyword contains it (keywords start
    with ``:``; a quoted symbol is never a keyword). Injective (``kind`` holds no ``:``): the characters
    a quoted symbol cannot hold (``|``, ``\\``, and the non-printable ones) and ``~``, the escape,
    are written ``~hex;``. The parser's names (letters, digits, ``_``, combining marks) pass as they are.
    """
    if name.isprintable() and "|" not in name and "\\" not in name and "~" not in name:
        return f"{kind}:{name}"
    return kind + ":" + "".join(ch if ch.isprintable() and ch not in "|\\~" else f"~{ord(ch):x};" for ch in name)


def z3_int(value: int, ctx: z3.Context) -> z3.ArithRef:
    """An exact Z3 integer for any Python int (no 4,300-digit limit)."""
    if -_DIGITS < value < _DIGITS:
        return z3.IntVal(value, ctx)
    return z3.IntVal(int_text(value), ctx)


class ConstantsModel(Protocol):
    """A model that is not Z3's: a Z3 worker's, its integer constants (read as ``z3.ModelRef.eval`` reads)."""

    def eval(self, t: z3.ExprRef, model_completion: bool = False) -> int: ...


def model_int(value: z3.ArithRef | int) -> int:
    if isinstance(value, int):  # a value of a worker's model (ConstantsModel)
        return value
    return text_int(value.as_string()) if z3.is_int_value(value) else int(str(value))


def model_numerals(m: z3.ModelRef, terms: Iterable[z3.ExprRef]) -> list[str | None]:
    """The exact text (``'5'``, ``'-3/4'``) of each term's value in ``m`` (model completion);
    None where the value is not a numeral.

    Why not ``m.eval``: z3py's wrappers (``eval``, ``is_int_value``, ``sort``, ``numerator_as_long``)
    cost several times the C calls they make, for every constant, and a bounds query reads a model of
    every variable of its scope. Z3 keeps the result of ``Z3_model_eval`` alive until the next result
    is made, and its text is read at once.
    """
    C = z3.z3core
    c, mr = m.ctx.ref(), m.model
    r = (C.Ast * 1)()
    out: list[str | None] = []
    for t in terms:
        if not C.Z3_model_eval(c, mr, t.as_ast(), True, r):
            raise z3.Z3Exception(f"failed to evaluate {t} in the model")
        try:
            out.append(C.Z3_get_numeral_string(c, r[0]))
        except z3.Z3Exception:  # not a numeral (Z3 reports it; asking first costs a call per constant)
            out.append(None)
    return out


def model_ints(m: z3.ModelRef | ConstantsModel, consts: dict[str, z3.ArithRef], names: Iterable[str]) -> dict[str, int]:
    """``{n: model_int(m.eval(consts[n], model_completion=True))}`` for the ``names`` in ``consts``,
    through :func:`model_numerals`."""
    names = [n for n in names if n in consts]
    if not isinstance(m, z3.ModelRef):
        return {n: model_int(m.eval(consts[n], model_completion=True)) for n in names}
    texts = model_numerals(m, (consts[n] for n in names))
    return {n: text_int(t) if t is not None and "/" not in t else model_int(m.eval(consts[n], model_completion=True))
            for n, t in zip(names, texts, strict=True)}


def z3_int_or_inf(value: object) -> int | float:
    """Convert an optimiser objective value (an integer, or +-oo) to int / +-inf."""
    import math

    assert isinstance(value, z3.ArithRef)
    if z3.is_int_value(value):
        return model_int(value)
    text = value.sexpr()
    if "oo" in text:
        return -math.inf if "-" in text else math.inf
    # an epsilon-shifted value cannot arise for integer objectives
    raise ValueError(f"unexpected optimiser value {text}")


class DeadlinePassed(Exception):
    """The question's deadline passed while its formulas were being built (caught by the check)."""


_SHARED_POWER = 8  # powers from this exponent up are products of defined squares (smaller ones: spelt out)


@dataclass(frozen=True, slots=True)
class _Square:
    """The key of ``atom^exp`` (``exp`` a power of two) among an :class:`Encoder`'s atoms: a variable
    with the definition ``atom^exp == atom^(exp/2) * atom^(exp/2)`` as its axiom, asserted by the
    checks that mention it, like a division's."""

    atom: Atom
    exp: int

    def sort_key(self) -> tuple:
        return (2, self.atom.sort_key(), self.exp)


class Encoder:
    """Translates IR expressions to Z3 terms in one context; memoised per atom.

    Definitional axioms (``v >= 1``; the quotient/remainder definition of each
    division) are kept per atom, so a check asserts only those of the atoms it
    mentions: one nonlinear question must not make every later one nonlinear.
    """

    def __init__(self, ctx: z3.Context):
        self.ctx = ctx
        self.vars: dict[str, z3.ArithRef] = {}
        self._atoms: dict[Atom, z3.ArithRef] = {}
        self._closure: dict[Atom, frozenset[Atom]] = {}  # the atom and every atom nested in it
        self._axioms: dict[Atom, list[z3.BoolRef]] = {}
        self._divisions: dict[tuple[Expr, Expr], tuple[z3.ArithRef, z3.ArithRef, list[z3.BoolRef]]] = {}
        self._exprs: dict[Expr, tuple[z3.ArithRef, frozenset[Atom]]] = {}  # whole expressions, memoised
        self._powers: dict[tuple[Atom, int], z3.ArithRef] = {}  # a^k for k >= _SHARED_POWER
        self._squares = 0  # squares defined so far (their names)
        self._touched: set[Atom] | None = None
        self._watch: clocks.Deadline | None = None  # the clock of the collect running (see collect)

    def var(self, name: str) -> z3.ArithRef:
        v = self.vars.get(name)
        a = Var(name)
        if v is None:
            v = z3.Int(symbol(name), self.ctx)
            self.vars[name] = v
            self._atoms[a] = v
            self._closure[a] = frozenset((a,))
            self._axioms[a] = [v >= 1]
        if self._touched is not None:
            self._touched.add(a)
        return v

    def const(self, value: int) -> z3.ArithRef:
        return z3_int(value, self.ctx)

    def expr(self, e: Expr) -> z3.ArithRef:
        hit = self._exprs.get(e)
        if hit is not None:
            if self._touched is not None:
                self._touched |= hit[1]
            return hit[0]
        outer, self._touched = self._touched, set()
        try:
            t = self._expr(e)
            atoms = frozenset(self._touched)
        finally:
            self._touched = outer
        if self._touched is not None:
            self._touched |= atoms
        if len(self._exprs) < 50_000 and len(e.terms) <= CACHE_MAX_TERMS:  # bounded as the session caches are
            self._exprs[e] = (t, atoms)
        return t

    def _expr(self, e: Expr) -> z3.ArithRef:
        # one n-ary product per term and one sum (Z3 flattens nested ones to the same terms):
        # binary products cost a Python-side term per factor, and a^300 spelt out has 300 factors
        terms: list[z3.ArithRef] = []
        for i, (m, c) in enumerate(e.terms):
            if not i & 31 and self._watch is not None and self._watch.expired:
                raise DeadlinePassed  # an encoding as large as the input must not outlive the question
            factors = [] if c == 1 and m else [self.const(c)]
            for a, k in m:
                if k < _SHARED_POWER:
                    factors.extend([self.atom(a)] * k)
                else:
                    factors.append(self._power(a, k))
            terms.append(factors[0] if len(factors) == 1 else self._nary(z3.Z3_mk_mul, factors))
        if not terms:
            return self.const(0)
        return terms[0] if len(terms) == 1 else self._nary(z3.Z3_mk_add, terms)

    def _power(self, a: Atom, k: int) -> z3.ArithRef:
        """``a^k`` as the product of the squares ``a^(2^i)`` of ``k``'s binary digits, each square a
        variable of its own defined by ``s_2e == s_e * s_e`` (:class:`_Square`); shared by every
        monomial that has it.

        Why not one product of ``k`` copies of ``a``: Z3's nonlinear core (nla's Grobner pass) does not
        stop on such a monomial, interrupt or not (``(-b + 1)^108 + a*b*c``). The solver sees monomials
        of at most ``log2(k) + 1`` factors and degree-2 definitions. The formula is equivalent: each
        square is defined as the product of the one below, so ``a^k`` keeps its value in every model.
        ``(b + 2*a + 3)^134`` has 9,181 terms: its powers spelt out per term are 847,000 Z3 arguments,
        shared 27,000.
        """
        t = self._powers.get((a, k))
        if t is None:
            factors = [self.atom(a)] if k & 1 else []
            e = 2
            while e <= k:
                sq = self._square(a, e)
                if k & e:
                    factors.append(sq)
                e <<= 1
            t = self._powers[(a, k)] = factors[0] if len(factors) == 1 else self._nary(z3.Z3_mk_mul, factors)
        elif self._touched is not None:
            self._square(a, 1 << (k.bit_length() - 1))  # mentioned again: the chain's definitions are this formula's too
        return t

    def _square(self, a: Atom, e: int) -> z3.ArithRef:
        """``a^e`` (``e`` a power of two >= 2) as a variable defined by its square root's square."""
        key = _Square(a, e)
        t = self._atoms.get(key)  # type: ignore[call-overload]
        if t is None:
            root = self.atom(a) if e == 2 else self._square(a, e // 2)
            self._squares += 1
            t = z3.Int(f"!s{self._squares}", self.ctx)
            self._atoms[key] = t  # type: ignore[index]
            # s >= 0 is implied (a square); stated, it is one linear fact the core need not derive
            self._axioms[key] = [t == root * root, t >= 0]  # type: ignore[index]
        elif e > 2:
            self._square(a, e // 2)  # touch the chain below
        else:
            self.atom(a)
        if self._touched is not None:
            self._touched.add(key)  # type: ignore[arg-type]
        return t

    def _nary(self, mk: Callable, args: list[z3.ArithRef]) -> z3.ArithRef:
        """One n-ary Z3 term of integer ``args`` (z3.Product/Sum re-check every argument's sort, one Python call each)."""
        arr = (z3.Ast * len(args))(*(x.as_ast() for x in args))
        return z3.ArithRef(mk(self.ctx.ref(), len(args), arr), self.ctx)

    def atom(self, a: Atom) -> z3.ArithRef:
        if isinstance(a, Var):
            return self.var(a.name)
        t = self._atoms.get(a)
        if t is None:
            outer, self._touched = self._touched, set()
            try:
                t = self._encode_op(a)
                inner = self._touched
            finally:
                self._touched = outer
            self._atoms[a] = t
            self._closure[a] = frozenset(inner | {a})
        if self._touched is not None:
            self._touched |= self._closure[a]
        return t

    def _encode_op(self, a: Op) -> z3.ArithRef:
        x, y = self.expr(a.lhs), self.expr(a.rhs)
        if a.op == MAX:
            return z3.If(x >= y, x, y)
        if a.op == MIN:
            return z3.If(x <= y, x, y)
        assert a.op in (FLOORDIV, MOD), a.op
        q, r, axioms = self._division(a.lhs, a.rhs, x, y)
        self._axioms[a] = axioms
        return q if a.op == FLOORDIV else r

    def _division(self, lhs: Expr, rhs: Expr, x: z3.ArithRef, y: z3.ArithRef):
        """The one quotient/remainder pair of ``lhs / rhs`` (Python's floor semantics).

        ``x == y*q + r`` with ``0 <= r < y`` for ``y > 0`` and ``y < r <= 0`` for ``y < 0``
        defines q = x // y and r = x % y uniquely; for y == 0 nothing is asserted (the
        ladder's divisor gate keeps such valuations out of every answer).
        """
        key = (lhs, rhs)
        hit = self._divisions.get(key)
        if hit is not None:
            return hit
        n = len(self._divisions) + 1
        q = z3.Int(f"!q{n}", self.ctx)
        r = z3.Int(f"!r{n}", self.ctx)
        d = rhs.as_constant()
        if d is not None and d > 0:
            axioms = [x == y * q + r, r >= 0, r <= self.const(d - 1)]
        elif d is not None and d < 0:
            axioms = [x == y * q + r, r <= 0, r >= self.const(d + 1)]
        else:
            axioms = [z3.Implies(y != 0, z3.And(
                x == y * q + r,
                z3.Implies(y > 0, z3.And(r >= 0, r < y)),
                z3.Implies(y < 0, z3.And(r <= 0, r > y)),
            ))]
        hit = (q, r, axioms)
        self._divisions[key] = hit
        return hit

    def constraint(self, c: Constraint) -> z3.BoolRef:
        """``c`` where it is defined: a constraint holds only at valuations where its divisors are nonzero."""
        if c.kind == ">=":
            # split into linear parts where that is exact: no If case split for the solver
            parts = [self.expr(p.diff) >= 0 for p in c.parts()]
            rel = parts[0] if len(parts) == 1 else z3.And(*parts)
        else:
            rel = self.expr(c.diff) == 0
        nonzero = [self.expr(div) != 0 for div in symbolic_divisors(c.diff)]
        return z3.And(rel, *nonzero) if nonzero else rel

    def collect(self, build: Callable[[Encoder], list[z3.BoolRef]], names: Iterable[str] = (), *,
                watch: clocks.Deadline | None = None) -> tuple[list, set[Atom]]:
        """``build``'s formulas and every atom they (and the variables ``names``) mention.

        ``watch``: the question's clock; building raises :class:`DeadlinePassed` once it has passed
        (the engine's calls catch it: an input as large as the question must not outlive it). Other
        users of the Encoder (CLI scripts) give none and never see it. An encoder is used by one
        thread at a time (the shared one under ``Z3_LOCK``, a fresh one by its question's)."""
        outer, self._touched = self._touched, set()
        outer_watch, self._watch = self._watch, watch if watch is not None else self._watch
        try:
            goals = build(self)
            for n in names:
                self.var(n)
            return goals, self._touched
        finally:
            self._touched, self._watch = outer, outer_watch

    def axioms_of(self, atoms: Iterable[Atom]) -> list[z3.BoolRef]:
        out: list[z3.BoolRef] = []
        seen: set[int] = set()
        for a in sorted(atoms, key=lambda a: a.sort_key()):
            for ax in self._axioms.get(a, ()):
                if ax.get_id() not in seen:  # floordiv and mod of one division share axioms
                    seen.add(ax.get_id())
                    out.append(ax)
        return out

    def all_axioms(self) -> list[z3.BoolRef]:
        """Every axiom encoded so far (for self-contained SMT-LIB scripts)."""
        return self.axioms_of(self._axioms)

    def axiom_labels(self) -> dict[int, str]:
        """What each axiom encoded so far defines, by Z3 id (the comments of SMT-LIB scripts)."""
        labels: dict[int, str] = {}
        for key, axioms in self._axioms.items():
            if isinstance(key, Var):
                label = f"{key.name} >= 1 (dimension variable)"
            elif isinstance(key, _Square):
                label = f"definition of {key.atom}^{key.exp} as a variable (a square of the power below)"
            else:
                label = "definition of a floordiv/mod by a symbolic divisor (Python semantics)"
            for ax in axioms:
                labels.setdefault(ax.get_id(), label)
        return labels
