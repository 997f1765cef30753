"""Sandbox overhead and pool throughput; prints one JSON object.

Per-execution overhead of each backend = median wall time of `backend.run("pass")` (the whole run: workdir, cgroup,
sandbox start, the launcher, cleanup) minus the median of a bare `python -c pass` started with subprocess.
Samples of the bare interpreter and of the backends are interleaved so that load from other processes hits both
alike. Targets: bwrap < 20 ms over bare; docker is expected at +400-700 ms.
Pool throughput: executions per second of a small graded solution (copy the sample submission) on the iris task.

    python reproductions/bench/bench_sandbox.py [--n 30] [--pool-jobs 24] [--backends bwrap subprocess docker]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from wmrl.execution.limits import SandboxLimits
from wmrl.execution.pool import ExecutionPool
from wmrl.execution.sandbox import get_backend
from wmrl.execution.task_builder import build_iris_task
from wmrl.execution.tasks import load_task

QUICK = ("import os, shutil\n"
         "shutil.copy(os.path.join(os.environ['DATA_DIR'], 'sample_submission.csv'), os.environ['SUBMISSION_PATH'])\n")


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def summary(samples: list[float]) -> dict:
    return {"median_ms": round(statistics.median(samples), 2), "mean_ms": round(statistics.fmean(samples), 2),
            "p90_ms": round(sorted(samples)[int(0.9 * (len(samples) - 1))], 2), "n": len(samples)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30, help="runs per backend")
    parser.add_argument("--pool-jobs", type=int, default=24)
    parser.add_argument("--backends", nargs="+", default=["bwrap", "subprocess", "docker"])
    args = parser.parse_args(argv)
    limits = SandboxLimits(wall_s=30, memory_mb=1024)
    backends, skipped = {}, {}
    for name in args.backends:
        try:
            backends[name] = get_backend(name)
        except Exception as err:  # docker without a daemon, bwrap missing
            skipped[name] = f"{type(err).__name__}: {err}"
    out = {"machine": {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}, "skipped": skipped}
    with tempfile.TemporaryDirectory() as tmp:
        public, results = Path(tmp, "public"), Path(tmp, "out")
        public.mkdir()
        results.mkdir()
        bare_cmd = [sys.executable, "-c", "pass"]
        samples = {"bare": [], **{name: [] for name in backends}}
        for fn in [lambda: subprocess.run(bare_cmd, check=True)] + [lambda b=b: b.run("pass", public, limits, results)
                                                                   for b in backends.values()]:
            fn()  # warm the page cache once
        for _ in range(args.n):
            samples["bare"].append(timed(lambda: subprocess.run(bare_cmd, check=True)))
            for name, backend in backends.items():
                samples[name].append(timed(lambda b=backend: b.run("pass", public, limits, results)))
        bare = statistics.median(samples["bare"])
        out["per_execution"] = {name: {**summary(s), "over_bare_ms": round(statistics.median(s) - bare, 2)}
                                for name, s in samples.items()}
        task = load_task(build_iris_task(Path(tmp, "tasks")).root)
        pool_backend = backends.get("bwrap") or get_backend("auto")
        throughput = {}
        for workers in (1, 2):
            with ExecutionPool(pool_backend, max_workers=workers) as pool:
                pool.map([(task, QUICK, limits)] * 2, progress=False)
                start = time.perf_counter()
                records = pool.map([(task, QUICK, limits)] * args.pool_jobs, progress=False)
                elapsed = time.perf_counter() - start
            assert all(r.status == "ok" for r in records), [r.message for r in records if r.status != "ok"][:3]
            throughput[f"{workers}_workers"] = {"jobs": args.pool_jobs, "seconds": round(elapsed, 3),
                                                "executions_per_s": round(args.pool_jobs / elapsed, 2)}
        out["pool"] = {"backend": pool_backend.label, "job": "graded iris solution (copies the sample submission)",
                       **throughput}
    out["machine"]["loadavg_end"] = os.getloadavg()
    out["targets"] = {"bwrap_over_bare_ms": "< 20", "docker_over_bare_ms": "+400..700 expected"}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
