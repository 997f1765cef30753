"""A cost the job cannot write, as far as each backend allows (issue 24, breach 7). Without a cgroup to measure a run,
its CPU-seconds and peak memory came from a report the launcher writes into the job's own temporary folder: a job
forged it to 0.001 CPU-s, replaced it by a FIFO (the host blocked reading it) or by a link to /dev/zero (the host read
without bound). Now the report is read without following links, without blocking and within 4 KB, and where the
kernel accounts for the process tree (`wait4` on the subprocess backend) that account is a floor the report cannot
lower. bwrap reports its child's exit through an eventfd and never reaps it, so `wait4` sees none of the tree there:
a forged report still stands on bwrap without cgroups (and on Docker); CgroupV1, used whenever it is available (as
root here and in CI), measures every backend but Docker from outside the job. On commit e0b6da4 five of the six
cases fail: a directory in the report's place gave a NaN cost, the link made the host read /dev/zero until it was
killed, the FIFO blocked it until its timeout. The forged and locked report passes there only because these tests run
as root (the launcher overwrites a read-only file); as non-root it is what the floor stops."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from wmrl.execution import backends
from wmrl.execution.backends import BwrapBackend, SubprocessBackend, bwrap_works
from wmrl.execution.limits import SandboxLimits
from wmrl.execution.sandbox import execute
from wmrl.execution.tasks import load_task

REPO = Path(__file__).resolve().parents[1]
LIMITS = SandboxLimits(wall_s=20.0, memory_mb=1024)
BURN = "import os, time\nstart = time.process_time()\nwhile time.process_time() - start < 1.5: pass\n"
REPORT = "os.path.join(os.environ.get('TMPDIR', '/tmp'), '.wmrl-usage.json')"  # the job's own temporary folder
FORGE = {
    "forged_and_locked": f"open({REPORT}, 'w').write('{{\"cpu_s\": 0.001, \"peak_mb\": 1}}')\nos.chmod({REPORT}, 0o444)\n",
    "directory_in_its_place": f"os.mkdir({REPORT})\n",  # no report at all: the cost was NaN (no penalty)
    "link_to_dev_zero": f"os.symlink('/dev/zero', {REPORT})\n",
    "fifo": f"os.mkfifo({REPORT})\nos._exit(0)\n",  # _exit: the launcher's own report would block on the FIFO
}


@pytest.fixture
def no_cgroup(monkeypatch):
    monkeypatch.setattr(backends.CgroupV1, "available", classmethod(lambda cls, root=None: False))


def run(backend, forge):
    return execute(load_task(REPO / "toy/tasks/iris"), BURN + FORGE[forge], backend=backend, limits=LIMITS)


@pytest.mark.parametrize("forge", sorted(FORGE))
def test_the_kernel_account_is_a_floor_on_the_subprocess_backend(no_cgroup, forge):
    record = run(SubprocessBackend(), forge)
    assert record.status == "no_submission", record.message  # its own record: it ran and wrote no submission
    assert math.isfinite(record.cpu_s) and record.cpu_s >= 1.2, record.cpu_s


@pytest.mark.skipif(not bwrap_works(), reason="bwrap cannot create namespaces here (CI runs it)")
@pytest.mark.parametrize("forge", ["link_to_dev_zero", "fifo"])
def test_the_report_cannot_block_or_flood_the_host_on_bwrap(no_cgroup, forge):
    record = run(BwrapBackend(), forge)
    assert record.status == "no_submission" and not record.infra_error, record.message
