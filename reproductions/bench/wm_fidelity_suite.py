"""Fidelity of the static world model on the AutoResearch suite: the hand-written quality prior vs the fitted one.

Usage: python reproductions/bench/wm_fidelity_suite.py [--out DIR] [--policy 3] [--clean 2] [--planted 1]
           [--tasks-dir DIR] [--prior toy/suite/quality_prior.json] [--cache FILE] [--workers 2] [--execute-only]

Samples programs for every suite task (training and held-out) from the agent's initial policy (`wmrl.autoresearch.agent`):
`--policy` raw samples (the policy plants mistakes in about two programs of three), `--clean` samples with every
planted mistake repaired, and `--planted` clean samples with exactly one planted mistake (cycling through
`wmrl.autoresearch.programs.MISTAKES`). Each program is executed for real (`wmrl.execution.pool.ExecutionPool`, the task's own limits,
cached in an `ExecutionCache` file so reruns are cheap) and predicted by `StaticWorldModel()` (hand prior) and
`StaticWorldModel(quality_prior=FittedQualityPrior)`. Prints one JSON object and writes fidelity.json,
fidelity.md, fidelity.png and cases.csv under --out, then the error anatomy of each world model (anatomy.json, .md,
.png; reproductions/bench/wm_fidelity_anatomy.py). No assertions: numbers are read from the JSON.
"""
import argparse
import json
import math
import os
import time
from pathlib import Path

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"): os.environ.setdefault(var, "1")

ROOT = Path(__file__).resolve().parents[2]


def repaired(program):
    "The program with every planted mistake replaced by the clean default of its slot."
    from wmrl.autoresearch.programs import MISTAKE_VALUES, SLOTS, Program
    default = Program()
    return Program(**{s: (getattr(default, s) if (s, getattr(program, s)) in MISTAKE_VALUES else getattr(program, s)) for s in SLOTS})


def sample_programs(tasks, n_policy: int, n_clean: int, n_planted: int, seed: int) -> list:
    "Rows (task, kind, planted mistake or '', Program), deterministic in (task order, seed)."
    import numpy as np

    from wmrl.autoresearch.agent import ProgramPolicy
    from wmrl.autoresearch.programs import MISTAKES, task_features, with_mistake
    policy = ProgramPolicy()
    names = list(MISTAKES)
    rows = []
    for index, task in enumerate(tasks):
        rng = np.random.default_rng([seed, index])
        features = task_features(task)
        rows += [(task, "policy", "", p) for p in policy.sample(features, n_policy, rng)] if n_policy else []
        rows += [(task, "clean", "", repaired(p)) for p in policy.sample(features, n_clean, rng)] if n_clean else []
        for k in range(n_planted):
            name = names[(index * n_planted + k) % len(names)]
            base = repaired(policy.sample(features, 1, rng)[0])
            rows.append((task, "planted", name, with_mistake(name, base)))
    return rows


def execute_all(jobs, cache_path: Path, workers: int, backend):
    "Real records for (task, code) jobs, through the execution cache."
    from wmrl.autoresearch.ledger import ExecutionCache, execute_cached
    from wmrl.execution.pool import ExecutionPool
    cache = ExecutionCache(cache_path)
    with ExecutionPool(backend, max_workers=workers) as pool:
        records, charges = execute_cached(jobs, lambda batch: pool.map(batch, desc="executing"), cache)
    cache.save()
    return [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in records], charges


class FamilyOnly:
    "The fitted prior without its two metric-format rules (an ablation: what the fitted family table alone does)."

    def __init__(self, prior):
        self.prior = prior

    def quality_for(self, task, models, outputs=(), tuned=False):
        return self.prior.quality_for(task, models, outputs, tuned, metric_rules=False)


def _nan_to_none(value):
    if isinstance(value, float) and not math.isfinite(value): return None
    if isinstance(value, dict): return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)): return [_nan_to_none(v) for v in value]
    return value


def spearman(predicted, real) -> float:
    import numpy as np
    from scipy.stats import spearmanr
    predicted, real = np.asarray(predicted, float), np.asarray(real, float)
    keep = np.isfinite(predicted) & np.isfinite(real)
    if keep.sum() < 3 or np.ptp(predicted[keep]) == 0 or np.ptp(real[keep]) == 0: return math.nan
    return float(spearmanr(predicted[keep], real[keep]).statistic)


