"""Benchmark: static world-model tier solutions/second on one core, next to real sandbox executions/second.

Usage: python reproductions/bench/bench_wm.py [--seconds 5] [--executions 6] [--backend auto]
Prints one JSON object. Pin to one core with `taskset -c 0` for the per-core number (the script also sets
OMP/MKL threads to 1). No assertions: speed goals are read from the JSON, not tested.
"""
import argparse
import json
import os
import platform
import time
from pathlib import Path

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"): os.environ.setdefault(var, "1")

ROOT = Path(__file__).resolve().parents[2]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default=str(ROOT / "toy/tasks/iris"))
    parser.add_argument("--solutions", default=str(ROOT / "toy/solutions/iris"))
    parser.add_argument("--seconds", type=float, default=5.0, help="how long to loop the static tier")
    parser.add_argument("--executions", type=int, default=6, help="real executions to time (0 to skip)")
    parser.add_argument("--backend", default=None, help="sandbox backend (default: settings.ini)")
    args = parser.parse_args(argv)

    from wmrl.execution.tasks import load_task
    from wmrl.world_model.static import StaticWorldModel
    task = load_task(args.task)
    codes = [p.read_text() for p in sorted(Path(args.solutions).glob("*.py"))]
    model = StaticWorldModel()
    model.predict([(task, codes[0])])  # warm-up: imports of the libraries the analysis resolves against

    n, started = 0, time.perf_counter()
    cpu_started = time.process_time()
    while time.perf_counter() - started < args.seconds:
        for code in codes:
            model.predict([(task, code)])
            n += 1
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    result = {"static_solutions": n, "static_wall_s": round(wall, 3), "static_per_s_wall": round(n / wall, 1),
              "static_per_s_cpu": round(n / cpu, 1), "static_ms_per_solution": round(1000 * wall / n, 2),
              "distinct_solutions": len(codes)}

    if args.executions > 0:
        from wmrl.execution.sandbox import execute
        # time only solutions that finish quickly (not the planted timeouts), one at a time
        quick = [c for c in codes if "while True" not in c and "sleep(" not in c and "range(100000)" not in c][: args.executions]
        started = time.perf_counter()
        statuses = [execute(task, code, backend=args.backend).status for code in quick]
        wall = time.perf_counter() - started
        result.update({"executions": len(quick), "execution_wall_s": round(wall, 3),
                       "executions_per_s": round(len(quick) / wall, 3), "execution_statuses": statuses,
                       "static_speedup": round(result["static_per_s_wall"] / (len(quick) / wall), 1)})
    result.update({"python": platform.python_version(), "cpu_affinity": len(os.sched_getaffinity(0))})
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
