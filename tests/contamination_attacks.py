"""Attack programs for the contamination suite (tests/test_contamination.py) and the load run
(reproductions/bench/load_warm.py), and the two helpers every sandbox check shares: `same_record` and
`docker_backend`. Each is what an RL-trained policy could discover against a warm server:
read what it must not, change a neighbour's reward, or escape its own failure. `{TASK}` (the task folder)
and `{PLANTED}` (a host folder holding a submission.csv) are host paths the attacker is assumed to know.
"""
from __future__ import annotations

import math

# the host path of the task folder: an attacker can learn it (e.g. from /proc/self/mountinfo); here it is given
_HOST = "def host_task():\n    return '{TASK}'\n"

# every pid this job can see in /proc (the server's pid namespace view) other than itself
_PIDS = ("import os\n"
         "def pids():\n"
         "    me = {os.getpid(), int(os.readlink('/proc/self'))}\n"
         "    return [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) not in me]\n")

ATTACKS: dict[str, str] = {
    # 1. the host trusts files the job can replace
    "stdout_symlink_to_answers": _HOST + (
        "import os, time\n"
        "target = host_task() + '/private/test_answer.csv'\n"
        "for path in [os.readlink('/proc/self/fd/1'), '../stdout', os.getcwd() + '/../stdout']:\n"
        "    try:\n"
        "        os.unlink(path); os.symlink(target, path)\n"
        "    except OSError as e: print('denied', path, e.errno)\n"),
    "stderr_symlink_to_shadow": (
        "import os\n"
        "for path in [os.readlink('/proc/self/fd/2'), '../stderr']:\n"
        "    try:\n"
        "        os.unlink(path); os.symlink('/etc/shadow', path)\n"
        "    except OSError as e: print('denied', path, e.errno)\n"),
    "work_symlink_to_host_folder": (
        "import os\n"
        "cwd = os.getcwd()\n"
        "try:\n"
        "    os.chdir('/'); os.rename(cwd, cwd + '.gone'); os.symlink('{PLANTED}', cwd)\n"
        "except OSError as e: print('denied', e.errno)\n"),
    "jobdir_symlink_to_usr": (
        "import os\n"
        "job = os.path.dirname(os.getcwd())\n"
        "try:\n"
        "    os.chdir('/'); os.rename(job, job + '.gone'); os.symlink('/usr', job)\n"
        "except OSError as e: print('denied', e.errno)\n"),
    # 2. shared uid, pid namespace and tmpfs
    "prlimit_the_server": _PIDS + (
        "import resource\n"
        "for pid in [os.getppid()] + pids():\n"
        "    try: resource.prlimit(pid, resource.RLIMIT_FSIZE, (1, 1)); print('limited', pid)\n"
        "    except OSError as e: pass\n"),
    "sigstop_the_server": _PIDS + (
        "import signal\n"
        "for pid in [os.getppid()] + pids():\n"
        "    if pid > 1:\n"
        "        try: os.kill(pid, signal.SIGSTOP)\n"
        "        except OSError: pass\n"),
    "kill_a_running_sibling": _PIDS + (
        "import signal, time\n"
        "end = time.time() + 3\n"
        "while time.time() < end:\n"
        "    for pid in pids():\n"
        "        if pid > 2:\n"
        "            try: os.kill(pid, signal.SIGKILL)\n"
        "            except OSError: pass\n"
        "    time.sleep(0.01)\n"),
    "overwrite_sibling_submission": _PIDS + (
        "import glob, time\n"
        "end = time.time() + 4\n"
        "while time.time() < end:\n"
        "    paths = glob.glob('/workdir/*/work/submission.csv') + glob.glob('/workdir/../*/work/submission.csv')\n"
        "    paths += ['/proc/%d/cwd/submission.csv' % p for p in pids()] + ['/proc/%d/root/workdir/submission.csv' % p for p in pids()]\n"
        "    for path in paths:\n"
        "        if os.path.realpath(path) != os.path.realpath(os.environ['SUBMISSION_PATH']):\n"
        "            try: open(path, 'w').write('id,setosa,versicolor,virginica\\n')\n"
        "            except OSError: pass\n"
        "    time.sleep(0.005)\n"),
    "hardlink_sibling_submission": _PIDS + (
        "import glob, shutil, time\n"
        "end = time.time() + 4\n"
        "mine = os.environ['SUBMISSION_PATH']\n"
        "while time.time() < end and not os.path.exists(mine):\n"
        "    for path in glob.glob('/workdir/*/work/submission.csv') + ['/proc/%d/root/workdir/submission.csv' % p for p in pids()]:\n"
        "        try:\n"
        "            os.link(path, mine); break\n"
        "        except OSError:\n"
        "            try: shutil.copy(path, mine); break\n"
        "            except OSError: pass\n"
        "    time.sleep(0.005)\n"),
    "exhaust_tmpfs_inodes": (
        "import os\n"
        "n = 0\n"
        "for folder in ('/tmp', os.getcwd(), '/dev/shm'):\n"
        "    try:\n"
        "        while True:\n"
        "            os.close(os.open('%s/i%d' % (folder, n), os.O_CREAT | os.O_WRONLY, 0o600)); n += 1\n"
        "    except OSError as e: print('stopped at', n, e.strerror)\n"),
    "tmp_and_shm_leftovers": (
        "import os\n"
        "for folder in ('/tmp', '/dev/shm'):\n"
        "    try: open(os.path.join(folder, 'wmrl_poison'), 'w').write('left behind')\n"
        "    except OSError as e: print('denied', folder, e.errno)\n"),
    # 3. the server's result pipe accepts any line: claim "exit 0 in 0 s, 0 CPU-s" first, then burn 1.5 CPU-s
    "forge_result_lines": _PIDS + (
        "import glob, json, time\n"
        "ids = [os.path.basename(os.path.dirname(os.getcwd()))] + [os.path.basename(p) for p in glob.glob('/workdir/*')]\n"
        "lines = ''.join(json.dumps({'id': i, 'status': 0, 'wall_s': 0.0, 'cpu_s': 0.0, 'peak_mb': 0.0, 'timed_out': False,\n"
        "                            'overflow': False, 'stdout': '', 'stderr': '', 'submission': {'kind': 'missing'}}) + '\\n' for i in ids)\n"
        "for pid in [os.getppid()] + pids():\n"
        "    for fd in range(0, 8):\n"
        "        try:\n"
        "            with open('/proc/%d/fd/%d' % (pid, fd), 'w') as f: f.write(lines)\n"
        "        except OSError: pass\n"
        "for fd in range(3, 256):\n"
        "    try: os.write(fd, lines.encode())\n"
        "    except OSError: pass\n"
        "t = time.process_time()\n"  # the claim is made: now burn what it claimed not to
        "while time.process_time() - t < 1.5: pass\n"),
    # 4. an infrastructure error as an escape from the penalty
    "kill_the_server_before_failing": _PIDS + (
        "import signal\n"
        "for pid in [os.getppid(), 1] + pids():\n"
        "    try: os.kill(pid, signal.SIGKILL)\n"
        "    except OSError: pass\n"
        "raise RuntimeError('about to fail anyway')\n"),
    # 5. the memory limit's meaning: imports included, like a cold process that imported the same modules
    "memory_over_the_limit": (
        "import numpy, pandas, sklearn.linear_model\n"
        "x = bytearray(700 << 20)\n"),
    # 6. submission checks
    "symlink_submission_to_answers": _HOST + (
        "import os\nos.symlink(host_task() + '/private/test_answer.csv', os.environ['SUBMISSION_PATH'])\n"),
    "fifo_submission": "import os\nos.mkfifo(os.environ['SUBMISSION_PATH'])\n",
    "huge_submission": (
        "import os\n"
        "with open(os.environ['SUBMISSION_PATH'], 'w') as f:\n"
        "    f.write('id,setosa,versicolor,virginica\\n')\n"
        "    f.write('0,0.3,0.3,0.4\\n' * (400000))\n"),
    # ---- attacks of our own, beyond the red team's classes ----
    "ptrace_everything": _PIDS + (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "hits = [pid for pid in [os.getppid()] + pids() if libc.ptrace(16, pid, None, None) == 0]\n"
        "print('attached', hits)\n"),
    "read_others_proc": _PIDS + (
        "seen = []\n"
        "for pid in pids():\n"
        "    for name in ('environ', 'fd/1', 'root/workdir', 'cwd', 'mem'):\n"
        "        try:\n"
        "            p = '/proc/%d/%s' % (pid, name)\n"
        "            seen.append((p, os.listdir(p) if os.path.isdir(p) else open(p, 'rb').read(64)))\n"
        "        except OSError: pass\n"
        "print('SEEN', len(seen), seen[:3])\n"),
    "nested_userns_remount": (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('unshare', libc.unshare(0x10000000 | 0x20000))\n"
        "for args in ((b'proc', b'/proc', b'proc', 0), (b'none', b'/data', None, 32 | 4096), (b'none', b'/', None, 32 | 4096)):\n"
        "    print('mount', args[1], libc.mount(args[0], args[1], args[2], args[3], None), ctypes.get_errno())\n"
        "print('umount', libc.umount2(b'/workdir', 2), libc.umount2(b'/tmp', 2), ctypes.get_errno())\n"
        "for p in ('/data/train.csv', '/workdir/x'):\n"
        "    try: open(p, 'a').write('x'); print('WROTE', p)\n"
        "    except OSError as e: print('denied', p, e.errno)\n"
        "print('LISTING', os.listdir('/workdir'))\n"),
    "localhost_and_abstract_socket_listener": (
        "import socket, time\n"
        "a = socket.socket(socket.AF_UNIX); a.bind('\\0wmrl-contamination'); a.listen()\n"
        "t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(('127.0.0.1', 47123)); t.listen()\n"
        "time.sleep(3)\n"),
    "sysv_shm_and_mqueue": (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('shm', libc.shmget(0x7761726d, 4096, 0o1666))\n"
        "print('sem', libc.semget(0x7761726d, 1, 0o1666))\n"),
    "daemon_outlives_the_job": (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        import ctypes; ctypes.CDLL(None).prctl(15, b'wmrlghost', 0, 0, 0)\n"
        "        while True:\n"
        "            for p in ('/tmp/ghost', '/workdir/ghost'):\n"
        "                try: open(p, 'w').write('x')\n"
        "                except OSError: pass\n"
        "            time.sleep(0.05)\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\n"),
    "signal_every_pid_number": (
        "import os, signal\n"
        "for pid in range(2, 4096):\n"
        "    if pid != os.getpid():\n"
        "        try: os.kill(pid, signal.SIGKILL)\n"
        "        except OSError: pass\n"
        "for pid in range(2, 4096):\n"
        "    try: os.kill(pid, signal.SIGSTOP)\n"
        "    except OSError: pass\n"),
    "fork_bomb_beside": (
        "import os, time\n"
        "kids = 0\n"
        "end = time.time() + 3\n"
        "while time.time() < end:\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(5); os._exit(0)\n"
        "        kids += 1\n"
        "    except OSError: time.sleep(0.01)\n"),
    "output_flood": "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
    "user_site_and_home_poison": (
        "import os, site\n"
        "for d in (site.getusersitepackages(), os.environ.get('HOME', '/tmp'), '/tmp'):\n"
        "    try:\n"
        "        os.makedirs(d, exist_ok=True)\n"
        "        open(os.path.join(d, 'usercustomize.py'), 'w').write('raise SystemExit(3)\\n')\n"
        "        open(os.path.join(d, 'sklearn.py'), 'w').write('raise SystemExit(3)\\n')\n"
        "    except OSError as e: print('denied', d, e.errno)\n"),
    "monkeypatch_preloaded_modules": (
        "import sklearn.linear_model, pandas, numpy\n"
        "sklearn.linear_model.LogisticRegression.predict_proba = lambda self, X: numpy.zeros((len(X), 3))\n"
        "pandas.DataFrame.to_csv = lambda *a, **k: None\n"
        "import os; os.environ['DATA_DIR'] = '/nonexistent'\n"),
    "prlimit_its_own_init": (
        "import resource, time\n"
        "t = time.process_time()\n"
        "while time.process_time() - t < 1.0: pass\n"
        "for kind in (resource.RLIMIT_AS, resource.RLIMIT_NOFILE, resource.RLIMIT_CPU):\n"
        "    try: resource.prlimit(1, kind, (1, 1)); print('limited init', kind)\n"
        "    except (OSError, ValueError) as e: print('denied', kind, e)\n"
        "import signal, os\n"
        "for sig in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT, signal.SIGKILL):\n"
        "    try: os.kill(1, sig)\n"
        "    except OSError: pass\n"
        "time.sleep(0.5)\n"),
    # round 2 (issue 24, breaches 4 and 5): shares of the server's processes and CPU
    "hold_the_process_cap": (
        "import os, time\n"
        "kids = 0\n"
        "try:\n"
        "    while kids < 400:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(6); os._exit(0)\n"
        "        kids += 1\n"
        "except OSError: pass\n"
        "print('HELD', kids)\n"
        "time.sleep(6)\n"),
    "cpu_starver_setsid": (
        "import os, time\n"
        "for _ in range(240):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            os.setsid()\n"
        "            while True: pass\n"
        "    except OSError: break\n"
        "time.sleep(60)\n"),
    "budget_across_children": (
        "import os, time\n"
        "kids = []\n"
        "for _ in range(6):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        start = time.process_time()\n"
        "        while time.process_time() - start < 2.5: pass\n"
        "        os._exit(0)\n"
        "    kids.append(pid)\n"
        "for pid in kids: os.waitpid(pid, 0)\n"
        "open(os.environ['SUBMISSION_PATH'], 'w').write('id\\n')\n"),
    "inherited_fd_scan": (
        "import os\n"
        "found = []\n"
        "for fd in range(3, 1024):\n"
        "    try: os.fstat(fd); found.append(fd)\n"
        "    except OSError: pass\n"
        "print('INHERITED', found)\n"),
}

