"""The TRL adapter on CPU with a tiny Qwen3 built from config and a locally trained BPE tokenizer.

Real parts only: the policy is a real (random) transformer, completions choose among real iris programs, the
static world model predicts them and the sandbox executes the anchor groups.
"""
import inspect
import json
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("trl")
from datasets import Dataset  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from wmrl.adapters.completions import menu_program  # noqa: E402
from wmrl.adapters.task_scorer import TaskScorer  # noqa: E402
from wmrl.adapters.trl_adapter import TRL_SIGNATURES, check_trl_contract, make_wmrl_trainer_class, tiny_policy  # noqa: E402
from wmrl.core.correction import CorrectionConfig, WMRLCorrector  # noqa: E402
from wmrl.execution.tasks import load_task  # noqa: E402
from wmrl.world_model.static import StaticWorldModel  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MENU = ["good_uniform_baseline", "bad_syntax_missing_paren", "bad_imports_not_installed", "good_hard_labels_onehot"]


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    return tiny_policy(tmp_path_factory.mktemp("policy"), seed=0)


@pytest.fixture(scope="module")
def scorer():
    "One scorer for the module: its execution cache is shared, so each program runs once in the sandbox."
    iris = load_task(REPO / "toy/tasks/iris")
    menu = [(REPO / f"toy/solutions/iris/{name}.py").read_text() for name in MENU]
    return TaskScorer({f"iris-{k}": iris for k in range(4)}, StaticWorldModel(), program=menu_program(menu))


def make_trainer(policy, scorer, tmp_path, correction: CorrectionConfig, max_steps=3, **overrides):
    dataset = Dataset.from_list([{"prompt": f"Task {k}: write a solution.", "task_id": f"iris-{k}"} for k in range(4)])
    settings = dict(output_dir=str(tmp_path / "out"), per_device_train_batch_size=8, num_generations=4,
                    max_steps=max_steps, max_completion_length=8, learning_rate=1e-4, use_cpu=True, bf16=False,
                    report_to="none", logging_steps=1, save_strategy="no", seed=0, gradient_checkpointing=False)
    settings.update(overrides)
    return make_wmrl_trainer_class()(str(policy), args=GRPOConfig(**settings), train_dataset=dataset, scorer=scorer,
                                     corrector=WMRLCorrector(correction))


def record_loss_advantages(trainer):
    "Wrap _compute_loss to record the advantages the loss really sees (after TRL's shuffle)."
    seen = []
    original = trainer._compute_loss

    def spy(model, inputs):
        seen.append(inputs["advantages"].detach().double().numpy().copy())
        return original(model, inputs)
    trainer._compute_loss = spy
    return seen


def test_installed_trl_matches_the_contract():
    check_trl_contract(GRPOTrainer)  # raises RuntimeError if a private method changed
    for name, parameters in TRL_SIGNATURES.items():
        assert list(inspect.signature(getattr(GRPOTrainer, name)).parameters) == parameters


def test_contract_fails_loudly_on_a_changed_signature():
    class Changed(GRPOTrainer):
        def _generate_and_score_completions(self, inputs, mode):
            return {}
    with pytest.raises(RuntimeError, match="_generate_and_score_completions has parameters"):
        check_trl_contract(Changed)


def test_three_steps_finite_loss_and_anchor_only_scaling(policy, scorer, tmp_path):
    config = CorrectionConfig(method="wmrl", anchor_fraction=0.25, min_pairs=4, refit_every=1, warmup=1)
    trainer = make_trainer(policy, scorer, tmp_path, config)
    seen = record_loss_advantages(trainer)
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses)
    assert len(trainer.wmrl_history) == 3 and len(seen) == 3
    for record, used in zip(trainer.wmrl_history, seen):
        anchor = np.array(record["anchor_rows"])
        multipliers = np.array(record["multipliers"])
        advantages = np.array(record["advantages"])
        assert anchor.any() and not anchor.all()
        assert np.all(multipliers[~anchor] == 1.0)  # WM rows: untouched
        # TRL's own formula on the same (corrected) rewards = the core's advantages ...
        np.testing.assert_allclose(np.array(record["trl_advantages"]), advantages, atol=1e-5)
        # ... and the loss sees the core's advantages x multipliers (as a multiset: TRL shuffles rows)
        np.testing.assert_allclose(np.sort(used), np.sort(advantages * multipliers), atol=1e-6)
        real = np.array(record["real"])
        assert np.isfinite(real[anchor]).all() and np.isnan(real[~anchor]).all()  # only anchors executed
    weights = [np.array(r["multipliers"])[np.array(r["anchor_rows"])] for r in trainer.wmrl_history]
    assert any((w > 1.0).any() for w in weights), "the anchor weight never moved: the test proves nothing"
    logged = trainer.state.log_history[0]
    for name in ("wmrl/n_anchor_groups", "wmrl/anchor_weight", "wmrl/n_pairs", "wmrl/advantage_mismatch"):
        assert name in logged


