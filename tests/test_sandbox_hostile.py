"""Hostile programs against every sandbox backend that is available here.

Each test runs one hostile solution next to a harmless one through an `ExecutionPool` and checks that the hostile
one is contained and classified with a clear message, that the host and the task folder are unchanged, and that
the pool still serves the harmless job (and the next one). The subprocess backend applies limits only, so the
tests that need filesystem or pid isolation skip it with the reason; docker runs when a daemon answers
(start one with `bash .ci/docker-up.sh && source /tmp/wmrl-docker/env.sh`).
"""
from __future__ import annotations

import hashlib
import os
import socket
import time
import uuid
from pathlib import Path

import pytest

from wmrl.execution.backends import bwrap_works
from wmrl.execution.limits import SandboxLimits
from wmrl.execution.pool import ExecutionPool
from wmrl.execution.sandbox import get_backend
from wmrl.execution.task_builder import build_iris_task
from wmrl.execution.tasks import load_task
from wmrl.execution.workdir import IS_ROOT

LIMITS = SandboxLimits(wall_s=5, memory_mb=512, nproc=48, disk_mb=64, file_mb=32, max_output_mb=4, output_kb=4)
QUICK = ("import os, shutil\n"
         "shutil.copy(os.path.join(os.environ['DATA_DIR'], 'sample_submission.csv'), os.environ['SUBMISSION_PATH'])\n")
ISOLATING = ("bwrap", "warm", "docker")  # backends with filesystem and pid isolation


def _docker_or_skip():
    try:
        return get_backend("docker")
    except Exception as err:  # docker SDK missing, or no daemon answering
        pytest.skip(f"DOCKER BACKEND NOT TESTED: no Docker daemon answered ({type(err).__name__}: {err}). "
                    "Start one with `bash .ci/docker-up.sh && source /tmp/wmrl-docker/env.sh`.")


@pytest.fixture(scope="module", params=["bwrap", "warm", "subprocess", pytest.param("docker", marks=pytest.mark.docker)])
def pool(request):
    if request.param in ("bwrap", "warm"):
        if not bwrap_works():
            pytest.skip(f"{request.param.upper()} BACKEND NOT TESTED: bwrap cannot create namespaces on this machine")
        backend = get_backend(request.param) if request.param == "bwrap" else get_backend("warm", base="bwrap")
    elif request.param == "docker":
        backend = _docker_or_skip()
    else:
        backend = get_backend("subprocess")
    with ExecutionPool(backend, max_workers=2) as p:
        yield p


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return load_task(build_iris_task(tmp_path_factory.mktemp("hostile")).root)


def tree_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(folder).rglob("*")):
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def processes_named(name: str, grace_s: float = 5.0) -> list[int]:
    """Live host pids whose comm is `name` (hostile programs rename themselves with prctl so they can be found).
    Zombies are dead (only waiting for the host's init to reap them), so they do not count; a live one gets a
    short grace period because SIGKILL delivery is asynchronous."""
    deadline = time.monotonic() + grace_s
    while True:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if Path("/proc", entry, "comm").read_text().strip() != name:
                        continue
                    state = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[0]
                except OSError:
                    continue
                if state not in ("Z", "X"):
                    found.append(int(entry))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def rename(marker: str) -> str:
    return f"import ctypes\nctypes.CDLL(None).prctl(15, {marker.encode()!r}, 0, 0, 0)\n"


def run_hostile(pool, task, code, limits=LIMITS):
    "Run the hostile code next to a harmless job, check the task folder, then check the pool still serves."
    before = tree_hash(task.root)
    hostile, neighbour = pool.map([(task, code, limits), (task, QUICK, limits)], progress=False)
    assert tree_hash(task.root) == before, "the task folder changed"
    assert neighbour.status == "ok", f"the harmless neighbour suffered: {neighbour}"
    (after,) = pool.map([(task, QUICK, limits)], progress=False)
    assert after.status == "ok", f"the pool stopped serving: {after}"
    assert not hostile.infra_error, hostile.message
    assert hostile.message, "every record needs a message"
    return hostile


def needs_isolation(pool, what: str):
    if pool.backend.name not in ISOLATING:
        pytest.skip(f"{pool.backend.label}: cannot contain {what} (no filesystem/pid isolation), by design")


def test_infinite_loop(pool, task):
    rec = run_hostile(pool, task, "while True: pass")
    assert rec.status == "timeout", rec
    assert "limit" in rec.message and rec.reward == pytest.approx(0.1)
    assert rec.wall_s < LIMITS.wall_s + 5


