"""Presentation: what notebooks and ``_repr_html_`` show of the language's values.

- :mod:`smtdims.show.html`: HTML tables whose cells are left-aligned (Jupyter right-aligns them).
- :mod:`smtdims.show.forms`: sympy and LaTeX forms of dimension expressions (sympy on first use).
- :mod:`smtdims.show.plot`: feasible-region pictures, classified exactly (matplotlib on first use).

The package imports none of them, so the answers' HTML costs no import of the others.
"""
