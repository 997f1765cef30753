"""Load run: many mixed honest and hostile jobs through one warm pool; no honest reward may move.

Honest jobs are the real iris solutions of toy/solutions/iris (good ones and ordinary failures); hostile jobs are
the contamination attacks of tests/contamination_attacks.py. Every honest job's record (status, reward, graded
score) is compared with the same solution's cold bwrap record; every hostile job must get a record of its own (no
infrastructure error, a finite reward; the result forger is charged the CPU it burnt); and after the run the pool
must still serve. Writes a small JSON summary.

    python reproductions/bench/load_warm.py [--jobs 200] [--workers 2] [--seed 0] [--out reproductions/results/load_warm.json]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from wmrl.execution.limits import SandboxLimits
from wmrl.execution.pool import ExecutionPool, ledger
from wmrl.execution.sandbox import get_backend
from wmrl.execution.task_builder import build_iris_task
from wmrl.execution.tasks import load_task
from wmrl.execution.warm import WarmBackend

REPO = Path(__file__).resolve().parents[2]
LIMITS = SandboxLimits(wall_s=30, memory_mb=1024, nproc=48, disk_mb=64, file_mb=32, max_output_mb=4, output_kb=4)
ATTACK_LIMITS = SandboxLimits(wall_s=8, memory_mb=1024, nproc=48, disk_mb=64, file_mb=32, max_output_mb=4, output_kb=4)
SLOW_HONEST = {"bad_compute_endless_loop", "bad_compute_sleep", "bad_compute_refit_loop"}  # they only wait out the clock


def attacks():
    spec = importlib.util.spec_from_file_location("contamination_attacks", REPO / "tests" / "contamination_attacks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_run(n_jobs: int = 200, workers: int = 2, seed: int = 0, hostile_share: float = 0.4, progress: bool = True) -> dict:
    module = attacks()
    folder = Path(tempfile.mkdtemp(prefix="wmrl-load-"))
    try:
        task = load_task(build_iris_task(folder / "task").root)
        planted = folder / "planted"
        planted.mkdir()
        shutil.copy(task.answer_path, planted / "submission.csv")
        honest = {p.stem: p.read_text() for p in sorted((REPO / "toy" / "solutions" / "iris").glob("*.py"))
                  if p.stem not in SLOW_HONEST}
        honest["spawning_logistic"] = module.SPAWNING_PREFIX + honest["good_logistic"]  # uses threads and a subprocess
        hostile = {name: module.fill(code, str(task.root), str(planted)) for name, code in module.ATTACKS.items()}
        rng = random.Random(seed)
        n_hostile = round(n_jobs * hostile_share)
        plan = []
        for kind, count, names in (("hostile", n_hostile, sorted(hostile)), ("honest", n_jobs - n_hostile, sorted(honest))):
            # every program as evenly as the count allows (each at least once when count >= len(names)), then shuffled
            plan += [(kind, name) for name in names * (count // len(names)) + rng.sample(names, count % len(names))]
        rng.shuffle(plan)
        kinds = [kind for kind, _ in plan]
        with ExecutionPool(get_backend("bwrap"), max_workers=workers) as cold_pool:
            used = sorted({name for kind, name in plan if kind == "honest"})
            cold = dict(zip(used, cold_pool.map([(task, honest[n], LIMITS) for n in used], progress=progress, desc="cold reference")))
        backend = WarmBackend(base="bwrap", max_servers=2)
        started = time.perf_counter()
        with ExecutionPool(backend, max_workers=workers) as pool:
            jobs = [(task, honest[name], LIMITS) if kind == "honest" else (task, hostile[name], ATTACK_LIMITS) for kind, name in plan]
            records = pool.map(jobs, progress=progress, desc="warm load run")
            elapsed = time.perf_counter() - started
            after = pool.map([(task, honest["good_logistic"], LIMITS)] * 4, progress=False)
        reruns = backend.reruns
        backend.close()
        wrong = [{"job": i, "solution": name, "warm": [r.status, r.reward], "cold": [cold[name].status, cold[name].reward]}
                 for i, ((kind, name), r) in enumerate(zip(plan, records)) if kind == "honest" and not module.same_record(r, cold[name])]
        hostile_bad = [{"job": i, "attack": name, "status": r.status, "infra": r.infra_error, "message": r.message[:200]}
                       for i, ((kind, name), r) in enumerate(zip(plan, records))
                       if kind == "hostile" and (r.infra_error or math.isnan(r.reward))]
        # the forger burns 1.5 CPU-s, then claims exit 0 in 0 s with 0 CPU-s; its real record shows the burn (or
        # the wall clock that stopped it, on a loaded machine) -- never the claim
        forged = [{"job": i, "cpu_s": r.cpu_s, "wall_s": r.wall_s, "status": r.status}
                  for i, ((kind, name), r) in enumerate(zip(plan, records)) if name == "forge_result_lines"
                  and not ((r.status == "no_submission" and r.cpu_s >= 1.0) or (r.status == "timeout" and r.wall_s >= ATTACK_LIMITS.wall_s))]
        return {"jobs": n_jobs, "workers": workers, "seed": seed, "honest_jobs": kinds.count("honest"),
                "hostile_jobs": n_hostile, "distinct_honest": len(used), "distinct_attacks": len({n for k, n in plan if k == "hostile"}),
                "jobs_per_attack": dict(sorted(Counter(n for k, n in plan if k == "hostile").items())),
                "jobs_per_honest_program": dict(sorted(Counter(n for k, n in plan if k == "honest").items())),
                "honest_rewards_differing_from_cold": wrong, "hostile_without_own_record": hostile_bad,
                "forged_records": forged, "pool_serves_after": all(r.status == "ok" for r in after),
                "reruns_alone": reruns, "seconds": round(elapsed, 1), "jobs_per_s": round(n_jobs / elapsed, 2),
                "ledger": {k: v for k, v in ledger(records).items() if k != "peak_mb_max"},
                "statuses_by_kind": {kind: dict(Counter(r.status for (k, _), r in zip(plan, records) if k == kind))
                                     for kind in ("honest", "hostile")},
                "loadavg_end": os.getloadavg()}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="also write the JSON summary here")
    args = parser.parse_args(argv)
    summary = load_run(args.jobs, args.workers, args.seed)
    summary["command"] = "python reproductions/bench/load_warm.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = json.dumps(summary, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    ok = not summary["honest_rewards_differing_from_cold"] and not summary["hostile_without_own_record"] \
        and not summary["forged_records"] and summary["pool_serves_after"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
