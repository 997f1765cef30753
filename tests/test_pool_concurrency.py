"""wmrl.execution.pool: order, real concurrency, infrastructure failures, a mixed hostile batch, several pools at once."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from wmrl.execution.limits import SandboxLimits
from wmrl.execution.pool import ExecutionJob, ExecutionPool, ledger
from wmrl.execution.sandbox import get_backend
from wmrl.execution.task_builder import build_iris_task
from wmrl.execution.tasks import load_task

LIMITS = SandboxLimits(wall_s=10, memory_mb=512, nproc=32, disk_mb=32)
QUICK = ("import os, shutil\n"
         "shutil.copy(os.path.join(os.environ['DATA_DIR'], 'sample_submission.csv'), os.environ['SUBMISSION_PATH'])\n")


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return load_task(build_iris_task(tmp_path_factory.mktemp("pool")).root)


@pytest.fixture(scope="module")
def pool():
    with ExecutionPool(get_backend("auto"), max_workers=2) as p:
        yield p


def test_records_come_back_in_job_order(pool, task):
    # later jobs finish first: the order of the records must still follow the jobs
    jobs = [(task, f"import time\ntime.sleep({0.6 - 0.1 * i:.1f})\nprint('job', {i})\n" + QUICK, LIMITS) for i in range(6)]
    records = pool.map(jobs, progress=False)
    assert [r.stdout_tail for r in records] == [f"job {i}\n" for i in range(6)]
    assert all(r.status == "ok" for r in records)


def test_two_workers_really_overlap(pool, task):
    code = ("import time\nstart = time.time()\ntime.sleep(1.0)\nprint(start, time.time())\n")
    records = pool.map([(task, code, LIMITS)] * 2, progress=False)
    (s1, e1), (s2, e2) = [tuple(map(float, r.stdout_tail.split())) for r in records]
    assert s2 < e1 and s1 < e2, "the two jobs ran one after the other"


def test_infrastructure_failures_are_flagged_not_scored(task, tmp_path):
    class Broken:
        name, label = "broken", "broken backend"
        def run(self, code, public_dir, limits, output_dir): raise OSError("cannot mount tmpfs")

    class Missing:  # a task whose folder vanished
        public_dir = tmp_path / "gone" / "public"
        compute_budget_s = 5

    with ExecutionPool(Broken(), max_workers=2) as broken:
        (rec,) = broken.map([(task, QUICK, LIMITS)], progress=False)
    assert rec.infra_error and math.isnan(rec.reward) and "cannot mount tmpfs" in rec.message
    with ExecutionPool("subprocess", max_workers=2) as p:
        gone, fine = p.map([ExecutionJob(Missing(), QUICK, LIMITS), ExecutionJob(task, QUICK, LIMITS)], progress=False)
    assert gone.infra_error and "not a directory" in gone.message and fine.status == "ok"


def test_a_mixed_hostile_batch(pool, task):
    short = SandboxLimits(wall_s=2, memory_mb=256, nproc=16, disk_mb=16)
    batch = {
        "ok": QUICK, "syntax_error": "def (", "runtime_error": "1 / 0", "timeout": "while True: pass",
        "memory": "x = bytearray(1 << 30)", "no_submission": "print('nothing')",
        "invalid_submission": "import os\nopen(os.environ['SUBMISSION_PATH'], 'w').write('not,a,submission\\n')",
    }
    jobs = [(task, code, short) for code in batch.values()] * 2
    records = pool.map(jobs, progress=False)
    assert [r.status for r in records] == list(batch) * 2
    book = ledger(records)
    assert book["n"] == 14 and book["statuses"] == {status: 2 for status in batch} and book["infra_errors"] == 0
    assert book["wall_s"] >= sum(r.wall_s for r in records if r.status == "timeout")


def test_ledger_ignores_nan_and_rejects_bad_jobs(pool, task):
    from wmrl.execution.pool import infra_record
    book = ledger([infra_record("x", "b"), infra_record("y", "b")])
    assert book["infra_errors"] == 2 and book["cpu_s"] == 0.0 and math.isnan(book["peak_mb_max"])
    with pytest.raises(TypeError, match="must be an ExecutionJob"):
        pool.map([[task, QUICK]])
    with pytest.raises(ValueError, match="max_workers"):
        ExecutionPool("subprocess", max_workers=0)


POOL_IN_A_PROCESS = """
import json, sys
from wmrl.execution.pool import ExecutionPool, ledger
from wmrl.execution.limits import SandboxLimits
from wmrl.execution.tasks import load_task
task = load_task(sys.argv[1])
code = "import os, shutil\\nshutil.copy(os.path.join(os.environ['DATA_DIR'], 'sample_submission.csv'), os.environ['SUBMISSION_PATH'])"
with ExecutionPool("auto", max_workers=2) as pool:
    records = pool.map([(task, code, SandboxLimits(wall_s=20))] * 4 + [(task, "while True: pass", SandboxLimits(wall_s=1))], progress=False)
print(json.dumps(ledger(records)["statuses"]))
"""


def test_several_pools_in_separate_processes(task):
    procs = [subprocess.Popen([sys.executable, "-c", POOL_IN_A_PROCESS, str(task.root)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1]) == {"ok": 4, "timeout": 1}
