"""Benchmark of the WMRL core: one correction step (64 groups x 8 rollouts), five isotonic refits on 5,000 pairs
(exact scipy fit, scikit-learn, the official release's 10-bin fit in pure Python and with numpy bins, the debiaser's
refit), the calibration map on 1e6 scores, and held-out accuracy of the exact and 10-bin maps from 200 to 50,000
pairs. Prints ONE JSON object; every timing `X_ms` is a median with `X_p10_ms` / `X_p90_ms` (see
nbs/190_bench.ipynb for what each key means). Same entry point as `wmrl bench core`.

    python reproductions/bench/bench_core.py            # full size (about half a minute)
    python reproductions/bench/bench_core.py --quick    # smoke run
    python reproductions/bench/bench_core.py --strict   # exit 1 if a target is missed
"""
import sys

from wmrl.core.bench import cli_bench_core

if __name__ == "__main__":
    sys.exit(cli_bench_core(sys.argv[1:]))
