"""reproductions/gpu_check.py on CPU: arguments, the dry run with the plan's figures, and the per-phase subprocess
report on a machine where vLLM cannot run (every GPU phase must fail with its own reason, not kill the check)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert plan["random_weights"] and plan["arch"] == "qwen3.5-4b" and plan["phases"][:2] == ["versions", "build"]
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


def test_each_phase_runs_in_its_own_process_and_reports_its_outcome(tmp_path):
    """A CPU rehearsal of the lent image (issue 25): no vLLM, bitsandbytes or xgrammar, and a miniature of the 4B's
    own transformers class (Qwen3.5: Gated DeltaNet and gated attention). Every phase runs in its own process and the
    report names each outcome: `versions` lists what is missing, the build really builds the random model, the
    trainer takes rows of a fixed shape and its optimizer's bytes are the plan's, the world model runs on transformers
    with its throughput timed, the kit's training loop runs end to end through TRL with transformers generation and
    real sandbox anchors, and the fla kernels say why they cannot run here; each degradation is in the phase's record."""
    out, solutions = tmp_path / "check.json", tmp_path / "solutions"
    solutions.mkdir()
    for name in ("good_logistic", "bad_syntax_missing_paren", "good_knn"):
        (solutions / f"{name}.py").write_text((REPO / "toy" / "solutions" / "iris" / f"{name}.py").read_text())
    done = run("--arch", "tiny-qwen3.5", "--config", "qwen3.5-4b", "--phases",
               "versions,build,trainer,world_model,training,fla", "--solutions", str(solutions), "--max-solutions", "2",
               "--completion-tokens", "16", "--max-model-len", "2048", "--steps", "1", "--shape-tokens", "256",
               "--scale", "4", "--missing", "vllm,bitsandbytes,xgrammar", "--out", str(out), timeout=1500)
    report = json.loads(out.read_text())
    phases = report["phases"]
    assert done.returncode == 0 and report["failed"] == [], {p: r.get("error") for p, r in phases.items()}
    assert "no CUDA" in report["skipped"]["fla"] and phases["fla"]["ok"] is None  # skipped by nature, not failed
    assert {"vllm", "bitsandbytes", "xgrammar"} <= set(phases["versions"]["missing"])
    assert phases["versions"]["wmrl_from"] == str(REPO / "wmrl")
    assert (tmp_path / "check" / "model" / "config.json").is_file()
    assert json.loads((tmp_path / "check" / "model" / "config.json").read_text())["model_type"] == "qwen3_5_text"
    trainer = phases["trainer"]
    assert trainer["lengths"]["total"] == 256 and [s["step"] for s in trainer["steps"]] == [1, 2]
    assert all(s["tokens_per_s"] > 0 for s in trainer["steps"]) and trainer["optim"] == "adamw_torch"
    planned = trainer["plan_terms_gib"]["optimizer_total_gib"]  # torch AdamW: 8 B a parameter (+ a step counter)
    assert trainer["steps"][-1]["optimizer_gib"] == pytest.approx(planned, rel=1e-3)
    world = phases["world_model"]
    # the first two solutions by name; the syntax error is settled without the model, the other takes eight checks
    assert any("no vLLM" in d for d in world["degraded"]) and world["n_solutions"] == 2 and world["prompts"] == 8
    assert world["throughput"]["prompt_tokens"] > 8 * 500 and world["throughput"]["decode_tokens_per_s"] > 0
    assert any("no bitsandbytes" in d for d in phases["training"]["degraded"]) and phases["training"]["summary"]
    for phase in phases.values():
        assert phase["wall_s"] > 0 and phase["limit_s"] > 0 and "device_peak_gib" in phase
    assert set(report["measured_vs_plan"]) == {"trainer", "world_model", "training"}
    assert report["measured_vs_plan"]["trainer"]["plan_peak_gib"] == trainer["plan_trainer_gib"]
    assert run("--phases", "nope", "--dry-run").returncode == 2


def load_script():
    import importlib.util
    spec = importlib.util.spec_from_file_location("gpu_check_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_phase_that_finished_is_not_a_timeout(tmp_path, monkeypatch):
    """The H200 run's world-model phase wrote its complete record 0.5 s inside its 70 s limit and was then counted a
    timeout while its interpreter exited: a wall-clock net must not turn a finished program into a timeout."""
    module = load_script()
    args = module.parse_args(["--out", str(tmp_path / "check.json")])

    def finishes_then_lingers(command, **kwargs):
        (tmp_path / "check").mkdir(exist_ok=True)
        (tmp_path / "check" / "versions.json").write_text(json.dumps({"phase": "versions", "ok": True, "child_s": 1.0}))
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])
    monkeypatch.setattr(module.subprocess, "run", finishes_then_lingers)
    record = module.launch(args, "versions", [])
    assert record["ok"] and "after its work was done" in record["note"]

    def stops_midway(command, **kwargs):
        (tmp_path / "check" / "versions.json").write_text(json.dumps({"phase": "versions", "steps": [1]}))
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])
    monkeypatch.setattr(module.subprocess, "run", stops_midway)
    record = module.launch(args, "versions", [])
    assert not record["ok"] and "timed out" in record["error"] and record["steps"] == [1]  # what it measured is kept


