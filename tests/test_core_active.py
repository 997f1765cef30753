"""Active anchors (wmrl.core.active, issue 48): Poisson anchors with inclusion probabilities π_g and Horvitz–Thompson
weights 1/π_g on the rectifier.

- unbiased by exact enumeration: every subset of groups, weighted by its Poisson probability, through the real
  correction step, for a non-monotone world model and arbitrary π (the empty subset included);
- the positive control: the uniform plan's realised M/k under the same unequal-π draws is biased;
- a useless score: exactly κ_π ≥ 1 times uniform in expectation (every permutation of the residuals), at most
  κ_τ for any score (the floor's guarantee, tight), and the learned score drops features that do not predict the
  residual, so on such a stream π is exactly uniform and the variance exactly uniform Poisson's;
- resume and multi-rank agreement: same (key, step, seed, state) → same draw, in spawned processes too;
- ppi-python: the point estimate against its weighted PPI estimator and the active-inference estimator on shared data.
"""
from __future__ import annotations

import copy
import itertools
import json
import multiprocessing

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl.core.active import (
    ActiveConfig,
    ActiveCorrector,
    ResidualScore,
    draw_probability,
    floor_bound,
    inclusion_probabilities,
    poisson_anchors,
    poisson_variance,
    prediction_features,
    useless_score_factor,
)
from wmrl.core.advantages import advantages_from_codes
from wmrl.core.correction import CorrectionConfig
from wmrl.core.ppi import rectified_advantages

SMALL = {"min_pairs": 8, "refit_every": 4}


def blind_stream(step: int, n_groups: int = 6, group: int = 3, seed: int = 0):
    """Real rewards and a world model with a deterministic, non-monotone error: it scores a blind spot backwards
    (row i of group g is blind when (i + g) % 3 == 0), so no monotone map can fix it."""
    rng = np.random.default_rng([seed, step])
    real = rng.choice([0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0], size=n_groups * group)
    codes = np.repeat(np.arange(n_groups), group)
    blind = (np.tile(np.arange(group), n_groups) + codes) % 3 == 0
    predicted = np.where(blind, 1.0 - real, np.clip(real + 0.05, 0, 1))
    keys = [f"s{step}:g{g}" for g in range(n_groups)]
    return keys, np.repeat(keys, group), real, predicted, codes


def advance(corrector, step, keys, ids, real, predicted, codes, features, costs=None):
    flags = corrector.plan(keys, step, features, costs)
    return flags, corrector.correct(ids, predicted, np.where(flags[codes], real, np.nan))


@settings(max_examples=8, deadline=None)
@given(st.sampled_from(["ppi", "wmrl_ppi"]), st.integers(0, 10**6), st.sampled_from(["group", "none"]),
       st.booleans(), st.sampled_from([0.05, 0.3, 1.0]), st.sampled_from([0.1, 0.25, 0.5]))
