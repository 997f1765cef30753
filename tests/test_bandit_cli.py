"""`wmrl reproduce bandit`: argument errors (fast) and the papermill template end to end (slow)."""
import json
import subprocess
import sys

import pytest

from wmrl.toy.bandit import VARIANTS
from wmrl.toy.theorems import cli_reproduce_bandit


def test_unknown_size_is_a_usage_error(tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        cli_reproduce_bandit(["--size", "huge", "--out", str(tmp_path)])
    assert exit_info.value.code == 2


def test_missing_template_is_reported_as_json(tmp_path, capsys):
    assert cli_reproduce_bandit(["--out", str(tmp_path), "--template", str(tmp_path / "nope.ipynb")]) == 2
    assert "template not found" in json.loads(capsys.readouterr().err)["error"]


@pytest.mark.slow
def test_quick_reproduction_writes_the_metrics_layout(tmp_path):
    code = f"import sys; from wmrl.toy.theorems import cli_reproduce_bandit; sys.exit(cli_reproduce_bandit(['--size', 'quick', '--out', {str(tmp_path)!r}]))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    for name in VARIANTS:
        assert set(metrics[name]) == {"final_gap_mean", "final_gap_ci95", "real_exec_fraction", "seeds"}
        assert metrics[name]["seeds"] >= 16
    assert 1.4 < metrics["floor_vs_B_slope"] < 2.6 and 0.6 < metrics["noise_vs_gamma_slope"] < 1.4
    assert metrics["fused_variance"]["measured"] == pytest.approx(metrics["fused_variance"]["predicted"], rel=0.1)
    assert metrics["pure_wm"]["final_gap_mean"] - metrics["pure_wm"]["final_gap_ci95"] > \
        metrics["grpo_real"]["final_gap_mean"] + metrics["grpo_real"]["final_gap_ci95"]
    config = json.loads((tmp_path / "config.json").read_text())
    assert "git_commit" in config and config["versions"]["numpy"]
    assert {p.name for p in tmp_path.glob("*.png")} >= {"learning_curves.png", "scalings.png", "variance_bias_budget.png"}
    assert (tmp_path / "bandit.ipynb").is_file()
