"""Benchmark: `wmrl train tiny-cpu` end to end (tiny Qwen3 policy, static world model, bubblewrap sandbox, TRL GRPO).

Goal from issue 7: about a minute on CPU. Prints one JSON object; timing lives here, never in a test.
Usage: python reproductions/bench/bench_trl.py [--steps 3] [--method wmrl] [key=value ...]
"""
import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "2")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--method", default="wmrl")
    parser.add_argument("overrides", nargs="*", help="extra key=value overrides of the tiny-cpu config")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):
        from wmrl.adapters.train import run_training
        from wmrl.adapters.train_config import load_config
        with tempfile.TemporaryDirectory() as folder:
            config = load_config("tiny-cpu", [f"trl.max_steps={args.steps}", f"method={args.method}",
                                              f"output_dir={folder}", *args.overrides])
            summary = run_training(config)
            with open(os.path.join(folder, "metrics.json")) as handle:
                metrics = json.load(handle)
    steps = [h["step_time"] for h in metrics["log_history"] if "step_time" in h]
    print(json.dumps({
        "benchmark": "trl_tiny_cpu", "method": args.method, "steps": summary["steps"],
        "total_wall_s": round(time.perf_counter() - started, 2),
        "run_wall_s": round(summary["wall_s"], 2), "step_times_s": [round(s, 3) for s in steps],
        "sandbox_s": round(summary["sandbox_s"], 2), "world_model_s": round(summary["world_model_s"], 3),
        "executions": summary["executions"], "final_loss": summary["final_loss"],
        "cpu_count": os.cpu_count(), "python": platform.python_version()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
