"""The verl recipe (nbs/516_verl_recipe) as a user runs it: its plan and overrides from an empty folder outside the
repository, and the README's numbers against the plan they come from."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wmrl.adapters.verl_recipe", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)


def test_the_plan_from_an_empty_folder_holds_the_readme(tmp_path):
    done = run(tmp_path, "plan", "qwen3.5-4b-mledojo")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.rstrip().endswith("FITS")
    peak = re.search(r"training GPU, rollout awake\s+([\d.]+) GiB of (\d+)", out).groups()
    low, high = re.search(r"([\d,]+) to ([\d,]+) GPU-h on 24 GPUs", out).groups()
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Use WMRL inside verl", 1)[1].split("\n## ", 1)[0]
    assert f"peaks at {peak[0]} GiB of {peak[1]}" in section
    assert f"{low} to {high} GPU-h for 160 steps" in section
    ratio = float(low.replace(",", "")) / 286
    assert f"at least {ratio:.1f}x the paper's 286 GPU-h" in section


def test_overrides_and_a_bad_recipe(tmp_path):
    done = run(tmp_path, "overrides", "qwen3.5-4b-mledojo")
    assert done.returncode == 0 and "algorithm.adv_estimator=wmrl.wmrl" in done.stdout.split()
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nnodess: 3\n")
    done = run(tmp_path, "plan", str(bad))
    assert done.returncode == 2 and done.stderr.strip() == "verl_recipe: bad.yaml: unknown key 'nodess'; did you mean 'nodes'?"
