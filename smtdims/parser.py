"""Parser for the jax.export dimension syntax: ``2*b + 1``, ``mod(b, 3)``, ``max(a, b) - a``.

Accepts what ``jax.export.symbolic_shape`` accepts for one dimension (``+ - *``,
``^`` powers, integer constants, ``floordiv/mod/max/min(e1, e2)``), plus
parentheses, ``**``, ``//`` and ``%`` for convenience. Errors carry the
position of the offending character so the CLI can point at it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import ParseError
from .expr import FLOORDIV, MAX, MOD, OPERATIONS, Expr, deep_recursion

# Deep enough for any real shape, shallow enough for Python's stack.
MAX_NESTING = 400

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>\*\*|//|>=|<=|==|!=|[-+*^%(),<>]))"
)

COMPARISONS = (">=", "<=", "==", "!=", ">", "<")
CONSTRAINT_COMPARISONS = (">=", "<=", "==")


@dataclass(frozen=True)
class _Tok:
    kind: str  # "num" | "name" | "op" | "end"
    text: str
    pos: int


def _tokenize(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            toks.append(_Tok("end", "", pos))
            return toks
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ParseError(text, pos, f"unexpected character {text[pos]!r}")
        kind = m.lastgroup or "op"
        start = m.start(kind)
        tok = m.group(kind)
        if kind == "num" and not tok.isdigit():
            raise ParseError(text, start, f"dimension constants must be integers, got {tok!r}")
        toks.append(_Tok(kind, tok, start))
        pos = m.end()


class _Parser:
    def __init__(self, text: str):
        if not isinstance(text, str):
            raise TypeError(f"expected a string expression, got {type(text).__name__}: {text!r}")
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0
        self.nesting = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def error(self, msg: str, tok: _Tok | None = None) -> ParseError:
        return ParseError(self.text, (tok or self.tok).pos, msg)

    def advance(self) -> _Tok:
        t = self.tok
        self.i += 1
        return t

    def expect(self, text: str) -> None:
        if self.tok.text != text or self.tok.kind == "end":
            found = "end of input" if self.tok.kind == "end" else repr(self.tok.text)
            raise self.error(f"expected {text!r}, found {found}")
        self.advance()

    def at_end(self) -> None:
        if self.tok.kind != "end":
            raise self.error(f"unexpected {self.tok.text!r} after a complete expression")

    # expr := ['+'|'-'] term (('+'|'-') term)*
    def expr(self) -> Expr:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise self.error(f"expression nested deeper than {MAX_NESTING} levels")
        sign = 1
        if self.tok.text in ("+", "-") and self.tok.kind == "op":
            sign = -1 if self.advance().text == "-" else 1
        result = self.term() * sign
        while self.tok.kind == "op" and self.tok.text in ("+", "-"):
            op = self.advance().text
            rhs = self.term()
            result = result + rhs if op == "+" else result - rhs
        self.nesting -= 1
        return result

    # term := power (('*'|'//'|'%') power)*
    def term(self) -> Expr:
        result = self.power()
        while self.tok.kind == "op" and self.tok.text in ("*", "//", "%"):
            op_tok = self.advance()
            rhs = self.power()
            if op_tok.text == "*":
                result = result * rhs
            else:
                result = self._divide(FLOORDIV if op_tok.text == "//" else MOD, result, rhs, op_tok)
        return result

    # power := unary (('^'|'**') INT)?
    def power(self) -> Expr:
        base = self.unary()
        if self.tok.kind == "op" and self.tok.text in ("^", "**"):
            self.advance()
            t = self.tok
            if t.kind != "num":
                raise self.error("expected a non-negative integer exponent")
            self.advance()
            return base ** int(t.text)
        return base

    def unary(self) -> Expr:
        if self.tok.kind == "op" and self.tok.text == "-":
            self.advance()
            return -self.unary()
        return self.atom()

    def atom(self) -> Expr:
        t = self.tok
        if t.kind == "num":
            self.advance()
            return Expr.const(int(t.text))
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

    def _divide(self, op: str, lhs: Expr, rhs: Expr, tok: _Tok) -> Expr:
        if rhs.as_constant() == 0:
            raise self.error(f"{op} by zero", tok)
        return lhs.floordiv(rhs) if op == FLOORDIV else lhs.mod(rhs)


def parse_expr(text: str) -> Expr:
    """Parse one dimension expression."""
    p = _Parser(text)
    if p.tok.kind == "end":
        raise p.error("empty expression")
    with deep_recursion():  # about six frames per nesting level
        e = p.expr()
    p.at_end()
    return e


def _split_comparison(text: str, allowed: tuple[str, ...]) -> tuple[str, str, str, int]:
    # Tokenize once to find the single top-level comparison operator.
    toks = _tokenize(text)
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
