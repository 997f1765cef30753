"""`wmrl.adapters.train`: strict configs, dry runs of the GPU configs, and the tiny-cpu run end to end on CPU."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from wmrl.adapters.train_config import correction_config, load_config

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "reproductions" / "configs"


def run_cli(*args, timeout=300):
    code = "import sys; from wmrl.adapters.train import cli_train; sys.exit(cli_train(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)
    return done.returncode, done.stdout, done.stderr


def test_shipped_configs_load():
    for name in ("tiny-cpu", "tiny-cpu-agent", "tiny-cpu-served", "qwen3.5-4b", "qwen3.5-9b"):
        config = load_config(name)
        assert config["_source"] == str(CONFIGS / f"{name}.yaml")
        correction_config(config)


def test_paper_hyperparameters_in_gpu_configs():
    for name in ("qwen3.5-4b", "qwen3.5-9b"):
        config = load_config(name)
        trl = config["trl"]
        assert trl["num_generations"] == 8
        processes = {"h200x1": 1, "h100x8": 8}[config["resources"]["hardware"][0]]  # the layout it is sized for
        assert trl["per_device_train_batch_size"] * trl["gradient_accumulation_steps"] * processes == 64  # 8 groups of 8
        assert trl["learning_rate"] == 1e-6 and trl["entropy_coef"] == 0.002
        assert trl["max_completion_length"] == 4096
        assert trl["use_vllm"] is True and trl["vllm_mode"] == "colocate"
        world = config["world_model"]  # served from its own process beside TRL's colocated engine, on the same backbone
        assert world["backend"] == "http" and world["model"] is None and world["server"]["launch"] is True
        assert world["server"]["command"] is None and 0 < world["server"]["gpu_memory_utilization"] <= 0.3  # vllm serve
        assert world["options"]["engine_kwargs"] == {"max_model_len": 12288} and world["options"]["seed"] == 0
        assert config["correction"]["anchor_fraction"] == 0.10
        assert len(config["tasks"]["paths"]) == 45 and config["tasks"]["loader"] == "mledojo"
        assert size_of(name) in config["model"]["path"]


def size_of(name):
    return name.split("-")[-1]


@pytest.mark.parametrize("override, message", [
    ("modle.path=x", "unknown config key 'modle'"),
    ("tasks.pathz=[a]", "unknown config key 'tasks.pathz'"),
    ("method=ppo", "unknown method"),
    ("correction.rho=0.2", "unknown CorrectionConfig keys"),
    ("correction.method=wmrl", "top-level `method`"),
    ("correction.anchor_fraction=1.5", "anchor_fraction must be in [0, 1]"),
    ("model=x", "must be a mapping"),
    ("tasks.program=agents", "tasks.program"),
    ("justakey", "not key=value"),
])
def test_bad_overrides_are_clear_errors(override, message):
    with pytest.raises(ValueError) as error:
        load_config("tiny-cpu", [override])
    assert message in str(error.value)


def test_overrides_merge_and_parse_yaml_values():
    config = load_config("tiny-cpu", ["correction.w_max=3", "trl.max_steps=2", "tasks.chat=true", "output_dir=null"])
    assert config["correction"]["w_max"] == 3 and config["correction"]["min_pairs"] == 4  # merged, not replaced
    assert config["trl"]["max_steps"] == 2 and config["tasks"]["chat"] is True and config["output_dir"] is None
    assert load_config("tiny-cpu", ["trl.learning_rate=1e-6"])["trl"]["learning_rate"] == 1e-6  # YAML 1.1 says "1e-6"


def test_missing_config_file():
    with pytest.raises(FileNotFoundError, match="no config file"):
        load_config("no-such-config")


@pytest.mark.parametrize("name", ["qwen3.5-4b", "qwen3.5-9b"])
def test_gpu_config_dry_run_resolves_trl_config(name):
    code, out, err = run_cli(name, "--dry-run")  # in a 1-process shell; the 9B config is sized for 8 processes
    assert code == 0, out + err[-3000:]
    resolved = json.loads(out)
    processes = 1 if name == "qwen3.5-4b" else 8
    assert resolved["groups_per_step"] * processes == 8 and resolved["rows_per_step"] * processes == 64
    assert resolved["trl"]["use_vllm"] is True and resolved["trl"]["use_cpu"] is False
    assert resolved["trl"]["learning_rate"] == 1e-6 and resolved["trl"]["num_generations"] == 8
    assert resolved["correction"]["method"] == "wmrl" and resolved["correction"]["warmup"] == 32


def test_unknown_trl_field_is_reported_by_name():
    code, out, err = run_cli("tiny-cpu", "trl.learning_rat=1e-3", "--dry-run")
    assert code == 2 and not out.strip()  # errors go to stderr, like every wmrl command's
    assert "unknown GRPOConfig fields in trl: ['learning_rat']" in json.loads(err)["error"]


def test_tiny_cpu_trains_end_to_end(tmp_path):
    code, out, err = run_cli("tiny-cpu", f"output_dir={tmp_path}", "trl.max_steps=2")  # the bench runs all 3
    assert code == 0, err[-4000:]
    summary = json.loads(out)  # stdout is only the JSON summary
    assert summary["steps"] == 2 and summary["all_losses_finite"] and math.isfinite(summary["final_loss"])
    assert summary["executions"] >= 1 and summary["sandbox_s"] > 0 and summary["gpus"] == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert len(metrics["wmrl_history"]) == 2
    for record in metrics["wmrl_history"]:
        assert sum(record["anchor_rows"]) == 4  # one anchor group of 4 rows per step (floor of 1 of 2 groups)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["method"] == "wmrl" and "versions" in saved["provenance"]
    assert json.loads((tmp_path / "corrector.json").read_text())["n_steps"] == 2


def test_mledojo_loader_reads_a_prepared_competition(tmp_path):
    from wmrl.adapters.mledojo import build_mini_competition
    from wmrl.adapters.train import build_dataset_rows, build_tasks
    build_mini_competition(tmp_path)
    config = load_config("tiny-cpu", ["tasks.loader=mledojo", f"tasks.root={tmp_path}", "tasks.paths=[breast-cancer-mini]"])
    tasks = build_tasks(config)
    assert list(tasks) == ["breast-cancer-mini"]
    rows = build_dataset_rows(config, tasks)
    assert len(rows) == 8 and all(r["task_id"] == "breast-cancer-mini" for r in rows)
    with pytest.raises(ValueError, match="needs tasks.root"):
        load_config("tiny-cpu", ["tasks.loader=mledojo"])
