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


def test_the_lambda_training_uses_is_clipped_to_0_1_at_both_ends():
    """Through the correction step: a world model that scores every reward backwards has Cov(A, Â)/Var(Â) = −1 and one
    that halves every deviation from the group mean has 2; the λ a step trains with must be 0 and 1, not −1 and 2
    (λ < 0 would reward what the world model calls bad; λ > 1 over-trusts it, both with more variance than the ends)."""
    config = CorrectionConfig(method="ppi", anchor_fraction=0.25, scale="none", **SMALL)
    for world_model, clipped in ((lambda r: 1.0 - r, 0.0), (lambda r: 0.5 + (r - 0.5) / 2, 1.0)):
        corrector = WMRLCorrector(config)
        lambdas = [advance(corrector, step, keys, ids, real, world_model(real)).stats["ppi_lambda"]
                   for step, keys, ids, real, _ in stream(8, 4, 3, seed=6)]
        assert lambdas[0] == 1.0  # no past anchors yet: the start value
        # with scale="none", Â = −A (backwards) or Â = A/2 (halved) on every row, so Cov/Var is −1 or 2 before the clip
        assert lambdas[1:] == [clipped, clipped], (lambdas, clipped)


def test_lambda_on_a_fixed_stream_is_the_hand_derived_value_and_masked_rows_never_reach_the_tuner():
    """One step of three anchor groups and one world-model group (3 rows each, scale "none": A = r − mean of the
    group's graded rows, Â the same for the predictions), with a lost execution in g1 and a missing prediction in g2.
    Only rows graded both ways may reach the tuner; the next step's λ is Cov/Var of those 7 rows, computed here by
    hand, not by design_lambda."""
    nan = np.nan
    keys = ["g0", "g1", "g2", "g3"]
    ids = np.repeat(keys, 3)
    real = np.array([0.9, 0.3, 0.0, 0.2, 0.8, nan, 0.1, 0.4, 0.7, nan, nan, nan])
    predicted = np.array([0.7, 0.4, 0.1, 0.6, 0.0, 0.6, nan, 0.2, 0.8, 0.5, 0.5, 0.2])
    # g0: A = (0.5, −0.1, −0.4) about 0.4;        Â = (0.3, 0.0, −0.3) about 0.4
    # g1: A = (−0.3, 0.3, lost) about 0.5;        Â = (0.2, −0.4, 0.2) about 0.4  -> its third row is masked
    # g2: A = (−0.3, 0.0, 0.3) about 0.4;         Â = (none, −0.3, 0.3) about 0.5 -> its first row is masked
    pairs = [(0.5, 0.3), (-0.1, 0.0), (-0.4, -0.3), (-0.3, 0.2), (0.3, -0.4), (0.0, -0.3), (0.3, 0.3)]
    n = len(pairs)
    sum_a, sum_h = sum(a for a, _ in pairs), sum(h for _, h in pairs)  # 0.3 and −0.2
    sum_ah, sum_hh = sum(a * h for a, h in pairs), sum(h * h for _, h in pairs)  # 0.18 and 0.56
    by_formula = (sum_ah / n - sum_a * sum_h / n**2) / (sum_hh / n - (sum_h / n) ** 2)
    by_hand = (1.32 / 49) / (3.88 / 49)  # Cov = 0.18/7 + 0.06/49 = 1.32/49, Var = 0.56/7 − 0.04/49 = 3.88/49: 33/97
    assert by_formula == pytest.approx(by_hand, abs=1e-12) and by_hand == pytest.approx(33 / 97, abs=1e-12)

    corrector = WMRLCorrector(CorrectionConfig(method="ppi", scale="none", ppi_lambda=1.0))
    corrector.plan(keys, 0, anchors=[True, True, True, False])
    first = corrector.correct(ids, predicted, real)
    assert first.stats["ppi_lambda"] == 1.0  # nothing observed before step 0: the start value
    observed = np.c_[corrector.tuner.real, corrector.tuner.hat]
    corrector.plan(keys, 1, anchors=[True, False, False, False])
    second = corrector.correct(ids, predicted, np.where(ids == "g0", real, nan))
    assert second.stats["ppi_lambda"] == pytest.approx(by_hand, abs=1e-12)  # the λ step 1 trains with
    np.testing.assert_allclose(observed, pairs, atol=1e-12)  # exactly the 7 rows graded both ways, in row order
