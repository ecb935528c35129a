"""The verification process is kept between jobs (importing JAX was most of a small
verification's cost): one interpreter per environment, replaced when it is gone, busy, timed out or
has run ``MAX_JOBS`` jobs, and never one that imported smtdims.

Each test starts at most two interpreters (1.5 s of CPU each); jobs go straight to
``run_fresh_process`` with one small artifact, except the first, which runs the whole pipeline.
"""

from __future__ import annotations

import os
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from smtdims_jax.pipeline import PASS, export_and_verify, fresh, worker_proc

X = np.arange(6, dtype=np.int32).reshape(2, 3)


@pytest.fixture(autouse=True, scope="module")
def compile_cache(tmp_path_factory):
    """JAX's persistent compilation cache in a directory of this run, never the user's."""
    with pytest.MonkeyPatch.context() as m:
        path = tmp_path_factory.mktemp("jax-cache")
        m.setenv("SMTDIMS_COMPILE_CACHE", str(path))
        yield path


def _double(x):
    return jnp.concatenate([x, x], axis=1)


@pytest.fixture(scope="module")
def artifact():
    a, b = export.symbolic_shape("a, b")
    return export.export(jax.jit(_double))(jax.ShapeDtypeStruct((a, b), jnp.int32)).serialize()


def _job(artifact, **kw):
    """One job: its result, checked (the doubled input, nothing of smtdims imported there)."""
    result, outs = fresh.run_fresh_process(artifact, [[X]], [], lambda _: None, **kw)
    assert result["smtdims_loaded"] == [] and not result.get("fatal"), result
    np.testing.assert_array_equal(outs[0][0], _double(X))
    return result


@pytest.fixture
def no_workers():
    fresh.close_workers()
    yield
    fresh.close_workers()


def _workers() -> dict:
    """The verification processes kept, by environment."""
    return fresh.workers()


def _started() -> int:
    return fresh.processes_started()


def _the_worker():
    (w,) = _workers().values()
    return w


def test_one_worker_serves_the_jobs_of_one_environment_up_to_max_jobs(no_workers, artifact, monkeypatch):
    before = _started()
    report = export_and_verify(_double, "int32[a, b]", samples=2)
    assert report.ok, str(report)
    check = next(c for c in report.checks if c.name == "fresh process")
    assert check.status == PASS and "smtdims not imported" in check.detail
    w = _the_worker()
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "another test")  # changes for every test: not a new environment
    for _ in range(2):
        _job(artifact)
    assert _started() - before == 1 and _the_worker() is w and w.jobs == 3
    monkeypatch.setattr(worker_proc, "MAX_JOBS", 3)
    _job(artifact)
    w2 = _the_worker()
    assert w2 is not w and w.proc.poll() is not None  # the first was ended, not left running
    assert _started() - before == 2


def test_a_dead_or_timed_out_worker_is_replaced(no_workers, artifact):
    _job(artifact)
    w = _the_worker()
    w.proc.kill()
    w.proc.wait()
    _job(artifact)  # found gone before it took the job: the job runs on a new one
    w2 = _the_worker()
    assert w2 is not w and w2.proc.poll() is None
    fresh_shape = np.zeros((3, 1000 + os.getpid() % 1000), np.int32)  # compiled nowhere yet: not done in 0.01 s
    with pytest.raises(RuntimeError, match="timed out after 0.01 s"):
        fresh.run_fresh_process(artifact, [[fresh_shape]], [], lambda _: None, timeout=0.01)
    assert not _workers() and w2.proc.poll() is not None


def test_another_environment_gets_its_own_worker(no_workers, artifact, monkeypatch):
    _job(artifact)
    monkeypatch.setenv("SMTDIMS_TEST_MARK", "1")  # any other change: the worker inherits the environment
    _job(artifact)
    assert {dict(k).get("SMTDIMS_TEST_MARK") for k in _workers()} == {None, "1"}


