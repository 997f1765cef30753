"""Metrics against hand-computed values, the reward ladder, submission validation and grading of files,
DSBench's RPG and category rules, and the paper's category average."""
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmrl.execution.grading import (
    METRICS,
    STATUSES,
    GradeResult,
    InvalidSubmission,
    category_average,
    dsbench_category,
    get_metric,
    grade_submission_file,
    ladder_reward,
    relative_performance_gap,
    validate_submission,
)
from wmrl.execution.task_builder import write_task
from wmrl.execution.tasks import load_task

IRIS = Path(__file__).resolve().parent.parent / "toy" / "tasks" / "iris"


# ---------------------------------------------------------------- ladder

def test_ladder_values():
    expected = {"syntax_error": 0.0, "runtime_error": 0.1, "timeout": 0.1, "memory": 0.1,
                "no_submission": 0.2, "invalid_submission": 0.2}
    assert set(STATUSES) == set(expected) | {"ok"}
    for status, reward in expected.items():
        assert ladder_reward(status) == reward
        assert ladder_reward(status, 0.7) == reward  # position is ignored for failures
    assert ladder_reward("ok", 0.0) == 0.5
    assert ladder_reward("ok", 1.0) == 1.0
    assert ladder_reward("ok", 0.25) == pytest.approx(0.625)


@pytest.mark.parametrize("bad", [None, -0.01, 1.01, float("nan"), float("inf")])
def test_ladder_ok_needs_a_position_in_unit_interval(bad):
    with pytest.raises(ValueError):
        ladder_reward("ok", bad)


def test_ladder_unknown_status():
    with pytest.raises(ValueError, match="unknown status 'success'"):
        ladder_reward("success")


@given(st.floats(0, 1))
def test_any_ok_beats_every_failure(q):
    assert ladder_reward("ok", q) > max(ladder_reward(s) for s in STATUSES if s != "ok")


# ---------------------------------------------------------------- metrics, by hand

def test_value_metrics_by_hand():
    y, p = np.array([3.0, 0.0, 2.0, 7.0]), np.array([2.5, 0.0, 2.0, 8.0])
    assert METRICS["mse"](y, p) == pytest.approx((0.25 + 0 + 0 + 1) / 4)
    assert METRICS["rmse"](y, p) == pytest.approx(math.sqrt(1.25 / 4))
    assert METRICS["mae"](y, p) == pytest.approx(1.5 / 4)
    assert METRICS["median_ae"](y, p) == pytest.approx(0.25)
    ss_res, ss_tot = 1.25, np.sum((y - y.mean()) ** 2)
    assert METRICS["r2"](y, p) == pytest.approx(1 - ss_res / ss_tot)
    rmsle = math.sqrt(np.mean((np.log1p(p) - np.log1p(y)) ** 2))
    assert METRICS["rmsle"](y, p) == pytest.approx(rmsle)
    # smape: 0/0 counts 0; |2.5-3|*2/5.5, 0, 0, 2/15
    assert METRICS["smape"](y, p) == pytest.approx(100 * (1 / 5.5 + 2 / 15) / 4)


def test_multi_column_values_average_over_columns():
    y = np.array([[1.0, 10.0], [2.0, 20.0]])
    p = np.array([[1.0, 12.0], [4.0, 20.0]])
    assert METRICS["mae"](y, p) == pytest.approx((1.0 + 1.0) / 2)


def test_label_metrics_by_hand():
    y, p = [0, 1, 2, 2, 1], [0, 2, 2, 2, 1]
    assert METRICS["accuracy"](y, p) == pytest.approx(0.8)
    # per-class recall: 1, 1/2, 1 -> balanced accuracy 5/6
    assert METRICS["balanced_accuracy"](y, p) == pytest.approx(5 / 6)
    # per-class F1: class0 1, class1 P=1 R=.5 -> 2/3, class2 P=2/3 R=1 -> 0.8
    assert METRICS["f1_macro"](y, p) == pytest.approx((1 + 2 / 3 + 0.8) / 3)
    assert METRICS["quadratic_weighted_kappa"]([0, 1, 2], [0, 1, 2]) == pytest.approx(1.0)
    # QWK by hand, confusion [[1,1],[0,2]]: weighted observed disagreement 1; expected counts from the margins
    # rows (2,2) x cols (1,3) / 4 = [[.5,1.5],[.5,1.5]], weighted expected disagreement 1.5 + .5 = 2 -> 1 - 1/2
    assert METRICS["quadratic_weighted_kappa"]([0, 0, 1, 1], [0, 1, 1, 1]) == pytest.approx(0.5)


