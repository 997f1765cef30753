"""Paired contrasts of a committed AutoResearch grid from its runs.json (per-seed evaluations), with the paired
statistics of wmrl.core.paired: mean difference seed by seed, paired-bootstrap 95% CI, paired t-test p, the paired sd,
and the number of seeds a 2-point effect needs at that sd. Prints one JSON object; --out writes it and a table.

    python reproductions/bench/committed_contrasts.py reproductions/results/autoresearch_full/runs.json [--step 10] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from wmrl.autoresearch.summary import CONTRASTS
from wmrl.core.paired import paired_contrast, paired_power, seeds_needed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs_json")
    parser.add_argument("--step", type=int, default=10, help="training steps behind the evaluation compared")
    parser.add_argument("--out", default=None, help="write contrasts.json and contrasts.md here")
    args = parser.parse_args(argv)
    runs = json.loads(Path(args.runs_json).read_text())
    scores, start = {}, {}
    for run in runs:  # evals: [[steps_done, percentile, ...], ...]
        at = {int(s): float(x) for s, x, *_ in run["evals"]}
        scores.setdefault(run["method"], {})[run["seed"]] = at.get(args.step, float("nan"))
        start[run["seed"]] = at[0]
    pairs = dict(CONTRASTS, **{"grpo_real-wmrl": ("grpo_real", "wmrl"), "wmrl-pure_wm": ("wmrl", "pure_wm")})
    out = {"source": args.runs_json, "step": args.step,
           "step0_sd_over_seeds": float(np.std(list(start.values()), ddof=1)), "contrasts": {}}
    for name, (first, second) in pairs.items():
        if first in scores and second in scores:
            c = paired_contrast(scores[first], scores[second])
            c["seeds_for_2_points"] = seeds_needed(c["sd"]) if c["sd"] > 0 else None
            c["power_2_points_at_these_seeds"] = paired_power(c["sd"], len(c["seeds"])) if c["sd"] > 0 else None
            out["contrasts"][name] = c
    lines = ["| contrast | seeds | mean | 95% CI | p | paired sd | seeds for 2 points (power 0.8) |", "|---|---:|---:|---|---:|---:|---:|"]
    for name, c in out["contrasts"].items():
        lines.append(f"| {name} | {len(c['seeds'])} | {c['mean']:.2f} | [{c['ci_low']:.2f}, {c['ci_high']:.2f}] | "
                     f"{c['p']:.3f} | {c['sd']:.2f} | {c['seeds_for_2_points']} |")
    out["table"] = "\n".join(lines)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "contrasts.json").write_text(json.dumps(out, indent=1))
        (Path(args.out) / "contrasts.md").write_text(
            f"# Paired contrasts of {args.runs_json} at step {args.step}\n\nCommand: `python reproductions/bench/"
            f"committed_contrasts.py {args.runs_json} --step {args.step}`. Step-0 held-out sd over seeds (every method "
            f"of a seed has the same policy there): {out['step0_sd_over_seeds']:.2f} points.\n\n{out['table']}\n")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
