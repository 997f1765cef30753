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
1. trainer: the WMRL trainer on rows of the agent's shape (~21.6k tokens: a 2,100-token prompt and a 4-turn
   episode) with the config's fp32 master weights, 8-bit AdamW and gradient checkpointing; generation is replaced
   by random tokens of that shape, so the peak sits next to the plan's trainer-only figure, with the optimizer's
   bytes (the embedding's apart) and training tokens/s;
2. world_model: the config's world model (vLLM, or transformers in bf16 where the image has no vLLM) predicting the
   solutions in toy/solutions/iris (--max-solutions), prefill and decode tokens/s timed; the sandbox runs the same
   solutions and statuses are compared;
3. training: `wmrl.adapters.train.run_training` with the config's memory settings on the iris task, shortened to
   --steps steps of 2 groups: the kit's loop end to end, generation, world model and sandbox anchors included;
4. agent: the same with the multi-turn research agent (2 turns) on wmrl's mini competition;
5. fla: flash-linear-attention's gated delta rule against transformers' torch fallback on one Qwen3.5-shaped layer,
   last because Triton compiles and autotunes it on its first call.
Before them, `versions` records what this image has (packages, CUDA, kernels). The lent machine has no network and
no pip, and its image lacks trl, datasets, vLLM, bitsandbytes and flash-linear-attention: the check degrades instead
of stopping. Without vLLM, generation and the world model run on transformers; without bitsandbytes, AdamW is
torch's; without trl the TRL phases are skipped with the reason. `make gpu-wheels` stages the pure-Python wheels
that fit beside the repository (trl, datasets and their pure-Python dependencies, the fla kernels, bitsandbytes
trimmed to its CUDA 13 library, bubblewrap's bwrap); `--wheels DIR` unpacks them into the run folder and puts them on
every phase's path (no pip needed; the fla kernels on the fla phase's alone). `--missing trl,vllm` rehearses
a lent image on a machine that has them. `--fla-unguarded` (reproductions/fla_device_check.sh) puts the fla kernels on
the trainer's and world model's path as well, where CUDA is, with fla's Hopper guard switched off in the run's private
copy of the wheel (unguard_fla), and reports the plan's activation term beside what that trainer implies for it.
A phase that fails, times out or is killed is recorded with its reason (the error and traceback tail, or the exit
code and stderr tail) and the next phases still run where they can. The JSON report holds every phase, the plan's
figures for the same settings (`wmrl.adapters.plan`) and measured / planned peak, so the first GPU run also calibrates the
plan. The exit code is 0 only when every phase passed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for _name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):  # no hub is needed, and the lent
    os.environ.setdefault(_name, "1")  # machine reaches none: a lookup would wait on the network instead of failing
os.environ.setdefault("WANDB_DISABLED", "true")
os.environ.setdefault("WMRL_KERNEL_CHECK", "off")  # this check times whichever kernels the image has, the torch fallback
# included, and records them (`versions`, `degraded`); wmrl.adapters.kernels would refuse that fallback on Hopper
if str(REPO) not in sys.path:  # the lent image has no installed wmrl: the checkout is the package (children inherit it)
    sys.path.insert(0, str(REPO))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
# most informative first; the fla kernels last (their Triton autotuning is the likeliest to run long)
PHASES = ("versions", "build", "trainer", "world_model", "training", "agent", "fla")
LIMITS_S = {"versions": 30, "build": 60, "trainer": 170, "world_model": 90, "training": 90, "agent": 70,
            "fla": 60}  # 570 s: inside one call of the device tool (at most 600 s); on the lent image split in two (README)