def test_binary_probabilities_above_one_are_invalid(tmp_path):
    test = pd.DataFrame({"id": [1, 2, 3, 4], "x": [0.1, 0.2, 0.3, 0.4]})
    train = pd.DataFrame({"id": [10, 11], "x": [0.0, 1.0], "y": [0, 1]})
    answer = pd.DataFrame({"id": [1, 2, 3, 4], "y": [0, 1, 1, 0]})
    task = write_task(tmp_path, "bin", train, test, answer, "toy", "roc_auc", True, "binary", "id", ["y"],
                      leaderboard_scores={"public": [1.0, 0.5], "private": [1.0, 0.5]})
    ok = _grade(task, tmp_path, pd.DataFrame({"id": [1, 2, 3, 4], "y": [0.1, 0.9, 0.8, 0.3]}))
    assert (ok.status, ok.raw_score, ok.position) == ("ok", 1.0, 1.0)
    bad = _grade(task, tmp_path, pd.DataFrame({"id": [1, 2, 3, 4], "y": [0.1, 1.9, 0.8, 0.3]}))
    assert bad.status == "invalid_submission" and "[0, 1]" in bad.message


def test_probability_metrics_by_hand():
    y = np.array([1, 0, 1, 1])
    p = np.array([0.9, 0.2, 0.6, 0.4])
    expected = -np.mean(np.log([0.9, 0.8, 0.6, 0.4]))
    assert METRICS["log_loss"](y, p) == pytest.approx(expected)
    # AUC = share of (pos, neg) pairs ranked correctly: negatives {0.2}; positives 0.9, 0.6, 0.4 all above
    assert METRICS["roc_auc"](y, p) == pytest.approx(1.0)
    assert METRICS["roc_auc"]([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == pytest.approx(0.75)


def test_multiclass_log_loss_rescales_and_clips():
    answer = np.eye(3)[[0, 1, 2]]
    unnormalised = np.array([[2.0, 1.0, 1.0], [1.0, 2.0, 1.0], [1.0, 1.0, 2.0]])  # rows sum to 4
    assert METRICS["log_loss"](answer, unnormalised) == pytest.approx(-math.log(0.5))
    zero_on_truth = np.array([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    loss = METRICS["log_loss"](answer, zero_on_truth)
    assert loss == pytest.approx(-math.log(1e-15) / 3, rel=1e-6)  # finite: clipped, not infinite
    all_zero = np.zeros((3, 3))
    assert METRICS["log_loss"](answer, all_zero) == pytest.approx(math.log(3))  # an all-zero row counts as uniform


def test_every_metric_has_a_direction_and_a_kind():
    for name, metric in METRICS.items():
        assert metric.name == name
        assert metric.kind in ("label", "proba", "value")
        assert isinstance(metric.higher_is_better, bool)
    assert {"accuracy", "roc_auc", "log_loss", "rmse", "rmsle", "mae", "f1_macro", "quadratic_weighted_kappa",
            "r2"} <= set(METRICS)


def test_rmsle_rejects_negative_and_unknown_metric_is_named():
    with pytest.raises(ValueError, match="non-negative"):
        METRICS["rmsle"]([1.0, 2.0], [1.0, -0.5])
    with pytest.raises(ValueError, match="known metrics"):
        get_metric("kappa")


# ---------------------------------------------------------------- validation and grading of files

@pytest.fixture(scope="module")
def iris():
    return load_task(IRIS)


@pytest.fixture()
def sample(iris):
    return pd.read_csv(iris.sample_submission_path)


def _grade(iris, tmp_path, frame: pd.DataFrame) -> GradeResult:
    path = tmp_path / "submission.csv"
    frame.to_csv(path, index=False)
    return grade_submission_file(iris, path)


def test_valid_sample_submission_is_ok(iris, tmp_path, sample):
    result = _grade(iris, tmp_path, sample)
    assert result.status == "ok"
    assert result.raw_score == pytest.approx(math.log(3))
    assert result.reward == pytest.approx(0.5 + 0.5 * result.position)
    assert set(result.to_dict()) == {"status", "raw_score", "position", "reward", "message"}


def test_row_order_does_not_matter(iris, tmp_path, sample):
    answer = pd.read_csv(iris.answer_path)
    shuffled = answer.sample(frac=1.0, random_state=1)
    assert _grade(iris, tmp_path, shuffled).raw_score == _grade(iris, tmp_path, answer).raw_score


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.drop(columns=["setosa"]), "missing: ['setosa']"),
    (lambda s: s.assign(confidence=0.5), "unexpected: ['confidence']"),
    (lambda s: s.iloc[:-3], "has 57 rows but the test set has 60"),
    (lambda s: pd.concat([s, s.iloc[:2]]), "has 62 rows"),
    (lambda s: pd.concat([s.iloc[:-1], s.iloc[[0]]]), "duplicated ids"),
    (lambda s: s.assign(id=s["id"] + 10_000), "unknown ids: '10"),
    (lambda s: s.assign(setosa=np.where(np.arange(len(s)) < 4, np.nan, s["setosa"])), "'setosa' has 4 NaN"),
    (lambda s: s.assign(virginica=["x"] * len(s)), "'virginica' must be numeric; non-numeric values: 'x'"),
    (lambda s: s.assign(virginica=np.inf), "infinite"),
    (lambda s: s.assign(setosa=-0.1), "cannot be negative"),
])
def test_invalid_submissions_get_actionable_messages(iris, tmp_path, sample, edit, message):
    result = _grade(iris, tmp_path, edit(sample))
    assert result.status == "invalid_submission"
    assert result.reward == 0.2 and result.position is None and result.raw_score is None
    assert message in result.message, result.message
    with pytest.raises(InvalidSubmission, match="."):
        validate_submission(iris, edit(sample))


def test_unknown_ids_message_shows_a_few_and_the_count(iris, sample):
    with pytest.raises(InvalidSubmission) as info:
        validate_submission(iris, sample.assign(id=sample["id"] + 10_000))
    assert "(60 in all)" in str(info.value) and "..." in str(info.value)


def test_missing_unreadable_and_empty_files(iris, tmp_path):
    assert grade_submission_file(iris, tmp_path / "absent.csv").status == "no_submission"
    assert grade_submission_file(iris, tmp_path / "absent.csv").reward == 0.2
    (tmp_path / "empty.csv").write_text("")
    assert grade_submission_file(iris, tmp_path / "empty.csv").status == "invalid_submission"
    (tmp_path / "binary.csv").write_bytes(bytes(range(256)) * 10)
    assert grade_submission_file(iris, tmp_path / "binary.csv").status == "invalid_submission"
    (tmp_path / "ragged.csv").write_text("id,setosa\n1,0.2,0.3,0.4\n2\n")
    assert grade_submission_file(iris, tmp_path / "ragged.csv").status == "invalid_submission"
    (tmp_path / "folder.csv").mkdir()
    assert grade_submission_file(iris, tmp_path / "folder.csv").status == "no_submission"


def _label_task(tmp_path, answers, metric="accuracy"):
    "A tiny task with an integer label target and hand-made boards."
    test = pd.DataFrame({"id": [1, 2, 3, 4], "x": [0.1, 0.2, 0.3, 0.4]})
    train = pd.DataFrame({"id": [10, 11], "x": [0.0, 1.0], "y": [0, 1]})
    answer = pd.DataFrame({"id": [1, 2, 3, 4], "y": answers})
    return write_task(tmp_path, "labels", train, test, answer, "toy", metric, True, "binary", "id", ["y"],
                      leaderboard_scores={"public": [1.0, 0.75, 0.5], "private": [1.0, 0.75, 0.5, 0.25]})


def test_label_submissions_with_fractions_or_words_are_invalid(tmp_path):
    task = _label_task(tmp_path, [0, 1, 1, 0])
    sub = pd.DataFrame({"id": [1, 2, 3, 4], "y": [0, 1, 1, 1]})
    result = _grade(task, tmp_path, sub)
    assert (result.status, result.raw_score) == ("ok", 0.75)
    assert result.position == pytest.approx((2 / 3 + 3 / 4) / 2)  # ties 0.75 on both boards
    frac = _grade(task, tmp_path, sub.assign(y=[0, 1, 0.5, 1]))
    assert frac.status == "invalid_submission" and "integer class labels" in frac.message
    words = _grade(task, tmp_path, sub.assign(y=["no", "yes", "yes", "no"]))
    assert words.status == "invalid_submission" and "must be numeric" in words.message


def test_string_labels_are_compared_as_strings(tmp_path):
    test = pd.DataFrame({"id": ["a", "b", "c"], "x": [1.0, 2.0, 3.0]})
    train = pd.DataFrame({"id": ["t"], "x": [0.0], "y": ["cat"]})
    answer = pd.DataFrame({"id": ["a", "b", "c"], "y": ["cat", "dog", "dog"]})
    task = write_task(tmp_path, "pets", train, test, answer, "toy", "accuracy", True, "multiclass", "id", ["y"],
                      leaderboard_scores={"public": [1.0], "private": [1.0, 0.5]})
    result = _grade(task, tmp_path, pd.DataFrame({"id": ["c", "b", "a"], "y": ["dog", "cat", "cat"]}))
    assert result.raw_score == pytest.approx(2 / 3)


# ---------------------------------------------------------------- benchmark aggregates

def test_rpg_both_directions_and_missing():
    assert relative_performance_gap(0.9, baseline=0.5, ideal=1.0) == pytest.approx(0.8)
    assert relative_performance_gap(0.4, baseline=0.5, ideal=1.0) == 0.0
    assert relative_performance_gap(2.4, baseline=4.8, ideal=0.0) == pytest.approx(0.5)
    assert relative_performance_gap(6.0, baseline=4.8, ideal=0.0) == 0.0
    assert relative_performance_gap(None, 0.5, 1.0) == 0.0
    assert relative_performance_gap(float("nan"), 0.5, 1.0) == 0.0
    with pytest.raises(ValueError, match="undefined"):
        relative_performance_gap(0.5, 0.5, 0.5)
    with pytest.raises(ValueError, match="finite"):
        relative_performance_gap(0.5, float("nan"), 1.0)


@settings(max_examples=200)
@given(b=st.floats(-100, 100), g=st.floats(-100, 100), t=st.floats(-2, 2))
def test_rpg_is_the_fraction_of_the_gap_closed(b, g, t):
    if abs(g - b) < 1e-6:
        return
    p = b + t * (g - b)
    assert relative_performance_gap(p, b, g) == pytest.approx(max(0.0, t), abs=1e-6)


def test_category_average_paper_example():
    per_task = {**{f"tab{i}": 38.0 for i in range(5)}, **{f"txt{i}": 19.4 for i in range(4)},
                **{f"img{i}": 7.4 for i in range(5)}}
    categories = {name: {"tab": "tabular", "txt": "text", "img": "image"}[name[:3]] for name in per_task}
    per_category, mean = category_average(per_task, categories)
    assert per_category == pytest.approx({"tabular": 38.0, "text": 19.4, "image": 7.4})
    assert round(mean, 1) == 21.6
    assert round(float(np.mean(list(per_task.values()))), 1) == 21.8


def test_category_average_dsbench_example_and_errors():
    per_task = {"a": 21.9, "b": 11.8, "c": 25.8, "d": 8.8}
    per_category, mean = category_average(per_task, {"a": "BinCls", "b": "MultiCls", "c": "Regress", "d": "Other"})
    assert round(mean, 1) == 17.1
    with pytest.raises(ValueError, match="without a category: \\['b'\\]"):
        category_average(per_task, {"a": "x", "c": "y", "d": "z"})
    with pytest.raises(ValueError, match="finite"):
        category_average({"a": None}, {"a": "x"})
    with pytest.raises(ValueError, match="empty"):
        category_average({}, {})


@pytest.mark.parametrize("tags, category", [
    (["Area Under Receiver Operating Characteristic Curve"], "BinCls"),
    (["AUC"], "BinCls"),
    (["Root Mean Squared Error"], "Regress"),
    (["Mean Absolute Error"], "Regress"),
    (["Symmetric Mean Absolute Percentage Error (SMAPE)"], "Regress"),
    (["Normalized Gini"], "Regress"),
    (["Quadratic Weighted Kappa"], "MultiCls"),
    (["Categorization Accuracy"], "MultiCls"),  # e.g. titanic: binary but scored by accuracy
    (["Multiclass Loss", "Log Loss"], "MultiCls"),
    (["Mean F-Score"], "MultiCls"),
    (["MAP@3"], "Other"),
    (["Accuracy", "AUC"], "BinCls"),  # rules are checked in order: BinCls first
])
def test_dsbench_category_rules(tags, category):
    assert dsbench_category(tags) == category