def test_sleep_forever(pool, task):
    rec = run_hostile(pool, task, "import time\ntime.sleep(10**6)")
    assert rec.status == "timeout" and "wall-clock limit of 5 s" in rec.message, rec
    assert rec.cpu_s != rec.cpu_s or rec.cpu_s < 1.0  # it slept: almost no CPU (NaN when docker lost the report)


def test_memory_bomb(pool, task):
    rec = run_hostile(pool, task, "chunks = []\nwhile True:\n    chunks.append(bytearray(64 << 20))")
    assert rec.status == "memory" and "512 MB" in rec.message, rec


def test_memory_bomb_in_a_child_process(pool, task):
    code = ("import os\npid = os.fork()\nif pid == 0:\n    x = [bytearray(64 << 20) for _ in range(100)]\n    os._exit(0)\n"
            "_, status = os.waitpid(pid, 0)\nraise SystemExit(f'child status {status}')")
    rec = run_hostile(pool, task, code)
    assert rec.status in ("memory", "runtime_error"), rec
    assert "child status" in rec.message or "memory" in rec.message


def test_fork_bomb(pool, task):
    marker = "wb" + uuid.uuid4().hex[:10]
    code = rename(marker) + "import os, time\nwhile True:\n    try: os.fork()\n    except OSError: time.sleep(0.01)\n"
    rec = run_hostile(pool, task, code)
    assert rec.status in ("timeout", "runtime_error"), rec
    assert processes_named(marker) == [], "fork-bomb processes survived the run"


def test_daemon_does_not_outlive_the_run(pool, task):
    marker = "wd" + uuid.uuid4().hex[:10]
    code = (rename(marker) + "import os, sys, time\n"
            "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        for fd in (0, 1, 2): os.close(fd)\n        time.sleep(600)\n    os._exit(0)\n"
            "print('parent leaves the daemon behind')\n")
    rec = run_hostile(pool, task, code)
    assert rec.status == "no_submission", rec
    assert processes_named(marker) == [], "the daemon outlived the run"


def test_network_to_a_host_listener(pool, task):
    if pool.backend.name == "subprocess" and not IS_ROOT:
        pytest.skip("subprocess backend without root cannot unshare the network")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    code = ("import socket\ntry:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'stolen')\n    print('CONNECTED')\n"
            "except OSError as err:\n    print('blocked:', err)\n")
    try:
        rec = run_hostile(pool, task, code)
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert "CONNECTED" not in rec.stdout_tail and "blocked" in rec.stdout_tail, rec


def test_writes_outside_the_workdir(pool, task, tmp_path):
    needs_isolation(pool, "writes outside the workdir")
    outside = tmp_path / "outside"
    outside.mkdir()
    targets = [outside / "pwned.txt", Path("/etc/wmrl-pwned"), Path("/usr/wmrl-pwned"), Path("/root/wmrl-pwned")]
    code = "import os\nfor p in %r:\n    try:\n        open(p, 'w').write('x'); print('WROTE', p)\n    except OSError as e:\n        print('denied', p, e.errno)\n" % [str(t) for t in targets]
    rec = run_hostile(pool, task, code)
    assert "WROTE" not in rec.stdout_tail, rec.stdout_tail
    assert not any(t.exists() for t in targets)


def test_modifying_the_task_data(pool, task):
    needs_isolation(pool, "writes to the task folder")
    code = ("import os, shutil\nd = os.environ['DATA_DIR']\nfor action in ("
            "lambda: open(os.path.join(d, 'train.csv'), 'a').write('poison'),"
            "lambda: os.remove(os.path.join(d, 'test.csv')),"
            f"lambda: open({str(task.public_dir / 'train.csv')!r}, 'w').write('x'),"
            f"lambda: shutil.rmtree({str(task.root)!r})):\n"
            "    try:\n        action(); print('CHANGED')\n    except OSError as e:\n        print('denied', e.errno)\n")
    rec = run_hostile(pool, task, code)  # run_hostile hashes the task folder before and after
    assert "CHANGED" not in rec.stdout_tail, rec.stdout_tail