# TRL's loss types whose first on-policy step is linear in the advantage (the ratio is 1, nothing clips); the configs
# in reproductions/configs use dapo, the others are what a user may switch to.
LINEAR_LOSS_TYPES = ["dapo", "grpo", "bnpo", "dr_grpo", "cispo", "sapo"]


@pytest.mark.parametrize("loss_type", LINEAR_LOSS_TYPES)
def test_uniform_weight_two_doubles_the_gradient_norm(policy, scorer, tmp_path, loss_type):
    "All groups anchors, w clipped to exactly 2 vs plain real-reward GRPO: same samples, twice the gradient."
    plain = make_trainer(policy, scorer, tmp_path / "plain", CorrectionConfig(method="grpo_real"), max_steps=1,
                         loss_type=loss_type)
    predicted_before = scorer.counts["predicted"]
    plain.train()
    assert scorer.counts["predicted"] == predicted_before  # real-execution GRPO never asks the world model
    weighted_config = CorrectionConfig(method="wmrl", anchor_fraction=1.0, warmup=1, target_weight=2.0, w_max=2.0)
    weighted = make_trainer(policy, scorer, tmp_path / "weighted", weighted_config, max_steps=1, loss_type=loss_type)
    weighted.train()
    first_plain, first_weighted = plain.wmrl_history[0], weighted.wmrl_history[0]
    assert first_plain["rewards"] == first_weighted["rewards"]  # same completions, same real rewards
    assert np.all(np.array(first_plain["multipliers"]) == 1.0)
    assert np.all(np.array(first_weighted["multipliers"]) == 2.0)
    norm_plain = plain.state.log_history[0]["grad_norm"]
    norm_weighted = weighted.state.log_history[0]["grad_norm"]
    assert norm_plain > 0
    assert norm_weighted / norm_plain == pytest.approx(2.0, rel=1e-4)


def test_pure_world_model_executes_nothing(policy, scorer, tmp_path):
    trainer = make_trainer(policy, scorer, tmp_path, CorrectionConfig(method="pure_wm"), max_steps=1)
    trainer.train()
    record = trainer.wmrl_history[0]
    assert not any(record["anchor_rows"]) and all(math.isnan(v) for v in record["real"])
    assert record["rewards"] == record["predicted"]


def test_bad_construction_is_a_clear_error(policy, scorer, tmp_path):
    with pytest.raises(ValueError, match="scale_rewards='none'"):
        make_trainer(policy, scorer, tmp_path, CorrectionConfig(), scale_rewards="none")
    with pytest.raises(TypeError, match="do not pass reward_funcs"):
        make_wmrl_trainer_class()(str(policy), args=GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False),
                                  scorer=scorer, reward_funcs=[len])
    with pytest.raises(TypeError, match="execute"):
        make_wmrl_trainer_class()(str(policy), args=GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False),
                                  scorer=StaticWorldModel())


def test_missing_group_key_column_is_a_clear_error(policy, scorer, tmp_path):
    trainer = make_trainer(policy, scorer, tmp_path, CorrectionConfig(), max_steps=1)
    trainer.key_column = "competition"
    with pytest.raises(ValueError, match="no 'competition' column"):
        trainer.train()


def test_a_changed_output_dict_fails_loudly(policy, scorer, tmp_path, monkeypatch):
    "If TRL's generation output loses a key the adapter relies on, the step stops with a RuntimeError."
    original = GRPOTrainer._generate_and_score_completions

    def without_mask(self, inputs):
        output = original(self, inputs)
        output.pop("completion_mask")
        return output
    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", without_mask)
    trainer = make_trainer(policy, scorer, tmp_path, CorrectionConfig(), max_steps=1)
    with pytest.raises(RuntimeError, match=r"lacks \['completion_mask'\]"):
        trainer.train()


def test_corrector_checkpointed(policy, scorer, tmp_path):
    trainer = make_trainer(policy, scorer, tmp_path, CorrectionConfig(), max_steps=1, save_strategy="steps",
                           save_steps=1)
    trainer.train()
    saved = Path(trainer.args.output_dir) / "checkpoint-1" / "wmrl_corrector.json"
    assert saved.is_file()
    restored = WMRLCorrector()
    restored.load_state_dict(json.loads(saved.read_text()))
    assert restored.state_dict() == trainer.corrector.state_dict()


