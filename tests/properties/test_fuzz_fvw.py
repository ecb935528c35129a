"""``tools/fuzz.py --fresh-vs-warm``: the report's shape, and that a history-dependent answer fails it.

The fake answer functions below are looked up by name (``--fvw-answer tests.properties.test_fuzz_fvw:NAME``) in the
driver's server processes, which have the repository's root on their path.
"""

from __future__ import annotations

import os

import pytest

from tests.fuzz_tool import FUZZ

CALLS = [0]  # questions answered by this process (a fork starts from the server's count: 0)




def history_answer(q: dict) -> dict:
    """Deterministic, but 'false' once this process has answered anything before: a history bug."""
    CALLS[0] += 1
    return {"kind": "decision", "status": "true" if CALLS[0] == 1 else "false", "deterministic": True, "seconds": 0.0}


def flaky_answer(q: dict) -> dict:
    """Question 0 kills its process; question 1 is clock-shaped (differs per process); the rest agree."""
    if q["id"] == 0:
        os._exit(7)
    if q["id"] == 1:
        return {"kind": "decision", "status": str(os.getpid()), "deterministic": False, "seconds": 0.0}
    return {"kind": "bounds", "lo": "1", "hi": "inf", "lo_tight": True, "hi_tight": True, "deterministic": True,
            "seconds": 0.0}


def test_real_answers_report_shape():
    rep = FUZZ.fresh_vs_warm(6, seed=3, scales=(1.0, 0.1), deadline=1.0, large_share=0.0, warmup=2, chunk=4,
                             progress=0, diagnose=False)
    assert rep["mode"] == "fresh-vs-warm" and rep["budgets"] == [5_000_000, 500_000]
    assert rep["answers_compared"] == 12 and rep["questions_compared"] == 6
    assert rep["crashes"] == 0, rep["examples"]["crashes"]
    for key in ("differs", "clock_shaped", "clock_shaped_differ", "past_deadline", "seconds", "seconds_per_answer", "by_scale",
                "by_source"):
        assert key in rep
    assert set(rep["seconds_per_answer"]) == {"fresh", "warm", "fork_overhead"}
    assert sum(v["answers"] for v in rep["by_scale"].values()) == 12


def test_history_dependent_answer_is_counted_and_fails(capsys):
    rep = FUZZ.fresh_vs_warm(5, seed=1, scales=(1.0, 0.1), warmup=0, chunk=3, answer=f"{__name__}:history_answer",
                             progress=0)
    # fresh: every fork is the first question of its process; warm: only the very first one is
    assert rep["differs"] == 9 and rep["clock_shaped"] == 0 and rep["crashes"] == 0
    ex = rep["examples"]["differs"][0]
    assert ex["fresh"]["status"] == "true" and ex["warm"]["status"] == "false"
    assert ex["replay"].startswith("smtdims.")
    # the replay after the same-constraints history runs in a fresh fork too
    assert len(rep["diagnosis"]) == 9
    assert any(d["cause"] == "same-constraints history" for d in rep["diagnosis"])
    assert all(d["cause"] != "z3 memory layout" for d in rep["diagnosis"])
    assert FUZZ.main(["--fresh-vs-warm", "3", "--fvw-warmup", "0", "--progress", "0",
                      "--fvw-answer", f"{__name__}:history_answer"]) == 1
    capsys.readouterr()


@pytest.mark.parametrize("concurrent", [False, True])
def test_crash_and_clock_shaped_are_counted_apart(concurrent):
    rep = FUZZ.fresh_vs_warm(6, seed=2, scales=(1.0,), warmup=0, chunk=6, answer=f"{__name__}:flaky_answer",
                             progress=0, concurrent=concurrent)
    assert rep["crashes"] == 1 and rep["server_restarts"]["warm"] == 1
    assert "died" in rep["examples"]["crashes"][0]["fresh"]["error"]
    assert rep["clock_shaped"] == 1 and rep["clock_shaped_differ"] == 1
    assert rep["differs"] == 0 and rep["answers_compared"] == 6
