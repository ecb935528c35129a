"""Ctrl-C during a fix's verification ends the run at once: exit 130, "interrupted", no
process left behind.

The run's main thread waits for the verification process while it compiles; a Ctrl-C there used to
wait up to 2 s more for that process to leave by itself (it reads nothing until its job ends) before
killing it. Each run sends SIGINT right after the verification's first sample starts and times the
end from the signal; the bound is generous (a shared, busy machine), the measured end is about 0.3-0.8 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.name != "posix" or not Path("/proc").is_dir(),
                                reason="SIGINT to a subprocess and /proc: Linux only")

ROOT = Path(__file__).resolve().parents[2]
CMD = [sys.executable, "-m", "smtdims", "export", "examples/fix_two.py:two", "--spec", "b", "--fix"]
RUNS = 10
END_S = 2.0  # from the signal to the end of the run


def _left_behind(mark: str) -> list[int]:
    """Processes still carrying this run's mark in their environment (its verification process)."""
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if mark.encode() in (p / "environ").read_bytes():
                    pids.append(int(p.name))
            except OSError:
                continue
    return pids


def _interrupt_after(line_part: str, tmp_path: Path) -> tuple[int, float, str, list[int]]:
    mark = f"SMTDIMS_TEST_RUN={uuid.uuid4().hex}"
    env = dict(os.environ, SMTDIMS_COMPILE_CACHE="0", SMTDIMS_TEST_RUN=mark.split("=", 1)[1],
               TMPDIR=str(tmp_path))
    p = subprocess.Popen(CMD, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert p.stderr is not None
    seen = []
    for line in p.stderr:
        seen.append(line)
        if line_part in line:
            break
    else:
        p.wait()
        pytest.fail(f"the run never said {line_part!r}: {''.join(seen)[-2000:]}")
    time.sleep(0.02)
    t = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        rest = p.stderr.read()
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        raise
    took = time.monotonic() - t
    time.sleep(0.1)
    return p.returncode, took, rest, _left_behind(mark)


def test_ctrl_c_during_verification_ends_the_run_at_once(tmp_path):
    ends = []
    for k in range(RUNS):
        d = tmp_path / str(k)
        d.mkdir()
        rc, took, err, left = _interrupt_after("sample 1/", d)
        assert rc == 130 and "interrupted" in err, (k, rc, err[-2000:])
        assert not left, f"run {k} left processes behind: {left}"
        assert not [x for x in d.rglob("*") if "verify" in x.name], f"run {k} left directories: {list(d.rglob('*'))}"
        ends.append(took)
    assert max(ends) < END_S, sorted(ends)


def test_ctrl_c_early_in_a_fix_is_never_lost(tmp_path):
    """A SIGINT that lands in an in-process Z3 check which still ends sat or unsat was taken by Z3's own
    handler and never reached Python (2 to 4 runs in 20): the command line sees it as it lands and
    interrupts the check itself (smtdims.watchdog.CTRL_C)."""
    for k in range(RUNS):
        d = tmp_path / str(k)
        d.mkdir()
        rc, _took, err, left = _interrupt_after("smtdims:", d)
        assert rc == 130 and "interrupted" in err, (k, rc, err[-2000:])
        assert not left