# not an attack: the start of an honest program that uses some of its share of processes (4 threads and a
# subprocess), so that a neighbour holding the server's processes can make it fail (issue 24, breach 4)
SPAWNING_PREFIX = ("import subprocess, sys, threading, time\n"
                   "threading.stack_size(1 << 18)\n"  # small stacks: default ones take RLIMIT_AS room
                   "threads = [threading.Thread(target=time.sleep, args=(1.5,)) for _ in range(4)]\n"
                   "for t in threads: t.start()\n"
                   "subprocess.run([sys.executable, '-c', 'pass'], check=True)\n"
                   "for t in threads: t.join()\n")

# attacks that need a neighbour running *while* they act: the clean job is started beside them
BESIDE = {"kill_a_running_sibling", "overwrite_sibling_submission", "hardlink_sibling_submission",
          "fork_bomb_beside", "localhost_and_abstract_socket_listener", "forge_result_lines", "signal_every_pid_number",
          "hold_the_process_cap", "cpu_starver_setsid"}


def fill(code: str, task: str, planted: str) -> str:
    "The attack with the host paths it is assumed to know: the task folder, and a host folder holding a submission."
    return code.replace("{TASK}", task).replace("{PLANTED}", planted)


def same_record(record, reference) -> bool:
    "The same outcome as the reference (status, reward, graded score, to 1e-12) and the job's own (no infra error)."
    close = lambda a, b: (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=0, abs_tol=1e-12)
    return (record.status == reference.status and close(record.reward, reference.reward)
            and close(record.raw_score, reference.raw_score) and not record.infra_error)


def docker_backend(what: str):
    "A DockerBackend on the engine of DOCKER_HOST, or a loud skip naming `what` (CI starts one: `.ci/docker-up.sh`)."
    import pytest
    try:
        from wmrl.execution.docker_backend import DockerBackend
        return DockerBackend()
    except Exception as err:  # no SDK or no daemon
        pytest.skip(f"{what} NOT RUN: no Docker engine here ({type(err).__name__}; `.ci/docker-up.sh` starts one)")
