"""The reasoner alone (smtdims, z3, sympy, hypothesis): no JAX. CI runs this folder in a venv without JAX
(scripts/test_core.sh); a test that needs JAX for one case says so (``@pytest.mark.needs_jax``, or
``pytest.importorskip``) and is skipped there."""
