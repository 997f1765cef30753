"""The CI smoke run of the AutoResearch reproduction: `wmrl reproduce autoresearch --size quick`, end to end.

Real suite tasks (built, cached), the real program-writing agent, the static world model with the fitted prior, the
warm sandbox, papermill per run, then the summary notebook. Checks the contract of `summary.json` (the keys the
issue names, per method), that compute was actually measured, and that the report files exist. It does not check
who wins: three steps are far too few for that (the full run's numbers are in reproductions/results/).
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

REQUIRED_PER_METHOD = ("heldout_percentile_mean", "heldout_percentile_std", "per_category", "sandbox_seconds",
                       "wm_seconds", "update_seconds", "seeds")


def test_quick_reproduction_end_to_end(tmp_path):
    out = tmp_path / "quick"
    wmrl = Path(sys.executable).parent / "wmrl"  # the console command the package installs
    done = subprocess.run([str(wmrl), "reproduce", "autoresearch", "--size", "quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    methods = summary["methods"]
    for method in ("grpo_real", "pure_wm", "wmrl"):
        row = methods[method]
        missing = [key for key in REQUIRED_PER_METHOD if key not in row]
        assert not missing, (method, missing)
        assert 0.0 <= row["heldout_percentile_mean"] <= 100.0
        assert set(row["per_category"]) == {"binary", "multiclass", "regression"}
    assert methods["grpo_real"]["sandbox_seconds"] > methods["wmrl"]["sandbox_seconds"] > 0.0
    assert methods["pure_wm"]["sandbox_seconds"] == 0.0 and methods["pure_wm"]["wm_seconds"] > 0.0
    for key in ("speedup_sandbox_seconds_at_equal_score", "speedup_total_compute_at_equal_score"):
        value = summary[key]
        assert value is None or isinstance(value, (int, float)) and (math.isnan(value) or value > 0)
    for name in ("results.md", "learning_curves.png", "compute_tradeoff.png", "autoresearch_summary.ipynb"):
        assert (out / name).is_file(), name
    report = (out / "results.md").read_text()  # issue 26: a one-seed run says it is a smoke run, and prints no ratio
    assert "**Smoke run: 1 seed.**" in report and "not reported for a smoke run" in report
    assert "× (" not in report.split("## Compute at equal score")[1].split("Has each method")[0]
    for run in ("grpo_real__seed0", "pure_wm__seed0", "wmrl__seed0"):
        metrics = json.loads((out / run / "metrics.json").read_text())
        assert metrics["steps_done"] == metrics["config"]["steps"]
        assert metrics["config"]["backend"] == "warm" and metrics["config"]["quality_prior"] == "fitted"
        assert (out / run / "autoresearch.ipynb").is_file() and (out / run / "config.json").is_file()
        assert all("diagnostics" in row for row in metrics["history"])
    check_oracle(out)


def check_oracle(out: Path) -> None:
    "The quick grid probes grpo_real at every step for free and wmrl at steps 0 and 2 (wmrl.autoresearch.probe)."
    grpo = json.loads((out / "grpo_real__seed0" / "metrics.json").read_text())
    assert grpo["totals"]["wm_s"] == 0.0  # the probe's predictions are not charged to real-execution GRPO
    for row in grpo["history"]:
        oracles = row["oracle"]["oracles"]
        assert row["oracle"]["probe_cpu_s"] == 0.0 and row["oracle"]["probe_wm_s"] > 0.0
        assert abs(oracles["affine0.5/group"]["pure_wm"]["cos"] - 1.0) < 1e-6  # the instrument's known answer
        assert abs(oracles["affine0.5/none"]["pure_wm"]["scale"] - 0.5) < 1e-9
        for scale in ("group", "none"):  # prediction-powered: unbiased over the draw on real programs too
            assert oracles[f"static/{scale}"]["ppi"]["bias2"] < 1e-20
        assert len(row["diagnostics"]["anchor_rows"]) == 16  # every row of grpo_real, with its predicted status
    wmrl = json.loads((out / "wmrl__seed0" / "metrics.json").read_text())
    probed = [row["step"] for row in wmrl["history"] if "oracle" in row]
    assert probed == [0, 2] and all(row["oracle"]["probe_cpu_s"] > 0 for row in wmrl["history"] if "oracle" in row)
    assert wmrl["totals"]["n_executions"] == 8 * 3  # the run paid for its own anchor group only, one a step


def test_every_papermill_template_has_its_parameters_cell_first():
    "papermill silently ignores parameters a template has no `parameters` cell for: every run would use defaults."
    templates = sorted((Path(__file__).resolve().parents[1] / "reproductions").glob("*.ipynb"))
    assert templates
    for path in templates:
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        tagged = [i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
        if path.stem.endswith("summary") and not tagged:
            continue  # summaries may take no parameters (they read a folder given by the runner)
        assert tagged == [0], f"{path.name}: the first code cell must be the only one tagged `parameters` (got {tagged})"
