"""Prediction-powered WMRL (wmrl.core.ppi, methods ppi and wmrl_ppi) through the real correction step: unbiased over
the anchor draw for any world model (exact enumeration of every draw), λ = 0 is anchors_only up to M/k, λ = 1 is
plain PPI, λ comes from past steps only, and a resumed or second rank computes the same step."""
from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl.core.advantages import advantages_from_codes, factorize_groups
from wmrl.core.correction import CorrectionConfig, WMRLCorrector
from wmrl.core.ppi import PowerTuner, design_lambda, ppi_lambda

SMALL = {"min_pairs": 8, "refit_every": 4, "warmup": 2, "half_life": 8.0}


def stream(n_groups: int, group: int, steps: int, seed: int):
    "Real rewards and a world model whose error is deterministic and non-monotone (a blind spot on some rows)."
    rng = np.random.default_rng(seed)
    for step in range(steps):
        keys = [f"s{step}:g{i}" for i in range(n_groups)]
        real = rng.choice([0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0], size=n_groups * group)
        blind = rng.uniform(size=len(real)) < 0.3
        predicted = np.where(blind, 1.0 - real, np.clip(real + 0.05, 0, 1))
        yield step, keys, np.repeat(keys, group), real, predicted


def every_draw(corrector, step, keys, ids, real, predicted, k):
    "weighted advantages of one step under every choice of k anchor groups (copies: the corrector does not move)."
    codes, _ = factorize_groups(ids)
    out = []
    for chosen in itertools.combinations(range(len(keys)), k):
        twin = copy.deepcopy(corrector)
        flags = twin.plan(keys, step, anchors=np.isin(np.arange(len(keys)), chosen))
        out.append(twin.correct(ids, predicted, np.where(flags[codes], real, np.nan)).weighted_advantages)
    return np.array(out)


def advance(corrector, step, keys, ids, real, predicted):
    codes, _ = factorize_groups(ids)
    flags = corrector.plan(keys, step)
    return corrector.correct(ids, predicted, np.where(flags[codes], real, np.nan))


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["ppi", "wmrl_ppi"]), st.integers(0, 10**6), st.sampled_from([0.125, 0.25, 0.5]),
       st.sampled_from(["group", "none"]), st.booleans())
def test_unbiased_over_the_anchor_draw_for_any_world_model(method, seed, fraction, scale, tuned):
    config = CorrectionConfig(method=method, anchor_fraction=fraction, scale=scale, ppi_tuned=tuned, **SMALL)
    corrector = WMRLCorrector(config)
    for step, keys, ids, real, predicted in stream(8, 4, 6, seed):
        codes, _ = factorize_groups(ids)
        k = int(corrector.plan(keys, step).sum())
        corrector._plan = None
        draws = every_draw(corrector, step, keys, ids, real, predicted, k)
        truth = advantages_from_codes(real, codes, len(keys), scale, config.eps, config.min_graded).advantages
        np.testing.assert_allclose(draws.mean(axis=0), truth, atol=1e-10)  # the mean over draws IS the real update
        advance(corrector, step, keys, ids, real, predicted)  # the debiaser and the tuner learn as in training


def test_the_paper_estimators_are_biased_on_the_same_stream():
    "The positive control of the test above: on the same blind-spot stream wmrl's mean update is not the real one."
    corrector = WMRLCorrector(CorrectionConfig(method="wmrl", anchor_fraction=0.125, **SMALL))
    gaps = []
    for step, keys, ids, real, predicted in stream(8, 4, 6, seed=3):
        codes, _ = factorize_groups(ids)
        draws = every_draw(corrector, step, keys, ids, real, predicted, 1)
        truth = advantages_from_codes(real, codes, len(keys)).advantages
        gaps.append(np.abs(draws.mean(axis=0) - truth).max())
        advance(corrector, step, keys, ids, real, predicted)
    assert min(gaps) > 0.1


def test_lambda_zero_is_anchors_only_scaled_by_m_over_k_and_lambda_one_is_plain_ppi():
    zero = WMRLCorrector(CorrectionConfig(method="ppi", ppi_lambda=0.0, ppi_tuned=False, anchor_fraction=0.25))
    only = WMRLCorrector(CorrectionConfig(method="anchors_only", anchor_fraction=0.25))
    one = WMRLCorrector(CorrectionConfig(method="ppi", ppi_lambda=1.0, ppi_tuned=False, anchor_fraction=0.25))
    for step, keys, ids, real, predicted in stream(8, 4, 3, seed=5):
        a, b, c = (advance(x, step, keys, ids, real, predicted) for x in (zero, only, one))
        np.testing.assert_allclose(a.weighted_advantages, 4.0 * b.weighted_advantages, atol=1e-12)  # M/k = 8/2
        codes, _ = factorize_groups(ids)
        hat = advantages_from_codes(predicted, codes, 8).advantages
        true = advantages_from_codes(np.where(c.anchor_rows, real, np.nan), codes, 8).advantages
        expected = np.where(c.anchor_rows, 4.0 * true - 3.0 * hat, hat)
        np.testing.assert_allclose(c.weighted_advantages, expected, atol=1e-12)
        assert c.stats["ppi_lambda"] == 1.0


