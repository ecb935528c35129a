"""pytest plugin (entry point ``pytest11``): ``pytest --smtdims`` and ``@pytest.mark.smtdims``.

``--smtdims`` installs smtdims for the whole session (collection included), so any test
suite that exports with symbolic shapes runs on smtdims' reasoning; the marker installs
it for one test (``@pytest.mark.smtdims(budget=..., equality=...)``). At the end the
terminal summary says who answered JAX's dimension questions (stock JAX / smtdims), how
the reasoner answered (fast path / solver / unknowns) and every comparison that stayed
inconclusive, with the user code line that asked it and the first fix the solver
verified (the first round of ``smtdims export --fix``: the weakest verified fix, a relation
before a bound that excludes more), and every failed export, whether the test failed on it
or caught it (``pytest.raises``): a reshape whose size may not divide, with the spec rewrite
(``2*b``) that settles it, or a broadcast of two sizes
smtdims could not prove equal (``x + pos_table[:t]``: ``t`` against ``min(512, t)``), with its
fix (``t <= 512``) and the ``smtdims export ... --fix`` command: those are the places where a
constraint or a different spec is needed. The failed test's own report shows the same hint,
a note smtdims adds to JAX's error (:func:`smtdims_jax.hints.add_broadcast_hint`).
``smtdims run script.py`` prints the same summary (:mod:`smtdims_jax.run`).

JAX and smtdims are imported only once the option or the marker is used, so the plugin
costs nothing in test runs that use neither.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest


def _current_test() -> str:
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]


class _Recorder:
    """Session / marker bookkeeping around :class:`smtdims_jax.run.Recorder` (shared with
    ``smtdims run``, so both print the same summary), created on first use so that
    JAX is imported only when the option or the marker is used."""

    def __init__(self) -> None:
        self.session = False  # installed for the whole session (--smtdims)
        self._installation = ExitStack()  # the session's: closing it restores what was there before
        self.marked_tests = 0
        self._core: Any = None

    @property
    def core(self) -> Any:
        if self._core is None:
            from smtdims_jax.run import Recorder

            self._core = Recorder(label=_current_test, skip_modules=("pytest", "_pytest", "pluggy", "smtdims_pytest"))
        return self._core

    # -- installation ------------------------------------------------------------------------------------
    def listen(self) -> None:
        self.core.listen()

    def unlisten(self) -> None:
        self.core.unlisten()

    def start_session(self) -> None:
        import smtdims_jax

        from smtdims.reasoner import prestart_workers

        self._installation.enter_context(smtdims_jax.enabled())
        # a failed export a test catches (pytest.raises) is listed too, as `smtdims run` lists it
        self._installation.enter_context(self.core.watch_exports())
        prestart_workers()  # their start overlaps the collection instead of the first tests
        self.session = True
        self.listen()

    def stop_session(self) -> None:
        if self.session:
            self.session = False
            self.unlisten()
            self._installation.close()

    def ensure_installed(self) -> None:
        """Session mode: a test that uninstalled smtdims (e.g. to compare with stock) must not leak that."""
        import smtdims_jax

        if not smtdims_jax.is_installed():
            smtdims_jax.install()

    @contextmanager
    def for_test(self, budget: int | None = None, equality: bool = True) -> Iterator[None]:
        import smtdims_jax

        self.marked_tests += 1
        self.listen()
        try:
            # the budget is scoped to the block; a failed export the test catches is listed too
            with smtdims_jax.enabled(budget=budget, equality=equality), self.core.watch_exports():
                yield
        finally:
            self.unlisten()

    # -- reporting ---------------------------------------------------------------------------------------
    @property
    def used(self) -> bool:
        return self.session or self.marked_tests > 0 or (self._core is not None and bool(self._core.events))

    def to_dict(self) -> dict[str, Any]:
        return {"session": self.session, "marked_tests": self.marked_tests, **self.core.to_dict()}

    def merge(self, d: dict[str, Any]) -> None:
        """Add a pytest-xdist worker's record."""
        self.marked_tests += d["marked_tests"]
        self.session = self.session or d["session"]
        self.core.merge(d)

    def summary_lines(self) -> list[str]:
        scope = "the whole session" if self.session else f"{self.marked_tests} marked test(s)"
        return self.core.summary_lines(scope)


_KEY = pytest.StashKey[_Recorder]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("smtdims").addoption(
        "--smtdims", action="store_true", default=False,
        help="install smtdims (exact reasoning about jax.export symbolic dimensions) for the whole session "
             "and report its decisions and the inconclusive comparisons at the end",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "smtdims(budget=None, equality=True): install smtdims for this test (jax.export's dimension reasoning)",
    )
    rec = _Recorder()
    config.stash[_KEY] = rec
    if config.getoption("smtdims", False):
        rec.start_session()


def pytest_unconfigure(config: pytest.Config) -> None:
    rec = config.stash.get(_KEY, None)
    if rec is not None:
        rec.stop_session()


@pytest.fixture(autouse=True)
def _smtdims_install(request: pytest.FixtureRequest) -> Iterator[None]:
    """Applies ``@pytest.mark.smtdims``; under ``--smtdims`` re-installs if an earlier test uninstalled."""
    rec = request.config.stash.get(_KEY, None)
    marker = request.node.get_closest_marker("smtdims")
    if rec is None:
        yield
        return
    if rec.session:
        rec.ensure_installed()
    if marker is None:
        yield
        return
    unknown = set(marker.kwargs) - {"budget", "equality"}
    if unknown or marker.args:
        raise pytest.UsageError(f"@pytest.mark.smtdims takes budget= and equality= only; got {marker.args} {marker.kwargs}")
    with rec.for_test(**marker.kwargs):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A test that failed on a reshape's "The remainder ... should be 0" or on a broadcast smtdims
    could not prove gets that failure and its fix in the summary (inconclusive comparisons are
    recorded as they are asked)."""
    yield
    rec = item.config.stash.get(_KEY, None)
    exc = call.excinfo.value if call.excinfo is not None else None
    if rec is None or rec._core is None or exc is None:
        return
    from smtdims_jax.run import failure_kind  # the classification `smtdims run` uses

    if failure_kind(exc) is None:
        return
    try:
        rec.core.record_failure(exc, label=item.nodeid, where=f"{item.location[0]}:{item.location[1] + 1}")
    except Exception:  # the summary must never break a test run
        pass


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    rec = config.stash.get(_KEY, None)
    if rec is None or not rec.used or hasattr(config, "workerinput"):
        return
    terminalreporter.write_sep("=", "smtdims")
    for line in rec.summary_lines():
        terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist, a worker hands its record to the controller."""
    rec = session.config.stash.get(_KEY, None)
    if rec is not None and rec.used and hasattr(session.config, "workeroutput"):
        session.config.workeroutput["smtdims"] = rec.to_dict()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    rec = node.config.stash.get(_KEY, None)
    data = getattr(node, "workeroutput", {}).get("smtdims")
    if rec is not None and data:
        rec.merge(data)
