"""The AutoResearch headline as pre-registered (reproductions/preregistration/headline.md): collect each slice of the
two headline grids into committed per-run lines, check seeds 0-7 against the committed long grids, and, at 32
complete seeds, print every pre-registered endpoint with its outcome.

    python reproductions/bench/headline.py collect RUNS/autoresearch_headline RUNS/autoresearch_headline_rho25 \
        --slice seeds_0_1 --command "..." --wall "41 min 3 s"
    python reproductions/bench/headline.py check        # seeds 0-7 against the committed long grids
    python reproductions/bench/headline.py forecast     # what the 8 seen seeds forecast for the registered endpoint
    python reproductions/bench/headline.py report [--interim] [--boot 10000] [--plot FILE]

`report` writes summary.json into the results folder; it refuses to print an endpoint below 32 complete seeds per
arm unless --interim, which stamps every line as an interim look.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from wmrl.autoresearch.matched import curves_from_compact, matched_steps
from wmrl.autoresearch.ratios import curves_in_executions
from wmrl.core.paired import holm, paired_contrast, ratio_across_boot_seeds, ratio_to_level, tost_paired

RESULTS = Path(__file__).resolve().parents[1] / "results"
HEADLINE = RESULTS / "headline"
SEEDS = tuple(range(32))  # pre-registered
ARMS = {"grpo_real": ("grpo_real", 0.1), "wmrl": ("wmrl", 0.1), "wmrl_ppi": ("wmrl_ppi", 0.1),
        "wmrl_ppi_rho25": ("wmrl_ppi", 0.25)}  # arm -> (method, anchor_fraction)
PRIMARY = {"rho=1/8": "wmrl_ppi", "rho=1/4": "wmrl_ppi_rho25"}  # the family Holm corrects over
LAST_EVALS, MARGIN, NULL, GOAL, ALPHA_PRIMARY, ALPHA_TOST, BOOT_SEEDS, TOLERANCE = 4, 3.0, 2.0, 3.0, 0.025, 0.05, (0, 1, 2), 0.05
COMMITTED = {"grpo_real": "autoresearch_long", "wmrl": "autoresearch_long", "wmrl_ppi": "autoresearch_ppi_long",
             "wmrl_ppi_rho25": "autoresearch_ppi_rho25_long"}  # where seeds 0-7 were run before


def arm_of(config: dict) -> str:
    "The pre-registered arm a run belongs to, from its config."
    for arm, (method, fraction) in ARMS.items():
        if config["method"] == method and math.isclose(float(config["anchor_fraction"]), fraction):
            return arm
    raise ValueError(f"a run of {config['method']} at anchor_fraction {config['anchor_fraction']} is no arm of the headline")


def grid_lines(folders: list[Path]) -> list[dict]:
    "The finished runs of grid folders as per-run lines (decisive_report's compact form plus the arm)."
    from decisive_report import compact  # a sibling script

    from wmrl.autoresearch.summary import load_runs
    return [{"arm": arm_of(metrics["config"]), **compact(metrics), "commit": metrics.get("provenance", {}).get("git_commit")}
            for folder in folders for runs in load_runs(folder).values() for metrics in runs]


def collect(folders: list[Path], name: str, command: str, wall: str, results: Path = HEADLINE) -> Path:
    "One slice's finished runs as per-run lines, with how it ran."
    lines = grid_lines(folders)
    if not lines:
        raise ValueError(f"no finished run in {[str(f) for f in folders]}")
    audit = audit_cache(folders)
    why = lands(check(lines), audit)
    if why:
        raise ValueError("this slice does not land: " + "; ".join(why))
    out = results / "slices" / f"{name}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines.sort(key=lambda r: (r["seed"], list(ARMS).index(r["arm"])))
    out.write_text("".join(json.dumps(r) + "\n" for r in lines))
    meta = {"slice": name, "command": command, "wall": wall, "runs": [[r["arm"], r["seed"]] for r in lines],
            "cache_audit": audit}
    (results / "slices" / f"{name}.meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return out


def load_lines(folder: Path = HEADLINE) -> list[dict]:
    "Every slice's lines; a run in two slices must be the same run."
    seen: dict = {}
    for path in sorted((folder / "slices").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            run = json.loads(line)
            key = (run["arm"], int(run["seed"]))
            if key in seen and seen[key]["evals"] != run["evals"]:
                raise ValueError(f"{key} appears in two slices with different evaluations ({path.name})")
            seen[key] = run
    return list(seen.values())


def curves(lines: list[dict], cost: str = "executions") -> dict:
    """{arm: {seed: curve}}; cost "executions" spreads each run's training executions evenly over its steps (a count
    that does not depend on the machine; wmrl.autoresearch.ratios.curves_in_executions), "sandbox_cpu_s" is the
    measured CPU-s."""
    if cost == "executions":
        return curves_in_executions(lines, label="arm")
    return curves_from_compact([{**r, "method": r["arm"]} for r in lines])


def _status_change(old: dict | None, new: dict | None) -> dict:
    "Held-out program statuses that moved between two evaluations: {status: new count - old count}, zeros left out."
    old, new = old or {}, new or {}
    return {k: new.get(k, 0) - old.get(k, 0) for k in sorted(set(old) | set(new)) if new.get(k, 0) != old.get(k, 0)}


def _same_training(old: dict, new: dict, rel: float = 1e-6) -> int | None:
    """The first training step whose gradient norm differs between two runs of one seed (None: every shared step is
    equal). The norm of the update is a function of every reward of the step, so an equal norm at every step means
    the same rewards and the same policy throughout."""
    for step, (a, b) in enumerate(zip(old.get("grad_norm") or [], new.get("grad_norm") or [])):
        if a is None or b is None:
            continue
        if not math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-9):
            return step
    return None


def budget_flip(change: dict) -> bool:
    """Whether a change of held-out statuses is programs crossing the CPU budget, and nothing else (the rule settled in
    the results README after `seeds_4_5`): every program that moved went into `timeout` (a program that ended ok, or
    wrote an invalid file, near its 7 CPU-s there and hit the budget first here), or every one came out of it. A
    program that moved between two other statuses (ok -> invalid_submission) is a changed scoring path, never a
    budget: the sandbox says `timeout` only when the kernel's CPU account crosses the budget."""
    moved = {k: v for k, v in change.items() if k != "timeout"}
    t = change.get("timeout", 0)
    return bool(t) and bool(moved) and sum(moved.values()) == -t and all(v * t < 0 for v in moved.values())