def test_unbiased_by_exact_enumeration_for_a_non_monotone_world_model_and_arbitrary_pi(
        method, seed, scale, tuned, floor, fraction):
    config = CorrectionConfig(method=method, anchor_fraction=fraction, scale=scale, ppi_tuned=tuned, **SMALL)
    corrector = ActiveCorrector(config, ActiveConfig(floor=floor, min_groups=3, gate=0.0))
    rng = np.random.default_rng(seed)
    for step in range(4):
        keys, ids, real, predicted, codes = blind_stream(step, seed=seed)
        features = np.column_stack([prediction_features(predicted, codes, len(keys)), rng.uniform(size=len(keys))])
        costs = rng.lognormal(0.0, 1.5, size=len(keys))  # arbitrary costs: π far from uniform, as small as τn/M
        pi = corrector.inclusion(features, costs)
        mean, total = 0.0, 0.0
        for subset in itertools.product([False, True], repeat=len(keys)):
            twin = copy.deepcopy(corrector)
            flags = twin.plan(keys, step, features, costs, anchors=list(subset))
            weight = draw_probability(np.array(subset), pi)
            coefficients = twin.correct(ids, predicted, np.where(flags[codes], real, np.nan)).weighted_advantages
            mean, total = mean + weight * coefficients, total + weight
        truth = advantages_from_codes(real, codes, len(keys), scale, config.eps, config.min_graded).advantages
        assert total == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_allclose(mean, truth, atol=1e-10)  # the mean over the Poisson draw IS the all-real update
        advance(corrector, step, keys, ids, real, predicted, codes, features, costs)  # debiaser, λ, score learn


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.floats(0.0, 2.0), st.integers(2, 7))
def test_the_rectifier_is_unbiased_for_any_positive_pi(seed, lam, n_groups):
    "The formula alone, π drawn anywhere in (0, 1] (no floor, no score): Horvitz–Thompson needs only π > 0."
    rng = np.random.default_rng(seed)
    keys, ids, real, predicted, codes = blind_stream(0, n_groups=n_groups, seed=seed)
    pi = rng.uniform(1e-3, 1.0, size=n_groups)
    mean = sum(draw_probability(np.array(s), pi) * rectified_advantages(
        predicted, np.where(np.array(s)[codes], real, np.nan), np.array(s)[codes], codes, n_groups, lam,
        scale="none", inclusion=pi[codes]).advantages for s in itertools.product([False, True], repeat=n_groups))
    np.testing.assert_allclose(mean, advantages_from_codes(real, codes, n_groups, "none").advantages, atol=1e-9)


def test_positive_control_the_uniform_weight_under_unequal_pi_is_biased():
    "The same draws with the realised M/k in place of 1/π_g (the uniform plan's weight): biased. HT is what fixes it."
    keys, ids, real, predicted, codes = blind_stream(0)
    pi = np.array([0.9, 0.6, 0.3, 0.15, 0.1, 0.05])
    mean = 0.0
    for subset in itertools.product([False, True], repeat=6):
        rows = np.array(subset)[codes]
        if rows.any():  # M/k needs an anchor; condition on having one
            c = rectified_advantages(predicted, np.where(rows, real, np.nan), rows, codes, 6, 1.0, scale="none").advantages
            mean = mean + draw_probability(np.array(subset), pi) * c
    mean = mean / (1 - np.prod(1 - pi))
    truth = advantages_from_codes(real, codes, 6, "none").advantages
    assert np.abs(mean - truth).max() > 0.05


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**6), st.integers(2, 20), st.floats(0.05, 1.0), st.floats(0.01, 0.99))
def test_no_score_costs_more_than_the_floor_bound(seed, n_groups, floor, share):
    "κ_τ: for ANY residuals and ANY score, Var(active) <= κ_τ Var(uniform Poisson) (a deterministic inequality)."
    rng = np.random.default_rng(seed)
    expected = share * n_groups
    residuals = rng.normal(size=(n_groups, 3)) * rng.lognormal(0, 2, size=(n_groups, 1))
    pi = inclusion_probabilities(rng.lognormal(0, 3, size=n_groups) * (rng.uniform(size=n_groups) < 0.7), expected, floor)
    assert pi.min() >= floor * expected / n_groups - 1e-12 and pi.sum() == pytest.approx(expected)
    uniform = poisson_variance(residuals, np.full(n_groups, expected / n_groups))
    assert poisson_variance(residuals, pi) <= floor_bound(n_groups, expected, floor) * uniform * (1 + 1e-9)


def test_the_floor_bound_is_attained():
    "Tight: the whole residual on a group the score gives zero energy (π at the floor) costs exactly κ_τ."
    energy = np.array([0.0, 1.0, 4.0, 9.0, 1.0, 1.0, 1.0, 1.0])
    pi = inclusion_probabilities(energy, 2.0, floor=0.25)
    residuals = np.zeros((8, 2)); residuals[0] = [1.0, -2.0]
    ratio = poisson_variance(residuals, pi) / poisson_variance(residuals, np.full(8, 0.25))
    assert ratio == pytest.approx(floor_bound(8, 2.0, 0.25), rel=1e-12)