def summarise(frame, cases, predictions) -> dict:
    "Every number for one world model on the rows of `frame` (a DataFrame aligned with cases/predictions)."
    import numpy as np

    from wmrl.world_model.fidelity import check_table, reliability, status_confusion, within_group_spearman
    real = frame["real_reward"].to_numpy(float)
    pred = frame["pred_reward"].to_numpy(float)
    real_ok = (frame["real_status"] == "ok").to_numpy()
    both_ok = real_ok & (frame["pred_status"] == "ok").to_numpy()
    out = {"n": int(len(frame)), "status_accuracy": float(np.mean(frame["real_status"] == frame["pred_status"])),
           "reward_mae": float(np.nanmean(np.abs(pred - real))),
           "spearman_reward": spearman(pred, real),
           "spearman_reward_within_task": within_group_spearman(frame["task"], pred, real),
           "n_real_ok": int(real_ok.sum()), "spearman_reward_real_ok": spearman(pred[real_ok], real[real_ok]),
           "n_both_ok": int(both_ok.sum()),
           "spearman_position_both_ok": spearman(frame["pred_position"][both_ok], frame["real_position"][both_ok]),
           "position_mae_both_ok": float(np.mean(np.abs(frame["pred_position"][both_ok] - frame["real_position"][both_ok]))) if both_ok.any() else math.nan,
           "position_bias_both_ok": float(np.mean(frame["pred_position"][both_ok] - frame["real_position"][both_ok])) if both_ok.any() else math.nan,
           "reliability_reward": reliability(pred, real),
           "reliability_position_both_ok": reliability(frame["pred_position"][both_ok], frame["real_position"][both_ok]) if both_ok.any() else []}
    if cases is not None:
        out["checks"] = check_table(cases, predictions)
        out["confusion"] = {k: {kk: vv for kk, vv in v.items() if vv} for k, v in status_confusion(cases, predictions).items() if any(v.values())}
    return out


def quality_rule(reason: str, metric: str) -> str:
    "Which part of the quality prior answered: a metric-format rule (with the metric), no model, or the family table."
    for prefix in ("hard labels on a probability metric", "probabilities on a label metric"):
        if reason.startswith(prefix): return f"{prefix} ({metric})"
    if reason.startswith("no model"): return "no model fitted"
    return "family table"


def rule_table(frame) -> list:
    "Rows that ran ok and were predicted ok, grouped by the rule that set the predicted position."
    ok = frame[(frame["real_status"] == "ok") & (frame["pred_status"] == "ok")]
    return [{"rule": rule, "rows": int(len(g)), "mean_predicted": float(g["pred_position"].mean()),
             "mean_real": float(g["real_position"].mean()), "mae": float((g["pred_position"] - g["real_position"]).abs().mean())}
            for rule, g in ok.groupby("pred_rule")]