def test_tuned_lambda_comes_from_past_steps_and_moves():
    corrector = WMRLCorrector(CorrectionConfig(method="ppi", anchor_fraction=0.25, **SMALL))
    lambdas = [advance(corrector, *args).stats["ppi_lambda"] for args in stream(8, 4, 8, seed=2)]
    assert lambdas[0] == 1.0  # no past anchors: the start value
    assert all(0.0 <= lam <= 1.0 for lam in lambdas) and len(set(lambdas[1:])) > 1


def test_power_tuner_matches_the_ppi_plus_plus_formula():
    "ppi_lambda is Cov(Y, Ŷ)/((1 + n/N) Var(Ŷ ∪ Ŷ_unlabelled)), clipped to [0, 1] (ppi-python's mean estimator)."
    rng = np.random.default_rng(0)
    y_hat, pool = rng.normal(size=30), rng.normal(size=300)
    y = 0.4 * y_hat + 0.2 * rng.normal(size=30)
    covariance = np.mean((y - y.mean()) * (y_hat - y_hat.mean()))
    variance = np.var(np.concatenate([y_hat, pool]), ddof=1)
    assert ppi_lambda(y, y_hat, pool) == pytest.approx(covariance / ((1 + 30 / 300) * variance))
    tuner = PowerTuner(window=16)
    tuner.observe(y, y_hat)
    assert len(tuner.real) == 16  # the window keeps the most recent rows only
    assert tuner.value() == pytest.approx(design_lambda(y[-16:], y_hat[-16:]))


def test_a_perfect_world_model_gives_the_exact_gradient_on_every_draw_once_tuned():
    "design_lambda -> 1 for a perfect prediction, so every draw trains on the real advantages (PPI++'s shrink would not)."
    corrector = WMRLCorrector(CorrectionConfig(method="ppi", anchor_fraction=0.25, **SMALL))
    for step, keys, ids, real, _ in stream(8, 4, 4, seed=4):
        codes, _ = factorize_groups(ids)
        truth = advantages_from_codes(real, codes, 8).advantages
        draws = every_draw(corrector, step, keys, ids, real, real, 2)
        np.testing.assert_allclose(draws, np.broadcast_to(truth, draws.shape), atol=1e-9)
        advance(corrector, step, keys, ids, real, real)


def test_ppi_python_agrees_when_installed():
    ppi_py = pytest.importorskip("ppi_py", reason="ppi-python is not installed (pip install ppi-python runs this check)")
    rng = np.random.default_rng(1)
    y_hat, pool = rng.normal(size=50), rng.normal(size=400)
    y = 0.7 * y_hat + 0.3 * rng.normal(size=50)
    lam = ppi_lambda(y, y_hat, pool)
    ours = lam * pool.mean() + (y - lam * y_hat).mean()
    assert float(np.ravel(ppi_py.ppi_mean_pointestimate(y, y_hat, pool))[0]) == pytest.approx(ours, rel=1e-9)


@pytest.mark.parametrize("method", ["ppi", "wmrl_ppi"])
def test_resume_and_a_second_rank_compute_the_same_steps(method):
    config = CorrectionConfig(method=method, anchor_fraction=0.25, **SMALL)
    first, rank_two = WMRLCorrector(config), WMRLCorrector(config)
    resumed = None
    for step, keys, ids, real, predicted in stream(8, 4, 12, seed=9):
        expected = advance(first, step, keys, ids, real, predicted)
        np.testing.assert_array_equal(advance(rank_two, step, keys, ids, real, predicted).weighted_advantages,
                                      expected.weighted_advantages)
        if step == 6:
            resumed = WMRLCorrector(config)
            resumed.load_state_dict(copy.deepcopy(first.state_dict()))
        elif resumed is not None:
            got = advance(resumed, step, keys, ids, real, predicted)
            np.testing.assert_array_equal(got.weighted_advantages, expected.weighted_advantages)
            assert got.stats["ppi_lambda"] == expected.stats["ppi_lambda"]


@pytest.mark.parametrize("method", ["ppi", "wmrl_ppi"])
def test_still_unbiased_when_executions_are_lost(method):
    "An anchor row whose execution failed (NaN) keeps its rectifier term, so the mean over draws stays the real update."
    config = CorrectionConfig(method=method, anchor_fraction=0.25, **SMALL)
    corrector = WMRLCorrector(config)
    for step, keys, ids, real, predicted in stream(8, 4, 5, seed=11):
        lost = real.copy()
        lost[np.random.default_rng(step).choice(len(lost), size=3, replace=False)] = np.nan  # infrastructure failures
        codes, _ = factorize_groups(ids)
        draws = every_draw(corrector, step, keys, ids, lost, predicted, 2)
        truth = advantages_from_codes(lost, codes, len(keys), config.scale, config.eps, config.min_graded).advantages
        np.testing.assert_allclose(draws.mean(axis=0), truth, atol=1e-10)
        advance(corrector, step, keys, ids, lost, predicted)


def test_configurations_that_would_bias_or_be_ignored_are_refused():
    with pytest.raises(ValueError, match="scale 'group' or 'none'"):
        CorrectionConfig(method="ppi", scale="batch")
    with pytest.raises(ValueError, match="min_anchor_groups"):
        CorrectionConfig(method="wmrl_ppi", min_anchor_groups=0)
    with pytest.raises(ValueError, match="s2_cap"):
        CorrectionConfig(method="ppi", s2_cap=float("inf"))
