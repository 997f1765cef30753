"""Unit and property tests of wmrl.execution.sandbox that do not need hostile programs: limits, the output tail, status
classification, backend selection, the docker container arguments (checked without a daemon), the CLI."""
from __future__ import annotations

import json
import logging
import math
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wmrl.execution.sandbox as sandbox
from wmrl.execution.backends import _Tail, bwrap_works
from wmrl.execution.docker_backend import DockerBackend
from wmrl.execution.grading import STATUSES
from wmrl.execution.limits import MEMORY_EXIT, SYNTAX_EXIT, ExecutionRecord, RawRun, SandboxLimits
from wmrl.execution.pool import cli_run
from wmrl.execution.sandbox import classify, execute, get_backend
from wmrl.execution.task_builder import build_iris_task
from wmrl.execution.tasks import load_task
from wmrl.execution.workdir import Workdir, fetch_submission


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return load_task(build_iris_task(tmp_path_factory.mktemp("unit")).root)


def raw(**kw) -> RawRun:
    base = dict(exit_code=0, signal=None, wall_s=1.0, cpu_s=0.5, peak_mb=10.0, stdout_tail="", stderr_tail="")
    return RawRun(**{**base, **kw})


@given(st.lists(st.binary(max_size=300), max_size=40), st.integers(1, 200))
def test_tail_keeps_exactly_the_last_bytes(chunks, limit):
    tail = _Tail(limit)
    for chunk in chunks:
        tail.add(chunk)
    everything = b"".join(chunks)
    assert tail.total == len(everything)
    assert tail.text() == everything[-limit:].decode("utf-8", errors="replace")


@given(st.sampled_from(["wall_s", "memory_mb", "file_mb", "nofile", "nproc", "output_kb", "max_output_mb", "disk_mb"]),
       st.one_of(st.just(0), st.just(-1), st.just("10"), st.none(), st.just(True)))
@settings(max_examples=60)
def test_limits_reject_bad_values_by_name(name, value):
    with pytest.raises(ValueError, match=name):
        SandboxLimits(**{name: value})


@given(st.integers(0, 255), st.one_of(st.none(), st.sampled_from([2, 6, 9, 11, 15, 24])), st.booleans(), st.booleans())
def test_classify_always_returns_a_known_status_and_a_message(code, sig, timed_out, wrote):
    status, message = classify(raw(exit_code=None if sig else code, signal=sig, timed_out=timed_out,
                                   submission_path=Path("s.csv") if wrote else None), SandboxLimits())
    assert status in STATUSES and message
    if timed_out:
        assert status == "timeout"
    if not timed_out and sig is None and code == 0:
        assert status == ("ok" if wrote else "no_submission")


def test_classify_precedence():
    lim = SandboxLimits(wall_s=7, memory_mb=300)
    assert classify(raw(timed_out=True, oom_killed=True, signal=9, exit_code=None), lim)[0] == "timeout"
    assert classify(raw(signal=signal.SIGXCPU, exit_code=None), lim) == ("timeout", "killed at the CPU-time limit of 7 s")
    assert classify(raw(signal=9, exit_code=None, oom_killed=True), lim)[0] == "memory"
    status, message = classify(raw(exit_code=MEMORY_EXIT, stderr_tail="Traceback\nMemoryError\nWMRL_MEMORY_ERROR\n"), lim)
    assert (status, message) == ("memory", "out of memory (limit 300 MB): MemoryError")
    # a solution that prints the syntax marker itself but exits 1 is a runtime error, not a syntax error
    assert classify(raw(exit_code=1, stderr_tail="WMRL_SYNTAX_ERROR line 1: fake\n"), lim)[0] == "runtime_error"
    assert classify(raw(exit_code=SYNTAX_EXIT, stderr_tail="no marker\n"), lim)[0] == "runtime_error"
    assert classify(raw(exit_code=1, output_overflow=True), lim)[1] == "killed for writing more than 16 MB of output"
    assert classify(raw(exit_code=0, disk_overflow=True, submission_path=Path("s")), lim)[0] == "runtime_error"


def test_record_rejects_unknown_status_and_serialises_nan():
    with pytest.raises(ValueError, match="unknown status"):
        ExecutionRecord("crash", 0, 0, 0, 1, 0, 0, 0, "", "", "", "bwrap")
    rec = ExecutionRecord("memory", 0.1, math.nan, math.nan, None, 1.0, 0.5, math.nan, "", "", "oom", "bwrap")
    assert json.loads(json.dumps(rec.to_dict()))["peak_mb"] is None


