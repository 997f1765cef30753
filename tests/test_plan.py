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


SHOWN = [["qwen3.5-4b", "--plan", "--hardware", "h100x8"]]  # beyond each config's own profiles: the 4B's 8-GPU verdict


def plan_outputs() -> str:
    blocks = []
    for argv in [[path.stem, "--plan"] for path in CONFIGS] + SHOWN:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            code = cli_train(argv)
        blocks.append(f"### `wmrl train {' '.join(argv)}`  (exit {code})\n\n```text\n{buffer.getvalue().rstrip()}\n```\n")
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
    assert set(HARDWARE) >= {"h200x1", "h100x8", "h200x8"}


def test_the_4b_fits_an_8_gpu_node_only_as_its_zero2_variant():
    """qwen3.5-4b is sized for one H200 (ZeRO 0): on 8 x H100 every GPU holds all the gradients and optimizer state and
    does not fit; qwen3.5-4b-h100x8 shards them (ZeRO 2) and gives each rank 8 of the step's 64 rows."""
    base, node = load_config("qwen3.5-4b"), load_config("qwen3.5-4b-h100x8")
    alone = plan(base, "h100x8")
    assert not alone["fits"] and alone["problems"][0].startswith("GPU: peak 91.1 GiB")
    for name in ("h100x8", "h200x8"):
        result = plan(node, name)
        assert result["fits"], (name, result["problems"])
        trl = node["trl"]
        assert trl["per_device_train_batch_size"] * trl["gradient_accumulation_steps"] * result["processes"] == 64
    assert plan(node, "h100x8")["backward_gib"] < alone["backward_gib"] - 20  # the sharded gradients and moments


def _differences(a, b, where=""):
    if isinstance(a, dict) and isinstance(b, dict):
        return {d for k in set(a) | set(b) for d in _differences(a.get(k), b.get(k), f"{where}.{k}" if where else k)}
    return set() if a == b else {where}


def test_the_node_variant_is_the_4b_config_but_for_what_the_node_changes():
    "Every value of qwen3.5-4b-h100x8 is qwen3.5-4b's except the lines marked NODE, so the two cannot drift apart."
    import yaml
    folder = REPO / "reproductions/configs"
    base, node = (yaml.safe_load((folder / f"{n}.yaml").read_text()) for n in ("qwen3.5-4b", "qwen3.5-4b-h100x8"))
    marked = {line.split(":")[0].strip() for line in (folder / "qwen3.5-4b-h100x8.yaml").read_text().splitlines()
              if "# NODE" in line}
    differing = _differences(base, node)
    assert {d.rsplit(".", 1)[-1] for d in differing} - {"environment_gib", "data_gib"} == marked, differing
    assert differing >= {"trl.gradient_accumulation_steps", "resources.zero_stage", "resources.hardware"}


def test_the_time_verdict_marks_every_rate_and_sets_the_paper_beside_it():
    "Each term of a step says where its rate comes from; the 4B's closing line names the paper's 286 GPU-h (Table 1)."
    from wmrl.adapters.plan_time import measured_rates, timed_plan
    result = timed_plan(load_config("qwen3.5-4b"), "h200x1")
    bases = {t["term"]: t["basis"] for t in result["time"]["terms"]}
    assert set(bases) == {"generation", "world-model prefill", "world-model decode", "gradient pass", "scoring forward"}
    assert bases["gradient pass"].startswith("measured:") and bases["world-model decode"].startswith("published: NVIDIA H200")
    grad = next(t for t in result["time"]["terms"] if t["term"] == "gradient pass")
    assert grad["seconds"] == pytest.approx(64 * 21604 / measured_rates()["trainer"])  # the committed measurement
    assert "the paper's own figure, 286 GPU-h" in result["time_line"] and result["time"]["steps"] == 160


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
