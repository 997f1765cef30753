"""The resource plan (wmrl.adapters.plan, `wmrl train CONFIG --plan`): its formulas against transformers and a measurement,
and every shipped config against the hardware it names."""
import contextlib
import io
import os
from pathlib import Path

import pytest

from wmrl.adapters.plan import (
    HARDWARE,
    estimate_step,
    format_plan,
    load_architecture,
    measure_step,
    parameter_count,
    plan,
)
from wmrl.adapters.train import cli_train
from wmrl.adapters.train_config import load_config

REPO = Path(__file__).resolve().parent.parent
CONFIGS = sorted((REPO / "reproductions/configs").glob("*.yaml"))
README = REPO / "reproductions/configs/README.md"
START, END = "<!-- plan outputs: start -->", "<!-- plan outputs: end -->"


@pytest.mark.parametrize("name", ["qwen3.5-4b", "qwen3.5-9b", "tiny-qwen3"])
def test_parameter_count_is_transformers_count(name):
    "The plan's closed-form count equals the parameters of the model transformers builds from the same file."
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    fields = {k: v for k, v in load_architecture(name).items() if not k.startswith(("_", "published"))}
    config = transformers.AutoConfig.for_model(fields.pop("model_type"), **fields)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    assert sum(p.numel() for p in model.parameters()) == parameter_count(load_architecture(name))


def test_paper_models_match_published_sizes():
    nine, four = load_architecture("qwen3.5-9b"), load_architecture("qwen3.5-4b")
    assert abs(parameter_count(nine) / 8.95e9 - 1) < 0.005  # the language model's GGUF count
    assert 3.9e9 < parameter_count(four) < 4.5e9  # the 4.5B checkpoint adds a vision tower the text LM does not load


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_every_shipped_config_fits_its_hardware(path):
    config = load_config(path)
    assert config["resources"]["hardware"], f"{path.name} names no hardware profile (resources.hardware)"
    for name in config["resources"]["hardware"]:
        result = plan(config, name)
        assert result["fits"], f"{path.stem} on {name}: {result['problems']}"


def plan_outputs() -> str:
    blocks = []
    for path in CONFIGS:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            code = cli_train([path.stem, "--plan"])
        blocks.append(f"### `wmrl train {path.stem} --plan`  (exit {code})\n\n```text\n{buffer.getvalue().rstrip()}\n```\n")
    return "\n".join(blocks)


def test_readme_holds_the_current_plan_outputs():
    text = README.read_text()
    current = START + "\n\n" + plan_outputs() + "\n" + END
    if os.environ.get("WMRL_UPDATE_PLANS"):
        README.write_text(text.split(START)[0] + current + text.split(END)[1])
        text = README.read_text()
    assert current in text, "reproductions/configs/README.md is stale: WMRL_UPDATE_PLANS=1 pytest tests/test_plan.py -k readme"


def test_plan_fails_loudly_and_names_the_term():
    config = load_config("qwen3.5-4b", ["trl.vllm_enable_sleep_mode=false"])
    result = plan(config, "h200x1")
    assert not result["fits"] and result["problems"][0].startswith("GPU: peak")
    assert "DOES NOT FIT: GPU: peak" in format_plan(config, result)
    assert plan(load_config("qwen3.5-9b"), "h200x1")["fits"] is False  # 9B states alone: 83 GiB on one card
    with contextlib.redirect_stderr(io.StringIO()) as err:  # errors go to stderr, like every wmrl command's
        assert cli_train(["qwen3.5-4b", "--plan", "--hardware", "nowhere"]) == 2
    assert "unknown hardware 'nowhere'" in err.getvalue()
    assert set(HARDWARE) >= {"h200x1", "h100x8"}


@pytest.mark.parametrize("batch,seq,completion,checkpointing", [
    (8, 1024, 512, False), (8, 2048, 1024, False),  # 0.92-1.06 over four runs
    pytest.param(8, 4096, 512, True, marks=pytest.mark.slow),  # 0.89-1.11
    pytest.param(8, 1024, 512, True, marks=pytest.mark.slow)])  # 1.08-1.32: a small recomputed layer, noisy RSS
# all nine cases: reproductions/bench/plan_validation.py (reproductions/results/plan_validation/tiny_cpu.json)
def test_memory_model_within_25_percent_of_a_measured_step(batch, seq, completion, checkpointing):
    "One fp32 forward/backward/AdamW step of the tiny policy on CPU: peak RSS growth vs the plan's estimate."
    measured = measure_step("tiny-qwen3", batch, seq, completion, checkpointing)["delta"]
    estimate = estimate_step("tiny-qwen3", batch, seq, completion, checkpointing)
    assert 0.75 <= estimate / measured <= 1.25, (estimate, measured)
