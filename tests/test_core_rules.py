"""The correction rules as the theory states them (issue 12): s² measured out of sample, a weight scale the first
anchor group does not decide alone, no constant map from a single distinct prediction, an empty step plans no
anchors, and the adaptive anchor fraction is a pure function of logged state within its budget. Each rule's
official alternative stays reachable as an option and is checked here too."""
import json

import numpy as np
import pytest

from wmrl.core.correction import CorrectionConfig, WMRLCorrector
from wmrl.core.debias import OnlineDebiaser
from wmrl.core.denoise import AnchorWeighter, group_disagreement

G = 8


def one_anchor_step(corrector, predicted, real_values, keys=("a", "b"), step=0):
    "plan, then correct with real rewards on the anchor group(s) only; returns (result, anchor flags)."
    flags = corrector.plan(list(keys), step)
    rows = np.repeat(flags, G)
    real = np.where(rows, real_values, np.nan)
    return corrector.correct(np.repeat(list(keys), G), predicted, real), rows


def test_s2_is_measured_with_the_map_from_before_this_steps_pairs():
    # The world model ranks the rows right but bends the scale (real = predicted²): the map fitted on these very
    # pairs reproduces them exactly, so an in-sample s² is 0 although the raw predictions disagree with reality.
    predicted = np.tile(np.linspace(0.1, 0.9, G), 2)
    real_values = predicted**2
    config = dict(method="wmrl", anchor_fraction=0.5, min_pairs=G, refit_every=1, warmup=1)
    default, rows = one_anchor_step(WMRLCorrector(CorrectionConfig(**config)), predicted, real_values)
    expected = group_disagreement(predicted[rows], real_values[rows])  # the identity map stood before the step
    assert expected > 1e-3
    assert default.stats["s2_step_mean"] == pytest.approx(expected)
    assert default.stats["s2_oos_step_mean"] == pytest.approx(expected)
    in_sample, _ = one_anchor_step(WMRLCorrector(CorrectionConfig(**config, s2_rule="in_sample")), predicted, real_values)
    assert in_sample.stats["s2_step_mean"] == pytest.approx(0.0, abs=1e-12)  # the release's order: always 0 here


def test_out_of_sample_s2_moves_the_weight_when_the_map_is_refitted_every_pair():
    rng = np.random.default_rng(0)
    corrector = WMRLCorrector(CorrectionConfig(method="wmrl", anchor_fraction=0.5, min_pairs=G, refit_every=1,
                                               warmup=2, half_life=4))
    for step in range(12):
        true = rng.uniform(size=2 * G)
        predicted = np.clip(np.sqrt(true) + 0.1 * rng.normal(size=true.size), 0, 1)
        result, _ = one_anchor_step(corrector, predicted, true, step=step)
    assert result.stats["s2_ema"] > 0.01
    assert result.stats["anchor_weight"] > 1.0


def test_a_window_with_one_distinct_prediction_is_not_fitted():
    debiaser = OnlineDebiaser(min_pairs=4, refit_every=4)
    assert not debiaser.push([0.5] * 8, np.linspace(0, 1, 8))
    assert not debiaser.calibrated
    np.testing.assert_allclose(debiaser.apply([0.1, 0.5, 0.9]), [0.1, 0.5, 0.9])
    old = OnlineDebiaser(min_pairs=4, refit_every=4, min_distinct=1)  # the option that reproduces the old rule
    old.push([0.5] * 8, np.linspace(0, 1, 8))
    np.testing.assert_allclose(old.apply([0.1, 0.9]), [0.5, 0.5])


def test_a_single_predicted_value_on_the_anchors_does_not_flatten_world_model_groups():
    corrector = WMRLCorrector(CorrectionConfig(method="debias_only", anchor_fraction=0.5, min_pairs=G, refit_every=G))
    flags = corrector.plan(["a", "b"], 0)
    predicted = np.where(np.repeat(flags, G), 0.5, np.tile(np.linspace(0.2, 0.9, G), 2))
    real = np.where(np.repeat(flags, G), np.linspace(0.0, 1.0, 2 * G), np.nan)
    result = corrector.correct(np.repeat(["a", "b"], G), predicted, real)
    world_model_rows = ~np.repeat(flags, G)
    assert np.ptp(result.rewards[world_model_rows]) > 0.5  # not mapped to one constant
    assert np.abs(result.advantages[world_model_rows]).max() > 0.5


