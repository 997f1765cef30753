"""Does the AutoResearch grid give the same held-out scores on an idle machine and under load?

Runs `wmrl reproduce autoresearch --size quick` twice into fresh folders (fresh execution caches): once as the
machine is, once with N busy loops saturating the cores. Programs are budgeted in CPU-seconds with the wall clock as
a safety net only (`wmrl.execution.limits.cpu_budget`), so a loaded machine should make programs slower, never turn
an `ok` into a `timeout`: every held-out score, every learning-curve point and every execution status must agree.
Writes one JSON file with both conditions' wall times, load averages, scores and any difference.

    python reproductions/bench/load_invariance.py [--busy 4] [--out reproductions/results/load_invariance]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from wmrl.autoresearch.ledger import ExecutionCache
from wmrl.autoresearch.summary import load_runs

REPO = Path(__file__).resolve().parents[2]
WMRL = Path(sys.executable).with_name("wmrl")


def run_grid(out: Path, busy: int) -> dict:
    "One quick grid into `out`, with `busy` CPU-burning processes alongside; its scores, statuses and timings."
    # each busy loop in its own session: under autogroup scheduling a sandbox job (its own session) would otherwise
    # get a fair share against all the loops together
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True) for _ in range(busy)]
    try:
        time.sleep(2 if busy else 0)
        load_before, start = os.getloadavg()[0], time.monotonic()
        done = subprocess.run([str(WMRL), "reproduce", "autoresearch", "--size", "quick", "--out", str(out),
                               "--no-progress"], cwd=REPO, capture_output=True, text=True)
        wall, load_after = time.monotonic() - start, os.getloadavg()[0]
    finally:
        for loop in loops:
            loop.kill()
    if done.returncode != 0:
        sys.exit(f"load_invariance: the grid failed (busy={busy}):\n{done.stderr[-2000:]}")
    runs = {f"{method}__seed{m['config']['seed']}": {"final": m["final_heldout_percentile"], "evals": m["evals"]}
            for method, metrics in load_runs(out).items() for m in metrics}
    statuses = {key: record.get("status") for key, record in ExecutionCache(out / "execution_cache.json").entries.items()}
    return {"busy_loops": busy, "wall_s": round(wall, 1), "load_1min": [round(load_before, 1), round(load_after, 1)],
            "runs": runs, "statuses": statuses}


SCORE_FIELDS = ("heldout_percentile", "ok_rate", "n_infra")  # what the grid measures; costs are measured seconds


def _scores(entry) -> list[float]:
    "The outcome numbers of one evaluation: its scores, ok rate and infra count, per category and per task."
    nested = [v for key in ("per_category", "per_task") for _, v in sorted(entry.get(key, {}).items())]
    return [float(entry[k]) for k in SCORE_FIELDS if k in entry] + [float(v) for v in nested]


def compare(idle: dict, loaded: dict) -> dict:
    """Largest score difference (final and at every evaluation), every execution whose status differs, and how much
    the charged sandbox CPU-seconds moved (a measurement, expected to differ a little under load)."""
    finals, curve, costs = [], [], []
    for name, run in idle["runs"].items():
        other = loaded["runs"].get(name, {"final": math.nan, "evals": []})
        finals.append(abs(run["final"] - other["final"]))
        for p, q in zip(run["evals"], other["evals"]):
            curve += [abs(x - y) for x, y in zip(_scores(p), _scores(q))]
            if p.get("sandbox_cpu_s"):
                costs.append(q["sandbox_cpu_s"] / p["sandbox_cpu_s"] - 1.0)
    status = {k: [v, loaded["statuses"].get(k)] for k, v in idle["statuses"].items() if loaded["statuses"].get(k) != v}
    return {"runs": sorted(idle["runs"]), "max_final_diff": max(finals, default=math.nan),
            "max_curve_diff": max(curve, default=math.nan), "status_differences": status,
            "executions_compared": len(idle["statuses"]),
            "sandbox_cpu_s_relative_change": [round(min(costs), 3), round(max(costs), 3)] if costs else None,
            "identical": bool(finals) and max(finals) == 0 and max(curve, default=0) == 0 and not status}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=4, help="busy loops during the loaded run (default 4: 2x the cores)")
    parser.add_argument("--out", type=Path, default=REPO / "reproductions" / "results" / "load_invariance")
    parser.add_argument("--compare", type=Path, default=None, help="recompute the comparison of a saved quick.json")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.compare:
        result = json.loads(args.compare.read_text())
        result["comparison"] = compare(result["idle"], result["loaded"])
        (args.out / "quick.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
        print(json.dumps(result["comparison"], indent=1))
        return 0 if result["comparison"]["identical"] else 1
    with tempfile.TemporaryDirectory(prefix="wmrl-load-") as scratch:
        idle = run_grid(Path(scratch) / "idle", 0)
        (args.out / "quick_idle.json").write_text(json.dumps(idle, indent=1, sort_keys=True) + "\n")  # kept if later fails
        loaded = run_grid(Path(scratch) / "loaded", args.busy)
        (args.out / "quick_loaded.json").write_text(json.dumps(loaded, indent=1, sort_keys=True) + "\n")
    result = {"command": "python reproductions/bench/load_invariance.py " + " ".join(argv or sys.argv[1:]),
              "cpus": os.cpu_count(), "idle": idle, "loaded": loaded, "comparison": compare(idle, loaded)}
    (args.out / "quick.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(json.dumps({k: result[k] for k in ("comparison",)} | {"wall_s": [idle["wall_s"], loaded["wall_s"]],
                     "load": [idle["load_1min"], loaded["load_1min"]]}, indent=1))
    return 0 if result["comparison"]["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
