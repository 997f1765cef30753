"""Every AutoResearch grid of the decisive experiment in one report: the pre-registered paired contrasts of each grid
(held-out score), what each correction did to the update (the gradient norm, its mean and its spread over the steps
of a seed, paired by seed), the adaptive row, and compute at equal score with its sweep of targets.

A grid is a finished grid folder (`wmrl reproduce autoresearch --grid ... --out DIR`: one
`<method>__seed<k>/metrics.json` per run and the grid's `summary.json`) or a curated results folder (`runs.json`, one
compact entry per run, and `summary.json`). Writes report.json, report.md and contrasts.png into --out; with
--curate ROOT it also writes each grid folder's curated form to ROOT/autoresearch_<NAME>/.

    python reproductions/bench/decisive_report.py --grid full=DIR --grid monotone_group=DIR ... [--out DIR] [--curate ROOT]
        [--against NEW_DIR=OLD_DIR] [--against FULL_DIR:wmrl=CONTROL_DIR:mixed_uncorrected]
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np

from wmrl.autoresearch.summary import CONTRASTS, load_runs, plateau
from wmrl.core.paired import paired_contrast

HISTORY = {"anchor_groups": "corr_n_anchor_groups", "grad_norm": "grad_norm", "adaptive_rho": "corr_adaptive_rho",
           "anchor_weight": "corr_anchor_weight", "s2_oos": "corr_s2_oos_step_mean"}  # compact name -> metrics key
TOTALS = ("sandbox_cpu_s", "total_compute_s", "n_executions", "n_cache_hits", "eval_sandbox_cpu_s")


def compact(metrics: dict) -> dict:
    "One run as runs.json keeps it: evaluations [steps, score, sandbox CPU-s, total compute s], per-step logs and diagnostics, totals."
    evals = [[e["steps_done"], round(e["heldout_percentile"], 3), round(e["sandbox_cpu_s"], 3),
              round(e["total_compute_s"], 3)] for e in metrics["evals"]]
    logs = {name: [h.get(key) for h in metrics["history"]] for name, key in HISTORY.items()}
    scale = (metrics["config"].get("correction") or {}).get("scale", "group")
    run = {"method": metrics["config"]["method"], "seed": metrics["config"]["seed"], "scale": scale, "evals": evals, **logs,
           **{k: round(float(metrics["totals"][k]), 3) for k in TOTALS}}
    if any("diagnostics" in h for h in metrics["history"]):  # on-policy diagnostics, one entry per step (issue 22)
        run["diagnostics"] = [h.get("diagnostics") for h in metrics["history"]]
        run["eval_status_counts"] = [[e["steps_done"], e.get("status_counts")] for e in metrics["evals"]]
    return run


def grid_runs(folder: Path) -> list[dict]:
    "The compact runs of a grid folder (from its metrics.json files) or of a curated folder (its runs.json)."
    if any(folder.glob("*/metrics.json")):
        return [compact(r) for rs in load_runs(folder).values() for r in rs]
    if (folder / "runs.json").is_file():
        return json.loads((folder / "runs.json").read_text())
    sys.exit(f"decisive_report: {folder} has neither */metrics.json nor runs.json")


def update_stats(runs: list[dict], upto: int) -> dict[int, dict]:
    """Per seed: the mean gradient norm of its first `upto` training steps (the steps every method of the grid took)
    and their sd over those steps (the update's step-to-step spread)."""
    stats = {}
    for run in runs:
        norms = np.array([math.nan if v is None else v for v in run["grad_norm"][:upto]], dtype=float)
        norms = norms[np.isfinite(norms)]
        stats[int(run["seed"])] = {"mean": float(norms.mean()) if norms.size else math.nan,
                                   "sd": float(norms.std(ddof=1)) if norms.size > 1 else math.nan}
    return stats


def grid_plateau(runs: list[dict]) -> dict:
    "`summary.plateau` on compact runs: has this method stopped improving over its last 10 steps (paired by seed)?"
    return plateau([{"config": {"seed": int(r["seed"])}, "evals": [{"steps_done": int(e[0]), "heldout_percentile": float(e[1])}
                                                                   for e in r["evals"]]} for r in runs])


def grid_report(name: str, folder: Path) -> dict:
    "One grid: its world model and scaling, per-method scores, the contrasts, and the paired update contrasts."
    summary = json.loads((folder / "summary.json").read_text())
    runs: dict[str, list[dict]] = {}
    for run in grid_runs(folder):
        runs.setdefault(run["method"], []).append(run)
    updates = {method: update_stats(rs, summary["contrast_step"]) for method, rs in runs.items()}
    contrasts = {}
    for contrast, (a, b) in CONTRASTS.items():
        entry = summary["contrasts"].get(contrast, {})
        if not entry.get("seeds"):
            continue
        contrasts[contrast] = dict(entry)
        for field in ("mean", "sd"):
            left = {s: v[field] for s, v in updates[a].items()}
            right = {s: v[field] for s, v in updates[b].items()}
            contrasts[contrast][f"update_norm_{field}"] = {
                "first": float(np.nanmean(list(left.values()))), "second": float(np.nanmean(list(right.values()))),
                **paired_contrast(left, right)}
    return {"grid": name, "world_model": summary["world_model"], "scale": "/".join(sorted({str(r.get("scale", "group")) for rs in runs.values() for r in rs})),
            "contrast_step": summary["contrast_step"],
            "methods": {m: {k: v[k] for k in ("heldout_percentile_mean", "heldout_percentile_std", "seeds",
                                               "sandbox_seconds", "anchor_groups_per_run", "anchor_weight_mean",
                                               "s2_out_of_sample_mean")} for m, v in summary["methods"].items()},
            "contrasts": contrasts, "equal_score": summary.get("equal_score"),
            "plateau": {m: grid_plateau(runs[m]) for m in ("grpo_real", "wmrl") if m in runs},
            "ratio_vs_target": summary.get("ratio_vs_target")}


def against(new: Path, old: Path, step: int, new_method: str | None = None, old_method: str | None = None) -> dict:
    """Each method both grids ran, new − old seed by seed at `step`: what changed between two versions of one grid.
    With a method named on each side, that one pair only (a method of one grid against a control of another)."""
    def scores(folder):
        out = {}
        for run in grid_runs(folder):
            at = {int(e[0]): float(e[1]) for e in run["evals"]}
            if step in at:
                out.setdefault(run["method"], {})[int(run["seed"])] = at[step]
        return out
    first, second = scores(new), scores(old)
    if new_method or old_method:
        if not (new_method in first and old_method in second):
            sys.exit(f"decisive_report: --against needs {new_method} in {new} and {old_method} in {old} at step {step}")
        return {f"{new_method} − {old_method}": paired_contrast(first[new_method], second[old_method])}
    return {m: paired_contrast(first[m], second[m]) for m in sorted(set(first) & set(second))}


def _side(text: str) -> tuple[Path, str | None]:
    "DIR or DIR:METHOD (a method of that grid); a folder whose name holds a colon stays a folder."
    if ":" not in text or Path(text).is_dir():
        return Path(text), None
    folder, _, method = text.rpartition(":")
    return Path(folder), method


def _ci(entry: dict, digits: int = 2) -> str:
    fmt = f"{{:+.{digits}f}}"
    return f"{fmt.format(entry['mean'])} [{fmt.format(entry['ci_low'])}, {fmt.format(entry['ci_high'])}]"


def _ratio(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "—"


def markdown(reports: list[dict]) -> str:
    "The contrasts of every grid, then the update contrasts, then equal score."
    lines = ["| grid | world model | scaling | contrast (first − second) | seeds | held-out points [95% CI] | p |",
             "|---|---|---|---|---:|---|---:|"]
    for r in reports:
        for name, c in r["contrasts"].items():
            lines.append(f"| {r['grid']} | {r['world_model']} | {r['scale']} | {name} | {len(c['seeds'])} | {_ci(c)} | "
                         f"{c['p']:.3f} |")
    lines += ["", "| grid | contrast | update norm, first / second | paired difference [95% CI] | "
              "spread over steps, first / second | paired difference [95% CI] |", "|---|---|---|---|---|---|"]
    for r in reports:
        for name, c in r["contrasts"].items():
            m, s = c["update_norm_mean"], c["update_norm_sd"]
            lines.append(f"| {r['grid']} | {name} | {m['first']:.3f} / {m['second']:.3f} | {_ci(m, 3)} | "
                         f"{s['first']:.3f} / {s['second']:.3f} | {_ci(s, 3)} |")
    for r in reports:
        head = r.get("equal_score") or {}
        if not head or not r.get("ratio_vs_target"):
            continue
        lines += ["", f"Equal score ({r['grid']}): target {head['target']:.1f} (grpo_real's final score); sandbox "
                  f"ratio {_ratio(head['sandbox_ratio'])} [{head['sandbox_ci_low']:.2f}, {head['sandbox_ci_high']:.2f}], "
                  f"total {_ratio(head['total_ratio'])} [{head['total_ci_low']:.2f}, {head['total_ci_high']:.2f}]"
                  + (f" ({head['why_sandbox_ratio']})" if head.get("why_sandbox_ratio") else ""), ""]
        for method, p in r.get("plateau", {}).items():
            verdict = "a plateau" if p["reached"] else "not a plateau"
            lines.append(f"- {method} gained {_ci(p)} from step {p['from_step']} to {p['step']}: {verdict} (a plateau "
                         f"needs the CI's upper end below {p['tolerance']:g} points)")
        lines += ["",
                  "| fraction of grpo_real's gain | target | sandbox CPU-s ratio [95% CI] | total compute ratio [95% CI] |",
                  "|---:|---:|---|---|"]
        for row in r["ratio_vs_target"]:
            lines.append(f"| {row['fraction']:.2f} | {row['target']:.1f} | {_ratio(row['sandbox_ratio'])} "
                         f"[{row['sandbox_ci_low']:.2f}, {row['sandbox_ci_high']:.2f}] | {_ratio(row['total_ratio'])} "
                         f"[{row['total_ci_low']:.2f}, {row['total_ci_high']:.2f}] |")
    return "\n".join(lines) + "\n"


def plot(reports: list[dict], path: Path) -> None:
    "Left: every contrast with its CI. Right: the compute ratio against the target, with its CI band."
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from wmrl.core.paired import plot_contrasts, plot_ratio_vs_target
    rows = [(f"{r['grid']}: {name}", c) for r in reports for name, c in r["contrasts"].items()]
    fig, axes = plt.subplots(1, 2, figsize=(13, 0.35 * len(rows) + 2), gridspec_kw={"width_ratios": [1.4, 1]})
    plot_contrasts(rows, axes[0]).set_xlabel("paired difference, held-out percentile points (95% CI)")
    for i, r in enumerate(r for r in reports if r.get("ratio_vs_target")):
        for field, label in (("sandbox", "sandbox CPU-s"), ("total", "total compute")):
            plot_ratio_vs_target(r["ratio_vs_target"], axes[1], label=f"{r['grid']}: {label}",
                                 goal=4.0 if field == "sandbox" and i == 0 else None, field=field)  # one goal line
    axes[1].set_title("grpo_real / wmrl compute at equal held-out score")
    if axes[1].get_legend_handles_labels()[0]:
        axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def curate(folder: Path, dest: Path) -> None:
    "The curated form of a grid folder: runs.json (compact) beside its summary, table and figures."
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "runs.json").write_text(json.dumps(grid_runs(folder)) + "\n")
    for pattern in ("summary.json", "results.md", "*.png"):
        for path in folder.glob(pattern):
            shutil.copy2(path, dest / path.name)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", action="append", required=True, metavar="NAME=DIR", help="a finished grid folder")
    parser.add_argument("--out", type=Path, default=Path("reproductions/results/autoresearch_decisive"))
    parser.add_argument("--curate", type=Path, default=None, help="also write ROOT/autoresearch_<NAME>/ per grid")
    parser.add_argument("--against", action="append", default=[], metavar="NEW[:METHOD]=OLD[:METHOD]",
                        help="two grid folders on the same seeds: each method both ran (or the two named), new − old, "
                             "seed by seed, at step 10")
    args = parser.parse_args(argv)
    pairs = [g.split("=", 1) for g in args.grid]
    if any(len(p) != 2 or not Path(p[1]).is_dir() for p in pairs):
        sys.exit(f"decisive_report: each --grid must be NAME=DIR with DIR a grid folder, got {args.grid}")
    reports = [grid_report(name, Path(folder)) for name, folder in pairs]
    for name, folder in (pairs if args.curate else []):
        curate(Path(folder), args.curate / f"autoresearch_{name}")
    args.out.mkdir(parents=True, exist_ok=True)
    versus = []
    for pair in args.against:
        new, old = pair.split("=", 1)
        (new_dir, new_method), (old_dir, old_method) = _side(new), _side(old)
        versus.append({"new": new, "old": old, "step": 10,
                       "contrasts": against(new_dir, old_dir, 10, new_method, old_method)})
        for method, c in versus[-1]["contrasts"].items():
            print(f"{new_dir.name} − {old_dir.name}, {method}: {_ci(c)} p={c['p']:.3f} seeds {c['seeds']}")
    if versus:
        (args.out / "against.json").write_text(json.dumps(versus, indent=1) + "\n")
    (args.out / "report.json").write_text(json.dumps(reports, indent=1) + "\n")
    (args.out / "report.md").write_text(markdown(reports))
    plot(reports, args.out / "contrasts.png")
    print(markdown(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
