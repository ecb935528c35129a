"""Shared fixtures. JAX runs on CPU in tests; GPU-only checks skip cleanly without one."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest  # noqa: E402


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