def planted_table(frame) -> list:
    "Per planted mistake: programs, how many really failed the planted way, and how many the world model flagged."
    from wmrl.autoresearch.programs import MISTAKES
    rows = []
    for name, group in frame[frame["kind"] == "planted"].groupby("planted"):
        mistake = MISTAKES[name]
        bites = group["real_status"].isin(mistake.statuses)
        flagged = group["pred_failed_checks"].str.split(",").apply(set).apply(set([mistake.check]).issubset) | \
            ((mistake.check == "syntax") & (group["pred_status"] == "syntax_error"))
        rows.append({"mistake": name, "check": mistake.check, "programs": int(len(group)), "really_fails": int(bites.sum()),
                     "flagged": int(flagged.sum()), "flagged_when_fails": int((flagged & bites).sum()),
                     "deciding_check_right": int((group["pred_deciding"] == mistake.check).sum())})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "reproductions/results/wm_fidelity_suite"))
    parser.add_argument("--tasks-dir", default=None, help="suite folder (default: the tasks_dir setting; built if missing)")
    parser.add_argument("--prior", default=str(ROOT / "toy/suite/quality_prior.json"))
    parser.add_argument("--cache", default=str(ROOT / "reproductions/runs/wm_fidelity_suite/executions.json"))
    parser.add_argument("--policy", type=int, default=3, help="raw initial-policy samples per task")
    parser.add_argument("--clean", type=int, default=2, help="repaired (mistake-free) samples per task")
    parser.add_argument("--planted", type=int, default=1, help="samples with one planted mistake per task")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backend", default=None, help="sandbox backend (default: settings.ini)")
    parser.add_argument("--execute-only", action="store_true", help="only fill the execution cache")
    args = parser.parse_args(argv)
    started = time.perf_counter()

    import numpy as np
    import pandas as pd

    from wmrl.autoresearch.render import render
    from wmrl.core.settings import get_settings
    from wmrl.execution.suite import build_suite, suite_split
    tasks_dir = Path(args.tasks_dir) if args.tasks_dir else get_settings().tasks_dir
    tasks = build_suite(tasks_dir, progress=False)
    training, heldout = suite_split(tasks)
    rows = sample_programs(tasks, args.policy, args.clean, args.planted, args.seed)
    jobs = [(task, render(program, task)) for task, _, _, program in rows]
    t0 = time.perf_counter()
    records, charges = execute_all(jobs, Path(args.cache), args.workers, args.backend)
    execution_wall = time.perf_counter() - t0
    cached = sum(c.hit for c in charges)
    if args.execute_only:
        print(json.dumps({"executed": len(jobs) - cached, "cached": cached, "wall_s": round(execution_wall, 1)}))
        return 0

    from wmrl.world_model.fidelity import Case
    from wmrl.world_model.prior import FittedQualityPrior
    from wmrl.world_model.static import StaticWorldModel
    prior = FittedQualityPrior.load(args.prior)
    if held_in := sorted(set(prior.task_names) & {t.name for t in heldout}):
        raise SystemExit(f"the prior was fitted on held-out tasks {held_in}: refusing to report its fidelity")
    models = {"hand": StaticWorldModel(), "fitted": StaticWorldModel(quality_prior=prior),
              "fitted_family_only": StaticWorldModel(quality_prior=FamilyOnly(prior))}
    keep = [i for i, r in enumerate(records) if not r.get("infra_error")]
    cases = [Case(f"{i}", jobs[i][1], records[i], rows[i][0].name) for i in keep]
    base = pd.DataFrame({"task": [rows[i][0].name for i in keep], "category": [rows[i][0].category for i in keep],
                         "role": ["train" if rows[i][0] in training else "heldout" for i in keep],
                         "kind": [rows[i][1] for i in keep], "planted": [rows[i][2] for i in keep],
                         "family": [rows[i][3].family for i in keep], "capacity": [rows[i][3].capacity for i in keep],
                         "program": [rows[i][3].key() for i in keep],
                         "real_status": [records[i]["status"] for i in keep],
                         "real_reward": [records[i]["reward"] for i in keep],
                         "real_position": [np.nan if records[i]["position"] is None else records[i]["position"] for i in keep],
                         "wall_s": [records[i]["wall_s"] for i in keep]})
    report = {"size": {"tasks": len(tasks), "training_tasks": len(training), "heldout_tasks": len(heldout),
                       "programs_per_task": {"policy": args.policy, "clean": args.clean, "planted": args.planted},
                       "programs": len(rows), "graded": len(keep), "infra_errors": len(rows) - len(keep),
                       "executed_now": len(jobs) - cached, "from_cache": cached,
                       "execution_wall_s": round(execution_wall, 1),
                       "sandbox_wall_s_total": round(float(base["wall_s"].sum()), 1),
                       "sandbox_wall_s_max": round(float(base["wall_s"].max()), 1),
                       "real_status_counts": base["real_status"].value_counts().to_dict()},
              "prior": {"path": str(Path(args.prior).resolve().relative_to(ROOT)) if Path(args.prior).resolve().is_relative_to(ROOT) else args.prior,
                        "content_hash": prior.content_hash, "training_tasks": list(prior.task_names)},
              "models": {}}
    frames = {}
    for label, model in models.items():
        t0 = time.perf_counter()
        predictions = model.predict([(rows[i][0], jobs[i][1]) for i in keep])
        wm_seconds = time.perf_counter() - t0
        frame = base.assign(pred_status=[p.status for p in predictions], pred_reward=[p.score for p in predictions],
                            pred_position=[np.nan if p.position is None else p.position for p in predictions],
                            pred_deciding=[p.deciding_check or "" for p in predictions],
                            pred_rule=[quality_rule(p.verdicts[-1].reason, task.metric) for p, task in zip(predictions, [rows[i][0] for i in keep])],
                            pred_failed_checks=[",".join(v.check for v in p.verdicts if v.failed and v.confidence >= model.min_confidence) for p in predictions])
        frames[label] = frame
        entry = {"all": summarise(frame, cases, predictions), "wm_ms_per_program": round(1000 * wm_seconds / max(1, len(keep)), 2)}
        for role in ("train", "heldout"):
            mask = (frame["role"] == role).to_numpy()
            entry[role] = summarise(frame[mask], [c for c, m in zip(cases, mask) if m], [p for p, m in zip(predictions, mask) if m])
        entry["per_category"] = {cat: {k: v for k, v in summarise(frame[(frame["category"] == cat).to_numpy()], None, None).items()
                                       if not k.startswith("reliability")} for cat in sorted(frame["category"].unique())}
        entry["planted"] = planted_table(frame)
        entry["by_quality_rule"] = rule_table(frame)
        report["models"][label] = entry
    report["seconds"] = round(time.perf_counter() - started, 1)
    report = _nan_to_none(report)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "fidelity.json").write_text(json.dumps(report, indent=1) + "\n")
    merged = frames["hand"].rename(columns={c: f"hand_{c}" for c in frames["hand"].columns if c.startswith("pred_")})
    for label in list(frames)[1:]:
        for c in ("pred_status", "pred_reward", "pred_position"):
            merged[f"{label}_{c}"] = frames[label][c]
    merged.round(4).to_csv(out / "cases.csv", index=False)
    (out / "fidelity.md").write_text(markdown(report))
    figure(frames, out / "fidelity.png")
    import sys  # the error anatomy of every world model (and of the positive controls) from the same cases
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from wm_fidelity_anatomy import main as anatomy_main
    anatomy_main(["--cases", str(out / "cases.csv"), "--out", str(out)])
    headline = {label: {f"{part}.{k}": report["models"][label][part][k] for part, k in
                        (("all", "status_accuracy"), ("all", "spearman_reward"), ("all", "spearman_reward_real_ok"),
                         ("all", "spearman_position_both_ok"), ("all", "position_mae_both_ok"), ("heldout", "spearman_position_both_ok"))}
                for label in models}
    print(json.dumps({"out": str(out), "size": report["size"], "headline": headline, "seconds": report["seconds"]}, indent=1))
    return 0


