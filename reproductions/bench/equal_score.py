"""Compute at equal held-out score across two AutoResearch grid folders; prints one JSON object and draws a figure.

`wmrl reproduce autoresearch` measures the speedup inside one grid. When the other methods were trained longer in a
second grid (reproductions/grids/autoresearch_long.yaml), this script sets them against real-execution GRPO of the
first: S* = grpo_real's final held-out percentile there (mean over seeds); each method's cost is its mean cumulative
training compute at its first evaluation whose seed-mean percentile is >= S* (`wmrl.autoresearch.summary.speedup_at_equal_score`).

    python reproductions/bench/equal_score.py --real FULL_DIR --other LONG_DIR [--figure out.png]
"""
from __future__ import annotations

import argparse
import json
import math
import sys

from wmrl.autoresearch.summary import load_runs, mean_curve, speedup_at_equal_score

FIELDS = {"sandbox": "sandbox_cpu_s", "total": "total_compute_s"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", required=True, help="grid folder holding the grpo_real runs")
    parser.add_argument("--other", required=True, help="grid folder holding the runs to compare (any methods)")
    parser.add_argument("--figure", default=None, help="write score vs training sandbox CPU-s here")
    args = parser.parse_args(argv)
    real_runs = load_runs(args.real).get("grpo_real")
    if not real_runs:
        print(json.dumps({"error": f"no grpo_real runs under {args.real}"}))
        return 2
    others = load_runs(args.other)
    out = {"target": mean_curve(real_runs, FIELDS["sandbox"])["score"][-1], "methods": {}}
    for method, runs in sorted(others.items()):
        row = {"seeds": sorted(r["config"]["seed"] for r in runs), "curve": mean_curve(runs, FIELDS["sandbox"])}
        for name, field in FIELDS.items():
            value, why = speedup_at_equal_score(real_runs, runs, field)
            row[f"speedup_{name}"] = None if math.isnan(value) else round(value, 2)
            row[f"why_{name}"] = why.replace("wmrl", method)
        out["methods"][method] = row
    out["grpo_real_curve"] = mean_curve(real_runs, FIELDS["sandbox"])
    if args.figure:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 3.6))
        for method, curve in [("grpo_real (full grid)", out["grpo_real_curve"])] + [
                (f"{m} (long grid)", row["curve"]) for m, row in out["methods"].items()]:
            ax.errorbar(curve["cost"], curve["score"], yerr=curve["score_std"], marker="o", capsize=2, label=method)
        ax.axhline(out["target"], ls=":", color="grey", label="S* (grpo_real final)")
        ax.set_xlabel("training sandbox CPU-s (mean over seeds)")
        ax.set_ylabel("held-out percentile (avg@8)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.figure, dpi=120)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
