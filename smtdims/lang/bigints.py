"""Exact text of ints of any size, both ways.

Why: Python's ``str`` refuses ints past 4,300 digits and ``int`` refuses such text
(``sys.set_int_max_str_digits`` is process-wide, so a library may not lift it), yet bounds and
witnesses of dimension questions can be that large. :func:`int_text` and :func:`text_int` carry
them exactly (JSON, SMT-LIB, Z3's models); :func:`readable_int` is what people read.
"""

from __future__ import annotations

_BIG = 10**4000


def int_text(value: int) -> str:
    """Decimal text of any int (Python's ``str`` refuses more than 4,300 digits)."""
    if -_BIG < value < _BIG:
        return str(value)
    if value < 0:
        return "-" + int_text(-value)
    hi, lo = divmod(value, _BIG)
    return int_text(hi) + str(lo).zfill(4000)


def text_int(text: str) -> int:
    """Inverse of :func:`int_text`: the int of decimal text of any length."""
    if len(text) <= 4000:
        return int(text)
    neg = text.startswith("-")
    digits = text[1:] if neg else text
    value = 0
    for i in range(0, len(digits), 4000):
        chunk = digits[i:i + 4000]
        value = value * 10 ** len(chunk) + int(chunk)
    return -value if neg else value


READABLE_DIGITS = 100  # below 10**100 an int prints as Python prints it
_READABLE = 10**READABLE_DIGITS
_NEAR = 10**6  # a remainder this small next to a power still reads at a glance
_LEAD = 20  # at most this many leading digits (bits) before the power


def readable_int(value: int) -> str:
    """Exact text of any int that a reader takes in at a glance and smtdims' parser reads back.

    Below 10**100 (:data:`READABLE_DIGITS` digits) as Python prints it; beyond, ``10^5000``,
    ``5*10^4999``, ``10^5000 - 1`` or ``3*2^20000 + 7`` (``m*B^k + r`` with base 10 or 2, ``m``
    and ``r`` short) when such a form exists, else the decimal digits (:func:`int_text`).
    Why: a 5,000-digit line helps nobody. A form with a remainder contains a space: put it in
    parentheses inside a product or after ``-``.
    """
    if -_READABLE < value < _READABLE:
        return str(value)
    if value < 0:
        text = readable_int(-value)
        return f"-({text})" if " " in text else f"-{text}"
    if value & (value - 1) == 0:  # a power of two: no decimal search through a million bits
        return f"2^{value.bit_length() - 1}"
    forms = [f for f in (_near_power(value, 10), _near_power(value, 2)) if f is not None]
    return min(forms, key=len) if forms else int_text(value)


def _near_power(value: int, base: int) -> str | None:
    """``m*base^k + r`` (shortest ``m`` first, ``|r| < 10**6``) for ``value > 0``, or None."""
    if base == 2:
        size = value.bit_length()
    else:  # the number of decimal digits, from the bit length (off by at most one)
        size = int(value.bit_length() * 0.30102999566398120) + 1
        if value < 10 ** (size - 1):
            size -= 1
    # value = m*base^k + r with base^k0 | base^k gives value = r (mod base^k0), k0 the smallest k
    # tried: unless that residue is within _NEAR of 0 or of base^k0, no k fits (one division for
    # the typical coefficient instead of the loop below, which printing an expanded power runs
    # once per coefficient)
    k0 = size - _LEAD
    if k0 > 0 and base**k0 > 2 * _NEAR:
        low = value % base**k0
        if _NEAR <= low <= base**k0 - _NEAR:
            return None
    for lead in range(1, _LEAD + 1):
        k = size - lead
        if k <= 0:
            return None
        power = base**k
        m = value // power
        for mm in (m, m + 1):
            r = value - mm * power
            if -_NEAR < r < _NEAR and mm > 0:
                kk = k
                while mm % base == 0:  # 10*10^k is 10^(k+1)
                    mm //= base
                    kk += 1
                head = f"{base}^{kk}" if mm == 1 else f"{mm}*{base}^{kk}"
                return head if r == 0 else f"{head} + {r}" if r > 0 else f"{head} - {-r}"
    return None
