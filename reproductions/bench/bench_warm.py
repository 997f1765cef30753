"""Cold bwrap vs the warm forking backend, before and after per-job isolation, on real scikit-learn solutions.

Three arms, samples interleaved so that load from other processes hits all alike:
- `cold_bwrap`: a fresh sandboxed interpreter per solution;
- `warm_before`: the warm backend as it was before isolation (commit 70eeb55: every job a plain fork of the
  server, sharing its uid, pid namespace and tmpfs), loaded from git;
- `warm_after`: the isolated warm backend (each job in its own user/pid/mount/ipc/net namespaces with its own tmpfs).

Cost per job is measured in CPU seconds, the unit that does not depend on machine load: for cold, the run's own
cgroup; for warm, the delta of the server's cgroup (server + per-job supervisor + init + solution: everything
isolation adds is in there); plus the host process's own CPU (driving the job, reading the answer). The warm
server's start is reported separately (it is charged to its first job in real runs). Prints one JSON object.

    python reproductions/bench/bench_warm.py [--n 7] [--pool-jobs 24] [--out reproductions/results/bench_warm.json]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from wmrl.execution.limits import SandboxLimits
from wmrl.execution.pool import ExecutionPool
from wmrl.execution.sandbox import get_backend
from wmrl.execution.tasks import load_task
from wmrl.execution.warm import WarmBackend

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS = ("good_logistic", "good_random_forest", "good_gradient_boosting", "good_knn")
BEFORE_COMMIT = "70eeb55"  # the last commit with the un-isolated warm backend


def warm_before_module():
    """The un-isolated warm backend, from git history. It was written against the flat `wmrl.sandbox` of that commit,
    whose names now live in `wmrl.execution.{limits,workdir,backends}`: it gets a stand-in module made of those
    (only for this comparison; nothing in the package imports `wmrl.sandbox`)."""
    import types

    from wmrl.execution import backends, limits, workdir
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{BEFORE_COMMIT}:wmrl/warm.py"], check=True,
                            capture_output=True, text=True).stdout
    flat = types.ModuleType("wmrl.sandbox")
    for part in (limits, workdir, backends):
        flat.__dict__.update({k: v for k, v in vars(part).items() if not k.startswith("__")})
    sys.modules.setdefault("wmrl.sandbox", flat)
    path = Path(tempfile.mkdtemp()) / "warm_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("warm_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def host_cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def sandbox_cpu(backend, raw) -> float:
    "CPU seconds of everything in the sandbox for this job (cold: the run's cgroup, which is raw.cpu_s)."
    if not isinstance(backend, WarmBackend) and not hasattr(backend, "servers"):
        return raw.cpu_s
    return sum(s.group.cpu_s() for s in backend.servers.values())


def measure(backend, code, task, limits, tmp) -> dict:
    warm = hasattr(backend, "servers")
    before = sandbox_cpu(backend, None) if warm else 0.0
    host0, wall0 = host_cpu(), time.perf_counter()
    raw = backend.run(code, task.public_dir, limits, tmp)
    wall, host = time.perf_counter() - wall0, host_cpu() - host0
    sandbox = sandbox_cpu(backend, raw) - before if warm else raw.cpu_s
    assert raw.exit_code == 0 and raw.submission_path is not None, (raw.exit_code, raw.stderr_tail[-500:])
    return {"wall_s": wall, "sandbox_cpu_s": sandbox, "host_cpu_s": host, "charged_cpu_s": raw.cpu_s}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=7, help="executions per solution and arm")
    parser.add_argument("--pool-jobs", type=int, default=24)
    parser.add_argument("--out", default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    limits = SandboxLimits(wall_s=60, memory_mb=1024)
    task = load_task(REPO / "toy" / "tasks" / "iris")
    arms = {"cold_bwrap": get_backend("bwrap"), "warm_before": warm_before_module().WarmBackend(base="bwrap", max_servers=1),
            "warm_after": WarmBackend(base="bwrap", max_servers=1)}
    out = {"command": "python reproductions/bench/bench_warm.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "machine": {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}, "n": args.n, "per_solution": {},
           "warm_server_start": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for label in ("warm_before", "warm_after"):
            arms[label].run("pass", task.public_dir, limits, tmp)  # starts the server (its start is charged there)
            server = next(iter(arms[label].servers.values()))
            out["warm_server_start"][label] = {"cpu_s": round(server.startup_cpu_s, 3), "wall_s": round(server.startup_wall_s, 3)}
        for name in SOLUTIONS:
            code = (REPO / "toy" / "solutions" / "iris" / f"{name}.py").read_text()
            samples = {label: [] for label in arms}
            for _ in range(args.n):
                for label, backend in arms.items():
                    samples[label].append(measure(backend, code, task, limits, tmp))
            row = {label: {key: round(statistics.median(s[key] for s in rows), 4) for key in rows[0]}
                   for label, rows in samples.items()}
            for label in ("warm_before", "warm_after"):
                cold_cost = row["cold_bwrap"]["sandbox_cpu_s"] + row["cold_bwrap"]["host_cpu_s"]
                warm_cost = row[label]["sandbox_cpu_s"] + row[label]["host_cpu_s"]
                row[f"cpu_speedup_{label}"] = round(cold_cost / max(warm_cost, 1e-6), 1)
                row[f"wall_speedup_{label}"] = round(row["cold_bwrap"]["wall_s"] / row[label]["wall_s"], 1)
            row["isolation_cost_cpu_s"] = round(row["warm_after"]["sandbox_cpu_s"] + row["warm_after"]["host_cpu_s"]
                                                - row["warm_before"]["sandbox_cpu_s"] - row["warm_before"]["host_cpu_s"], 4)
            out["per_solution"][name] = row
            print(name, json.dumps(row), file=sys.stderr, flush=True)
    code = (REPO / "toy" / "solutions" / "iris" / "good_logistic.py").read_text()
    out["pool_2_workers"] = {}
    for label, backend in arms.items():
        with ExecutionPool(backend, max_workers=2) as pool:
            pool.map([(task, code, limits)] * 2, progress=False)
            start = time.perf_counter()
            records = pool.map([(task, code, limits)] * args.pool_jobs, progress=False)
            elapsed = time.perf_counter() - start
        assert all(r.status == "ok" for r in records), [r.message for r in records if r.status != "ok"][:3]
        out["pool_2_workers"][label] = {"jobs": args.pool_jobs, "seconds": round(elapsed, 2),
                                        "executions_per_s": round(args.pool_jobs / elapsed, 2)}
    for label in ("warm_before", "warm_after"):
        arms[label].close()
    out["min_cpu_speedup_warm_after"] = min(r["cpu_speedup_warm_after"] for r in out["per_solution"].values())
    out["machine"]["loadavg_end"] = os.getloadavg()
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
