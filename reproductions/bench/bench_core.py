"""Benchmark of the WMRL core: one correction step (64 groups x 8 rollouts), three isotonic refits on 5,000 pairs,
and the calibration map on 1e6 scores. Prints one JSON object (see nbs/055_bench.ipynb for what each key means).

    python reproductions/bench/bench_core.py            # full size (about half a minute)
    python reproductions/bench/bench_core.py --quick    # smoke run
"""
import sys

from wmrl.bench import cli_bench_core

if __name__ == "__main__":
    sys.exit(cli_bench_core(sys.argv[1:]))
