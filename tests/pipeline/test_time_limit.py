"""``time_limit``: a block of Python code cut at its limit, never inside smtdims' own code.

The fix loop exports under candidate specifications, where JAX's own arithmetic can run for minutes
without calling smtdims; the limit must cut it, leave nothing pending after the block, and wait
while smtdims' reasoning runs in the limited thread (a solver worker's request is not cut midway).
"""

from __future__ import annotations

import time

import pytest
from smtdims_jax.pipeline.time_limit import TimeLimitExceeded, time_limit


def _spin(seconds: float) -> int:
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        n += 1
    return n


def test_a_busy_block_is_cut_at_its_limit():
    t0 = time.monotonic()
    with pytest.raises(TimeLimitExceeded), time_limit(0.3):
        _spin(30)
    assert time.monotonic() - t0 < 5


def test_a_block_that_ends_in_time_leaves_nothing_pending():
    with time_limit(0.2):
        pass
    _spin(0.5)  # a raise withdrawn at the block's end would land here
    with time_limit(None):
        _spin(0.05)


def test_the_exception_passes_except_exception():
    """Frameworks catch Exception to re-raise their own; the limit is not one of those."""
    caught = []
    with pytest.raises(TimeLimitExceeded), time_limit(0.2):
        try:
            _spin(30)
        except Exception as err:  # noqa: BLE001 - what a framework does
            caught.append(err)
    assert not caught


def test_no_cut_while_smtdims_code_runs_in_the_thread():
    """A callback smtdims calls (a model's formulas) runs with smtdims' frames on the stack: the limit
    passes during it without a cut, and cuts once smtdims has returned into the block's own code."""
    from smtdims.lang.constraints import ConstraintSet
    from smtdims.reasoner import Session

    session = Session(ConstraintSet.of(["a >= 2"]), None)
    finished = []

    def build(enc):
        _spin(0.6)  # past the limit, inside smtdims' model(): no cut here
        finished.append(True)
        return []

    t0 = time.monotonic()
    with pytest.raises(TimeLimitExceeded), time_limit(0.1):
        session.model(build)
        _spin(30)  # the block's own code: cut here
    assert finished == [True] and time.monotonic() - t0 < 10
