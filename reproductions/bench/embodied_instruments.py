"""Check the theory's predictions for the oracle instruments (nbs/635_oracle) against the runs of
reproductions/grids/embodied_instruments.yaml, and print JSON (and a markdown table with --markdown).

The predictions and the rule for each were fixed before the runs. Each compares one instrument with `clean`, seed by
seed (the runs share SFT checkpoints, groups and the first step's rollouts), on a per-run mean over steps:
  C1 monotone, dense_calib: calibration undoes a monotone error, so the step's direction does not move:
     the 95% paired interval of cos(step, all-real step) lies inside [-0.1, +0.1].
  C2 spread, dense_raw: noise among rollouts of equal success probability turns the step away: interval below 0.
  C3 spread, dense_calib: the anchors' s^2 sees that noise, so the inverse-variance anchor weight rises: interval above 0.
  C4 hetero, dense_raw: as C2.
  C5 scramble, dense_calib: no monotone map repairs a broken order: interval of the cosine below 0.
  C6 scramble, dense_raw: interval below 0.

    .venv/bin/wmrl reproduce embodied --grid reproductions/grids/embodied_instruments.yaml --out /tmp/instruments
    .venv/bin/python reproductions/bench/embodied_instruments.py /tmp/instruments --markdown
"""
import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from wmrl.embodied.report import paired_interval

MEASURES = ("grad_cos_real", "anchor_weight", "flattened_groups", "overall")
CHECKS = [  # (name, instrument, arm, measure, rule)
    ("C1", "monotone", "dense_calib", "grad_cos_real", "within_0.1"),
    ("C2", "spread", "dense_raw", "grad_cos_real", "below_0"),
    ("C3", "spread", "dense_calib", "anchor_weight", "above_0"),
    ("C4", "hetero", "dense_raw", "grad_cos_real", "below_0"),
    ("C5", "scramble", "dense_calib", "grad_cos_real", "below_0"),
    ("C6", "scramble", "dense_raw", "grad_cos_real", "below_0"),
]


def run_measures(metrics: dict) -> dict:
    "Per-run means over steps: the step's cosine with the all-real step, the anchor weight, groups calibration flattened."
    cosines = [c for c in metrics["curve"]["grad_cos_real"] if c is not None and c == c]
    def stat(key):
        values = [row[key] for row in metrics["stats"] if row.get(key) is not None and row[key] == row[key]]
        return float(np.mean(values)) if values else math.nan
    return {"grad_cos_real": float(np.mean(cosines)) if cosines else math.nan, "anchor_weight": stat("anchor_weight"),
            "flattened_groups": stat("n_flattened_groups"), "overall": metrics["heldout"]["Overall"]}


def load(runs_dir: Path) -> dict:
    "(base arm, instrument) -> {seed: measures}."
    out: dict = {}
    for path in sorted(runs_dir.glob("*/metrics.json")):
        m = json.loads(path.read_text())
        base = {"pure_wm": "dense_raw", "wmrl": "dense_calib"}[m["config"]["method"]]
        out.setdefault((base, m["config"]["instrument"]), {})[m["config"]["seed"]] = run_measures(m)
    if not out:
        raise ValueError(f"no finished runs (metrics.json) under {runs_dir}")
    return out


def verdict(cell: dict, rule: str) -> bool:
    if rule == "within_0.1":
        return -0.1 <= cell["low"] and cell["high"] <= 0.1
    return cell["high"] < 0 if rule == "below_0" else cell["low"] > 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs_dir", type=Path)
    parser.add_argument("--markdown", action="store_true", help="also print the tables as markdown")
    args = parser.parse_args(argv)
    runs = load(args.runs_dir)
    mean = lambda xs: round(float(np.mean(xs)), 4) if all(x == x for x in xs) else math.nan
    means = {f"{arm}/{inst}": {k: mean([s[k] for s in seeds.values()]) for k in MEASURES} | {"seeds": sorted(seeds)}
             for (arm, inst), seeds in sorted(runs.items())}
    calib_vs_raw = {inst: {k: paired_interval({s: v[k] for s, v in runs[("dense_calib", inst)].items()},
                                              {s: v[k] for s, v in runs[("dense_raw", inst)].items()}) for k in ("grad_cos_real", "overall")}
                    for inst in sorted({i for _, i in runs}) if ("dense_calib", inst) in runs and ("dense_raw", inst) in runs}
    checks = []
    for name, inst, arm, measure, rule in CHECKS:
        if (arm, inst) not in runs or (arm, "clean") not in runs:
            checks.append({"check": name, "missing": f"{arm}/{inst} or {arm}/clean"})
            continue
        cell = paired_interval({s: v[measure] for s, v in runs[(arm, inst)].items()},
                               {s: v[measure] for s, v in runs[(arm, "clean")].items()})
        checks.append({"check": name, "instrument": inst, "arm": arm, "measure": measure, "rule": rule,
                       "difference_vs_clean": {k: round(cell[k], 4) for k in ("mean", "low", "high", "mde")},
                       "seeds": cell["seeds"], "holds": verdict(cell, rule)})
    print(json.dumps({"runs_dir": str(args.runs_dir), "means": means, "checks": checks,
                      "descriptive_dense_calib_minus_dense_raw": calib_vs_raw}, indent=1))
    if args.markdown:
        print("\n| arm / instrument | cos(step, all-real step) | anchor weight | flattened groups / step | held-out Overall % | seeds |"
              "\n|---|---|---|---|---|---|")
        for key, row in means.items():
            print(f"| {key} | {row['grad_cos_real']:.3f} | {row['anchor_weight']:.3f} | {row['flattened_groups']:.2f} | "
                  f"{row['overall']:.1f} | {len(row['seeds'])} |")
        print("\n| check | instrument − clean, arm, measure | mean [95% paired CI] (MDE) | rule | holds |\n|---|---|---|---|---|")
        for c in checks:
            if "missing" in c:
                print(f"| {c['check']} | missing: {c['missing']} | | | |")
                continue
            d = c["difference_vs_clean"]
            print(f"| {c['check']} | {c['instrument']}, {c['arm']}, {c['measure']} | {d['mean']:+.3f} [{d['low']:+.3f}, "
                  f"{d['high']:+.3f}] (MDE {d['mde']:.3f}) | {c['rule']} | {'yes' if c['holds'] else 'no'} |")
        print("\n| dense_calib − dense_raw (descriptive, not a prediction) | cos(step, all-real step) | held-out Overall, points |"
              "\n|---|---|---|")
        for inst, cells in calib_vs_raw.items():
            c, o = cells["grad_cos_real"], cells["overall"]
            print(f"| {inst} | {c['mean']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}] | {o['mean']:+.1f} [{o['low']:+.1f}, {o['high']:+.1f}] "
                  f"(MDE {o['mde']:.1f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
