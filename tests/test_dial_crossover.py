"""reproductions/bench/dial_crossover.py: the fidelity f* where wmrl's gradient bias falls to a noise control's level."""
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "reproductions/results/autoresearch_dial_oracle"


@pytest.fixture(scope="module")
def dial():
    spec = importlib.util.spec_from_file_location("dial_crossover", ROOT / "reproductions/bench/dial_crossover.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_crossing_is_linear_between_grid_points(dial):
    fs = np.array([0.0, 0.5, 1.0])
    assert dial.crossing(fs, np.array([0.8, 0.4, 0.0]), 0.2) == pytest.approx(0.75)  # 0.4 -> 0 over 0.5..1
    assert dial.crossing(fs, np.array([0.1, 0.05, 0.0]), 0.2) == 0.0  # already below at the first point
    assert dial.crossing(fs, np.array([0.8, 0.4, 0.3]), 0.2) == math.inf  # never reaches it
    assert dial.crossing(fs, np.array([0.8, 0.2, 0.1]), 0.2) == pytest.approx(0.5)  # "at or below"


def test_bootstrap_is_paired_and_counts_the_misses(dial):
    "Two seeds that each cross, one that never does: about a third of the draws' seeds miss, and the high end is inf."
    def run(seed, curve, noise):
        oracles = {f"dial f={f:g}/group": {"wmrl": {"bias2": c}} for f, c in zip((0, 0.5, 1), curve)}
        return {"seed": seed, "probes": {"0": {"oracles": {**oracles, "noise0.1/group": {"wmrl": {"bias2": noise}}}}}}
    runs = [run(0, (0.8, 0.1, 0.0), 0.2), run(1, (0.8, 0.1, 0.0), 0.2), run(2, (0.9, 0.9, 0.9), 0.0)]
    out = dial.crossover(runs, "noise0.1/group", boot=2000, seed=0)
    assert out["seeds"] == [0, 1, 2] and math.isfinite(out["f_star"]) is False  # mean curve (0.83, 0.37, 0.3) vs 0.13
    assert 0.5 < out["never_crosses"] < 1 and out["interval"][1] == math.inf


def test_committed_crossover_is_what_the_script_prints(dial):
    "One owner per number: crossover.json (and the README that quotes it) is the script's output on the committed runs."
    committed = json.loads((FOLDER / "crossover.json").read_text())
    runs = [r for r in json.loads((FOLDER / "oracle_runs.json").read_text()) if r["method"] == "grpo_real"]
    assert dial._finite(dial.report(runs)) == committed
    text = (FOLDER / "README.md").read_text()
    r2 = committed["results"]["noise0.2/group"]
    assert f"f\\* = {r2['f_star']:.3f}" in text and f"[{r2['interval'][0]:.3f}," in text
    assert f"{100 * committed['results']['noise0.1/group']['never_crosses']:.1f}%" in text
    readme = (ROOT / "README.md").read_text()
    assert f"f\\* = {r2['f_star']:.3f} [{r2['interval'][0]:.3f}, not by f = 1]" in readme and r2["interval"][1] is None
