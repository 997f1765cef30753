"""Fixes for the full-scale path (issue 15): each test here failed on the code before the fix.

Real parts where they run on CPU (TRL on the tiny policy, the sandbox, the static world model); a fake only for
vLLM's engine, which cannot run here.
"""
import collections
import math
import sys
import types
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("trl")
from datasets import Dataset  # noqa: E402
from trl import GRPOConfig  # noqa: E402

from wmrl.adapters.completions import menu_program  # noqa: E402
from wmrl.adapters.task_scorer import TaskScorer  # noqa: E402
from wmrl.adapters.train import cli_train, dry_run  # noqa: E402
from wmrl.adapters.train_config import load_config  # noqa: E402
from wmrl.adapters.trl_adapter import make_wmrl_trainer_class, tiny_policy  # noqa: E402
from wmrl.core.correction import CorrectionConfig, WMRLCorrector  # noqa: E402
from wmrl.execution.tasks import load_task  # noqa: E402
from wmrl.world_model.backends import HTTPWorldModel, TransformersWorldModel, VLLMWorldModel, get_world_model  # noqa: E402
from wmrl.world_model.static import StaticWorldModel  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MENU = ["good_logistic", "bad_syntax_missing_paren", "good_uniform_baseline", "bad_sub_no_write"]


@pytest.fixture(scope="module")
def home_policy(tmp_path_factory):
    "A tiny policy saved under a fake $HOME, so a config can name it as ~/policy."
    home = tmp_path_factory.mktemp("home")
    tiny_policy(home / "policy", seed=0)
    return home


# 1. path expansion --------------------------------------------------------------------------------------------
def test_model_path_with_tilde_trains(home_policy, tmp_path, monkeypatch):
    "model.path: ~/policy reaches transformers expanded (before: OSError 'Repo id must be ...')."
    from wmrl.adapters.train import run_training
    monkeypatch.setenv("HOME", str(home_policy))
    config = load_config("tiny-cpu", ["model.tiny=false", "model.path=~/policy", "trl.max_steps=1",
                                      f"output_dir={tmp_path}"])
    summary = run_training(config)
    assert summary["steps"] == 1 and summary["all_losses_finite"]


def test_world_model_loader_expands_tilde(home_policy, monkeypatch):
    "The world model's loader (transformers backend, and the vLLM one's model argument) expands ~ too."
    monkeypatch.setenv("HOME", str(home_policy))
    world_model = get_world_model("transformers", model="~/policy", max_new_tokens=4, constrained=False)
    assert isinstance(world_model, TransformersWorldModel)
    seen = {}
    fake_vllm(monkeypatch, seen)
    VLLMWorldModel(model="~/policy")
    assert seen["model"] == str(home_policy / "policy")


# 4. device pinning ---------------------------------------------------------------------------------------------
def fake_vllm(monkeypatch, seen: dict):
    "A stand-in `vllm` module: its LLM records its arguments and the GPUs visible when it starts."
    class LLM:
        def __init__(self, model, **kwargs):
            seen.update(model=model, kwargs=kwargs, visible=__import__("os").environ.get("CUDA_VISIBLE_DEVICES"))
            self.calls = []

        def chat(self, conversations, sampling_params, **kwargs):
            seen["chat_kwargs"] = kwargs
            return [types.SimpleNamespace(outputs=[]) for _ in conversations]

        def sleep(self, level):
            self.calls.append(("sleep", level))

        def wake_up(self):
            self.calls.append(("wake_up",))
    module = types.ModuleType("vllm")
    module.LLM = LLM
    monkeypatch.setitem(sys.modules, "vllm", module)
    return LLM


def test_world_model_engine_lands_on_the_local_rank_gpu(monkeypatch):
    "Under accelerate (rank 1 of 2 on this node) the engine starts seeing only GPU 1 (before: every rank saw all, took GPU 0)."
    seen = {}
    fake_vllm(monkeypatch, seen)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    for name, value in (("LOCAL_RANK", "1"), ("WORLD_SIZE", "2"), ("LOCAL_WORLD_SIZE", "2")):
        monkeypatch.setenv(name, value)
    VLLMWorldModel(model="some/model")
    assert seen["visible"] == "5"
    assert __import__("os").environ["CUDA_VISIBLE_DEVICES"] == "4,5"  # restored for the trainer


def test_world_model_sleep_mode_wakes_only_to_judge(monkeypatch):
    seen = {}
    fake_vllm(monkeypatch, seen)
    world_model = VLLMWorldModel(model="m", sleep=True)
    assert seen["kwargs"]["enable_sleep_mode"] is True and world_model.llm.calls == [("sleep", 1)]