def audit_cache(folders: list[Path]) -> dict:
    """Every `timeout` of a slice's execution caches (training and held-out programs alike go through the cache, which
    starts empty in a slice's own folder), by cause: a kill at the CPU budget is the only cause `budget_flip` admits;
    a wall kill (a starved or hung program) or an infrastructure error is not. Also each kill's CPU-s range."""
    records = [r for f in folders for path in sorted(Path(f).glob("execution_cache.json"))
               for r in json.loads(path.read_text()).values()]
    timeouts = [r for r in records if r.get("status") == "timeout"]
    cpu_kills = [r for r in timeouts if str(r.get("message", "")).startswith("killed at the CPU-time limit")]
    return {"records": len(records), "timeouts": len(timeouts), "cpu_limit_kills": len(cpu_kills),
            "other_timeouts": sorted({str(r.get("message", ""))[:80] for r in timeouts if r not in cpu_kills}),
            "infra_errors": sum(bool(r.get("infra_error")) for r in records),
            "kill_cpu_s": [round(min(r["cpu_s"] for r in cpu_kills), 2), round(max(r["cpu_s"] for r in cpu_kills), 2)]
            if cpu_kills else None}


def lands(report: dict, audit: dict | None) -> list[str]:
    """Why a slice may not be committed (empty: it lands): training must equal the committed runs at every shared
    step, every differing evaluation must be a `budget_flip`, and every timeout in its caches a CPU-budget kill."""
    why = [f"{arm}: training differs (seed: first step) {r['training_differs_from_step']}"
           for arm, r in report.items() if r["training_differs_from_step"]]
    why += [f"{arm} seed {c['seed']} step {c['step']}: statuses {c['statuses']} are not a budget flip"
            for arm, r in report.items() for c in r["causes"] if not c["budget_flip"]]
    if audit is None or not audit["records"]:
        why.append("no execution cache to audit (check --runs on the slice's own folders)")
    elif audit["timeouts"] != audit["cpu_limit_kills"] or audit["infra_errors"]:
        why.append(f"timeouts other than a CPU-budget kill: {audit['other_timeouts']}; infra errors {audit['infra_errors']}")
    return why


