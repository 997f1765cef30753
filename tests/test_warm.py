"""The warm (forking, pre-imported) backend gives the records a cold bwrap run gives, and survives what it must.

Reference: toy/solutions/iris/records.json holds the cold bwrap statuses of 40 real iris solutions (across the whole
vocabulary); the graded ones are also run cold now and must get the same reward. Costs differ (that is the point).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from wmrl.execution.backends import bwrap_works
from wmrl.execution.limits import SandboxLimits
from wmrl.execution.pool import ExecutionPool
from wmrl.execution.sandbox import execute, get_backend
from wmrl.execution.tasks import load_task
from wmrl.execution.warm import WarmBackend

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = REPO / "toy" / "solutions" / "iris"
LIMITS = SandboxLimits(wall_s=10.0, memory_mb=1024)

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="WARM BACKEND NOT TESTED: bwrap cannot create namespaces here")


@pytest.fixture(scope="module")
def iris():
    return load_task(REPO / "toy" / "tasks" / "iris")


@pytest.fixture(scope="module")
def warm():
    backend = WarmBackend(base="bwrap", max_servers=2)
    yield backend
    backend.close()


def test_same_statuses_and_rewards_as_cold_bwrap(iris, warm):
    "Statuses of all 40 against the stored cold records; rewards of the graded ones against cold runs made now."
    reference = json.loads((SOLUTIONS / "records.json").read_text())
    names = sorted(reference)
    jobs = [(iris, (SOLUTIONS / f"{n}.py").read_text(), LIMITS) for n in names]
    with ExecutionPool(warm, max_workers=2) as pool:
        records = pool.map(jobs, progress=False)
    wrong = [(n, reference[n]["status"], r.status, r.message) for n, r in zip(names, records) if r.status != reference[n]["status"]]
    assert not wrong, wrong
    assert all(r.backend == "warm-bwrap" and not r.infra_error for r in records)
    graded = [i for i, r in enumerate(records) if r.status == "ok"]
    assert len(graded) >= 8
    with ExecutionPool(get_backend("bwrap"), max_workers=2) as pool:
        cold = pool.map([jobs[i] for i in graded], progress=False)
    for i, record in zip(graded, cold):
        assert math.isclose(records[i].reward, record.reward, abs_tol=1e-12), (names[i], records[i].reward, record.reward)


def test_each_server_start_is_charged_once(iris, tmp_path):
    backend = WarmBackend(base="bwrap", max_servers=1)
    try:
        code = (SOLUTIONS / "good_logistic.py").read_text()
        first, second = (backend.run(code, iris.public_dir, LIMITS, tmp_path) for _ in range(2))
        server = next(iter(backend.servers.values()))
        assert server.startup_cpu_s > 0
        assert any("warm server's start" in note for note in first.notes)
        assert not any("warm server's start" in note for note in second.notes)
        assert first.cpu_s >= server.startup_cpu_s > 0  # the first carries the start
    finally:
        backend.close()


def test_a_job_cannot_kill_its_server(iris, warm):
    "Its parent is its own init (pid 1 of its pid namespace), which ignores it; the server is out of its reach."
    killer = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time\ntime.sleep(1)\n"
    with ExecutionPool(warm, max_workers=1) as pool:
        killer_record, after = pool.map([(iris, killer, LIMITS), (iris, (SOLUTIONS / "good_knn.py").read_text(), LIMITS)],
                                        progress=False)
    assert killer_record.status == "no_submission" and not killer_record.infra_error, killer_record
    assert after.status == "ok", after
    assert warm.reruns == 0


def test_subprocess_base_and_get_backend(iris, tmp_path):
    backend = get_backend("warm", base="subprocess", max_servers=1)
    try:
        record = execute(iris, (SOLUTIONS / "good_random_forest.py").read_text(), backend=backend, limits=LIMITS)
        assert record.status == "ok" and record.backend == "warm-subprocess"
    finally:
        backend.close()
    with pytest.raises(ValueError, match="base must be"):
        WarmBackend(base="docker")


@pytest.mark.parametrize("kind", ["MemoryError", "RecursionError"])
def test_warm_equals_cold_when_python_cannot_compile(iris, warm, kind):
    "Issue 24 (9): a program the parser gives up on was `no_submission` (0.2, exit 0) warm and `runtime_error` cold."
    body = "x = " + "-" * 100_000 + "1\n" if kind == "MemoryError" else "x = " + "+".join(["1"] * 100_000) + "\n"
    code = (SOLUTIONS / "good_logistic.py").read_text() + body
    hot, cold = execute(iris, code, backend=warm, limits=LIMITS), execute(iris, code, backend="bwrap", limits=LIMITS)
    assert (hot.status, hot.reward) == (cold.status, cold.reward), (hot.message, cold.message)
    assert cold.status in ("runtime_error", "memory") and cold.reward == 0.1  # a parser MemoryError reads as memory


# ---- issue 44, item 3: a warm job ends as a cold interpreter ends -----------------------------------------------------
# On 8e6b3db the warm job ended with os._exit straight after the program: the first two got no_submission (0.2) warm
# and a grade cold, the last three a grade (0.901) warm and runtime_error (0.1) cold:
# `PYTHONPATH=<git archive 8e6b3db wmrl> pytest tests/test_warm.py -k ends_as`.
GOOD = (SOLUTIONS / "good_logistic.py").read_text()
EXIT_LIMITS = SandboxLimits(wall_s=60.0, memory_mb=1024)  # a wide net: a loaded machine takes 9 s for GOOD alone
WRITE = 'submission.to_csv(os.environ["SUBMISSION_PATH"], index=False)'
AT_EXIT = {  # program -> its cold status
    "submission_in_atexit": (GOOD.replace(WRITE, 'import atexit\natexit.register(submission.to_csv, os.environ["SUBMISSION_PATH"], index=False)'), "ok"),
    "submission_in_a_thread": (GOOD.replace(WRITE, f"import threading, time\ndef write_later():\n    time.sleep(1)\n    {WRITE}\n"
                                                   "threading.Thread(target=write_later).start()"), "ok"),
    "crash_in_atexit": (GOOD + "import atexit\natexit.register(os.abort)\n", "runtime_error"),
    "crash_in_a_finaliser": (GOOD + "class Guard:\n    def __del__(self):\n        os._exit(3)\nguard = Guard()\n", "runtime_error"),
    "stdout_that_cannot_be_flushed": (GOOD + 'import sys\nsys.stdout = open("/dev/full", "w")\nprint("done")\n', "runtime_error"),
}


@pytest.mark.parametrize("name", sorted(AT_EXIT))
def test_a_warm_job_ends_as_a_cold_run_ends(iris, warm, name):
    "Threads joined, atexit handlers, finalisers and the final flush run warm as they do cold (Py_FinalizeEx's order)."
    code, status = AT_EXIT[name]
    assert code != GOOD
    hot, cold = execute(iris, code, backend=warm, limits=EXIT_LIMITS), execute(iris, code, backend="bwrap", limits=EXIT_LIMITS)
    assert cold.status == status, (name, cold.message)
    assert (hot.status, hot.reward) == (cold.status, cold.reward), (name, hot.message, cold.message)


def test_a_warm_record_is_not_served_to_a_cold_request(iris, warm, tmp_path):
    "The execution cache keys on the backend's kind and exit semantics: a warm record was served to a cold request."
    from wmrl.autoresearch.ledger import ExecutionCache, execute_cached
    jobs, cache = [(iris, AT_EXIT["crash_in_atexit"][0], EXIT_LIMITS)], ExecutionCache(tmp_path / "cache.json")
    backend_of = lambda record: record["backend"] if isinstance(record, dict) else record.backend  # a hit is a dict
    with ExecutionPool(warm, max_workers=1) as pool:
        (hot,), _ = execute_cached(jobs, pool.map, cache)
    cache.save()
    cold_cache = ExecutionCache(tmp_path / "cache.json")  # holds the warm record
    with ExecutionPool(get_backend("bwrap"), max_workers=1) as pool:
        (cold,), (charge,) = execute_cached(jobs, pool.map, cold_cache)
        (again,), (second,) = execute_cached(jobs, pool.map, cold_cache)
    assert (backend_of(hot), backend_of(cold), charge.hit) == ("warm-bwrap", "bwrap", False)  # run cold, not served
    assert (backend_of(again), second.hit) == ("bwrap", True)  # the cold record is served to the next cold request
