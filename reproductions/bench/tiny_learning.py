"""The CPU run that visibly learns: `wmrl train tiny-cpu-learn` over several seeds, its curves as JSON and a figure.

    python reproductions/bench/tiny_learning.py [--seeds 0 1 2] [--out reproductions/results/tiny_learning]

Per seed and step it reads the run's metrics.json: TRL's `reward` (what the policy trains on: real rewards on the
anchor group, calibrated predictions elsewhere), `rewards/real_mean` (executed rows only), `wmrl/anchor_weight`,
the policy's entropy, and `good_share`, the share of the step's rows whose text picked the program that ranks
(read off the world model's prediction, which is 0 exactly for the program that does not compile: the static
checker parses it). Across seeds: mean and sample standard deviation per step, and the paired first-vs-last
difference of the good share (last 5 steps minus first 5, per seed) with a t interval over seeds.
`--replot` recomputes the summary and the figure from an existing curves.json without training.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def run_seed(seed: int, runs: Path, extra: list[str]) -> dict:
    "Train one seed in a subprocess; its per-step curves."
    out = runs / f"seed{seed}"
    started = time.process_time()
    done = subprocess.run([sys.executable, "-m", "wmrl.cli", "train", "tiny-cpu-learn", f"seed={seed}",
                           f"output_dir={out}", *extra], capture_output=True, text=True, cwd=REPO)
    if done.returncode:
        raise RuntimeError(f"seed {seed} failed: {done.stdout[-2000:]} {done.stderr[-2000:]}")
    metrics = json.loads((out / "metrics.json").read_text())
    logged = [h for h in metrics["log_history"] if "reward" in h]
    history = metrics["wmrl_history"]
    good = [float(np.mean(np.array(h["predicted"], dtype=float) > 0.0)) for h in history]
    return {"seed": seed, "steps": len(logged), "reward": [h["reward"] for h in logged],
            "real_mean": [h.get("rewards/real_mean") for h in logged],
            "anchor_weight": [h["wmrl/anchor_weight"] for h in logged], "entropy": [h["entropy"] for h in logged],
            "good_share": good, "wall_s": metrics["summary"]["wall_s"],
            "parent_cpu_s": time.process_time() - started}


def summarise(runs: list[dict]) -> dict:
    "Mean and sample std per step across seeds, and the paired early-vs-late change of the good share."
    summary = {}
    for key in ("reward", "real_mean", "anchor_weight", "entropy", "good_share"):
        values = np.array([[np.nan if v is None else v for v in r[key]] for r in runs], dtype=float)
        summary[key] = {"mean": np.nanmean(values, axis=0).tolist(), "std": np.nanstd(values, axis=0, ddof=1).tolist()}
    from scipy import stats
    deltas = np.array([np.mean(r["good_share"][-5:]) - np.mean(r["good_share"][:5]) for r in runs])
    half = stats.t.ppf(0.975, len(deltas) - 1) * deltas.std(ddof=1) / np.sqrt(len(deltas)) if len(deltas) > 1 else float("nan")
    summary["good_share_gain"] = {"per_seed": deltas.tolist(), "mean": float(deltas.mean()),
                                  "ci95": [float(deltas.mean() - half), float(deltas.mean() + half)]}
    summary["anchor_weight_left_1"] = all(any(abs(w - 1.0) > 1e-6 for w in r["anchor_weight"]) for r in runs)
    return summary


def plot(summary: dict, path: Path, n_seeds: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for ax, keys, title in ((axes[0], ("good_share", "reward", "real_mean"), "reward and program choice"),
                            (axes[1], ("anchor_weight",), "anchor weight $w$")):
        for key in keys:
            mean, std = np.array(summary[key]["mean"]), np.array(summary[key]["std"])
            steps = np.arange(1, len(mean) + 1)
            ax.plot(steps, mean, label=key)
            ax.fill_between(steps, mean - std, mean + std, alpha=0.2)
        ax.set(xlabel="step", title=f"{title} (mean ± std, {n_seeds} seeds)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default=str(REPO / "reproductions" / "results" / "tiny_learning"))
    parser.add_argument("--runs", default=str(REPO / "runs" / "tiny_learning"), help="run folders (git-ignored)")
    parser.add_argument("--replot", action="store_true", help="summary and figure from the existing curves.json")
    parser.add_argument("overrides", nargs="*", help="config overrides for every seed (key=value)")
    args = parser.parse_args(argv)
    out, runs = Path(args.out), Path(args.runs)
    out.mkdir(parents=True, exist_ok=True)
    if args.replot:
        saved = json.loads((out / "curves.json").read_text())
        results, args.seeds, args.overrides = saved["runs"], saved["seeds"], saved.get("overrides", [])
    else:
        results = [run_seed(seed, runs, args.overrides) for seed in args.seeds]
    summary = summarise(results)
    command = "python reproductions/bench/tiny_learning.py --seeds " + " ".join(map(str, args.seeds)) + \
        "".join(f" {o}" for o in args.overrides)
    payload = {"command": command, "config": "reproductions/configs/tiny-cpu-learn.yaml", "seeds": args.seeds,
               "overrides": args.overrides, "machine": "2 shared CPU cores (load ~12 while it ran), torch CPU",
               "summary": summary, "runs": results}
    (out / "curves.json").write_text(json.dumps(payload, indent=1))
    plot(summary, out / "curves.png", len(args.seeds))
    print(json.dumps({"good_share_gain": summary["good_share_gain"], "anchor_weight_left_1": summary["anchor_weight_left_1"],
                      "wall_s": [r["wall_s"] for r in results]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