FLA_WHEELS = ("fla_core", "flash_linear_attention")  # unpacked apart: only the fla phase sees them
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
    parser.add_argument("--max-solutions", type=int, default=None,
                        help="predict only the first N solutions (random weights decode every check to its cap)")
    parser.add_argument("--shape-tokens", type=int, default=None,
                        help="tokens of one trainer-phase row (default: the config's agent episode, ~21.6k)")
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
    parser.add_argument("--fla-unguarded", action="store_true",
                        help="fla's kernels on the trainer and world-model phases' path too (where CUDA is), with fla's "
                        "Hopper guard (fla #640) off in this run's private copy of the wheel: the fla path timed and its "
                        "gradient error measured where fla would refuse (needs --wheels with the fla wheels)")
    parser.add_argument("--missing", default="", help="modules to treat as absent, e.g. trl,vllm (rehearse the image)")
    parser.add_argument("--summarise", default=None, metavar="REPORT",
                        help="print a committed report's figures next to today's plan for the same trainer rows, and exit")
    parser.add_argument("--trim-wheel", default=None, help="rewrite this bitsandbytes wheel with only its CUDA 13 and "
                        "CPU libraries (43 MB -> 3.6 MB, inside the device tool's 64 MiB) and exit")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    if args.agent_steps < 0:
        parser.error("--agent-steps must be >= 0")
    if args.scale <= 0:
        parser.error("--scale must be > 0")
    args.config = args.config or args.arch
    if args.max_solutions is not None and args.max_solutions < 1:
        parser.error("--max-solutions must be >= 1")
    if args.shape_tokens is not None and args.shape_tokens < 16:
        parser.error("--shape-tokens must be >= 16")
    if args.fla_unguarded and not args.wheels:
        parser.error("--fla-unguarded: needs --wheels, the folder holding the fla wheels (make gpu-wheels)")
    if args.phases and (unknown := set(args.phases.split(",")) - set(PHASES)):
        parser.error(f"--phases: unknown {sorted(unknown)}; phases are {','.join(PHASES)}")
    return args


def prepare_environment(args: argparse.Namespace) -> None:
    """Wheels unpacked onto the path (a wheel is a zip: no pip needed); modules rehearsed as missing made unimportable.
    The fla wheels go to a folder of their own that only the fla phase puts on its path: with fla importable,
    transformers binds its Triton kernels when the model's module is imported, so every other phase runs the torch
    fallback whose cost the plan was validated against, and a kernel that fails to build fails one phase only."""
    if args.wheels:
        import zipfile
        for wheel in sorted(Path(args.wheels).glob("*.whl")):
            site = run_dir(args) / ("site-fla" if wheel.name.startswith(FLA_WHEELS) else "site")
            if not (site / f".{wheel.name}").exists():
                zipfile.ZipFile(wheel).extractall(site)
                (site / f".{wheel.name}").touch()
        if args.fla_unguarded:
            guard = run_dir(args) / "fla_guard.json"
            if not guard.is_file():
                guard.write_text(json.dumps(unguard_fla(run_dir(args) / "site-fla"), indent=1))
        on_fla = args.phase == "fla" or (args.fla_unguarded and args.phase in FLA_UNGUARDED and _cuda())
        sites = [run_dir(args) / "site"] + ([run_dir(args) / "site-fla"] if on_fla else [])
        for site in filter(Path.is_dir, sites):
            sys.path.insert(0, str(site))
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    for name in filter(None, args.missing.split(",")):
        sys.modules[MODULES.get(name, name)] = None  # `import name` now raises ImportError


# fla 0.6.0's refusal (fla/ops/common/chunk_o.py, chunk_bwd_dqkwg; fla issue 640), as that release writes it
FLA_GUARD_FILE = Path("fla", "ops", "common", "chunk_o.py")
FLA_GUARD = re.compile(r"^(?P<indent>[ \t]*)if (?P<condition>g is not None and IS_NVIDIA_HOPPER and TRITON_ABOVE_3_4_0 "
                       r"and not TRITON_ABOVE_3_7_1):[ \t]*$", re.M)
FLA_UNGUARDED = ("trainer", "world_model")  # the phases --fla-unguarded puts on fla's path (the fla phase always is)
UNGUARDED = "# wmrl gpu_check --fla-unguarded: fla #640's guard off for the measurement only; was: "


