"""Active anchors in the gradient oracle (issue 48, item 4): bias² and variance of wmrl_ppi under three anchor plans at
equal expected real executions, along real-execution GRPO's trajectory, with the statistics the grid's header fixed.

    python reproductions/bench/active_oracle.py DIR --out reproductions/results/autoresearch_active_oracle

DIR is the output folder of `wmrl reproduce autoresearch --grid reproductions/grids/autoresearch_active_oracle.yaml`.
Writes active_oracle.json (every number of the README), active_oracle.md and active_oracle.png.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

from wmrl.core.active import ResidualScore
from wmrl.core.oracle import seed_clustered

ESTIMATORS = ("wmrl_ppi", "wmrl_ppi_poisson", "wmrl_ppi_active")
ORACLE = "static/group"
FITTED_FROM = 8  # the grid's header: steps >= 8, where the active score can be fitted (16 anchor groups at 2 a step)
CONTRASTS = (("wmrl_ppi_active", "wmrl_ppi_poisson"), ("wmrl_ppi_active", "wmrl_ppi"), ("wmrl_ppi_poisson", "wmrl_ppi"))


def load(folder: Path) -> dict[int, dict]:
    "{seed: {'steps': [...], 'probes': {estimator: [row, ...]}, 'score_features': [...]}} of every finished run."
    runs = {}
    for metrics_path in sorted(folder.glob("grpo_real__seed*/metrics.json")):
        metrics = json.loads(metrics_path.read_text())
        seed = int(metrics["config"]["seed"])
        steps, probes = [], {name: [] for name in ESTIMATORS}
        for row in metrics["history"]:
            oracles = (row.get("oracle") or {}).get("oracles", {})
            if ORACLE not in oracles:
                continue
            steps.append(int(row["step"]))
            for name in ESTIMATORS:
                probes[name].append(oracles[ORACLE][name])
        runs[seed] = {"steps": steps, "probes": probes, "score_features": score_features(metrics_path.parent)}
    if not runs:
        raise SystemExit(f"active_oracle: no grpo_real__seed*/metrics.json under {folder}")
    return runs


def score_features(run_dir: Path) -> dict | None:
    """The active shadow's residual score at the end of the run (its checkpointed state): the features it used, the
    anchor groups it had seen, and each slope's |t| in the fit on both features (a diagnostic, not the endpoint: the
    score keeps a slope only at |t| >= its gate)."""
    path = run_dir / "checkpoint.json"
    if not path.is_file():
        return None
    state = json.loads(path.read_text()).get("probe", {}).get(ORACLE, {}).get("shadows", {}).get("wmrl_ppi_active")
    if not state:
        return None
    score = ResidualScore()
    score.load_state_dict(state["score"])
    a, b = score.xtx, score.xty
    beta = np.linalg.lstsq(a, b, rcond=None)[0]
    rss = max(score.yty - 2 * beta @ b + beta @ a @ beta, 0.0)
    se = np.sqrt(rss / max(score.weight - len(b), 1e-12) * np.clip(np.diag(np.linalg.pinv(a)), 0, None))
    t = [round(float(abs(x) / e), 2) if e > 0 else None for x, e in zip(beta[1:], se[1:])]
    return {"used": [int(i) for i in score.used_features()], "anchor_groups": int(score.n_seen), "t": t,
            "gate": score.gate}


def per_seed(runs: dict, name: str, measure: str, first: int = FITTED_FROM) -> dict[int, list[float]]:
    "{seed: the measure at each probed step >= first}."
    return {seed: [p[measure] for s, p in zip(run["steps"], run["probes"][name]) if s >= first]
            for seed, run in runs.items()}


def ratio(runs: dict, a: str, b: str, first: int = FITTED_FROM, level: float = 0.95) -> dict:
    "Paired by seed: exp of the mean log(var_a / var_b) of the seeds' step means, with a t-interval over seeds."
    va, vb = per_seed(runs, a, "var", first), per_seed(runs, b, "var", first)
    logs = np.array([math.log(np.mean(va[s]) / np.mean(vb[s])) for s in sorted(va) if va[s] and np.mean(vb[s]) > 0])
    out = {"ratio": float(math.exp(logs.mean())) if logs.size else math.nan, "low": math.nan, "high": math.nan,
           "n_seeds": int(logs.size), "per_seed": [round(float(math.exp(x)), 4) for x in logs]}
    if logs.size >= 2:
        half = stats.t.ppf(0.5 + level / 2, logs.size - 1) * logs.std(ddof=1) / math.sqrt(logs.size)
        out.update(low=float(math.exp(logs.mean() - half)), high=float(math.exp(logs.mean() + half)))
    out["reading"] = ("helps" if out["high"] < 1 else "hurts" if out["low"] > 1 else "no difference shown") \
        if math.isfinite(out["low"]) else "too few seeds"
    return out


def report(runs: dict) -> dict:
    "Every number the README quotes."
    table = {}
    for name in ESTIMATORS:
        table[name] = {window: {measure: seed_clustered(per_seed(runs, name, measure, first))
                                for measure in ("bias2", "var", "anchors")}
                       for window, first in (("fitted", FITTED_FROM), ("all", 0))}
        table[name]["exact"] = all(p["exact"] for run in runs.values() for p in run["probes"][name])
        table[name]["max_bias2"] = max(p["bias2"] for run in runs.values() for p in run["probes"][name])
    return {"oracle": ORACLE, "seeds": sorted(runs), "steps": sorted({s for r in runs.values() for s in r["steps"]}),
            "fitted_from": FITTED_FROM, "estimators": table,
            "contrasts": {f"{a}/{b}": ratio(runs, a, b) for a, b in CONTRASTS},
            "score_features": {str(seed): run["score_features"] for seed, run in runs.items()}}


def _ci(entry: dict, digits: int = 3) -> str:
    return f"{entry['mean']:.{digits}f} [{entry['ci_low']:.{digits}f}, {entry['ci_high']:.{digits}f}]"


def markdown(rep: dict) -> str:
    lines = [f"Seeds {rep['seeds']}, steps {rep['steps'][0]}–{rep['steps'][-1]}, oracle `{rep['oracle']}`; "
             f"95% t over seeds of each seed's mean over steps ≥ {rep['fitted_from']}. Bias² is the largest over every probe (its known answer: 0).", "",
             "| estimator | anchors a step | bias² (max over probes) | variance, steps ≥ 8 | variance, all steps |",
             "|---|---|---|---|---|"]
    for name, e in rep["estimators"].items():
        lines.append(f"| `{name}` | {e['fitted']['anchors']['mean']:.3f} | {e['max_bias2']:.1e} | "
                     f"{_ci(e['fitted']['var'])} | {_ci(e['all']['var'])} |")
    lines += ["", "| variance ratio (paired by seed, steps ≥ 8) | ratio [95% t] | per seed | reading |", "|---|---|---|---|"]
    for key, c in rep["contrasts"].items():
        a, b = key.split("/")
        lines.append(f"| `{a}` / `{b}` | {c['ratio']:.3f} [{c['low']:.3f}, {c['high']:.3f}] | {c['per_seed']} | {c['reading']} |")
    lines += ["", "The active score at the end of each run (features 0: the group's predicted spread, 1: m(1 − m) of its "
              "mean; |t| of each slope in the fit on both, kept at |t| ≥ the gate):", "",
              "| seed | anchor groups seen | features used | |t| of the slopes |", "|---|---|---|---|"]
    for seed, score in rep["score_features"].items():
        if score:
            lines.append(f"| {seed} | {score['anchor_groups']} | {score['used'] or 'none'} | {score['t']} |")
    return "\n".join(lines) + "\n"


def plot(runs: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for name in ESTIMATORS:
        steps = sorted({s for r in runs.values() for s in r["steps"]})
        means = [np.mean([p["var"] for r in runs.values() for s2, p in zip(r["steps"], r["probes"][name]) if s2 == s])
                 for s in steps]
        style = {"wmrl_ppi_active": dict(ls="--", marker="x", ms=5)}.get(name, dict(marker="o", ms=3))
        ax.plot(steps, means, label=name, **style)
    ax.axvline(FITTED_FROM - 0.5, color="grey", lw=0.8, ls="--")
    ax.text(FITTED_FROM, ax.get_ylim()[1] * 0.95, "score can be fitted", fontsize=8, va="top")
    ax.set(xlabel="GRPO step", ylabel="variance / |g|² (mean over seeds)",
           title="wmrl_ppi's gradient variance, three anchor plans, equal executions", )
    ax.title.set_fontsize(10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="write active_oracle.{json,md,png} here")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"active_oracle: {args.folder} is not a folder", file=sys.stderr)
        return 2
    runs = load(args.folder)
    rep = report(runs)
    text = markdown(rep)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "active_oracle.json").write_text(json.dumps(rep, indent=1) + "\n")
        (args.out / "active_oracle.md").write_text(text)
        plot(runs, args.out / "active_oracle.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
