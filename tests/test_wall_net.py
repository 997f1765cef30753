"""The wall-clock net never turns a finished or crashed program into a timeout (issue 24, under load).

A fresh clone's `make test` at load 15-29 recorded a program whose traceback was already in its stderr as `timeout`
at a 12 s net. The net exists for programs that block without using CPU; on a loaded machine an exiting program can
still be alive when it fires. Both tests failed on commit 9b48258.
"""
from __future__ import annotations

from pathlib import Path

from wmrl.execution.backends import SubprocessBackend
from wmrl.execution.limits import RawRun, SandboxLimits
from wmrl.execution.sandbox import classify, execute
from wmrl.execution.tasks import load_task

REPO = Path(__file__).resolve().parents[1]
GOOD = (REPO / "toy/solutions/iris/good_logistic.py").read_text()


def test_a_finished_program_whose_child_holds_its_pipes_is_not_a_timeout():
    "It writes its submission and exits 0, leaving a child that holds stdout open past the net."
    code = GOOD + "import subprocess\nsubprocess.Popen(['sleep', '60'])\n"
    record = execute(load_task(REPO / "toy/tasks/iris"), code, backend=SubprocessBackend(),
                     limits=SandboxLimits(wall_s=4.0, memory_mb=1024))
    assert record.status == "ok", record.message


def test_a_crash_printed_before_the_net_is_a_crash():
    crashed = "Traceback (most recent call last):\n  File \"solution.py\", line 9, in <module>\nKeyError: 'species'\n"
    raw = RawRun(exit_code=None, signal=9, wall_s=12.0, cpu_s=3.0, peak_mb=200.0, stdout_tail="", stderr_tail=crashed,
                 timed_out=True)
    status, message = classify(raw, SandboxLimits(wall_s=12.0))
    assert status == "runtime_error" and message.startswith("KeyError: 'species'")
    blocked = RawRun(exit_code=None, signal=9, wall_s=12.0, cpu_s=0.1, peak_mb=50.0, stdout_tail="", stderr_tail="",
                     timed_out=True)
    assert classify(blocked, SandboxLimits(wall_s=12.0))[0] == "timeout"
