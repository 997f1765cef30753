"""The gradient oracle's report: every estimator's gradient against the all-real gradient of the same batch, with
seed-clustered t-intervals, along real-execution GRPO's trajectory and on probes of WMRL's own; the instruments
against their known answers; the on-policy diagnostics; and a check that the probed runs equal the full grid's.

A grid folder is `wmrl reproduce autoresearch --size oracle --out DIR` (one `<method>__seed<k>/metrics.json` per
run) or a curated folder (its `oracle_runs.json`). Writes oracle.json, oracle.md and oracle.png into --out; with
--curate DEST it also writes the curated form (oracle_runs.json) there.

    python reproductions/bench/gradient_oracle.py DIR [--out DIR/oracle] [--curate DEST] [--full RESULTS_FULL]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from wmrl.core.oracle import MEASURES, seed_clustered

ROOT = Path(__file__).resolve().parents[2]
FAILED = {"syntax_error", "runtime_error", "timeout", "memory", "no_submission", "invalid_submission"}
SHOWN = ("cos", "rel_err", "bias2", "var")  # the measures the tables print (scale is in oracle.json)
# What each instrument's definition says (wmrl.core.oracle): (oracle, estimator, measure, known value, tolerance).
KNOWN = [("affine0.5/group", "pure_wm", "cos", 1.0, 1e-3), ("affine0.5/group", "pure_wm", "rel_err", 0.0, 1e-2),
         ("affine0.5/none", "pure_wm", "cos", 1.0, 1e-3), ("affine0.5/none", "pure_wm", "scale", 0.5, 1e-3),
         ("static/group", "ppi", "bias2", 0.0, 1e-12), ("static/none", "ppi", "bias2", 0.0, 1e-12),
         ("static/group", "ppi_plain", "bias2", 0.0, 1e-12), ("static/group", "wmrl_ppi", "bias2", 0.0, 1e-12),
         # the fidelity dial (wmrl.world_model.dial) at f = 1 is real execution: pure_wm's gradient is the all-real one
         ("dial f=1/group", "pure_wm", "bias2", 0.0, 1e-12), ("dial f=1/group", "pure_wm", "cos", 1.0, 1e-9),
         ("dial f=1/none", "pure_wm", "bias2", 0.0, 1e-12)]


def _round(value, digits: int = 5):
    return None if value is None or not math.isfinite(value) else round(float(value), digits)


def compact_run(metrics: dict) -> dict:
    "One run as oracle_runs.json keeps it: per probe step, per oracle and estimator, the measures (and by category)."
    probes, diagnostics = {}, []
    for row in metrics["history"]:
        entry = row.get("oracle")
        diagnostics.append({k: v for k, v in row.get("diagnostics", {}).items()})
        if not entry:
            continue
        probes[str(row["step"])] = {
            "probe_cpu_s": _round(entry["probe_cpu_s"], 3),
            "oracles": {name: {est: {**{m: _round(v.get(m)) for m in MEASURES},
                                     **({"by_category": {c: {m: _round(x.get(m)) for m in MEASURES} for c, x in v["by_category"].items()}}
                                        if name.startswith("static/") and "by_category" in v else {})}
                               for est, v in oracle.items()} for name, oracle in entry["oracles"].items()}}
    return {"method": metrics["config"]["method"], "seed": metrics["config"]["seed"],
            "evals": [[e["steps_done"], round(e["heldout_percentile"], 3)] for e in metrics["evals"]],
            "status_counts": [e.get("status_counts", {}) for e in metrics["evals"]],
            "probes": probes, "diagnostics": diagnostics}


def load(folder: Path) -> list[dict]:
    "Compact runs of a grid folder or of a curated folder."
    if any(folder.glob("*/metrics.json")):
        return [compact_run(json.loads(p.read_text())) for p in sorted(folder.glob("*/metrics.json"))]
    if (folder / "oracle_runs.json").is_file():
        return json.loads((folder / "oracle_runs.json").read_text())
    sys.exit(f"gradient_oracle: {folder} has neither */metrics.json nor oracle_runs.json")


def aggregate(runs: list[dict], method: str) -> dict:
    "{oracle: {estimator: {measure: seed_clustered, by_category: {...}}}} over the probes of one method's runs."
    values: dict = {}
    for run in (r for r in runs if r["method"] == method):
        for probe in run["probes"].values():
            for name, oracle in probe["oracles"].items():
                for est, measures in oracle.items():
                    slot = values.setdefault(name, {}).setdefault(est, {})
                    for m in MEASURES:
                        slot.setdefault(m, {}).setdefault(run["seed"], []).append(measures[m])
                    for cat, cm in measures.get("by_category", {}).items():
                        for m in SHOWN:
                            slot.setdefault(f"{cat}:{m}", {}).setdefault(run["seed"], []).append(cm[m])
    clean = lambda vs: [math.nan if v is None else v for v in vs]
    return {name: {est: {key: seed_clustered({s: clean(v) for s, v in per_seed.items()}) for key, per_seed in slot.items()}
                   for est, slot in oracle.items()} for name, oracle in values.items()}


WINDOW = 5  # steps per row of the diagnostics tables (a seed's steps are averaged first, then seeds)


def _window(step: int) -> str:
    return f"{step // WINDOW * WINDOW}–{step // WINDOW * WINDOW + WINDOW - 1}"


def blind_spots(runs: list[dict], method: str) -> dict:
    "Per 5-step window, over seeds: share of executed rows that failed for real while the world model predicted ok."
    per_window: dict = {}
    for run in (r for r in runs if r["method"] == method):
        for step, diag in enumerate(run["diagnostics"]):
            rows = [a for a in diag.get("anchor_rows", []) if a[2]]  # rows with a prediction
            if rows:
                share = sum(a[2] == "ok" and a[3] in FAILED for a in rows) / len(rows)
                per_window.setdefault(_window(step), {}).setdefault(run["seed"], []).append(share)
    return {w: seed_clustered(seeds) for w, seeds in per_window.items()}


def flat_and_share(runs: list[dict], method: str) -> dict:
    "Per 5-step window, over seeds: world-model groups flat before and after calibration, the anchor share of the update."
    out: dict = {"flat_calibrated": {}, "flat_raw": {}, "anchor_share": {}}
    for run in (r for r in runs if r["method"] == method):
        for step, d in enumerate(run["diagnostics"]):
            w = _window(step)
            if d.get("n_wm_groups"):
                out["flat_calibrated"].setdefault(w, {}).setdefault(run["seed"], []).append(d["n_flat_calibrated_wm_groups"] / d["n_wm_groups"])
                out["flat_raw"].setdefault(w, {}).setdefault(run["seed"], []).append(d["n_flat_raw_wm_groups"] / d["n_wm_groups"])
            if d.get("anchor_share") is not None and math.isfinite(d["anchor_share"]):
                out["anchor_share"].setdefault(w, {}).setdefault(run["seed"], []).append(d["anchor_share"])
    return {k: {w: seed_clustered(v) for w, v in windows.items()} for k, windows in out.items()}


def same_as_full(runs: list[dict], full: Path) -> dict:
    "Largest |score difference| of every shared (method, seed, evaluation step) against the full grid's runs.json."
    committed = {(r["method"], r["seed"]): {e[0]: e[1] for e in r["evals"]} for r in json.loads((full / "runs.json").read_text())}
    diffs = [abs(score - committed[(r["method"], r["seed"])][step]) for r in runs for step, score in r["evals"]
             if step in committed.get((r["method"], r["seed"]), {})]
    return {"n_compared": len(diffs), "max_abs_difference": max(diffs) if diffs else math.nan}


def known_answers(report: dict) -> list[dict]:
    """Each instrument's known answer against what the oracle measured along grpo_real (seed-clustered mean); and
    the dial at f = 0 (b = kappa = 0), which is the static world model: every estimator's bias² and variance equal."""
    rows = []
    for oracle, est, measure, known, tolerance in KNOWN:
        entry = report["grpo_real"].get(oracle, {}).get(est, {}).get(measure)
        if entry:
            rows.append({"oracle": oracle, "estimator": est, "measure": measure, "known": known, "measured": entry["mean"],
                         "holds": abs(entry["mean"] - known) <= tolerance})
    for scale in ("group", "none"):
        dial, static = (report["grpo_real"].get(f"{name}/{scale}", {}) for name in ("dial f=0", "static"))
        for est in (e for e in dial if e in static):
            for measure in ("bias2", "var"):
                known, measured = static[est][measure]["mean"], dial[est][measure]["mean"]
                same = known == measured or (math.isnan(known) and math.isnan(measured)) or abs(known - measured) <= 1e-12
                rows.append({"oracle": f"dial f=0/{scale}", "estimator": est, "measure": measure, "known": _round(known, 6),
                             "measured": measured, "holds": same})
    return rows


