"""reproductions/bench/dial_stage_b.py and the Stage B grids (issue 43): the registered statistic on synthetic runs
whose answer is known, and the grids holding exactly what reproductions/preregistration/dial_stage_b.md registers."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
GRIDS = {f: ROOT / f"reproductions/grids/autoresearch_dial_b{f}.yaml" for f in ("090", "098", "100")}
GRPO_GRID = ROOT / "reproductions/grids/autoresearch_dial_b_grpo.yaml"


@pytest.fixture(scope="module")
def stage_b():
    sys.path.insert(0, str(ROOT / "reproductions/bench"))  # dial_stage_b.py imports its sibling headline.py
    spec = importlib.util.spec_from_file_location("dial_stage_b", ROOT / "reproductions/bench/dial_stage_b.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.path.remove(str(ROOT / "reproductions/bench"))


def synthetic(gap: dict, sd: float = 1.0, seed: int = 0) -> list[dict]:
    """grpo_real at 60 + a seed effect; each dial arm `gap[arm]` points away from it, with paired noise of sd `sd`."""
    rng = np.random.default_rng(seed)
    lines = []
    for s in range(8):
        base = 60 + 3 * rng.standard_normal()
        lines.append({"arm": "grpo_real", "seed": s, "evals": {k: base + k / 5 for k in range(0, 21, 5)}, "grad_norm": []})
        for arm, g in gap.items():
            shift = g + sd * rng.standard_normal()
            lines.append({"arm": arm, "seed": s, "evals": {k: base + k / 5 + shift for k in range(0, 21, 5)}, "grad_norm": []})
    return lines


ARMS = [f"{m}@{f:g}" for m in ("wmrl", "wmrl_ppi") for f in (0.9, 0.98, 1.0)]


def test_the_crossover_is_the_smallest_equivalent_f(stage_b):
    "wmrl 8 points below GRPO at f = 0.9, level with it from 0.98: the crossover is 0.98; wmrl_ppi level at all three."
    gaps = {"wmrl@0.9": -8.0, "wmrl@0.98": 0.0, "wmrl@1": 0.0, "wmrl_ppi@0.9": 0.0, "wmrl_ppi@0.98": 0.0, "wmrl_ppi@1": 0.0}
    e = stage_b.endpoints(synthetic(gaps))
    assert e["methods"]["wmrl"]["crossover"] == "0.98"
    assert not e["methods"]["wmrl"]["by_f"]["0.9"]["equivalent"] and e["methods"]["wmrl"]["by_f"]["1"]["equivalent"]
    assert e["methods"]["wmrl_ppi"]["crossover"] == "0.9"
    assert abs(e["methods"]["wmrl"]["by_f"]["0.9"]["mean"] + 8.0) < 1.5


def test_no_crossover_and_an_underpowered_f_are_said_apart(stage_b):
    "Far below GRPO with a small sd: no crossover, not underpowered. Level but with sd 8: underpowered, not 'different'."
    far = stage_b.endpoints(synthetic({arm: -8.0 for arm in ARMS}))
    assert far["methods"]["wmrl"]["crossover"] is None and not far["methods"]["wmrl"]["by_f"]["1"]["underpowered"]
    noisy = stage_b.endpoints(synthetic({arm: 0.0 for arm in ARMS}, sd=8.0))
    assert noisy["methods"]["wmrl"]["crossover"] is None
    assert all(r["underpowered"] for r in noisy["methods"]["wmrl"]["by_f"].values())
    assert "underpowered" in stage_b.markdown(noisy, interim=True) and "INTERIM" in stage_b.markdown(noisy, interim=True)


def test_holm_is_over_the_three_fidelities(stage_b):
    "Each f's adjusted p is Holm's over the family of three within the method (never below its own raw p)."
    e = stage_b.endpoints(synthetic({arm: 1.5 for arm in ARMS}, sd=2.0, seed=3))
    rows = e["methods"]["wmrl"]["by_f"]
    raw = sorted((r["p"], f) for f, r in rows.items())
    assert rows[raw[0][1]]["p_holm"] == pytest.approx(min(1.0, 3 * raw[0][0]))
    assert all(r["p_holm"] >= r["p"] for r in rows.values())


def test_report_refuses_before_eight_seeds(stage_b, tmp_path, capsys):
    def metrics(method, f, seed):
        config = {"method": method, "seed": seed, **({"world_model": {"name": "dial", "f": f}} if f is not None else {})}
        return {"config": config, "evals": [{"steps_done": k, "heldout_percentile": 50.0 + k} for k in range(0, 21, 5)],
                "history": [{"grad_norm": 1.0}] * 20}
    for method, f in [("grpo_real", None), ("wmrl", 0.9), ("wmrl_ppi", 0.9)]:
        run = tmp_path / "g" / f"{method}__seed0"
        run.mkdir(parents=True)
        (run / "metrics.json").write_text(json.dumps(metrics(method, f, 0)))
    assert stage_b.main(["report", str(tmp_path / "g")]) == 2
    assert "need seeds 0-7 complete in every arm" in capsys.readouterr().err
    assert stage_b.main(["report", str(tmp_path / "g"), "--interim"]) == 0
    assert "INTERIM" in capsys.readouterr().out
    with pytest.raises(ValueError, match="no arm of Stage B"):
        stage_b.arm_of({"method": "wmrl", "world_model": {"name": "static+noise", "sigma": 0.1}})


def test_the_grids_hold_what_was_registered(stage_b):
    "Three dial grids at the registered f and grpo_real's: seeds 0-7, 20 steps evaluated every 5, one shared cache."
    prereg = (ROOT / "reproductions/preregistration/dial_stage_b.md").read_text()
    grpo = yaml.safe_load(GRPO_GRID.read_text())
    methods = list(grpo["methods"])
    assert grpo["seeds"] == list(stage_b.SEEDS) and grpo["base"]["steps"] == 20 and grpo["base"]["world_model"] == {}
    assert GRPO_GRID.name in prereg and "dial_b_execution_cache" in grpo["base"]["cache_path"]
    for name, path in GRIDS.items():
        grid = yaml.safe_load(path.read_text())
        f = int(name) / 100
        assert grid["seeds"] == list(stage_b.SEEDS) and grid["base"]["steps"] == 20 and grid["base"]["eval_every"] == 5
        assert all(grid["method_overrides"][m]["world_model"] == {"name": "dial", "f": f} for m in ("wmrl", "wmrl_ppi"))
        assert grid["base"]["cache_path"] == "../../dial_b_execution_cache.json" and path.name in prereg
        assert "preregistration/dial_stage_b.md" in path.read_text()
        methods += grid["methods"]
    assert sorted(methods) == sorted(["grpo_real"] + ["wmrl", "wmrl_ppi"] * 3)
    assert stage_b.FIDELITIES == (0.9, 0.98, 1.0) and stage_b.LEVEL_STEPS == (15, 20) and stage_b.MARGIN == 3.0
    assert "steps 15 and 20" in prereg and "±3" in prereg and "**4.0 points**" in prereg
