"""The accelerate launch files in reproductions/configs/accelerate/.

Each YAML goes through accelerate's own config loader and launch-argument validation (the path `accelerate launch
--config_file` takes), and the DeepSpeed files are turned into the plugin accelerate builds from them (DeepSpeed
itself is not installed: it must be built against the kit's torch). `cpu_2proc.yaml` is launched for real: `wmrl
train tiny-cpu` in 2 CPU processes (gloo) must train 3 steps with one correction over both ranks' rows.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("accelerate")
from accelerate.commands.config.config_args import load_config_from_file  # noqa: E402
from accelerate.commands.launch import _validate_launch_command, launch_command_parser  # noqa: E402
from accelerate.utils import DistributedType  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "reproductions" / "configs" / "accelerate"
EXPECTED = {  # file -> (distributed type, processes, mixed precision, ZeRO stage, launcher)
    "multi_gpu.yaml": (DistributedType.MULTI_GPU, 8, "bf16", None, "multi_gpu"),
    "zero2.yaml": (DistributedType.DEEPSPEED, 8, "bf16", 2, "deepspeed"),
    "zero3.yaml": (DistributedType.DEEPSPEED, 8, "bf16", 3, "deepspeed"),
    "zero3_2nodes.yaml": (DistributedType.DEEPSPEED, 16, "bf16", 3, "deepspeed"),  # 2 machines x 8 (issue 25)
    "cpu_2proc.yaml": (DistributedType.MULTI_GPU, 2, "no", None, "multi_gpu"),  # torchrun launcher, CPU processes
}
MACHINES = {"zero3_2nodes.yaml": 2}


def launch_args(name: str):
    "The arguments `accelerate launch --config_file NAME script.py` resolves, and the loaded config."
    args = launch_command_parser().parse_args(["--config_file", str(CONFIGS / name), "script.py"])
    args, defaults, _ = _validate_launch_command(args)
    return args, defaults


def test_every_file_is_expected():
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_config_loads_with_accelerates_loader(name):
    kind, processes, precision, stage, launcher = EXPECTED[name]
    config = load_config_from_file(str(CONFIGS / name))
    assert config.distributed_type == kind
    assert config.num_processes == processes and config.num_machines == MACHINES.get(name, 1)
    assert config.mixed_precision == precision
    assert config.use_cpu == (name == "cpu_2proc.yaml")
    if stage is None:
        assert not config.deepspeed_config
    else:
        assert config.deepspeed_config["zero_stage"] == stage
        assert config.deepspeed_config["offload_optimizer_device"] == "none"
    args, _ = launch_args(name)
    assert args.num_processes == processes and args.mixed_precision == precision
    assert bool(args.use_deepspeed) == (launcher == "deepspeed") and bool(args.multi_gpu) == (launcher == "multi_gpu")
    assert not args.cpu  # --cpu would pick the single-process launcher


@pytest.mark.parametrize("name,stage", [("zero2.yaml", 2), ("zero3.yaml", 3)])
def test_deepspeed_plugin_from_the_launch_environment(name, stage, monkeypatch):
    from accelerate.utils import DeepSpeedPlugin
    from accelerate.utils.launch import prepare_deepspeed_cmd_env
    args, defaults = launch_args(name)
    # what launch_command sets before it calls the DeepSpeed launcher
    args.deepspeed_fields_from_accelerate_config = ",".join([*defaults.deepspeed_config, "mixed_precision"])
    _, env = prepare_deepspeed_cmd_env(args)
    assert env["ACCELERATE_USE_DEEPSPEED"] == "true" and env["ACCELERATE_DEEPSPEED_ZERO_STAGE"] == str(stage)
    assert env["ACCELERATE_MIXED_PRECISION"] == "bf16"
    for key, value in env.items():
        if key.startswith("ACCELERATE_"):
            monkeypatch.setenv(key, value)
    plugin = DeepSpeedPlugin()
    assert plugin.zero_stage == stage
    zero = plugin.deepspeed_config["zero_optimization"]
    assert zero["stage"] == stage and zero["offload_optimizer"]["device"] == "none"
    assert plugin.zero3_init_flag == (stage == 3)
    assert zero["stage3_gather_16bit_weights_on_model_save"] == (stage == 3)


def _json_documents(text: str) -> list[dict]:
    "Every JSON object printed on stdout (each rank prints its own summary)."
    decoder, documents, at = json.JSONDecoder(), [], 0
    while (start := text.find("{", at)) != -1:
        document, at = decoder.raw_decode(text, start)
        documents.append(document)
    return documents


def _every_ranks_story(logs: Path, stderr: str) -> str:
    """Each rank's own stderr (torchrun's `--tee` files), then the launcher's tail: the rank that crashed first is the
    cause, and its traceback is easily more than a plain tail of the launcher's stderr away from the end."""
    parts = [f"--- {path.relative_to(logs)} ---\n{path.read_text(errors='replace')[-3000:]}"
             for path in sorted(logs.rglob("*.log")) if path.stat().st_size]
    return "\n".join([*parts, "--- the launcher's tail ---", stderr[-3000:]])


