"""Prediction-powered lanes in the toy bandit (beyond the paper): where the world model's bias is monotone,
non-monotone (arm-dependent) or the outcome is unpredictable, does wmrl stay on a floor, and do ppi / wmrl_ppi reach
real execution's gap? Each lane runs at the main step size γ = 2 and at γ = 0.5 for 4× the steps: Theorem 1's bias
floor does not move with γ, the noise floor does (∝ γ). Every variant shares the stream (common random numbers), so
contrasts are paired by seed. Writes bandit_ppi.json, bandit_ppi.md and bandit_ppi.png into --out; prints the tables.

    python reproductions/bench/bandit_ppi.py [--size full|quick] [--out reproductions/results/bandit_ppi]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from wmrl.core.paired import paired_contrast
from wmrl.toy.bandit import BanditConfig, final_gap, plot_gap_curves, risky_problem, simulate

LANES = {  # name: the corruption of the world model's prediction (wmrl.toy.lanes), with its strength B
    "monotone": {"corruption": "monotone", "bias": 0.2},
    "arm-dependent (non-monotone)": {"corruption": "arm", "bias": 0.2},
    "unpredictable outcome": {"corruption": "unpredictable", "bias": 0.2},
}
VARIANTS = ("grpo_real", "pure_wm", "wmrl", "anchors_only", "ppi", "wmrl_ppi")
SIZES = {"quick": {"seeds": 8, "steps": 500}, "full": {"seeds": 32, "steps": 2000}}
STEP_SIZES = ((2.0, 1), (0.5, 4))  # (γ, steps multiplier): the main setting, and a quarter of the step for 4× as long


def run_lane(name: str, size: str, step_size: float = 2.0, longer: int = 1) -> dict:
    knobs = {**SIZES[size], "steps": SIZES[size]["steps"] * longer}
    config = BanditConfig(variants=VARIANTS, step_size=step_size, log_every=20 * longer, **knobs, **LANES[name])
    started = time.time()
    run = simulate(risky_problem(), config)
    gaps = final_gap(run)  # (variants, seeds)
    by_seed = {v: dict(enumerate(gaps[run.variant(v)].tolist())) for v in VARIANTS}
    out = {"config": {k: getattr(config, k) for k in ("seeds", "steps", "step_size", "corruption", "bias", "scale", "anchor_fraction")},
           "seconds": round(time.time() - started, 1), "run": run,
           "gap": {v: {"mean": float(np.mean(list(by_seed[v].values()))),
                       "sd": float(np.std(list(by_seed[v].values()), ddof=1))} for v in VARIANTS},
           "real_exec_fraction": {v: float(run.real_exec_fraction[run.variant(v)].mean()) for v in VARIANTS}}
    out["contrasts"] = {f"{a} − {b}": paired_contrast(by_seed[a], by_seed[b]) for a, b in
                        (("wmrl", "grpo_real"), ("ppi", "grpo_real"), ("wmrl_ppi", "grpo_real"), ("wmrl_ppi", "wmrl"),
                         ("ppi", "wmrl"), ("ppi", "anchors_only"), ("wmrl_ppi", "anchors_only"))}
    return out


def markdown(results: dict, size: str) -> str:
    lines = [f"# Prediction-powered lanes in the toy bandit ({size}: {SIZES[size]['seeds']} seeds × {SIZES[size]['steps']} steps)",
             "", "Final optimality gap (mean over the last 10% of logged steps), mean ± sd over seeds; contrasts paired by "
             "seed, 95% t-interval. Command: `python reproductions/bench/bandit_ppi.py --size " + size + "`.", ""]
    for name, r in results.items():
        c = r["config"]
        lines += [f"## {name.split(' @ ')[0]} (B = {c['bias']}), γ = {c['step_size']:g}, {c['steps']} steps", "",
                  "| variant | final gap | executed for real |", "|---|---|---|"]
        lines += [f"| `{v}` | {g['mean']:.5f} ± {g['sd']:.5f} | {100 * r['real_exec_fraction'][v]:.0f}% |" for v, g in r["gap"].items()]
        lines += ["", "| contrast | mean | 95% t | p |", "|---|---|---|---|"]
        lines += [f"| {c} | {x['mean']:+.5f} | [{x['t_low']:+.5f}, {x['t_high']:+.5f}] | {x['p']:.3g} |" for c, x in r["contrasts"].items()]
        lines += ["", f"({r['seconds']} s)", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--out", type=Path, default=Path("reproductions/results/bandit_ppi"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results = {f"{name} @ γ={gamma:g}": run_lane(name, args.size, gamma, longer) for gamma, longer in STEP_SIZES
               for name in LANES}
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(STEP_SIZES), len(LANES), figsize=(5 * len(LANES), 3.6 * len(STEP_SIZES)), sharey=True)
    for ax, (name, r) in zip(axes.ravel(), results.items()):
        plot_gap_curves(r["run"], ax, variants=VARIANTS)
        ax.set_title(f"{name.split(' @ ')[0]}, B = {r['config']['bias']}, γ = {r['config']['step_size']:g}", fontsize=9)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(args.out / "bandit_ppi.png", dpi=110)
    for r in results.values():
        r.pop("run")
    (args.out / "bandit_ppi.json").write_text(json.dumps({"size": args.size, **SIZES[args.size], "lanes": results}, indent=1))
    report = markdown(results, args.size)
    (args.out / "bandit_ppi.md").write_text(report + "\n")
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
