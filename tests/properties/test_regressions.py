"""Replays every case in ``tests/properties/regressions/*.json`` (written by ``tools/fuzz.py``, or by hand).

Each file holds one shrunk case and the problem it showed. The replay runs the same
checks as the fuzz driver (brute force, ISL on the Presburger fragment, and -- when
``"jax": true`` -- the answers JAX gets with smtdims installed) and fails on any
unsound answer, crash, or inexact Presburger answer. A file with an ``"xfail"`` key is
an open bug: the test is ``xfail(strict=True)``, so it turns red the moment the bug is
fixed -- then delete the key.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import strategies as S
from tests.properties import oracle as O

HERE = Path(__file__).parent / "regressions"
FILES = sorted(HERE.glob("*.json"))
REPORTABLE = O.UNSOUND_KINDS | O.CRASH_KINDS | O.INEXACT_KINDS | {"jax-warning"}


def _params():
    out = []
    for f in FILES:
        rec = json.loads(f.read_text())
        marks = [pytest.mark.xfail(strict=True, reason=rec["xfail"])] if rec.get("xfail") else []
        out.append(pytest.param(f, id=f.stem, marks=marks))
    return out


def replay(rec: dict) -> list[str]:
    case = S.Case.from_json(rec["case"])
    budget = None if case.presburger else rec.get("budget")
    if rec.get("jax"):
        import smtdims
        from smtdims.reasoner import CONFIG

        smtdims.install(budget=rec.get("budget") or smtdims.DEFAULT_BUDGET)
        try:
            out = O.run_smtdims(case, budget=budget, jax=True)
        finally:
            smtdims.uninstall()
            CONFIG.budget = smtdims.DEFAULT_BUDGET
    else:
        out = O.run_smtdims(case, budget=budget)
    return [f"{q}: {k}: {m}" for q, k, m in out.problems if k in REPORTABLE]


@pytest.mark.parametrize("path", _params())
def test_regression_case(path):
    rec = json.loads(path.read_text())
    problems = replay(rec)
    assert not problems, f"{rec['case']['text']}\n" + "\n".join(problems)


def test_regression_files_are_well_formed():
    for f in FILES:
        rec = json.loads(f.read_text())
        assert {"case", "kind", "message"} <= rec.keys(), f
        case = S.Case.from_json(rec["case"])
        assert S.Case.from_json(case.to_json()) == case, f  # JSON round trip keeps the case exactly
