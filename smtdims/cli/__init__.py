"""The ``smtdims`` command line: bounds, decisions, explanations, constraint checks, ``run``.

    smtdims bounds '2*b + 1' 'b - 1' -c 'b >= 128' -c 'b <= 1024'   (one answer per EXPR)
    smtdims decide 'a + 1' '>=' b            (one query: LHS OP RHS as three arguments)
    smtdims decide 'a >= 1' 'b <= a'         (several queries: each argument a comparison)
    smtdims explain 'b >= 16'                (a comparison; or an expression: its bounds)
    smtdims check-constraints 'a >= b' 'b >= a + 1'   (or -c 'a >= b' -c 'b >= a + 1')
    smtdims run script.py [ARGS...]          (run a program with smtdims installed; also -m MODULE)
    smtdims export ... | smtdims verify ...  (the export pipeline, when installed)

``--json`` prints machine-readable output (one object per query; a list when several
queries were given), ``--smtlib`` the SMT-LIB2 script of the query (pipe it into any SMT
solver), ``--budget N`` sets Z3's deterministic rlimit, ``--deadline SECONDS`` a wall-clock
limit. Exit status (see :data:`~smtdims.cli.common.EXIT_STATUS_TABLE`): 0 true, 1 false, 2 usage
or input error, 3 undetermined, 4 unknown, 70 internal error, 130 interrupted. Malformed input
prints one line naming the position; ``--debug`` adds the traceback.

One module per command (:mod:`.bounds`, :mod:`.decide`, :mod:`.explain`, :mod:`.check_constraints`,
:mod:`.run`; :mod:`.export` hands ``export`` and ``verify`` to the plugin that declares them), what
they share in :mod:`.common`, ``--smtlib`` in :mod:`.smtlib`, Ctrl-C in :mod:`.interrupts`, and the
choice of command in :mod:`.dispatch`. A new command: a module with ``NAME``, ``add_parser(subs,
common)`` and ``run(args)``, listed in ``dispatch.QUESTIONS``.
"""

from __future__ import annotations

from .dispatch import main

__all__ = ["main"]
