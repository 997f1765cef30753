"""GPU check: the vLLM world model on real solutions, then 5 WMRL GRPO steps through TRL with vLLM colocate.

Run on one GPU (an H200 finishes well inside 10 minutes with a model of a few billion parameters or less):

    python reproductions/gpu_check.py --model /path/to/small-instruct-model [--out reproductions/results/gpu_check.json]

or set WMRL_GPU_CHECK_MODEL instead of --model. Needs the `gpu` extra (vLLM within TRL's range) next to the `train`
extra. `--dry-run` resolves the plan and the TRL config without loading weights or importing vLLM (CPU is fine).

Phases, each timed and recorded in the JSON even when it fails (the error is written instead of the numbers):
1. world model: a `vllm.LLM` on the model (structured JSON verdicts, wmrl.wm_backends.VLLMWorldModel) predicts every
   solution in toy/solutions/iris; the same solutions are executed in the sandbox (in parallel) and the predicted
   and real statuses/rewards are compared;
2. training: `wmrl.train.run_training` with the qwen3.5-4b config, the given model as the policy (vLLM colocate
   generation) and the SAME world-model engine from phase 1 (a frozen copy of the backbone), on the iris task, for
   --steps steps; the correction warm-ups are shrunk so that calibration moves within the few steps.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpu_check.py", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=os.environ.get("WMRL_GPU_CHECK_MODEL"),
                        help="folder of a small instruct model (default: $WMRL_GPU_CHECK_MODEL)")
    parser.add_argument("--out", default=str(REPO / "reproductions" / "results" / "gpu_check.json"))
    parser.add_argument("--steps", type=int, default=5, help="WMRL GRPO steps")
    parser.add_argument("--task", default=str(REPO / "toy" / "tasks" / "iris"))
    parser.add_argument("--solutions", default=str(REPO / "toy" / "solutions" / "iris"))
    parser.add_argument("--wm-memory", type=float, default=0.30, help="GPU memory fraction of the world-model engine")
    parser.add_argument("--policy-memory", type=float, default=0.25, help="GPU memory fraction of TRL's vLLM engine")
    parser.add_argument("--max-model-len", type=int, default=8192)
    parser.add_argument("--completion-tokens", type=int, default=1024, help="max new tokens per policy answer")
    parser.add_argument("--execute-timeout", type=float, default=30.0, help="sandbox wall seconds per solution")
    parser.add_argument("--workers", type=int, default=8, help="parallel sandbox executions in phase 1")
    parser.add_argument("--skip-execute", action="store_true", help="phase 1 without the sandbox comparison")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and the TRL config; load nothing")
    args = parser.parse_args(argv)
    if not args.model:
        parser.error("give --model PATH or set WMRL_GPU_CHECK_MODEL")
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    for name in ("wm_memory", "policy_memory"):
        if not 0.0 < getattr(args, name) < 1.0:
            parser.error(f"--{name.replace('_', '-')} must be in (0, 1)")
    if args.wm_memory + args.policy_memory > 0.9:
        parser.error("--wm-memory + --policy-memory must leave room for training (<= 0.9)")
    return args


def training_overrides(args: argparse.Namespace, out_dir: Path) -> list[str]:
    "The qwen3.5-4b config turned into a short single-GPU check on the iris task."
    return [
        f"model.path={args.model}", "name=gpu-check", f"output_dir={out_dir}",
        "tasks.loader=task", "tasks.root=null", f"tasks.paths=[{args.task}]", "tasks.prompts_per_task=16",
        f"trl.max_steps={args.steps}", "trl.per_device_train_batch_size=16", "trl.gradient_accumulation_steps=1",
        f"trl.max_completion_length={args.completion_tokens}", "trl.save_strategy=no",
        f"trl.vllm_gpu_memory_utilization={args.policy_memory}", f"trl.vllm_max_model_length={args.max_model_len}",
        f"sandbox.wall_s={args.execute_timeout}", "sandbox.memory_mb=8192", f"sandbox.workers={args.workers}",
        "correction.min_pairs=8", "correction.refit_every=8", "correction.warmup=2",
        f"world_model.options.engine_kwargs.gpu_memory_utilization={args.wm_memory}",
        f"world_model.options.engine_kwargs.max_model_len={args.max_model_len}",
    ]


def plan(args: argparse.Namespace) -> dict:
    "What the check will do, with the resolved TRL config (no weights, no vLLM import)."
    from wmrl.train import dry_run, load_config
    solutions = sorted(Path(args.solutions).glob("*.py"))
    if not solutions:
        raise FileNotFoundError(f"no solutions (*.py) in {args.solutions}")
    config = load_config("qwen3.5-4b", training_overrides(args, Path(args.out).with_suffix("") / "run"))
    resolved = dry_run(config)
    return {"model": args.model, "solutions": len(solutions), "steps": args.steps,
            "groups_per_step": resolved["groups_per_step"], "rows_per_step": resolved["rows_per_step"],
            "trl": {k: resolved["trl"][k] for k in ("use_vllm", "vllm_mode", "vllm_gpu_memory_utilization",
                                                     "num_generations", "learning_rate", "max_completion_length",
                                                     "steps_per_generation", "bf16")},
            "world_model": config["world_model"], "notes": resolved["notes"]}


def phase_world_model(args: argparse.Namespace, record: dict):
    "Phase 1: build the vLLM world model, predict every solution, compare with real executions."
    from wmrl.tasks import load_task
    from wmrl.wm_backends import VLLMWorldModel
    task = load_task(args.task)
    files = sorted(Path(args.solutions).glob("*.py"))
    codes = [f.read_text() for f in files]
    started = time.perf_counter()
    world_model = VLLMWorldModel(model=args.model, temperature=0.7, top_p=0.8, max_tokens=1024, seed=0,
                                 engine_kwargs={"gpu_memory_utilization": args.wm_memory,
                                                "max_model_len": args.max_model_len})
    record["load_s"] = time.perf_counter() - started
    started = time.perf_counter()
    predictions = world_model.predict([(task, code) for code in codes])
    record["predict_s"] = time.perf_counter() - started
    record["n_solutions"] = len(codes)
    record["prompts"] = int(world_model.stats.get("prompts", 0))
    record["fallbacks"] = {k: int(v) for k, v in world_model.stats.items() if k.startswith("fallback_")}
    rows = [{"solution": f.stem, "predicted_status": p.status, "predicted_reward": p.score} for f, p in zip(files, predictions)]
    if not args.skip_execute:
        from wmrl.sandbox import SandboxLimits, execute
        limits = SandboxLimits.from_settings(wall_s=args.execute_timeout)
        started = time.perf_counter()
        with ThreadPoolExecutor(args.workers) as pool:
            executed = list(pool.map(lambda code: execute(task, code, None, limits), codes))
        record["execute_s"] = time.perf_counter() - started
        for row, real in zip(rows, executed):
            row.update(real_status=real.status, real_reward=real.reward)
        record["status_agreement"] = sum(r["predicted_status"] == r["real_status"] for r in rows) / len(rows)
        record["reward_mae"] = sum(abs(r["predicted_reward"] - r["real_reward"]) for r in rows) / len(rows)
    record["rows"] = rows
    return world_model


def phase_training(args: argparse.Namespace, record: dict, world_model) -> None:
    "Phase 2: WMRL GRPO steps through TRL (vLLM colocate) with the phase-1 world model."
    from wmrl.train import load_config, run_training
    out_dir = Path(args.out).with_suffix("") / "run"
    config = load_config("qwen3.5-4b", training_overrides(args, out_dir))
    started = time.perf_counter()
    summary = run_training(config, world_model=world_model)
    record["wall_s"] = time.perf_counter() - started
    record["summary"] = summary
    metrics = json.loads((out_dir / "metrics.json").read_text())
    record["step_times_s"] = [h["step_time"] for h in metrics["log_history"] if "step_time" in h]
    record["wmrl_per_step"] = [{k: h["stats"].get(k) for k in ("n_anchor_groups", "n_pairs", "calibrated",
                                                                  "anchor_weight", "predict_seconds", "execute_seconds")}
                               for h in metrics["wmrl_history"]]


def _device() -> dict:
    import torch
    if not torch.cuda.is_available():
        return {"cuda": False}
    return {"cuda": True, "name": torch.cuda.get_device_name(0), "count": torch.cuda.device_count(),
            "total_gib": torch.cuda.get_device_properties(0).total_memory / 2**30,
            "peak_allocated_gib_trainer": torch.cuda.max_memory_allocated(0) / 2**30}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        print(json.dumps(plan(args), indent=1, default=str))
        return 0
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    started = time.perf_counter()
    result = {"model": args.model, "steps": args.steps, "world_model": {}, "training": {}}
    world_model = None
    for name, phase in (("world_model", phase_world_model), ("training", phase_training)):
        try:
            if name == "world_model":
                world_model = phase(args, result[name])
            else:
                phase(args, result[name], world_model)
            result[name]["ok"] = True
        except Exception as error:  # record and go on: a GPU check must report what it could measure
            result[name].update(ok=False, error=f"{type(error).__name__}: {error}",
                                traceback=traceback.format_exc()[-4000:])
        if name == "world_model" and world_model is None:
            result["training"] = {"ok": False, "error": "skipped: no world model"}
            break
    result["total_s"] = time.perf_counter() - started
    try:
        result["device"] = _device()
        from importlib.metadata import version
        result["versions"] = {p: version(p) for p in ("torch", "vllm", "trl", "transformers")}
    except Exception as error:  # noqa: BLE001 - informational only
        result["device"] = {"error": str(error)}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps({k: result[k] for k in ("total_s", "device")} | {
        "world_model_ok": result["world_model"].get("ok"), "training_ok": result["training"].get("ok")}, default=str))
    return 0 if result["world_model"].get("ok") and result["training"].get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
