"""Property tests for wmrl.core.denoise (Inverse-Variance Denoising): the disagreement, the paper's anchor weight and the
normalised inverse-variance fusion."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl.core.denoise import AnchorWeighter, ExponentialAverage, InverseVarianceFusion, group_disagreement

s2_values = st.one_of(st.floats(0.0, 50.0), st.just(math.nan))
s2_sequences = st.lists(s2_values, min_size=0, max_size=120)


@settings(max_examples=200, deadline=None)
@given(s2_sequences, st.integers(1, 40), st.floats(0.5, 200.0), st.floats(1.0, 4.0))
def test_weight_in_range_and_exactly_one_before_warmup(sequence, warmup, half_life, target):
    weighter = AnchorWeighter(half_life=half_life, warmup=warmup, w_max=4.0, target_weight=target)
    seen = 0
    for value in sequence:
        weight = weighter.observe(value)
        seen += not math.isnan(value)
        assert weighter.n == seen  # NaN is not counted
        assert 1.0 <= weight <= 4.0
        if seen < warmup:
            assert weight == 1.0 and weighter.c is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(1e-3, 10.0), min_size=1, max_size=80), st.integers(1, 30), st.floats(1.0, 4.0))
def test_c_fixed_once_at_warmup_then_frozen(sequence, warmup, target):
    weighter = AnchorWeighter(half_life=16, warmup=warmup, target_weight=target)
    frozen = None
    for i, value in enumerate(sequence):
        weight = weighter.observe(value)
        if i + 1 == warmup:  # the moment of calibration: weight equals the target
            assert weight == pytest.approx(target)
            assert weighter.c == pytest.approx((target - 1.0) / weighter.ema)
            frozen = weighter.c
        elif i + 1 > warmup:
            assert weighter.c == frozen
            assert weight == pytest.approx(min(4.0, max(1.0, 1.0 + frozen * weighter.ema)))


def test_weight_rises_with_disagreement_and_ema_formula():
    weighter = AnchorWeighter(half_life=4, warmup=3, scale="official")  # the release's EMA: first value initialises
    for value in (0.2, 0.2, 0.2):
        weighter.observe(value)
    assert weighter.weight() == pytest.approx(2.0)
    alpha = 1 - 0.5 ** (1 / 4)
    weighter.observe(0.6)
    assert weighter.ema == pytest.approx((1 - alpha) * 0.2 + alpha * 0.6)
    assert weighter.weight() > 2.0
    for _ in range(200):
        weighter.observe(0.0)
    assert weighter.weight() == pytest.approx(1.0, abs=1e-6)


def test_zero_disagreement_at_warmup_defers_calibration():
    weighter = AnchorWeighter(half_life=2, warmup=2)
    weighter.observe([0.0, 0.0, 0.0])
    assert weighter.c is None and weighter.weight() == 1.0
    weighter.observe(0.5)
    assert weighter.c is not None and weighter.weight() == pytest.approx(2.0)


@settings(max_examples=100, deadline=None)
@given(s2_sequences, s2_sequences)
def test_weighter_state_round_trip(before, after):
    weighter = AnchorWeighter(half_life=8, warmup=5)
    weighter.observe(before)
    restored = AnchorWeighter()
    restored.load_state_dict(json.loads(json.dumps(weighter.state_dict())))
    assert restored.weight() == weighter.weight() and restored.n == weighter.n and restored.c == weighter.c
    assert restored.observe(after) == weighter.observe(after)
    assert restored.state_dict() == weighter.state_dict()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=200), st.lists(st.floats(0.0, 5.0), min_size=8, max_size=40))
def test_fusion_weights_mean_one_and_ratio(is_anchor, sequence):
    fusion = InverseVarianceFusion(half_life=16, warmup=8)
    is_anchor = np.array(is_anchor)
    np.testing.assert_array_equal(fusion.row_weights(is_anchor), np.ones(len(is_anchor)))  # before warm-up
    fusion.observe(sequence)
    ratio = fusion.anchor_ratio
    assert ratio == pytest.approx(1.0 + fusion.ema)
    weights = fusion.row_weights(is_anchor)
    assert weights.mean() == pytest.approx(1.0)
    if is_anchor.any() and (~is_anchor).any():
        assert weights[is_anchor][0] / weights[~is_anchor][0] == pytest.approx(ratio)
    assert len(np.unique(weights[is_anchor])) <= 1 and len(np.unique(weights[~is_anchor])) <= 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.booleans(), min_size=2, max_size=100), st.data())
def test_fusion_mask_gives_zero_outside_and_mean_one_inside(is_anchor, data):
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=len(is_anchor), max_size=len(is_anchor))))
    fusion = InverseVarianceFusion(warmup=1)
    fusion.observe(2.0)
    weights = fusion.row_weights(is_anchor, mask=mask)
    assert np.all(weights[~mask] == 0)
    if mask.any():
        assert weights[mask].mean() == pytest.approx(1.0)


def test_fusion_moment_estimate_matches_theory():
    rng = np.random.default_rng(0)
    noise = 0.2
    centred = InverseVarianceFusion(half_life=300, warmup=10, scale="none")
    standardised = InverseVarianceFusion(half_life=300, warmup=10, scale="group")
    for _ in range(4000):
        real = rng.uniform(size=16)
        calibrated = real + rng.normal(0, noise, 16)  # additive noise, no shrinkage
        centred.observe_group(calibrated, real)
        standardised.observe_group(calibrated, real)
    s2 = noise**2 / (1 / 12)  # var(e) / var(uniform)
    assert centred.anchor_ratio == pytest.approx(1 + s2, rel=0.05)  # the textbook ratio
    assert standardised.anchor_ratio == pytest.approx(math.sqrt(1 + s2), rel=0.05)  # attenuation: 1/ρ
    assert centred.variance_ratio == pytest.approx(1 + s2, rel=0.05)


def test_fusion_caps_ratio_for_useless_world_model():
    rng = np.random.default_rng(1)
    fusion = InverseVarianceFusion(warmup=5, max_ratio=20.0)
    for _ in range(50):
        real = rng.uniform(size=8)
        fusion.observe_group(1.0 - real, real)  # anti-correlated WM
    assert fusion.anchor_ratio == 20.0


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 60), st.sampled_from(["group", "none"]))
def test_fusion_state_round_trip(seed, n_groups, scale):
    rng = np.random.default_rng(seed)
    fusion = InverseVarianceFusion(half_life=8, warmup=5, scale=scale)
    for _ in range(n_groups):
        real = rng.uniform(size=8)
        fusion.observe_group(np.clip(real + rng.normal(0, 0.3, 8), 0, 1), real)
    restored = InverseVarianceFusion()
    restored.load_state_dict(json.loads(json.dumps(fusion.state_dict())))
    mask = rng.uniform(size=50) < 0.2
    np.testing.assert_array_equal(restored.row_weights(mask), fusion.row_weights(mask))
    real = rng.uniform(size=8)
    assert restored.observe_group(real**2, real) == fusion.observe_group(real**2, real)
    assert restored.anchor_ratio == fusion.anchor_ratio and restored.n == fusion.n


def test_degenerate_groups_are_not_pushed():
    weighter, fusion = AnchorWeighter(warmup=1), InverseVarianceFusion(warmup=1)
    s2 = group_disagreement([0.1, 0.9, 0.4], [0.5, 0.5, 0.5])
    assert math.isnan(s2)
    weighter.observe(s2)
    assert weighter.n == 0 and weighter.weight() == 1.0
    assert math.isnan(fusion.observe_group([0.1, 0.9, 0.4], [0.5, 0.5, 0.5]))
    assert fusion.n == 0 and fusion.anchor_ratio == 1.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=2, max_size=16), st.floats(-1, 1),
       st.floats(0.1, 10))
def test_disagreement_invariances(rows, offset, scale):
    d, s = np.array(rows).T
    value = group_disagreement(d, s)
    if np.var(s) < 1e-9:
        assert math.isnan(value)
        return
    assert value >= 0
    assert group_disagreement(d + offset, s) == pytest.approx(value, rel=1e-9, abs=1e-9)  # offset-blind (s² can be ~1e7)
    if np.var(scale * s) >= 1e-9:
        assert group_disagreement(scale * d, scale * s) == pytest.approx(value, rel=1e-9, abs=1e-9)  # unit-free
    assert group_disagreement(s, s) == pytest.approx(0.0, abs=1e-12)


def test_disagreement_errors():
    with pytest.raises(ValueError, match="calibrated has 3"):
        group_disagreement([0.1, 0.2, 0.3], [0.1, 0.2])
    with pytest.raises(ValueError, match="at least 2"):
        group_disagreement([0.1], [0.1])
    with pytest.raises(ValueError, match="NaN"):
        group_disagreement([0.1, np.nan], [0.1, 0.2])
    with pytest.raises(ValueError, match="s2 must be"):
        AnchorWeighter().observe(-1.0)
    with pytest.raises(ValueError, match="s2 must be"):
        InverseVarianceFusion().observe(math.inf)
    with pytest.raises(ValueError, match="warmup"):
        AnchorWeighter(warmup=0)
    with pytest.raises(ValueError, match="half_life"):
        ExponentialAverage(-1)
    with pytest.raises(ValueError, match="booleans"):
        InverseVarianceFusion().row_weights([0.5, 1.0])
    with pytest.raises(ValueError, match="mask has"):
        InverseVarianceFusion().row_weights([True, False], mask=[True])
