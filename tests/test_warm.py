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
