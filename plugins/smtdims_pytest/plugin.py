"""pytest plugin entry point (registered under ``pytest11``)."""

from __future__ import annotations


def pytest_addoption(parser) -> None:  # replaced by the full plugin (issue 4)
    parser.getgroup("smtdims").addoption(
        "--smtdims", action="store_true", default=False, help="run the session with smtdims installed"
    )