def check(lines: list[dict], tolerance: float = 0.01) -> dict:
    """Seeds 0-7 against the committed long grids: every shared evaluation equal to `tolerance` points, and the
    training itself (the gradient norm of every shared step). Each differing evaluation carries its cause as far as
    the logs show it: the change in its held-out programs' statuses, and whether it is a `budget_flip`."""
    report = {}
    for arm, folder in COMMITTED.items():
        method = ARMS[arm][0]
        old = {(int(r["seed"])): r for r in json.loads((RESULTS / folder / "runs.json").read_text()) if r["method"] == method}
        new = {int(r["seed"]): r for r in lines if r["arm"] == arm and int(r["seed"]) in old}
        equal, differ, causes, training, compared = 0, [], [], {}, 0
        for seed, run in sorted(new.items()):
            was = {e[0]: e[1] for e in old[seed]["evals"]}
            old_counts = dict((s, c) for s, c in old[seed].get("eval_status_counts") or [])
            new_counts = dict((s, c) for s, c in run.get("eval_status_counts") or [])
            for step, score, *_ in run["evals"]:
                if step in was:
                    if abs(score - was[step]) <= tolerance:
                        equal += 1
                    else:
                        differ.append([seed, step, round(was[step], 3), round(score, 3)])
                        change = _status_change(old_counts.get(step), new_counts.get(step))
                        causes.append({"seed": seed, "step": step, "statuses": change, "budget_flip": budget_flip(change)})
            training[seed] = _same_training(old[seed], run)
            compared += min(len(old[seed].get("grad_norm") or []), len(run.get("grad_norm") or []))
        report[arm] = {"seeds": sorted(new), "equal": equal, "differ": differ, "causes": causes, "against": folder,
                       "training_differs_from_step": {s: t for s, t in training.items() if t is not None},
                       "training_steps_compared": compared}
    return report


def forecast(n_outer: int = 200, seed: int = 0) -> dict:
    """The registered primary endpoint forecast from the 8 seeds seen before the pre-registration, over the 50 steps
    every committed arm shares (wmrl.autoresearch.ratios.forecast_outcome): a forecast, not a result."""
    from wmrl.autoresearch.ratios import forecast_outcome
    arm = lambda folder, method, label: curves_in_executions(
        [{**r, "arm": label} for r in json.loads((RESULTS / folder / "runs.json").read_text()) if r["method"] == method],
        upto=50, label="arm")[label]
    grpo = arm(COMMITTED["grpo_real"], "grpo_real", "grpo_real")
    others = {rho: arm(COMMITTED[a], ARMS[a][0], a) for rho, a in PRIMARY.items()}
    out = forecast_outcome(grpo, others, n_seeds=len(SEEDS), n_outer=n_outer, goal=GOAL, null=NULL, alpha=ALPHA_PRIMARY,
                           seed=seed, last_evals=LAST_EVALS)
    return {**out, "steps": "0-50 (the steps GRPO ran in the committed grids)", "command": "python reproductions/bench/headline.py forecast"}


def _complete(c: dict) -> dict:
    "arm -> seeds it has whole (75 steps evaluated)."
    return {arm: sorted(s for s, v in seeds.items() if max(v["steps"]) == 75) for arm, seeds in c.items()}


def _gain(curve_by_seed: dict, start: int, end: int) -> dict:
    at = lambda step: {s: c["score"][c["steps"].index(step)] for s, c in curve_by_seed.items()}
    return paired_contrast(at(end), at(start))


