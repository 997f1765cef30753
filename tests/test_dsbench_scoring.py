"""wmrl.adapters.dsbench (and the scoring and config of wmrl.adapters.benchmark_run) without training: the task list
against MLE-Dojo's real boards, RPG properties (hypothesis), preparation round trips in a temp dir, and clear errors
for bad input."""
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl.adapters.benchmark_run import benchmark_config, compute_parts, latest_checkpoint, score_heldout
from wmrl.adapters.dsbench import (
    DSBENCH_TASKS,
    TINY_DSBENCH,
    build_tiny_dsbench,
    dsbench_categories,
    dsbench_metric,
    dsbench_scores,
    load_dsbench_task,
    prepare_dsbench,
    rpg_reference,
)
from wmrl.execution.grading import get_metric
from wmrl.execution.tasks import TaskError

REPO = Path(__file__).resolve().parents[1]
DOJO = REPO.parent / "shared" / "data" / "mle-dojo"


@pytest.mark.skipif(not DOJO.is_dir(), reason="needs ../shared/data/mle-dojo")
def test_every_task_has_real_boards_in_the_agreed_direction():
    directions = json.loads((DOJO / "higher_is_better.json").read_text())
    for name in DSBENCH_TASKS:
        board = pd.read_csv(DOJO / "competitions" / name / "private_leaderboard.csv")
        assert list(board.columns) == ["rank", "score"] and len(board) > 10, name
        if (metric := dsbench_metric(name)) is not None:
            assert directions[name] == get_metric(metric).higher_is_better, name


def test_categories_follow_the_metric_tag_rules():
    categories = dsbench_categories()
    assert categories["titanic"] == "MultiCls"          # accuracy: MultiCls even for a binary task
    assert categories["porto-seguro-safe-driver-prediction"] == "Regress"  # gini counts as Regress
    assert categories["tweet-sentiment-extraction"] == "Other"
    assert categories["santander-customer-satisfaction"] == "BinCls"
    with pytest.raises(ValueError, match="not DSBench"):
        dsbench_categories(["AI4Code"])
    with pytest.raises(ValueError, match="not a DSBench"):
        dsbench_metric("AI4Code")


REFS = {"titanic": {"baseline": 0.6, "ideal": 1.0}, "bike-sharing-demand": {"baseline": 4.8, "ideal": 0.0},
        "cat-in-the-dat": {"baseline": 0.5, "ideal": 1.0}, "tweet-sentiment-extraction": {"baseline": 0.1, "ideal": 1.0}}
score = st.one_of(st.none(), st.floats(-10, 10, allow_nan=False))


@settings(max_examples=60, deadline=None)
@given(st.fixed_dictionaries({t: st.lists(score, min_size=1, max_size=6) for t in REFS}))
def test_rpg_bounds_and_category_mean(raw):
    result = dsbench_scores(raw, REFS)
    for task, value in result["per_task"].items():
        assert 0.0 <= value <= 100.0 * max(1.0, max(((v or 0) - REFS[task]["baseline"]) /
                                                   (REFS[task]["ideal"] - REFS[task]["baseline"]) for v in raw[task]))
    assert math.isclose(result["average"], sum(result["per_category"].values()) / len(result["per_category"]))
    assert len(result["per_category"]) == 4  # four tasks, one per category


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_rpg_is_monotone_in_the_score(a, b):
    low, high = sorted((a, b))
    refs = {"cat-in-the-dat": {"baseline": 0.5, "ideal": 1.0}}
    assert dsbench_scores({"cat-in-the-dat": [low]}, refs)["average"] <= dsbench_scores({"cat-in-the-dat": [high]}, refs)["average"]


def test_failures_count_zero_not_dropped():
    refs = {"cat-in-the-dat": {"baseline": 0.5, "ideal": 1.0}}
    assert dsbench_scores({"cat-in-the-dat": [1.0, None, float("nan"), 1.0]}, refs)["per_task"]["cat-in-the-dat"] == 50.0
    with pytest.raises(ValueError, match="RPG reference"):
        dsbench_scores({"titanic": [0.7]}, {})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    return root, build_tiny_dsbench(root)


def test_tiny_dsbench_round_trip(tiny, tmp_path):
    root, prepared = tiny
    tasks = {name: load_dsbench_task(prepared, name) for name in TINY_DSBENCH}
    assert {t.category for t in tasks.values()} == {"BinCls", "Regress"}
    for name, task in tasks.items():
        assert not (task.public_dir / "test_answer.csv").exists()  # answers stay private
        ref = rpg_reference(task)
        assert ref["ideal"] == (1.0 if TINY_DSBENCH[name][1] == "roc_auc" else 0.0)
    again = prepare_dsbench(root / "raw", tmp_path / "again", names=list(TINY_DSBENCH))
    assert [p.name for p in again] == list(TINY_DSBENCH)
    for folder in again:
        assert (folder / "data" / "private" / "test_answer.csv").is_file()


