"""Parser for the jax.export dimension syntax: ``2*b + 1``, ``mod(b, 3)``, ``max(a, b) - a``.

Accepts what ``jax.export.symbolic_shape`` accepts for one dimension (``+ - *``,
``^`` powers, integer constants, ``floordiv/mod/max/min(e1, e2)``), plus
parentheses, ``**``, ``//`` and ``%`` for convenience. Errors carry the
position of the offending character so the CLI can point at it.

Precedence and associativity are Python's, loosest first::

    expr     := term (('+' | '-') term)*
    term     := factor (('*' | '//' | '%') factor)*          # left-associative
    factor   := ('+' | '-') factor | power                   # so -a^2 == -(a^2)
    power    := atom [('^' | '**') exponent]
    exponent := INT [('^' | '**') exponent]                 # right-associative: a^2^3 == a^8
    atom     := INT | NAME | '(' expr ')' | OP '(' expr ',' expr ')'

``^`` is a synonym of ``**``; exponents are non-negative integer literals.
One form is refused because jax.export and Python read it differently: a minus
sign right before a number raised to a power, after another operator
(``a*-2^2`` is ``4*a`` to jax.export and ``-4*a`` to Python).

Names are those jax.export accepts: runs of Unicode letters, digits and ``_``
that do not start with a digit (``batch_1``, ``β``, ``a²``; what Python 3.11's
``tokenize`` reads as one NAME), and Python identifiers (``x̃``; what newer
Pythons' tokenizer reads as one). They are not normalised: ``ﬁ`` and ``fi`` differ,
as in JAX.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ParseError
from .expr import FLOORDIV, MAX, MOD, OPERATIONS, Expr
from .memos import PARSE_CACHE_SIZE, SizedMemo
from .polynomial import ExpansionTooLarge
from .recursion import deep_recursion

# Deep enough for any real shape, shallow enough for Python's stack.
MAX_NESTING = 400

# The largest exponent an exponent tower (``a^2^3``) may compute to; one literal
# exponent is taken as written.
MAX_TOWER_EXPONENT = 2**16

# ASCII digits only: ``\d`` would take Arabic-Indic and other decimal digits, which
# jax.export rejects. Decimals and exponents are matched to be refused clearly.
_TOKEN = re.compile(
    r"\s*(?:(?P<num>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<op>\*\*|//|>=|<=|==|!=|[-+*^%(),<>]))"
)
_WORD_CHAR = re.compile(r"\w")  # what Python 3.11's tokenize joins into one NAME
_WORDS = re.compile(r"\w+")

COMPARISONS = (">=", "<=", "==", "!=", ">", "<")
CONSTRAINT_COMPARISONS = (">=", "<=", "==")
_POWER = ("^", "**")


@dataclass(frozen=True)
class Token:
    kind: str  # "num" | "name" | "op" | "end"
    text: str
    pos: int


def _is_name_char(ch: str) -> bool:
    # Word characters (letters, digits, '_', in any script) and the other characters
    # Python identifiers may continue with (combining marks such as U+0303, U+00B7).
    return _WORD_CHAR.match(ch) is not None or ("_" + ch).isidentifier()


def _scan_name(text: str, pos: int) -> str:
    end = pos + 1
    while end < len(text) and _is_name_char(text[end]):
        end += 1
    name = text[pos:end]
    if _WORDS.fullmatch(name) is None and not name.isidentifier():
        bad = next(i for i in range(pos, end) if not _WORD_CHAR.match(text[i]))
        raise ParseError(
            text, bad,
            f"{name!r} is not a dimension name: jax.export takes a run of letters, digits and '_', "
            f"or a Python identifier, and {text[bad]!r} (U+{ord(text[bad]):04X}) makes this neither",
        )
    return name


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text`` in the jax.export syntax, ending with an ``end`` token; a character no
    token starts with is a :class:`ParseError` naming its position (readers of specifications use it)."""
    toks: list[Token] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            toks.append(Token("end", "", pos))
            return toks
        if text[pos].isidentifier():  # a character that may start an identifier (never a digit)
            name = _scan_name(text, pos)
            toks.append(Token("name", name, pos))
            pos += len(name)
            continue
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            ch = text[pos]
            hint = "" if ch.isascii() else f" (U+{ord(ch):04X})"
            raise ParseError(text, pos, f"unexpected character {ch!r}{hint}")
        kind = m.lastgroup or "op"
        start = m.start(kind)
        tok = m.group(kind)
        if kind == "num" and not tok.isdigit():
            raise ParseError(text, start, f"dimension constants must be integers, got {tok!r}")
        toks.append(Token(kind, tok, start))
        pos = m.end()


def _integer(text: str, tok: Token) -> int:
    """The exact value of an integer literal, or a ParseError past Python's int/str limit."""
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    if not limit or len(tok.text) <= limit:
        try:
            return int(tok.text)
        except ValueError:  # the limit was lowered by another thread meanwhile
            limit = sys.get_int_max_str_digits()
    raise ParseError(
        text, tok.pos,
        f"integer constant of {len(tok.text)} digits exceeds Python's limit of {limit} digits "
        "for converting between int and str (sys.get_int_max_str_digits()); use a smaller "
        "constant, or raise the limit with sys.set_int_max_str_digits(n) or the environment "
        "variable PYTHONINTMAXSTRDIGITS=n (0 lifts it)",
    )


