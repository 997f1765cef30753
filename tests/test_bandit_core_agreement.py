"""The bandit's vectorised formulas agree with the core's reference objects.

`wmrl.toy.lanes` restates GRPO advantages, the bucketed isotonic fit, the group disagreement and the anchor weighter
over a lane axis so that 7 variants x 32 seeds run in one numpy loop. These tests feed the same inputs to both.
"""
import numpy as np
import pytest

from wmrl.core.advantages import group_advantages
from wmrl.core.denoise import AnchorWeighter, group_disagreement
from wmrl.core.isotonic import bucketed_isotonic_fit, pav_reference
from wmrl.toy.bandit import BanditConfig, risky_problem, simulate
from wmrl.toy.lanes import BatchCalibrator, BatchWeighter, batch_disagreement, batch_group_advantages, pav


@pytest.mark.parametrize("scale", ["none", "group"])
def test_group_advantages_match_core(scale):
    rng = np.random.default_rng(0)
    rewards = rng.integers(0, 3, size=(6, 8)) / 2.0  # ties and all-equal groups happen
    rewards[2] = 0.5  # one degenerate group for sure
    ours = batch_group_advantages(rewards, scale)
    ids = np.repeat(np.arange(6), 8)
    core = group_advantages(rewards.ravel(), ids, scale=scale).advantages.reshape(6, 8)
    np.testing.assert_allclose(ours, core, atol=1e-12)
    assert np.all(ours[2] == 0)


@pytest.mark.parametrize("bins", [10, 50])
def test_calibrator_matches_core_bucketed_fit(bins):
    rng = np.random.default_rng(1)
    real = rng.uniform(0.0, 1.0, 400)
    predicted = np.clip(real ** 2 + rng.normal(0, 0.1, 400), 0.0, 1.0)
    calibrator = BatchCalibrator(1, bins=bins, min_pairs=400, refit_every=10**9)
    calibrator.push(np.zeros(400, int), predicted, real)
    assert calibrator.calibrated[0]
    core_map = bucketed_isotonic_fit(predicted, real, bins=bins)
    probes = np.linspace(0, 1, 101)
    np.testing.assert_allclose(calibrator.apply(probes[None])[0], core_map(probes), atol=1e-12)


def test_pav_matches_core_reference():
    rng = np.random.default_rng(2)
    for _ in range(50):
        values = rng.normal(size=rng.integers(1, 30))
        weights = rng.uniform(0.1, 3.0, len(values))
        np.testing.assert_allclose(pav(values, weights), pav_reference(values, weights), atol=1e-12)


def test_disagreement_matches_core():
    rng = np.random.default_rng(3)
    calibrated = rng.uniform(size=(20, 8))
    real = (rng.uniform(size=(20, 8)) < 0.5).astype(float)
    real[4] = 1.0  # degenerate: the core says NaN, we say not ok
    ours, ok = batch_disagreement(calibrated, real)
    for g in range(20):
        core = group_disagreement(calibrated[g], real[g])
        if np.isnan(core):
            assert not ok[g]
        else:
            assert ok[g]
            assert ours[g] == pytest.approx(core, abs=1e-12)


def test_weighter_matches_core_on_a_stream_with_gaps():
    rng = np.random.default_rng(4)
    stream = rng.uniform(0.05, 2.0, 300)
    skipped = rng.uniform(size=300) < 0.2
    core = AnchorWeighter(half_life=16, warmup=10, w_max=4.0, target_weight=2.0, scale="official")  # the bandit's rule
    ours = BatchWeighter(1, half_life=16, warmup=10, w_max=4.0, target_weight=2.0)
    for value, skip in zip(stream, skipped):
        core.observe(np.nan if skip else value)
        ours.push(np.array([value]), np.array([not skip]))
        assert ours.weight()[0] == pytest.approx(core.weight(), abs=1e-12)
    assert core.c is not None and 1.0 < core.weight() <= 4.0


def test_lanes_do_not_interact():
    """A variant's curve is the same whether or not other variants run beside it (shared stream per seed)."""
    problem = risky_problem()
    alone = simulate(problem, BanditConfig(seeds=3, steps=120, log_every=40, variants=("wmrl",)))
    together = simulate(problem, BanditConfig(seeds=3, steps=120, log_every=40, variants=("pure_wm", "wmrl", "grpo_real")))
    np.testing.assert_allclose(alone.gap[:, 0], together.gap[:, 1], atol=1e-12)
    np.testing.assert_allclose(alone.theta[0], together.theta[1], atol=1e-12)


def test_bias_corrected_weighter_matches_core():
    rng = np.random.default_rng(5)
    stream = rng.uniform(0.05, 2.0, 200)
    skipped = rng.uniform(size=200) < 0.2
    core = AnchorWeighter(half_life=16, warmup=10, w_max=4.0, target_weight=2.0, scale="bias_corrected")
    ours = BatchWeighter(1, half_life=16, warmup=10, w_max=4.0, target_weight=2.0, bias_corrected=True)
    for value, skip in zip(stream, skipped):
        core.observe(np.nan if skip else value)
        ours.push(np.array([value]), np.array([not skip]))
        assert ours.weight()[0] == pytest.approx(core.weight(), abs=1e-12)