def endpoints(lines: list[dict], n_boot: int = 10000) -> dict:
    "Every pre-registered endpoint on the seeds every arm completed (the pre-registered set when it is whole)."
    c = curves(lines)
    seeds = sorted(set.intersection(*[set(v) for v in _complete(c).values()])) if set(ARMS) <= set(c) else []
    if len(seeds) < 2:
        raise ValueError(f"needs >= 2 seeds completed by every arm {sorted(ARMS)}; have {_complete(c)}")
    c = {arm: {s: v[s] for s in seeds} for arm, v in c.items()}
    primary = {}
    for rho, arm in PRIMARY.items():
        across = ratio_across_boot_seeds(c["grpo_real"], c[arm], BOOT_SEEDS, TOLERANCE, last_evals=LAST_EVALS,
                                         rule="first", n_boot=n_boot, null=NULL, family=len(PRIMARY))
        primary[rho] = {**across["runs"][0], "arm": arm, "spread": across["spread"], "stable": across["stable"],
                        "by_boot_seed": [{k: r[k] for k in ("seed", "ci_low", "ci_high", "corrected_low", "share_not_reached",
                                                            "p_null")} for r in across["runs"]],
                        "stays": ratio_to_level(c["grpo_real"], c[arm], LAST_EVALS, "stays", n_boot, 0)}
    adjusted = holm({rho: p["p_null"] for rho, p in primary.items()})
    for rho, p in primary.items():
        p["p_holm"] = adjusted[rho]
        p["hit"] = bool(math.isfinite(p["ratio"]) and p["ratio"] >= GOAL and p["p_holm"] <= ALPHA_PRIMARY)
    hits = sum(p["hit"] for p in primary.values())
    level = lambda arm: {s: float(np.mean(v["score"][-LAST_EVALS:])) for s, v in c[arm].items()}
    tost = {rho: tost_paired(level(arm), level("grpo_real"), MARGIN, ALPHA_TOST) for rho, arm in PRIMARY.items()}
    tost_holm = holm({rho: t["p"] for rho, t in tost.items()})
    for rho, t in tost.items():
        t["p_holm"] = tost_holm[rho]
        t["equivalent_after_holm"] = bool(t["p_holm"] <= ALPHA_TOST)
    cpu = curves(lines, "sandbox_cpu_s")
    cpu = {arm: {s: v[s] for s in seeds} for arm, v in cpu.items()}
    return {
        "seeds": seeds, "complete": len(seeds) == len(SEEDS) and set(seeds) == set(SEEDS), "n_boot": n_boot,
        "primary": primary, "outcome": {2: "hit", 1: "partial", 0: "miss"}[hits],
        "tost": tost, "tost_wmrl": tost_paired(level("wmrl"), level("grpo_real"), MARGIN, ALPHA_TOST),
        "matched_steps": {arm: matched_steps(c, arm, "grpo_real", n_boot) for arm in ("wmrl_ppi", "wmrl_ppi_rho25", "wmrl")},
        "sandbox_cpu_s": {arm: ratio_to_level(cpu["grpo_real"], cpu[arm], LAST_EVALS, "first", n_boot, 0)
                          for arm in ("wmrl_ppi", "wmrl_ppi_rho25", "wmrl")},
        "wmrl": ratio_to_level(c["grpo_real"], c["wmrl"], LAST_EVALS, "first", n_boot, 0),
        "grpo_gain_55_75": _gain(c["grpo_real"], 55, 75),
    }


def _r(v: float) -> str:
    return "—" if not math.isfinite(v) else f"{v:.2f}"


