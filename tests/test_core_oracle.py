"""The gradient oracle (wmrl.core.oracle) recovers known answers, its shadows are the run's corrector, and the robust
s² of the anchor weight (CorrectionConfig.s2_cap) stops one near-flat group from pinning the weight."""
from __future__ import annotations

import numpy as np
import pytest

from wmrl.core.advantages import factorize_groups
from wmrl.core.correction import CorrectionConfig, WMRLCorrector
from wmrl.core.oracle import GradientOracle, anchor_draws, instrument_predictions, noise_variance

SMALL = {"min_pairs": 16, "refit_every": 8, "warmup": 4, "half_life": 16.0}


def step_data(step: int, n_groups: int = 8, group: int = 8, dim: int = 10, seed: int = 0):
    rng = np.random.default_rng([seed, step])
    ids = np.repeat([f"s{step}:t{g}" for g in range(n_groups)], group)
    real = rng.choice(np.linspace(0, 1, 21), size=len(ids))
    scores = rng.normal(size=(len(ids), dim))
    return ids, real, scores, rng


@pytest.mark.parametrize("scale", ["group", "none"])
def test_a_perfect_world_model_is_the_real_gradient_for_every_estimator_that_uses_it(scale):
    oracle = GradientOracle(base={"scale": scale, **SMALL})
    for step in range(5):
        ids, real, scores, _ = step_data(step)
        measured = oracle.probe(step, ids, real, real, scores)
        for name in ("pure_wm", "mixed_uncorrected", "fusion", "ppi", "ppi_plain"):
            assert measured[name]["rel_err"] == pytest.approx(0.0, abs=1e-9), (step, name)
        # A calibrated estimator maps a perfect prediction outside the anchors' range to the range's edge (an isotonic
        # map is flat beyond its last knot), so it is not exact; the prediction-powered one stays unbiased all the same.
        assert measured["wmrl_ppi"]["bias2"] == pytest.approx(0.0, abs=1e-20)


def test_the_affine_instrument_under_group_scaling_and_its_length_when_centred():
    ids, real, scores, _ = step_data(0)
    affine = instrument_predictions(real, "affine", 0.5)
    grouped = GradientOracle(["pure_wm"], base={"scale": "group"}).probe(0, ids, affine, real, scores)["pure_wm"]
    centred = GradientOracle(["pure_wm"], base={"scale": "none"}).probe(0, ids, affine, real, scores)["pure_wm"]
    assert grouped["cos"] == pytest.approx(1.0, abs=1e-6) and grouped["rel_err"] < 1e-3
    assert centred["cos"] == pytest.approx(1.0, abs=1e-12) and centred["scale"] == pytest.approx(0.5, abs=1e-12)


def test_the_noise_instrument_is_unbiased_when_centred_with_the_closed_form_variance():
    ids, real, scores, _ = step_data(1)
    wide = {"scale": "none", "score_range": (-3.0, 4.0)}
    oracle = GradientOracle(["pure_wm"], base=wide)
    reference = oracle.reference(ids, real) @ scores
    for strength in (0.1, 0.3):
        noisy = instrument_predictions(real, "noise", strength, draws=600, seed=4)
        measured = GradientOracle(["pure_wm"], base=wide).probe(0, ids, noisy, real, scores)["pure_wm"]
        expected = noise_variance(scores, ids, strength) / float(reference @ reference)
        assert measured["var"] == pytest.approx(expected, rel=0.15)
        assert measured["bias2"] < 5 * expected / 600  # what 600 draws leave; zero in expectation


def test_the_monotone_instrument_is_what_debiasing_removes():
    oracle = GradientOracle(["mixed_uncorrected", "debias_only"], base={"scale": "group", **SMALL})
    late = []
    for step in range(12):
        ids, real, scores, _ = step_data(step, seed=2)
        row = oracle.probe(step, ids, instrument_predictions(real, "monotone", 0.6), real, scores)
        if step >= 6:  # calibrated by now (16 pairs after two steps)
            late.append((row["mixed_uncorrected"]["bias2"], row["debias_only"]["bias2"]))
    mixed, debiased = np.mean(late, axis=0)
    assert debiased < 0.1 * mixed


def test_anchors_only_mean_is_the_real_gradient_over_m():
    ids, real, scores, _ = step_data(3)
    measured = GradientOracle(["anchors_only"], base={"scale": "group"}).probe(0, ids, real, real, scores)["anchors_only"]
    assert measured["bias2"] == pytest.approx((7 / 8) ** 2, abs=1e-12)  # mean = g / 8: |g/8 - g|² / |g|²
    assert measured["n_draws"] == 8


