"""Benchmark scoring and DSBench preparation: the paper's leaderboard-percentile convention (failures count 0,
mean within category, mean over categories) as hypothesis properties, DSBench categories from metric tags and
RPG, and prepare_dsbench_task keeping answers out of the public folder."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl.adapters.dsbench import dsbench_rpg
from wmrl.adapters.mledojo import PAPER_HELDOUT, build_mini_competition, leaderboard_percentile, prepare_dsbench_task

POSITIONS = st.lists(st.one_of(st.none(), st.floats(0, 1)), min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(PAPER_HELDOUT)), POSITIONS, min_size=1))
def test_percentile_is_mean_over_categories(runs):
    result = leaderboard_percentile(runs)
    for task, values in runs.items():
        expected = 100 * np.mean([0.0 if v is None else v for v in values])
        assert result["per_task"][task] == pytest.approx(expected)
    categories = {PAPER_HELDOUT[t] for t in runs}
    assert set(result["per_category"]) == categories
    for category in categories:
        members = [result["per_task"][t] for t in runs if PAPER_HELDOUT[t] == category]
        assert result["per_category"][category] == pytest.approx(np.mean(members))
    assert result["average"] == pytest.approx(np.mean(list(result["per_category"].values())))
    assert 0 <= result["average"] <= 100


def test_percentile_errors_and_dsbench_tags():
    with pytest.raises(ValueError, match="non-empty"):
        leaderboard_percentile({})
    with pytest.raises(ValueError, match="benchmark"):
        leaderboard_percentile({"GiveMeSomeCredit": [0.1]}, benchmark="kaggle")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        leaderboard_percentile({"GiveMeSomeCredit": [float("nan"), -0.1]})
    tags = {"titanic": ["Categorization Accuracy"], "bike": ["Root Mean Squared Logarithmic Error"],
            "credit": ["Area Under Receiver Operating Characteristic Curve"], "odd": ["Levenshtein"]}
    result = leaderboard_percentile({t: [0.5] for t in tags}, tags, benchmark="dsbench")
    assert set(result["per_category"]) == {"MultiCls", "Regress", "BinCls", "Other"}


def test_rpg_errors():
    with pytest.raises(ValueError, match="empty"):
        dsbench_rpg({}, {}, {})
    with pytest.raises(ValueError, match="ideal"):
        dsbench_rpg({}, {"a": 0.5}, {})
    with pytest.raises(ValueError, match="undefined"):
        dsbench_rpg({"a": 0.7}, {"a": 0.5}, {"a": 0.5})
    assert dsbench_rpg({"a": float("nan")}, {"a": 0.5}, {"a": 1.0})["rpg"] == 0.0


def test_prepare_dsbench_task_keeps_answers_private(tmp_path):
    source = build_mini_competition(tmp_path / "src") / "data"
    out = prepare_dsbench_task(source / "public", source / "private" / "test_answer.csv",
                               source / "public" / "description.txt", tmp_path / "ds", name="toy", seed=3)
    public = sorted(p.name for p in (out / "data" / "public").iterdir())
    assert public == ["description.txt", "sample_submission.csv", "test.csv", "train.csv"]
    answers = pd.read_csv(out / "data" / "private" / "test_answer.csv")
    sample = pd.read_csv(out / "data" / "public" / "sample_submission.csv")
    assert list(sample.columns) == list(answers.columns) and len(sample) == len(answers)
    assert (sample["id"] == answers["id"]).all() and sample["target"].nunique() == 1
    assert "target" not in pd.read_csv(out / "data" / "public" / "test.csv").columns
