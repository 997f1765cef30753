"""Per-job shares on the warm server (issue 24, breaches 4, 5 and 6). The warm server's process cap was one number for
all its jobs (nproc x 2 slots + 16), so a neighbour holding it made a clean job that starts a thread or a subprocess
fail; with three pool workers three honest copies broke one another; 240 busy children starved a clean job into a
timeout; and RLIMIT_CPU counts one process, so six children ran 15 CPU-s on a budget of 8 and finished. Now each
job has cgroups of its own inside the server's (a process cap of nproc, a CPU share equal to every other job's, a
CPU account over its whole tree that the supervisor stops at the budget), the server's caps grow with the jobs in
flight, and a job that failed while a shared cap fired beside it is rerun alone and never cached.

Each test below fails on commit 355c8a2 (`git archive 355c8a2 wmrl | tar -x -C /tmp/old && PYTHONPATH=/tmp/old
pytest tests/test_warm_shares.py`): the clean records become runtime errors or timeouts, the budget is not kept."""
from __future__ import annotations

from pathlib import Path

import pytest
from contamination_attacks import ATTACKS, SPAWNING_PREFIX, same_record

from wmrl.execution.backends import bwrap_works
from wmrl.execution.limits import SandboxLimits
from wmrl.execution.pool import ExecutionPool
from wmrl.execution.sandbox import execute, get_backend
from wmrl.execution.task_builder import build_iris_task
from wmrl.execution.tasks import load_task
from wmrl.execution.warm import WarmBackend
from wmrl.execution.workdir import CgroupV1

pytestmark = [pytest.mark.skipif(not bwrap_works(), reason="WARM BACKEND NOT TESTED: bwrap cannot create namespaces"),
              pytest.mark.skipif(not CgroupV1.available(), reason="PER-JOB SHARES NOT TESTED: no writable cgroup v1 "
                                 "(they need root and cgroup v1, as in CI)")]

REPO = Path(__file__).resolve().parents[1]
LIMITS = SandboxLimits(wall_s=30, memory_mb=1024, nproc=48, disk_mb=64, file_mb=32, max_output_mb=4, output_kb=4)
SPAWNING = SPAWNING_PREFIX + (REPO / "toy/solutions/iris/good_logistic.py").read_text()
# an honest program that uses most of its share: 38 worker processes (a process pool's pattern), then the model
POOLED = ("import os, time\nkids = []\nfor _ in range(38):\n    pid = os.fork()\n"
          "    if pid == 0:\n        time.sleep(2); os._exit(0)\n    kids.append(pid)\n"
          "for pid in kids: os.waitpid(pid, 0)\n") + (REPO / "toy/solutions/iris/good_logistic.py").read_text()


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return load_task(build_iris_task(tmp_path_factory.mktemp("shares")).root)


@pytest.fixture(scope="module")
def cold(task):
    record = execute(task, SPAWNING, backend=get_backend("bwrap"), limits=LIMITS)
    assert record.status == "ok", record.message  # the reference itself must be a real model's score
    return record


def test_a_neighbour_holding_its_process_cap_cannot_fail_a_clean_job(task, cold):
    "Breach 4: before, the holder took the server's shared cap and the clean job's threads failed (0.1, not 0.9)."
    backend = WarmBackend(base="bwrap", max_servers=1)
    try:
        with ExecutionPool(backend, max_workers=2) as pool:
            holder, clean = pool.map([(task, ATTACKS["hold_the_process_cap"], LIMITS), (task, SPAWNING, LIMITS)],
                                     progress=False)
        assert same_record(clean, cold), (clean.status, clean.message, cold.status)
        held = int(holder.stdout_tail.split("HELD")[1].split()[0])
        assert 40 <= held <= LIMITS.nproc, holder.stdout_tail  # the holder got its own share, and no more
    finally:
        backend.close()


def test_three_honest_copies_with_three_workers_do_not_break_one_another(task):
    """Breach 4: the server was sized for two slots whatever the pool ran (48 x 2 + 16 processes), so three copies
    of a program that uses 39 of its 48 broke one another; now the server's caps follow the jobs in flight."""
    reference = execute(task, POOLED, backend=get_backend("bwrap"), limits=LIMITS)
    assert reference.status == "ok", reference.message
    backend = WarmBackend(base="bwrap", max_servers=1, slots=2)
    try:
        with ExecutionPool(backend, max_workers=3) as pool:
            records = pool.map([(task, POOLED, LIMITS)] * 3, progress=False)
        assert all(same_record(r, reference) for r in records), [(r.status, r.message) for r in records]
        assert backend.reruns == 0  # none needed a rerun: no shared cap fired
    finally:
        backend.close()


def test_a_cpu_starver_cannot_time_out_a_clean_job(task, cold):
    """Breach 5: 240 busy children (each in a session of its own, so out of reach of `nice` and of a process group
    kill) beside a clean job with the same 30 s wall clock. Before: the clean job got ~2/110 of the CPU and timed
    out, and the starver burnt its CPU limit once per child. Now its children share one job's CPU share and it is
    stopped when their sum passes its budget."""
    starver_limits = SandboxLimits(wall_s=30, cpu_s=8, memory_mb=1024, nproc=48, disk_mb=64, file_mb=32,
                                   max_output_mb=4, output_kb=4)
    backend = WarmBackend(base="bwrap", max_servers=1)
    try:
        with ExecutionPool(backend, max_workers=2) as pool:
            starver, clean = pool.map([(task, ATTACKS["cpu_starver_setsid"], starver_limits), (task, SPAWNING, LIMITS)],
                                      progress=False)
        assert same_record(clean, cold), (clean.status, clean.message)
        assert starver.status == "timeout" and starver.cpu_s < 8 + 3, (starver.status, starver.cpu_s, starver.message)
    finally:
        backend.close()


@pytest.mark.parametrize("backend_name", ["warm", "bwrap"])
def test_the_cpu_budget_is_the_whole_process_tree(task, backend_name):
    "Breach 5: six children of 2.5 CPU-s each under a budget of 8 finished `ok`-ish before; now a timeout, warm and cold."
    limits = SandboxLimits(wall_s=60, cpu_s=8, memory_mb=1024, nproc=48, disk_mb=64)
    backend = WarmBackend(base="bwrap", max_servers=1) if backend_name == "warm" else get_backend("bwrap")
    try:
        record = execute(task, ATTACKS["budget_across_children"], backend=backend, limits=limits)
    finally:
        if backend_name == "warm":
            backend.close()
    assert record.status == "timeout", (record.status, record.cpu_s, record.message)
    assert record.cpu_s >= 8, record.cpu_s


def test_a_job_is_in_groups_of_its_own_that_it_cannot_reach(task):
    "Its cgroup folders are hidden (it cannot move itself out of its cap), and its groups are not the server's."
    probe = ("import os\n"
             "print('LISTING', os.listdir('/wmrl-cgroup') if os.path.isdir('/wmrl-cgroup') else None)\n"
             "print('GROUP', [l.split(':')[2] for l in open('/proc/self/cgroup').read().split() if ':pids:' in l])\n")
    backend = WarmBackend(base="bwrap", max_servers=1)
    try:
        record = execute(task, probe, backend=backend, limits=LIMITS)
    finally:
        backend.close()
    assert "LISTING []" in record.stdout_tail, record.stdout_tail
    assert "/job-" in record.stdout_tail.split("GROUP")[1], record.stdout_tail