def test_the_shadow_is_the_run_corrector():
    "Fed the run's stream, the oracle's wmrl shadow trains on exactly what the run's own corrector does."
    config = {"anchor_fraction": 0.125, "seed": 5, **SMALL}
    run = WMRLCorrector(CorrectionConfig(method="wmrl", **config))
    oracle = GradientOracle(["wmrl"], base=config)
    for step in range(10):
        ids, real, scores, rng = step_data(step, seed=1)
        predicted = np.clip(real + 0.3 * (rng.uniform(size=len(real)) < 0.3), 0, 1)
        codes, keys = factorize_groups(ids)
        flags = run.plan(keys, step)
        mine = run.correct(ids, predicted, np.where(flags[codes], real, np.nan))
        theirs = oracle.advance(step, ids, predicted, np.where(flags[codes], real, np.nan))["wmrl"]
        np.testing.assert_array_equal(theirs.weighted_advantages, mine.weighted_advantages)
        assert oracle.shadows["wmrl"].state_dict() == run.state_dict()


def test_anchor_draws_enumerate_or_sample():
    draws, exact = anchor_draws(8, 2)
    assert exact and len({tuple(d) for d in draws.tolist()}) == 28
    sample, exact = anchor_draws(64, 6, max_draws=100, seed=1)
    assert not exact and sample.shape == (100, 64)


def near_flat_stream(steps: int = 40):
    "One anchor group a step; at step 10 the group's real rewards are almost equal (s² in the thousands)."
    rng = np.random.default_rng(0)
    for step in range(steps):
        keys = [f"s{step}:g{i}" for i in range(8)]
        real = rng.choice([0.0, 0.2, 0.5, 0.8, 1.0], size=64)
        predicted = np.clip(real + 0.3 * rng.normal(size=64), 0, 1)
        if step == 10:
            real = np.full(64, 0.1) + 1e-3 * (np.arange(64) % 2)  # a group where every program failed alike
        yield step, keys, np.repeat(keys, 8), real, predicted


def weights(s2_cap):
    corrector = WMRLCorrector(CorrectionConfig(method="wmrl", anchor_fraction=0.125, s2_cap=s2_cap, **SMALL))
    out = []
    for step, keys, ids, real, predicted in near_flat_stream():
        codes, _ = factorize_groups(ids)
        flags = corrector.plan(keys, step)
        out.append(corrector.correct(ids, predicted, np.where(flags[codes], real, np.nan)).stats["anchor_weight"])
    return np.array(out)


def test_one_near_flat_group_pins_the_release_weight_and_not_the_capped_one():
    released, capped = weights(None), weights(4.0)
    assert (released[11:] == 4.0).mean() > 0.5  # the release: at the clip for most of the rest of the run
    assert (capped[11:] < 4.0).all()  # capped: one group cannot pin it


def test_the_default_weight_is_the_capped_one():
    "The core's default is the outlier-proof s² (fails before it was: the default was the release's uncapped rule)."
    assert CorrectionConfig().s2_cap == 4.0
    corrector = WMRLCorrector(CorrectionConfig(method="wmrl", anchor_fraction=0.125, **SMALL))
    assert corrector.denoiser.s2_cap == 4.0
    assert (weights(CorrectionConfig.s2_cap)[11:] < 4.0).all()
    CorrectionConfig(method="mixed_uncorrected")  # estimators without the anchor weight take the default and ignore it


def test_a_state_from_before_the_cap_resumes_uncapped():
    "A checkpoint written when the release's rule was the only one (no s2_cap key) must resume with that rule."
    old = WMRLCorrector(CorrectionConfig(method="wmrl", s2_cap=None)).state_dict()
    del old["config"]["s2_cap"], old["denoiser"]["s2_cap"]
    twin = WMRLCorrector(CorrectionConfig(method="wmrl", s2_cap=None))
    twin.load_state_dict(old)
    assert twin.config.s2_cap is None and twin.denoiser.s2_cap is None


def test_s2_cap_is_checked_and_round_trips():
    with pytest.raises(ValueError, match="s2_cap"):
        CorrectionConfig(s2_cap=-1.0)
    corrector = WMRLCorrector(CorrectionConfig(s2_cap=4.0))
    twin = WMRLCorrector()
    twin.load_state_dict(corrector.state_dict())
    assert twin.config.s2_cap == 4.0 and twin.denoiser.s2_cap == 4.0