def test_reading_private_answers_by_guessing_paths(pool, task):
    needs_isolation(pool, "reads of the private answers")
    guesses = [str(task.answer_path), str(task.root / "private"), "../private/test_answer.csv",
               "/data/../private/test_answer.csv", "/proc/1/root" + str(task.answer_path)]
    code = (f"import glob, os\nfor p in {guesses!r} + glob.glob('/**/test_answer.csv', recursive=False) + glob.glob('/tmp/**/*.csv', recursive=True):\n"
            "    try:\n        print('LEAKED', p, open(p).read()[:20]) if os.path.isfile(p) else os.listdir(p) and print('LEAKED', p)\n"
            "    except OSError as e:\n        print('denied', p, e.errno)\n")
    rec = run_hostile(pool, task, code)
    assert "LEAKED" not in rec.stdout_tail, rec.stdout_tail


def test_huge_stdout(pool, task):
    rec = run_hostile(pool, task, "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n")
    assert rec.status in ("runtime_error", "timeout"), rec
    assert len(rec.stdout_tail) <= LIMITS.output_kb * 1024
    assert "MB of output" in rec.message, rec


def test_output_cap_passed_between_polls(pool, task):
    """Five MB in one write, then an exit: the warm server polls every 20 ms, and must still count what it missed;
    Docker's log driver keeps only a tail, so the host counts the stream itself. Every backend grades it alike."""
    rec = run_hostile(pool, task, "import os, sys\nsys.stdout.write('x' * (5 << 20))\nsys.stdout.flush()\nos._exit(0)\n")
    assert len(rec.stdout_tail) <= LIMITS.output_kb * 1024
    assert rec.status == "runtime_error" and "MB of output" in rec.message, rec


def test_segfault(pool, task):
    rec = run_hostile(pool, task, "import ctypes\nctypes.string_at(0)\n")
    assert rec.status == "runtime_error" and "SIGSEGV" in rec.message, rec


def test_os_exit(pool, task):
    rec = run_hostile(pool, task, "import os\nprint('bye', flush=True)\nos._exit(7)\n")
    assert rec.status == "runtime_error" and rec.message == "exited with code 7", rec
    assert rec.exit_code == 7 and rec.stdout_tail == "bye\n"


def test_killing_its_parent(pool, task):
    needs_isolation(pool, "a solution that kills its parent (its parent is the host process)")
    code = ("import os, signal, shutil\n"
            "for target in (os.getppid(), 1, -1):\n    try: os.kill(target, signal.SIGKILL); print('sent', target)\n"
            "    except OSError as e: print('denied', target, e.errno)\n" + QUICK)
    rec = run_hostile(pool, task, code)
    assert rec.status in ("ok", "runtime_error", "no_submission"), rec


def test_filling_the_disk(pool, task):
    code = ("import os\nwritten = 0\ntry:\n    for i in range(10**6):\n"
            "        with open(f'fill{i % 50}.bin' if i < 50 else f'fill{i}.bin', 'wb') as f: f.write(b'0' * (4 << 20))\n"
            "        written += 4\nexcept OSError as e:\n    raise SystemExit(f'{e.strerror} after {written} MB')\n")
    rec = run_hostile(pool, task, code)
    assert rec.status == "runtime_error", rec
    assert "No space left" in rec.message or "disk budget" in rec.message or "File too large" in rec.message, rec.message


def test_syntax_error(pool, task):
    rec = run_hostile(pool, task, "import os\n\ndef f(:\n    pass\n")
    assert rec.status == "syntax_error" and rec.reward == 0.0, rec
    assert rec.message.startswith("syntax error at line 3"), rec.message


def test_missing_import(pool, task):
    rec = run_hostile(pool, task, "import numpy\nimport definitely_not_a_module_wmrl\n")
    assert rec.status == "runtime_error", rec
    assert rec.message == "ModuleNotFoundError: No module named 'definitely_not_a_module_wmrl'"


def test_escaping_through_proc_and_mounts(pool, task):
    needs_isolation(pool, "remounting or reading host processes")
    code = ("import os, subprocess\nprint('pids', len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
            "r = subprocess.run(['mount', '-o', 'remount,rw', '/data'], capture_output=True, text=True)\n"
            "print('remount', r.returncode)\n"
            "try:\n    open('/data/train.csv', 'a').write('x'); print('WROTE')\nexcept OSError as e:\n    print('denied', e.errno)\n")
    rec = run_hostile(pool, task, code)
    assert "WROTE" not in rec.stdout_tail and "remount 0" not in rec.stdout_tail, rec.stdout_tail
    n_pids = int(rec.stdout_tail.split("pids ")[1].split()[0])
    assert n_pids < 10, f"the sandbox sees {n_pids} host processes"
