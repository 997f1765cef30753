"""Property tests for wmrl.core.advantages and a parity test against TRL 1.16's own advantage code path."""
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from wmrl.core.advantages import factorize_groups, group_advantages

REWARD = st.one_of(st.floats(0.0, 1.0, allow_nan=False), st.just(float("nan")))


@st.composite
def batches(draw, min_rows=1, max_rows=40):
    "Random (rewards, group_ids) with NaN rows and non-contiguous groups."
    n_rows = draw(st.integers(min_rows, max_rows))
    rewards = np.array(draw(st.lists(REWARD, min_size=n_rows, max_size=n_rows)))
    ids = np.array(draw(st.lists(st.integers(0, 5), min_size=n_rows, max_size=n_rows)))
    return rewards, ids


def _trl_advantages(rewards_2d, scale):
    """Literal transcription of TRL 1.16 `_generate_and_score_completions` (sum_then_normalize, one reward func),
    calling TRL's own `nanstd`. rewards_2d: (n_prompts, G) with NaN for unscorable rows."""
    import torch
    from trl.trainer.utils import nanstd

    num_generations = rewards_2d.shape[1]
    rewards = torch.tensor(rewards_2d.ravel(), dtype=torch.float64)
    mean_grouped_rewards = torch.nanmean(rewards.view(-1, num_generations), dim=1)
    mean_grouped_rewards = mean_grouped_rewards.repeat_interleave(num_generations, dim=0)
    if scale in ["group", "none"]:
        if num_generations > 1:
            std_rewards = nanstd(rewards.view(-1, num_generations), dim=1)
            std_rewards = std_rewards.repeat_interleave(num_generations, dim=0)
        else:
            std_rewards = torch.zeros_like(rewards)
    else:
        std_rewards = nanstd(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    advantages = rewards - mean_grouped_rewards
    if scale != "none":
        advantages = advantages / (std_rewards + 1e-4)
    return torch.nan_to_num(advantages, nan=0.0).numpy()


def test_trl_code_path_is_the_one_we_transcribed():
    "Fail loudly if TRL's source no longer contains the lines transcribed above."
    import inspect

    from trl import GRPOTrainer

    source = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    for line in ["std_rewards = nanstd(rewards.view(-1, num_generations), dim=1)",
                 "std_rewards = nanstd(rewards).expand_as(rewards)",
                 "advantages = advantages / (std_rewards + 1e-4)",
                 "advantages = torch.nan_to_num(advantages, nan=0.0)"]:
        assert line in source, line


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
@pytest.mark.parametrize("seed", range(20))
def test_matches_trl(scale, seed):
    rng = np.random.default_rng(seed)
    n_prompts, group_size = int(rng.integers(1, 9)), int(rng.integers(2, 9))
    rewards = rng.choice([0.0, 0.1, 0.2, 0.5, 0.75, 1.0], size=(n_prompts, group_size)) + rng.normal(
        scale=0.05 * (seed % 2), size=(n_prompts, group_size))
    rewards[rng.uniform(size=rewards.shape) < 0.2] = np.nan
    if seed % 5 == 0:
        rewards[0] = 0.3  # a degenerate group
    expected = _trl_advantages(rewards, scale)
    ids = np.repeat(np.arange(n_prompts), group_size)
    ours = group_advantages(rewards.ravel(), ids, scale=scale, min_graded=1)
    # TRL's nanstd computes the Bessel factor count/(count-1) in float32 (an int tensor divided), so even in float64
    # it agrees with the exact factor only to ~1e-8 relative; ddof 0 vs 1 would differ by ~1/(2n), i.e. percents.
    np.testing.assert_allclose(ours.advantages, expected, rtol=1e-6, atol=1e-7)
    # The default min_graded=2 only differs on groups with one graded row, whose TRL advantage is 0 anyway.
    np.testing.assert_allclose(group_advantages(rewards.ravel(), ids, scale=scale).advantages, expected, rtol=1e-6,
                               atol=1e-7)


@settings(max_examples=200, deadline=None)
@given(batches(), st.floats(0.1, 10.0), st.floats(-5.0, 5.0))
def test_positive_affine_map_leaves_group_advantages_unchanged(batch, a, b):
    rewards, ids = batch
    base = group_advantages(rewards, ids)
    mapped = group_advantages(a * rewards + b, ids)
    np.testing.assert_array_equal(mapped.mask, base.mask)
    # A = d/(σ+ε) and A' = a·d/(aσ+ε) = d/(σ+ε/a), so |A' − A| = |A|·ε·|1 − 1/a|/(σ + ε/a) <= √n·ε·|1 − 1/a|/σ
    # (|A| <= √n for a ddof-1 standardised group): only the eps effect, nothing else, may differ.
    codes, _ = factorize_groups(ids)
    graded = ~np.isnan(rewards)
    for code in np.unique(codes):
        rows = np.flatnonzero((codes == code) & graded)
        if len(rows) < 2:
            continue
        sigma = rewards[rows].std(ddof=1)
        if sigma == 0 or np.ptp(a * rewards[rows] + b) == 0:
            continue
        rounding = 1e-12 * (abs(b) + a + 1) / (a * sigma)  # float64 rounding of a*r+b, relative to the spread
        bound = np.sqrt(len(rows)) * (1e-4 * abs(1 - 1 / a) / sigma + rounding) + 1e-9
        assert np.all(np.abs(mapped.advantages[rows] - base.advantages[rows]) <= bound)


@settings(max_examples=200, deadline=None)
@given(batches(), st.sampled_from(["group", "batch", "none"]))
def test_advantages_sum_to_zero_per_group(batch, scale):
    rewards, ids = batch
    result = group_advantages(rewards, ids, scale=scale)
    codes, keys = factorize_groups(ids)
    sums = np.bincount(codes, weights=result.advantages, minlength=len(keys))
    np.testing.assert_allclose(sums, 0.0, atol=1e-6)
    assert not np.any(result.mask & np.isnan(rewards))
    assert np.all(result.advantages[~result.mask] == 0.0)


@settings(max_examples=200, deadline=None)
@given(batches(min_rows=2), st.data())
def test_ungraded_rows_never_affect_other_rows(batch, data):
    rewards, ids = batch
    ungraded = np.isnan(rewards)
    assume(ungraded.any())
    # Give the ungraded rows arbitrary new group keys: nothing graded may change.
    moved_ids = ids.copy()
    moved_ids[ungraded] = data.draw(st.lists(st.integers(0, 9), min_size=int(ungraded.sum()),
                                             max_size=int(ungraded.sum())))
    base = group_advantages(rewards, ids)
    moved = group_advantages(rewards, moved_ids)
    np.testing.assert_array_equal(moved.advantages, base.advantages)
    # Dropping the ungraded rows entirely gives the same advantages on the graded rows.
    dropped = group_advantages(rewards[~ungraded], ids[~ungraded]) if (~ungraded).any() else None
    if dropped is not None:
        np.testing.assert_allclose(dropped.advantages, base.advantages[~ungraded], atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(batches(), st.randoms(use_true_random=False), st.sampled_from(["group", "batch", "none"]))
def test_permuting_rows_permutes_output(batch, random, scale):
    rewards, ids = batch
    order = np.arange(len(rewards))
    random.shuffle(order)
    base = group_advantages(rewards, ids, scale=scale)
    permuted = group_advantages(rewards[order], ids[order], scale=scale)
    np.testing.assert_allclose(permuted.advantages, base.advantages[order], atol=1e-12)
    np.testing.assert_array_equal(permuted.mask, base.mask[order])
    assert permuted.n_degenerate_groups == base.n_degenerate_groups


def test_string_and_integer_keys_agree():
    rng = np.random.default_rng(0)
    rewards = rng.uniform(size=50)
    ids = rng.integers(0, 7, size=50)
    by_int = group_advantages(rewards, ids)
    by_str = group_advantages(rewards, [f"task-{i}" for i in ids])
    np.testing.assert_array_equal(by_int.advantages, by_str.advantages)


def test_errors():
    with pytest.raises(ValueError, match="empty"):
        group_advantages(np.array([]), [])
    with pytest.raises(ValueError, match="2 rows but group_ids has 3"):
        group_advantages([0.1, 0.2], ["a", "a", "b"])
    with pytest.raises(ValueError, match="inf"):
        group_advantages([0.1, np.inf], ["a", "a"])
    with pytest.raises(ValueError, match="unknown scale"):
        group_advantages([0.1, 0.2], ["a", "a"], scale="groups")
    with pytest.raises(ValueError, match="eps"):
        group_advantages([0.1, 0.2], ["a", "a"], eps=-1.0)
    with pytest.raises(TypeError, match="hashable"):
        group_advantages([0.1, 0.2], [["a"], ["a"]])
