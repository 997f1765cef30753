"""reproductions/gpu_check.py on CPU: argument checks and the dry run (the real check needs a GPU and vLLM)."""
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "reproductions" / "gpu_check.py"


def run(*args, env_model=None):
    env = {k: v for k, v in os.environ.items() if k != "WMRL_GPU_CHECK_MODEL"}
    if env_model:
        env["WMRL_GPU_CHECK_MODEL"] = env_model
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=180, env=env)


def test_model_is_required():
    done = run("--dry-run")
    assert done.returncode == 2 and "give --model PATH or set WMRL_GPU_CHECK_MODEL" in done.stderr


def test_memory_fractions_are_checked():
    done = run("--model", "m", "--wm-memory", "0.6", "--policy-memory", "0.5", "--dry-run")
    assert done.returncode == 2 and "must leave room" in done.stderr
    done = run("--model", "m", "--steps", "0", "--dry-run")
    assert done.returncode == 2 and "--steps" in done.stderr
    done = run("--model", "m", "--agent-steps", "-1", "--dry-run")
    assert done.returncode == 2 and "--agent-steps" in done.stderr


def test_dry_run_resolves_the_plan_without_weights(tmp_path):
    done = run("--dry-run", "--out", str(tmp_path / "check.json"), env_model="/nonexistent/small-model")
    assert done.returncode == 0, done.stderr[-3000:]
    plan = json.loads(done.stdout)
    assert plan["model"] == "/nonexistent/small-model" and plan["steps"] == 5
    assert plan["solutions"] == len(list((REPO / "toy/solutions/iris").glob("*.py")))
    assert plan["trl"]["use_vllm"] is True and plan["trl"]["vllm_mode"] == "colocate"
    assert plan["groups_per_step"] == 2 and plan["rows_per_step"] == 16
    engine = plan["world_model"]["options"]["engine_kwargs"]
    assert engine["gpu_memory_utilization"] + plan["trl"]["vllm_gpu_memory_utilization"] <= 0.9
    assert plan["agent"]["steps"] == 2 and plan["agent"]["max_turns"] == 2  # phase 3: the research agent
    assert plan["agent"]["max_new_tokens"] == plan["trl"]["max_completion_length"]
    assert not (tmp_path / "check.json").exists()  # a dry run writes nothing
