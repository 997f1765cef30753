"""GPU check: the full-scale path on one GPU in under 10 minutes, each phase in its own process, next to the plan.

Run on the GPU box (no hub needed: without --model the policy and world model are random weights of the shipped
architecture file):

    python reproductions/gpu_check.py [--arch qwen3.5-4b] [--model PATH] [--out reproductions/results/gpu_check.json]

Needs the `gpu` extra (vLLM within TRL's range, flash-linear-attention, bitsandbytes) next to the `train` extra.
`--dry-run` prints the phases, their time limits and the plan's memory figures without loading anything (CPU is
fine).

Phases, each a subprocess with its own time limit, timed, with the device's peak memory sampled from nvidia-smi
every 0.5 s (all processes on the card, vLLM's engine cores included) and the phase's own torch peak:
0. build: a random model of --arch (bf16, built on the GPU) and the kit's local tokenizer, saved to the run
   folder; skipped with --model;
1. world_model: a `vllm.LLM` on it as wmrl.world_model.backends.VLLMWorldModel with the config's engine settings, predicting
   every solution in toy/solutions/iris; the same solutions run in the sandbox and statuses/rewards are compared;
2. training: `wmrl.adapters.train.run_training` with the qwen3.5 config's memory settings (float32 master weights, 8-bit
   AdamW, gradient checkpointing, TRL's colocated engine with sleep mode, token_truncate IS) on the iris task,
   shortened to --steps steps of 2 groups; its own world-model engine is built from the config, as in a real run;
3. agent: the same as the multi-turn research agent (2 turns) on wmrl's mini competition.
Before them, `versions` records what this image has (packages, CUDA, kernels). The lent machine has no network and
no pip, and its image lacks trl, datasets, vLLM, bitsandbytes and flash-linear-attention: the check degrades instead
of stopping. Without vLLM, generation and the world model run on transformers; without bitsandbytes, AdamW is
torch's; without trl the TRL phases are skipped with the reason. `make gpu-wheels` stages the pure-Python wheels
that fit beside the repository (trl, datasets and their pure-Python dependencies, the fla kernels); `--wheels DIR`
unpacks them into the run folder and puts them on every phase's path (no pip needed). `--missing trl,vllm` rehearses
a lent image on a machine that has them.
A phase that fails, times out or is killed is recorded with its reason (the error and traceback tail, or the exit
code and stderr tail) and the next phases still run where they can. The JSON report holds every phase, the plan's
figures for the same settings (`wmrl.adapters.plan`) and measured / planned peak, so the first GPU run also calibrates the
plan. The exit code is 0 only when every phase passed.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PHASES = ("versions", "build", "world_model", "training", "agent")
LIMITS_S = {"versions": 30, "build": 90, "world_model": 120, "training": 210, "agent": 120}  # 570 s: inside 10 minutes
MODULES = {"torch": "torch", "transformers": "transformers", "accelerate": "accelerate", "peft": "peft", "trl": "trl",
           "datasets": "datasets", "vllm": "vllm", "bitsandbytes": "bitsandbytes", "flash-linear-attention": "fla",
           "xgrammar": "xgrammar"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpu_check.py", description=__doc__.split("\n")[0])
    parser.add_argument("--arch", default="qwen3.5-4b", help="architecture file (reproductions/configs/models)")
    parser.add_argument("--config", default=None, help="run config whose memory settings are checked (default: the arch's)")
    parser.add_argument("--model", default=os.environ.get("WMRL_GPU_CHECK_MODEL"),
                        help="folder of real weights (default: $WMRL_GPU_CHECK_MODEL; none: random weights of --arch)")
    parser.add_argument("--out", default=str(REPO / "reproductions" / "results" / "gpu_check.json"))
    parser.add_argument("--steps", type=int, default=2, help="WMRL GRPO steps of phase 2")
    parser.add_argument("--agent-steps", type=int, default=1, help="steps of the research agent (0: skip phase 3)")
    parser.add_argument("--task", default=str(REPO / "toy" / "tasks" / "iris"))
    parser.add_argument("--solutions", default=str(REPO / "toy" / "solutions" / "iris"))
    parser.add_argument("--completion-tokens", type=int, default=1024, help="max new tokens per policy answer / turn")
    parser.add_argument("--max-model-len", type=int, default=8192, help="both engines' context in the check")
    parser.add_argument("--execute-timeout", type=float, default=30.0, help="sandbox wall seconds per solution")
    parser.add_argument("--workers", type=int, default=8, help="parallel sandbox executions")
    parser.add_argument("--skip-execute", action="store_true", help="phase 1 without the sandbox comparison")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every phase's time limit")
    parser.add_argument("--phases", default=None, help="comma-separated subset to run, e.g. training (a rerun)")
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)  # internal: run one phase in this process
    parser.add_argument("--dry-run", action="store_true", help="print the phases and the plan; load nothing")
    parser.add_argument("--wheels", default=None, help="folder of .whl files to unpack onto every phase's path")
    parser.add_argument("--missing", default="", help="modules to treat as absent, e.g. trl,vllm (rehearse the image)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    if args.agent_steps < 0:
        parser.error("--agent-steps must be >= 0")
    if args.scale <= 0:
        parser.error("--scale must be > 0")
    args.config = args.config or args.arch
    if args.phases and (unknown := set(args.phases.split(",")) - set(PHASES)):
        parser.error(f"--phases: unknown {sorted(unknown)}; phases are {','.join(PHASES)}")
    return args


def prepare_environment(args: argparse.Namespace) -> None:
    "Wheels unpacked onto the path (a wheel is a zip: no pip needed); modules rehearsed as missing made unimportable."
    if args.wheels:
        site = run_dir(args) / "site"
        for wheel in sorted(Path(args.wheels).glob("*.whl")):
            if not (site / f".{wheel.name}").exists():
                import zipfile
                zipfile.ZipFile(wheel).extractall(site)
                (site / f".{wheel.name}").touch()
        sys.path.insert(0, str(site))
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    for name in filter(None, args.missing.split(",")):
        sys.modules[MODULES.get(name, name)] = None  # `import name` now raises ImportError


def available(module: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def degrade(config: dict, record: dict) -> dict:
    "Run without what the image lacks, and say so: vLLM -> transformers generation and world model; bnb -> torch AdamW."
    changes = []
    if not available("vllm"):
        config["trl"]["use_vllm"] = False
        config["world_model"] = {**config["world_model"], "backend": "transformers", "options": {}}
        changes.append("no vLLM: generation and the world model on transformers")
    if not available("bitsandbytes") and "8bit" in str(config["trl"].get("optim", "")):
        config["trl"]["optim"] = "adamw_torch"
        changes.append("no bitsandbytes: torch AdamW (8 bytes a parameter of state, not 2)")
    if not available("xgrammar") and config["world_model"]["backend"] == "transformers":
        config["world_model"] = {**config["world_model"], "options": {**config["world_model"]["options"], "constrained": False}}
        changes.append("no xgrammar: the world model decodes without its JSON grammar (verdicts parsed leniently)")
    if not _cuda():  # a CPU rehearsal of the check: the same path, without bf16
        config["trl"].update(bf16=False, use_cpu=True)
        changes.append("no CUDA: float32 on the CPU (a rehearsal, not a measurement)")
    if not available("fla"):
        changes.append("no flash-linear-attention: Gated DeltaNet layers on transformers' torch fallback (slow)")
    record["degraded"] = changes
    return config


def run_dir(args: argparse.Namespace) -> Path:
    return Path(args.out).with_suffix("")


def model_folder(args: argparse.Namespace) -> str:
    return args.model or str(run_dir(args) / "model")


def training_overrides(args: argparse.Namespace, out_dir: Path) -> list[str]:
    "The config's memory settings, shortened to a few steps of 2 groups of 8 on the iris task."
    return [
        f"model.path={model_folder(args)}", f"model.architecture={args.arch}", "name=gpu-check", f"output_dir={out_dir}",
        "tasks.loader=task", "tasks.root=null", f"tasks.paths=[{args.task}]", "tasks.prompts_per_task=16",
        "tasks.program=code_block", f"trl.max_steps={args.steps}", "trl.per_device_train_batch_size=1",
        "trl.gradient_accumulation_steps=16", f"trl.max_completion_length={args.completion_tokens}",
        "trl.save_strategy=no", f"trl.vllm_max_model_length={args.max_model_len}",
        f"sandbox.wall_s={args.execute_timeout}", "sandbox.memory_mb=8192", f"sandbox.workers={args.workers}",
        "correction.min_pairs=8", "correction.refit_every=8", "correction.warmup=2", "resources.prompt_tokens=512",
        f"world_model.options.engine_kwargs.max_model_len={args.max_model_len}",
    ]


def agent_overrides(args: argparse.Namespace, out_dir: Path) -> list[str]:
    "Phase 3: the research agent (2 turns) on the mini competition, built into the run folder."
    return training_overrides(args, out_dir) + [
        "name=gpu-check-agent", "tasks.loader=mledojo", "tasks.prepare=mini", "tasks.paths=[breast-cancer-mini]",
        "tasks.program=agent", "agent.max_turns=2",
        f"agent.max_new_tokens={args.completion_tokens}", "agent.observation_max_tokens=512",
        "agent.overview_max_tokens=800", f"trl.max_steps={max(1, args.agent_steps)}"]


def planned(args: argparse.Namespace) -> dict:
    "The plan's figures (GiB) for phases 1-3 on one H200, from the same overrides (wmrl.adapters.plan)."
    from wmrl.adapters.plan import plan
    from wmrl.adapters.train_config import load_config
    figures = {}
    for name, overrides in (("training", training_overrides), ("agent", agent_overrides)):
        config = load_config(args.config, overrides(args, run_dir(args) / name))
        result = plan(config, "h200x1")
        figures[name] = {"peak_gib": result["peak_gib"], "generation_gib": result["generation_gib"],
                         "backward_gib": result["backward_gib"], "fits": result["fits"], "problems": result["problems"],
                         **{k: result["memory"][k] for k in ("weights", "grads", "optimizer", "activations", "logits")}}
        if name == "training":
            world = [e for e in result["engines"] if e["name"].startswith("world")]
            figures["world_model"] = {"peak_gib": world[0]["reserved_gib"] if world else None}
    return figures


def plan_summary(args: argparse.Namespace) -> dict:
    "What the check will do (no weights, no vLLM import)."
    from wmrl.adapters.train import dry_run
    from wmrl.adapters.train_config import load_config
    solutions = sorted(Path(args.solutions).glob("*.py"))
    if not solutions:
        raise FileNotFoundError(f"no solutions (*.py) in {args.solutions}")
    config = load_config(args.config, training_overrides(args, run_dir(args) / "training"))
    phases = [p for p in PHASES if not (p == "build" and args.model) and not (p == "agent" and not args.agent_steps)
              and (not args.phases or p in args.phases.split(","))]
    summary = {"model": model_folder(args), "random_weights": not args.model, "arch": args.arch, "phases": phases,
               "limits_s": {p: LIMITS_S[p] * args.scale for p in phases}, "solutions": len(solutions),
               "steps": args.steps, "world_model": config["world_model"], "plan_gib": planned(args)}
    try:
        resolved = dry_run(config)  # resolves the TRL config: needs trl
    except ImportError as error:
        return {**summary, "resolve_error": f"{type(error).__name__}: {error} (the TRL phases will be skipped)"}
    keys = ("use_vllm", "vllm_mode", "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode",
            "vllm_importance_sampling_mode", "num_generations", "max_completion_length", "bf16", "optim",
            "gradient_checkpointing")
    return {**summary, "groups_per_step": resolved["groups_per_step"], "rows_per_step": resolved["rows_per_step"],
            "trl": {k: resolved["trl"][k] for k in keys}, "notes": resolved["notes"]}


# --- the phases (each runs in its own process: `gpu_check.py --phase NAME ...`) --------------------------------
def phase_versions(args: argparse.Namespace, record: dict) -> None:
    "What the image has: each package's version and whether it imports here, the device, the interpreter."
    packages = {package: {"version": found, "importable": available(MODULES[package])}
                for package, found in _versions().items()}
    record.update(python=sys.version.split()[0], packages=packages, device=_device(),
                  missing=[p for p, v in packages.items() if not v["importable"]])


def phase_build(args: argparse.Namespace, record: dict) -> None:
    "Phase 0: random weights of the architecture (bf16) + the local tokenizer, saved where the next phases read them."
    from wmrl.adapters.plan import load_architecture, parameter_count
    from wmrl.adapters.trl_adapter import random_policy
    out = Path(model_folder(args))
    shutil.rmtree(out, ignore_errors=True)
    random_policy(args.arch, out, seed=0, device="cuda" if _cuda() else "cpu")
    record.update(folder=str(out), params=parameter_count(load_architecture(args.arch)),
                  bytes_on_disk=sum(f.stat().st_size for f in out.rglob("*") if f.is_file()))


def phase_world_model(args: argparse.Namespace, record: dict) -> None:
    "Phase 1: the config's vLLM world model predicts every solution; the sandbox runs them for comparison."
    from concurrent.futures import ThreadPoolExecutor

    from wmrl.adapters.train import build_scorer
    from wmrl.adapters.train_config import load_config
    from wmrl.execution.tasks import load_task
    config = degrade(load_config(args.config, training_overrides(args, run_dir(args) / "world_model")), record)
    task = load_task(args.task)
    files = sorted(Path(args.solutions).glob("*.py"))
    codes = [f.read_text() for f in files]
    started = time.perf_counter()
    world_model = build_scorer(config, {"iris": task}).world_model
    record["load_s"] = time.perf_counter() - started
    started = time.perf_counter()
    predictions = world_model.predict([(task, code) for code in codes])
    record.update(predict_s=time.perf_counter() - started, n_solutions=len(codes),
                  prompts=int(world_model.stats.get("prompts", 0)),
                  fallbacks={k: int(v) for k, v in world_model.stats.items() if k.startswith("fallback_")})
    rows = [{"solution": f.stem, "predicted_status": p.status, "predicted_reward": p.score} for f, p in zip(files, predictions)]
    if not args.skip_execute:
        from wmrl.execution.limits import SandboxLimits
        from wmrl.execution.sandbox import execute
        limits = SandboxLimits.from_settings(wall_s=args.execute_timeout)
        with ThreadPoolExecutor(args.workers) as pool:
            executed = list(pool.map(lambda code: execute(task, code, None, limits), codes))
        for row, real in zip(rows, executed):
            row.update(real_status=real.status, real_reward=real.reward)
        record["status_agreement"] = sum(r["predicted_status"] == r["real_status"] for r in rows) / len(rows)
    record["rows"] = rows


def _train(args: argparse.Namespace, record: dict, overrides: list[str], out_dir: Path) -> dict:
    "Train with `overrides` into out_dir; returns metrics.json and records the logged sampling/* and rewards/*."
    if not available("trl"):
        raise RuntimeError("skipped: trl is not importable here (stage its wheel: make gpu-wheels, then --wheels)")
    from wmrl.adapters.train import run_training
    from wmrl.adapters.train_config import load_config
    record["summary"] = run_training(degrade(load_config(args.config, overrides), record))
    metrics = json.loads((out_dir / "metrics.json").read_text())
    record["step_times_s"] = [h["step_time"] for h in metrics["log_history"] if "step_time" in h]
    record["logged"] = [{k: v for k, v in h.items() if k.startswith(("sampling/", "rewards/", "wmrl/anchor_weight"))}
                        for h in metrics["log_history"] if "reward" in h]
    return metrics


def phase_training(args: argparse.Namespace, record: dict) -> None:
    "Phase 2: WMRL GRPO steps through TRL (vLLM colocate, sleep mode) with the config's own world-model engine."
    out_dir = run_dir(args) / "training"
    metrics = _train(args, record, training_overrides(args, out_dir), out_dir)
    record["wmrl_per_step"] = [{k: h["stats"].get(k) for k in ("n_anchor_groups", "n_pairs", "anchor_weight")}
                               for h in metrics["wmrl_history"]]


def phase_agent(args: argparse.Namespace, record: dict) -> None:
    "Phase 3: the multi-turn research agent through TRL (every turn from the colocated vLLM engine)."
    out_dir = run_dir(args) / "agent"
    metrics = _train(args, record, agent_overrides(args, out_dir), out_dir)
    record["sources_match_anchors"] = all([e["source"] == "sandbox" for e in step] == h["anchor_rows"]
                                          for step, h in zip(metrics["agent_history"], metrics["wmrl_history"]))


def _cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def run_phase(args: argparse.Namespace) -> int:
    "Child side: run one phase, write its record (with torch's own peak) to <run dir>/<phase>.json."
    record, started = {"phase": args.phase}, time.perf_counter()
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    try:
        globals()[f"phase_{args.phase}"](args, record)
        record["ok"] = True
    except BaseException as error:  # noqa: BLE001 - the report must say why, whatever it was
        record.update(ok=False, error=f"{type(error).__name__}: {error}", traceback=traceback.format_exc()[-4000:])
    record["child_s"] = time.perf_counter() - started
    if _cuda():
        import torch
        record["torch_peak_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
        record["torch_peak_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30
    path = run_dir(args) / f"{args.phase}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, default=str))
    return 0 if record["ok"] else 1


# --- the parent: one subprocess per phase, a memory sampler, the report ------------------------------------------
class DeviceSampler:
    "Peak memory.used (GiB) of GPU 0 over a phase, every `every_s` seconds from nvidia-smi (None without it)."

    def __init__(self, every_s: float = 0.5):
        self.every_s, self.peak, self._stop = every_s, None, threading.Event()
        self.available = shutil.which("nvidia-smi") is not None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                                     capture_output=True, text=True, timeout=5).stdout
                used = float(out.strip().splitlines()[0]) / 1024
                self.peak = used if self.peak is None else max(self.peak, used)
            except (OSError, ValueError, IndexError, subprocess.SubprocessError):
                pass
            self._stop.wait(self.every_s)

    def __enter__(self):
        if self.available:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self.available:
            self._thread.join(timeout=10)


def child_command(args: argparse.Namespace, phase: str, argv: list[str]) -> list[str]:
    "This script again, with the same arguments, running only `phase`."
    keep = [a for a in argv if a != "--dry-run"]
    return [sys.executable, str(Path(__file__).resolve()), *keep, "--phase", phase]


def launch(args: argparse.Namespace, phase: str, argv: list[str]) -> dict:
    "Run one phase in a subprocess with its time limit; its record, or why there is none."
    limit = LIMITS_S[phase] * args.scale
    (run_dir(args) / f"{phase}.json").unlink(missing_ok=True)
    started = time.perf_counter()
    with DeviceSampler() as sampler:
        try:
            done = subprocess.run(child_command(args, phase, argv), capture_output=True, text=True, timeout=limit)
            rc, stderr = done.returncode, done.stderr
        except subprocess.TimeoutExpired as expired:
            rc, stderr = None, (expired.stderr or b"").decode(errors="replace") if isinstance(expired.stderr, bytes) else (expired.stderr or "")
    path = run_dir(args) / f"{phase}.json"
    record = json.loads(path.read_text()) if path.is_file() else {"phase": phase, "ok": False}
    if rc is None:
        record.update(ok=False, error=f"timed out after {limit:.0f} s (the phase's limit; --scale raises it)")
    elif not path.is_file():
        record["error"] = f"the phase process died with exit code {rc} before writing its record"
    if not record.get("ok"):
        record["stderr_tail"] = stderr[-3000:]
    record.update(wall_s=time.perf_counter() - started, limit_s=limit, device_peak_gib=sampler.peak)
    return record


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    prepare_environment(args)
    if args.phase:
        return run_phase(args)
    summary = plan_summary(args)
    if args.dry_run:
        print(json.dumps(summary, indent=1, default=str))
        return 0
    run_dir(args).mkdir(parents=True, exist_ok=True)
    started, report = time.perf_counter(), {"plan": summary, "phases": {}}
    for phase in summary["phases"]:
        record = launch(args, phase, argv)
        report["phases"][phase] = record
        print(json.dumps({"phase": phase, "ok": record.get("ok"), "wall_s": round(record["wall_s"], 1),
                          "device_peak_gib": record.get("device_peak_gib"), "error": record.get("error")}), flush=True)
        if phase == "build" and not record.get("ok"):
            break  # nothing to load
    report["total_s"] = time.perf_counter() - started
    report["failed"] = [p for p, r in report["phases"].items() if not r.get("ok")]
    report["measured_vs_plan"] = {p: {"plan_peak_gib": summary["plan_gib"].get(p, {}).get("peak_gib"),
                                      "device_peak_gib": r.get("device_peak_gib"),
                                      "torch_peak_reserved_gib": r.get("torch_peak_reserved_gib")}
                                  for p, r in report["phases"].items() if p not in ("build", "versions")}
    report["device"], report["versions"] = _device(), _versions()
    Path(args.out).write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps({k: report[k] for k in ("total_s", "failed", "measured_vs_plan")}, default=str))
    return 0 if not report["failed"] and len(report["phases"]) == len(summary["phases"]) else 1


def _device() -> dict:
    if not _cuda():
        return {"cuda": False}
    import torch
    return {"cuda": True, "name": torch.cuda.get_device_name(0), "count": torch.cuda.device_count(),
            "total_gib": torch.cuda.get_device_properties(0).total_memory / 2**30}


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version
    found = {}
    for package in MODULES:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


if __name__ == "__main__":
    sys.exit(main())
