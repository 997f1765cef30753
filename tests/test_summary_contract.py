"""The summary.json contract of issue 12 on a synthetic grid folder: world_model, paired contrasts with bootstrap CI
and t-test p, the equal-score headline and the ratio-vs-target sweep, NaN only with a `why_...` key beside it."""
import json
import math

import numpy as np
import pytest

from wmrl.autoresearch.summary import CONTRASTS, summarize

EQUAL_KEYS = ("target", "sandbox_ratio", "sandbox_ci_low", "sandbox_ci_high", "total_ratio", "total_ci_low",
              "total_ci_high")


def write_run(folder, method, seed, steps, costs, scores, world_model=None):
    evals = [{"steps_done": s, "heldout_percentile": x, "sandbox_cpu_s": c, "total_compute_s": 1.1 * c,
              "per_category": {}} for s, c, x in zip(steps, costs, scores)]
    history = [{"step": s, "grad_norm": 1.0 + 0.1 * s, "corr_n_anchor_groups": 1.0, "corr_anchor_weight": 1.0,
                "corr_s2_oos_step_mean": 0.5} for s in range(steps[-1])]
    totals = {k: 1.0 for k in ("sandbox_cpu_s", "wm_s", "update_s", "total_compute_s", "n_executions", "n_cache_hits",
                               "eval_sandbox_cpu_s")}
    metrics = {"config": {"method": method, "seed": seed, "world_model": world_model or {}}, "evals": evals,
               "history": history, "totals": totals, "final_heldout_percentile": scores[-1], "final_per_category": {}}
    (folder / f"{method}__seed{seed}").mkdir()
    (folder / f"{method}__seed{seed}" / "metrics.json").write_text(json.dumps(metrics))


def nan_has_reason(container: dict, where: str):
    for key, value in container.items():
        if isinstance(value, float) and math.isnan(value):
            assert any(k.startswith("why") for k in container), f"{where}.{key} is NaN without a why_ key"


@pytest.fixture
def grid(tmp_path):
    rng = np.random.default_rng(0)
    for seed in range(5):
        shared = rng.normal(0, 4.7)  # evaluation noise every method of a seed shares
        start = 20 + shared
        write_run(tmp_path, "grpo_real", seed, [0, 2, 4, 6, 8, 10], [0, 40, 80, 120, 160, 200],
                  [start + 3.5 * s + rng.normal(0, 1) for s in (0, 2, 4, 6, 8, 10)])
        write_run(tmp_path, "wmrl", seed, list(range(0, 21, 2)), [4 * s for s in range(0, 21, 2)],
                  [start + 2.2 * s + rng.normal(0, 1) for s in range(0, 21, 2)])
        for method, gain in (("mixed_uncorrected", 20), ("pure_wm", 15)):
            write_run(tmp_path, method, seed, [0, 10], [0, 40], [start, start + gain + rng.normal(0, 1.6)])
    return tmp_path


def test_summary_has_the_contract_keys_and_reasons_for_every_nan(grid):
    summary = json.loads(json.dumps(summarize(grid)))
    assert summary["world_model"] == {"name": "static"}
    assert summary["contrast_step"] == 10
    assert set(summary["contrasts"]) == set(CONTRASTS)
    for name, contrast in summary["contrasts"].items():
        assert {"mean", "ci_low", "ci_high", "p", "seeds"} <= set(contrast)
        nan_has_reason(contrast, name)
    measured = summary["contrasts"]["mixed_uncorrected-pure_wm"]
    assert measured["seeds"] == [0, 1, 2, 3, 4] and 0 < measured["ci_low"] < measured["ci_high"] and measured["p"] < 0.01
    assert abs(measured["mean"] - 5) < 3  # the true effect is 5 points
    assert "why_nan" in summary["contrasts"]["wmrl-anchors_only"]  # no anchors_only runs in this grid
    assert set(EQUAL_KEYS) <= set(summary["equal_score"])
    nan_has_reason(summary["equal_score"], "equal_score")
    headline = summary["equal_score"]
    assert headline["sandbox_ci_low"] <= headline["sandbox_ratio"] <= headline["sandbox_ci_high"]
    # grpo_real gains 35 points at 20 s a step; wmrl gains 2.2 a step at 2 s a step: ~10/2.2·35/... ≈ 3.2×
    assert 2.0 < headline["sandbox_ratio"] < 5.0
    assert len(summary["ratio_vs_target"]) == 11
    for row in summary["ratio_vs_target"]:
        assert set(EQUAL_KEYS) <= set(row)
        nan_has_reason(row, "ratio_vs_target")
    assert summary["methods"]["wmrl"]["anchor_groups_per_run"] == 20.0  # per-method keys stay, new ones added
    rising = summary["plateau"]["grpo_real"]  # 3.5 points a step: its final score is no plateau, and says so
    assert (rising["from_step"], rising["step"]) == (0, 10) and not rising["reached"] and "why_reached" in rising
    assert abs(rising["mean"] - 35) < 3 and rising["ci_low"] > 2
    assert set(summary["plateau"]) == set(summary["methods"])
    matched = summary["matched_steps"]  # the paper's protocol first: wmrl − grpo_real at every shared step
    assert [r["step"] for r in matched] == [2, 4, 6, 8, 10]
    assert all(r["mean"] < 0 and r["p_holm"] >= r["p"] for r in matched)  # 2.2 points a step against 3.5
    assert all(r["cost_ratio"] == pytest.approx(5.0) for r in matched)  # 20 s a step against 4: the ceiling
    assert all("p_holm" in c for c in summary["contrasts"].values())
    assert summary["plateau_comparison"]["windows"]["grpo_real"] == [[4, 6, 8, 10]]