# 5. importance sampling ----------------------------------------------------------------------------------------
def test_sequence_level_importance_sampling_is_refused():
    "TRL's default sequence_mask with vLLM is an error naming token_truncate (before: accepted silently)."
    with pytest.raises(ValueError, match="token_truncate"):
        load_config("qwen3.5-4b", ["trl.vllm_importance_sampling_mode=sequence_mask"])
    for name in ("qwen3.5-4b", "qwen3.5-9b"):
        resolved = dry_run(load_config(name))
        assert resolved["trl"]["vllm_importance_sampling_mode"] == "token_truncate"
        assert resolved["trl"]["logging_steps"] == 1  # TRL logs sampling/* every step when vLLM generates


def test_sequence_mask_would_drop_rows_that_token_truncate_keeps():
    "Why: a 16k-token episode with a 2e-4 mean per-token log-ratio gap has a sequence ratio e^3.2 > 3, masked to 0."
    rng = np.random.default_rng(0)
    gaps = rng.normal(2e-4, 0.02, size=(8, 16_000))
    sequence_ratio = np.exp(gaps.sum(axis=1))
    token_ratio = np.minimum(np.exp(gaps), 3.0)
    assert (sequence_ratio > 3.0).sum() >= 1  # sequence_mask zeroes those whole rows (their 2-4x weights too)
    assert token_ratio.mean() == pytest.approx(1.0, abs=0.01)


