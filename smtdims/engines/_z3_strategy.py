"""The solvers smtdims checks with, in one place for the caller and the Z3 worker process.

This file imports nothing from smtdims (only z3): :mod:`smtdims.engines._z3_worker` loads it by path, so
a check gets the same strategy and parameters whether it runs in the caller or in the worker.
"""

from __future__ import annotations

import z3

# Linear checks first try Z3's older arithmetic solver (arith.solver=2): at scale it is 10-50x
# faster on satisfiable checks over hundreds of difference and divisibility constraints. It does not
# always honour rlimit (a 2-variable check with a mod can run to the question's deadline), so it runs
# under a short timeout, long enough for its checks at that scale, and the default solver takes over
# on anything but sat/unsat. Either one's sat/unsat is the same
# fact, so the answer does not depend on which one finished; Z3's own timeout, unlike an
# interrupt, is withdrawn when the check ends.
FAST_TIMEOUT_MS = 100

# Models are not compacted: ``model.compact`` compacts the graphs of function interpretations (Z3's
# auxiliary ones, for divisions and the like), never a constant's value, and smtdims reads constants
# alone. At hundreds of variables and constraints compaction is a third of ``Solver.model()`` after an
# incremental check (about two models a bounds query), and every constant has the same value either
# way (compared on models of ``benchmarks/bench_scale.py``'s queries).


def solver(ctx: z3.Context, budget: int, *, fast: bool = False, nonlinear: bool = False) -> z3.Solver:
    """A solver with the budget and a fixed seed; ``fast``: the older arithmetic solver, time-limited;
    ``nonlinear``: for one check without assumptions of a nonlinear formula (:func:`nonlinear_tactic`)."""
    s = nonlinear_tactic(ctx).solver() if nonlinear else z3.Solver(ctx=ctx)
    s.set("rlimit", budget)
    s.set("random_seed", 0)
    s.set("model.compact", False)
    if fast:
        s.set("arith.solver", 2)
        s.set("timeout", FAST_TIMEOUT_MS)
    return s


def nonlinear_tactic(ctx: z3.Context) -> z3.Tactic:
    """Z3's QF_NIA preamble and its SMT core: the strategy of every non-incremental nonlinear check.

    Why not ``z3.Solver()``: on a nonlinear formula its first check runs Z3's ``qfnia`` tactic,
    whose stages stop at memory caps (20 MB for ``cofactor-term-ite``, 100 MB for bit-blasting)
    compared with the whole process's Z3 allocation counter, and two of whose stages stop after
    2 and 3 seconds of wall clock. The same check then got another answer in a process holding more
    Z3 memory (every live context adds about 16 MB): 70 of 3,500 fuzz answers differed between a
    fresh and a warmed-up process. This strategy has neither: every step is bounded
    by the check's rlimit alone, so its answer is a function of the formula and the budget.

    It is qfnia's preamble (simplify, propagate-values, ctx-simplify, elim-uncnstr: rewrites that
    preserve satisfiability, with model converters for the models) without the memory-capped
    ``cofactor-term-ite``, the 0-1 ``lia2card`` and ``solve-eqs`` (with it, the reshape check of
    ``tests/core/test_determinism.py`` ran out of budget), then the sum-of-monomials simplification and the
    SMT core (``smt``) that qfnia runs in its later stages; ``qfnra-nlsat`` only where the SMT core
    gives up as incomplete. The bit-blasting stage is left out: without its memory cap it spent the
    whole rlimit blasting 64-bit products, and with a step cap instead it lost 13 answers of 204.
    Measured on the fuzz's nonlinear questions (``tools/fuzz.py``'s generator, seeds 0 and 1: 496
    answers at the default budget and a tenth of it, in process): 28 answers more precise than with
    ``z3.Solver()`` (a decision, or a tight end), 5 less precise, in about 70% of the time; the same rlimit
    count, unit for unit, with 80 MB of unrelated Z3 terms alive (``tests/core/test_determinism.py``).
    """
    cached = getattr(ctx, "_smtdims_nia", None)
    if cached is not None:
        return cached

    def tac(name: str, **params: object) -> z3.Tactic:
        t = z3.Tactic(name, ctx)
        return z3.With(t, **params) if params else t

    preamble = z3.Then(
        tac("simplify"), tac("propagate-values"),
        tac("ctx-simplify", max_depth=30, max_steps=5_000_000),
        tac("simplify", pull_cheap_ite=True, local_ctx=True, local_ctx_limit=10_000_000),
        tac("elim-uncnstr"),
    )
    smt_core = z3.Then(tac("simplify", som=True), tac("smt"))
    nlsat = z3.Then(tac("simplify", som=True), tac("qfnra-nlsat"), tac("fail-if-undecided"))
    t = z3.Then(preamble, z3.OrElse(smt_core, nlsat))
    ctx._smtdims_nia = t  # type: ignore[attr-defined]  # one per context: the context's checks share it
    return t