def unguard_fla(site: Path) -> dict:
    """Switch off fla's Hopper guard in this run's private copy of the wheel (never an installed fla): the one `if` that
    raises in chunk_bwd_dqkwg becomes `if False`, the condition kept in a comment. The kernel it guards is what the
    measurement is about (how fast the fla path trains, and how far its gradient is from the torch fallback's on the
    image's Triton), so the guard must be found exactly as fla 0.6.0 writes it, once; anything else is refused."""
    path = site / FLA_GUARD_FILE
    if not path.is_file():
        raise RuntimeError(f"--fla-unguarded: {path} is missing: the fla wheels were not unpacked (make gpu-wheels)")
    text = path.read_text()
    if UNGUARDED in text:
        return {"file": str(FLA_GUARD_FILE), "already": True}
    found = list(FLA_GUARD.finditer(text))
    if len(found) != 1:
        raise RuntimeError(f"--fla-unguarded: fla's Hopper guard is not in {FLA_GUARD_FILE} as fla 0.6.0 writes it "
                           f"({len(found)} matches): this fla is not the one the measurement was prepared for")
    match = found[0]
    line = text.count("\n", 0, match.start()) + 1
    path.write_text(text[:match.start()] + f"{match['indent']}if False:  {UNGUARDED}{match['condition']}" + text[match.end():])
    for cached in (path.parent / "__pycache__").glob("chunk_o.*.pyc"):
        cached.unlink()
    return {"file": str(FLA_GUARD_FILE), "line": line, "was": match["condition"], "already": False}


def trim_wheel(path: Path, keep: tuple[str, ...] = ("_cpu.so", "_cuda130.so")) -> tuple[int, int]:
    "Rewrite a bitsandbytes wheel without the native libraries of other CUDA/ROCm/XPU versions; (bytes before, after)."
    import zipfile
    before, tmp = path.stat().st_size, path.with_suffix(".tmp")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            if not item.filename.endswith(".so") or item.filename.endswith(keep):
                dst.writestr(item, src.read(item))
    tmp.replace(path)
    return before, path.stat().st_size


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
        config["world_model"] = {**config["world_model"], "backend": "transformers", "options": {},
                                 "server": {**config["world_model"]["server"], "launch": False}}  # in process: nothing to serve
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
    result = plan(trainer_config(args, run_dir(args) / "trainer"), "h200x1")  # no engine: the trainer alone
    figures["trainer"] = {"peak_gib": result["backward_gib"], "lengths": result["memory"]["lengths"],
                          **{k: result["memory"][k] for k in TRAINER_TERMS}}
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
    import wmrl
    from wmrl.execution.sandbox import get_backend
    packages = {package: {"version": found, "importable": available(MODULES[package])}
                for package, found in _versions().items()}
    record.update(python=sys.version.split()[0], packages=packages, device=_device(),
                  missing=[p for p, v in packages.items() if not v["importable"]],
                  wmrl_from=str(Path(wmrl.__file__).resolve().parent), sandbox=type(get_backend("auto")).__name__)


def phase_build(args: argparse.Namespace, record: dict) -> None:
    "Phase 0: random weights of the architecture (bf16) + the local tokenizer, saved where the next phases read them."
    from wmrl.adapters.plan import load_architecture, parameter_count
    from wmrl.adapters.trl_adapter import random_policy
    out = Path(model_folder(args))
    shutil.rmtree(out, ignore_errors=True)
    random_policy(args.arch, out, seed=0, device="cuda" if _cuda() else "cpu")
    record.update(folder=str(out), params=parameter_count(load_architecture(args.arch)),
                  bytes_on_disk=sum(f.stat().st_size for f in out.rglob("*") if f.is_file()))


