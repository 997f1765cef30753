"""Contamination suite: attacks a learning agent could discover against the warm backend, each run next to a
clean solution on the same warm server.

For every attack: the attacker runs, a clean solution runs beside it (started at the same time) and again after it,
on the same server. Both clean records (status, reward, graded score) must equal the clean solution's cold bwrap
record, the host must be unchanged (task folder, a planted host folder, no job folder left on the host, no process
left behind), and the attacker gets a real record of its own (never an infrastructure error, never another's
reward). The attacks live in tests/contamination_attacks.py; tests/NOTES.md lists each with its outcome.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from contamination_attacks import ATTACKS, BESIDE, fill, same_record

from wmrl.execution.backends import bwrap_works
from wmrl.execution.limits import SandboxLimits
from wmrl.execution.pool import ExecutionPool
from wmrl.execution.sandbox import execute, get_backend
from wmrl.execution.task_builder import build_iris_task
from wmrl.execution.tasks import load_task
from wmrl.execution.warm import WarmBackend

REPO = Path(__file__).resolve().parents[1]
CLEAN = (REPO / "toy" / "solutions" / "iris" / "good_logistic.py").read_text()
LIMITS = SandboxLimits(wall_s=30, memory_mb=1024, nproc=48, disk_mb=64, file_mb=32, max_output_mb=4, output_kb=4)
ATTACK_LIMITS = SandboxLimits(wall_s=8, memory_mb=1024, nproc=48, disk_mb=64, file_mb=32, max_output_mb=4, output_kb=4)

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="WARM BACKEND NOT TESTED: bwrap cannot create namespaces here")

# what the attacker's own record must be (None: any status, as long as it is its own and not an infra error)
EXPECT = {
    "stdout_symlink_to_answers": {"no_submission"}, "stderr_symlink_to_shadow": {"no_submission"},
    "work_symlink_to_host_folder": {"no_submission"}, "jobdir_symlink_to_usr": {"no_submission"},
    "hardlink_sibling_submission": {"no_submission"}, "forge_result_lines": {"no_submission", "timeout"},
    "kill_the_server_before_failing": {"runtime_error"}, "memory_over_the_limit": {"memory"},
    "symlink_submission_to_answers": {"invalid_submission"}, "fifo_submission": {"invalid_submission"},
    "huge_submission": {"invalid_submission"}, "output_flood": {"runtime_error"},
    "ptrace_everything": {"no_submission"}, "read_others_proc": {"no_submission"},
    "nested_userns_remount": {"no_submission"}, "inherited_fd_scan": {"no_submission"},
    "hold_the_process_cap": {"no_submission"}, "cpu_starver_setsid": {"timeout"}, "budget_across_children": {"timeout"},
}
MESSAGES = {"symlink_submission_to_answers": "symbolic link", "fifo_submission": "FIFO",
            "huge_submission": "over the cap", "output_flood": "more than 4 MB of output"}
STDOUT = {"ptrace_everything": "attached []", "read_others_proc": "SEEN 0", "inherited_fd_scan": "INHERITED []",
          "nested_userns_remount": "LISTING ['x']"}


def tree_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(folder).rglob("*")):
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def live_processes_named(name: str, grace_s: float = 3.0) -> list[int]:
    deadline = time.monotonic() + grace_s
    while True:
        found = []
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and Path("/proc", entry, "comm").read_text().strip() == name:
                    if Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX":
                        found.append(int(entry))
            except OSError:
                pass
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return load_task(build_iris_task(tmp_path_factory.mktemp("contamination")).root)


@pytest.fixture(scope="module")
def planted(task, tmp_path_factory):
    "A host folder with a submission.csv in it (the answers): what an attacker would like the host to grade."
    folder = tmp_path_factory.mktemp("planted")
    shutil.copy(task.answer_path, folder / "submission.csv")
    return folder


@pytest.fixture(scope="module")
def cold(task):
    return execute(task, CLEAN, backend=get_backend("bwrap"), limits=LIMITS)


@pytest.fixture(scope="module")
def warm():
    backend = WarmBackend(base="bwrap", max_servers=2)
    yield backend
    backend.close()


def secrets(task) -> list[str]:
    "Strings that must never come back to the host in a record: answer rows and the host's /etc/shadow."
    rows = task.answer_path.read_text().splitlines()[1:4]
    try:
        shadow = [line for line in Path("/etc/shadow").read_text().splitlines() if line.strip()][:2]
    except OSError:
        shadow = []
    return [s for s in rows + shadow if len(s) > 6]


def run_attack(warm, task, planted, cold, name):
    code = fill(ATTACKS[name], str(task.root), str(planted))
    before = (tree_hash(task.root), tree_hash(planted))
    with ExecutionPool(warm, max_workers=2) as pool:
        if name in BESIDE:  # the clean job must be running while the attacker acts
            attacker, beside = pool.map([(task, code, ATTACK_LIMITS), (task, CLEAN, LIMITS)], progress=False)
        else:
            attacker = pool.map([(task, code, ATTACK_LIMITS)], progress=False)[0]
            beside = None
        (after,) = pool.map([(task, CLEAN, LIMITS)], progress=False)
    for clean in (beside, after):
        if clean is not None:
            assert same_record(clean, cold), f"{name}: the clean record changed: {clean} vs cold {cold}"
    assert (tree_hash(task.root), tree_hash(planted)) == before, f"{name}: a host folder changed"
    for server in warm.servers.values():
        assert not list(server.jobs.work.iterdir()), f"{name}: job folders left on the host: {list(server.jobs.work.iterdir())}"
    assert not attacker.infra_error and not math.isnan(attacker.reward), f"{name}: {attacker}"
    leaked = [s for s in secrets(task) if s in attacker.stdout_tail or s in attacker.stderr_tail]
    assert not leaked, f"{name}: host secrets came back in the record: {leaked}"
    if name in EXPECT:
        assert attacker.status in EXPECT[name], f"{name}: {attacker.status}: {attacker.message}"
    if name in MESSAGES:
        assert MESSAGES[name] in attacker.message, f"{name}: {attacker.message}"
    if name in STDOUT:
        assert STDOUT[name] in attacker.stdout_tail, f"{name}: {attacker.stdout_tail}"
    return attacker


FAST = [n for n in ATTACKS if n not in {"fork_bomb_beside", "kill_a_running_sibling", "sigstop_the_server"}]


@pytest.mark.parametrize("name", FAST)
def test_attack(warm, task, planted, cold, name):
    attacker = run_attack(warm, task, planted, cold, name)
    if name == "forge_result_lines":  # the ledger charges what it burnt (1.5 CPU-s), not what it claimed (0 in 0 s)
        assert (attacker.status == "no_submission" and attacker.cpu_s >= 1.0) or \
            (attacker.status == "timeout" and attacker.wall_s >= ATTACK_LIMITS.wall_s), attacker
    if name == "daemon_outlives_the_job":
        assert not live_processes_named("wmrlghost"), "the daemon outlived its job"
    if name == "memory_over_the_limit":  # one meaning of memory_mb: the cold backend says the same
        slack = dataclasses.replace(ATTACK_LIMITS, wall_s=300)  # cold imports are slow on a loaded machine
        assert execute(task, ATTACKS[name], backend=get_backend("bwrap"), limits=slack).status == "memory"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fork_bomb_beside", "kill_a_running_sibling", "sigstop_the_server"])
def test_slow_attack(warm, task, planted, cold, name):
    run_attack(warm, task, planted, cold, name)


def test_nothing_is_left_for_the_next_job(warm, task, planted, cold):
    "Files in /tmp, /dev/shm and the working folder, and SysV IPC objects, do not outlive their job."
    probe = ("import ctypes, os, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n"
             "tmp = [e for e in os.listdir('/tmp') if not sys.prefix.startswith('/tmp/%s/' % e)]\n"  # a venv under /tmp
             "print('LEFT', sorted(tmp), sorted(os.listdir('/dev/shm')), sorted(os.listdir('.')),"
             " libc.shmget(0x7761726d, 0, 0), libc.semget(0x7761726d, 0, 0))\n")
    with ExecutionPool(warm, max_workers=1) as pool:
        for name in ("tmp_and_shm_leftovers", "sysv_shm_and_mqueue", "user_site_and_home_poison", "exhaust_tmpfs_inodes"):
            pool.map([(task, fill(ATTACKS[name], str(task.root), str(planted)), ATTACK_LIMITS)], progress=False)
            (seen,) = pool.map([(task, probe, LIMITS)], progress=False)
            assert "LEFT [] [] [] -1 -1" in seen.stdout_tail, (name, seen.stdout_tail, seen.stderr_tail)


def test_jobs_cannot_reach_each_other_over_the_network(warm, task, planted):
    probe = ("import socket, time\ntime.sleep(1.0)\nout = []\n"
             "for family, address in ((socket.AF_UNIX, '\\0wmrl-contamination'), (socket.AF_INET, ('127.0.0.1', 47123))):\n"
             "    s = socket.socket(family)\n"
             "    try: s.connect(address); out.append('CONNECTED')\n"
             "    except OSError as e: out.append(e.errno)\n"
             "print('PROBE', out)\n")
    listener = ATTACKS["localhost_and_abstract_socket_listener"]
    with ExecutionPool(warm, max_workers=2) as pool:
        _, seen = pool.map([(task, listener, ATTACK_LIMITS), (task, probe, LIMITS)], progress=False)
    assert "PROBE" in seen.stdout_tail and "CONNECTED" not in seen.stdout_tail, seen.stdout_tail


def test_a_job_sees_only_its_own_processes(warm, task):
    """Issue 24, breach 8: warm jobs saw the server's /proc, so a program with no model read a sibling's command line
    (and its CPU, start time, limits and mounts). Now each job's init mounts a /proc of the job's own pid namespace
    before entering its user namespace: a sibling holding a secret in its argv is not there. (On commit 355c8a2 the
    scan finds the secret and lists the server's and the sibling's pids.)"""
    holder = ("import subprocess, sys\n"
              "subprocess.run([sys.executable, '-c', 'import time; time.sleep(3)', 'wmrl-sibling-secret'])\n")
    scan = ("import os, time\ntime.sleep(0.8)\nfound, pids = [], set()\nend = time.time() + 1.5\n"
            "while time.time() < end:\n"
            "    for p in os.listdir('/proc'):\n"
            "        if p.isdigit():\n"
            "            pids.add(int(p))\n"
            "            try:\n"
            "                if b'wmrl-sibling-secret' in open('/proc/%s/cmdline' % p, 'rb').read(): found.append(p)\n"
            "            except OSError: pass\n"
            "    time.sleep(0.05)\n"
            "print('FOUND', sorted(set(found)), 'PIDS', sorted(pids))\n")
    with ExecutionPool(warm, max_workers=2) as pool:
        _, seen = pool.map([(task, holder, ATTACK_LIMITS), (task, scan, LIMITS)], progress=False)
    assert "FOUND [] PIDS [1, 2]" in seen.stdout_tail, seen.stdout_tail  # its init and itself, nothing else


@pytest.mark.slow
def test_a_stopped_server_is_killed_and_its_job_rerun(task, cold):
    "Liveness: a server that stops answering (here SIGSTOPped from the host) is killed; its job reruns alone."
    backend = WarmBackend(base="bwrap", max_servers=1)
    try:
        execute(task, "pass\n", backend=backend, limits=LIMITS)
        server = next(iter(backend.servers.values()))
        with ExecutionPool(backend, max_workers=1) as pool:
            future = pool.submit(task, CLEAN, LIMITS)
            time.sleep(0.2)
            for pid in server.group.pids():
                os.kill(pid, signal.SIGSTOP)
            record = future.result(timeout=180)
        assert same_record(record, cold), record
        assert backend.reruns == 1
    finally:
        backend.close()


OOM_THE_SERVER = (  # fresh small interpreters, each under the server's size and no longer the OOM killer's pick
    "import os, subprocess, sys\n"
    "child = (\"open('/proc/self/oom_score_adj', 'w').write('0'); x = bytearray(150 << 20); import time; time.sleep(20)\")\n"
    "open('/proc/self/oom_score_adj', 'w').write('0')\n"
    "procs = [subprocess.Popen([sys.executable, '-S', '-c', child]) for _ in range(24)]\n"
    "for p in procs: p.wait()\n"
    "raise SystemExit('the server should be gone by now')\n")


@pytest.mark.slow
def test_a_job_that_ooms_its_server_is_blamed_and_its_neighbour_rerun(task, cold):
    """The one way left to take a server down is its shared memory cap. The neighbour caught in the crash is rerun
    alone and gets its cold record; the attacker, rerun alone, takes that server down too and is charged: its own
    failure status and reward, its measured CPU, never NaN."""
    limits = SandboxLimits(wall_s=40, memory_mb=1024, nproc=64, disk_mb=64, file_mb=32, max_output_mb=4, output_kb=4)
    backend = WarmBackend(base="bwrap", max_servers=1, slots=1)
    try:
        with ExecutionPool(backend, max_workers=2) as pool:
            attacker, neighbour = pool.map([(task, OOM_THE_SERVER, limits), (task, CLEAN, limits)], progress=False)
    finally:
        backend.close()
    assert same_record(neighbour, cold), neighbour
    assert not attacker.infra_error and attacker.status in ("memory", "runtime_error"), attacker
    assert attacker.reward == 0.1 and attacker.cpu_s > 0, attacker


def test_the_text_ladder_reads_the_status_mledojo_reports():
    "A crash whose own output says 'Execution successful' is a crash (0.1), not a run without a submission (0.2)."
    from wmrl.adapters.agent_feedback import ladder_from_observation
    crash = ("=== Code Execution Results ===\nExecution failed: Traceback (most recent call last):\n"
             "print('Execution successful')\nValueError: boom")
    assert ladder_from_observation(crash, 0.0, "x = 1") == ("runtime_error", 0.1, None)
    ran = ("=== Code Execution Results ===\nExecution successful\nCode output: InvalidSubmission\n\n"
           "=== Submission Evaluation ===\nSubmission error (SubmissionNotFoundError)")
    assert ladder_from_observation(ran, 0.0, "x = 1") == ("no_submission", 0.2, None)


def _load_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("load_warm", REPO / "reproductions" / "bench" / "load_warm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check_load(summary):
    assert not summary["honest_rewards_differing_from_cold"], summary["honest_rewards_differing_from_cold"]
    assert not summary["hostile_without_own_record"], summary["hostile_without_own_record"]
    assert not summary["forged_records"] and summary["pool_serves_after"], summary


def test_small_load_run():
    "The CI-sized load run: mixed honest and hostile jobs through the warm pool with 2 workers."
    _check_load(_load_module().load_run(n_jobs=6, workers=2, seed=1, progress=False))


@pytest.mark.slow
def test_load_run_200_jobs():
    "The full load run (also `python reproductions/bench/load_warm.py`): 200 mixed jobs, 2 workers."
    _check_load(_load_module().load_run(n_jobs=200, workers=2, seed=0, progress=False))