def test_a_custom_metric_task_gets_its_page_s_metric(tiny, tmp_path):
    "Tweet Sentiment Extraction is tagged 'Custom Metric'; its page's word Jaccard is written into wmrl.json."
    root, _ = tiny
    raw = tmp_path / "raw"
    for part in ("data_resplit", "answers"):
        (raw / part).mkdir(parents=True)
    (raw / "task").mkdir()
    import shutil
    shutil.copytree(root / "raw" / "data_resplit" / "tiny-dsbench-binary", raw / "data_resplit" / "tweet-sentiment-extraction")
    shutil.copytree(root / "raw" / "answers" / "tiny-dsbench-binary", raw / "answers" / "tweet-sentiment-extraction")
    (raw / "task" / "tweet-sentiment-extraction.txt").write_text("custom metric")
    prepare_dsbench(raw, tmp_path / "prepared", names=["tweet-sentiment-extraction"])
    assert json.loads((tmp_path / "prepared" / "tweet-sentiment-extraction" / "wmrl.json").read_text()) == {
        "category": "Other", "metric": "jaccard_words"}
    shutil.copytree(tmp_path / "prepared" / "tweet-sentiment-extraction", tmp_path / "prepared" / "not-dsbench")
    (tmp_path / "prepared" / "not-dsbench" / "wmrl.json").write_text("{}")
    with pytest.raises(TaskError, match="no kit metric"):  # a folder that is no DSBench task still needs one
        load_dsbench_task(tmp_path / "prepared", "not-dsbench")


def test_score_heldout_of_hand_made_records(tiny):
    _, prepared = tiny
    tasks = {name: load_dsbench_task(prepared, name) for name in TINY_DSBENCH}
    results = {"tiny-dsbench-binary": [{"status": "ok", "position": 0.5, "raw_score": 0.75, "wall_s": 1.0},
                                       {"status": "timeout", "position": None, "raw_score": None, "wall_s": 9.0}],
               "tiny-dsbench-regress": [{"status": "syntax_error", "position": None, "raw_score": None, "wall_s": 0.1}]}
    scored = score_heldout(results, tasks, "dsbench")
    assert scored["heldout"]["per_task"] == {"tiny-dsbench-binary": 25.0, "tiny-dsbench-regress": 0.0}
    assert scored["heldout"]["average"] == 12.5
    assert scored["rpg"]["per_task"]["tiny-dsbench-binary"] == 25.0  # (0.75-0.5)/(1-0.5) = 0.5, then half the runs fail
    assert scored["rpg"]["completion_rate"] == pytest.approx(1 / 3)
    mle = score_heldout({"tiny-dsbench-binary": results["tiny-dsbench-binary"]}, tasks, "mle-dojo")
    assert "rpg" not in mle and mle["heldout"]["per_category"] == {"BinCls": 25.0}


def test_config_and_compute_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown benchmark template parameters"):
        benchmark_config({"heldout": []})
    with pytest.raises(TypeError, match="overrides must be a list"):
        benchmark_config({"overrides": "trl.max_steps=3"})
    with pytest.raises(ValueError, match="unknown method"):
        benchmark_config({"method": "ppo"})
    with pytest.raises(ValueError, match="finite 'wall_s'"):
        compute_parts({"wall_s": float("nan"), "gpus": 1, "sandbox_s": 0.0})
    with pytest.raises(FileNotFoundError, match="no checkpoint-N"):
        latest_checkpoint(tmp_path)
    (tmp_path / "checkpoint-10").mkdir()
    (tmp_path / "checkpoint-9").mkdir()
    assert latest_checkpoint(tmp_path).name == "checkpoint-10"


def test_every_dsbench_task_has_a_kit_metric():
    "All 74 data-modeling tasks are gradable: the 18 that lacked a metric now map to wmrl.execution.metrics' ones."
    from wmrl.adapters.dsbench import TASK_METRICS
    assert {name: dsbench_metric(name) for name in DSBENCH_TASKS if dsbench_metric(name) is None} == {}
    assert set(TASK_METRICS) == {n for n, tag in DSBENCH_TASKS.items() if tag == "Custom Metric"}
    for name in DSBENCH_TASKS:
        get_metric(dsbench_metric(name))


@pytest.mark.parametrize("metric,answer,submission,expected", [
    ("map_at_3", ["Lyme", "Flu", "Cold"], ["Lyme Flu Cold", "Cold Lyme Flu", "Lyme Flu Zika"], (1 + 1 / 3 + 0) / 3),
    ("jaccard_words", ["a nice day", "sad"], ["nice day", "so sad"], (2 / 3 + 1 / 2) / 2),
    ("f1_micro", ["x", "y", "y"], ["x", "y", "x"], 2 / 3),
    ("normalized_gini", [1, 0, 1, 0], [0.9, 0.8, 0.3, 0.1], 0.5),
])
def test_new_metrics_score_through_the_grader(metric, answer, submission, expected):
    "score_frames (the grader's and the boards' path) reads string labels and texts for the new label metrics."
    from wmrl.execution.grading import score_frames
    ids = list(range(len(answer)))
    got = score_frames(metric, "id", ["target"], pd.DataFrame({"id": ids, "target": answer}),
                       pd.DataFrame({"id": ids[::-1], "target": submission[::-1]}))
    assert got == pytest.approx(expected)


def test_multi_column_metrics_score_through_the_grader():
    from wmrl.execution.grading import score_frames
    answer = pd.DataFrame({"id": [1, 2], "a": [1.0, 3.0], "b": [2.0, 4.0]})
    submission = pd.DataFrame({"id": [1, 2], "a": [2.0, 0.0], "b": [2.0, 4.0]})
    assert score_frames("mcrmse", "id", ["a", "b"], answer, submission) == pytest.approx(5 ** 0.5 / 2)


@pytest.mark.skipif(not DOJO.is_dir(), reason="needs ../shared/data/mle-dojo")
def test_msle_tagged_boards_are_on_the_rmsle_scale():
    "S3E11 and S4E4 are tagged MSLE, but a real RMSLE of 0.14-0.3 squares to 0.02-0.09: their boards are RMSLE."
    for name in ("playground-series-s4e4", "playground-series-s3e11"):
        best = pd.read_csv(DOJO / "competitions" / name / "private_leaderboard.csv")["score"].min()
        assert dsbench_metric(name) == "rmsle" and 0.1 < best < 0.5, (name, best)