def test_accelerate_launch_cpu_2proc_trains_tiny_cpu(tmp_path):
    pytest.importorskip("trl")
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or shutil.which("accelerate")
    wmrl = shutil.which("wmrl", path=str(Path(sys.executable).parent)) or shutil.which("wmrl")
    if not accelerate or not wmrl:
        pytest.skip("the accelerate and wmrl console scripts are not installed next to this Python")
    out = tmp_path / "run"
    logs = tmp_path / "logs"  # every rank's stdout and stderr in a file of its own (`--tee 3`)
    command = [accelerate, "launch", "--config_file", str(CONFIGS / "cpu_2proc.yaml"), "--tee", "3", "--log_dir",
               str(logs), wmrl, "train", "tiny-cpu", f"output_dir={out}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert done.returncode == 0, _every_ranks_story(logs, done.stderr)
    summaries = [doc for path in sorted(logs.rglob("stdout.log")) for doc in _json_documents(path.read_text())]
    assert len(summaries) == 2, done.stdout[-2000:]  # one per rank, each in its own file
    for summary in summaries:
        assert summary["steps"] == 3 and summary["all_losses_finite"] and summary["run_dir"] == str(out)
    for key in ("anchor_weight", "n_pairs", "final_loss"):
        assert summaries[0][key] == summaries[1][key], key  # one correction over both ranks' rows
    metrics = json.loads((out / "metrics.json").read_text())
    history = metrics["wmrl_history"]
    assert len(history) == 3
    # 2 ranks x 8 rows = 16 rows = 4 groups of 4 per step: the groups of both processes were corrected together
    assert all(step["stats"]["n_rows"] == 16 and step["stats"]["n_groups"] == 4 for step in history)
    assert history[-1]["stats"]["n_pairs"] == 12  # one anchor group of 4 rows per step, pooled over the ranks


def test_command_line_process_count_wins_over_the_file():
    args = launch_command_parser().parse_args(["--config_file", str(CONFIGS / "zero2.yaml"), "--num_processes", "4",
                                               "script.py"])
    args, _, _ = _validate_launch_command(args)
    assert args.num_processes == 4 and args.use_deepspeed and args.zero_stage == 2


README = CONFIGS / "README.md"


def _readme_block(language: str, containing: str) -> str:
    "The first fenced block of `language` in the README that contains `containing`."
    parts = README.read_text().split("```")
    for block in parts[1::2]:
        if block.startswith(language + "\n") and containing in block:
            return block.removeprefix(language + "\n")
    raise AssertionError(f"no ```{language} block with {containing!r} in {README}")


def test_readme_server_config_is_valid_for_trl_and_the_http_world_model():
    import yaml

    from wmrl.adapters.train import dry_run
    from wmrl.adapters.train_config import load_config
    from wmrl.world_model.backends import get_world_model
    snippet = yaml.safe_load(_readme_block("yaml", "vllm_mode: server"))
    overrides = [f"trl.{key}={value}" for key, value in snippet["trl"].items()]
    resolved = dry_run(load_config("tiny-cpu", overrides))  # GRPOConfig accepts every field with these values
    for key, value in snippet["trl"].items():
        assert resolved["trl"][key] == value, key
    section = snippet["world_model"]
    world_model = get_world_model(section["backend"], model=section["model"], **section["options"])
    assert world_model.base_url == section["options"]["base_url"] and world_model.model == "wmrl-world-model"


def test_readme_trl_vllm_serve_flags_exist():
    trl = shutil.which("trl", path=str(Path(sys.executable).parent)) or shutil.which("trl")
    if not trl:
        pytest.skip("the trl console script is not installed next to this Python")
    help_text = subprocess.run([trl, "vllm-serve", "--help"], capture_output=True, text=True, timeout=300).stdout
    command = _readme_block("bash", "trl vllm-serve").split("trl vllm-serve", 1)[1].split("\n#")[0]
    flags = [word for word in command.replace("\\\n", " ").split() if word.startswith("--")]
    assert len(flags) >= 5
    for flag in flags:
        assert flag in help_text, f"trl vllm-serve has no {flag}"


def test_two_nodes_is_zero3_across_machines():
    "The multi-node file (issue 25: there was none) differs from zero3.yaml only in where the processes run."
    import yaml
    one, two = (yaml.safe_load((CONFIGS / name).read_text()) for name in ("zero3.yaml", "zero3_2nodes.yaml"))
    assert {k for k in one.keys() | two.keys() if one.get(k) != two.get(k)} == {
        "num_machines", "num_processes", "main_process_ip", "main_process_port"}
    assert two["num_processes"] == two["num_machines"] * one["num_processes"]