def shape_lengths(args: argparse.Namespace) -> dict:
    "Prompt and completion tokens of one trainer-phase row: the config's agent episode, or --shape-tokens split alike."
    from wmrl.adapters.plan import sequence_lengths
    from wmrl.adapters.train_config import load_config
    lengths = sequence_lengths(load_config(args.config, []))
    if args.shape_tokens:
        prompt = max(1, round(args.shape_tokens * lengths["prompt"] / lengths["total"]))
        lengths = {"prompt": prompt, "completion": args.shape_tokens - prompt, "total": args.shape_tokens}
    return lengths


TRAINER_TERMS = ("weights", "grads", "optimizer", "activations", "logits", "autocast")  # the plan's gradient-pass terms


def trainer_config(args: argparse.Namespace, out_dir: Path) -> dict:
    "The trainer phase's resolved config (no vLLM: its gradient pass is the trainer alone), for the phase and the plan."
    from wmrl.adapters.train_config import load_config
    return load_config(args.config, trainer_overrides(args, out_dir))


def trainer_overrides(args: argparse.Namespace, out_dir: Path) -> list[str]:
    """Rows of the agent's shape through the config's trainer settings: 2 steps of one group of 2 rows (one row per
    micro-batch, as the config trains), the static world model (this phase measures the trainer, not the judge)."""
    lengths = shape_lengths(args)
    return training_overrides(args, out_dir) + [
        "name=gpu-check-trainer", "world_model.backend=static", "world_model.server.launch=false", "trl.use_vllm=false", "trl.num_generations=2",
        "trl.gradient_accumulation_steps=2", "trl.max_steps=2", "tasks.prompts_per_task=4",
        f"resources.prompt_tokens={lengths['prompt']}", f"trl.max_completion_length={lengths['completion']}",
        f"trl.vllm_max_model_length={lengths['total']}"]


def shape_rollout(prompt_tokens: int, completion_tokens: int, tokenizer, seed: int = 0):
    "TRL's rollout_func returning random non-special tokens of fixed lengths: the trainer sees the shape, no generation."
    import torch
    special = set(tokenizer.all_special_ids)
    pool = torch.tensor([i for i in range(len(tokenizer)) if i not in special])
    generator = torch.Generator().manual_seed(seed)

    def pick(n: int) -> list[int]:
        return pool[torch.randint(len(pool), (n,), generator=generator)].tolist()

    def rollout(prompts, trainer):
        return {"prompt_ids": [pick(prompt_tokens) for _ in prompts],
                "completion_ids": [pick(completion_tokens) for _ in prompts], "logprobs": None}
    return rollout


def _optimizer_bytes(optimizer, embedding) -> dict:
    "Bytes of optimizer state, the input embedding's apart (bitsandbytes keeps an nn.Embedding's state in 32 bits)."
    inner = getattr(optimizer, "optimizer", optimizer)  # accelerate wraps it
    total = embedded = 0
    for param, state in inner.state.items():
        size = sum(v.numel() * v.element_size() for v in state.values() if hasattr(v, "element_size"))
        total += size
        embedded += size if param is embedding else 0
    return {"optimizer_gib": total / 2**30, "embedding_state_gib": embedded / 2**30}


