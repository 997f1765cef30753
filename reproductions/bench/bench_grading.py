"""Benchmark: grading costs that sit on the anchor path of every WMRL step.

Measures (a) `grade_submission_file` on the shipped iris task (read, validate, score, place on two boards),
(b) `leaderboard_position` on MLE-Dojo's 404 real Kaggle boards, (c) `build_iris_task` (96-model reference
population). Prints one JSON object; timing lives here, never in a test.
Usage: python reproductions/bench/bench_grading.py [--repeat 20]
"""
import argparse
import json
import os
import platform
import tempfile
from pathlib import Path

from wmrl.core.bench import summarize, time_interleaved

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")
ROOT = Path(__file__).resolve().parents[2]


def _timed(fn, repeat: int) -> dict:
    "Median, p10 and p90 wall milliseconds of `repeat` calls, in the format of every kit benchmark."
    return summarize(time_interleaved({"run": fn}, repeats=repeat, warmup=0)["run"], "wall")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    import numpy as np
    import pandas as pd

    from wmrl.execution.grading import grade_submission_file, leaderboard_position
    from wmrl.execution.task_builder import build_iris_task
    from wmrl.execution.tasks import load_task

    iris = load_task(ROOT / "toy" / "tasks" / "iris")
    result = {"benchmark": "grading", "python": platform.python_version(), "cpus": os.cpu_count()}
    result["grade_iris_file"] = _timed(lambda: grade_submission_file(iris, iris.sample_submission_path), args.repeat)
    dojo = ROOT.parent / "shared" / "data" / "mle-dojo"
    if (dojo / "competitions").is_dir():
        higher = json.loads((dojo / "higher_is_better.json").read_text())
        boards = [(pd.read_csv(path)["score"].to_numpy(float), higher[path.parent.name])
                  for path in sorted((dojo / "competitions").glob("*/*_leaderboard.csv"))]
        probes = [np.nanquantile(scores, np.linspace(0, 1, 100)) for scores, _ in boards]

        def all_boards():
            for (scores, direction), qs in zip(boards, probes):
                for q in qs:
                    leaderboard_position(q, scores, direction)

        timing = _timed(all_boards, max(1, args.repeat // 10))
        calls = 100 * len(boards)
        result["position_real_boards"] = {**timing, "boards": len(boards), "calls": calls,
                                          "us_per_call": 1e3 * timing["wall_ms"] / calls,
                                          "max_board_rows": int(max(len(s) for s, _ in boards))}
    with tempfile.TemporaryDirectory() as tmp:
        result["build_iris_task"] = _timed(lambda: build_iris_task(tmp), 3)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
