"""Property tests for the toy bandit (hypothesis) and its error messages."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from wmrl.toy.bandit import (
    VARIANTS,
    BanditConfig,
    BanditProblem,
    policy_probs,
    risky_problem,
    shared_arm_features,
    simulate,
    summarise,
)
from wmrl.toy.lanes import BatchCalibrator, batch_group_advantages, monotone_distortion, pav, policy_gradient
from wmrl.toy.theorems import fit_inverse_decay, fit_loglog_slope

unit = st.floats(0.0, 1.0, allow_nan=False)


@given(arrays(float, st.tuples(st.integers(1, 5), st.integers(2, 9)), elements=unit), st.sampled_from(["none", "group"]),
       st.floats(-3, 3), st.floats(0.1, 10))
def test_advantages_sum_to_zero_and_ignore_shifts(rewards, scale, shift, factor):
    adv = batch_group_advantages(rewards, scale)
    np.testing.assert_allclose(adv.sum(-1), 0.0, atol=1e-9)
    np.testing.assert_allclose(batch_group_advantages(rewards + shift, scale), adv, atol=1e-7)
    if scale == "group":  # std scaling is also blind to a positive factor (up to eps)
        spread = rewards.std(-1, ddof=1)
        keep = spread * min(factor, 1.0) > 2e-2  # eps = 1e-4 on the smaller of the two stds stays below 1%
        scaled = batch_group_advantages(rewards * factor, scale)
        np.testing.assert_allclose(scaled[keep], adv[keep], rtol=1e-2, atol=1e-2)


@given(arrays(float, st.integers(1, 40), elements=st.floats(-5, 5)), st.data())
def test_pav_is_monotone_and_preserves_the_weighted_mean(values, data):
    weights = data.draw(arrays(float, len(values), elements=st.floats(0.1, 5)))
    fitted = pav(values, weights)
    assert np.all(np.diff(fitted) >= -1e-12)
    assert np.dot(fitted, weights) == pytest.approx(np.dot(values, weights), abs=1e-8)


@settings(max_examples=30)
@given(arrays(float, 300, elements=unit), arrays(float, 300, elements=unit), arrays(float, 50, elements=st.floats(-1, 2)))
def test_calibration_map_is_monotone(predicted, real, probes):
    calibrator = BatchCalibrator(1, bins=20, min_pairs=10, refit_every=10)
    calibrator.push(np.zeros(300, int), predicted, real)
    mapped = calibrator.apply(np.sort(probes)[None])[0]
    assert np.all(np.diff(mapped) >= -1e-12)
    if calibrator.calibrated[0]:  # outputs are averages of real outcomes
        assert mapped.min() >= real.min() - 1e-12 and mapped.max() <= real.max() + 1e-12
    else:  # fewer than two populated bins: no fit, identity (as the core's bucketed fit returns None)
        assert len(np.unique(np.clip(np.floor(predicted * 20), 0, 19))) < 2
        np.testing.assert_array_equal(mapped, np.sort(probes))


@given(arrays(float, 4, elements=st.floats(-3, 3)), st.integers(0, 3), st.integers(0, 3))
def test_policy_gradient_of_one_row_is_the_score_function(theta, context, arm):
    problem = risky_problem()
    probs = policy_probs(theta[None], problem.features)
    got = policy_gradient(probs, np.array([[context]]), np.array([[[arm]]]), np.ones((1, 1, 1)), problem.features)
    phi = problem.features[context]
    expected = phi[arm] - probs[0, context] @ phi
    np.testing.assert_allclose(got[0], expected, atol=1e-12)


@given(st.floats(0.0, 0.25))
def test_monotone_distortion_is_monotone_with_bias_size_b(bias):
    r = np.linspace(0, 1, 201)
    g = monotone_distortion(r, bias)
    assert np.all(np.diff(g) >= -1e-12)
    assert np.abs(g - r).max() == pytest.approx(bias, abs=1e-9)


def test_simulate_is_deterministic_and_accounts_real_executions():
    config = BanditConfig(seeds=2, steps=60, log_every=20)
    first = simulate(risky_problem(), config)
    second = simulate(risky_problem(), config)
    np.testing.assert_array_equal(first.gap, second.gap)
    summary = summarise(first)
    expected = dict(grpo_real=1.0, pure_wm=0.0, anchors_only=0.1)
    for name in VARIANTS:
        assert summary[name]["real_exec_fraction"] == pytest.approx(expected.get(name, 0.1))
        assert summary[name]["seeds"] == 2
        assert np.isfinite(summary[name]["final_gap_mean"])
    assert np.all(first.gap >= -1e-9)  # J*_reg is the true optimum


@pytest.mark.parametrize("kwargs, message", [
    (dict(variants=("ppo",)), "unknown variant"), (dict(scale="batch"), "scale"), (dict(bias=0.5), "monotone"),
    (dict(outcome="maybe"), "outcome"), (dict(corruption="lies"), "corruption"), (dict(steps=0), "steps"),
    (dict(step_size=0.0), "step_size"), (dict(noise=-1.0), "noise")])
def test_bad_configs_name_the_problem(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BanditConfig(**kwargs)


def test_bad_problems_and_fits_name_the_problem():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        BanditProblem(np.full((2, 2), 1.5), shared_arm_features(2, 2))
    with pytest.raises(ValueError, match="positive"):
        fit_loglog_slope([1, 2], [-1, -2])
    with pytest.raises(ValueError, match="decay"):
        fit_inverse_decay(np.arange(5.0), np.arange(1.0, 6.0))
