"""The runner end to end through papermill on a tiny real grid: folders, config.json provenance, metrics, skip on
rerun, summary.json with every required key, and the CLI."""
import json
import math
from pathlib import Path

import pytest
import yaml

from wmrl.autoresearch.runner import cli_reproduce_autoresearch, expand_grid, run_grid
from wmrl.autoresearch.summary import summarize

REPO = Path(__file__).resolve().parents[1]
REQUIRED = {"heldout_percentile_mean", "heldout_percentile_std", "per_category", "sandbox_seconds", "wm_seconds",
            "update_seconds", "seeds"}


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    from wmrl.execution.suite import build_suite
    suite = tmp_path_factory.mktemp("suite")
    build_suite(suite, tasks=["breast_cancer"], progress=False)
    iris = str(REPO / "toy/tasks/iris")
    return {"name": "tiny", "methods": ["grpo_real", "wmrl"], "seeds": [0],
            "base": {"steps": 2, "group_size": 4, "tasks_per_step": 2, "eval_samples": 2,
                     "train_tasks": [iris, str(suite / "breast_cancer")], "heldout_tasks": [iris],
                     "workers": 2, "timeout_s": 10.0}}


def test_grid_runs_skips_and_summarises(grid, tmp_path):
    out = tmp_path / "out"
    report = run_grid(grid, out, progress=False)
    assert [r["status"] for r in report["runs"]] == ["ran", "ran"]
    for spec in expand_grid(grid):
        folder = out / spec.name
        config = json.loads((folder / "config.json").read_text())
        assert config["params"] == spec.params and "git_commit" in config and config["versions"]["numpy"]
        assert config["resolved"]["group_size"] == 4 and config["resolved"]["lr"] == 1.0
        assert (folder / "autoresearch.ipynb").is_file() and (folder / "curves.png").is_file()
        metrics = json.loads((folder / "metrics.json").read_text())
        assert metrics["steps_done"] == 2 and len(metrics["evals"]) == 2
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["methods"]) == {"grpo_real", "wmrl"}
    for row in summary["methods"].values():
        assert REQUIRED <= set(row)
        assert row["seeds"] == [0]
    # grpo_real executes every group, wmrl one of two: more sandbox seconds for grpo_real
    assert summary["methods"]["grpo_real"]["executions"] == 16 and summary["methods"]["wmrl"]["executions"] == 8
    assert summary["methods"]["grpo_real"]["wm_seconds"] == 0.0 < summary["methods"]["wmrl"]["wm_seconds"]
    for key in ("speedup_sandbox_seconds_at_equal_score", "speedup_total_compute_at_equal_score"):
        assert key in summary and isinstance(summary[key.replace("speedup", "why")], str)
        value = summary[key]
        assert value is None or (isinstance(value, float) and (math.isnan(value) or value > 0))
    assert (out / "results.md").is_file() and (out / "compute_tradeoff.png").is_file()
    assert (out / "learning_curves.png").is_file()
    assert summarize(out)["methods"]["wmrl"]["seeds"] == [0]

    again = run_grid(grid, out, progress=False)
    assert [r["status"] for r in again["runs"]] == ["skipped", "skipped"]

    (out / "wmrl__seed0" / "metrics.json").unlink()  # a half-done run is resumed, not restarted elsewhere
    third = run_grid(grid, out, progress=False)
    assert [r["status"] for r in third["runs"]] == ["skipped", "resumed"]


def test_cli_with_a_grid_file(grid, tmp_path, capsys):
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump({**grid, "methods": ["pure_wm"]}))
    assert cli_reproduce_autoresearch(["--grid", str(path), "--out", str(tmp_path / "cli"), "--no-progress"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["summary"].endswith("summary.json")
    assert math.isnan(printed["speedup_sandbox_seconds_at_equal_score"])  # no grpo_real/wmrl in this grid


def test_folder_of_another_configuration_is_refused(grid, tmp_path):
    from wmrl.autoresearch.runner import RunSpec, execute_run
    folder = tmp_path / "x" / "wmrl__seed0"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"params": {"method": "wmrl", "seed": 99}}))
    with pytest.raises(ValueError, match="other parameters"):
        execute_run(RunSpec("wmrl__seed0", {"method": "wmrl", "seed": 0}), tmp_path / "x")
