"""Benchmark: the toy bandit's full comparison (7 variants x 32 seeds x 2,000 steps) in one vectorised run.

Goal from issue 3: under 30 s on 2 cores. Prints one JSON object; timing lives here, never in a test.
Usage: python reproductions/bench/bench_bandit.py [--seeds 32] [--steps 2000] [--repeat 3]
"""
import argparse
import json
import os
import platform
import time

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=32)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best and the median are reported")
    args = parser.parse_args(argv)
    from wmrl.toy.bandit import VARIANTS, BanditConfig, risky_problem, simulate, summarise

    config = BanditConfig(seeds=args.seeds, steps=args.steps)
    problem = risky_problem()
    walls, cpus = [], []
    for _ in range(args.repeat):
        wall0, cpu0 = time.perf_counter(), time.process_time()
        run = simulate(problem, config)
        walls.append(time.perf_counter() - wall0)
        cpus.append(time.process_time() - cpu0)
    summary = summarise(run)
    walls_sorted = sorted(walls)
    print(json.dumps(dict(
        benchmark="bandit_simulate", variants=len(VARIANTS), seeds=args.seeds, steps=args.steps,
        lane_steps=len(VARIANTS) * args.seeds * args.steps, wall_s_best=walls_sorted[0],
        wall_s_median=walls_sorted[len(walls) // 2], cpu_s_best=min(cpus), goal_wall_s=30.0,
        meets_goal=walls_sorted[0] < 30.0, cpu_count=os.cpu_count(), python=platform.python_version(),
        final_gap={name: round(row["final_gap_mean"], 5) for name, row in summary.items()})))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
