"""The paper's protocol first: wmrl − grpo_real at every evaluation step both methods share, with paired t-intervals,
Holm's correction over the steps, the compute ratio at each step (the ceiling of an equal-score ratio), and where
the two level off over windows fixed in code (wmrl.autoresearch.matched). Reads a curated results folder (runs.json)
or a grid folder (*/metrics.json); prints JSON and a markdown table.

    python reproductions/bench/matched_steps.py reproductions/results/autoresearch_long [--first wmrl] [--second grpo_real]
        [--last-evals 4]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from wmrl.autoresearch.matched import curves_from_compact, curves_from_metrics, matched_steps, plateau_comparison


def load_curves(folder: Path, cost: str = "sandbox_cpu_s") -> dict:
    """Curves of a grid folder or a curated one. cost="executions" counts training executions instead of measured
    CPU-seconds (each run's total spread evenly over its steps): machine-independent, so grids of different days compare."""
    if any(folder.glob("*/metrics.json")):
        from wmrl.autoresearch.summary import load_runs
        runs = load_runs(folder)
        curves = curves_from_metrics(runs)
        totals = {(m, r["config"]["seed"]): (r["totals"]["n_executions"], r["steps_done"]) for m, rs in runs.items() for r in rs}
    elif (folder / "runs.json").is_file():
        rows = json.loads((folder / "runs.json").read_text())
        curves = curves_from_compact(rows)
        totals = {(r["method"], int(r["seed"])): (r["n_executions"], max(e[0] for e in r["evals"])) for r in rows}
    else:
        raise FileNotFoundError(f"{folder} has neither */metrics.json nor runs.json")
    if cost == "executions":
        for method, seeds in curves.items():
            for seed, curve in seeds.items():
                n, steps = totals[(method, seed)]
                curve["cost"] = [n / steps * step for step in curve["steps"]]
    return curves


def contrasts(curves: dict) -> tuple[int, dict]:
    "The pre-registered contrasts (wmrl.autoresearch.summary.CONTRASTS) at the last step every run evaluates, Holm over them."
    from wmrl.autoresearch.summary import CONTRASTS
    from wmrl.core.paired import holm, paired_contrast
    step = max(set.intersection(*[set(c["steps"]) for seeds in curves.values() for c in seeds.values()]))
    score = lambda method: {s: c["score"][c["steps"].index(step)] for s, c in curves[method].items()}
    out = {name: paired_contrast(score(a), score(b)) for name, (a, b) in CONTRASTS.items() if a in curves and b in curves}
    adjusted = holm({name: c["p"] for name, c in out.items()})
    return step, {name: {**c, "p_holm": adjusted[name]} for name, c in out.items()}


def plot(curves: dict, cost: str, path: Path) -> None:
    "Mean held-out score over seeds (95% t band) against training steps and against cumulative cost, per method."
    import matplotlib.pyplot as plt
    import numpy as np
    from scipy import stats
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for method, seeds in sorted(curves.items()):
        steps = sorted(set.intersection(*[set(c["steps"]) for c in seeds.values()]))
        score = np.array([[c["score"][c["steps"].index(s)] for s in steps] for c in seeds.values()])
        spent = np.array([[c["cost"][c["steps"].index(s)] for s in steps] for c in seeds.values()]).mean(0)
        mean, half = score.mean(0), stats.t.ppf(0.975, len(score) - 1) * score.std(0, ddof=1) / np.sqrt(len(score))
        trained = np.array(steps) > 0  # a log axis has no 0: the compute panel starts at the first trained step
        for ax, x, keep in ((axes[0], np.array(steps), np.ones_like(trained)), (axes[1], spent, trained)):
            ax.plot(x[keep], mean[keep], "o-", ms=3, label=f"{method} ({len(score)} seeds)")
            ax.fill_between(x[keep], (mean - half)[keep], (mean + half)[keep], alpha=0.15)
    axes[0].set(xlabel="training step", ylabel="held-out percentile (avg@8)", title="matched steps")
    axes[1].set(xlabel=f"cumulative training {cost.replace('_', ' ')}", ylabel="held-out percentile (avg@8)",
                title="compute", xscale="log")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _f(value: float, digits: int = 2) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:+.{digits}f}" if digits == 2 else f"{value:.{digits}f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, nargs="+", help="one or more grids on the same seeds (their methods are merged)")
    parser.add_argument("--first", default="wmrl")
    parser.add_argument("--second", default="grpo_real")
    parser.add_argument("--last-evals", type=int, default=4)
    parser.add_argument("--contrasts", action="store_true", help="also the grid's pre-registered contrasts with Holm's correction")
    parser.add_argument("--cost", choices=["sandbox_cpu_s", "executions"], default="sandbox_cpu_s",
                        help="the compute the ratios count: measured training sandbox CPU-s, or training executions")
    parser.add_argument("--plot", type=Path, default=None, help="draw every method's mean curve (95%% t) against steps and cost")
    args = parser.parse_args(argv)
    try:
        curves = {}
        for folder in args.folder:
            curves.update(load_curves(folder, args.cost))
        if args.first not in curves or args.second not in curves:
            raise ValueError(f"{[str(f) for f in args.folder]} need runs of {args.first} and {args.second}; they have {sorted(curves)}")
        if args.last_evals < 1:
            raise ValueError(f"--last-evals must be >= 1, got {args.last_evals}")
    except (OSError, ValueError) as err:
        print(f"matched_steps: {err}", file=sys.stderr)
        return 2
    if args.contrasts:
        step, table = contrasts(curves)
        print(f"| contrast at step {step} | mean | bootstrap 95% | t 95% | p | Holm p |\n|---|---:|---|---|---:|---:|")
        for name, c in table.items():
            print(f"| {name} | {_f(c['mean'])} | [{_f(c['ci_low'])}, {_f(c['ci_high'])}] | [{_f(c['t_low'])}, {_f(c['t_high'])}] | "
                  f"{_f(c['p'], 3)} | {_f(c['p_holm'], 3)} |")
        print()
    if args.plot:
        plot(curves, args.cost, args.plot)
    rows = matched_steps(curves, args.first, args.second)
    gap = plateau_comparison(curves, args.first, args.second, args.last_evals)
    print(f"| step | seeds | {args.first} − {args.second} | 95% t | p | Holm p | compute ratio at this step |")
    print("|---:|---:|---:|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['step']} | {len(r['seeds'])} | {_f(r['mean'])} | [{_f(r['t_low'])}, {_f(r['t_high'])}] | "
              f"{_f(r['p'], 3)} | {_f(r['p_holm'], 3)} | {_f(r['cost_ratio'], 2).lstrip('+')}× |")
    from wmrl.core.paired import ratio_at_equal_score
    final = ratio_at_equal_score(curves[args.second], curves[args.first], 1.0)
    print(f"\nequal score at {args.second}'s last evaluation ({final['target']:.2f}), in {args.cost}: " + (f"{final['ratio']:.2f}× [{final['ci_low']:.2f}, {final['ci_high']:.2f}]"
                             if math.isfinite(final.get("ratio", math.nan)) else f"no ratio ({final.get('why_ratio')})")
          + f"; {100 * final['share_not_reached']:.1f}% of resamples never reach it")
    equal = ratio_at_equal_score(curves[args.second], curves[args.first], 1.0, target_window=args.last_evals)
    if "why_nan" not in gap:  # a level read over a window that reaches step 0 is no level
        print(f"\nequal score at {args.second}'s level over its last {args.last_evals} evaluations ({equal['target']:.2f}): "
              + (f"{equal['ratio']:.2f}× [{equal['ci_low']:.2f}, {equal['ci_high']:.2f}]" if math.isfinite(equal.get("ratio", math.nan))
                 else f"no ratio ({equal.get('why_ratio')}; {100 * equal['share_not_reached']:.1f}% of resamples never reach it)"))
    if "why_nan" in gap:
        print(f"\nlevels: not compared ({gap['why_nan']})")
        print(json.dumps({"matched_steps": rows, "plateau_comparison": gap}, default=str))
        return 0
    print(f"\nlevels ({args.first} over {gap['windows'][args.first]}, {args.second} over {gap['windows'][args.second]}): "
          f"{args.first} − {args.second} {_f(gap['mean'])} [{_f(gap['t_low'])}, {_f(gap['t_high'])}] (95% t), "
          f"bootstrap [{_f(gap['ci_low'])}, {_f(gap['ci_high'])}], p = {_f(gap['p'], 3)}")
    print(json.dumps({"matched_steps": rows, "plateau_comparison": gap}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
