"""Statistics produced by code: Holm's correction against statsmodels, the paired t-interval, and the matched-step
and plateau comparisons recomputed from the committed long grid (the numbers README.md and the results READMEs cite)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from wmrl.autoresearch.matched import curves_from_compact, matched_steps, plateau_comparison
from wmrl.core.paired import holm, paired_contrast, ratio_at_equal_score

RESULTS = Path(__file__).resolve().parents[1] / "reproductions" / "results"


def test_holm_matches_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    rng = np.random.default_rng(0)
    for _ in range(20):
        p = rng.uniform(0, 0.2, size=int(rng.integers(2, 9)))
        expected = multitest.multipletests(p, method="holm")[1]
        got = holm({str(i): v for i, v in enumerate(p)})
        np.testing.assert_allclose([got[str(i)] for i in range(len(p))], expected, rtol=1e-12)


def test_paired_t_interval_is_scipys():
    a = {s: v for s, v in enumerate([50.0, 52.0, 47.0, 55.0, 49.0, 51.0])}
    b = {s: v - 1.5 + 0.8 * (-1) ** s for s, v in a.items()}
    c = paired_contrast(a, b)
    d = np.array([a[s] - b[s] for s in a])
    low, high = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    assert (c["t_low"], c["t_high"]) == pytest.approx((low, high), rel=1e-12)


def committed_long():
    return curves_from_compact(json.loads((RESULTS / "autoresearch_long" / "runs.json").read_text()))


def test_matched_steps_on_the_committed_long_grid():
    "WMRL is below real-execution GRPO at every shared step (the review's numbers, now printed by code)."
    rows = {r["step"]: r for r in matched_steps(committed_long(), "wmrl", "grpo_real")}
    assert sorted(rows) == list(range(5, 55, 5))
    assert all(r["mean"] < 0 and r["t_high"] < 0 for r in rows.values())
    assert rows[10]["mean"] == pytest.approx(-6.33, abs=0.01) and rows[50]["mean"] == pytest.approx(-4.19, abs=0.01)
    assert (rows[50]["t_low"], rows[50]["t_high"]) == pytest.approx((-6.46, -1.92), abs=0.01)
    assert all(r["p_holm"] >= r["p"] for r in rows.values())
    assert all(5.0 < r["cost_ratio"] < 8.0 for r in rows.values())  # the ceiling: below 1/rho = 8


def test_plateau_comparison_on_the_committed_long_grid_is_not_resolved():
    gap = plateau_comparison(committed_long(), "wmrl", "grpo_real")
    assert gap["windows"] == {"wmrl": [[60, 65, 70, 75]], "grpo_real": [[35, 40, 45, 50]]}
    assert gap["mean"] == pytest.approx(-3.11, abs=0.01)
    assert gap["t_low"] < 0 < gap["t_high"] and gap["p"] > 0.05  # the hand-made bootstrap interval excluded 0


def test_windowed_target_is_not_reached_on_the_committed_long_grid():
    curves = committed_long()
    equal = ratio_at_equal_score(curves["grpo_real"], curves["wmrl"], 1.0, target_window=4)
    assert equal["target"] == pytest.approx(77.50, abs=0.01) and math.isnan(equal["ratio"])
    assert equal["share_not_reached"] > 0.9


def test_the_committed_oracle_report_is_what_its_command_prints(tmp_path):
    "reproductions/results/autoresearch_oracle/oracle.json regenerates from the curated oracle_runs.json beside it."
    import sys
    sys.path.insert(0, str(RESULTS.parent / "bench"))
    import gradient_oracle
    folder = RESULTS / "autoresearch_oracle"
    assert gradient_oracle.main([str(folder), "--out", str(tmp_path)]) == 0
    fresh, committed = (json.loads((p / "oracle.json").read_text()) for p in (tmp_path, folder))
    for method in ("grpo_real", "wmrl"):
        for name, estimators in committed[method].items():
            for estimator, measures in estimators.items():
                for key, entry in measures.items():
                    assert fresh[method][name][estimator][key]["mean"] == pytest.approx(entry["mean"], abs=1e-12, nan_ok=True)
    assert all(row["holds"] for row in fresh["known_answers"])  # the instruments' known answers, on real batches
    assert committed["same_as_full"]["max_abs_difference"] == 0.0  # the probed runs are the full grid's runs


def test_compare_json_finds_a_changed_number_and_skips_what_it_is_told(tmp_path, capsys):
    "bench/compare_json.py, which checks a fresh `make reproduce` against the committed reports."
    import sys
    sys.path.insert(0, str(RESULTS.parent / "bench"))
    import compare_json
    committed = {"a": {"cos": 0.61, "n": 8, "flag": True}, "probe_cpu_s": 10.0, "rows": [1.0, float("nan")]}
    same = {**committed, "probe_cpu_s": 12.5}
    paths = [tmp_path / name for name in ("committed.json", "same.json", "moved.json")]
    for path, data in zip(paths, (committed, same, {**same, "a": {"cos": 0.62, "n": 8, "flag": True}})):
        path.write_text(json.dumps(data))
    assert compare_json.main([str(paths[0]), str(paths[1]), "--ignore", "cpu_s"]) == 0
    assert compare_json.main([str(paths[0]), str(paths[1])]) == 1  # measured seconds differ unless skipped
    assert compare_json.main([str(paths[0]), str(paths[2]), "--ignore", "cpu_s"]) == 1
    assert compare_json.main([str(paths[0]), str(paths[2]), "--ignore", "cpu_s", "--abs", "0.02"]) == 0
    assert "/a/cos: 0.61 against 0.62" in capsys.readouterr().out