def test_the_first_anchor_group_does_not_set_the_weight_scale_alone():
    stream = [10.0] + [0.5] * 31  # one wild first group, then a steady disagreement
    corrected, official = AnchorWeighter(), AnchorWeighter(scale="official")
    for value in stream:
        corrected.observe(value), official.observe(value)
    weights = np.array([0.5 ** ((len(stream) - 1 - i) / 64) for i in range(len(stream))])
    assert corrected.ema == pytest.approx(np.dot(weights, stream) / weights.sum())
    assert corrected.ema < 1.0 < official.ema  # the release's EMA is still dominated by the first group
    assert AnchorWeighter(scale="paper").observe([0.5] * 32) == pytest.approx(1.5)  # w = 1 + s²


def test_an_empty_step_plans_no_anchors():
    for method in ("wmrl", "grpo_real", "pure_wm", "wmrl_adaptive"):
        corrector = WMRLCorrector(CorrectionConfig(method=method))
        flags = corrector.plan([], step=0)
        assert flags.shape == (0,)
        result = corrector.correct([], [], None)
        assert result.rewards.shape == (0,) and corrector.n_steps == 1


def adaptive_run(n_steps, budget, seed=0, corrector=None, start=0, stop=None):
    keys = [f"t{i}" for i in range(8)]
    corrector = corrector or WMRLCorrector(CorrectionConfig(method="wmrl_adaptive", anchor_fraction=0.25,
                                                            min_pairs=8, refit_every=8, adaptive_budget=budget,
                                                            adaptive_steps=n_steps))
    counts = []
    for step in range(start, n_steps if stop is None else stop):
        rng = np.random.default_rng([seed, step])
        true = rng.uniform(size=8 * G)
        noise = 0.3 if step < n_steps // 2 else 0.05  # the world model gets better half-way
        predicted = np.clip(true + noise * rng.normal(size=true.size), 0, 1)
        flags = corrector.plan(keys, step)
        rows = np.repeat(flags, G)
        corrector.correct(np.repeat(keys, G), predicted, np.where(rows, true, np.nan))
        counts.append(int(flags.sum()))
    return counts, corrector


def test_adaptive_anchor_fraction_keeps_its_floor_cap_and_budget_and_resumes_identically():
    counts, corrector = adaptive_run(12, budget=24)
    assert min(counts) >= 1 and max(counts) <= 4  # at least one group, at most rho_max·M
    assert sum(counts) <= 24
    assert counts[:6] != counts[6:] and sum(counts[:6]) > sum(counts[6:])  # more while the disagreement is high
    again, _ = adaptive_run(12, budget=24)
    assert again == counts  # a pure function of logged state
    first, half = adaptive_run(12, budget=24, stop=5)  # stop after 5 steps, checkpoint through JSON, resume
    resumed = WMRLCorrector()
    resumed.load_state_dict(json.loads(json.dumps(half.state_dict())))  # the configuration comes from the state
    rest, _ = adaptive_run(12, budget=24, corrector=resumed, start=5)
    assert first + rest == counts


def test_wmrl_adaptive_is_reachable_from_a_training_config():
    "The TRL adapter plans through WMRLCorrector.plan, so a train config's method and correction section select it."
    from wmrl.adapters.train_config import correction_config
    config = correction_config({"seed": 3, "method": "wmrl_adaptive",
                                "correction": {"anchor_fraction": 0.25, "adaptive_budget": 20, "adaptive_steps": 10}})
    corrector = WMRLCorrector(config)
    counts = [int(corrector.plan([f"t{i}" for i in range(8)], step).sum()) for step in range(1)]
    assert counts == [4]  # nothing measured yet: rho_max = 0.5 of 8 groups, within the budget's reserve