def test_auto_falls_back_to_subprocess_with_a_warning(monkeypatch, caplog):
    monkeypatch.setattr(sandbox, "find_bwrap", lambda: None)
    with caplog.at_level(logging.WARNING, logger="wmrl.execution.sandbox"):
        backend = get_backend("auto")
    assert backend.name == "subprocess" and "no filesystem isolation" in backend.label
    assert "does NOT isolate" in caplog.text


def test_backend_from_settings(monkeypatch):
    monkeypatch.setenv("WMRL_SANDBOX_BACKEND", "subprocess")
    assert get_backend().name == "subprocess"
    with pytest.raises(ValueError, match="unknown sandbox backend"):
        get_backend("podman")


def test_workdir_never_follows_planted_links(tmp_path):
    wd = Workdir(disk_mb=4)
    try:
        (wd.work / "submission.csv").symlink_to("/etc/passwd")
        copy, problem = fetch_submission(wd.work, tmp_path, 1 << 20)
        assert copy is None and "symbolic link" in problem, problem
        (wd.work / "submission.csv").unlink()
        import os
        os.mkfifo(wd.work / "submission.csv")  # opening a FIFO for reading would block the host forever
        copy, problem = fetch_submission(wd.work, tmp_path, 1 << 20)
        assert copy is None and "FIFO" in problem, problem
    finally:
        wd.cleanup()
    assert not wd.root.exists()


def test_bad_inputs_are_rejected(task, tmp_path):
    backend = get_backend("subprocess")
    with pytest.raises(TypeError, match="code must be a str"):
        execute(task, b"print(1)", backend=backend)
    with pytest.raises(ValueError, match="not a directory"):
        backend.run("print(1)", tmp_path / "missing", SandboxLimits(), tmp_path)


class _FakeClient:  # only container_kwargs is exercised: no container is ever started
    def ping(self): return True


def test_docker_container_arguments_without_a_daemon(tmp_path):
    pytest.importorskip("docker")
    backend = DockerBackend(image="wmrl-sandbox:test", client=_FakeClient(), gpus=True, cpus=1.5)
    lim = SandboxLimits(wall_s=5, memory_mb=700, nproc=50, nofile=999999, disk_mb=100, file_mb=20)
    wd = Workdir(disk_mb=8, mount=False)
    try:
        (tmp_path / "job").mkdir()
        (tmp_path / "public").mkdir()
        kw = backend.container_kwargs(tmp_path / "job", wd, tmp_path / "public", lim)
    finally:
        wd.cleanup()
    # pid 1 is the container's root with four capabilities; the job itself runs as 65534 with none (drop_to)
    assert kw["network_mode"] == "none" and kw["read_only"] is True and kw["user"] == "0:0" and kw["init"] is False
    assert kw["cap_add"] == ["SETUID", "SETGID", "KILL", "DAC_OVERRIDE"] and "drop_to=65534" in kw["environment"]["WMRL_LAUNCH"]
    assert kw["security_opt"] == ["no-new-privileges"]
    assert kw["mem_limit"] == kw["memswap_limit"] == "800m" and kw["nano_cpus"] == 1_500_000_000
    assert kw["pids_limit"] == 50 and kw["cap_drop"] == ["ALL"] and kw["image"] == "wmrl-sandbox:test"
    ro = [v for v in kw["volumes"].values() if v["bind"] in ("/usr", "/data", "/sandbox")]
    assert ro and all(v["mode"] == "ro" for v in ro)
    assert {v["bind"] for v in kw["volumes"].values() if v["mode"] == "rw"} == {"/run/wmrl"}  # the hand-over folder only
    assert all(kw["tmpfs"][f].startswith("rw,") and "size=100m" in kw["tmpfs"][f] for f in ("/workdir", "/tmp"))
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = next(u for u in kw["ulimits"] if u["Name"] == "nofile")
    assert nofile["Hard"] <= hard  # asking for more than the hard limit makes runc fail
    assert kw["device_requests"][0]["Capabilities"] == [["gpu"]]
    assert "WMRL_LAUNCH" in kw["environment"] and kw["environment"]["DATA_DIR"] == "/data"


