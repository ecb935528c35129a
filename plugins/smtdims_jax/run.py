"""``smtdims run``: run an unmodified program with smtdims installed, then summarise.

Like ``coverage run`` or ``python -m cProfile``: :func:`run_program` installs smtdims,
runs the script (or ``-m`` module) as ``__main__`` with ``sys.argv`` set to the
program's own arguments, and at exit prints to stderr what the pytest plugin prints
at the end of a session (:class:`Recorder` is shared with it): who answered JAX's
dimension questions (stock JAX, smtdims' fast path, the solver), the solver's
unknowns, every comparison that stayed inconclusive, with the user code line
that asked it and the first fix the solver verified, and every failed export that is not
a comparison (a reshape whose size may not divide; a broadcast of two sizes smtdims could
not prove equal, with its fix and the ``smtdims export ... --fix`` command), caught or not.

The exit status is the program's: ``SystemExit``'s code, or 1 after an uncaught
exception (its traceback is printed, as Python does).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import runpy
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from . import frames

STATS_KEYS = ("stock_answers", "fast_path_answers", "solver_answers", "solver_checks", "solver_unknowns", "cache_hits")
MAX_FIXES = 20  # distinct inconclusive comparisons whose fix is computed (each costs solver calls)


def library_dirs(extra_modules: Sequence[str] = ()) -> tuple[str, ...]:
    """Directories whose frames are not "user code" when locating a comparison (:mod:`.frames`)."""
    return frames.library_dirs(tuple(extra_modules))


def _fix_for(lhs: Any, rhs: Any) -> str:
    """The first round of the export pipeline's fix loop for an inconclusive ``lhs >= rhs``: the
    weakest verified fix (settling either direction settles the comparison JAX asked; ``<``/``>``
    are computed as ``not >=``), ranked by the valuations of a small box it admits (a relation
    beats a bound that excludes more), or ``""``. Without the function there are no native runs
    and no further rounds: ``smtdims export --fix`` gives the whole fix."""
    from smtdims.answers.fixes import settling_fix
    from smtdims.reasoner import session_for

    from . import scope_constraints, to_ir

    scope = getattr(lhs, "scope", None) or getattr(rhs, "scope", None)
    if scope is None:
        return ""
    session = session_for(scope_constraints(scope))
    fix = settling_fix(session, to_ir(lhs), to_ir(rhs))
    return str(fix) if fix is not None else ""


def _remainder_fix_for(lhs: Any, remainder: str) -> str:
    """The verified spec rewrite (``v -> m*v``) for a reshape's "The remainder ... should be 0", or ``""``."""
    from smtdims.reasoner import session_for

    from . import scope_constraints
    from .pipeline.failure import remainder_fix

    scope = getattr(lhs, "scope", None)
    if scope is None:
        return ""
    fix = remainder_fix(session_for(scope_constraints(scope)), remainder)
    return str(fix) if fix is not None else ""


_REMAINDER_RE = re.compile(r"The remainder (.+?) should be 0")
_RECENT_EQ = 32  # the last ``==`` questions kept, to find the scope of a failed reshape
_RECORDED = "_smtdims_recorded"  # set on an exception once a Recorder has counted it


def failure_kind(err: BaseException) -> str | None:
    """The kind of failed export the summaries list besides inconclusive comparisons (which are
    recorded as they are asked): ``"reshape"`` for a reshape's "The remainder ... should be 0",
    ``"broadcast"`` for a broadcast whose equation smtdims could not prove (the hint of :mod:`.hints`:
    ``err.smtdims_equation``, ``smtdims_fix``, ``smtdims_command``), else None. One classification
    for ``smtdims run`` and ``pytest --smtdims``."""
    if _REMAINDER_RE.search(str(err)) is not None:
        return "reshape"
    if isinstance(getattr(err, "smtdims_equation", None), str):
        return "broadcast"
    return None