class _Parser:
    def __init__(self, text: str):
        if not isinstance(text, str):
            raise TypeError(f"expected a string expression, got {type(text).__name__}: {text!r}")
        self.text = text
        self.toks = tokenize(text)
        self.i = 0
        self.nesting = 0

    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def error(self, msg: str, tok: Token | None = None) -> ParseError:
        return ParseError(self.text, (tok or self.tok).pos, msg)

    def advance(self) -> Token:
        t = self.tok
        self.i += 1
        return t

    def at_op(self, *ops: str) -> bool:
        return self.tok.kind == "op" and self.tok.text in ops

    def expect(self, text: str) -> None:
        if self.tok.text != text or self.tok.kind == "end":
            found = "end of input" if self.tok.kind == "end" else repr(self.tok.text)
            raise self.error(f"expected {text!r}, found {found}")
        self.advance()

    def at_end(self) -> None:
        if self.tok.kind != "end":
            raise self.error(f"unexpected {self.tok.text!r} after a complete expression")

    # expr := term (('+'|'-') term)*
    def expr(self) -> Expr:
        self.nesting += 1
        if self.nesting > MAX_NESTING:  # not reached: _parse_expr refuses such a text before the descent
            raise self.error(_too_deep())
        parts = [self.term()]
        while self.at_op("+", "-"):
            op = self.advance().text
            rhs = self.term()
            parts.append(rhs if op == "+" else -rhs)
        self.nesting -= 1
        return parts[0] if len(parts) == 1 else Expr.sum(parts)  # one pass: a sum of 1,000 terms in ms

    # term := factor (('*'|'//'|'%') factor)*, left-associative as in Python
    def term(self) -> Expr:
        result = self.factor()
        while self.at_op("*", "//", "%"):
            op_tok = self.advance()
            rhs = self.factor()
            if op_tok.text == "*":
                result = self._expand(lambda x=result, y=rhs: x * y, op_tok)
            else:
                result = self._divide(FLOORDIV if op_tok.text == "//" else MOD, result, rhs, op_tok)
        return result

    # factor := ('+'|'-') factor | power: signs bind looser than powers, tighter than '*'
    def factor(self) -> Expr:
        negate = False
        last_sign: Token | None = None
        while self.at_op("+", "-"):
            last_sign = self.advance()
            negate ^= last_sign.text == "-"
        if (last_sign is not None and last_sign.text == "-" and self.i >= 2
                and self.toks[self.i - 2].kind == "op" and self.toks[self.i - 2].text not in ("(", ",")
                and self.tok.kind == "num" and self.toks[self.i + 1].kind == "op"
                and self.toks[self.i + 1].text in _POWER):
            k, op, e = self.tok.text, self.toks[self.i + 1].text, self.toks[self.i + 2]
            p = f"{k}{op}{e.text if e.kind == 'num' else '...'}"
            raise self.error(
                f"ambiguous '-{p}' after an operator: jax.export reads it as ({'-' + k}){p[len(k):]}, "
                f"Python as -({p}); write the one you mean with parentheses",
                last_sign,
            )
        result = self.power()
        return -result if negate else result

    # power := atom [('^'|'**') exponent]
    def power(self) -> Expr:
        base = self.atom()
        if self.at_op(*_POWER):
            op_tok = self.tok
            n = self.exponent()
            return self._expand(lambda: base**n, op_tok)
        return base

    def _expand(self, product: Callable[[], Expr], tok: Token) -> Expr:
        """A product or power, or a ParseError at its operator when the expansion is too large."""
        try:
            return product()
        except ExpansionTooLarge as err:
            raise self.error(str(err), tok) from None

    # exponent := INT [('^'|'**') exponent], right-associative: a^2^3 == a^(2^3)
    def exponent(self) -> int:
        literals: list[Token] = []
        while self.at_op(*_POWER):
            op_tok = self.advance()
            t = self.tok
            if t.kind != "num":
                found = "end of input" if t.kind == "end" else repr(t.text)
                what = "negative powers are not dimensions" if t.text == "-" else f"found {found}"
                raise self.error(
                    f"an exponent must be a non-negative integer literal, as in a{op_tok.text}2; {what}"
                )
            literals.append(self.advance())
        value = _integer(self.text, literals[-1])
        for t in reversed(literals[:-1]):
            base = _integer(self.text, t)
            if base > 1 and (value > MAX_TOWER_EXPONENT.bit_length() or base**value > MAX_TOWER_EXPONENT):
                raise self.error(
                    f"the exponent tower {'^'.join(x.text for x in literals)} exceeds "
                    f"{MAX_TOWER_EXPONENT}; no dimension expression needs such a power",
                    literals[0],
                )
            value = base**value
        return value

    def atom(self) -> Expr:
        t = self.tok
        if t.kind == "num":
            self.advance()
            return Expr.const(_integer(self.text, t))
        if t.kind == "name":
            self.advance()
            if t.text in OPERATIONS and self.tok.text == "(":
                self.advance()
                lhs = self.expr()
                self.expect(",")
                rhs = self.expr()
                self.expect(")")
                if t.text in (FLOORDIV, MOD):
                    return self._divide(t.text, lhs, rhs, t)
                return lhs.max(rhs) if t.text == MAX else lhs.min(rhs)
            if t.text in OPERATIONS:
                raise self.error(f"{t.text} needs two arguments: {t.text}(e1, e2)", t)
            if self.tok.text == "(":
                raise self.error(f"unknown operation {t.text!r}; use one of {', '.join(OPERATIONS)}", t)
            return Expr.var(t.text)
        if t.kind == "op" and t.text == "(":
            self.advance()
            inner = self.expr()
            self.expect(")")
            return inner
        found = "end of input" if t.kind == "end" else repr(t.text)
        raise self.error(f"expected a number, a name or '(', found {found}")

    def _divide(self, op: str, lhs: Expr, rhs: Expr, tok: Token) -> Expr:
        if rhs.as_constant() == 0:
            raise self.error(f"{op} by zero", tok)
        return lhs.floordiv(rhs) if op == FLOORDIV else lhs.mod(rhs)