def test_a_useless_score_costs_exactly_kappa_pi_in_expectation():
    """'Useless' made exact: the residuals independent of the score, i.e. averaged over every assignment of the
    residuals to the groups (all 720 permutations). The expected variance is κ_π × uniform, 1 <= κ_π <= κ_τ: a
    useless score never helps and, unless π is uniform, it loses — by at most the floor's bound."""
    rng = np.random.default_rng(5)
    residuals = rng.normal(size=(6, 2)) * rng.lognormal(0, 1, size=(6, 1))
    uniform = poisson_variance(residuals, np.full(6, 1.5 / 6))
    for floor in (0.1, 0.5, 1.0):
        pi = inclusion_probabilities(rng.lognormal(0, 2, size=6), 1.5, floor)
        expected = np.mean([poisson_variance(residuals[list(p)], pi) for p in itertools.permutations(range(6))])
        assert expected / uniform == pytest.approx(useless_score_factor(pi), rel=1e-12)
        assert 1.0 - 1e-12 <= useless_score_factor(pi) <= floor_bound(6, 1.5, floor) + 1e-12
    assert useless_score_factor(np.full(6, 0.25)) == pytest.approx(1.0)  # τ = 1 (or a constant score): no cost


def _stream_variances(informative: bool, steps: int = 80) -> tuple[list[float], list[bool]]:
    """Run the active step on a stream where one feature is (informative) or is not (useless) the share of a group's
    rows the world model gets wrong; return Var(active)/Var(uniform Poisson) of the coefficients over each step's
    draw (exact, all groups' residuals known) and whether π was exactly uniform."""
    config = CorrectionConfig(method="ppi", anchor_fraction=0.2, scale="none", ppi_tuned=False)
    corrector = ActiveCorrector(config, ActiveConfig(floor=0.2, min_groups=16))
    rng = np.random.default_rng(11)
    ratios, uniform = [], []
    for step in range(steps):
        n_groups, group = 10, 4
        codes = np.repeat(np.arange(n_groups), group)
        wrong_share = rng.choice([0.0, 0.25, 1.0], size=n_groups)  # the world model is wrong on some groups only
        real = rng.uniform(size=n_groups * group)
        wrong = rng.uniform(size=len(real)) < wrong_share[codes]
        predicted = np.where(wrong, rng.uniform(size=len(real)), real)
        keys = [f"{step}:{g}" for g in range(n_groups)]
        ids = np.repeat(keys, group)
        column = wrong_share if informative else rng.uniform(size=n_groups)
        pi = corrector.inclusion(column[:, None])
        residual = advantages_from_codes(real, codes, n_groups, "none").advantages \
            - advantages_from_codes(predicted, codes, n_groups, "none").advantages  # λ = 1
        d = np.zeros((n_groups, len(real))); d[codes, np.arange(len(real))] = residual  # the rows of group g
        if step >= 40:  # past the score's warm-up
            ratios.append(poisson_variance(d, pi) / poisson_variance(d, np.full(n_groups, 2.0 / n_groups)))
            uniform.append(bool(np.all(pi == pi[0])))
        advance(corrector, step, keys, ids, real, predicted, codes, column[:, None])
    return ratios, uniform


def test_a_useless_feature_is_dropped_so_the_variance_is_exactly_uniform():
    """The sense in which a useless score is 'no worse' here: the learned score keeps a feature only when its slope
    passes |t| >= 3 on the logged anchors; a feature independent of the residual does not, π is then exactly
    uniform, and the variance exactly uniform Poisson's. (A fixed useless score would cost κ_π > 1: test above.)"""
    ratios, uniform = _stream_variances(informative=False)
    assert np.mean(uniform) >= 0.95
    assert np.mean(ratios) <= 1.01