def test_cli_run_prints_the_record(task, tmp_path, capsys):
    solution = tmp_path / "solution.py"
    solution.write_text("import os, shutil\nshutil.copy(os.path.join(os.environ['DATA_DIR'], 'sample_submission.csv'), "
                        "os.environ['SUBMISSION_PATH'])\n")
    assert cli_run([str(task.root), str(solution), "--backend", "subprocess", "--timeout", "20"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["status"] == "ok" and printed["backend"].startswith("subprocess") and 0 <= printed["position"] <= 1
    assert cli_run([str(tmp_path / "no-task"), str(solution)]) == 2
    assert "error" in json.loads(capsys.readouterr().err)


def test_cli_run_as_a_separate_process(task, tmp_path):
    solution = tmp_path / "solution.py"
    solution.write_text("raise SystemExit('stop here')\n")
    done = subprocess.run([sys.executable, "-c", "import sys; from wmrl.execution.pool import cli_run; sys.exit(cli_run())",
                           str(task.root), str(solution)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["status"] == "runtime_error" and record["message"] == "stop here"


def test_a_task_inside_a_runtime_mount_is_refused(tmp_path):
    backend = get_backend("bwrap") if bwrap_works() else pytest.skip("bwrap unavailable")
    inside = Path(sys.prefix) / "wmrl-test-task-never-created" / "public"
    workdir = Workdir(disk_mb=1)
    try:
        with pytest.raises(ValueError, match="overlaps the sandbox mount"):
            backend.command(tmp_path, workdir, inside, SandboxLimits(), report_usage=False)
    finally:
        workdir.cleanup()
    from wmrl.execution.backends import _refuse_exposed_task
    with pytest.raises(ValueError, match="overlaps"):
        _refuse_exposed_task(Path("/usr/share/tasks/x/public"), ["/usr"])
    _refuse_exposed_task(tmp_path / "task" / "public", ["/usr", sys.prefix])  # unrelated folders are fine


def test_cleanup_stale_runs_only_touches_dead_owners(tmp_path):
    from wmrl.execution.workdir import cleanup_stale_runs
    dead, alive, foreign = (tmp_path / f"wmrl-run-{name}" for name in ("dead", "alive", "foreign"))
    for folder in (dead, alive, foreign):
        (folder / "work").mkdir(parents=True)
    (dead / ".owner").write_text("999999999")
    import os
    (alive / ".owner").write_text(str(os.getpid()))
    assert cleanup_stale_runs(tmp_path) == 1
    assert not dead.exists() and alive.exists() and foreign.exists()


def test_bwrap_binds_the_interpreter_after_tmp(tmp_path):
    """A venv that lives under /tmp (a CI clone, say) must not be hidden by the sandbox's own /tmp mount."""
    from types import SimpleNamespace

    from wmrl.execution.backends import BwrapBackend, find_bwrap
    if not find_bwrap():
        pytest.skip("BWRAP NOT AVAILABLE: cannot build its command line")
    backend = BwrapBackend()
    backend.binds = [Path("/tmp/somewhere/.venv"), *backend.binds]
    public = tmp_path / "task" / "public"
    public.mkdir(parents=True)
    workdir = SimpleNamespace(root=tmp_path / "run", tmp=tmp_path / "run" / "tmp", work=tmp_path / "run" / "work")
    args, _, _ = backend.command(tmp_path / "job", workdir, public, SandboxLimits())
    tmp_mount = next(i for i in range(len(args) - 2) if args[i] == "--bind" and args[i + 2] == "/tmp")
    for bound in backend.binds:
        assert args.index(str(bound)) > tmp_mount, f"{bound} is bound before /tmp and would be hidden"


def test_a_sigkill_at_the_cpu_limit_is_a_timeout():
    """The kernel may SIGKILL at the hard CPU limit before the wall clock fires: that is still a timeout."""
    limits = SandboxLimits(wall_s=5)
    at_limit = RawRun(exit_code=None, signal=signal.SIGKILL, wall_s=5.0, cpu_s=5.0, peak_mb=1, stdout_tail="", stderr_tail="")
    early = RawRun(exit_code=None, signal=signal.SIGKILL, wall_s=0.5, cpu_s=0.4, peak_mb=1, stdout_tail="", stderr_tail="")
    assert classify(at_limit, limits)[0] == "timeout"
    assert classify(early, limits)[0] == "runtime_error"


def test_cli_run_batches_solutions_in_order(task, tmp_path, capsys):
    "Several solutions through one pool: one JSON record per line, in the order given, whatever finishes first."
    paths = []
    for i, code in enumerate(["import time\ntime.sleep(1.5)\n", "raise SystemExit(3)\n", "def f(:\n"]):
        paths.append(tmp_path / f"s{i}.py")
        paths[-1].write_text(code)
    assert cli_run([str(task.root), *map(str, paths), "--backend", "subprocess", "--workers", "3", "--timeout", "20"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["solution"] for r in records] == [str(p) for p in paths]
    assert [r["status"] for r in records] == ["no_submission", "runtime_error", "syntax_error"]
    assert cli_run([str(task.root), str(paths[0]), str(tmp_path / "missing.py")]) == 2  # nothing runs on a bad path
    assert cli_run([str(task.root), str(paths[0]), "--workers", "0"]) == 2
    with pytest.raises(SystemExit):
        cli_run(["--help"])
    assert "one JSON record per" in capsys.readouterr().out