def test_bitsandbytes_is_trimmed_to_fit_the_device_tool(tmp_path):
    "The 43 MB wheel keeps only the CPU and CUDA 13 libraries (the lent image's torch is cu130); its Python stays."
    import zipfile
    wheel = tmp_path / "bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl"
    names = ["bitsandbytes/__init__.py", "bitsandbytes/libbitsandbytes_cpu.so", "bitsandbytes/libbitsandbytes_cuda130.so",
             "bitsandbytes/libbitsandbytes_cuda118.so", "bitsandbytes/libbitsandbytes_rocm64.so",
             "bitsandbytes-0.50.2.dist-info/METADATA"]
    with zipfile.ZipFile(wheel, "w") as archive:
        for name in names:
            archive.writestr(name, "x" * 1000)
    done = subprocess.run([sys.executable, str(SCRIPT), "--trim-wheel", str(wheel)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    kept = set(zipfile.ZipFile(wheel).namelist())
    assert kept == set(names) - {"bitsandbytes/libbitsandbytes_cuda118.so", "bitsandbytes/libbitsandbytes_rocm64.so"}


def test_the_check_runs_from_a_checkout_without_an_installed_wmrl(tmp_path):
    """The lent image has no wmrl installed and `python3 reproductions/gpu_check.py` puts only reproductions/ on the
    path: the script puts its own checkout first, for itself and its phases (a copy here, so the installed one loses)."""
    import shutil
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "wmrl", copy / "wmrl", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "reproductions" / "configs", copy / "reproductions" / "configs")
    shutil.copy(SCRIPT, copy / "reproductions" / "gpu_check.py")
    shutil.copy(REPO / "settings.ini", copy / "settings.ini")
    out = tmp_path / "check.json"
    done = subprocess.run([sys.executable, str(copy / "reproductions" / "gpu_check.py"), "--phases", "versions",
                           "--solutions", str(REPO / "toy" / "solutions" / "iris"), "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(out.read_text())["phases"]["versions"]["wmrl_from"] == str(copy / "wmrl")


def test_without_trl_the_check_still_reports(tmp_path):
    "The image has no trl: gpu_check.py used to die at `from trl import GRPOConfig` with no report at all."
    done = run("--dry-run", "--missing", "trl,vllm", "--out", str(tmp_path / "check.json"))
    assert done.returncode == 0, done.stderr[-2000:]
    plan = json.loads(done.stdout)
    assert "trl" in plan["resolve_error"] and plan["phases"][0] == "versions"
    out = tmp_path / "run.json"
    done = run("--arch", "tiny-qwen3", "--config", "qwen3.5-4b", "--phases", "versions,training", "--missing", "trl,vllm",
               "--out", str(out), timeout=600)
    report = json.loads(out.read_text())
    assert done.returncode == 1 and report["phases"]["versions"]["ok"] and "trl" in report["phases"]["versions"]["missing"]
    assert "skipped: trl is not importable" in report["phases"]["training"]["error"]


def test_wheels_are_unpacked_onto_every_phase_path(tmp_path, monkeypatch):
    "No pip on the lent machine: a wheel is a zip, unpacked into the run folder and put on the path of every phase."
    import importlib.util
    import zipfile
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "wmrl_probe-1.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr("wmrl_probe/__init__.py", "VALUE = 42\n")
    spec = importlib.util.spec_from_file_location("gpu_check_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("PYTHONPATH", "")
    monkeypatch.setattr(sys, "path", list(sys.path))
    args = module.parse_args(["--wheels", str(wheels), "--out", str(tmp_path / "check.json")])
    module.prepare_environment(args)
    site = tmp_path / "check" / "site"
    assert (site / "wmrl_probe" / "__init__.py").is_file() and str(site) in os.environ["PYTHONPATH"]
    child = subprocess.run([sys.executable, "-c", "import wmrl_probe; print(wmrl_probe.VALUE)"], capture_output=True,
                           text=True, env=os.environ.copy())
    assert child.stdout.strip() == "42", child.stderr
