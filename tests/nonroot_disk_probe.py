"""Run hostile and clean jobs on a backend (bwrap or warm: the first argument) as the user this process is, and print one JSON line per job.

`test_nonroot_disk.py` starts it as uid 65534 (nobody) with `setpriv`, because a non-root host cannot mount the sized
workdir the root path uses: its jobs must be bounded inside the sandbox instead. Solutions use the standard library
only, so the sandbox's interpreter is the one this probe runs on."""
import json
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from wmrl.execution.backends import BwrapBackend
from wmrl.execution.limits import SandboxLimits
from wmrl.execution.sandbox import get_backend

LIMITS = SandboxLimits(wall_s=60, memory_mb=1024, disk_mb=64)
JOB_LIMITS = {"tree": replace(LIMITS, cpu_s=2)}
JOBS = {
    # 40 x 8 MB into /workdir and /tmp by turns: 320 MB against disk_mb = 64
    "flood": "import os\nn = 0\ntry:\n    for i in range(40):\n        folder = '/workdir' if i % 2 else '/tmp'\n"
             "        open(f'{folder}/f{i}', 'wb').write(b'x' * (8 << 20)); n += 8\n"
             "except OSError as err: print('stopped:', err.strerror)\nprint('MB', n)\n",
    # 40 x 1 MB into /dev/shm, then a file in /dev itself (a tmpfs of half the host's memory, unsized)
    "dev": "n = 0\ntry:\n    for i in range(40):\n        open(f'/dev/shm/f{i}', 'wb').write(b'x' * (1 << 20)); n += 1\n"
           "except OSError as err: print('stopped:', err.strerror)\nprint('MB', n)\n"
           "try: open('/dev/x', 'w').write('x'); print('dev: writable')\nexcept OSError as err: print('dev:', err.strerror)\n",
    # 400 sleeping children against nproc = 128: no cgroup counts them on a non-root host
    "fork_bomb": "import os, time\nkids = 0\ntry:\n    for i in range(400):\n        if os.fork() == 0:\n"
                 "            time.sleep(5); os._exit(0)\n        kids += 1\nexcept OSError as err: print('stopped:', err.strerror)\n"
                 "print('kids', kids)\n",
    # six children of 1.5 CPU-s on a CPU budget of 2 (`JOB_LIMITS`): no cgroup counts the tree, the sandbox's pid 1 does
    "tree": "import os, time\nfor _ in range(6):\n    if os.fork() == 0:\n        start = time.process_time()\n"
            "        while time.process_time() - start < 1.5: pass\n        os._exit(0)\nfor _ in range(6): os.wait()\n",
    "clean": "import os\nopen(os.environ['SUBMISSION_PATH'], 'w').write('id,y\\n1,1\\n')\n",
    "relative": "open('submission.csv', 'w').write('id,y\\n2,2\\n')\n",
    "symlink": "import os\nos.symlink('/etc/passwd', os.environ['SUBMISSION_PATH'])\n",
    "fifo": "import os\nos.mkfifo(os.environ['SUBMISSION_PATH'])\n",
    "oversized": "import os\nopen(os.environ['SUBMISSION_PATH'], 'wb').write(b'1,1\\n' * (1 << 19))\n",  # 2 MiB > the 1 MiB cap
    "replaced": "import os, shutil\nos.chdir('/')\nshutil.rmtree(os.path.realpath('/workdir'))\n"
                "os.symlink('/data', os.path.realpath('/workdir'))\n",
    # a child rewrites the submission after the main program exits: pid 1 kills it first
    "late_child": "import os, time\nopen('/workdir/submission.csv', 'w').write('id,y\\n1,1\\n')\n"
                  "if os.fork() == 0:\n    time.sleep(1); open('/workdir/submission.csv', 'w').write('late'); os._exit(0)\n",
}


def main(backend_name: str, names: list[str]) -> None:
    backend = BwrapBackend(python=sys.executable) if backend_name == "bwrap" else get_backend(backend_name, python=sys.executable)
    public = Path(tempfile.mkdtemp(prefix="wmrl-probe-public-"))
    (public / "sample_submission.csv").write_text("id,y\n1,0\n")
    for name in names or list(JOBS):
        out = Path(tempfile.mkdtemp(prefix="wmrl-probe-out-"))
        raw = backend.run(JOBS[name], public, JOB_LIMITS.get(name, LIMITS), out)
        print(json.dumps({"job": name, "hands_over": getattr(backend, "hands_over", False), "exit_code": raw.exit_code,
                          "stdout": raw.stdout_tail, "stderr": raw.stderr_tail[-500:],
                          "submission": raw.submission_path.read_text() if raw.submission_path else None,
                          "problem": raw.submission_problem, "cpu_s": raw.cpu_s}), flush=True)
        shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(public, ignore_errors=True)
    getattr(backend, "close", lambda: None)()


if __name__ == "__main__":
    if "--no-cgroup" in sys.argv:  # a root host without cgroup v1 (a cgroup v2 machine): `test_root_without_cgroups`
        sys.argv.remove("--no-cgroup")
        from wmrl.execution.workdir import CgroupV1
        CgroupV1.available = classmethod(lambda cls, root=None: False)
    main(sys.argv[1], sys.argv[2:])