def test_a_grid_mixing_world_models_is_refused(grid):
    write_run(grid, "debias_only", 0, [0, 10], [0, 40], [20, 40], world_model={"name": "static+monotone", "B": 0.2})
    with pytest.raises(ValueError, match="share a world model"):
        summarize(grid)


@pytest.mark.filterwarnings("ignore:Precision loss occurred")  # synthetic seeds whose differences are all alike
def test_the_decisive_report_pairs_update_norms_by_seed(grid, tmp_path_factory):
    "reproductions/bench/decisive_report.py on the synthetic grid: pure_wm's updates are about twice as large, seed by seed."
    import importlib.util
    from pathlib import Path
    for path in grid.glob("pure_wm__seed*/metrics.json"):
        metrics = json.loads(path.read_text())
        for row in metrics["history"]:
            row["grad_norm"] *= 2.0 + 0.05 * metrics["config"]["seed"]
        path.write_text(json.dumps(metrics))
    (grid / "summary.json").write_text(json.dumps(summarize(grid)))
    script = Path(__file__).resolve().parents[1] / "reproductions" / "bench" / "decisive_report.py"
    spec = importlib.util.spec_from_file_location("decisive_report", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path_factory.mktemp("report")
    assert module.main(["--grid", f"static={grid}", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())[0]
    update = report["contrasts"]["mixed_uncorrected-pure_wm"]["update_norm_mean"]
    assert update["seeds"] == [0, 1, 2, 3, 4] and update["ci_high"] < 0 < update["second"] - update["first"]
    assert abs(update["mean"] + 1.45 * 1.1) < 1e-9  # steps 0..9: mean norm 1.45, pure_wm's (2 + 0.05 seed)x as large
    assert "wmrl-anchors_only" not in report["contrasts"]  # a contrast the grid cannot form is left out, not zero
    summary = json.loads((grid / "summary.json").read_text())
    for method in ("grpo_real", "wmrl"):  # the plateau read from compact runs is summary.json's
        assert abs(report["plateau"][method]["mean"] - summary["plateau"][method]["mean"]) < 1e-3  # runs.json rounds to 0.001
    assert "grpo_real gained" in (out / "report.md").read_text() and "not a plateau" in (out / "report.md").read_text()
    assert (out / "contrasts.png").stat().st_size > 10_000 and "| static |" in (out / "report.md").read_text()
    with pytest.raises(SystemExit, match="NAME=DIR"):
        module.main(["--grid", "static"])
    # a method of one grid against another method (a control) of a grid on the same seeds: wmrl − pure_wm at step 10
    cross = module.against(grid, grid, 10, "wmrl", "pure_wm")
    assert list(cross) == ["wmrl − pure_wm"] and cross["wmrl − pure_wm"]["seeds"] == [0, 1, 2, 3, 4]
    assert 4 < cross["wmrl − pure_wm"]["mean"] < 10  # wmrl gains 22 by step 10, pure_wm 15
    assert module.main(["--grid", f"static={grid}", "--out", str(out), "--against", f"{grid}:wmrl={grid}:pure_wm"]) == 0
    assert json.loads((out / "against.json").read_text())[0]["contrasts"].keys() == {"wmrl − pure_wm"}
    with pytest.raises(SystemExit, match="needs anchors_only"):
        module.against(grid, grid, 10, "anchors_only", "pure_wm")