# 6. thinking off and the same feedback fields ------------------------------------------------------------------
def test_world_model_calls_disable_thinking(monkeypatch):
    from wmrl.execution.tasks import load_task
    from wmrl.world_model.prompts import build_prompts
    seen = {}
    fake_vllm(monkeypatch, seen)
    task = load_task(REPO / "toy/tasks/iris")
    prompt = build_prompts(task, "print(1)\n")[0]
    world_model = VLLMWorldModel(model="m")
    world_model.sampling_params = lambda: None  # vllm.SamplingParams does not exist in the fake
    world_model.generate([prompt])
    assert seen["chat_kwargs"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert HTTPWorldModel(base_url="http://x", model="m").request_body(prompt)["chat_template_kwargs"] == {"enable_thinking": False}
    model, tokenizer = __import__("wmrl.world_model.backends", fromlist=["tiny_random_model"]).tiny_random_model()
    tokenizer.chat_template = ("{% if enable_thinking is defined and not enable_thinking %}NOTHINK {% endif %}"
                               "{% for m in messages %}{{ m['content'] }}{% endfor %}")
    assert TransformersWorldModel(model, tokenizer).render(prompt).startswith("NOTHINK ")


def feedback_labels(text: str) -> list[str]:
    "The field names of an execution observation ('Raw Score', 'Code execution time', ...), in order."
    return [line.split(":")[0] for line in text.splitlines() if ":" in line and not line.startswith("===")]


def test_world_model_feedback_has_the_sandbox_fields(tmp_path):
    "Execution time, stdout and both best-score lines appear in predicted feedback as in real feedback."
    from wmrl.adapters.agent_actions import parse_action
    from wmrl.adapters.agent_feedback import SandboxFeedback, WorldModelFeedback
    from wmrl.adapters.kaggle_env import KaggleEnv
    from wmrl.adapters.mledojo import build_mini_competition, load_competition
    from wmrl.adapters.research_agent import EXAMPLE_MESSAGES
    build_mini_competition(tmp_path)
    competition = load_competition(tmp_path, "breast-cancer-mini")
    action = parse_action(EXAMPLE_MESSAGES["logistic"].replace("```python\n", "```python\nprint('fitting')\n", 1))
    real = SandboxFeedback(KaggleEnv(competition))(action)
    predicted = WorldModelFeedback(StaticWorldModel(), competition, wall_s=1.5)(action)
    assert real.status == predicted.status == "ok"
    assert feedback_labels(predicted.observation) == feedback_labels(real.observation)
    assert "Code execution time: 1.50s" in predicted.observation and "Code output: fitting" in predicted.observation


# 7. logged rewards and advantages -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    "Four WMRL steps on the tiny policy, with warm-ups short enough that the anchor weight leaves 1."
    iris = load_task(REPO / "toy/tasks/iris")
    menu = [(REPO / f"toy/solutions/iris/{name}.py").read_text() for name in MENU]
    scorer = TaskScorer({f"iris-{k}": iris for k in range(4)}, StaticWorldModel(), program=menu_program(menu))
    folder = tmp_path_factory.mktemp("trained")
    dataset = Dataset.from_list([{"prompt": f"Task {k}: write a solution.", "task_id": f"iris-{k}"} for k in range(4)])
    args = GRPOConfig(output_dir=str(folder), per_device_train_batch_size=8, num_generations=4, max_steps=5,
                      max_completion_length=4, learning_rate=1e-3, use_cpu=True, bf16=False, report_to="none",
                      logging_steps=1, save_strategy="no", seed=0, gradient_checkpointing=False)
    correction = CorrectionConfig(min_pairs=4, refit_every=4, warmup=1, anchor_fraction=0.5)
    trainer = make_wmrl_trainer_class()(str(tiny_policy(folder / "policy")), args=args, train_dataset=dataset,
                                        scorer=scorer, corrector=WMRLCorrector(correction))
    trainer.train()
    return trainer


def test_real_and_world_model_rewards_are_logged_separately(trained):
    logged = [h for h in trained.state.log_history if "reward" in h]
    assert all("rewards/world_model_mean" in h for h in logged)
    assert any("rewards/real_mean" in h for h in logged)
    last = trained.wmrl_history[-1]
    anchors = np.array(last["anchor_rows"], dtype=bool)
    real = np.array(last["real"], dtype=float)
    assert logged[-1]["rewards/real_mean"] == pytest.approx(np.nanmean(real[anchors]))


def test_completions_table_shows_advantages_after_the_multipliers(trained):
    last = trained.wmrl_history[-1]
    weighted = np.array(last["advantages"]) * np.array(last["multipliers"])
    assert any(m != 1.0 for h in trained.wmrl_history for m in h["multipliers"]), "the weight never left 1"
    np.testing.assert_allclose(np.array(trained._logs["advantages"]), weighted, rtol=1e-6, atol=1e-7)


def test_weighted_log_advantages_replaces_only_the_last_batch():
    from wmrl.adapters.trl_adapter import weighted_log_advantages
    logged = collections.deque([1.0, 2.0, 3.0, 4.0], maxlen=6)
    weighted_log_advantages(logged, np.array([30.0, 40.0]))
    assert list(logged) == [1.0, 2.0, 30.0, 40.0] and logged.maxlen == 6


# 8. operations -------------------------------------------------------------------------------------------------
def test_an_exception_inside_execute_is_an_infrastructure_record(monkeypatch):
    "A sandbox that raises gives an ungraded row (None) and a count, not a dead run (before: the exception escaped)."
    import wmrl.execution.sandbox
    iris = load_task(REPO / "toy/tasks/iris")
    scorer = TaskScorer({"iris": iris}, StaticWorldModel(), program=lambda text: text)

    def broken(*args, **kwargs):
        raise OSError("bwrap: cannot create namespace")
    monkeypatch.setattr(wmrl.execution.sandbox, "execute", broken)
    rewards = scorer.execute([{"task_id": "iris", "completion": "print(1)\n"}])
    assert rewards == [None] and scorer.counts["infra_errors"] == 1
    monkeypatch.undo()  # the sandbox works again: the same program is run (an infra failure is not cached)
    assert isinstance(scorer.execute([{"task_id": "iris", "completion": "print(1)\n"}])[0], float)


def test_plan_checks_checkpoint_disk(capsys):
    "Two kept fp32 checkpoints with optimizer state overflow the H200 box's 64 GiB disk; --plan says so and exits 1."
    assert cli_train(["qwen3.5-4b", "trl.save_total_limit=2", "--plan"]) == 1
    assert "disk:" in capsys.readouterr().out


def test_the_issue_s_original_settings_do_not_fit(capsys):
    "fp32 AdamW, 8 episodes per micro-batch, awake engines at 0.30/0.35, 8 x 64 GiB sandbox jobs: all flagged."
    code = cli_train(["qwen3.5-4b", "trl.optim=adamw_torch", "trl.per_device_train_batch_size=8",
                      "trl.gradient_accumulation_steps=8", "trl.vllm_enable_sleep_mode=false",
                      "trl.vllm_gpu_memory_utilization=0.3",
                      "world_model.server.gpu_memory_utilization=0.35",  # the launched server's share
                      "sandbox.memory_mb=65536", "sandbox.workers=8", "--plan"])
    out = capsys.readouterr().out
    assert code == 1 and "GPU: peak" in out and "host:" in out


def test_a_sandbox_exception_in_an_agent_turn_is_ungraded(tmp_path):
    "The research agent's real feedback: a sandbox that raises gives an infrastructure turn and an ungraded episode."
    from wmrl.adapters.agent_actions import parse_action
    from wmrl.adapters.agent_feedback import SandboxFeedback
    from wmrl.adapters.mledojo import build_mini_competition, load_competition
    from wmrl.adapters.research_agent import EXAMPLE_MESSAGES, Episode

    class BrokenEnv:
        def step(self, action, **kwargs):
            raise OSError("bwrap: cannot create namespace")
    build_mini_competition(tmp_path)
    competition = load_competition(tmp_path, "breast-cancer-mini")
    episode = Episode(competition, SandboxFeedback(BrokenEnv()), max_turns=1)
    action = parse_action(EXAMPLE_MESSAGES["logistic"])
    outcome = episode.feedback(action)
    assert "infra_error" in outcome.detail and "sandbox failure" in outcome.observation
    episode.record(EXAMPLE_MESSAGES["logistic"], action, outcome)
    assert math.isnan(episode.trajectory().reward)
