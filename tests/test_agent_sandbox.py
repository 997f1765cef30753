"""Rendered programs of wmrl.autoresearch.agent run FOR REAL in the sandbox (wmrl.execution.sandbox.execute): clean programs write a
valid, graded submission; every planted mistake produces the status it declares; emergent failures happen where
they should; and a sample from the initial policy does what its planted mistakes say.

Besides the shipped iris task, three small tasks are written to a temporary folder from scikit-learn's bundled
real data sets, with a derived string column and some missing values so that encoding and imputation matter:
breast cancer (binary, ROC AUC), wine (multiclass labels, accuracy) and diabetes (regression, RMSE)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wmrl.autoresearch.agent import ProgramPolicy
from wmrl.autoresearch.programs import FAMILIES, MISTAKES, Program, planted_status, task_features, with_mistake
from wmrl.autoresearch.render import render
from wmrl.execution.limits import SandboxLimits
from wmrl.execution.sandbox import execute
from wmrl.execution.task_builder import write_task
from wmrl.execution.tasks import load_task

IRIS = Path(__file__).resolve().parent.parent / "toy" / "tasks" / "iris"
LIMITS = SandboxLimits.from_settings(wall_s=12)  # short, so that too_slow costs 12 s, not the task's 60
WORKERS = 2


def _frame_with_strings(data, target_values, target_name: str, seed: int) -> pd.DataFrame:
    "Real features, plus a string column derived from the first feature and 5 % missing values in the second."
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(data.data[:, :6], columns=[f"f{j}" for j in range(6)])
    frame["size"] = pd.qcut(frame["f0"], 3, labels=["small", "medium", "large"]).astype(str)
    frame.loc[rng.random(len(frame)) < 0.05, "f1"] = np.nan
    frame.insert(0, "id", np.arange(1, len(frame) + 1))
    frame[target_name] = target_values
    return frame


def _write(out: Path, name: str, frame: pd.DataFrame, target: str, metric: str, hib: bool, category: str):
    from sklearn.model_selection import train_test_split
    train, test = train_test_split(frame, test_size=0.3, random_state=0)
    return write_task(out, name, train, test.drop(columns=target), test[["id", target]], f"# {name}\n", metric=metric,
                      higher_is_better=hib, category=category, id_column="id", target_columns=[target], seed=0)


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
    out = tmp_path_factory.mktemp("agent_tasks")
    cancer, wine, diabetes = load_breast_cancer(), load_wine(), load_diabetes()
    return {
        "iris": load_task(IRIS),
        "cancer": _write(out, "cancer", _frame_with_strings(cancer, cancer.target, "target", 0), "target", "roc_auc", True, "binary"),
        "wine": _write(out, "wine", _frame_with_strings(wine, wine.target, "cultivar", 1), "cultivar", "accuracy", True, "multiclass"),
        "diabetes": _write(out, "diabetes", _frame_with_strings(diabetes, diabetes.target, "progression", 2), "progression",
                           "rmse", False, "regression"),
    }


def _run_all(jobs: dict, tasks: dict) -> dict:
    "Execute {name: (task key, program)} in parallel; return {name: ExecutionRecord}."
    def one(item):
        name, (task_key, program) = item
        return name, execute(tasks[task_key], render(program, tasks[task_key]), limits=LIMITS)
    with ThreadPoolExecutor(WORKERS) as pool:
        return dict(pool.map(one, jobs.items()))


def _describe(record) -> str:
    return f"{record.status}: {record.message} | {record.stderr_tail[-300:]}"


def test_test_tasks_have_the_features_the_mistakes_need(tasks):
    assert task_features(tasks["iris"])[5] == 0  # no string features: unencoded strings cannot bite
    for key in ("cancer", "wine", "diabetes"):
        phi = task_features(tasks[key])
        assert phi[5] > 0 and phi[6] > 0, key     # a string column and missing values


def test_every_planted_mistake_produces_its_status_and_clean_programs_submit(tasks):
    jobs = {f"mistake:{name}": ("iris", with_mistake(name)) for name in MISTAKES if not MISTAKES[name].needs_string_features}
    jobs["harmless:unencoded_strings@iris"] = ("iris", with_mistake("unencoded_strings"))  # iris has no string column
    jobs["mistake:unencoded_strings@cancer"] = ("cancer", with_mistake("unencoded_strings", Program(prediction="probabilities")))
    for family in ("random_forest", "linear", "hist_gradient_boosting", "naive_bayes"):
        jobs[f"clean:{family}@iris"] = ("iris", Program(family=family))
    jobs["clean:extra_trees@cancer"] = ("cancer", Program(family="extra_trees", categorical="ordinal"))
    jobs["clean:knn@wine"] = ("wine", Program(family="knn", prediction="labels", categorical="drop"))
    jobs["clean:ridge@diabetes"] = ("diabetes", Program(family="ridge", prediction="labels", imputation="mean", scaling="minmax"))
    records = _run_all(jobs, tasks)
    for name, record in records.items():
        assert not record.infra_error, _describe(record)
        if name.startswith("mistake:"):
            mistake = MISTAKES[name.split(":")[1].split("@")[0]]
            assert record.status in mistake.statuses, f"{name}: {_describe(record)}"
        else:
            assert record.status == "ok", f"{name}: {_describe(record)}"
            assert 0.0 <= record.position <= 1.0 and record.reward >= 0.5
    assert "could not convert string to float" in records["mistake:unencoded_strings@cancer"].stderr_tail


def test_emergent_failures_happen_where_they_should(tasks):
    jobs = {
        "ridge_classifier_has_no_predict_proba": ("iris", Program(family="ridge")),
        "nan_reaches_logistic_regression": ("cancer", Program(family="linear", imputation="none")),
        "probabilities_on_a_regressor": ("diabetes", Program(family="random_forest", prediction="probabilities")),
        "probabilities_on_a_label_metric": ("wine", Program(family="random_forest", prediction="probabilities")),
        "nan_is_fine_for_hist_gradient_boosting": ("cancer", Program(family="hist_gradient_boosting", imputation="none")),
        "labels_on_a_probability_metric_are_valid_but_poor": ("iris", Program(family="tree", prediction="labels", capacity="large")),
    }
    records = _run_all(jobs, tasks)
    expected = {"ridge_classifier_has_no_predict_proba": ("runtime_error", "predict_proba"),
                "nan_reaches_logistic_regression": ("runtime_error", "NaN"),
                "probabilities_on_a_regressor": ("runtime_error", "predict_proba"),
                "probabilities_on_a_label_metric": ("invalid_submission", "integer class labels"),
                "nan_is_fine_for_hist_gradient_boosting": ("ok", ""),
                "labels_on_a_probability_metric_are_valid_but_poor": ("ok", "")}
    for name, (status, text) in expected.items():
        record = records[name]
        assert record.status == status, f"{name}: {_describe(record)}"
        assert text in record.message + record.stderr_tail, f"{name}: {_describe(record)}"
    good = _run_all({"proba": ("iris", Program(family="tree", capacity="large"))}, tasks)["proba"]
    assert records["labels_on_a_probability_metric_are_valid_but_poor"].position <= good.position


def _expected_for_sample(program: Program, string_features: bool) -> str:
    "planted_status, plus the one emergent failure iris can show (a ridge classifier has no predict_proba)."
    status = planted_status(program, string_features)
    if status == "ok" and program.family == "ridge" and program.prediction == "probabilities":
        return "runtime_error"
    return status


def test_a_sample_from_the_initial_policy_does_what_its_mistakes_say(tasks):
    policy = ProgramPolicy()
    phi = task_features(tasks["iris"])
    sample = policy.sample(phi, 12, np.random.default_rng(2026))
    assert any(p.mistakes() for p in sample) and any(not p.mistakes() for p in sample)
    records = _run_all({f"{i}": ("iris", p) for i, p in enumerate(sample)}, tasks)
    for i, program in enumerate(sample):
        record = records[f"{i}"]
        expected = _expected_for_sample(program, string_features=False)
        allowed = MISTAKES["too_slow"].statuses if expected == "timeout" else (expected,)
        assert record.status in allowed, f"{program.key()}: expected {expected}, got {_describe(record)}"


@pytest.mark.slow
@pytest.mark.parametrize("task_key", ["iris", "cancer", "wine", "diabetes"])
def test_every_family_runs_clean_on_every_task_kind(tasks, task_key):
    kind_prediction = {"iris": "probabilities", "cancer": "probabilities", "wine": "labels", "diabetes": "labels"}
    jobs = {}
    for family in FAMILIES:
        prediction = "labels" if family == "ridge" else kind_prediction[task_key]
        for categorical in ("onehot", "ordinal"):
            jobs[f"{family}/{categorical}"] = (task_key, Program(family=family, prediction=prediction, categorical=categorical))
    records = _run_all(jobs, tasks)
    for name, record in records.items():
        assert record.status == "ok", f"{task_key} {name}: {_describe(record)}"


@pytest.mark.slow
def test_too_slow_is_too_slow_for_every_family(tasks):
    jobs = {family: ("iris", with_mistake("too_slow", Program(family=family))) for family in FAMILIES}
    records = _run_all(jobs, tasks)
    for family, record in records.items():
        assert record.status in MISTAKES["too_slow"].statuses, f"{family}: {_describe(record)}"
