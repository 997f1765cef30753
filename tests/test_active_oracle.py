"""reproductions/bench/active_oracle.py (issue 48, item 4): the statistics its grid's header fixed, on run folders
whose numbers are known, and the committed result against its README."""
from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "reproductions/results/autoresearch_active_oracle"
spec = importlib.util.spec_from_file_location("active_oracle", ROOT / "reproductions/bench/active_oracle.py")
active_oracle = importlib.util.module_from_spec(spec)
spec.loader.exec_module(active_oracle)


def fake_runs(folder: Path, factors: dict[int, float], steps: int = 12) -> None:
    "One metrics.json per seed: the active plan's variance is `factor` × the Poisson plan's from step 8 on."
    for seed, factor in factors.items():
        history = []
        for step in range(steps):
            base = 1.0 + 0.1 * seed + 0.01 * step
            rows = {"wmrl_ppi": base * 0.9, "wmrl_ppi_poisson": base,
                    "wmrl_ppi_active": base * (factor if step >= 8 else 1.0)}
            history.append({"step": step, "oracle": {"oracles": {"static/group": {
                name: {"bias2": 1e-31, "var": var, "anchors": 2.0, "exact": True} for name, var in rows.items()}}}})
        run = folder / f"grpo_real__seed{seed}"
        run.mkdir(parents=True)
        (run / "metrics.json").write_text(json.dumps({"config": {"seed": seed}, "history": history}))


def test_a_uniform_halving_reads_as_help_and_no_change_as_no_difference(tmp_path):
    fake_runs(tmp_path / "half", {0: 0.5, 1: 0.49, 2: 0.51})
    rep = active_oracle.report(active_oracle.load(tmp_path / "half"))
    contrast = rep["contrasts"]["wmrl_ppi_active/wmrl_ppi_poisson"]
    assert math.isclose(contrast["ratio"], (0.5 * 0.49 * 0.51) ** (1 / 3), rel_tol=1e-9)
    assert contrast["low"] < 0.5 < contrast["high"] < 0.53 and contrast["reading"] == "helps"
    assert rep["estimators"]["wmrl_ppi_active"]["fitted"]["anchors"]["mean"] == 2.0
    fake_runs(tmp_path / "same", {0: 0.9, 1: 1.1, 2: 1.0})
    same = active_oracle.report(active_oracle.load(tmp_path / "same"))["contrasts"]["wmrl_ppi_active/wmrl_ppi_poisson"]
    assert same["reading"] == "no difference shown" and same["low"] < 1 < same["high"]
    one = tmp_path / "one"
    fake_runs(one, {0: 0.5})
    assert active_oracle.report(active_oracle.load(one))["contrasts"]["wmrl_ppi_active/wmrl_ppi"]["reading"] == "too few seeds"


def test_an_empty_folder_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit, match="no grpo_real"):
        active_oracle.load(tmp_path)
    assert active_oracle.main([str(tmp_path / "missing")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_the_committed_result_holds_its_known_answers_and_its_readme():
    rep = json.loads((RESULTS / "active_oracle.json").read_text())
    for name, entry in rep["estimators"].items():
        assert entry["exact"] and entry["max_bias2"] < 1e-20, name  # unbiased over every draw, each enumerated
        assert math.isclose(entry["fitted"]["anchors"]["mean"], 2.0, rel_tol=1e-9), name  # equal executions
    readme = (RESULTS / "README.md").read_text()
    for key, contrast in rep["contrasts"].items():
        quoted = f"{contrast['ratio']:.2f} [{contrast['low']:.2f}, {contrast['high']:.2f}]"
        assert quoted in readme, (key, quoted)
    assert re.search(r"\b4 seeds\b", readme) and len(rep["seeds"]) == 4
