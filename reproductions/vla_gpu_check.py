"""The LIBERO track's GPU check (issue 28): the paper's two models at their real sizes on one GPU, next to the plan.

Random weights of MiniVLA-1B's architecture (DINOv2 ViT-L + SigLIP So400m + Qwen2.5-0.5B, `wmrl.embodied.vla_model`)
with LoRA adapters (peft), and of Robometer-4B's backbone (Qwen3-VL-4B) with three heads; no hub is needed. Phases,
in one process, each timed, each with torch's peak memory, each recorded even when it fails:

0. versions: what the image has;
1. models: both models built in bf16 on the device, LoRA attached; their bytes against the plan's held terms;
2. env: --envs Meta-World scenes behind LIBERO's interface, rendered at --frame-px by MuJoCo (EGL), settled and
   stepped --env-steps ticks in lockstep, one batched VLA sampling call a tick (`run_lockstep` + `VLASampler`);
3. sampling: one batched sampling call over --sample-rows rows (the env's frames repeated), rows/s;
   then the same ticks with the LoRA adapters merged into the base weights (phase `merged`);
4. world_model: --wm-rollouts rollouts of 8 frames scored by the progress model, rollouts/s;
5. update: one GRPO micro-batch with gradient at each of --micro-batches rows (clipped loss over the action tokens),
   then an AdamW step on the adapters;
6. loop: the models freed, the kit's LIBERO loop (`run_libero`) at the same sizes for --loop-steps GRPO steps of two
   groups of --envs / 2 rollouts (one of them, at rho = 0.5, scored by the progress model alone, so that a step
   trains even when the anchor group fails throughout), --loop-ticks ticks an episode; seconds per component a step;
then the report: measured peaks (allocated and reserved) against `vla_plan`'s terms and peak for the same settings.

On the lent image (Python 3.12, torch, transformers 5.17, peft; no MuJoCo, Meta-World or gymnasium) carry
`make vla-wheels` and pass `--wheels vla-wheels`: the wheels are unpacked onto the path (no pip there). On a CPU box,
`--policy tiny-vla --world-model tiny-robometer` rehearses every phase in seconds (tests/test_vla_gpu_check.py).

    python3 reproductions/vla_gpu_check.py --wheels vla-wheels --out reproductions/results/vla_gpu_check/h200.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):  # nothing comes from the hub; a lookup would hang there
    os.environ.setdefault(_name, "1")
os.environ.setdefault("MUJOCO_GL", "egl")
if str(REPO) not in sys.path:  # the lent image has no installed wmrl: the checkout is the package
    sys.path.insert(0, str(REPO))


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--policy", default="minivla-1b", help="an ARCHS name of wmrl.embodied.vla_model")
    p.add_argument("--world-model", default="robometer-4b", help="an ARCHS name (the progress model)")
    p.add_argument("--lora-rank", type=int, default=32, help="LoRA rank on every linear layer but the head")
    p.add_argument("--envs", type=int, default=8, help="scenes stepped in lockstep (one group of 8 rollouts)")
    p.add_argument("--env-steps", type=int, default=4, help="policy ticks after LIBERO's 10 settling steps")
    p.add_argument("--task", default="pick-place-v3", help="the Meta-World task behind LIBERO's interface")
    p.add_argument("--frame-px", type=int, default=256, help="rendered frame side (LIBERO renders 256)")
    p.add_argument("--sample-rows", type=int, default=64, help="rows of the sampling-throughput call")
    p.add_argument("--prompt-tokens", type=int, default=40, help="prompt length in tokens (instruction + template)")
    p.add_argument("--wm-rollouts", type=int, default=8, help="rollouts the progress model scores in one call")
    p.add_argument("--frames", type=int, default=8, help="frames a rollout is scored on (Robometer: 8)")
    p.add_argument("--micro-batches", default="4,8,16,32", help="update micro-batch sizes measured, one backward each "
                   "(the activation term's slope per row)")
    p.add_argument("--loop-steps", type=int, default=2, help="GRPO steps of the kit's LIBERO loop at these sizes, last")
    p.add_argument("--loop-ticks", type=int, default=32, help="policy ticks an episode in those steps (LIBERO-Long: 520)")
    p.add_argument("--prismatic", action="store_true", help="first write the policy's architecture as a Prismatic run "
                   "(openvla-mini's checkpoint layout, random weights), load it back, and hold its towers to timm's")
    p.add_argument("--device", default=None, help="cuda if available, else cpu")
    p.add_argument("--dtype", default=None, choices=["bfloat16", "float32"], help="bfloat16 on CUDA, float32 on CPU "
                   "unless given (a CPU rehearsal in bfloat16 catches dtype mismatches before the GPU does)")
    p.add_argument("--wheels", default=None, help="a folder of wheels to unpack onto the path (no pip needed)")
    p.add_argument("--out", default=str(REPO / "reproductions/runs/vla_gpu_check/report.json"))
    p.add_argument("--plan", action="store_true", help="print the memory plan for these settings (CPU, no weights) and exit")
    p.add_argument("--summarise", metavar="REPORT", help="print a report's measured figures beside today's plan, and "
                   "the arithmetic they imply for the paper's run (labelled as such), then exit")
    p.add_argument("--trim-textures", metavar="WHEEL", help="rewrite a metaworld wheel with its large textures "
                   "shrunk to 16 px (same names: the scenes load and render) and exit")
    args = p.parse_args(argv)
    for name in ("lora_rank", "envs", "env_steps", "frame_px", "sample_rows", "prompt_tokens", "wm_rollouts",
                 "frames", "loop_steps", "loop_ticks"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    try:
        args.micro_batches = sorted({int(m) for m in str(args.micro_batches).split(",")})
    except ValueError:
        p.error("--micro-batches takes sizes separated by commas, e.g. 4,8,16")
    if args.micro_batches[0] < 1 or args.micro_batches[-1] > args.sample_rows:
        p.error(f"--micro-batches must lie in [1, --sample-rows = {args.sample_rows}]")
    if args.frame_px % 32:
        p.error("--frame-px must be a multiple of 32 (16-px patches merged 2 x 2)")
    return args


def unpack_wheels(folder: Path, site: Path) -> list[str]:
    "Each wheel (a zip) extracted once into `site`, which goes first on the path."
    import zipfile
    names = []
    for wheel in sorted(folder.glob("*.whl")):
        if not (site / f".{wheel.name}").exists():
            zipfile.ZipFile(wheel).extractall(site)
            (site / f".{wheel.name}").touch()
        names.append(wheel.name)
    sys.path.insert(0, str(site))
    return names


def trim_textures(path: Path, limit: int = 32_768) -> tuple[int, int]:
    "Replace every PNG over `limit` bytes in a wheel by a 16 px image of its mean colour; (bytes before, after)."
    import io
    import zipfile

    from PIL import Image
    before, tmp = path.stat().st_size, path.with_suffix(".tmp")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith(".png") and len(data) > limit:
                image = Image.open(io.BytesIO(data)).convert("RGB")
                small, buffer = image.resize((16, 16)), io.BytesIO()
                small.save(buffer, format="PNG")
                data = buffer.getvalue()
            dst.writestr(item, data)
    tmp.replace(path)
    return before, path.stat().st_size


class Memory:
    "torch's allocator peaks on CUDA (allocated and reserved, GiB); on CPU, the process's peak RSS."
    def __init__(self, device: str):
        import torch
        self.torch, self.cuda = torch, device.startswith("cuda")

    def reset(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(); self.torch.cuda.reset_peak_memory_stats()

    def now(self) -> dict:
        if self.cuda:
            self.torch.cuda.synchronize()
            c, g = self.torch.cuda, 2 ** 30
            return {"allocated_gib": c.memory_allocated() / g, "peak_allocated_gib": c.max_memory_allocated() / g,
                    "peak_reserved_gib": c.max_memory_reserved() / g}
        import resource
        return {"peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20}


def phase(report: dict, name: str, out: Path, memory: Memory | None):
    "A decorator-like runner: times fn, records its result or its error, writes the report after every phase."
    def run(fn):
        t0, record = time.perf_counter(), {}
        if memory:
            memory.reset()
        try:
            record = fn() or {}
            record["ok"] = True
        except Exception as err:  # a phase that fails is recorded; the next ones run where they can
            record = {"ok": False, "error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()[-3000:]}
        record["seconds"] = round(time.perf_counter() - t0, 2)
        if memory:
            record["memory"] = memory.now()
        report["phases"][name] = record
        print(f"[{name}] {'ok' if record['ok'] else 'FAILED: ' + record['error']} in {record['seconds']} s", flush=True)
        out.write_text(json.dumps(report, indent=1, default=float))
        return record
    return run


def _version(name: str) -> str | None:
    import importlib.metadata
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _sync(device: str) -> None:
    import torch
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def device_used_gib(device: str) -> float | None:
    "All of the card in use (CUDA context and other processes included), from the driver."
    import torch
    if not device.startswith("cuda"):
        return None
    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2 ** 30


def observations(state: dict, n: int, px: int, rng) -> list[dict]:
    "n LIBERO-style observations: the env phase's last frames, cycled, or random frames if that phase failed."
    import numpy as np
    frames = [f[-1] for f in state.get("frames", [])] or list(rng.integers(0, 256, (n, px, px, 3), dtype=np.uint8))
    return [{"agentview_image": frames[i % len(frames)]} for i in range(n)]


def measured(report: dict) -> dict:
    "The figures the plan is held to, from one report (GiB and seconds)."
    ph, held0 = report["phases"], report["phases"]["models"]["memory"]["allocated_gib"]
    before = {int(m): r["allocated_gib"] for m, r in ph["update"]["micro_batches"].items()}
    return {"held_gib": ph["update"]["held_after_step"]["allocated_gib"], "weights_gib": held0,
            "update_activations": {int(m): r["peak_allocated_gib"] - before[int(m)] for m, r in ph["update"]["micro_batches"].items()},
            "sampling_transient": ph["sampling"]["memory"]["peak_allocated_gib"] - ph["sampling"]["memory"]["allocated_gib"],
            "world_model_transient": ph["world_model"]["memory"]["peak_allocated_gib"] - ph["world_model"]["memory"]["allocated_gib"],
            "device_used_gib": max(r.get("device_used_gib") or 0.0 for r in ph.values()),
            "policy_s_per_tick": float(np.median(ph["env"]["policy_s_by_tick"][1:])),  # the first tick pays warm-up
            "env_s_per_tick": ph["env"]["env_s_per_tick_settling_included"],
            "wm_s_per_group": ph["world_model"]["rollouts"] / ph["world_model"]["rollouts_per_s"],  # the timed call alone
            "update_s": {int(m): r.get("call_s", r.get("seconds")) for m, r in ph["update"]["micro_batches"].items()}}


def summarise(path: Path) -> int:
    "Measured against planned, then what the rates imply for the paper's LIBERO-Long run (arithmetic, not measured)."
    from wmrl.embodied.vla_model import vla_plan
    report, a = json.loads(path.read_text()), None
    a = report["args"]
    got = measured(report)
    plan = lambda m, **kw: vla_plan(a["policy"], a["world_model"], a["lora_rank"], m, a["sample_rows"], a["prompt_tokens"],  # noqa: E731
                                    a["wm_rollouts"], a["frames"], a["frame_px"], **kw)
    top = max(got["update_activations"])
    v = report["phases"]["versions"]
    print(f"{v['gpu']}, Python {v['python']}, " + ", ".join(f"{k} {x}" for k, x in v["packages"].items() if x))
    for key in ("policy_params", "world_model_params"):
        parts = report["phases"]["models"][key]
        print(f"{key.replace('_', ' ')}: " + ", ".join(f"{k} {n:,}" for k, n in parts.items())
              + (f" ({parts['total'] - parts['lora']:,} without the adapters)" if "lora" in parts else ""))
    print(f"held (weights, adapters, their gradients, AdamW): measured {got['held_gib']:.2f} GiB, plan {plan(top)['held_gib']:.2f}")
    for m, g in sorted(got["update_activations"].items()):
        print(f"update activations, micro-batch {m:>2}: measured {g:6.2f} GiB ({g / m:.3f} a row), plan {plan(m)['terms_gib']['update_activations']:6.2f}, "
              f"counted {plan(m, calibrated=False)['terms_gib']['update_activations']:6.2f}, seconds {got['update_s'][m]:.2f}")
    for key in ("sampling_transient", "world_model_transient"):
        print(f"{key.replace('_', ' ')}: measured {got[key]:.2f} GiB, plan {plan(top)['terms_gib'][key]:.2f}, "
              f"counted {plan(top, calibrated=False)['terms_gib'][key]:.2f}")
    print(f"peak of the card in use: measured {got['device_used_gib']:.2f} GiB; plan at micro-batch {top}: "
          f"{plan(top)['peak_gib']:.2f} (counted {plan(top, calibrated=False)['peak_gib']:.2f})")
    print(f"rates: policy {got['policy_s_per_tick']:.3f} s a tick for {a['envs']} envs (median after the first, which "
          f"took {report['phases']['env']['policy_s_by_tick'][0]:.1f} s), "
          f"{a['envs']} Meta-World scenes {got['env_s_per_tick']:.3f} s a tick, progress model {got['wm_s_per_group']:.2f} s "
          f"for {a['wm_rollouts']} rollouts, sampling {report['phases']['sampling']['rows_per_s']:.1f} rows/s at {a['sample_rows']} rows")
    w, u = report["phases"]["world_model"], report["phases"]["update"]
    print(f"progress model input: {w['tokens_per_rollout']} tokens a rollout; sampled against recomputed log-probs, "
          f"largest gap {u['max_abs_logp_error']:.3f}; the card: {report['phases']['versions']['card_gib']:.1f} GiB")
    if "merged" in report["phases"]:
        print(f"policy with the adapters merged: {np.median(report['phases']['merged']['policy_s_by_tick'][1:]):.3f} s a tick "
              f"(median after the first), against {got['policy_s_per_tick']:.3f} unmerged")
    if "loop" in report["phases"]:
        loop = report["phases"]["loop"]
        for row in loop["log"]:
            print(f"the kit's loop, step {row['step']}: {row['rows']} rows from {loop.get('episodes', a['envs'])} rollouts of "
                  f"{a.get('loop_ticks')} ticks, episodes {row['seconds']['episodes']:.1f} s, progress model "
                  f"{row['seconds']['world_model']:.2f} s, update {row['seconds']['update']:.2f} s on {row['rows_trained']} "
                  f"rows trained (degenerate groups: {row['stats'].get('n_degenerate_groups', 0):.0f} of {row['stats']['n_groups']:.0f})")
    tick = got["policy_s_per_tick"] + got["env_s_per_tick"]
    play = 10 * got["env_s_per_tick"] + 520 * tick  # a group of 8 rollouts in lockstep, LIBERO-Long's 10 + 520 ticks
    update = {rows: -(-8 * rows // top) * got["update_s"][top] for rows in (12, 520)}  # micro-batches of `top` rows
    print(f"arithmetic on these rates, not measured (Meta-World scenes stand in for LIBERO's): a group of 8 rollouts "
          f"plays in ~ {play / 60:.1f} min, is scored in {got['wm_s_per_group']:.2f} s, and trains in ~ {update[12]:.0f} s on "
          f"12 rows a rollout (the official config's loss_steps_per_rollout) or ~ {update[520]:.0f} s on every tick (the "
          f"kit's loop); 2,000 steps of one group ~ {2000 * (play + update[12]) / 3600:.0f} h or "
          f"~ {2000 * (play + update[520]) / 3600:.0f} h; Table 3's 4,000 episodes in locksteps of {a['envs']} ~ "
          f"{4000 / a['envs'] * play / 3600:.1f} h")
    per_k = 1000 / top * got["update_s"][top]  # the SFT's step is the update's forward and backward, LoRA, micro-batch top
    print(f"SFT (wmrl sft libero, the same forward and backward): ~ {per_k:.0f} s per 1,000 demonstration rows an epoch, "
          f"so the paper's 5 epochs ~ {5 * per_k / 60:.1f} min per 1,000 rows (`wmrl sft libero` prints the rows of "
          f"its demonstrations); its memory is the plan's without the progress model")
    return 0


def print_plan(args: argparse.Namespace) -> int:
    "The plan's terms and peak at each micro-batch size, with LoRA at --lora-rank and with full fine-tuning."
    from wmrl.embodied.vla_model import ALLOCATOR_MARGIN, CONTEXT_GIB, build, lora_targets, vla_plan
    print(f"{args.policy}: LoRA adapts {len(lora_targets(build(args.policy, 'meta')))} linear layers (all but the head)")
    for rank in (args.lora_rank, None):
        for m in args.micro_batches:
            p = vla_plan(args.policy, args.world_model, rank, m, args.sample_rows, args.prompt_tokens, args.wm_rollouts,
                         args.frames, args.frame_px)
            terms = ", ".join(f"{k} {v:.2f}" for k, v in p["terms_gib"].items())
            print(f"{'LoRA r=' + str(rank) if rank else 'full fine-tuning'}, micro-batch {m}: peak {p['peak_gib']:.1f} GiB "
                  f"of {p['card_gib']:.1f} ({'FITS' if p['fits'] else 'DOES NOT FIT'}); {terms}")
    for m in args.micro_batches:  # the SFT step (wmrl sft libero): the update's terms without the progress model
        p = vla_plan(args.policy, args.world_model, args.lora_rank, m, args.sample_rows, args.prompt_tokens,
                     args.wm_rollouts, args.frames, args.frame_px)
        t = p["terms_gib"]
        peak = CONTEXT_GIB + (1 + ALLOCATOR_MARGIN) * (t["policy_weights"] + t["trainable_state"] + t["update_activations"])
        print(f"SFT (wmrl sft libero), LoRA r={args.lora_rank}, micro-batch {m}: peak {peak:.1f} GiB of {p['card_gib']:.1f} "
              f"({'FITS' if peak <= p['card_gib'] else 'DOES NOT FIT'}; no progress model held)")
    return 0


def main(argv=None) -> int:
    args = parse(argv)
    if args.summarise:
        return summarise(Path(args.summarise))
    if args.plan:
        return print_plan(args)
    if args.trim_textures:
        before, after = trim_textures(Path(args.trim_textures))
        print(f"{args.trim_textures}: {before / 2**20:.1f} -> {after / 2**20:.1f} MiB")
        return 0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    wheels = unpack_wheels(Path(args.wheels), out.parent / "site") if args.wheels else []
    import torch

    from wmrl.embodied import vla_model as vm
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = getattr(torch, args.dtype or ("bfloat16" if device.startswith("cuda") else "float32"))
    report = {"args": vars(args), "device": device, "dtype": str(dtype), "wheels": wheels, "phases": {}}
    memory, state, rng = Memory(device), {}, np.random.default_rng(0)
    run = lambda name, fn: phase(report, name, out, memory)(fn)  # noqa: E731

    def versions():
        names = ("torch", "transformers", "peft", "mujoco", "metaworld", "gymnasium", "numpy", "pillow")
        cuda = device.startswith("cuda")
        return {"python": sys.version.split()[0], "packages": {n: _version(n) for n in names},
                "gpu": torch.cuda.get_device_name(0) if cuda else None,
                "card_gib": torch.cuda.get_device_properties(0).total_memory / 2 ** 30 if cuda else None}
    card = run("versions", versions).get("card_gib") or 139.8

    def prismatic():
        "A MiniVLA-format run of --policy's architecture written and loaded as a real one would be; towers against timm."
        import shutil

        from wmrl.embodied import prismatic as pm
        arch, folder = vm.ARCHS[args.policy], out.parent / "prismatic_run"
        t0 = time.perf_counter()
        saved = pm.random_prismatic_state(arch)
        path = pm.write_prismatic_run(folder, saved, "prism-qwen25-extra-dinosiglip-224px+0_5b", "extra_action_tokenizer",
                                      {"libero_10_no_noops": {"action": {"q01": [-1.0] * 7, "q99": [1.0] * 7}}})
        written = time.perf_counter() - t0
        t0 = time.perf_counter()
        model, settings = pm.load_prismatic(folder, arch=arch, device=device, dtype=dtype)
        loaded, size = time.perf_counter() - t0, path.stat().st_size / 2 ** 30
        del model
        shutil.rmtree(folder)
        return {"checkpoint_gib": size, "write_s": written, "load_s": loaded, "text_vocab": settings["text_vocab"],
                "timm_parity": pm.timm_parity(saved, arch)}
    if args.prismatic:
        run("prismatic", prismatic)

    def models():
        torch.manual_seed(0)
        t0 = time.perf_counter()
        state["policy"] = vm.with_lora(vm.build(args.policy, device, dtype), args.lora_rank)
        built = time.perf_counter() - t0
        state["wm"] = vm.build(args.world_model, device, dtype).eval()
        state["optimizer"] = torch.optim.AdamW([p for p in state["policy"].parameters() if p.requires_grad], lr=1e-5)
        _sync(device)
        return {"policy_params": vm.count_params(state["policy"]), "world_model_params": vm.count_params(state["wm"]),
                "policy_build_s": round(built, 2), "device_used_gib": device_used_gib(device)}
    run("models", models)

    def prompts(n: int) -> list:
        "n random prompts of --prompt-tokens ids, BOS first, none of them an action id."
        vocab = state["policy"].text_vocab
        return [[1, *rng.integers(3, vocab - 256, args.prompt_tokens - 1).tolist()] for _ in range(n)]

    def ticks() -> tuple:
        "--envs scenes in lockstep for --env-steps ticks, one timed batched sampling call a tick."
        from wmrl.embodied.vector_env import MetaWorldScene, run_lockstep
        envs = [MetaWorldScene(args.task, args.frame_px) for _ in range(args.envs)]
        sampler, seconds = vm.VLASampler(state["policy"], prompts(args.envs), seed=0, device=device, dtype=dtype), []
        def timed(obs, active):
            t0 = time.perf_counter(); actions = sampler(obs, active); _sync(device)
            seconds.append(time.perf_counter() - t0)
            return actions
        t0 = time.perf_counter()
        try:
            _, steps, frames = run_lockstep(envs, list(range(args.envs)), timed, max_steps=args.env_steps)
            total = time.perf_counter() - t0  # stepping only: closing the scenes is not a tick's cost
        finally:
            for e in envs:
                e.close()
        return steps, frames, sampler, seconds, total

    def env():
        steps, frames, sampler, seconds, total = ticks()
        state["frames"] = frames
        return {"ticks": int(steps.max()), "rows": len(sampler.rows), "frame_shape": list(frames[0][-1].shape),
                "policy_s_by_tick": seconds, "lockstep_s": round(total, 3),
                "env_s_per_tick_settling_included": (total - sum(seconds)) / (10 + int(steps.max()))}
    run("env", env)

    def merged():
        "The same ticks with the adapters merged into the base weights (peft), then unmerged: what unmerged LoRA costs."
        state["policy"].merge_adapter()
        try:
            return {"policy_s_by_tick": ticks()[3]}
        finally:
            state["policy"].unmerge_adapter()
    run("merged", merged)

    def sampling():
        sampler = vm.VLASampler(state["policy"], prompts(args.sample_rows), seed=1, device=device, dtype=dtype)
        obs = observations(state, args.sample_rows, args.frame_px, rng)
        sampler(obs, np.ones(len(obs), bool)); _sync(device)  # the first call pays CUDA's one-time costs
        sampler.rows.clear()
        t0 = time.perf_counter(); sampler(obs, np.ones(len(obs), bool)); _sync(device)
        seconds = time.perf_counter() - t0
        t0 = time.perf_counter()  # the CPU's share: flip, resize, crop and normalisation of every frame
        vm.vla_pixels(np.stack([sampler.image(o["agentview_image"], sampler.size) for o in obs]), device, dtype)
        _sync(device)
        state["rows"] = sampler.rows
        return {"rows": len(sampler.rows), "call_s": seconds, "rows_per_s": len(sampler.rows) / seconds,
                "preprocess_s": time.perf_counter() - t0, "device_used_gib": device_used_gib(device)}
    run("sampling", sampling)

    def world_model():
        from wmrl.embodied.libero import sample_frames
        episodes = state.get("frames") or [list(rng.integers(0, 256, (4, args.frame_px, args.frame_px, 3), dtype=np.uint8))]
        clips = np.stack([sample_frames(np.stack(episodes[i % len(episodes)]), args.frames)[:, ::-1]  # upright (Robometer)
                          for i in range(args.wm_rollouts)])
        batch, ends = state["wm"].inputs(clips, rng.integers(3, 150_000, 24).tolist())
        batch = {k: v.to(device) for k, v in batch.items()}
        batch["pixel_values"] = batch["pixel_values"].to(dtype)
        with torch.no_grad():
            state["wm"](**batch, ends=ends.to(device)); _sync(device)  # warm-up
            t0 = time.perf_counter(); scores = state["wm"](**batch, ends=ends.to(device)); _sync(device)
        seconds = time.perf_counter() - t0
        return {"rollouts": args.wm_rollouts, "tokens_per_rollout": int(batch["input_ids"].shape[1]), "call_s": seconds,
                "rollouts_per_s": args.wm_rollouts / seconds, "scores_shape": list(scores.shape),
                "device_used_gib": device_used_gib(device)}
    run("world_model", world_model)

    def update():
        from wmrl.embodied.vla_grpo import accumulate_step, action_log_probs
        policy, optimizer, rows = state["policy"], state["optimizer"], state["rows"]
        policy.train()
        per_size = {}
        for m in [args.micro_batches[0], *args.micro_batches]:  # the first backward pays one-time costs: not kept
            batch = vm.rows_batch(rows[:m], device, dtype)
            optimizer.zero_grad(set_to_none=True)
            memory.reset(); t0 = time.perf_counter()
            accumulate_step(policy, batch["input_ids"], batch["attention_mask"], batch["tokens"], batch["old_logp"],
                            np.linspace(-1.0, 1.0, m), m, vocab_size=policy.text_vocab, pixel_values=batch["pixel_values"])
            _sync(device)
            per_size[m] = {"call_s": time.perf_counter() - t0, **memory.now()}
        with torch.no_grad():  # the sampled log-probs recomputed in one pass, before any step: the ratio's error
            again = action_log_probs(policy, batch["input_ids"], batch["attention_mask"], batch["tokens"],
                                     vocab_size=policy.text_vocab, pixel_values=batch["pixel_values"])
        optimizer.step(); _sync(device)
        held = memory.now()  # weights, adapters, their gradients and AdamW's moments
        optimizer.zero_grad(set_to_none=True)
        return {"micro_batches": per_size, "held_after_step": held, "device_used_gib": device_used_gib(device),
                "max_abs_logp_error": float((again.float() - batch["old_logp"].float()).abs().max())}
    run("update", update)

    def loop():
        "The kit's loop (wmrl.embodied.libero_grpo) at these sizes: two groups of --envs / 2 rollouts a step, evaluated."
        import gc

        from wmrl.embodied.libero_grpo import LiberoRunConfig, run_libero
        state.clear(); gc.collect()
        if device.startswith("cuda"):
            torch.cuda.empty_cache(); memory.reset()
        config = LiberoRunConfig(policy=args.policy, progress_model=args.world_model, scenes=args.task, device=device,
                                 frame_px=args.frame_px, lora_rank=args.lora_rank, groups=2, rollouts=max(2, args.envs // 2),
                                 max_steps=args.loop_ticks, steps=args.loop_steps, micro_batch=max(args.micro_batches),
                                 lr=5e-6, eval_inits=[40])
        summary = run_libero(config, out.parent / "loop", progress=False)
        return {"log": summary["log"], "eval": summary["eval"], "seconds": summary["seconds"],
                "episodes": config.groups * config.rollouts,
                "device_used_gib": device_used_gib(device)}
    run("loop", loop)

    plan = vm.vla_plan(args.policy, args.world_model, args.lora_rank, max(args.micro_batches), args.sample_rows,
                       args.prompt_tokens, args.wm_rollouts, args.frames, args.frame_px, card_gib=card)
    report["plan"] = plan
    report["plan_by_micro_batch"] = {m: vm.vla_plan(args.policy, args.world_model, args.lora_rank, m, args.sample_rows,
                                                    args.prompt_tokens, args.wm_rollouts, args.frames, args.frame_px,
                                                    card_gib=card)["terms_gib"]["update_activations"]
                                     for m in args.micro_batches}
    out.write_text(json.dumps(report, indent=1, default=float))
    failed = [name for name, record in report["phases"].items() if not record["ok"]]
    print(f"report: {out}" + (f"; failed: {', '.join(failed)}" if failed else "; every phase passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
