"""README.md's "What it shows" table: every number in it recomputed from the committed file that owns it, so the front
door cannot drift from the results (one owner per number)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from wmrl.autoresearch.matched import curves_from_compact, matched_steps, plateau_comparison
from wmrl.core.paired import tost_paired

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "reproductions" / "results"


def row(question: str) -> str:
    "The README table's answer cell for the row whose question starts with `question`."
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## What it shows", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if cells and cells[0].startswith(question):
            return cells[1]
    raise AssertionError(f"README's 'What it shows' has no row starting {question!r}")


def runs(folder: str, method: str | None = None) -> list[dict]:
    rows = json.loads((RESULTS / folder / "runs.json").read_text())
    return [r for r in rows if method is None or r["method"] == method]


def test_bandit_row():
    metrics = json.loads((RESULTS / "bandit" / "metrics.json").read_text())
    cell = row("Toy bandit")
    for method, (mean, half) in {"wmrl": ("0.00093", "0.00017"), "grpo_real": ("0.00082", "0.00013"),
                                 "pure_wm": ("0.0153", "0.0009")}.items():
        assert f"`{method}` {mean} ± {half}" in cell
        digits = len(mean.split(".")[1])
        assert round(metrics[method]["final_gap_mean"], digits) == pytest.approx(float(mean))
        assert round(metrics[method]["final_gap_ci95"], len(half.split(".")[1])) == pytest.approx(float(half))
        assert metrics[method]["seeds"] == 32
    assert metrics["wmrl"]["real_exec_fraction"] == pytest.approx(0.1)


def test_matched_step_row():
    curves = curves_from_compact(runs("autoresearch_long"))
    table = matched_steps(curves, "wmrl", "grpo_real")
    assert all(r["mean"] < 0 for r in table)  # "below at every step"
    at50 = next(r for r in table if r["step"] == 50)
    assert (f"at step 50: {at50['mean']:+.2f} [{at50['t_low']:+.2f}, {at50['t_high']:+.2f}] points (95% t, Holm p = "
            f"{at50['p_holm']:.3f})").replace("-", "−") in row("AutoResearch: the paper's WMRL")


def test_oracle_row():
    oracle = json.loads((RESULTS / "autoresearch_oracle" / "oracle.json").read_text())["grpo_real"]["static/group"]
    b = oracle["wmrl"]["bias2"]
    cell = row("Why: the static world model")
    assert f"{b['mean']:.2f} [{b['ci_low']:.2f}, {b['ci_high']:.2f}]" in cell
    assert f"`wmrl_ppi` {oracle['wmrl_ppi']['bias2']['mean']:.2f}" in cell


def test_fidelity_row():
    "Issue 43's Stage A: wmrl's gradient bias against the dial's fidelity, and the noise controls' range."
    oracle = json.loads((RESULTS / "autoresearch_dial_oracle" / "oracle.json").read_text())["grpo_real"]
    bias = lambda name: oracle[name]["wmrl"]["bias2"]["mean"]
    noise = sorted(bias(n) for n in oracle if n.startswith("noise") and n.endswith("/group"))
    cell = row("How faithful must the world model be")
    assert (f"from {bias('dial f=0/group'):.2f} at fidelity 0 (the static model) to {bias('dial f=0.9/group'):.2f} at 0.9 "
            f"and {bias('dial f=1/group'):.2f} at 1; under the noise controls it is {noise[0]:.2f}–{noise[-1]:.2f}") in cell
    assert bias("dial f=0.75/group") > noise[-1] and bias("dial f=0/group") == pytest.approx(bias("static/group"))


def test_plateau_row():
    curves = curves_from_compact(runs("autoresearch_long") + runs("autoresearch_ppi_long", "wmrl_ppi"))
    gap = plateau_comparison(curves, "wmrl_ppi", "grpo_real")
    level = lambda arm: {s: float(np.mean(c["score"][-4:])) for s, c in curves[arm].items()}
    tost = tost_paired(level("wmrl_ppi"), level("grpo_real"), 3.0)
    cell = row("Prediction-powered WMRL")
    assert f"{gap['mean']:+.2f} [{gap['t_low']:+.2f}, {gap['t_high']:+.2f}] points (95% t)".replace("-", "−") in cell
    assert not tost["equivalent"] and f"TOST p = {tost['p']:.2f}" in cell


def test_headline_row():
    "The pre-registered headline: how many seeds are complete in every arm, and the forecast, from their owners."
    import importlib.util
    import sys
    bench = ROOT / "reproductions" / "bench"
    sys.path.insert(0, str(bench))
    try:
        spec = importlib.util.spec_from_file_location("headline_bench", bench / "headline.py")
        headline = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(headline)
        complete = headline._complete(headline.curves(headline.load_lines())) if (headline.HEADLINE / "slices").is_dir() else {}
    finally:
        sys.path.remove(str(bench))
    whole = set.intersection(*[set(complete.get(arm, [])) for arm in headline.ARMS])
    forecast = json.loads((headline.HEADLINE / "forecast.json").read_text())
    cell = row("Its training executions")
    summary = headline.HEADLINE / "summary.json"
    if summary.is_file():  # the registered result is in: the row must quote it, not the forecast
        result = json.loads(summary.read_text())
        assert result["outcome"] in cell and re.search(r"\d+\.\d\d×", cell), cell
    else:
        assert f"{len(whole)} of 32 seeds complete in every arm" in cell
        assert f"hit at ρ = 1/8 in {100 * forecast['arms']['rho=1/8']['hit_rate']:.1f}% of draws" in cell
