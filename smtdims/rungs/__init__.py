"""The rungs of the ladder below the solver: sound interval rules, known points, ray certificates,
cases on a symbolic divisor and the bound search. The order they are walked in is
:mod:`smtdims.reasoner`'s."""
