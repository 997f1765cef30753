"""The anatomy bench's summaries: paired intervals of world models scored on the same rollouts, read back from the
per-seed lines a run leaves, so the README's paired numbers come from a command (no simulator needed here)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parents[1] / "reproductions" / "bench" / "embodied_anatomy.py"


def _line(seed, model, auc_mixed, failure):
    split = {"success_rate": 0.3, "auc": 0.8, "within_group_spearman": 0.2, "auc_mixed_groups": auc_mixed, "failure_ranking": failure}
    return json.dumps({"seed": seed, "model": model, "ID": split, "OOD": {**split, "failure_ranking": None}})


def test_paired_differences_from_saved_seed_lines(tmp_path):
    a, b = tmp_path / "run.seeds.jsonl", tmp_path / "ablation.seeds.jsonl"
    state, pixels, ablated = [0.6, 0.7, 0.65], [0.8, 0.75, 0.9], [0.4, 0.5, 0.45]
    a.write_text("\n".join([_line(s, "progress", state[s], 0.4) for s in range(3)] + [_line(s, "pixels", pixels[s], 0.0) for s in range(3)]) + "\n")
    b.write_text("\n".join(_line(s, "pixels", ablated[s], 0.1) for s in range(3)) + "\n")
    done = subprocess.run([sys.executable, str(BENCH), "--cache", "-", "--from-seeds", str(a), str(b), "--reference", "pixels"],
                          capture_output=True, text=True, check=True)
    paired = json.loads(done.stdout)["paired"]
    assert set(paired) == {"progress - pixels", "pixels@ablation.seeds - pixels"}
    diff = np.subtract(ablated, pixels)
    got = paired["pixels@ablation.seeds - pixels"]["ID"]["auc_mixed_groups"]
    assert abs(got["mean"] - diff.mean()) < 1e-12 and got["n"] == 3 and got["low"] < got["mean"] < got["high"]
    assert "failure_ranking" not in paired["progress - pixels"]["OOD"]  # undefined on every seed: no interval is made up


def test_the_readmes_layout_and_resolution_figures_are_what_the_saved_lines_print():
    "reproductions/results/embodied/README.md quotes these paired differences; the committed per-seed lines print them."
    results = BENCH.parents[1] / "results" / "embodied"
    files = [results / f"within_group_anatomy_t1{tag}.seeds.jsonl" for tag in ("", "_wm30", "_wm30_128px")]
    def paired(*paths):
        done = subprocess.run([sys.executable, str(BENCH), "--cache", "-", "--from-seeds", *map(str, paths), "--reference", "pixels"],
                              capture_output=True, text=True, check=True)
        return json.loads(done.stdout)["paired"]
    layouts = paired(*files)["pixels@within_group_anatomy_t1_wm30.seeds - pixels"]["ID"]
    resolution = paired(*files[1:])["pixels@within_group_anatomy_t1_wm30_128px.seeds - pixels"]["ID"]
    quoted = [(layouts, "failure_ranking", (0.114, 0.008, 0.219)), (layouts, "auc", (0.082, 0.044, 0.120)),
              (resolution, "failure_ranking", (0.013, -0.071, 0.096))]
    for table, key, numbers in quoted:
        assert tuple(round(table[key][k], 3) for k in ("mean", "low", "high")) == numbers, (key, table[key])
