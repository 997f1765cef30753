"""Ray fan-out of sandbox executions against the local thread pool; prints one JSON object.

On a local Ray instance (`--num-cpus`, default 2): the time to start Ray, the time to ship the iris task's public
folder (pack + put), and the executions per second of a small graded solution (copy the sample submission) on the
local `ExecutionPool` and on `RayExecutionPool` (same width), with the per-execution overhead of Ray as the
difference of the median batch time per job. The two pools run alternately `--rounds` times so that load from
other processes hits both alike. Ray buys nodes, not speed on one machine: expect an overhead of a few ms per
execution.

    python reproductions/bench/bench_ray_pool.py [--jobs 24] [--rounds 3] [--num-cpus 2] [--backend auto]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from wmrl.adapters.ray_pool import RayExecutionPool, pack_folder
from wmrl.execution.limits import SandboxLimits
from wmrl.execution.pool import ExecutionPool
from wmrl.execution.tasks import load_task

QUICK = ("import os, shutil\n"
         "shutil.copy(os.path.join(os.environ['DATA_DIR'], 'sample_submission.csv'), os.environ['SUBMISSION_PATH'])\n")
REPO = Path(__file__).resolve().parents[2]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=24, help="executions per batch")
    parser.add_argument("--rounds", type=int, default=3, help="batches per pool (alternating)")
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray instance = local pool width")
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args(argv)
    import ray
    iris = load_task(REPO / "toy" / "tasks" / "iris")
    limits = SandboxLimits(wall_s=60, memory_mb=1024)
    jobs = [(iris, QUICK, limits)] * args.jobs
    out = {"machine": {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}, "jobs": args.jobs,
           "ray_version": ray.__version__, "backend": args.backend}
    started = time.perf_counter()
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    out["ray_init_s"] = round(time.perf_counter() - started, 2)
    started = time.perf_counter()
    digest, blob = pack_folder(iris.public_dir)
    out["pack_ms"] = round((time.perf_counter() - started) * 1000, 2)
    out["shipped_kib"] = round(len(blob) / 1024, 1)
    seconds = {"local": [], "ray": []}
    with ExecutionPool(args.backend, max_workers=args.num_cpus) as local, \
            RayExecutionPool(backend=args.backend) as remote:
        started = time.perf_counter()
        remote.ship(iris)
        first = remote.map(jobs[:1], progress=False)[0]  # ships, unpacks on the node, starts a worker
        out["ray_first_job_s"] = round(time.perf_counter() - started, 3)
        assert first.status == "ok", first.message
        for _ in range(args.rounds):
            for name, pool in (("local", local), ("ray", remote)):
                started = time.perf_counter()
                records = pool.map(jobs, progress=False)
                seconds[name].append(time.perf_counter() - started)
                assert all(r.status == "ok" for r in records), [r.message for r in records if r.status != "ok"][:3]
    for name, samples in seconds.items():
        out[name] = {"median_batch_s": round(statistics.median(samples), 3),
                     "executions_per_s": round(args.jobs / statistics.median(samples), 2), "batches": len(samples)}
    per_job = {name: statistics.median(samples) / args.jobs * args.num_cpus for name, samples in seconds.items()}
    out["ray_overhead_ms_per_execution"] = round((per_job["ray"] - per_job["local"]) * 1000, 1)
    out["machine"]["loadavg_end"] = os.getloadavg()
    ray.shutdown()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