def test_positive_control_an_informative_feature_lowers_the_variance():
    ratios, uniform = _stream_variances(informative=True)
    assert not any(uniform)
    assert np.mean(ratios) < 0.8


def _draws(seed: int, steps: int = 30, resume_at: int | None = None) -> list[list[bool]]:
    "The anchor flags of every step of an active run (optionally saved and resumed from JSON at one step)."
    config = CorrectionConfig(method="wmrl_ppi", anchor_fraction=0.25, seed=seed, **SMALL)
    corrector = ActiveCorrector(config, ActiveConfig(min_groups=4, gate=1.0))
    out = []
    for step in range(steps):
        if step == resume_at:
            state = json.loads(json.dumps(corrector.state_dict()))
            corrector = ActiveCorrector(config)
            corrector.load_state_dict(state)
        keys, ids, real, predicted, codes = blind_stream(step, n_groups=8)
        flags, _ = advance(corrector, step, keys, ids, real, predicted, codes,
                           prediction_features(predicted, codes, len(keys)))
        out.append(flags.tolist())
    return out


def test_resume_draws_the_same_anchors_and_learns_the_same_score():
    uninterrupted = _draws(3)
    assert _draws(3, resume_at=13) == uninterrupted
    assert any(sum(f) != sum(uninterrupted[0]) for f in uninterrupted)  # Poisson: the count varies step to step
    assert _draws(4) != uninterrupted  # the seed matters


def test_every_rank_draws_the_same_anchors_in_spawned_processes():
    expected = _draws(3)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.map(_draws, [3, 3])
    assert results == [expected, expected]


def test_the_draw_is_a_function_of_key_step_seed_and_pi_only():
    keys = [f"task-{i}" for i in range(12)] + [("tuple", 1), 7]
    pi = np.linspace(0.05, 0.95, len(keys))
    flags = poisson_anchors(keys, 5, pi, seed=2)
    order = np.random.default_rng(0).permutation(len(keys))
    np.testing.assert_array_equal(poisson_anchors([keys[i] for i in order], 5, pi[order], seed=2), flags[order])
    np.testing.assert_array_equal(poisson_anchors(keys, 5, pi, seed=2), flags)
    assert not np.array_equal(poisson_anchors(keys, 5, pi, seed=3), flags) or not np.array_equal(
        poisson_anchors(keys, 6, pi, seed=2), flags)
    with pytest.raises(ValueError, match="distinct"):
        poisson_anchors(["a", "a"], 0, [0.5, 0.5])


def test_a_step_with_no_anchor_trains_on_the_world_model_and_logs():
    config = CorrectionConfig(method="ppi", anchor_fraction=0.05, ppi_lambda=0.7, ppi_tuned=False)
    corrector = ActiveCorrector(config)
    keys, ids, real, predicted, codes = blind_stream(0)
    flags = corrector.plan(keys, 0, anchors=[False] * 6)
    result = corrector.correct(ids, predicted, np.full(len(ids), np.nan))
    np.testing.assert_allclose(result.weighted_advantages, 0.7 * advantages_from_codes(predicted, codes, 6).advantages)
    assert result.stats["n_anchor_groups"] == 0 and result.stats["active_expected_anchors"] == pytest.approx(0.3)
    assert not flags.any()


def test_rejections():
    with pytest.raises(ValueError, match="prediction-powered"):
        ActiveCorrector(CorrectionConfig(method="wmrl"))
    with pytest.raises(ValueError, match="floor"):
        ActiveConfig(floor=0.0)
    with pytest.raises(RuntimeError, match="plan"):
        ActiveCorrector(CorrectionConfig(method="ppi")).correct(["a", "a"], [0.1, 0.2], [np.nan, np.nan])
    score = ResidualScore()
    score.observe(np.zeros((2, 2)), [1.0, 2.0])
    with pytest.raises(ValueError, match="features"):
        score.observe(np.zeros((2, 3)), [1.0, 2.0])