def phase_trainer(args: argparse.Namespace, record: dict) -> None:
    """The WMRL trainer on rows of the paper's agent shape (~21.6k tokens) with the config's fp32 master weights, 8-bit
    AdamW and gradient checkpointing: peak memory against the plan's trainer-only figure, optimizer bytes, tokens/s.
    The record is rewritten after every optimizer step, so a phase stopped at its limit still reports what it measured."""
    if not available("trl"):
        raise RuntimeError("skipped: trl is not importable here (stage its wheel: make gpu-wheels, then --wheels)")
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback

    from wmrl.adapters.plan import plan
    from wmrl.adapters.train import build_dataset_rows, build_scorer, build_tasks, correction_config, grpo_config
    from wmrl.adapters.trl_adapter import make_wmrl_trainer_class
    from wmrl.core.correction import WMRLCorrector
    from wmrl.world_model.backends import get_world_model
    out_dir = run_dir(args) / "trainer"
    config = degrade(trainer_config(args, out_dir), record)  # generation is replaced by rollouts of the agent's shape
    lengths, planned_run = shape_lengths(args), plan(config, "h200x1")
    record.update(lengths=lengths, plan_trainer_gib=planned_run["backward_gib"],
                  plan_terms_gib={k: planned_run["memory"][k] for k in (*TRAINER_TERMS, "optimizer_total_gib")},
                  optim=config["trl"]["optim"], steps=[])
    loading, tasks = time.perf_counter(), build_tasks(config)
    tokenizer = AutoTokenizer.from_pretrained(model_folder(args))
    trainer = make_wmrl_trainer_class()(
        model_folder(args), args=grpo_config(config, out_dir / "trainer"),
        train_dataset=Dataset.from_list(build_dataset_rows(config, tasks)),
        scorer=build_scorer(config, tasks, get_world_model("static")),
        corrector=WMRLCorrector(correction_config(config)),
        rollout_func=shape_rollout(lengths["prompt"], lengths["completion"], tokenizer))
    trainer.add_callback(_StepRecorder(args, record, trainer, TrainerCallback))
    record["loaded_s"] = time.perf_counter() - loading
    write_record(args, record)  # the weights' footprint, should the first step outrun the phase's limit
    started = time.perf_counter()
    trainer.train()
    record["train_s"] = time.perf_counter() - started


def _StepRecorder(args, record, trainer, base):
    "A TrainerCallback (built from transformers' class, imported late) that records each step and rewrites the record."
    import torch

    class StepRecorder(base):
        def __init__(self):
            self.last = time.perf_counter()

        def on_step_end(self, _args, state, control, optimizer=None, **kwargs):
            now, cuda = time.perf_counter(), torch.cuda.is_available()
            rows = trainer.args.per_device_train_batch_size * trainer.args.gradient_accumulation_steps
            step = {"step": state.global_step, "s": now - self.last,
                    "tokens_per_s": rows * record["lengths"]["total"] / (now - self.last),
                    "peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
                    "peak_reserved_gib": torch.cuda.max_memory_reserved() / 2**30 if cuda else None}
            if optimizer is not None:
                step.update(_optimizer_bytes(optimizer, trainer.model.get_input_embeddings().weight))
            record["steps"].append(step)
            self.last = now
            write_record(args, record)
    return StepRecorder()


def phase_world_model(args: argparse.Namespace, record: dict) -> None:
    "Phase 1: the config's vLLM world model (served, as the config launches it) predicts every solution; the sandbox runs them."
    from wmrl.adapters.train import world_model_server
    from wmrl.adapters.train_config import load_config
    config = degrade(load_config(args.config, training_overrides(args, run_dir(args) / "world_model")), record)
    server = world_model_server(config, run_dir(args) / "world_model")
    if server is None:
        return _judge_solutions(args, record, config, None)
    with server:
        record["server"] = {"startup_s": server.startup_s, "log": str(server.log_path)}
        _judge_solutions(args, record, config, server)


def _judge_solutions(args: argparse.Namespace, record: dict, config: dict, server) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from wmrl.adapters.train import build_scorer
    from wmrl.execution.tasks import load_task
    task = load_task(args.task)
    files = sorted(Path(args.solutions).glob("*.py"))[:args.max_solutions]
    codes = [f.read_text() for f in files]
    started = time.perf_counter()
    world_model = build_scorer(config, {"iris": task}, server=server).world_model
    record["load_s"] = time.perf_counter() - started
    record["generate_calls"] = calls = []
    _time_generations(world_model, calls)
    started = time.perf_counter()
    predictions = world_model.predict([(task, code) for code in codes])
    record["throughput"] = _throughput(calls)
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


