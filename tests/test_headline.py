"""reproductions/bench/headline.py: the pre-registered headline's collector, integrity check and report, on synthetic
slices whose true ratios are known and on the committed long grids."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "reproductions" / "bench"


@pytest.fixture(scope="module")
def headline():
    sys.path.insert(0, str(BENCH))  # headline.py imports its sibling decisive_report
    spec = importlib.util.spec_from_file_location("headline_bench", BENCH / "headline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.path.remove(str(BENCH))


PER_STEP = {"grpo_real": 64, "wmrl": 8, "wmrl_ppi": 8, "wmrl_ppi_rho25": 16}  # training executions a step


LIFT = {"grpo_real": 0.0, "wmrl": 1.0, "wmrl_ppi": 1.0, "wmrl_ppi_rho25": 1.0}


def synthetic_lines(seeds=range(32), lag=None, lift=LIFT, noise=1.0, seed=0) -> list[dict]:
    """Four arms rising linearly from 18 over 35 steps to a plateau of 78 + `lift` points, evaluated every 5 of 75
    steps; `lag` stretches an arm's rise by a factor. Each run's evaluation noise is its own. An arm lifted above GRPO
    crosses GRPO's level while still rising, where the crossing is well conditioned (see nbs/446 for a level plateau)."""
    rng, steps, lag = np.random.default_rng(seed), np.arange(0, 76, 5), lag or {}
    lines = []
    for s in seeds:
        for arm, per_step in PER_STEP.items():
            top = 60 + lift[arm]
            mean = 18 + top * np.minimum(steps / (35 * lag.get(arm, 1.0)), 1.0)
            score = mean + rng.normal(0, noise, steps.size)
            lines.append({"arm": arm, "method": arm.replace("_rho25", ""), "seed": s, "n_executions": per_step * 75.0,
                          "evals": [[int(k), float(x), 0.5 * per_step * k, 0.6 * per_step * k] for k, x in zip(steps, score)]})
    return lines