def parse_expr(text: str) -> Expr:
    """Parse one dimension expression (memoised in :data:`EXPR_MEMO`: the IR is immutable)."""
    if isinstance(text, str):
        return EXPR_MEMO(text)
    return _parse_expr(text)




def _parse_expr(text: str) -> Expr:
    p = _Parser(text)
    if p.tok.kind == "end":
        raise p.error("empty expression")
    depth, deepest = _paren_depth(p.toks)
    if depth + 1 > MAX_NESTING:
        # refused before the descent: raised in the recursion, the error carried a traceback of
        # 2,000 frames (six per level) for a 3,000-deep input
        raise ParseError(text, deepest, _too_deep(depth))
    with deep_recursion(depth):  # about six frames per nesting level
        e = p.expr()
    p.at_end()
    return e


# text -> Expr for parse_expr, bounded in size (a SizedMemo); a name of its own so that what it
# holds can be read (``held``, ``entries()``: diagnostics, tests/core/test_bounded_time.py)
EXPR_MEMO = SizedMemo(_parse_expr, 8192, PARSE_CACHE_SIZE, lambda e: e.size())


def _too_deep(depth: int | None = None) -> str:
    found = "" if depth is None else f": {depth} levels of parentheses, at most {MAX_NESTING - 1} allowed"
    return (f"expression nested too deep{found} (the limit is smtdims.lang.parser.MAX_NESTING = {MAX_NESTING} levels: "
            "the expression is one, and each parenthesis or floordiv/mod/max/min(...) one more)")


def _paren_depth(toks: list[Token]) -> tuple[int, int]:
    """The deepest parenthesis nesting of the tokens (each call or group is one level of recursion:
    the parser's nesting is this plus one), and the position of the first ``(`` past the limit."""
    depth = best = 0
    at = 0
    for t in toks:
        if t.kind != "op":
            continue
        if t.text == "(":
            depth += 1
            if depth > best:
                best = depth
                if depth == MAX_NESTING:  # the level that makes the parser's nesting MAX_NESTING + 1
                    at = t.pos
        elif t.text == ")":
            depth -= 1
    return best, at


def _split_comparison(text: str, allowed: tuple[str, ...]) -> tuple[str, str, str, int]:
    # Tokenize once to find the single top-level comparison operator.
    toks = tokenize(text)
    found = [t for t in toks if t.kind == "op" and t.text in COMPARISONS]
    if not found:
        raise ParseError(text, len(text), f"expected a comparison, one of {', '.join(allowed)}")
    if len(found) > 1:
        raise ParseError(text, found[1].pos, "only one comparison is allowed")
    t = found[0]
    if t.text not in allowed:
        raise ParseError(text, t.pos, f"unsupported comparison {t.text!r}; use one of {', '.join(allowed)}")
    return text[: t.pos], t.text, text[t.pos + len(t.text):], t.pos + len(t.text)


def parse_comparison(text: str, allowed: tuple[str, ...] = COMPARISONS) -> tuple[Expr, str, Expr]:
    """Parse ``lhs OP rhs``; positions in errors refer to ``text``."""
    lhs_s, op, rhs_s, rhs_at = _split_comparison(text, allowed)
    try:
        lhs = parse_expr(lhs_s)
    except ParseError as err:
        raise ParseError(text, err.position, err.detail) from None
    try:
        rhs = parse_expr(rhs_s)
    except ParseError as err:
        raise ParseError(text, rhs_at + err.position, err.detail) from None
    return lhs, op, rhs


def parse_constraint(text: str) -> tuple[Expr, str, Expr]:
    """Parse a jax.export constraint: ``e1 >= e2``, ``e1 <= e2`` or ``e1 == e2``."""
    if not isinstance(text, str):
        raise TypeError(f"constraints must be strings like 'a >= 16', got {type(text).__name__}: {text!r}")
    return parse_comparison(text, CONSTRAINT_COMPARISONS)
