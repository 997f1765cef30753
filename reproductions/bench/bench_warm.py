"""Cold bwrap vs the warm forking backend on real scikit-learn solutions; prints one JSON object.

For each solution: median wall seconds and median charged CPU seconds per execution on each backend (samples
interleaved so that load from other processes hits both alike; the warm server's start is measured separately and
is charged to its first job in real runs), then the throughput of an ExecutionPool with 2 workers on each backend.

    python reproductions/bench/bench_warm.py [--n 7] [--pool-jobs 24]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from wmrl.pool import ExecutionPool
from wmrl.sandbox import SandboxLimits, get_backend
from wmrl.tasks import load_task
from wmrl.warm import WarmBackend

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS = ("good_logistic", "good_random_forest", "good_gradient_boosting", "good_knn")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=7, help="executions per solution and backend")
    parser.add_argument("--pool-jobs", type=int, default=24)
    args = parser.parse_args(argv)
    limits = SandboxLimits(wall_s=30, memory_mb=1024)
    task = load_task(REPO / "toy" / "tasks" / "iris")
    cold, warm = get_backend("bwrap"), WarmBackend(base="bwrap", max_servers=1)
    out = {"machine": {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}, "per_solution": {}}
    with tempfile.TemporaryDirectory() as tmp:
        first = warm.run("pass", task.public_dir, limits, tmp)  # starts the server; its start is charged here
        server = next(iter(warm.servers.values()))
        out["warm_server_start"] = {"cpu_s": round(server.startup_cpu_s, 3), "wall_s": round(server.startup_wall_s, 3),
                                    "charged_to_first_job_cpu_s": round(first.cpu_s, 3), "preload": list(warm.preload)}
        for name in SOLUTIONS:
            code = (REPO / "toy" / "solutions" / "iris" / f"{name}.py").read_text()
            samples = {"cold_bwrap": ([], []), "warm": ([], [])}
            for _ in range(args.n):
                for label, backend in (("cold_bwrap", cold), ("warm", warm)):
                    start = time.perf_counter()
                    raw = backend.run(code, task.public_dir, limits, tmp)
                    samples[label][0].append(time.perf_counter() - start)
                    samples[label][1].append(raw.cpu_s)
            row = {label: {"wall_s": round(statistics.median(w), 3), "cpu_s": round(statistics.median(c), 3)}
                   for label, (w, c) in samples.items()}
            row["wall_speedup"] = round(row["cold_bwrap"]["wall_s"] / row["warm"]["wall_s"], 1)
            row["cpu_speedup"] = round(row["cold_bwrap"]["cpu_s"] / max(row["warm"]["cpu_s"], 1e-6), 1)
            out["per_solution"][name] = row
    code = (REPO / "toy" / "solutions" / "iris" / "good_logistic.py").read_text()
    out["pool_2_workers"] = {}
    for label, backend in (("cold_bwrap", cold), ("warm", warm)):
        with ExecutionPool(backend, max_workers=2) as pool:
            pool.map([(task, code, limits)] * 2, progress=False)
            start = time.perf_counter()
            records = pool.map([(task, code, limits)] * args.pool_jobs, progress=False)
            elapsed = time.perf_counter() - start
        assert all(r.status == "ok" for r in records), [r.message for r in records if r.status != "ok"][:3]
        out["pool_2_workers"][label] = {"jobs": args.pool_jobs, "seconds": round(elapsed, 2),
                                        "executions_per_s": round(args.pool_jobs / elapsed, 2)}
    warm.close()
    out["machine"]["loadavg_end"] = os.getloadavg()
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
