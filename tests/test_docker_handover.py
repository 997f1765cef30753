"""Docker run by a user who is not root (issue 24, breach 7's last part). The job's folders were host folders bound
into the container: sized tmpfs mounts where the host is root, plain folders elsewhere, so a non-root user's job
wrote 1.2 GB against a 512 MB budget. Now the engine makes the job's `/workdir` and `/tmp` as sized tmpfs mounts
whoever runs the kit, and the launcher, as the container's pid 1 and root with four capabilities, runs the job as
uid 65534, reaps it, and hands the submission and its own account of the tree over into a bound host folder of mode
0700 that the job's uid cannot open.

Three of the four tests fail on commit 13d127f: the disk filler wrote 3x its budget once the host is not root, the
job stopped the container's init (it ran as the job's uid), and a forged cost stood where no cgroup parent counted.
The fourth guards the new receiving folder itself, which the old code did not have. The non-root host
is simulated by setting `IS_ROOT` to False (the old code then binds plain folders) and by handing the receiving
folder to an unprivileged uid. By hand, as uid 1000 in the `docker` group on the engine of `.ci/docker-up.sh`
(exercise 4 of `nbs/282_docker_backend`), a filler stopped at 64 MB of 64 with ENOSPC, `/run/wmrl` was refused, a
forged 0.001 CPU-s read 1.008, and `kill(1, SIGKILL)` was refused."""
from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from contamination_attacks import docker_backend

from wmrl.execution import docker_backend as docker_module
from wmrl.execution import workdir as workdir_module
from wmrl.execution.limits import SandboxLimits
from wmrl.execution.sandbox import execute
from wmrl.execution.tasks import load_task

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[1]
LIMITS = SandboxLimits(wall_s=30.0, memory_mb=512, disk_mb=32, file_mb=64)
HONEST = ("import os, shutil\n"
          "shutil.copy(os.path.join(os.environ['DATA_DIR'], 'sample_submission.csv'), os.environ['SUBMISSION_PATH'])\n")


def run(code: str, backend=None):
    return execute(load_task(REPO / "toy/tasks/iris"), code, backend=backend or docker_backend("DOCKER HAND-OVER TEST"),
                   limits=LIMITS)


@pytest.fixture
def not_root(monkeypatch):
    "A host that cannot mount a sized tmpfs: the Workdir falls back to a plain folder, as for a non-root user."
    monkeypatch.setattr(workdir_module, "IS_ROOT", False)


def test_the_disk_is_the_engines_whoever_runs_the_kit(not_root):
    fill = HONEST + (
        "written = {}\n"
        "for folder in ('/workdir', '/tmp'):\n"
        "    n = 0\n"
        "    try:\n"
        "        with open(os.path.join(folder, 'fill'), 'wb') as f:\n"
        "            for _ in range(96): f.write(b'x' * (1 << 20)); f.flush(); n += 1\n"
        "    except OSError: pass\n"
        "    written[folder] = n\n"
        "print('WRITTEN', written)\n")
    record = run(fill)
    assert record.status == "ok" and not record.infra_error, record.message
    written = eval(record.stdout_tail.split("WRITTEN", 1)[1])
    assert all(mb <= LIMITS.disk_mb for mb in written.values()), written  # 96 MB each on the old code


def test_the_receiving_folder_is_closed_to_the_job(monkeypatch):
    class NonRootFolder(workdir_module.Workdir):  # the folder as a non-root user's: theirs, mode 0700
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            os.chown(self.root, 1000, 1000)
    monkeypatch.setattr(docker_module, "Workdir", NonRootFolder)
    probe = HONEST + (
        "import glob\n"
        "tried = []\n"
        "for path in {'/run/wmrl', *glob.glob('/run/*')}:\n"
        "    for act in (lambda: os.listdir(path), lambda: open(os.path.join(path, 'handed.csv'), 'w')):\n"
        "        try: act(); tried.append(path)\n"
        "        except OSError: pass\n"
        "print('OPENED', tried)\n")
    record = run(probe)
    assert record.status == "ok" and not record.infra_error, record.message  # pid 1 still handed the submission over
    assert "OPENED []" in record.stdout_tail, record.stdout_tail


def test_the_job_can_neither_stop_pid_1_nor_outlive_it():
    late = HONEST + (
        "import signal, time\n"
        "for sig in (signal.SIGKILL, signal.SIGSTOP): \n"
        "    try: os.kill(1, sig); print('KILLED PID 1')\n"
        "    except OSError: pass\n"
        "if os.fork() == 0:\n"
        "    os.setsid(); time.sleep(3)\n"
        "    open(os.environ['SUBMISSION_PATH'], 'w').write('id,species\\n0,forged\\n')\n"
        "    os._exit(0)\n")
    record = run(late)
    assert record.status == "ok" and "KILLED PID 1" not in record.stdout_tail, (record.status, record.message)
    assert record.wall_s < 3, record.wall_s  # the daemon died with the job, before it could rewrite the submission


def test_a_forged_cost_stands_nowhere_without_a_cgroup_parent():
    backend = docker_backend("DOCKER HAND-OVER TEST")
    backend.cost_here = False  # as on a non-root host, cgroup v2, or a remote engine
    forge = ("import time\nstart = time.process_time()\nwhile time.process_time() - start < 1.5: pass\n"
             "import os\nopen('/tmp/.wmrl-usage.json', 'w').write('{\"cpu_s\": 0.001, \"peak_mb\": 1}')\n"
             "os.chmod('/tmp/.wmrl-usage.json', 0o444)\n")  # locked: the old launcher, same uid, could not rewrite it
    record = run(forge, backend)
    assert record.status == "no_submission" and not record.infra_error, record.message
    assert math.isfinite(record.cpu_s) and record.cpu_s >= 1.2, record.cpu_s
