"""Fidelity of a world-model backend on solutions with real sandbox records (toy/solutions/*/records.json).

Usage: python reproductions/bench/wm_fidelity.py [--backend static|transformers|vllm|http] [--model M]
                                                 [--folders toy/solutions/iris toy/solutions/iris_heldout]
Prints one JSON object: per-check precision/recall, status accuracy, reward MAE before/after cross-fitted
isotonic calibration, within-group Spearman, fallbacks, and world-model seconds per solution.
On a GPU box: --backend vllm --model Qwen/Qwen3-4B (or any local model path) runs the real vLLM world model.
"""
import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="static", choices=["static", "transformers", "vllm", "http"])
    parser.add_argument("--model", default=None)
    parser.add_argument("--task", default=str(ROOT / "toy/tasks/iris"))
    parser.add_argument("--folders", nargs="+", default=[str(ROOT / "toy/solutions/iris"), str(ROOT / "toy/solutions/iris_heldout")])
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--min-confidence", type=float, default=0.5)
    args = parser.parse_args(argv)

    from wmrl.execution.tasks import load_task
    from wmrl.world_model.backends import get_world_model
    from wmrl.world_model.fidelity import fidelity_report, load_cases
    task = load_task(args.task)
    kwargs = {"min_confidence": args.min_confidence}
    if args.backend != "static" and args.model: kwargs["model"] = args.model
    if args.backend == "transformers": kwargs["max_new_tokens"] = args.max_new_tokens
    if args.backend == "vllm": kwargs["max_tokens"] = args.max_new_tokens
    world_model = get_world_model(args.backend, **kwargs)
    out = {"backend": args.backend, "model": args.model, "folders": {}}
    for folder in args.folders:
        cases = load_cases(folder)
        started = time.perf_counter()
        predictions = world_model.predict([(task, c.code) for c in cases])
        seconds = time.perf_counter() - started
        report = fidelity_report(cases, predictions=predictions, min_confidence=args.min_confidence).to_dict()
        keep = ("checks", "status_accuracy", "reward_mae", "reward_mae_calibrated", "spearman", "fallbacks", "n_cases")
        out["folders"][Path(folder).name] = {**{k: report[k] for k in keep}, "wm_seconds_per_solution": round(seconds / len(cases), 4),
                                             "confusion": {r: {p: n for p, n in row.items() if n} for r, row in report["confusion"].items()}}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