def markdown(e: dict, interim: bool) -> str:
    stamp = "**INTERIM: not the pre-registered result** " if interim else ""
    out = [f"{stamp}Seeds: {len(e['seeds'])} ({e['seeds'][0]}–{e['seeds'][-1]}); B = {e['n_boot']:,}.", "",
           "| endpoint | ratio | 95% interval | corrected low (1.25%) | never reached | p (R ≤ 2) | Holm p | stable to 0.05× | outcome |",
           "|---|---:|---|---:|---:|---:|---:|---|---|"]
    for rho, p in e["primary"].items():
        seeds_line = "; ".join(f"seed {b['seed']}: [{_r(b['ci_low'])}, {_r(b['ci_high'])}]" for b in p["by_boot_seed"])
        out.append(f"| {p['arm']} ({rho}) at GRPO's level {p['target']:.2f} | {_r(p['ratio'])}× | [{_r(p['ci_low'])}, "
                   f"{_r(p['ci_high'])}] | {_r(p['corrected_low'])} | {100 * p['share_not_reached']:.2f}% | {p['p_null']:.4f} | "
                   f"{p['p_holm']:.4f} | {'yes' if p['stable'] else 'NO'} ({seeds_line}) | {'hit' if p['hit'] else 'miss'} |")
    out += ["", f"{stamp}Primary outcome: **{e['outcome']}** (goal: ratio ≥ 3× and Holm p ≤ 0.025 at both ρ).", ""]
    for rho, p in e["primary"].items():
        s = p["stays"]
        out.append(f"- stays-above variant, {rho}: {_r(s['ratio'])}× [{_r(s['ci_low'])}, {_r(s['ci_high'])}]; "
                   f"never reached {100 * s['share_not_reached']:.2f}%")
    out += ["", "| TOST (±3 points, steps 60–75) | mean | 90% t | TOST p | Holm p | equivalent |", "|---|---:|---|---:|---:|---|"]
    for rho, t in e["tost"].items():
        out.append(f"| {PRIMARY[rho]} − grpo_real ({rho}) | {t['mean']:+.2f} | [{t['low']:+.2f}, {t['high']:+.2f}] | "
                   f"{t['p']:.4f} | {t['p_holm']:.4f} | {'yes' if t['equivalent_after_holm'] else 'no'} |")
    t = e["tost_wmrl"]
    out.append(f"| wmrl − grpo_real (outside the family) | {t['mean']:+.2f} | [{t['low']:+.2f}, {t['high']:+.2f}] | {t['p']:.4f} | | "
               f"{'yes' if t['equivalent'] else 'no'} |")
    out += ["", "| matched step | " + " | ".join(f"{a} − grpo_real (95% t, Holm p)" for a in e["matched_steps"]) + " |",
            "|---:|" + "---|" * len(e["matched_steps"])]
    rows = zip(*e["matched_steps"].values())
    for row in rows:
        out.append(f"| {row[0]['step']} | " + " | ".join(f"{r['mean']:+.1f} [{r['t_low']:+.1f}, {r['t_high']:+.1f}], {r['p_holm']:.3f}"
                                                     for r in row) + " |")
    g = e["grpo_gain_55_75"]
    out += ["", f"- GRPO's gain from step 55 to 75: {g['mean']:+.2f} [{g['t_low']:+.2f}, {g['t_high']:+.2f}] (95% t)",
            f"- wmrl (ρ = 1/8) at GRPO's level: {_r(e['wmrl']['ratio'])}× [{_r(e['wmrl']['ci_low'])}, {_r(e['wmrl']['ci_high'])}], "
            f"never reached {100 * e['wmrl']['share_not_reached']:.2f}%"]
    for arm, r in e["sandbox_cpu_s"].items():
        out.append(f"- in training sandbox CPU-s, {arm}: {_r(r['ratio'])}× [{_r(r['ci_low'])}, {_r(r['ci_high'])}]")
    return "\n".join(out) + "\n"