FAILED_EXPORTS = "failed exports (reshapes that may not divide, broadcasts not proven equal)"


class Recorder:
    """Collects decision events and reasoner counters while listening (:meth:`listen`).

    ``label()`` (optional) names what was running when an event arrived, e.g. the current
    test; ``skip_modules`` are extra packages whose frames are not user code.
    """

    def __init__(self, *, label: Callable[[], str] | None = None, skip_modules: Sequence[str] = ()) -> None:
        self.events: Counter[tuple[str, str]] = Counter()  # (kind, answered_by) -> count
        self.eq_proven = 0  # == answered True by a smtdims proof where stock JAX said False
        self.inconclusive: dict[tuple[str, str], dict[str, Any]] = {}
        self.stats: Counter[str] = Counter()
        self._label = label
        self._skip_modules = tuple(skip_modules)
        self.failed: dict[tuple[str, str], dict[str, Any]] = {}  # failed exports other than comparisons
        self._recent_eq: dict[str, Any] = {}  # text of a recent == operand -> the operand (its scope)
        self._snapshot: dict[str, int] | None = None
        self._skip: tuple[str, ...] | None = None
        self._listening = 0

    # -- events --------------------------------------------------------------------------------------
    def __call__(self, event: dict[str, Any]) -> None:
        kind, by = event.get("kind", "?"), event.get("answered_by", "?")
        self.events[(kind, by)] += 1
        if kind == "eq" and event.get("answer") is True and by == "smtdims":
            self.eq_proven += 1
        if kind == "eq" and event.get("answer") is False and event.get("lhs") is not None:
            key = str(event["lhs"])
            self._recent_eq.pop(key, None)
            self._recent_eq[key] = event["lhs"]
            while len(self._recent_eq) > _RECENT_EQ:
                self._recent_eq.pop(next(iter(self._recent_eq)))
        if kind == "compare" and event.get("answer") == "inconclusive":
            where = self.user_location()
            key = (str(event.get("question", "?")), where)
            entry = self.inconclusive.get(key)
            if entry is None:
                entry = self.inconclusive[key] = {"count": 0, "tests": [], "fix": None,
                                                  "operands": (event.get("lhs"), event.get("rhs"))}
            entry["count"] += 1
            label = self._label() if self._label is not None else ""
            if label and label not in entry["tests"]:
                entry["tests"].append(label)

    def record_failure(self, err: BaseException, label: str = "", where: str = "") -> None:
        """A failed export that is not an inconclusive comparison (those are recorded as they happen):
        a reshape's "The remainder ... should be 0", with the spec rewrite that settles it, or a
        broadcast of two sizes smtdims could not prove equal, with the fix and the ``smtdims export
        --fix`` command of the broadcast hint. Each exception counts once, whether the program caught
        it (:meth:`watch_exports`) or not."""
        kind = failure_kind(err)
        if kind is None or getattr(err, _RECORDED, False):
            return
        with contextlib.suppress(Exception):  # an exception class that refuses attributes: counted twice at worst
            setattr(err, _RECORDED, True)
        first = str(err).strip().splitlines()[0]
        key = (first, where)
        entry = self.failed.get(key)
        if entry is None:
            fix = command = ""
            try:
                if kind == "broadcast":
                    fix, command = str(getattr(err, "smtdims_fix", "")), str(getattr(err, "smtdims_command", ""))
                else:
                    m = _REMAINDER_RE.search(str(err))
                    lhs = self._recent_eq.get(m.group(1)) if m is not None else None
                    if lhs is not None:
                        fix = _remainder_fix_for(lhs, m.group(1))
            except Exception:  # the summary must never fail because a fix could not be computed
                fix = ""
            entry = self.failed[key] = {"count": 0, "tests": [], "fix": fix, "command": command, "kind": kind}
        entry["count"] += 1
        if label and label not in entry["tests"]:
            entry["tests"].append(label)

    @contextlib.contextmanager
    def watch_exports(self) -> Iterator[None]:
        """Record the failed exports that the program catches (``try: export.export(...)(spec) except
        ...``, or a test's ``pytest.raises``), as pytest records a failed test: ``jax.export.export``'s
        exporting function is wrapped for the block, re-raising everything unchanged. Why: an inconclusive
        comparison is seen as it is asked, but a reshape's or a broadcast's failure is only an exception,
        and a caught one left no trace. ``smtdims run`` and ``pytest --smtdims`` both watch, so that their
        summaries list the same failures."""
        mod = sys.modules.get("jax.export")
        real = getattr(mod, "export", None)
        if mod is None or real is None or getattr(real, "_smtdims_watch", False):
            yield
            return

        @functools.wraps(real)
        def export(*args: Any, **kwargs: Any) -> Any:
            do_export = real(*args, **kwargs)

            @functools.wraps(do_export)
            def watched(*a: Any, **k: Any) -> Any:
                try:
                    return do_export(*a, **k)
                except Exception as err:
                    with contextlib.suppress(Exception):  # the summary must never change the program's error
                        label = self._label() if self._label is not None else ""
                        self.record_failure(err, label=label, where=_raise_site(err))
                    raise

            return watched

        export._smtdims_watch = True  # type: ignore[attr-defined]
        mod.export = export  # type: ignore[attr-defined]
        try:
            yield
        finally:
            if getattr(mod, "export", None) is export:
                mod.export = real  # type: ignore[attr-defined]

    def user_location(self) -> str:
        if self._skip is None:
            self._skip = library_dirs(self._skip_modules)
        where = frames.where(sys._getframe(1), self._skip)[0]
        return where if where != "<unknown>" else "(no user frame found)"

    def fixes(self) -> None:
        """Compute the fix of each inconclusive comparison not computed yet (solver calls)."""
        for i, entry in enumerate(self.inconclusive.values()):
            if entry["fix"] is not None:
                continue
            lhs, rhs = entry.get("operands") or (None, None)
            if i >= MAX_FIXES or lhs is None:
                entry["fix"] = ""
                continue
            try:
                entry["fix"] = _fix_for(lhs, rhs)
            except Exception:  # the summary must never fail because a fix could not be computed
                entry["fix"] = ""

    # -- listening ---------------------------------------------------------------------------------------
    def _counters(self) -> dict[str, int]:
        import smtdims

        s = smtdims.stats()
        return {k: int(s.get(k, 0)) for k in STATS_KEYS}

    def listen(self) -> None:
        from . import add_listener

        if self._listening == 0:
            add_listener(self)
            self._snapshot = self._counters()
        self._listening += 1

    def unlisten(self) -> None:
        from . import remove_listener

        self._listening -= 1
        if self._listening == 0:
            remove_listener(self)
            self.take_counters()

    def take_counters(self) -> None:
        if self._snapshot is not None:
            now = self._counters()
            self.stats.update({k: now[k] - self._snapshot[k] for k in STATS_KEYS})
            self._snapshot = self._counters() if self._listening else None

    # -- reporting ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-able; what a pytest-xdist worker hands to the controller)."""
        self.take_counters()
        self.fixes()
        return {
            "events": [[k, b, n] for (k, b), n in self.events.items()],
            "eq_proven": self.eq_proven,
            "stats": {k: int(self.stats.get(k, 0)) for k in STATS_KEYS},
            "inconclusive": [[q, w, e["count"], e["tests"], e["fix"] or ""] for (q, w), e in self.inconclusive.items()],
            "failed": [[q, w, e["count"], e["tests"], e["fix"], e.get("command", ""), e.get("kind", "")]
                       for (q, w), e in self.failed.items()],
        }

    def merge(self, d: dict[str, Any]) -> None:
        """Add another recorder's :meth:`to_dict`."""
        for k, b, n in d["events"]:
            self.events[(k, b)] += n
        self.eq_proven += d["eq_proven"]
        self.stats.update(d["stats"])
        for q, w, n, tests, *fix in d["inconclusive"]:
            entry = self.inconclusive.setdefault((q, w), {"count": 0, "tests": [], "fix": None, "operands": None})
            entry["count"] += n
            entry["tests"] += [t for t in tests if t not in entry["tests"]]
            if fix and fix[0] and not entry["fix"]:
                entry["fix"] = fix[0]
        for q, w, n, tests, fix, *rest in d.get("failed", []):
            command, kind = (list(rest) + ["", ""])[:2]
            entry = self.failed.setdefault((q, w), {"count": 0, "tests": [], "fix": "", "command": "", "kind": kind})
            entry["count"] += n
            entry["tests"] += [t for t in tests if t not in entry["tests"]]
            entry["fix"] = entry["fix"] or fix
            entry["command"] = entry.get("command") or command

    def count(self, kind: str, by: str | None = None) -> int:
        return sum(n for (k, b), n in self.events.items() if k == kind and (by is None or b == by))

    def summary_lines(self, scope: str) -> list[str]:
        """The summary, ``scope`` naming what smtdims was installed for ("the whole session", ...)."""
        self.take_counters()
        self.fixes()
        st, count = self.stats, self.count
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
            if e["fix"]:
                lines.append(f"    fix: {e['fix']}")
        if self.failed:
            lines.append(f"{FAILED_EXPORTS}: {sum(e['count'] for e in self.failed.values())}")
            for (q, where), e in sorted(self.failed.items()):
                times = f" (x{e['count']})" if e["count"] > 1 else ""
                tests = f" [{', '.join(e['tests'][:3])}{', ...' if len(e['tests']) > 3 else ''}]" if e["tests"] else ""
                lines.append(f"  {where + ': ' if where else ''}{q}{times}{tests}")
                if e["fix"]:
                    lines.append(f"    fix: {e['fix']}")
                if e.get("command"):
                    lines.append(f"    whole fix: {e['command']}")
        if self.inconclusive or self.failed:
            lines.append("  (the first fix round only; smtdims export --fix gives the whole fix, verified)")
        return lines

    def summary_dict(self, scope: str) -> dict[str, Any]:
        """The summary as JSON-able data (``smtdims run --json`` / ``--json-out FILE``)."""
        lines = self.summary_lines(scope)
        return {
            "scope": scope,
            "questions": {kind: {"total": self.count(kind), "stock": self.count(kind, "stock"),
                                 "smtdims": self.count(kind, "smtdims")} for kind in ("bounds", "compare", "eq")},
            "eq_proven": self.eq_proven,
            "stats": {k: int(self.stats.get(k, 0)) for k in STATS_KEYS},
            "inconclusive": [{"question": q, "location": w, "count": e["count"], "tests": list(e["tests"]),
                              "fix": e["fix"] or None}
                             for (q, w), e in sorted(self.inconclusive.items(), key=lambda kv: kv[0][1])],
            "failed_exports": [{"error": q, "location": w, "count": e["count"], "tests": list(e["tests"]),
                                "fix": e["fix"] or None, "kind": e.get("kind") or None,
                                "command": e.get("command") or None} for (q, w), e in sorted(self.failed.items())],
            "summary": lines,
        }


