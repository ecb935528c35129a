"""The tests, by layer (each a folder; helpers shared by several layers stay here, imported as ``tests.NAME``).

core/        the reasoner alone: smtdims, z3, sympy, hypothesis (CI runs it where JAX is not installed)
jax/         the JAX plugin below the pipeline: the seam, conversion, equality, the drop-in, audit, pytest --smtdims
pipeline/    export_and_verify, the fix loop, dims="auto", the models, `smtdims export` and `smtdims run`
properties/  random cases against brute force, ISL and the fuzzer's oracle (oracle.py, regressions/)
docs/        the README, the pages, the notebook, the benchmarks' quick run, the module structure

Shared here: ``strategies`` (random cases), ``fuzz_tool`` (tools/fuzz.py as a module), ``fixtures_pipeline``
(the functions the pipeline's tests, the pages' transcripts and the benchmarks export).

The folders are packages and the repository's root is what goes on ``sys.path`` (pytest puts it there):
never ``tests/`` itself, where ``tests/jax`` would be imported in place of JAX.
"""