def _time_generations(world_model, calls: list) -> None:
    """Wrap a transformers world model's generate: each batch's prompt tokens, a timed prefill alone (one forward
    over the batch) and the generate call; decode throughput is the rest. No-op for other backends (vLLM reports its own)."""
    import torch
    model = getattr(world_model, "model", None)
    if model is None or not hasattr(model, "generate"):
        return
    generate = model.generate

    def timed(**batch):
        _sync()
        started = time.perf_counter()
        with torch.no_grad():
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], logits_to_keep=1)
        _sync()
        prefill_s, started = time.perf_counter() - started, time.perf_counter()
        out = generate(**batch)
        _sync()
        calls.append({"rows": int(batch["input_ids"].shape[0]), "prompt_tokens": int(batch["attention_mask"].sum()),
                      "padded_len": int(batch["input_ids"].shape[1]), "prefill_s": prefill_s,
                      "generate_s": time.perf_counter() - started,
                      "new_tokens": int(out.shape[0] * (out.shape[1] - batch["input_ids"].shape[1]))})
        return out
    model.generate = timed


def _throughput(calls: list) -> dict:
    "Prefill tokens/s (prompt tokens over the timed forwards) and decode tokens/s (new tokens over the rest of generate)."
    if not calls:
        return {"measured": False, "why": "not a transformers world model"}
    prefill_s, generate_s = sum(c["prefill_s"] for c in calls), sum(c["generate_s"] for c in calls)
    prompt, new = sum(c["prompt_tokens"] for c in calls), sum(c["new_tokens"] for c in calls)
    return {"measured": True, "batches": len(calls), "prompt_tokens": prompt, "new_tokens": new,
            "prefill_tokens_per_s": prompt / prefill_s if prefill_s else None,
            "decode_tokens_per_s": new / max(1e-9, generate_s - prefill_s),
            "mean_prompt_tokens": prompt / sum(c["rows"] for c in calls)}


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


def phase_fla(args: argparse.Namespace, record: dict) -> None:
    """flash-linear-attention's chunked gated delta rule against transformers' torch fallback on one Qwen3.5-shaped
    Gated DeltaNet layer (forward and backward): both timed, the kernel's first call (Triton compiles and autotunes)
    apart, and the largest difference of outputs and gradients."""
    if not _cuda():
        raise PhaseSkipped("no CUDA (flash-linear-attention's kernels are Triton GPU kernels)")
    import torch
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    from wmrl.adapters.plan import load_architecture
    fallback = _torch_gated_delta_rule()
    arch, device = load_architecture(args.arch), "cuda"
    heads, dk, dv = arch["linear_num_value_heads"], arch["linear_key_head_dim"], arch["linear_value_head_dim"]
    tokens = min(8192, shape_lengths(args)["total"])
    generator = torch.Generator(device=device).manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, device=device, generator=generator, dtype=torch.bfloat16)
    q, k = (torch.nn.functional.normalize(randn(1, tokens, heads, dk).float(), dim=-1).bfloat16() for _ in range(2))
    v, beta = randn(1, tokens, heads, dv), torch.rand(1, tokens, heads, device=device, generator=generator).bfloat16()
    g = -torch.nn.functional.softplus(randn(1, tokens, heads).float())  # log decays <= 0
    record.update(tokens=tokens, heads=heads, dk=dk, dv=dv)
    results = {}
    for name, rule in (("fla", chunk_gated_delta_rule), ("torch", fallback)):
        for attempt in ("first", "timed"):
            inputs = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
            _sync()
            started = time.perf_counter()
            out = rule(*inputs, g, beta)[0]
            _sync()
            record[f"{name}_{attempt}_forward_s"], started = time.perf_counter() - started, time.perf_counter()
            write_record(args, record)
            if f"{name}_backward_error" in record:
                continue
            try:  # fla refuses some backward kernels on some Triton versions (Hopper): keep the forward's numbers
                out.float().square().mean().backward()
            except RuntimeError as error:
                record[f"{name}_backward_error"] = f"{type(error).__name__}: {error}"
                continue
            _sync()
            record[f"{name}_{attempt}_backward_s"] = time.perf_counter() - started
            write_record(args, record)
        results[name] = [out.detach().float()] + [t.grad.float() for t in inputs if t.grad is not None]
    record["max_abs_diff"] = {part: float((a - b).abs().max()) for part, a, b in
                              zip(("out", "dq", "dk", "dv"), results["fla"], results["torch"])}
    # relative to the fallback's own largest magnitude: the scale a bf16 kernel's error is read on
    record["max_rel_diff"] = {part: float((a - b).abs().max() / b.abs().max().clamp_min(1e-12)) for part, a, b in
                              zip(("out", "dq", "dk", "dv"), results["fla"], results["torch"])}
    guard = run_dir(args) / "fla_guard.json"
    record["fla_guard"] = json.loads(guard.read_text()) if guard.is_file() else "as installed"
    record["forward_speedup"] = record["torch_timed_forward_s"] / record["fla_timed_forward_s"] \
        if "fla_timed_forward_s" in record else None
    if "fla_backward_error" in record:
        raise RuntimeError(f"fla's backward cannot run here ({record['fla_backward_error']}); its forward was timed")


