"""reproductions/gpu_check.py on CPU: arguments, the dry run with the plan's figures, and the per-phase subprocess
report on a machine where vLLM cannot run (every GPU phase must fail with its own reason, not kill the check)."""
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "reproductions" / "gpu_check.py"


def run(*args, env_model=None, timeout=300):
    env = {k: v for k, v in os.environ.items() if k != "WMRL_GPU_CHECK_MODEL"}
    if env_model:
        env["WMRL_GPU_CHECK_MODEL"] = env_model
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_arguments_are_checked():
    done = run("--steps", "0", "--dry-run")
    assert done.returncode == 2 and "--steps" in done.stderr
    done = run("--agent-steps", "-1", "--dry-run")
    assert done.returncode == 2 and "--agent-steps" in done.stderr


def test_dry_run_plans_random_weights_of_the_4b_architecture(tmp_path):
    done = run("--dry-run", "--out", str(tmp_path / "check.json"))
    assert done.returncode == 0, done.stderr[-3000:]
    plan = json.loads(done.stdout)
    assert plan["random_weights"] and plan["arch"] == "qwen3.5-4b" and plan["phases"][0] == "build"
    assert sum(plan["limits_s"].values()) <= 600  # the whole check fits 10 minutes on one H200
    assert plan["trl"]["vllm_enable_sleep_mode"] and plan["trl"]["vllm_importance_sampling_mode"] == "token_truncate"
    assert plan["trl"]["optim"] == "adamw_bnb_8bit" and plan["groups_per_step"] == 2 and plan["rows_per_step"] == 16
    for phase in ("training", "agent"):  # the plan's figures that the measured peaks will sit next to
        assert plan["plan_gib"][phase]["fits"] and 20 < plan["plan_gib"][phase]["peak_gib"] < 139
    assert not (tmp_path / "check.json").exists()  # a dry run writes nothing


def test_real_weights_skip_the_build(tmp_path):
    done = run("--dry-run", "--out", str(tmp_path / "check.json"), env_model="/models/qwen3.5-4b")
    plan = json.loads(done.stdout)
    assert plan["model"] == "/models/qwen3.5-4b" and "build" not in plan["phases"]


def test_each_phase_runs_in_its_own_process_and_reports_why_it_failed(tmp_path):
    "On CPU: the build phase really builds the random tiny model; the GPU phases fail, each with its reason."
    out = tmp_path / "check.json"
    done = run("--arch", "tiny-qwen3", "--config", "qwen3.5-4b", "--phases", "build,world_model", "--skip-execute",
               "--out", str(out), timeout=600)
    assert done.returncode == 1, done.stderr[-3000:]
    report = json.loads(out.read_text())
    phases = report["phases"]
    assert phases["build"]["ok"] and (tmp_path / "check" / "model" / "config.json").is_file()
    assert phases["build"]["params"] == 106880
    assert report["failed"] == ["world_model"]
    assert "vllm" in phases["world_model"]["error"].lower()  # no vLLM on CPU: named, with its traceback
    assert phases["world_model"]["traceback"] and phases["world_model"]["stderr_tail"] is not None
    for phase in phases.values():
        assert phase["wall_s"] > 0 and phase["limit_s"] > 0 and "device_peak_gib" in phase
    assert set(report["measured_vs_plan"]) == {"world_model"}
    assert run("--phases", "nope", "--dry-run").returncode == 2