def _dial_knobs(name: str) -> tuple:
    "(f, b, kappa) of an oracle named like 'dial f=0.5 b=0.1/group' (DialSpec.label)."
    knobs = dict(part.split("=") for part in name.split("/")[0].split()[1:])
    return tuple(float(knobs.get(k, 0.0)) for k in ("f", "b", "kappa"))


def dial_table(agg: dict, scale: str = "group", measure: str = "bias2") -> list[str]:
    "Estimators against the dial instruments of one scaling (in the order of f, b, kappa), beside static and noise."
    dials = sorted((n for n in agg if n.startswith("dial ") and n.endswith(f"/{scale}")), key=_dial_knobs)
    if not dials:
        return []
    columns = [f"static/{scale}", *dials, *sorted(n for n in agg if n.startswith("noise") and n.endswith(f"/{scale}"))]
    columns = [c for c in columns if c in agg]
    lines = ["| estimator | " + " | ".join(c.split("/")[0] for c in columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for est in agg[dials[0]]:
        lines.append(f"| `{est}` | " + " | ".join(_ci(agg[c].get(est, {}).get(measure)) for c in columns) + " |")
    return lines


def _ci(entry: dict, digits: int = 3) -> str:
    if not entry or entry["mean"] is None or not math.isfinite(entry["mean"]):
        return "–"
    if not math.isfinite(entry["ci_low"]):
        return f"{entry['mean']:.{digits}f}"
    return f"{entry['mean']:.{digits}f} [{entry['ci_low']:.{digits}f}, {entry['ci_high']:.{digits}f}]"


def table(agg: dict, oracle: str, keys=SHOWN) -> list[str]:
    lines = [f"| estimator | {' | '.join(keys)} |", "|---" * (len(keys) + 1) + "|"]
    for est, slot in agg.get(oracle, {}).items():
        lines.append(f"| `{est}` | " + " | ".join(_ci(slot.get(k)) for k in keys) + " |")
    return lines


def markdown(report: dict) -> str:
    lines = ["# The gradient oracle", "", f"Seeds: {report['seeds']}. Command: `{report['command']}`.", "",
             "Every entry: the mean over seeds of each seed's mean over its probe steps, with a 95% t-interval over "
             "seeds. `bias2` and `var` are relative to |g|² and add up to `rel_err`².", ""]
    for method, where in (("grpo_real", "along real-execution GRPO's trajectory (every step, no extra execution)"),
                          ("wmrl", "on probes of WMRL's own batches (steps 0, 5, 10, 15)")):
        for scale in ("group", "none"):
            lines += [f"## Static world model, {'group-std' if scale == 'group' else 'centred'} scaling, {where}", "",
                      *table(report[method], f"static/{scale}"), ""]
        cats = sorted({k.split(':')[0] for slot in report[method].get("static/group", {}).values() for k in slot if ":" in k})
        lines += [f"### By category (group-std), {where}", "",
                  *table(report[method], "static/group", [f"{c}:{m}" for c in cats for m in ("cos", "bias2")]), ""]
    lines += ["## Instruments (along real-execution GRPO's trajectory)", ""]
    for name in sorted(k for k in report["grpo_real"] if not k.startswith("static/")):
        lines += [f"### `{name}`", "", *table(report["grpo_real"], name), ""]
    for scale in ("group", "none"):
        for measure in ("bias2", "var"):
            if rows := dial_table(report["grpo_real"], scale, measure):
                lines += [f"## The fidelity dial: {measure} against f ({'group-std' if scale == 'group' else 'centred'} "
                          "scaling, along real-execution GRPO's trajectory)", "", *rows, ""]
    lines += ["## Known answers", "", "| oracle | estimator | measure | known | measured | holds |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['oracle']} | `{r['estimator']}` | {r['measure']} | {r['known']} | {r['measured']:.3g} | {r['holds']} |"
              for r in report["known_answers"]]
    lines += ["", "## On-policy diagnostics", "",
              "Share of executed programs that failed for real while the world model predicted `ok` (blind-spot "
              "failures), per 5 steps, mean over seeds [95% t]:", "", "| steps | grpo_real (all 64 rows) | wmrl (anchor rows) |",
              "|---|---|---|"]
    order = lambda windows: sorted(windows, key=lambda w: int(w.split("–")[0]))
    for step in order(set(report["blind_spots"]["grpo_real"]) | set(report["blind_spots"]["wmrl"])):
        lines.append(f"| {step} | {_ci(report['blind_spots']['grpo_real'].get(step))} | {_ci(report['blind_spots']['wmrl'].get(step))} |")
    lines += ["", "WMRL: share of world-model groups flat after calibration, and the anchor groups' share of the update's "
              "coefficient mass, per 5 steps:", "", "| steps | flat raw | flat calibrated | anchor share |", "|---|---|---|---|"]
    wm = report["wmrl_update"]
    for step in order(wm["anchor_share"]):
        lines.append(f"| {step} | {_ci(wm['flat_raw'].get(step))} | {_ci(wm['flat_calibrated'].get(step))} | {_ci(wm['anchor_share'].get(step))} |")
    check = report["same_as_full"]
    lines += ["", f"**The probed runs equal the full grid's**: {check['n_compared']} shared evaluations, largest "
              f"difference {check['max_abs_difference']:.3g} points.", ""]
    return "\n".join(lines)


def plot(report: dict, runs: list[dict], path: Path) -> None:
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    names = list(report["grpo_real"].get("static/group", {}))
    for offset, (method, label, alpha) in enumerate((("grpo_real", "along GRPO", 1.0), ("wmrl", "WMRL's probes", 0.55))):
        slot = report[method].get("static/group", {})
        y = np.arange(len(names)) + 0.38 * offset
        bias = np.array([slot[e]["bias2"]["mean"] if e in slot else np.nan for e in names])
        var = np.array([slot[e]["var"]["mean"] if e in slot else np.nan for e in names])
        axes[0].barh(y, bias, 0.36, color="C3", alpha=alpha, label=f"bias², {label}")
        axes[0].barh(y, var, 0.36, left=bias, color="C0", alpha=alpha, label=f"variance, {label}")
    axes[0].set_yticks(np.arange(len(names)) + 0.19, names, fontsize=7)
    axes[0].invert_yaxis()
    axes[0].set(xlabel="relative squared error |ĝ − g|²/|g|² = bias² + variance",
                title="static world model, group-std scaling\n(mean over seeds; upper bar: along GRPO, lower: WMRL's probes)")
    axes[0].legend(fontsize=6, loc="upper right")
    slot = report["grpo_real"].get("static/group", {})
    cats = sorted({k.split(":")[0] for s in slot.values() for k in s if ":" in k})
    names = list(slot)
    for j, cat in enumerate(cats):
        axes[1].bar(np.arange(len(names)) + 0.27 * (j - 1), [slot[e][f"{cat}:cos"]["mean"] for e in names], 0.27, label=cat)
    axes[1].set_xticks(range(len(names)), names, rotation=60, fontsize=7)
    axes[1].set(ylabel="cosine with the all-real gradient", title="by task category, along GRPO (group-std)")
    axes[1].legend(fontsize=7, loc="upper left", ncol=3)
    axes[1].set_ylim(0, 1)
    for est in ("pure_wm", "mixed_uncorrected", "wmrl", "anchors_only", "ppi", "wmrl_ppi"):
        steps = sorted({int(s) for r in runs if r["method"] == "grpo_real" for s in r["probes"]})
        means = [np.nanmean([r["probes"][str(s)]["oracles"]["static/group"][est]["cos"] or np.nan for r in runs
                             if r["method"] == "grpo_real" and str(s) in r["probes"]]) for s in steps]
        axes[2].plot(steps, means, "o-", ms=3, label=est)
    axes[2].set(xlabel="training step (GRPO's trajectory)", ylabel="cosine with the all-real gradient, mean over seeds",
                title="direction over training (group-std)", ylim=(0, 1))
    axes[2].legend(fontsize=7, ncol=2, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_dial(report: dict, path: Path, estimators=("pure_wm", "wmrl", "wmrl_ppi")) -> bool:
    """Issue 43's Stage A as a figure: each estimator's bias² and variance (group-std, along GRPO's trajectory, 95% t
    over seeds) against the dial's fidelity f, the noise controls' bias² as the level the paper's corrections can reach
    when the error is noise. False (nothing drawn) when the report has no dial instrument."""
    agg = report["grpo_real"]
    dials = sorted((n for n in agg if n.startswith("dial ") and n.endswith("/group") and _dial_knobs(n)[1:] == (0.0, 0.0)),
                   key=_dial_knobs)
    if not dials:
        return False
    import matplotlib.pyplot as plt
    f = [_dial_knobs(n)[0] for n in dials]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, measure in zip(axes, ("bias2", "var")):
        for est in estimators:
            rows = [agg[n][est][measure] for n in dials]
            mean = [r["mean"] for r in rows]
            ax.errorbar(f, mean, yerr=[[m - r["ci_low"] for m, r in zip(mean, rows)], [r["ci_high"] - m for m, r in zip(mean, rows)]],
                        fmt="o-", ms=3, capsize=2, label=est)
        noise = [agg[n]["wmrl"]["bias2"]["mean"] for n in sorted(agg) if n.startswith("noise") and n.endswith("/group")]
        if measure == "bias2" and noise:  # where wmrl's bias² sits when the world model's error is only noise
            ax.axhspan(min(noise), max(noise), color="gray", alpha=0.25, label="wmrl under the noise controls")
        ax.set(xlabel="world-model fidelity f (programs predicted from their real outcome)",
               ylabel=f"{measure} / |g|²", title=f"{'bias²' if measure == 'bias2' else 'variance'} against fidelity")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--curate", type=Path, default=None, help="write oracle_runs.json (the curated form) here")
    parser.add_argument("--full", type=Path, default=ROOT / "reproductions/results/autoresearch_full",
                        help="the full grid's curated results, which the probed runs must equal")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"gradient_oracle: {args.folder} is not a folder", file=sys.stderr)
        return 2
    runs = load(args.folder)
    out = args.out or args.folder / "oracle"
    out.mkdir(parents=True, exist_ok=True)
    report = {"command": "python reproductions/bench/gradient_oracle.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "seeds": sorted({r["seed"] for r in runs}), "grpo_real": aggregate(runs, "grpo_real"), "wmrl": aggregate(runs, "wmrl"),
              "blind_spots": {m: blind_spots(runs, m) for m in ("grpo_real", "wmrl")}, "wmrl_update": flat_and_share(runs, "wmrl"),
              "same_as_full": same_as_full(runs, args.full) if (args.full / "runs.json").is_file() else {"n_compared": 0, "max_abs_difference": math.nan},
              "probe_cpu_s": {m: sum(p["probe_cpu_s"] or 0 for r in runs if r["method"] == m for p in r["probes"].values()) for m in ("grpo_real", "wmrl")}}
    report["known_answers"] = known_answers(report)
    (out / "oracle.json").write_text(json.dumps(report, indent=1, default=str))
    (out / "oracle.md").write_text(markdown(report))
    plot(report, runs, out / "oracle.png")
    plot_dial(report, out / "dial.png")
    if args.curate:
        args.curate.mkdir(parents=True, exist_ok=True)
        (args.curate / "oracle_runs.json").write_text(json.dumps(runs, separators=(",", ":")))
    print(json.dumps({"known_answers_hold": all(r["holds"] for r in report["known_answers"]), "same_as_full": report["same_as_full"],
                      "report": str(out / "oracle.md")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
