"Fidelity report invariants on the stored real records (toy/solutions/*/records.json)."
import json
import math
from pathlib import Path

import numpy as np
import pytest

from wmrl.world_model.fidelity import (
    Case,
    check_table,
    cross_fitted_calibration,
    fidelity_report,
    load_cases,
    reliability,
    status_confusion,
    within_group_spearman,
)
from wmrl.world_model.static import StaticWorldModel
from wmrl.world_model.verdicts import Verdict, aggregate

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "toy/tasks/iris"
FOLDERS = [ROOT / "toy/solutions/iris", ROOT / "toy/solutions/iris_heldout"]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.name)
def test_records_match_the_solution_files(folder):
    records = json.loads((folder / "records.json").read_text())
    assert sorted(records) == sorted(p.stem for p in folder.glob("*.py"))
    for record in records.values():
        assert record["status"] in ("ok", "syntax_error", "runtime_error", "timeout", "memory", "no_submission", "invalid_submission")
        assert record["backend"] and not record.get("infra_error")


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.name)
def test_report_invariants(folder):
    cases = load_cases(folder)
    report = fidelity_report(cases, StaticWorldModel(), task=TASK)
    assert report.n_cases == len(cases)
    assert sum(sum(row.values()) for row in report.confusion.values()) == len(cases)
    for row in report.checks:
        assert row["tp"] + row["fp"] + row["fn"] + row["tn"] == sum(c.owner is not None for c in cases)
    assert 0 <= report.status_accuracy <= 1 and report.reward_mae >= 0
    json.dumps(report.to_dict())  # serialisable (NaN -> None)


def test_check_table_counts_each_real_failure_once():
    cases = [Case("a", "", {"status": "timeout", "reward": 0.1}), Case("b", "", {"status": "syntax_error", "reward": 0.0}),
             Case("c", "", {"status": "no_submission", "reward": 0.2})]
    predictions = [aggregate([Verdict("compute_budget", "fail", 0.9, "TimeoutError")]), aggregate([]),
                   aggregate([Verdict("compute_budget", "fail", 0.4, "TimeoutError")])]  # below tau: not a fail
    rows = {r["check"]: r for r in check_table(cases, predictions)}
    assert (rows["compute_budget"]["tp"], rows["compute_budget"]["fp"]) == (1, 0)
    assert (rows["submission"]["fn"], rows["submission"]["support"]) == (1, 1)
    assert sum(r["support"] for r in rows.values()) == 2  # the syntax error is owned by no check
    assert status_confusion(cases, predictions)["timeout"]["timeout"] == 1


def test_calibration_is_cross_fitted_and_monotone_per_fold():
    rng = np.random.default_rng(0)
    x = rng.uniform(size=200)
    y = np.clip(x ** 2 + rng.normal(0, 0.05, 200), 0, 1)
    calibrated = cross_fitted_calibration(x, y, folds=5)
    assert np.mean(np.abs(calibrated - y)) < np.mean(np.abs(x - y))
    with pytest.raises(ValueError, match="shapes differ"):
        cross_fitted_calibration([0.1, 0.2], [0.1])


def test_spearman_and_reliability_edge_cases():
    assert math.isnan(within_group_spearman([], [], []))
    assert within_group_spearman(["g"] * 3, [0.1, 0.2, 0.3], [0.2, 0.5, 0.9]) == pytest.approx(1.0)
    rows = reliability([0.0, 1.0, 0.999], [0.0, 1.0, 1.0], bins=4)
    assert [r[3] for r in rows] == [1, 2]
