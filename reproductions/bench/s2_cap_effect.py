"""The outlier-proof anchor weight against the release's, seed by seed (issue 22). Two grids of the same method on the
same seeds and streams, one with the release's uncapped s² (CorrectionConfig(s2_cap=None)) and one with the cap:
what the weight did (steps at the clip, its mean, the largest per-step s²) and what the held-out score did at every
matched step (paired t-intervals, Holm over the steps) and at the plateau (windows fixed in code).

    python reproductions/bench/s2_cap_effect.py reproductions/results/autoresearch_long reproductions/results/autoresearch_long_s2cap
        [--method wmrl] [--w-max 4.0]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from diagnostics import t_interval  # noqa: E402
from matched_steps import load_curves  # noqa: E402


def weight_series(folder: Path, method: str) -> dict[int, dict[str, np.ndarray]]:
    "{seed: {'w': anchor weight per step, 's2': per-step s² before the EMA}} from runs.json or a grid's metrics."
    if (folder / "runs.json").is_file():
        rows = [r for r in json.loads((folder / "runs.json").read_text()) if r["method"] == method]
        return {int(r["seed"]): {"w": np.asarray(r["anchor_weight"], float), "s2": np.asarray(r["s2_oos"], float)} for r in rows}
    out = {}
    for path in sorted(folder.glob(f"{method}__seed*/metrics.json")):
        run = json.loads(path.read_text())
        out[int(run["config"]["seed"])] = {"w": np.array([h["corr_anchor_weight"] for h in run["history"]], float),
                                           "s2": np.array([h["corr_s2_oos_step_mean"] for h in run["history"]], float)}
    return out


def weight_table(series: dict, w_max: float) -> dict:
    "Per-seed measures of the weight, then their mean and 95% t-interval over seeds."
    per_seed = {seed: {"share_at_clip": float(np.mean(s["w"] >= w_max - 1e-9)), "mean_w": float(np.nanmean(s["w"])),
                       "max_s2": float(np.nanmax(s["s2"])) if np.isfinite(s["s2"]).any() else float("nan")}
                for seed, s in sorted(series.items())}
    summary = {}
    for measure in ("share_at_clip", "mean_w", "max_s2"):
        values = np.array([v[measure] for v in per_seed.values()])
        summary[measure] = (float(np.nanmean(values)), *t_interval(values), float(np.nanmax(values)))
    return {"per_seed": per_seed, "summary": summary}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("release", type=Path, help="the grid (or curated folder) run with s2_cap=None")
    parser.add_argument("capped", type=Path, help="the same grid with the cap")
    parser.add_argument("--method", default="wmrl")
    parser.add_argument("--w-max", type=float, default=4.0, help="the weight's clip (CorrectionConfig.w_max)")
    parser.add_argument("--last-evals", type=int, default=4)
    args = parser.parse_args(argv)
    from wmrl.autoresearch.matched import matched_steps, plateau_comparison
    try:
        curves, weights = {}, {}
        for arm, folder in (("release", args.release), ("capped", args.capped)):
            curves[arm] = load_curves(folder, "executions")[args.method]
            weights[arm] = weight_table(weight_series(folder, args.method), args.w_max)
    except (OSError, KeyError, ValueError) as err:
        print(f"s2_cap_effect: {err!r} (both folders need runs of {args.method!r})", file=sys.stderr)
        return 2
    print("| rule | steps with w at the clip | mean w | largest per-step s² (max over seeds) |\n|---|---|---|---|")
    for arm, table in weights.items():
        clip, mean_w, s2 = (table["summary"][m] for m in ("share_at_clip", "mean_w", "max_s2"))
        print(f"| {arm} | {100 * clip[0]:.1f}% [{100 * clip[1]:.1f}, {100 * clip[2]:.1f}] (max seed {100 * clip[3]:.0f}%) | "
              f"{mean_w[0]:.2f} [{mean_w[1]:.2f}, {mean_w[2]:.2f}] | {s2[0]:.1f} ({s2[3]:.1f}) |")
    rows = matched_steps(curves, "capped", "release")
    print("\n| step | seeds | capped − release | 95% t | p | Holm p |\n|---:|---:|---:|---|---:|---:|")
    for r in rows:
        print(f"| {r['step']} | {len(r['seeds'])} | {r['mean']:+.2f} | [{r['t_low']:+.2f}, {r['t_high']:+.2f}] | {r['p']:.3f} | {r['p_holm']:.3f} |")
    gap = plateau_comparison(curves, "capped", "release", args.last_evals)
    if "why_nan" in gap:
        print(f"\nlevels: not compared ({gap['why_nan']})")
    else:
        print(f"\nlevels over the last {args.last_evals} evaluations: capped − release {gap['mean']:+.2f} "
              f"[{gap['t_low']:+.2f}, {gap['t_high']:+.2f}] (95% t), p = {gap['p']:.3f}")
    print(json.dumps({"weights": weights, "matched_steps": rows, "plateau_comparison": gap}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
