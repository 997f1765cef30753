"""Issue 43, Stage B, as pre-registered (reproductions/preregistration/dial_stage_b.md): does the paper's WMRL match
real-execution GRPO in training once its world model is good enough, and from which fidelity f on?

Reads the four Stage B grids (autoresearch_dial_b_grpo, _b090, _b098, _b100), each arm's per-seed level (the
mean of its held-out evaluations at steps 15 and 20), and prints for `wmrl` and for `wmrl_ppi` at each f the paired
TOST against grpo_real at ±3 points (Holm over the three f within each method), the crossover (the smallest f whose
Holm-adjusted TOST p is at most 0.05), the matched-step contrasts, and the integrity check of grpo_real against the
committed long grid. It refuses to print an endpoint below 8 complete seeds per arm (--interim stamps one).

    python reproductions/bench/dial_stage_b.py report RUNS/autoresearch_dial_b_grpo RUNS/autoresearch_dial_b090 \
        RUNS/autoresearch_dial_b098 RUNS/autoresearch_dial_b100 [--out reproductions/results/autoresearch_dial_b] [--interim]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from wmrl.core.paired import holm, paired_contrast, tost_paired

RESULTS = Path(__file__).resolve().parents[1] / "results"
FIDELITIES = (0.9, 0.98, 1.0)          # pre-registered
METHODS = ("wmrl", "wmrl_ppi")         # wmrl is the family the crossover is read from; wmrl_ppi is reported beside it
SEEDS = tuple(range(8))                # pre-registered
LEVEL_STEPS = (15, 20)                 # an arm's level: the mean of its evaluations at these steps
MARGIN, ALPHA, UNDERPOWERED_SD = 3.0, 0.05, 4.0
EVAL_STEPS = (5, 10, 15, 20)           # matched-step contrasts (secondary)


def arm_of(config: dict) -> str:
    "'grpo_real', or 'wmrl@0.9'-style labels from a run's config (its method and the dial's f)."
    if config["method"] == "grpo_real":
        return "grpo_real"
    model = config.get("world_model") or {}
    if model.get("name") != "dial" or config["method"] not in METHODS:
        raise ValueError(f"a run of {config['method']} with world model {model or 'static'} is no arm of Stage B")
    return f"{config['method']}@{float(model['f']):g}"


def load_lines(folders: list[Path]) -> list[dict]:
    "Every finished run of the grid folders as {arm, seed, evals: {step: score}, grad_norm}."
    from wmrl.autoresearch.summary import load_runs
    lines = []
    for folder in folders:
        for runs in load_runs(folder).values():
            for metrics in runs:
                lines.append({"arm": arm_of(metrics["config"]), "seed": int(metrics["config"]["seed"]),
                              "evals": {int(e["steps_done"]): float(e["heldout_percentile"]) for e in metrics["evals"]},
                              "grad_norm": [h.get("grad_norm") for h in metrics["history"]]})
    return lines


def levels(lines: list[dict]) -> dict[str, dict[int, float]]:
    "{arm: {seed: level}} for the runs that have every evaluation the level reads."
    out: dict[str, dict[int, float]] = {}
    for r in lines:
        if all(s in r["evals"] for s in LEVEL_STEPS):
            out.setdefault(r["arm"], {})[r["seed"]] = float(np.mean([r["evals"][s] for s in LEVEL_STEPS]))
    return out


def endpoints(lines: list[dict]) -> dict:
    """The registered statistics: per method, TOST of each f against grpo_real with Holm over the three f, the
    crossover, and whether the test could have passed (the observed paired sd against UNDERPOWERED_SD)."""
    lv = levels(lines)
    grpo = lv.get("grpo_real", {})
    result: dict = {"margin": MARGIN, "alpha": ALPHA, "level_steps": list(LEVEL_STEPS), "methods": {}}
    for method in METHODS:
        tests = {f: tost_paired(lv.get(f"{method}@{f:g}", {}), grpo, MARGIN, ALPHA) for f in FIDELITIES}
        adjusted = holm({str(f): t["p"] for f, t in tests.items()})
        rows = {}
        for f, t in tests.items():
            passed = math.isfinite(adjusted[str(f)]) and adjusted[str(f)] <= ALPHA
            rows[f"{f:g}"] = {**{k: t.get(k) for k in ("mean", "low", "high", "sd", "p", "seeds")},
                              "p_holm": adjusted[str(f)], "equivalent": passed,
                              "underpowered": not passed and bool(t.get("sd", 0) > UNDERPOWERED_SD)}
        crossing = next((f"{f:g}" for f in FIDELITIES if rows[f"{f:g}"]["equivalent"]), None)
        result["methods"][method] = {"by_f": rows, "crossover": crossing}
    result["matched_steps"] = {
        f"{method}@{f:g}": {str(step): paired_contrast(
            {r["seed"]: r["evals"][step] for r in lines if r["arm"] == f"{method}@{f:g}" and step in r["evals"]},
            {r["seed"]: r["evals"][step] for r in lines if r["arm"] == "grpo_real" and step in r["evals"]})
            for step in EVAL_STEPS} for method in METHODS for f in FIDELITIES}
    return result


def integrity(lines: list[dict], tolerance: float = 0.01) -> dict:
    "grpo_real here against the committed long grid's at steps 0-20: equal evaluations and equal gradient norms."
    from headline import _same_training  # a sibling script: the headline's training rule
    committed = {int(r["seed"]): r for r in json.loads((RESULTS / "autoresearch_long" / "runs.json").read_text())
                 if r["method"] == "grpo_real"}
    equal, differ, training = 0, [], {}
    for r in (x for x in lines if x["arm"] == "grpo_real" and x["seed"] in committed):
        was = {int(e[0]): float(e[1]) for e in committed[r["seed"]]["evals"]}
        for step, score in r["evals"].items():
            if step in was and abs(score - was[step]) <= tolerance:
                equal += 1
            elif step in was:
                differ.append([r["seed"], step, was[step], score])
        first = _same_training(committed[r["seed"]], r)  # the first step whose gradient norm differs
        if first is not None:
            training[r["seed"]] = first
    return {"equal": equal, "differ": differ, "training_differs_from_step": training}


def _n(value, spec: str) -> str:
    "A number as `spec`, or a dash where there is none yet (an arm without two paired seeds)."
    return "–" if value is None or not math.isfinite(value) else format(value, spec)


def markdown(e: dict, interim: bool) -> str:
    stamp = "INTERIM: not the pre-registered result. " if interim else ""
    out = [f"{stamp}TOST of each arm's level (mean of steps {e['level_steps']}) against grpo_real, ±{e['margin']:g} points, "
           f"α = {e['alpha']} each side, Holm over the three f within each method.", "",
           "| method | f | mean difference | 90% t-interval | paired sd | Holm p | equivalent |", "|---|---|---|---|---|---|---|"]
    for method, m in e["methods"].items():
        for f, r in m["by_f"].items():
            verdict = "yes" if r["equivalent"] else ("no (underpowered: sd above the registered 4)" if r["underpowered"] else "no")
            out.append(f"| {method} | {f} | {_n(r['mean'], '+.2f')} | [{_n(r['low'], '+.2f')}, {_n(r['high'], '+.2f')}] | "
                       f"{_n(r['sd'], '.2f')} | {_n(r['p_holm'], '.4f')} | {verdict} |")
    for method, m in e["methods"].items():
        out.append(f"\n{stamp}{method}: crossover " + (f"f = {m['crossover']}" if m["crossover"] else
                                                      "none found in f = 0.9, 0.98, 1.0"))
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    rep = sub.add_parser("report", help="every registered statistic (8 complete seeds per arm, or --interim)")
    rep.add_argument("folders", type=Path, nargs="+")
    rep.add_argument("--out", type=Path, default=None, help="write summary.json and results.md here")
    rep.add_argument("--interim", action="store_true")
    args = parser.parse_args(argv)
    try:
        lines = load_lines(args.folders)
        have = levels(lines)
        arms = ["grpo_real"] + [f"{m}@{f:g}" for m in METHODS for f in FIDELITIES]
        short = {a: len(have.get(a, {})) for a in arms if sorted(have.get(a, {})) != list(SEEDS)}
        if short and not args.interim:
            raise ValueError("the registered endpoints need seeds 0-7 complete in every arm; have "
                             + ", ".join(f"{a} {n}" for a, n in short.items()) + " (--interim for a stamped look)")
        e = {**endpoints(lines), "integrity": integrity(lines), "interim": args.interim}
    except (OSError, ValueError) as err:
        print(f"dial_stage_b: {err}", file=sys.stderr)
        return 2
    text = markdown(e, args.interim)
    print(text)
    i = e["integrity"]
    print(f"\ngrpo_real against autoresearch_long: {i['equal']} evaluations equal, {len(i['differ'])} differ; training "
          + ("equal at every shared step" if not i["training_differs_from_step"] else f"differs {i['training_differs_from_step']}"))
    if args.out and not args.interim:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.json").write_text(json.dumps(e, indent=1, default=float) + "\n")
        (args.out / "results.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
