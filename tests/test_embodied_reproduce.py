"""The embodied miniature end to end: `wmrl reproduce embodied --size quick` (real Meta-World, real torch policy,
the frozen progress model, papermill per run), and the claim that every arm goes through `wmrl.core.correction`.

The quick grid is far too small to rank the arms (the full grid's numbers are in reproductions/results/embodied/);
these tests check the contract: the ledger's label counts follow each arm's definition, the shared SFT checkpoint
gives every arm the same step-0 numbers, the summary has Table 3's columns and paired intervals, the report files
exist, and a second invocation skips the finished runs.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("metaworld", reason="EMBODIED TESTS SKIPPED: Meta-World missing; `make setup` installs the embodied extra")

COLUMNS = ("ID Avg", "ID Best@8", "ID All@8", "OOD Avg", "OOD Best@8", "OOD All@8", "Overall")


def _reproduce(out: Path) -> subprocess.CompletedProcess:
    wmrl = Path(sys.executable).parent / "wmrl"
    return subprocess.run([str(wmrl), "reproduce", "embodied", "--size", "quick", "--out", str(out), "--no-progress"],
                          capture_output=True, text=True, timeout=1500)


def test_quick_embodied_reproduction(tmp_path):
    import yaml
    grid = yaml.safe_load((Path(__file__).resolve().parents[1] / "reproductions/grids/embodied_quick.yaml").read_text())
    from wmrl.core.anchors import anchor_count
    steps, groups, g = grid["base"]["steps"], grid["base"]["groups_per_step"], grid["base"]["rollouts_per_init"]
    anchors = anchor_count(groups, grid["base"]["anchor_fraction"])
    out = tmp_path / "quick"
    done = _reproduce(out)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["cpu_s"] > 0 and set(report["heldout_overall"]) == {"sparse", "dense_raw", "dense_calib", "sparse_scarce",
                                                                      "sparse_dynamic", "dense_calib_ordered"}
    summary = json.loads((out / "summary.json").read_text())
    arms = summary["arms"]
    for arm, row in arms.items():
        assert row["seeds"] == [0, 1], arm
        for column in COLUMNS:
            cell = row[column]
            assert 0.0 <= cell["mean"] <= 100.0 and cell["n"] == 2 and math.isfinite(cell["half_width"])
        assert row["sim_cpu_s"]["mean"] > 0
    assert arms["sparse"]["real_labels"]["mean"] == steps * groups * g  # every rollout's success
    assert arms["dense_raw"]["real_labels"]["mean"] == 0
    scarce = arms["sparse_scarce"]["real_labels"]["mean"]
    assert arms["dense_calib"]["real_labels"]["mean"] == scarce == steps * anchors * g
    assert arms["dense_calib_ordered"]["real_labels"]["mean"] == scarce  # the same anchors, another calibration
    assert arms["sparse_dynamic"]["real_labels"]["mean"] >= steps * groups * g  # a label for every candidate rollout
    assert arms["sparse"]["wm_cpu_s"]["mean"] == 0 and arms["sparse_scarce"]["wm_cpu_s"]["mean"] == 0
    assert arms["dense_raw"]["wm_cpu_s"]["mean"] > 0 and arms["dense_calib"]["wm_cpu_s"]["mean"] > 0
    assert set(summary["paired_vs_dense_calib"]) == {"sparse", "dense_raw", "sparse_scarce", "sparse_dynamic", "dense_calib_ordered"}
    assert all(math.isfinite(c["mde"]) for c in summary["paired_vs_dense_calib"].values())
    assert set(summary["sft_mixed"]) == {"ID", "OOD"} and "## The regime" in (out / "results.md").read_text()
    assert set(summary["anatomy"]) == {"ID", "OOD"}
    for name in ("results.md", "learning_curves.png", "heldout.png", "progress_reliability.png", "embodied_summary.ipynb"):
        assert (out / name).is_file(), name
    runs = {p.parent.name: json.loads(p.read_text()) for p in out.glob("*/metrics.json")}
    assert len(runs) == 12
    for seed in (0, 1):  # one SFT checkpoint per seed: the four arms start from the same held-out numbers
        starts = {json.dumps(m["sft_heldout"], sort_keys=True) for m in runs.values() if m["config"]["seed"] == seed}
        assert len(starts) == 1
    assert len({m["world_model"]["fingerprint"] for m in runs.values()}) == 1  # one frozen world model for all
    for seed in (0, 1):  # step 0: one policy, one draw: every arm trains on the same mixed groups, dynamic on more
        first = {m["arm"]: m["curve"]["informative_groups"][0] for m in runs.values() if m["config"]["seed"] == seed}
        assert len({v for arm, v in first.items() if arm != "sparse_dynamic"}) == 1, first
        assert first["sparse_dynamic"] >= first["sparse"], first
    for name, run in runs.items():  # the correction engages in CI: the debiaser fits and the anchor weight moves
        assert all(row["n_degenerate_groups"] >= row["n_flattened_groups"] for row in run["stats"]), name
        cosines = [c for c in run["curve"]["grad_cos_real"] if c == c]
        assert cosines and all(-1 - 1e-6 <= c <= 1 + 1e-6 for c in cosines), name
        if run["arm"] in ("sparse", "sparse_dynamic"):  # all-real GRPO against itself: the positive control
            assert all(abs(c - 1) < 1e-6 for c in cosines), (name, cosines)
            assert all(c != c for c in run["curve"]["grad_cos_real_wm"]), name  # no world-model rows to measure
        if run["arm"] == "dense_raw":  # no anchors: the world model's rows are all the rows
            same = [[c if c == c else None for c in run["curve"][k]] for k in ("grad_cos_real_wm", "grad_cos_real")]
            assert same[0] == same[1], name
        if run["arm"] in ("dense_calib", "dense_calib_ordered"):  # anchors excluded: a measure of its own
            wm = [c for c in run["curve"]["grad_cos_real_wm"] if c == c]
            assert wm and all(-1 - 1e-6 <= c <= 1 + 1e-6 for c in wm) and wm != cosines, name
        if run["arm"] in ("dense_calib", "dense_calib_ordered"):
            assert run["stats"][-1]["calibrated"], f"{name}: Online Debiasing never fitted"
            assert any(s["anchor_weight"] != 1.0 for s in run["stats"]), f"{name}: the anchor weight never moved"
    again = _reproduce(out)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {r["status"] for r in json.loads(again.stdout)["runs"]} == {"skipped"}


def test_every_arm_trains_through_the_kits_correction_step(tmp_path, monkeypatch):
    "The arms are the core's methods, run by the core's WMRLCorrector (counted), not by a copy of it."
    from wmrl.core import correction
    from wmrl.embodied.loop import ARMS, EmbodiedConfig, run_embodied
    calls = []
    original = correction.WMRLCorrector.correct
    def counting(self, *args, **kwargs):
        calls.append(self.config.method)
        return original(self, *args, **kwargs)
    monkeypatch.setattr(correction.WMRLCorrector, "correct", counting)
    tiny = dict(train_tasks=("reach-v3",), heldout_tasks=("drawer-close-v3",), train_inits=4, eval_inits=(40,),
                rollouts_per_init=2, groups_per_step=3, steps=2, budget=100, demos_per_task=1, sft_epochs=5,
                wm_inits=2, wm_noises=(0.0, 2.0), wm_epochs=5, cache_dir=str(tmp_path / "cache"))
    for arm, method in ARMS.items():
        metrics = run_embodied(EmbodiedConfig(method=method, **tiny), tmp_path / arm, progress=False)
        assert metrics["arm"] == arm
    assert calls == [m for m in ARMS.values() for _ in range(2)]


def test_the_pixel_world_model_trains_once_scores_every_step_and_resumes(tmp_path):
    """world_model='pixels': the CNN trains once into the cache (on noisy experts and a behaviour policy of its own
    seed), scores every dense step from frames rendered off the recorded states, and a killed run resumes to the
    metrics of an unbroken one."""
    from wmrl.embodied.loop import WM_POLICY_SEED, EmbodiedConfig, run_embodied
    from wmrl.embodied.pixels import load_pixel_model
    tiny = dict(method="wmrl", world_model="pixels", train_tasks=("reach-v3",), heldout_tasks=("drawer-close-v3",),
                train_inits=4, eval_inits=(40,), rollouts_per_init=2, groups_per_step=3, steps=2, budget=60,
                demos_per_task=1, sft_epochs=5, wm_inits=2, wm_noises=(0.0, 2.0), wm_policy_rollouts=2,
                cache_dir=str(tmp_path / "cache"))
    config = EmbodiedConfig(**tiny)
    assert run_embodied(config, tmp_path / "killed", progress=False, stop_after=1) == {"stopped_at": 1}
    resumed = run_embodied(config, tmp_path / "killed", progress=False)
    whole = run_embodied(config, tmp_path / "whole", progress=False)
    (model_file,) = (tmp_path / "cache").glob("pixel_model_*.npz")
    assert resumed["arm"] == "dense_calib_pixels"
    assert resumed["world_model"]["fingerprint"] == load_pixel_model(model_file).fingerprint
    assert len(list((tmp_path / "cache").glob("sft_*.pt"))) == 2  # the arm's seed and the behaviour policy's
    assert WM_POLICY_SEED != config.seed
    assert whole["ledger"]["wm_cpu_s"] > 0  # rendering and reading are charged to the world model
    assert resumed["heldout"]["Overall"] == whole["heldout"]["Overall"]
    assert resumed["curve"]["train_success"] == whole["curve"]["train_success"]


def test_bad_grid_is_one_line_on_stderr(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmethods: [sparse]\nseeds: [0]\n")
    wmrl = Path(sys.executable).parent / "wmrl"
    done = subprocess.run([str(wmrl), "reproduce", "embodied", "--grid", str(bad), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "unknown methods ['sparse']" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_slice_of_seeds_outside_the_grid_is_one_line_on_stderr(tmp_path):
    "`--seeds` runs a slice of a grid (the long grid is run a slice at a time); a seed the grid lacks is an error."
    wmrl = Path(sys.executable).parent / "wmrl"
    done = subprocess.run([str(wmrl), "reproduce", "embodied", "--size", "long", "--seeds", "0", "99", "--out",
                           str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--seeds [99] are not seeds of this grid" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_importing_the_embodied_modules_loads_no_simulator_or_torch():
    code = ("import json, sys, wmrl.embodied.report, wmrl.embodied.loop, wmrl.embodied.policy, wmrl.embodied.progress, "
            "wmrl.embodied.pixels, wmrl.embodied.sim, wmrl.embodied.libero, wmrl.embodied.vla_grpo; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'torch', 'metaworld', 'mujoco', 'gymnasium', 'libero', 'robosuite'})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_template_parameters_are_the_configs_knobs():
    """Papermill only warns about a parameter the template lacks, and the run then still sees it: a knob missing from
    the parameters cell is undocumented, not broken. Every EmbodiedConfig field is one documented line of the template."""
    import papermill

    from wmrl.embodied.loop import EmbodiedConfig
    params = papermill.inspect_notebook(str(Path(__file__).resolve().parents[1] / "reproductions" / "embodied.ipynb"))
    assert set(params) - {"out_dir", "progress"} == set(EmbodiedConfig.__dataclass_fields__)
    assert [name for name, p in params.items() if not p["help"]] == []
