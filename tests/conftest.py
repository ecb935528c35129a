"""Shared fixtures. JAX runs on CPU in tests; GPU-only checks skip cleanly without one.

Where JAX is not installed (CI's run of tests/core: scripts/test_core.sh), a test marked ``needs_jax`` is
skipped: the few core tests that also try a JAX object (a ``jax.export`` scope handed to explain, say)."""

from __future__ import annotations

import importlib.util
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# JAX's persistent compilation cache stays off in the suite (a user's ~/.cache is not the tests' to fill);
# tests/pipeline/test_fresh_worker.py turns it on in a temporary directory to test it
os.environ.setdefault("SMTDIMS_COMPILE_CACHE", "0")

import signal  # noqa: E402

import pytest  # noqa: E402

# A shell starts a background job (`cmd &`) with SIGINT ignored, and every child inherits that: the
# Ctrl-C tests would send a signal nothing receives. The tests run with Python's default handler.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="also run the soak tests (repeats, sweeps, stress: CI runs them; SMTDIMS_FULL_TESTS=1 too)")


def _full(config) -> bool:
    return config.getoption("--full") or os.environ.get("SMTDIMS_FULL_TESTS") == "1"


def pytest_collection_modifyitems(config, items):
    """Deselect the soak tests unless asked for: the same assertions run in CI's full mode, and a
    newcomer's ``bash scripts/test.sh`` takes minutes less."""
    if _full(config):
        return
    soak = [it for it in items if it.get_closest_marker("soak")]
    if soak:
        config.hook.pytest_deselected(items=soak)
        items[:] = [it for it in items if not it.get_closest_marker("soak")]


def jax_installed() -> bool:
    return importlib.util.find_spec("jax") is not None and importlib.util.find_spec("smtdims_jax") is not None


def pytest_runtest_setup(item):
    if item.get_closest_marker("needs_jax") and not jax_installed():
        pytest.skip("needs JAX, which is not installed here (the core's JAX-free run)")


def pytest_report_header(config):
    return None if _full(config) else "soak tests deselected (--full or SMTDIMS_FULL_TESTS=1 runs them, as CI does)"


@pytest.fixture
def installed():
    """smtdims installed for one test, stock JAX restored afterwards."""
    import smtdims

    smtdims.install()
    try:
        yield smtdims
    finally:
        smtdims.uninstall()


@pytest.fixture
def stock():
    """A test that must see stock JAX behaviour."""
    import smtdims

    smtdims.uninstall()
    yield
