"""pytest plugin (entry point ``pytest11``): ``pytest --smtdims`` and ``@pytest.mark.smtdims``.

``--smtdims`` installs smtdims for the whole session (collection included), so any test
suite that exports with symbolic shapes runs on smtdims' reasoning; the marker installs
it for one test (``@pytest.mark.smtdims(budget=..., equality=...)``). At the end the
terminal summary says who answered JAX's dimension questions (stock JAX / smtdims), how
the reasoner answered (fast path / solver / unknowns) and every comparison that stayed
inconclusive, with the user code line that asked it: those are the places where a
constraint or a different spec is needed.

JAX and smtdims are imported only once the option or the marker is used, so the plugin
costs nothing in test runs that use neither.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

_STATS_KEYS = ("stock_answers", "fast_path_answers", "solver_answers", "solver_checks", "solver_unknowns", "cache_hits")


def _library_dirs() -> tuple[str, ...]:
    """Directories whose frames are not "user code" when locating a comparison."""
    import jax
    import smtdims_jax

    import smtdims

    dirs = [os.path.dirname(m.__file__ or "") for m in (jax, smtdims, smtdims_jax, pytest)]
    dirs += [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.__file__)]
    for name in ("jaxlib", "pluggy", "_pytest", "numpy"):
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "__file__", None):
            dirs.append(os.path.dirname(mod.__file__))
    return tuple(d + os.sep for d in dirs if d)


class _Recorder:
    """Collects decision events and reasoner counters while smtdims is installed by this plugin."""

    def __init__(self) -> None:
        self.session = False  # installed for the whole session (--smtdims)
        self.marked_tests = 0
        self.events: Counter[tuple[str, str]] = Counter()  # (kind, answered_by) -> count
        self.eq_proven = 0  # == answered True by a smtdims proof where stock JAX said False
        self.inconclusive: dict[tuple[str, str], dict[str, Any]] = {}
        self.stats: Counter[str] = Counter()
        self._snapshot: dict[str, int] | None = None
        self._skip: tuple[str, ...] | None = None
        self._listening = 0

    # -- events --------------------------------------------------------------------------------------
    def __call__(self, event: dict[str, Any]) -> None:
        kind, by = event.get("kind", "?"), event.get("answered_by", "?")
        self.events[(kind, by)] += 1
        if kind == "eq" and event.get("answer") is True and by == "smtdims":
            self.eq_proven += 1
        if kind == "compare" and event.get("answer") == "inconclusive":
            where = self._user_location()
            key = (str(event.get("question", "?")), where)
            entry = self.inconclusive.setdefault(key, {"count": 0, "tests": []})
            entry["count"] += 1
            test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
            if test and test not in entry["tests"]:
                entry["tests"].append(test)

    def _user_location(self) -> str:
        if self._skip is None:
            self._skip = _library_dirs()
        for frame in reversed(traceback.extract_stack()[:-2]):
            path = os.path.abspath(frame.filename)
            if not path.startswith(self._skip) and not frame.filename.startswith("<frozen"):
                rel = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
                return f"{rel}:{frame.lineno} in {frame.name}"
        return "(no user frame found)"

    # -- installation ------------------------------------------------------------------------------------
    def _counters(self) -> dict[str, int]:
        import smtdims

        s = smtdims.stats()
        return {k: int(s.get(k, 0)) for k in _STATS_KEYS}

    def listen(self) -> None:
        import smtdims_jax

        if self._listening == 0:
            smtdims_jax.add_listener(self)
            self._snapshot = self._counters()
        self._listening += 1

    def unlisten(self) -> None:
        import smtdims_jax

        self._listening -= 1
        if self._listening == 0:
            smtdims_jax.remove_listener(self)
            self._take_counters()

    def _take_counters(self) -> None:
        if self._snapshot is not None:
            now = self._counters()
            self.stats.update({k: now[k] - self._snapshot[k] for k in _STATS_KEYS})
            self._snapshot = self._counters() if self._listening else None

    def start_session(self) -> None:
        import smtdims_jax

        smtdims_jax.install()
        self.session = True
        self.listen()

    def stop_session(self) -> None:
        import smtdims_jax

        if self.session:
            self.session = False
            self.unlisten()
            smtdims_jax.uninstall()

    def ensure_installed(self) -> None:
        """Session mode: a test that uninstalled smtdims (e.g. to compare with stock) must not leak that."""
        import smtdims_jax

        if not smtdims_jax.is_installed():
            smtdims_jax.install()

    @contextmanager
    def for_test(self, budget: int | None = None, equality: bool = True) -> Iterator[None]:
        import smtdims_jax

        from smtdims.reasoner import CONFIG

        saved_budget = CONFIG.budget
        self.marked_tests += 1
        self.listen()
        try:
            with smtdims_jax.enabled(budget=budget, equality=equality):
                yield
        finally:
            CONFIG.budget = saved_budget
            self.unlisten()

    # -- reporting ---------------------------------------------------------------------------------------
    @property
    def used(self) -> bool:
        return self.session or self.marked_tests > 0 or bool(self.events)

    def to_dict(self) -> dict[str, Any]:
        self._take_counters()
        return {
            "session": self.session,
            "marked_tests": self.marked_tests,
            "events": [[k, b, n] for (k, b), n in self.events.items()],
            "eq_proven": self.eq_proven,
            "stats": dict(self.stats),
            "inconclusive": [[q, w, e["count"], e["tests"]] for (q, w), e in self.inconclusive.items()],
        }

    def merge(self, d: dict[str, Any]) -> None:
        """Add a pytest-xdist worker's record."""
        self.marked_tests += d["marked_tests"]
        self.session = self.session or d["session"]
        for k, b, n in d["events"]:
            self.events[(k, b)] += n
        self.eq_proven += d["eq_proven"]
        self.stats.update(d["stats"])
        for q, w, n, tests in d["inconclusive"]:
            entry = self.inconclusive.setdefault((q, w), {"count": 0, "tests": []})
            entry["count"] += n
            entry["tests"] += [t for t in tests if t not in entry["tests"]]

    def summary_lines(self) -> list[str]:
        self._take_counters()
        st = self.stats
        scope = "the whole session" if self.session else f"{self.marked_tests} marked test(s)"
        def count(kind: str, by: str | None = None) -> int:
            return sum(n for (k, b), n in self.events.items() if k == kind and (by is None or b == by))

        lines = [
            f"smtdims was installed for {scope}",
            f"jax.export questions: {count('bounds')} bounds (stock JAX's sound linear procedure "
            f"{count('bounds', 'stock')}, smtdims {count('bounds', 'smtdims')}), {count('compare')} comparisons, "
            f"{count('eq')} equalities ({self.eq_proven} proven by smtdims where stock JAX said False)",
            f"reasoner: fast path {st['fast_path_answers']}, solver {st['solver_answers']} "
            f"({st['solver_checks']} Z3 checks, {st['solver_unknowns']} unknown), cache hits {st['cache_hits']}",
            f"inconclusive comparisons: {sum(e['count'] for e in self.inconclusive.values())}",
        ]
        for (q, where), e in sorted(self.inconclusive.items(), key=lambda kv: kv[0][1]):
            times = f" (x{e['count']})" if e["count"] > 1 else ""
            tests = f" [{', '.join(e['tests'][:3])}{', ...' if len(e['tests']) > 3 else ''}]" if e["tests"] else ""
            lines.append(f"  {where}: {q}{times}{tests}")
        return lines


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