def header(width: int = 72) -> str:
    return f"{' smtdims ':=^{width}}"


# -- running a program ---------------------------------------------------------------------------------
def _exit_code(code: Any) -> int:
    """``SystemExit(code)`` as an exit status, as the interpreter maps it."""
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else code % 256
    print(code, file=sys.stderr)
    return 1


def _print_user_traceback(err: BaseException) -> None:
    """The traceback without this module's and runpy's frames (what ``python script.py`` shows)."""
    tb = err.__traceback__
    ours = {os.path.abspath(__file__), os.path.abspath(runpy.__file__), "<frozen runpy>"}
    while tb is not None and (tb.tb_frame.f_code.co_filename in ours
                              or os.path.abspath(tb.tb_frame.f_code.co_filename) in ours):
        tb = tb.tb_next
    traceback.print_exception(type(err), err, tb, file=sys.stderr)


def _raise_site(err: BaseException) -> str:
    """``file:line in fn`` of the innermost frame of the program (:func:`.frames.raise_site`)."""
    return frames.raise_site(err)


def run_program(target: str, args: Sequence[str] = (), *, module: bool = False, budget: int | None = None,
                json_path: str | None = None, stream: Any = None, json_stdout: bool = False) -> int:
    """Run ``target`` (a script path, or a module name with ``module=True``) as ``__main__`` with
    smtdims installed; print the summary to ``stream`` (stderr) and, with ``json_path``, write it
    there as JSON (``--json-out FILE``); ``json_stdout`` prints it as JSON on stdout after the
    program's own output (``--json``). Returns the program's exit status."""
    from smtdims.lang.results import json_dumps
    from smtdims.reasoner import prestart_workers

    from . import enabled

    if not module and not os.path.exists(target):
        print(f"smtdims run: can't open file {target!r}: no such file", file=sys.stderr)
        return 2
    if os.environ.get("JAX_PLATFORMS"):
        # A JAX_PLATFORMS this machine cannot serve fails every JAX call with stock JAX's internal
        # `assert _default_backend is not None`; say what is wrong before running (only then: the
        # check starts a backend, which a program that never touches a device would not pay).
        from .pipeline.platforms import backend_problem

        problem = backend_problem()
        if problem is not None:
            print(f"smtdims run: error: {problem}", file=sys.stderr)
            return 2
    saved_argv, saved_path0 = sys.argv[:], (sys.path[0] if sys.path else None)
    rec = Recorder()
    name = f"-m {target}" if module else target
    status = 0
    with enabled(budget=budget), rec.watch_exports():
        prestart_workers()  # their start overlaps the program's imports instead of its first export
        rec.listen()
        try:
            sys.argv = [target, *args]
            # What `python script.py` / `python -m mod` put first on sys.path.
            first = os.getcwd() if module else os.path.dirname(os.path.abspath(target))
            if sys.path:
                sys.path[0] = first
            else:  # pragma: no cover
                sys.path.insert(0, first)
            if module:
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(target, run_name="__main__")
        except SystemExit as exit_:
            status = _exit_code(exit_.code)
        except KeyboardInterrupt as err:
            _print_user_traceback(err)
            status = 130
        except BaseException as err:  # what Python does with an uncaught exception
            _print_user_traceback(err)
            rec.record_failure(err, where=_raise_site(err))
            status = 1
        finally:
            sys.argv = saved_argv
            if saved_path0 is not None and sys.path:
                sys.path[0] = saved_path0
            rec.unlisten()
        # Still installed: the fixes in the summary are computed on the program's scopes.
        scope = f"the whole run of {name}"
        out = stream if stream is not None else sys.stderr
        print(header(), file=out)
        for line in rec.summary_lines(scope):
            print(line, file=out)
        data = {"program": name, "argv": [target, *args], "exit_status": status, **rec.summary_dict(scope)}
        if json_stdout:
            with contextlib.suppress(OSError, ValueError):  # a program that closed stdout
                sys.stdout.flush()
                print(json_dumps(data, indent=2), flush=True)
        if json_path is not None:
            try:
                with open(json_path, "w", encoding="utf-8") as f:
                    f.write(json_dumps(data, indent=2) + "\n")
            except OSError as err:
                print(f"smtdims run: could not write the JSON summary to {json_path!r}: {err}", file=sys.stderr)
                status = status or 2
    return status


__all__ = ["Recorder", "header", "library_dirs", "run_program"]