def _fmt(value) -> str:
    return "—" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def markdown(report: dict) -> str:
    "fidelity.md: the size, the headline table (hand vs fitted), per category, per planted mistake and per check."
    size = report["size"]
    lines = ["# Static world model on the AutoResearch suite: hand prior vs fitted prior", "",
             f"{size['programs']} programs ({size['programs_per_task']} per task) on {size['tasks']} tasks "
             f"({size['training_tasks']} training, {size['heldout_tasks']} held-out), executed for real: "
             f"{size['graded']} graded, {size['infra_errors']} sandbox failures. Real statuses: {size['real_status_counts']}. "
             f"Sandbox time: {size['sandbox_wall_s_total']} s summed over programs (longest {size['sandbox_wall_s_max']} s); "
             f"this run executed {size['executed_now']} and read {size['from_cache']} from the execution cache.",
             f"Fitted prior: `{report['prior']['path']}` (hash {report['prior']['content_hash']}), fitted on the "
             f"{len(report['prior']['training_tasks'])} training tasks only.", "",
             "`hand`: `StaticWorldModel()` (the MODEL_PRIOR bucket table). `fitted`: `StaticWorldModel(quality_prior=prior)`. "
             "`fitted_family_only`: the fitted table without the two metric-format rules (hard labels on a probability "
             "metric, probabilities on a label metric). Failure verdicts are identical in all three.", "",
             "| metric | rows (all / held-out) | " + " | ".join(f"{m} (all)" for m in report["models"]) + " | "
             + " | ".join(f"{m} (held-out)" for m in report["models"]) + " |",
             "|---|---|" + "---:|" * (2 * len(report["models"]))]
    metrics = [("status accuracy", "status_accuracy", "n"), ("Spearman(pred, real reward)", "spearman_reward", "n"),
               ("  within task (mean)", "spearman_reward_within_task", "n"),
               ("Spearman on real-ok rows", "spearman_reward_real_ok", "n_real_ok"),
               ("Spearman(pred, real position), both ok", "spearman_position_both_ok", "n_both_ok"),
               ("position MAE, both ok", "position_mae_both_ok", "n_both_ok"), ("position bias (pred − real), both ok", "position_bias_both_ok", "n_both_ok"),
               ("reward MAE", "reward_mae", "n")]
    hand, fitted = report["models"]["hand"], report["models"]["fitted"]
    models = list(report["models"].values())
    for label, key, n_key in metrics:
        lines.append(f"| {label} | {hand['all'][n_key]} / {hand['heldout'][n_key]} | " + " | ".join(_fmt(m["all"][key]) for m in models)
                     + " | " + " | ".join(_fmt(m["heldout"][key]) for m in models) + " |")
    lines += ["", "## Per category (all tasks; hand vs fitted)", "", "| category | rows | both ok | Spearman reward hand | fitted | Spearman position (both ok) hand | fitted | position MAE hand | fitted |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for cat, h in hand["per_category"].items():
        f = fitted["per_category"][cat]
        lines.append(f"| {cat} | {h['n']} | {h['n_both_ok']} | {_fmt(h['spearman_reward'])} | {_fmt(f['spearman_reward'])} | "
                     f"{_fmt(h['spearman_position_both_ok'])} | {_fmt(f['spearman_position_both_ok'])} | {_fmt(h['position_mae_both_ok'])} | {_fmt(f['position_mae_both_ok'])} |")
    lines += ["", "## Which part of the quality prior answered (rows run ok and predicted ok)", "",
              "| model | rule | rows | mean predicted position | mean real position | MAE |", "|---|---|---:|---:|---:|---:|"]
    for name, model in report["models"].items():
        for row in model["by_quality_rule"]:
            lines.append(f"| {name} | {row['rule']} | {row['rows']} | {_fmt(row['mean_predicted'])} | {_fmt(row['mean_real'])} | {_fmt(row['mae'])} |")
    lines += ["", "## Planted mistakes (same for both priors: the quality prior does not change failure verdicts)", "",
              "| mistake | check | programs | really fails | flagged | flagged when it fails | deciding check right |", "|---|---|---:|---:|---:|---:|---:|"]
    for row in hand["planted"]:
        lines.append(f"| {row['mistake']} | {row['check']} | {row['programs']} | {row['really_fails']} | {row['flagged']} | {row['flagged_when_fails']} | {row['deciding_check_right']} |")
    lines += ["", "## Per check, against the real outcome of every program", "", "| check | support | precision | recall |", "|---|---:|---:|---:|"]
    for row in hand["all"]["checks"]:
        lines.append(f"| {row['check']} | {row['support']} | {_fmt(row['precision'])} | {_fmt(row['recall'])} |")
    lines += ["", "Calibration curves (reward and position) are in `fidelity.json` (`reliability_*`) and `fidelity.png`.", ""]
    return "\n".join(lines)


def figure(frames: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from wmrl.world_model.fidelity import reliability
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    colours = {"hand": "tab:gray", "fitted": "tab:blue", "fitted_family_only": "tab:orange"}
    for label, frame in frames.items():
        ok = ((frame["real_status"] == "ok") & (frame["pred_status"] == "ok")).to_numpy()
        jitter = np.random.default_rng(0).uniform(-0.01, 0.01, ok.sum())
        if label != "fitted_family_only": axes[0].scatter(frame["pred_position"][ok] + jitter, frame["real_position"][ok], s=12, alpha=0.6, color=colours[label], label=label)
        curve = reliability(frame["pred_position"][ok], frame["real_position"][ok], bins=8)
        axes[1].plot([c[1] for c in curve], [c[2] for c in curve], "o-", color=colours[label], label=f"{label} (position, both ok)")
        curve = reliability(frame["pred_reward"], frame["real_reward"], bins=10)
        axes[1].plot([c[1] for c in curve], [c[2] for c in curve], "s--", color=colours[label], alpha=0.6, label=f"{label} (reward, all)")
    for ax in axes[:2]:
        ax.plot([0, 1], [0, 1], ":", color="k", lw=1)
        ax.set_xlim(-0.03, 1.03)
        ax.set_ylim(-0.03, 1.03)
    axes[0].set_xlabel("predicted position")
    axes[0].set_ylabel("real position")
    axes[0].set_title("rows run ok and predicted ok")
    axes[0].legend()
    axes[1].set_xlabel("mean predicted")
    axes[1].set_ylabel("mean real")
    axes[1].set_title("calibration curves")
    axes[1].legend(fontsize=7)
    categories = sorted(frames["hand"]["category"].unique())
    width = 0.8 / len(frames)
    for k, (label, frame) in enumerate(frames.items()):
        values = []
        for cat in categories:
            sub = frame[(frame["category"] == cat) & (frame["real_status"] == "ok") & (frame["pred_status"] == "ok")]
            values.append(spearman(sub["pred_position"], sub["real_position"]))
        axes[2].bar(np.arange(len(categories)) + (k - (len(frames) - 1) / 2) * width, np.nan_to_num(values), width, color=colours[label], label=label)
    axes[2].axhline(0, color="k", lw=0.8)
    axes[2].set_xticks(range(len(categories)), categories)
    axes[2].set_ylabel("Spearman(predicted, real position)")
    axes[2].set_title("per category, rows both ok")
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