def test_resume_restores_the_corrector(policy, scorer, tmp_path):
    config = CorrectionConfig(method="wmrl", anchor_fraction=0.25, min_pairs=4, refit_every=1, warmup=1)
    first = make_trainer(policy, scorer, tmp_path, config, max_steps=1, save_strategy="steps", save_steps=1)
    first.train()
    saved_state = first.corrector.state_dict()
    resumed = make_trainer(policy, scorer, tmp_path, config, max_steps=2, save_strategy="no")
    resumed.train(resume_from_checkpoint=True)
    assert len(resumed.wmrl_history) == 1 and resumed.wmrl_history[0]["step"] == 1  # continues at correction step 1
    assert resumed.corrector.n_steps == 2
    saved_pairs = len(saved_state["debiaser"]["predicted"])
    assert saved_pairs > 0 and resumed.wmrl_history[0]["stats"]["n_pairs"] > saved_pairs  # built on the saved pairs


def test_resume_without_corrector_state_is_an_error(policy, scorer, tmp_path):
    trainer = make_trainer(policy, scorer, tmp_path, CorrectionConfig(), max_steps=1)
    (tmp_path / "out" / "checkpoint-1").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no wmrl_corrector.json"):
        trainer.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-1"))


def test_gradient_accumulation_generation_batch(policy, scorer, tmp_path):
    "steps_per_generation = 2: one correction per generation batch of 16 rows, split into two micro-batches."
    trainer = make_trainer(policy, scorer, tmp_path, CorrectionConfig(method="wmrl", anchor_fraction=0.25),
                           max_steps=1, per_device_train_batch_size=4, gradient_accumulation_steps=4)
    seen = record_loss_advantages(trainer)
    trainer.train()
    assert len(trainer.wmrl_history) == 1 and len(trainer.wmrl_history[0]["group_ids"]) == 16
    record = trainer.wmrl_history[0]
    weighted = np.array(record["advantages"]) * np.array(record["multipliers"])
    np.testing.assert_allclose(np.sort(np.concatenate(seen)), np.sort(weighted), atol=1e-6)


def test_evaluation_uses_real_rewards(policy, scorer, tmp_path):
    dataset = Dataset.from_list([{"prompt": f"Task {k}: write a solution.", "task_id": f"iris-{k}"} for k in range(2)])
    trainer = make_trainer(policy, scorer, tmp_path, CorrectionConfig(), max_steps=1, per_device_eval_batch_size=8)
    trainer.eval_dataset = dataset
    executed_before = scorer.counts["executed"] + scorer.counts["cache_hits"]
    metrics = trainer.evaluate()
    assert scorer.counts["executed"] + scorer.counts["cache_hits"] - executed_before == 8  # every eval row executed
    assert trainer.wmrl_history == [] and 0.0 <= metrics["eval_reward"] <= 1.0


@pytest.mark.parametrize("loss_type", LINEAR_LOSS_TYPES)
def test_prediction_powered_coefficients_reach_the_loss(policy, scorer, tmp_path, loss_type):
    "wmrl_ppi: TRL's advantages still match the rewards' own, and the loss sees the rectified coefficients (issue 23)."
    config = CorrectionConfig(method="wmrl_ppi", anchor_fraction=0.25, min_pairs=4, refit_every=1, ppi_tuned=False)
    trainer = make_trainer(policy, scorer, tmp_path, config, max_steps=2, loss_type=loss_type)
    seen = record_loss_advantages(trainer)
    trainer.train()
    assert len(trainer.wmrl_history) == 2 and len(seen) == 2
    for record, used in zip(trainer.wmrl_history, seen):
        anchor, weighted = np.array(record["anchor_rows"]), np.array(record["weighted_advantages"])
        np.testing.assert_allclose(np.array(record["trl_advantages"]), np.array(record["advantages"]), atol=1e-5)
        np.testing.assert_allclose(np.sort(used), np.sort(weighted), atol=1e-6)  # what trains is the rectified value
        assert anchor.any() and not anchor.all()
        # anchor rows train on (M/k)A − (M/k − 1)λÂ with M/k = 4 and λ = 1, not on their plain advantage A
        assert not np.allclose(weighted[anchor], np.array(record["advantages"])[anchor])


def test_a_run_that_ends_uncalibrated_says_so(policy, scorer, tmp_path):
    "Issue 26: at the defaults (min_pairs 200, warm-up 32 anchor groups) a short run never engages; TRL's train() warns."
    trainer = make_trainer(policy, scorer, tmp_path, CorrectionConfig(method="wmrl", anchor_fraction=0.25), max_steps=1)
    with pytest.warns(UserWarning, match="not fully engaged: Online Debiasing never fitted"):
        trainer.train()
