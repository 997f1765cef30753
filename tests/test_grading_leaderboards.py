"""Leaderboard position on REAL board shapes: MLE-Dojo's 404 Kaggle boards (202 competitions x public/private).

The boards are read at test time from ../shared/data/mle-dojo (relative to the repository root); they are never
copied into the repository. Each board is checked against an independent brute-force implementation of
MLE-Dojo's rule, on ties, beyond the best and the worst entries, and for monotonicity (hypothesis).
"""
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl.execution.grading import leaderboard_position, position_score

DOJO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "mle-dojo"
if not (DOJO / "competitions").is_dir():
    pytest.skip(f"REAL LEADERBOARD TESTS SKIPPED: {DOJO} is absent (the shared MLE-Dojo data folder)",
                allow_module_level=True)

HIGHER = json.loads((DOJO / "higher_is_better.json").read_text())
BOARDS = {(name, which): pd.read_csv(DOJO / "competitions" / name / f"{which}_leaderboard.csv")
          for name in sorted(HIGHER) for which in ("public", "private")
          if (DOJO / "competitions" / name / f"{which}_leaderboard.csv").is_file()}
KEYS = sorted(BOARDS)


def brute_force_position(score: float, scores, higher_is_better: bool) -> float:
    """MLE-Dojo's rule written out literally: sort best first, walk down until the submission ties or beats an
    entry (1-based index p), else p = N + 1; position score (N - p + 1) / N."""
    board = [s for s in scores if not math.isnan(s)]
    board = sorted(board, reverse=higher_is_better)
    n = len(board)
    position = n + 1
    for index, entry in enumerate(board, start=1):
        ties_or_beats = score >= entry if higher_is_better else score <= entry
        if ties_or_beats:
            position = index
            break
    return (n - position + 1) / n


def _scores(key) -> np.ndarray:
    return BOARDS[key]["score"].to_numpy(dtype=float)


def test_all_boards_present_with_rank_score_columns():
    assert len(HIGHER) == 202
    assert len(BOARDS) == 404
    assert all(list(board.columns) == ["rank", "score"] for board in BOARDS.values())


def test_many_lower_is_better_boards_are_checked():
    lower = [key for key in KEYS if not HIGHER[key[0]]]
    assert len(lower) >= 100  # 82 competitions x 2 boards


def test_real_boards_are_sorted_best_first_in_their_direction():
    # The files list teams in Kaggle's final order; that order must agree with higher_is_better, otherwise
    # the direction we grade with would be wrong for that competition.
    disagree = []
    for key in KEYS:
        scores = _scores(key)
        scores = scores[~np.isnan(scores)]
        steps = np.diff(scores)
        if not (np.all(steps <= 0) if HIGHER[key[0]] else np.all(steps >= 0)):
            disagree.append(key)
    assert disagree == []


@pytest.mark.parametrize("key", KEYS, ids=[f"{n}:{w}" for n, w in KEYS])
def test_agrees_with_brute_force_on_every_entry_and_between(key):
    scores = _scores(key)
    higher = HIGHER[key[0]]
    board = np.sort(scores[~np.isnan(scores)])
    probes = np.unique(board)
    if len(probes) > 150:  # keep large boards quick: a spread of entries plus the extremes
        probes = probes[np.linspace(0, len(probes) - 1, 150).astype(int)]
    midpoints = (probes[1:] + probes[:-1]) / 2
    for score in [*probes, *midpoints]:
        assert leaderboard_position(score, scores, higher) == pytest.approx(
            brute_force_position(score, scores, higher), abs=1e-12), (key, score)