def plot(lines: list[dict], e: dict, path: Path) -> None:
    "Seed-mean held-out score against training executions per arm (95% t band), GRPO's level and each crossing."
    import matplotlib.pyplot as plt
    from scipy import stats
    c = curves(lines)
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for arm in ARMS:
        seeds = {s: c[arm][s] for s in e["seeds"]}
        score = np.array([v["score"] for v in seeds.values()])
        cost = np.array([v["cost"] for v in seeds.values()]).mean(0)
        mean, half = score.mean(0), stats.t.ppf(0.975, len(score) - 1) * score.std(0, ddof=1) / np.sqrt(len(score))
        ax.plot(cost[1:], mean[1:], "o-", ms=3, label=f"{arm} ({len(score)} seeds)")
        ax.fill_between(cost[1:], (mean - half)[1:], (mean + half)[1:], alpha=0.15)
    target = e["primary"]["rho=1/8"]["target"]
    ax.axhline(target, color="gray", ls=":", label=f"GRPO's level, steps 60–75 ({target:.1f})")
    for p in e["primary"].values():
        for x in (p["reference_cost"], p["other_cost"]):
            if math.isfinite(x):
                ax.axvline(x, color="gray", lw=0.6, alpha=0.6)
    ax.set(xscale="log", xlabel="cumulative training executions", ylabel="held-out percentile (avg@8)",
           title="executions to GRPO's plateau level (first crossing, same rule for every arm)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=HEADLINE, help="the headline's results folder")
    sub = parser.add_subparsers(dest="action", required=True)
    col = sub.add_parser("collect", help="write a slice's per-run lines into reproductions/results/headline/slices/")
    col.add_argument("folders", type=Path, nargs="+")
    col.add_argument("--slice", required=True, help="the slice's name, e.g. seeds_0_1")
    col.add_argument("--command", dest="run_command", required=True, help="the command that ran it, as typed")
    col.add_argument("--wall", required=True, help="the wall time its command printed")
    chk = sub.add_parser("check", help="seeds 0-7 against the committed long grids")
    chk.add_argument("--runs", type=Path, nargs="*", default=None,
                     help="grid folders to check before they are collected (default: the committed slices)")
    sub.add_parser("forecast", help="the registered endpoint forecast from the 8 seen seeds (writes forecast.json)")
    rep = sub.add_parser("report", help="every pre-registered endpoint (32 complete seeds, or --interim)")
    rep.add_argument("--interim", action="store_true")
    rep.add_argument("--boot", type=int, default=10000)
    rep.add_argument("--plot", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        if args.action == "collect":
            print(collect(args.folders, args.slice, args.run_command, args.wall, args.results))
            return 0
        if args.action == "forecast":
            f = forecast()
            for rho, a in f["arms"].items():
                print(f"{rho}: hit in {100 * a['hit_rate']:.1f}% of {f['n_outer']} draws of {f['n_seeds']} seeds; median ratio "
                      f"{a['median_ratio']:.2f}x; no ratio in {100 * a['no_ratio']:.1f}%")
            print(f"both hit: {100 * f['all_hit']:.1f}%")
            (args.results / "forecast.json").write_text(json.dumps(f, indent=1) + "\n")
            return 0
        lines = load_lines(args.results)
        if args.action == "check":
            report = check(grid_lines(args.runs) if args.runs else lines)
            audit = audit_cache(args.runs) if args.runs else None
            for arm, r in report.items():
                print(f"{arm}: seeds {r['seeds']}: {r['equal']} evaluations equal to {r['against']}'s, {len(r['differ'])} differ"
                      + (f": {r['differ'][:6]}" if r["differ"] else ""))
                for c in r["causes"]:
                    print(f"  seed {c['seed']} step {c['step']}: held-out statuses {c['statuses'] or 'unchanged'}"
                          + (" (programs near the CPU budget on the other side of it)" if c["budget_flip"] else " (NOT a budget flip)"))
                trained = r["training_differs_from_step"]
                print(f"  training, the gradient norm of {r['training_steps_compared']} shared steps: "
                      + ("equal at every step" if not trained else f"differs (seed: first step) {trained}"))
            if audit is not None:
                print(f"execution caches: {audit['records']} records, {audit['timeouts']} timeouts, {audit['cpu_limit_kills']} of them "
                      f"CPU-budget kills (at {audit['kill_cpu_s']} CPU-s as recorded), {audit['infra_errors']} infra errors")
                why = lands(report, audit)
                print("this slice lands" if not why else "this slice does NOT land: " + "; ".join(why))
            print(json.dumps(report))
            return 0 if audit is None or not why else 1
        if args.boot < 10000 and not args.interim:
            raise ValueError(f"the pre-registered B is at least 10,000, got {args.boot}")
        have = _complete(curves(lines))
        if not args.interim and any(sorted(have.get(arm, [])) != list(SEEDS) for arm in ARMS):
            raise ValueError("the pre-registered endpoints need seeds 0-31 complete in every arm; have "
                             + ", ".join(f"{arm} {len(have.get(arm, []))}" for arm in ARMS) + " (--interim for a stamped look)")
        e = endpoints(lines, args.boot)
    except (OSError, ValueError) as err:
        print(f"headline: {err}", file=sys.stderr)
        return 2
    print(markdown(e, args.interim))
    if not args.interim:
        (args.results / "summary.json").write_text(json.dumps(e, indent=1, default=float) + "\n")
    if args.plot:
        plot(lines, e, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
