"""On-policy diagnostics of committed AutoResearch runs, over all seeds, by windows of steps (issue 22): how often the
world model misses a failure on the anchor rows (blind spots: real status a failure, predicted `ok`; as a share of all
anchor rows and of the failed ones), which planted
mistakes those are, how often a world-model group is flat (no signal) raw and after calibration, and the anchor
groups' share of the update. Each number is a mean over seeds of the per-seed window mean, with a 95% t-interval.

Reads `runs.json` files whose runs carry `diagnostics` (one entry per step; written by decisive_report.py's curation).

    python reproductions/bench/diagnostics.py reproductions/results/autoresearch_ppi_rho25_long [more folders]
        [--window 15] [--methods wmrl wmrl_ppi]
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

import numpy as np
from scipy import stats


def t_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    "The t-interval of a mean over seeds (NaN-free values; NaN bounds below two seeds)."
    values = values[np.isfinite(values)]
    if len(values) < 2: return (np.nan, np.nan)
    half = stats.t.ppf(0.5 + level / 2, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return (float(values.mean() - half), float(values.mean() + half))


def per_step(diagnostics: dict) -> dict:
    "One step's numbers (NaN where the step has no anchor row or no world-model group)."
    rows = diagnostics.get("anchor_rows") or []
    failed = [r for r in rows if r[3] != "ok"]
    wm = diagnostics.get("n_wm_groups") or 0
    blind = sum(r[2] == "ok" for r in failed)
    return {"blind_spot_share": blind / len(rows) if rows else np.nan,  # of all anchor rows
            "blind_spot_rate": blind / len(failed) if failed else np.nan,  # of the anchor rows that really failed
            "anchor_failure_rate": (len(failed) / len(rows)) if rows else np.nan,
            "flat_raw_wm_groups": diagnostics["n_flat_raw_wm_groups"] / wm if wm else np.nan,
            "flat_calibrated_wm_groups": diagnostics["n_flat_calibrated_wm_groups"] / wm if wm else np.nan,
            "anchor_share": diagnostics.get("anchor_share", np.nan)}


def summarise(runs: list[dict], window: int) -> tuple[dict, dict]:
    "{method: {window label: {measure: (mean, low, high, seeds)}}} and {method: Counter of blind-spot mistakes}."
    table, mistakes = collections.defaultdict(dict), collections.defaultdict(collections.Counter)
    for method in sorted({r["method"] for r in runs}):
        seeds = [r for r in runs if r["method"] == method and r.get("diagnostics")]
        steps = max(len(r["diagnostics"]) for r in seeds)
        for start in range(0, steps, window):
            label = f"{start + 1}-{min(start + window, steps)}"
            values = collections.defaultdict(list)
            for run in seeds:
                chunk = [per_step(d) for d in run["diagnostics"][start:start + window] if d]
                for measure in (chunk[0] if chunk else {}):
                    values[measure].append(np.nanmean([c[measure] for c in chunk]))
            table[method][label] = {m: (float(np.nanmean(v)), *t_interval(np.asarray(v, float)), len(v)) for m, v in values.items()}
        for run in seeds:
            for d in run["diagnostics"]:
                mistakes[method].update(r[4] or "(none planted)" for r in (d or {}).get("anchor_rows", []) if r[3] != "ok" and r[2] == "ok")
    return table, mistakes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="curated results folders holding runs.json")
    parser.add_argument("--window", type=int, default=15, help="steps per window")
    parser.add_argument("--methods", nargs="*", default=None, help="only these methods")
    args = parser.parse_args(argv)
    runs = []
    for folder in args.folders:
        path = folder / "runs.json"
        if not path.is_file(): sys.exit(f"error: {path} not found; give a curated results folder")
        runs += [r for r in json.loads(path.read_text()) if r.get("diagnostics") and (not args.methods or r["method"] in args.methods)]
    if not runs: sys.exit("error: no run with per-step diagnostics in those folders (runs made before issue 22 have none)")
    table, mistakes = summarise(runs, args.window)
    for method, windows in table.items():
        print(f"\n## {method} ({len([r for r in runs if r['method'] == method])} seeds)\n")
        measures = list(next(iter(windows.values())))
        print("| steps | " + " | ".join(measures) + " |\n|---|" + "---|" * len(measures))
        for label, row in windows.items():
            print(f"| {label} | " + " | ".join(f"{m:.3f} [{lo:.3f}, {hi:.3f}]" for m, lo, hi, _ in (row[k] for k in measures)) + " |")
        top = ", ".join(f"{name} {count}" for name, count in mistakes[method].most_common(6))
        print(f"\nblind spots by planted mistake (all steps and seeds): {top or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