def _shared_data(seed: int = 0):
    "Per-group vectors Y_g = Σ_i A_i z_i and Ŷ_g = Σ_i Â_i z_i (z_i: a fixed 3-vector per row, a stand-in for ∇log π)."
    keys, ids, real, predicted, codes = blind_stream(0, n_groups=12, group=4, seed=seed)
    z = np.random.default_rng(seed).normal(size=(len(real), 3))
    y = np.array([(advantages_from_codes(real, codes, 12).advantages[:, None] * z)[codes == g].sum(0) for g in range(12)])
    y_hat = np.array([(advantages_from_codes(predicted, codes, 12).advantages[:, None] * z)[codes == g].sum(0)
                      for g in range(12)])
    return real, predicted, codes, z, y, y_hat


def test_point_estimate_is_the_active_inference_estimator():
    "The kit's Σ_i c_i z_i is M × mean_g[λŶ_g + ξ_g(Y_g − λŶ_g)/π_g], the active-inference repository's estimator."
    real, predicted, codes, z, y, y_hat = _shared_data()
    pi = inclusion_probabilities(np.arange(1.0, 13.0), 3.0, 0.2)
    xi = poisson_anchors([f"g{g}" for g in range(12)], 0, pi, seed=1)
    for lam in (1.0, 0.6):
        c = rectified_advantages(predicted, np.where(xi[codes], real, np.nan), xi[codes], codes, 12, lam,
                                 inclusion=pi[codes]).advantages
        ours = (c[:, None] * z).sum(0)
        active = 12 * np.mean(lam * y_hat + xi[:, None] * (y - lam * y_hat) / pi[:, None], axis=0)
        np.testing.assert_allclose(ours, active, atol=1e-10)


def test_ppi_python_weighted_estimate_is_hajek_not_horvitz_thompson():
    """ppi-python's ppi_mean_pointestimate(Y, Ŷ, Ŷ_all, lam, w=1/π) rescales w to sum to n: it is the Hájek (ratio)
    estimator Σ_anchors w(Y − λŶ)/Σ_anchors w, equal to ours exactly when Σ_anchors 1/π_g = M, and biased under
    Poisson draws otherwise (exact enumeration), where ours is not."""
    ppi_py = pytest.importorskip("ppi_py", reason="ppi-python is not installed (pip install ppi-python runs this check)")
    real, predicted, codes, z, y, y_hat = _shared_data(2)
    lam, m = 0.8, 12
    uniform = np.full(m, 0.25)
    fixed = np.isin(np.arange(m), [1, 4, 7])  # 3 anchors at π = 1/4: Σ 1/π = 12 = M, Hájek = HT
    theirs = m * np.ravel(ppi_py.ppi_mean_pointestimate(y[fixed], y_hat[fixed], y_hat, lam=lam, w=1 / uniform[fixed]))
    ours = m * np.mean(lam * y_hat + fixed[:, None] * (y - lam * y_hat) / uniform[:, None], axis=0)
    np.testing.assert_allclose(theirs, ours, rtol=1e-9)
    pi = np.linspace(0.1, 0.9, 6)  # unequal π on 6 groups: enumerate every non-empty draw
    y6, h6 = y[:6], y_hat[:6]
    truth = y6.sum(0)
    ht = hajek = 0.0
    for subset in itertools.product([False, True], repeat=6):
        s = np.array(subset)
        p = draw_probability(s, pi)
        ht = ht + p * (lam * h6.sum(0) + ((y6 - lam * h6) / pi[:, None])[s].sum(0))
        if s.any():
            hajek = hajek + p * 6 * np.ravel(ppi_py.ppi_mean_pointestimate(y6[s], h6[s], h6, lam=lam, w=1 / pi[s]))
    np.testing.assert_allclose(ht, truth, atol=1e-10)  # Horvitz–Thompson: unbiased (the empty draw counts)
    assert np.abs(hajek / (1 - np.prod(1 - pi)) - truth).max() > 1e-3  # Hájek (ppi-python's weights): biased