def test_an_idle_worker_exits_and_a_busy_one_is_not_waited_for(no_workers, artifact, monkeypatch):
    monkeypatch.setattr(worker_proc, "IDLE_S", 0.5)
    _job(artifact)
    w = _the_worker()
    assert w.proc.wait(timeout=30) == 0  # ended by itself after 0.5 s without a job
    monkeypatch.setattr(worker_proc, "IDLE_S", 120.0)
    _job(artifact)
    w2 = _the_worker()
    assert w2 is not w
    assert w2.lock.acquire(blocking=False)  # as if another thread's job were running on it
    try:
        done: list = []
        t = threading.Thread(target=lambda: done.append(_job(artifact)))
        t.start()
        t.join(timeout=120)
        assert done, "the job waited for the busy worker"
        assert _the_worker() is w2  # the job's own worker was not kept
    finally:
        w2.lock.release()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX warns; the child only exits
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")  # Python 3.12+, the same
def test_a_forked_child_does_not_use_the_parents_worker(no_workers, artifact):
    _job(artifact)
    pid = os.fork()
    if pid == 0:  # the child: the parent's worker (its pipes) is not in its table
        os._exit(0 if not _workers() else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _the_worker().proc.poll() is None  # the parent's is untouched
    _job(artifact)


def _ref(shape):
    """JAX's own run of ``_double`` exported at a concrete shape (a sample's reference)."""
    return bytes(export.export(jax.jit(_double))(jax.ShapeDtypeStruct(shape, jnp.int32)).serialize())


def test_prestart_starts_the_worker_once_without_waiting_and_locate_finds_it(no_workers):
    before = _started()
    fresh.prestart()
    fresh.prestart()  # idempotent: the same worker
    w = _the_worker()
    assert _started() - before == 1 and not w.device_known()  # its device line not waited for
    assert fresh.locate().usable
    assert _the_worker() is w and _started() - before == 1


def test_prestart_never_raises(no_workers, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("no process today")

    monkeypatch.setattr(worker_proc.subprocess, "Popen", broken)
    fresh.prestart()  # left for locate() to report
    assert not _workers()


def test_a_shape_compiles_once_per_worker_and_the_reference_beside_it(no_workers, artifact):
    refs = [_ref(X.shape)]
    first = fresh.run_on_device(artifact, [[X]], [], lambda _: None, references=refs)
    again = fresh.run_on_device(artifact, [[X]], [], lambda _: None, references=refs)
    (s1,), (s2,) = first.result["samples"], again.result["samples"]
    assert not s1["compile_cached"] and not s1["ref_compile_cached"]
    assert s2["compile_cached"] and s2["ref_compile_cached"]  # a fix's next round: nothing compiled again
    for run in (first, again):
        np.testing.assert_array_equal(run.outputs[0][0], _double(X))
        np.testing.assert_array_equal(run.references[0][0], _double(X))
        s = run.result["samples"][0]
        assert s["compile_s"] is not None and s["ref_compile_s"] is not None and s["ref_run_s"] is not None


def test_the_persistent_compilation_cache_is_written_where_it_is_said(no_workers, artifact, compile_cache):
    assert fresh.compile_cache_dir() == str(compile_cache)
    _job(artifact)
    assert any(compile_cache.iterdir())  # JAX wrote the compile there


def test_the_compilation_cache_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("SMTDIMS_COMPILE_CACHE", "0")
    assert fresh.compile_cache_dir() is None and "SMTDIMS_JAX_CACHE_DIR" not in fresh.job_env()
    monkeypatch.delenv("SMTDIMS_COMPILE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert fresh.compile_cache_dir() == str(tmp_path / "xdg" / "smtdims" / "jax-cache")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("SMTDIMS_COMPILE_CACHE", str(blocker / "cache"))  # cannot be made: no cache, no error
    assert fresh.compile_cache_dir() is None


def _early(env: dict):
    """A worker as ``smtdims export`` starts one before it imports JAX (start_before_jax)."""
    worker_proc.start(env, early=True)
    return _the_worker()


def test_a_worker_started_before_jax_reports_what_jax_set_and_is_adopted(no_workers):
    env = fresh.job_env()
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as before this process imported JAX, which sets it
    w = _early(env)
    before = _started()
    assert fresh.locate(fresh.job_env()).usable
    assert w.env_added.get("TF_CPP_MIN_LOG_LEVEL") == "1"  # JAX's import set it there as here
    assert _the_worker() is w and _started() == before  # adopted: no second process


def test_a_worker_started_before_jax_for_another_environment_is_ended_not_kept(no_workers, monkeypatch):
    w = _early(fresh.job_env())
    monkeypatch.setenv("SMTDIMS_TEST_USER_SET", "1")  # the user's module set it after the early start
    before = _started()
    fresh.prestart()  # does not start a second beside it (one process at a time may hold a TPU) ...
    assert _started() == before
    assert fresh.locate().usable  # ... the job decides: not this environment's, so it is ended first
    assert w.proc.poll() is not None and _started() == before + 1
    assert [dict(k).get("SMTDIMS_TEST_USER_SET") for k in _workers()] == ["1"]


def test_prestart_is_public_and_the_call_finds_its_process(no_workers, artifact):
    from smtdims_jax import pipeline

    before = _started()
    pipeline.prestart()  # a script calls it right after the import, before building its model
    _job(artifact)
    assert _started() == before + 1  # the call's job ran on the process prestart started