class PhaseSkipped(Exception):
    "A phase this machine cannot run by its nature (no GPU for GPU kernels): reported as skipped, not failed."


def _torch_gated_delta_rule():
    "transformers' torch implementation of the chunked gated delta rule (the fallback every other phase runs)."
    import importlib
    for name in ("qwen3_5", "qwen3_next"):
        try:
            module = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
        except ImportError:
            continue
        rule = getattr(module, "torch_chunk_gated_delta_rule", None)
        rule = getattr(rule, "__wrapped__", rule)  # the kernel decorator wraps the torch function
        if rule is not None:
            return rule
    raise RuntimeError("this transformers has no torch_chunk_gated_delta_rule (Qwen3.5 / Qwen3-Next)")


def _sync() -> None:
    if _cuda():
        import torch
        torch.cuda.synchronize()


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
    except PhaseSkipped as reason:
        record.update(ok=None, skipped=str(reason))
    except BaseException as error:  # noqa: BLE001 - the report must say why, whatever it was
        record.update(ok=False, error=f"{type(error).__name__}: {error}", traceback=traceback.format_exc()[-4000:])
    record["child_s"] = time.perf_counter() - started
    record["fla_imported"] = "fla" in sys.modules  # transformers binds fla's kernels whenever fla imports
    write_record(args, record)
    return 0 if record["ok"] or record.get("skipped") else 1


def write_record(args: argparse.Namespace, record: dict) -> None:
    "The phase's record with torch's own peaks, written atomically: a phase stopped at its limit keeps its last one."
    if _cuda():
        import torch
        record["torch_peak_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
        record["torch_peak_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30
    path = run_dir(args) / f"{args.phase}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, default=str))
    tmp.replace(path)


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
    if rc is None and record.get("ok") and "child_s" in record:  # finished and wrote its record; stopped while exiting
        record["note"] = f"the process outlived the {limit:.0f} s limit while exiting, after its work was done"
    elif rc is None:
        record.update(ok=False, error=f"timed out after {limit:.0f} s (the phase's limit; --scale raises it)")
    elif not path.is_file():
        record["error"] = f"the phase process died with exit code {rc} before writing its record"
    if not record.get("ok") and not record.get("skipped"):
        record["stderr_tail"] = stderr[-3000:]
    record.update(wall_s=time.perf_counter() - started, limit_s=limit, device_peak_gib=sampler.peak)
    return record


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.summarise:
        print(json.dumps(summarise(json.loads(Path(args.summarise).read_text()), args), indent=1))
        return 0
    if args.trim_wheel:
        before, after = trim_wheel(Path(args.trim_wheel))
        print(f"{args.trim_wheel}: {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB")
        return 0
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
                          "device_peak_gib": record.get("device_peak_gib"), "error": record.get("error"),
                          **({"skipped": record["skipped"]} if record.get("skipped") else {})}), flush=True)
        if phase == "build" and not record.get("ok"):
            break  # nothing to load
    report["total_s"] = time.perf_counter() - started
    report["failed"] = [p for p, r in report["phases"].items() if not r.get("ok") and not r.get("skipped")]
    report["skipped"] = {p: r["skipped"] for p, r in report["phases"].items() if r.get("skipped")}
    report["measured_vs_plan"] = {p: {"plan_peak_gib": r.get("plan_trainer_gib", summary["plan_gib"].get(p, {}).get("peak_gib")),
                                      "device_peak_gib": r.get("device_peak_gib"),
                                      "torch_peak_reserved_gib": r.get("torch_peak_reserved_gib")}
                                  for p, r in report["phases"].items() if p not in ("build", "versions", "fla")}
    report["device"], report["versions"] = _device(), _versions()
    if args.fla_unguarded:
        report["fla_guard"] = json.loads((run_dir(args) / "fla_guard.json").read_text())
    if (trainer := report["phases"].get("trainer", {})).get("plan_terms_gib") and trainer.get("torch_peak_allocated_gib"):
        report["activation_term"] = activation_term(trainer)
    Path(args.out).write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps({k: report[k] for k in ("total_s", "failed", "measured_vs_plan")}, default=str))
    return 0 if not report["failed"] and len(report["phases"]) == len(summary["phases"]) else 1


