"""Faults that would kill or corrupt a real multi-GPU run (issue 25), each tested on CPU; each test failed on the
code before its fix."""
import types

import pytest

pytest.importorskip("trl")
from wmrl.adapters import train  # noqa: E402
from wmrl.adapters.train_config import load_config  # noqa: E402


def fake_trainer(num_processes: int):
    "What `_write_results` reads of a trainer, on a rank that is not the main process (so nothing is written)."
    accelerator = types.SimpleNamespace(num_processes=num_processes, is_main_process=False)
    return types.SimpleNamespace(accelerator=accelerator, state=types.SimpleNamespace(log_history=[], global_step=10),
                                 wmrl_history=[])


def test_gpu_hours_count_each_training_process_once(monkeypatch, tmp_path):
    "Under `accelerate launch` on 8 GPUs each rank sees 8 devices: the run holds 8 GPUs, not 8 x 8 = 64."
    monkeypatch.setattr(train, "_gpus_in_use", lambda: 8)
    scorer = types.SimpleNamespace(seconds={"execute": 0.0, "predict": 0.0}, counts={"executed": 0})
    summary = train._write_results({"method": "wmrl"}, tmp_path, fake_trainer(8), scorer, wall_s=3600.0)
    assert summary["gpus"] == 8 and summary["gpu_hours"] == pytest.approx(8.0)


@pytest.mark.parametrize("name", ["qwen3.5-4b", "qwen3.5-9b"])
def test_collective_timeout_outlasts_one_rank_playing_a_whole_anchor_group(name, tmp_path):
    """One rank executes a whole anchor group (8 agent episodes x 4 turns, `sandbox.workers` at a time, up to 600 s
    each) while 7 ranks wait in a gather: transformers' default 1,800 s would kill the run at the first slow group."""
    config = load_config(name)
    args = train.grpo_config(config, output_dir=tmp_path, extra={"bf16": False, "use_cpu": True})
    sandbox = config["sandbox"]
    worst = -(-config["trl"]["num_generations"] // sandbox["workers"]) * config["agent"]["max_turns"] * sandbox["wall_s"]
    assert args.ddp_timeout >= 2 * worst > 1800
    explicit = train.grpo_config({**config, "trl": {**config["trl"], "ddp_timeout": 99}}, output_dir=tmp_path,
                                 extra={"bf16": False, "use_cpu": True})
    assert explicit.ddp_timeout == 99  # a value the config sets is kept


def test_transformers_world_model_loads_bf16_on_the_gpu(monkeypatch, tmp_path):
    "The frozen judge was loaded in fp32 and never moved: on a GPU box it ran on the CPU at twice the memory."
    import torch
    import transformers

    from wmrl.world_model.backends import TransformersWorldModel
    seen = {}

    class Loaded:
        device = "cuda"
        def to(self, device):
            seen["device"] = device
            return self
        def eval(self):
            return self

    def from_pretrained(path, **kwargs):
        seen.update(kwargs)
        return Loaded()
    tokenizer = types.SimpleNamespace(padding_side="right", pad_token="<pad>", eos_token="<eos>")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    TransformersWorldModel(str(tmp_path), tokenizer)
    assert seen["dtype"] == torch.bfloat16 and seen["device"] == "cuda"
