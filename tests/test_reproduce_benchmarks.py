"""The MLE-Dojo and DSBench papermill templates end to end through the runner, on their tiny grids (tiny-cpu config,
two methods, one seed, two training steps, mini competitions / a tiny DSBench built on the fly): run folders,
config.json provenance, metrics.json keys and measured GPU-hours, the summary next to the paper's rows, skip on
rerun, and the command-line entry points."""
import json
import math
from pathlib import Path

import pytest
import yaml

from wmrl.autoresearch.runner import (
    cli_reproduce_benchmark,
    cli_reproduce_dsbench,
    cli_reproduce_mledojo,
    expand_grid,
    load_grid,
    run_grid,
)
from wmrl.autoresearch.summary import BENCHMARK_CATEGORIES, PAPER_TABLE1

REPO = Path(__file__).resolve().parents[1]
KINDS = {"mle-dojo": "mledojo", "dsbench": "dsbench"}
COMPUTE_KEYS = {"train_wall_s", "gpus", "gpu_hours_wall", "sandbox_s", "sandbox_hours", "gpu_hours", "world_model_s",
                "eval_wall_s", "eval_sandbox_s"}


@pytest.fixture(scope="module", params=list(KINDS))
def finished_grid(request, tmp_path_factory):
    kind = request.param
    grid = load_grid(REPO / "reproductions" / "grids" / f"{KINDS[kind]}_tiny.yaml")
    out = tmp_path_factory.mktemp(KINDS[kind])
    report = run_grid(grid, out, progress=False)
    return kind, grid, out, report


def test_run_folders_and_metrics(finished_grid):
    kind, grid, out, report = finished_grid
    assert [r["status"] for r in report["runs"]] == ["ran", "ran"]
    specs = expand_grid(grid)
    assert [s.params["method"] for s in specs] == ["grpo_real", "wmrl"]
    for spec in specs:
        folder = out / spec.name
        config = json.loads((folder / "config.json").read_text())
        assert config["params"] == spec.params and config["git_commit"] and config["versions"]["numpy"]
        assert config["resolved"]["method"] == spec.params["method"] and config["resolved"]["trl"]["max_steps"] == 2
        assert config["resolved"]["tasks"]["loader"] == "mledojo"
        assert (folder / f"{KINDS[kind]}.ipynb").is_file() and (folder / "heldout.png").is_file()
        metrics = json.loads((folder / "metrics.json").read_text())
        assert metrics["benchmark"] == kind
        assert metrics["config"]["method"] == spec.params["method"] and metrics["config"]["seed"] == 0
        assert metrics["config"]["paper_scale"] == "4B" and metrics["config"]["steps"] == 2
        heldout = metrics["heldout"]
        assert set(heldout["per_category"]) <= set(BENCHMARK_CATEGORIES[kind])
        assert 0.0 <= heldout["average"] <= 100.0
        assert math.isclose(heldout["average"], sum(heldout["per_category"].values()) / len(heldout["per_category"]))
        assert sum(heldout["statuses"].values()) == 2 * len(heldout["per_task"])  # eval_samples = 2 per task
        compute = metrics["compute"]
        assert COMPUTE_KEYS <= set(compute)
        assert compute["gpus"] == 0 and compute["gpu_hours_wall"] == 0.0  # a CPU run: no GPU part
        assert compute["sandbox_s"] > 0 and compute["train_wall_s"] > 0 and compute["eval_sandbox_s"] > 0  # measured
        assert math.isclose(compute["gpu_hours"], compute["gpu_hours_wall"] + compute["sandbox_hours"])
        assert math.isclose(compute["sandbox_hours"], compute["sandbox_s"] / 3600)
        assert Path(metrics["checkpoint"]).name == "checkpoint-2"
        if kind == "dsbench":
            rpg = metrics["rpg"]
            assert set(rpg["per_task"]) == set(heldout["per_task"]) == {"tiny-dsbench-binary", "tiny-dsbench-regress"}
            assert set(rpg["per_category"]) == {"BinCls", "Regress"} and 0.0 <= rpg["average"] <= 100.0
            assert rpg["references"]["tiny-dsbench-binary"] == {"baseline": 0.5, "ideal": 1.0}
        else:
            assert set(heldout["per_task"]) == {"breast-cancer-mini-heldout"}


def test_summary_next_to_the_paper(finished_grid):
    kind, _, out, _ = finished_grid
    summary = json.loads((out / "summary.json").read_text())
    assert summary["benchmark"] == kind and summary["paper_scale"] == "4B"
    assert set(summary["methods"]) == {"grpo_real", "wmrl"}
    for method, row in summary["methods"].items():
        assert row["seeds"] == [0] and row["average"]["n"] == 1 and row["average"]["std"] == 0.0
        assert row["paper"]["average"] == PAPER_TABLE1["4B"][method][kind]["average"]
        assert row["paper"]["GPU-h"] == PAPER_TABLE1["4B"][method]["GPU-h"]
        assert ("rpg" in row) == (kind == "dsbench")
    results = (out / "results.md").read_text()
    assert "| 883 |" in results and "| 286 |" in results  # the paper's GPU-hours beside ours
    assert f"({PAPER_TABLE1['4B']['wmrl'][kind]['average']})" in results
    assert (out / "paper_comparison.png").is_file() and (out / "paper_summary.ipynb").is_file()


def test_rerun_skips_and_cli_reports(finished_grid, tmp_path, capsys):
    kind, grid, out, _ = finished_grid
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(grid))
    cli = cli_reproduce_mledojo if kind == "mle-dojo" else cli_reproduce_dsbench
    assert cli(["--grid", str(path), "--out", str(out), "--no-progress"]) == 0  # finished folders: skipped
    printed = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in printed["runs"]] == ["skipped", "skipped"]
    assert printed["benchmark"] == kind and set(printed["methods"]) == {"grpo_real", "wmrl"}
    assert printed["methods"]["wmrl"]["paper"]["GPU-h"] == 286


def test_cli_errors(tmp_path, capsys):
    assert cli_reproduce_dsbench(["--grid", str(tmp_path / "missing.yaml")]) == 2
    assert "error" in json.loads(capsys.readouterr().err)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"name": "x", "methods": ["ppo"], "seeds": [0]}))
    assert cli_reproduce_mledojo(["--grid", str(bad)]) == 2
    assert "unknown methods" in json.loads(capsys.readouterr().err)["error"]
    with pytest.raises(ValueError, match="kind must be"):
        cli_reproduce_benchmark("mle-bench", [])


def test_template_parameters_are_documented():
    """Every knob of the benchmark templates is a papermill parameter with a comment, one per line."""
    import papermill

    from wmrl.adapters.benchmark_run import BENCHMARK_KNOBS
    for name in ("mledojo", "dsbench"):
        params = papermill.inspect_notebook(str(REPO / "reproductions" / f"{name}.ipynb"))
        assert set(params) == set(BENCHMARK_KNOBS), name
        assert all(p["help"] for p in params.values()), name