@pytest.mark.parametrize("key", KEYS, ids=[f"{n}:{w}" for n, w in KEYS])
def test_ties_beyond_best_and_worse_than_all(key):
    scores = _scores(key)
    higher = HIGHER[key[0]]
    n = int(np.sum(~np.isnan(scores)))
    best_first = scores[~np.isnan(scores)]  # the files are best first (checked above)
    span = abs(best_first[0] - best_first[-1]) + 1.0
    beyond_best = best_first[0] + span if higher else best_first[0] - span
    worse_than_all = best_first[-1] - span if higher else best_first[-1] + span
    assert leaderboard_position(beyond_best, scores, higher) == 1.0
    assert leaderboard_position(best_first[0], scores, higher) == 1.0  # tying the winner is winning
    assert leaderboard_position(worse_than_all, scores, higher) == 0.0
    # a score equal to an entry takes the place of the FIRST entry with that score (ties in its favour)
    for index in np.linspace(0, n - 1, 7).astype(int):
        value = best_first[index]
        first = int(np.argmax(best_first == value))  # 0-based index of the first entry with this score
        assert leaderboard_position(value, scores, higher) == pytest.approx((n - first) / n, abs=1e-12)


def test_boards_with_ties_are_present():
    tied = [key for key in KEYS if BOARDS[key]["score"].duplicated().any()]
    assert len(tied) > 100, "real boards should hold many tied scores"


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(KEYS), u=st.floats(0, 1), v=st.floats(0, 1))
def test_position_is_monotone_in_the_score(key, u, v):
    scores = _scores(key)
    higher = HIGHER[key[0]]
    lo, hi = np.nanmin(scores), np.nanmax(scores)
    pad = 0.1 * (hi - lo) + 1e-9
    a, b = sorted([lo - pad + u * (hi - lo + 2 * pad), lo - pad + v * (hi - lo + 2 * pad)])
    qa, qb = leaderboard_position(a, scores, higher), leaderboard_position(b, scores, higher)
    assert 0.0 <= qa <= 1.0 and 0.0 <= qb <= 1.0
    assert (qb >= qa) if higher else (qa >= qb)


def test_mle_dojo_worked_example_random_acts_of_pizza():
    # MLE-Dojo's own trajectory: AUC 0.6226 sits at position 198 of 462 on both boards -> 0.5736
    task = SimpleNamespace(higher_is_better=True,
                           public_leaderboard=lambda: _scores(("random-acts-of-pizza", "public")),
                           private_leaderboard=lambda: _scores(("random-acts-of-pizza", "private")))
    assert len(task.private_leaderboard()) == 462
    assert position_score(0.6226, task) == pytest.approx((462 - 198 + 1) / 462)
    assert round(position_score(0.6226, task), 4) == 0.5736


def test_position_score_averages_two_different_boards():
    name = "afsis-soil-properties"  # lower is better
    public, private = _scores((name, "public")), _scores((name, "private"))
    task = SimpleNamespace(higher_is_better=False, public_leaderboard=lambda: public, private_leaderboard=lambda: private)
    score = float(np.median(private))
    expected = (brute_force_position(score, public, False) + brute_force_position(score, private, False)) / 2
    assert position_score(score, task) == pytest.approx(expected)


def test_nan_entries_are_ignored_and_bad_input_is_rejected():
    scores = _scores(("GiveMeSomeCredit", "private"))
    with_nan = np.concatenate([scores[:10], [np.nan, np.nan], scores[10:]])
    for probe in scores[::97]:
        assert leaderboard_position(probe, with_nan, True) == leaderboard_position(probe, scores, True)
    with pytest.raises(ValueError, match="no scores"):
        leaderboard_position(0.8, [np.nan, np.nan], True)
    with pytest.raises(ValueError, match="must be a number"):
        leaderboard_position(float("nan"), scores, True)
    assert leaderboard_position(float("inf"), scores, True) == 1.0
    assert leaderboard_position(float("-inf"), scores, True) == 0.0


def test_direction_must_be_a_real_bool():
    scores = _scores(("GiveMeSomeCredit", "private"))
    with pytest.raises(TypeError, match="must be a bool"):
        leaderboard_position(0.8, scores, "False")
    assert leaderboard_position(0.8, scores, np.bool_(True)) == leaderboard_position(0.8, scores, True)