def write_slices(folder: Path, lines: list[dict], size: int = 8) -> None:
    (folder / "slices").mkdir(parents=True, exist_ok=True)
    for first in range(0, 32, size):
        part = [r for r in lines if first <= r["seed"] < first + size]
        if part:
            (folder / "slices" / f"seeds_{first}_{first + size - 1}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))


def test_report_on_a_known_pair_is_a_hit(headline, tmp_path, capsys):
    write_slices(tmp_path, synthetic_lines())
    assert headline.main(["--results", str(tmp_path), "report"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    ratios = {rho: p["ratio"] for rho, p in summary["primary"].items()}
    # each arm reaches 78 after 60/61 of its 35-step rise, GRPO at the rise's end: 64/8 * 61/60 and 64/16 * 61/60
    assert ratios["rho=1/8"] == pytest.approx(8 * 61 / 60, rel=0.08) and ratios["rho=1/4"] == pytest.approx(4 * 61 / 60, rel=0.08)
    assert summary["outcome"] == "hit" and summary["complete"]
    assert all(len(p["by_boot_seed"]) == 3 for p in summary["primary"].values())
    printed = capsys.readouterr().out
    assert "never reached" in printed and "Primary outcome: **hit**" in printed and "INTERIM" not in printed


def test_a_lagging_arm_is_a_miss_and_said_so(headline, tmp_path, capsys):
    # rho = 1/4's arm rises 1.5x slower in steps: 4 * 61/60 / 1.5 = 2.7x, below the goal of 3x: a miss at that rho
    write_slices(tmp_path, synthetic_lines(lag={"wmrl_ppi_rho25": 1.5}))
    assert headline.main(["--results", str(tmp_path), "report"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["outcome"] == "partial" and not summary["primary"]["rho=1/4"]["hit"]
    assert summary["primary"]["rho=1/4"]["ratio"] == pytest.approx(4 * 61 / 60 / 1.5, rel=0.08)
    assert "miss" in capsys.readouterr().out


def test_no_endpoint_below_the_registered_seeds(headline, tmp_path, capsys):
    write_slices(tmp_path, synthetic_lines(seeds=range(8)))
    assert headline.main(["--results", str(tmp_path), "report"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "seeds 0-31 complete" in err[0] and "grpo_real 8" in err[0]
    assert not (tmp_path / "summary.json").exists()
    assert headline.main(["--results", str(tmp_path), "report", "--interim", "--boot", "500"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("**INTERIM: not the pre-registered result**") and not (tmp_path / "summary.json").exists()
    write_slices(tmp_path, synthetic_lines())
    assert headline.main(["--results", str(tmp_path), "report", "--boot", "2000"]) == 2  # B below the registered 10,000
    assert "10,000" in capsys.readouterr().err


def test_a_run_in_two_slices_must_agree(headline, tmp_path):
    lines = synthetic_lines(seeds=range(2))
    write_slices(tmp_path, lines)
    changed = dict(lines[0], evals=[[0, 1.0, 0, 0]] + lines[0]["evals"][1:])
    (tmp_path / "slices" / "again.jsonl").write_text(json.dumps(changed) + "\n")
    with pytest.raises(ValueError, match="two slices with different evaluations"):
        headline.load_lines(tmp_path)


def test_integrity_check_against_the_committed_grids(headline):
    committed = []
    for arm, folder in headline.COMMITTED.items():
        method = headline.ARMS[arm][0]
        committed += [{**r, "arm": arm} for r in json.loads((ROOT / "reproductions/results" / folder / "runs.json").read_text())
                      if r["method"] == method]
    report = headline.check(committed)
    assert all(r["seeds"] == list(range(8)) and r["differ"] == [] and r["equal"] > 0 for r in report.values())
    seed3 = next(r for r in committed if (r["arm"], r["seed"]) == ("wmrl", 3))
    was = dict((e[0], e[1]) for e in seed3["evals"])[25]
    bent = [dict(r, evals=[[e[0], e[1] + (2.0 if e[0] == 25 else 0.0), *e[2:]] for e in r["evals"]]) if r is seed3 else r
            for r in committed]
    assert headline.check(bent)["wmrl"]["differ"] == [[3, 25, round(was, 3), round(was + 2.0, 3)]]
    assert report["wmrl"]["training_differs_from_step"] == {} and report["wmrl"]["training_steps_compared"] == 8 * 75


def test_integrity_check_names_the_cause(headline):
    "A differing evaluation carries its status change; a changed reward shows as training that differs from its step."
    committed = [{**r, "arm": "wmrl"} for r in json.loads((ROOT / "reproductions/results/autoresearch_long/runs.json").read_text())
                 if r["method"] == "wmrl"]
    seed5 = next(r for r in committed if r["seed"] == 5)
    counts = dict((s, c) for s, c in seed5["eval_status_counts"])
    flipped = [[s, ({**c, "ok": c["ok"] - 1, "timeout": c.get("timeout", 0) + 1} if s == 40 else c)] for s, c in counts.items()]
    bent = dict(seed5, evals=[[e[0], e[1] - (1.9 if e[0] == 40 else 0.0), *e[2:]] for e in seed5["evals"]],
                eval_status_counts=flipped, grad_norm=[g * (1.01 if i >= 12 else 1.0) for i, g in enumerate(seed5["grad_norm"])])
    report = headline.check([bent if r is seed5 else r for r in committed])["wmrl"]
    assert report["causes"] == [{"seed": 5, "step": 40, "statuses": {"ok": -1, "timeout": 1}, "budget_flip": True}]
    assert report["training_differs_from_step"] == {5: 12}


def test_budget_flip_admits_programs_crossing_the_budget_only(headline):
    "Into timeout from any status, or all out of it: a budget; a move between two other statuses, or both ways: not."
    flip = headline.budget_flip
    assert flip({"ok": -1, "timeout": 1}) and flip({"ok": -3, "timeout": 3}) and flip({"ok": 1, "timeout": -1})
    assert flip({"invalid_submission": -1, "ok": -1, "timeout": 2})  # seeds_4_5, seed 4, step 25
    assert not flip({"ok": -1, "invalid_submission": 1})  # a changed scoring path, no budget involved
    assert not flip({"ok": -2, "invalid_submission": 1, "timeout": 1})  # one program into timeout, one elsewhere
    assert not flip({"ok": -1, "runtime_error": 1, "timeout": 0}) and not flip({}) and not flip({"timeout": 1})
    assert not flip({"ok": 1, "invalid_submission": -2, "timeout": 1})  # out of timeout and into it at once


def test_a_slice_lands_only_when_its_caches_show_budget_kills(headline, tmp_path):
    "Every timeout in a slice's caches must be a CPU-budget kill; a wall kill or an infra error stops the slice."
    def cache(folder, records):
        folder.mkdir(parents=True)
        (folder / "execution_cache.json").write_text(json.dumps({f"k{i}": r for i, r in enumerate(records)}))
    ok = {"status": "ok", "cpu_s": 1.0, "message": "", "infra_error": False}
    cpu = {"status": "timeout", "cpu_s": 6.8, "message": "killed at the CPU-time limit of 7 s", "infra_error": False}
    wall = {"status": "timeout", "cpu_s": 0.4, "message": "killed at the wall-clock limit of 80 s", "infra_error": False}
    cache(tmp_path / "a", [ok, cpu, cpu])
    cache(tmp_path / "b", [ok, wall])
    good = headline.audit_cache([tmp_path / "a"])
    assert good == {"records": 3, "timeouts": 2, "cpu_limit_kills": 2, "other_timeouts": [], "infra_errors": 0,
                    "kill_cpu_s": [6.8, 6.8]}
    clean = {"wmrl": {"training_differs_from_step": {}, "causes": [{"seed": 4, "step": 25, "budget_flip": True,
                                                                   "statuses": {"ok": -1, "timeout": 1}}]}}
    assert headline.lands(clean, good) == []
    bad = headline.audit_cache([tmp_path / "a", tmp_path / "b"])
    assert bad["timeouts"] == 3 and bad["cpu_limit_kills"] == 2
    assert "wall-clock" in " ".join(headline.lands(clean, bad))
    assert headline.lands(clean, None) and headline.lands(clean, dict(good, infra_errors=1))
    moved = {"wmrl": {"training_differs_from_step": {4: 12}, "causes": [{"seed": 4, "step": 25, "budget_flip": False,
                                                                        "statuses": {"ok": -1, "invalid_submission": 1}}]}}
    assert len(headline.lands(moved, good)) == 2


def test_collect_labels_the_arms(headline, tmp_path):
    def metrics(method, fraction, seed):
        evals = [{"steps_done": k, "heldout_percentile": 20.0 + k, "sandbox_cpu_s": 1.0 * k, "total_compute_s": 1.2 * k}
                 for k in range(0, 76, 5)]
        return {"config": {"method": method, "seed": seed, "anchor_fraction": fraction}, "evals": evals, "history": [],
                "totals": {k: 1.0 for k in ("sandbox_cpu_s", "total_compute_s", "n_executions", "n_cache_hits", "eval_sandbox_cpu_s")}}
    for grid, runs in {"g8": [("grpo_real", 0.1), ("wmrl", 0.1), ("wmrl_ppi", 0.1)], "g4": [("wmrl_ppi", 0.25)]}.items():
        for method, fraction in runs:
            run = tmp_path / grid / f"{method}__seed9"
            run.mkdir(parents=True)
            (run / "metrics.json").write_text(json.dumps(metrics(method, fraction, 9)))
    (tmp_path / "g8" / "execution_cache.json").write_text(json.dumps({"k": {"status": "ok", "cpu_s": 1.0}}))
    # seed 9: beyond the committed long grids' seeds 0-7, so only the cache audit decides; through the command line, as the README says to run it (--command must not clobber the subcommand)
    assert headline.main(["--results", str(tmp_path / "res"), "collect", str(tmp_path / "g8"), str(tmp_path / "g4"),
                          "--slice", "seeds_3", "--command", "make headline-slice SEEDS=3", "--wall", "1 min 2 s"]) == 0
    out = tmp_path / "res" / "slices" / "seeds_3.jsonl"
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["arm"] for r in lines] == ["grpo_real", "wmrl", "wmrl_ppi", "wmrl_ppi_rho25"]
    meta = json.loads((tmp_path / "res" / "slices" / "seeds_3.meta.json").read_text())
    assert meta["wall"] == "1 min 2 s" and meta["command"].startswith("make headline-slice")
    assert meta["cache_audit"]["records"] == 1 and meta["cache_audit"]["timeouts"] == 0
    (tmp_path / "g8" / "execution_cache.json").unlink()  # nothing to audit: the slice is refused, nothing written
    assert headline.main(["--results", str(tmp_path / "res2"), "collect", str(tmp_path / "g8"), str(tmp_path / "g4"),
                          "--slice", "seeds_3", "--command", "x", "--wall", "1 s"]) == 2
    assert not (tmp_path / "res2").exists()
    with pytest.raises(ValueError, match="no arm of the headline"):
        headline.arm_of({"method": "ppi", "anchor_fraction": 0.1})


def test_the_forecast_quoted_is_the_committed_one(headline):
    "The results README's forecast percentages are forecast.json's, which `headline.py forecast` writes."
    forecast = json.loads((headline.HEADLINE / "forecast.json").read_text())
    readme = " ".join((headline.HEADLINE / "README.md").read_text().split())  # line breaks are the editor's
    for rho, words in (("rho=1/8", "at ρ = 1/8 in **{}%**"), ("rho=1/4", "at ρ = 1/4 in **{}%**")):
        assert words.format(f"{100 * forecast['arms'][rho]['hit_rate']:.1f}") in readme, rho
    assert f"at both in **{100 * forecast['all_hit']:.1f}%**" in readme
    again = headline.forecast(n_outer=forecast["n_outer"])  # recomputed from the committed runs: the same numbers
    assert again["arms"] == forecast["arms"] and again["all_hit"] == forecast["all_hit"]


def test_committed_slices_pass_the_integrity_rule(headline):
    """Every committed slice: training equal to the long grids at every shared step, and every differing evaluation an
    budget flip of held-out programs, and every slice with a kept cache audit showing CPU-budget kills only; check.json
    and the README's counts are what `check` prints."""
    report = headline.check(headline.load_lines())
    assert json.loads(json.dumps(report)) == json.loads((headline.HEADLINE / "check.json").read_text())
    assert all(r["training_differs_from_step"] == {} for r in report.values())
    assert all(c["budget_flip"] for r in report.values() for c in r["causes"])
    for meta in sorted((headline.HEADLINE / "slices").glob("*.meta.json")):
        audit = json.loads(meta.read_text()).get("cache_audit")
        assert audit is None or headline.lands({}, audit) == [], meta.name
    equal = sum(r["equal"] for r in report.values())
    total = equal + sum(len(r["differ"]) for r in report.values())
    steps = sum(r["training_steps_compared"] for r in report.values())
    text = (headline.HEADLINE / "README.md").read_text()
    assert f"{equal} of {total} shared evaluations are equal" in text and f"({steps:,} steps over" in text
