"""Resume: a real run is killed with SIGKILL mid-run, resumed from its checkpoint, and must end in exactly the state of
an uninterrupted run (policy, corrector incl. debiaser pairs and weighter, scheduler, history, evaluations, ledger
counts). Only measured seconds may differ (they are measurements)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = """
import json, sys
from wmrl.autoresearch.loop import AutoResearchConfig, AutoResearchRun
config = AutoResearchConfig.from_dict(json.loads(sys.argv[1]))
run = AutoResearchRun(config, sys.argv[2])
run.run()
run.close()
"""
TIMING = ("wall_s", "cpu_s", "_s")  # fields that are measurements


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    from wmrl.execution.suite import build_suite
    suite = tmp_path_factory.mktemp("suite")
    build_suite(suite, tasks=["breast_cancer"], progress=False)
    return {"method": "wmrl", "seed": 3, "steps": 4, "group_size": 4, "tasks_per_step": 2, "eval_samples": 2,
            "train_tasks": [str(REPO / "toy/tasks/iris"), str(suite / "breast_cancer")],
            "heldout_tasks": [str(REPO / "toy/tasks/iris")], "checkpoint_every": 1, "eval_every": 2,
            "correction": {"min_pairs": 4, "refit_every": 4, "warmup": 1}, "timeout_s": 10.0}


def start(config, out):
    return subprocess.Popen([sys.executable, "-c", SCRIPT, json.dumps(config), str(out)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def without_timing(value):
    "Drop measured seconds (keys ending in _s) recursively; keep everything else."
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if not k.endswith("_s")}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def checkpoint_step(out):
    path = out / "checkpoint.json"
    try:
        return json.loads(path.read_text())["step"] if path.is_file() else -1
    except (json.JSONDecodeError, OSError):  # never happens with atomic writes; fail loudly below if it does
        return -2


def test_sigkill_then_resume_matches_uninterrupted(config, tmp_path):
    killed_dir, clean_dir = tmp_path / "killed", tmp_path / "clean"
    proc = start(config, killed_dir)
    deadline = time.time() + 600
    while checkpoint_step(killed_dir) < 2 and proc.poll() is None and time.time() < deadline:
        assert checkpoint_step(killed_dir) != -2, "a reader saw a half-written checkpoint"
        time.sleep(0.05)
    time.sleep(1.0)  # somewhere inside step 2 (sampling, executing anchors, or updating)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed_dir / "metrics.json").exists()
    step_at_kill = checkpoint_step(killed_dir)
    assert 2 <= step_at_kill < config["steps"]

    resumed = start(config, killed_dir)
    clean = start(config, clean_dir)
    for p in (resumed, clean):
        assert p.wait(timeout=900) == 0, p.stderr.read().decode()[-3000:]

    a = json.loads((killed_dir / "checkpoint.json").read_text())
    b = json.loads((clean_dir / "checkpoint.json").read_text())
    assert a["step"] == b["step"] == config["steps"]
    assert a["policy"] == b["policy"]                        # bit-identical parameters
    assert a["corrector"] == b["corrector"]                  # scheduler, debiaser pairs, weighter
    assert a["corrector"]["debiaser"] is not None
    assert without_timing(a["history"]) == without_timing(b["history"])
    assert without_timing(a["evals"]) == without_timing(b["evals"])
    counts = lambda state: {s: (row["n_executions"], row["n_predictions"], row["n_eval_executions"])
                            for s, row in state["ledger"]["rows"].items()}
    assert counts(a) == counts(b)                            # no execution charged twice or lost
    n_pairs = sum(h["corr_n_new_pairs"] for h in a["history"])
    assert n_pairs == sum(h["corr_n_new_pairs"] for h in b["history"]) > 0