def activation_term(trainer: dict) -> dict:
    """The plan's activation term beside what the trainer phase implies for it: torch's allocated peak less the plan's
    other gradient-pass terms (weights, gradients, optimizer, logits, autocast copies, each checked on its own before),
    on the kernels the phase ran (fla's, or transformers' torch fallback whose activations the plan was fitted to)."""
    terms = trainer["plan_terms_gib"]
    others = sum(terms[k] for k in TRAINER_TERMS if k != "activations")
    return {"kernels": "fla" if trainer.get("fla_imported") else "torch fallback", "plan_gib": terms["activations"],
            "implied_gib": trainer["torch_peak_allocated_gib"] - others}


def summarise(report: dict, args: argparse.Namespace) -> dict:
    "The figures a README quotes from a report: each phase's outcome and peak, the trainer's steps, today's plan."
    phases = {name: {"ok": r.get("ok"), "wall_s": round(r.get("wall_s", 0), 1), "device_peak_gib": r.get("device_peak_gib"),
                     "error": r.get("error")} for name, r in report["phases"].items()}
    summary = {"device": report.get("device"), "phases": phases}
    trainer = report["phases"].get("trainer")
    if trainer and trainer.get("steps"):
        from wmrl.adapters.plan import plan
        config = trainer_config(args, run_dir(args) / "trainer")
        config["trl"]["optim"] = trainer["optim"]
        today, terms = plan(config, "h200x1"), TRAINER_TERMS
        summary["trainer"] = {
            "lengths": trainer["lengths"], "steps": trainer["steps"], "torch_peak_allocated_gib": trainer.get("torch_peak_allocated_gib"),
            "torch_peak_reserved_gib": trainer.get("torch_peak_reserved_gib"), "device_peak_gib": trainer.get("device_peak_gib"),
            "plan_then_gib": trainer["plan_trainer_gib"], "plan_terms_then_gib": sum(trainer["plan_terms_gib"][k] for k in terms),
            "plan_now_gib": today["backward_gib"], "plan_terms_now_gib": sum(today["memory"][k] for k in terms),
            "plan_optimizer_now_gib": today["memory"]["optimizer_total_gib"],
            "reserved_over_allocated": trainer["torch_peak_reserved_gib"] / trainer["torch_peak_allocated_gib"]}
    world = report["phases"].get("world_model", {})
    if world.get("throughput"):
        summary["world_model"] = {"throughput": world["throughput"], "load_s": world.get("load_s"), "child_s": world.get("child_s")}
    return summary


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
