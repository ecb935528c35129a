"""The rungs of the ladder below the solver: sound interval rules, known points, ray certificates,
cases on a symbolic divisor and the bound search. The order they are walked in is
:mod:`smtdims.rungs.table`'s, walked by :mod:`smtdims.ladder`; what they may ask of a scope is
:mod:`smtdims.rungs.protocol`."""
