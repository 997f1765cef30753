"""The world model's within-group anatomy: does it order the rollouts of one group the way success and progress do?

GRPO standardises rewards inside each group, so levels cancel and only the order inside a group reaches the update.
For each seed's SFT policy (the grid's cached checkpoints) this rolls out held-out init states of every task and
scores the same rollouts with the frozen world models (the state MLP of nbs/630_progress, the pixel CNN of
nbs/632_pixels) and, as the reference a good dense reward would reach, with Meta-World's own shaped reward (`wmrl.embodied.oracle`, instrument `clean`). It prints, per model and split, the mean
and 95% t-interval over seeds of `wmrl.embodied.progress.error_anatomy`: pooled AUC, within-group Spearman, AUC in
mixed groups (success/failure pairs of one group) and failure ranking (inside all-fail groups, Spearman against the
shaped progress). The ID column is held-out init states of the tasks the model trained on (the paper's OOD split);
OOD is tasks it never saw (a stress column).

    .venv/bin/python reproductions/bench/embodied_anatomy.py --cache /tmp/emb_full6/cache --eval-inits 40 41 42 43
    .venv/bin/python reproductions/bench/embodied_anatomy.py --cache /tmp/emb/cache --models progress pixels oracle

The pixel model's failure ranking is measured against the shaped progress it was trained to grade failures with (on
other init states and another policy's rollouts): it says how well that label generalises, not an independent truth.
"""
import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

from wmrl.autoresearch.runner import expand_grid, load_grid
from wmrl.embodied.loop import EmbodiedConfig, evaluate, sft_policy, world_model
from wmrl.embodied.oracle import OracleReward
from wmrl.embodied.pixels import ARCHS
from wmrl.embodied.report import ANATOMY_KEYS, paired_interval, t_interval
from wmrl.embodied.sim import EnvPool

KEYS = ("success_rate", "auc", "within_group_spearman", "auc_mixed_groups", "failure_ranking")
PAIRED_KEYS = ("auc", "within_group_spearman", "auc_mixed_groups", "failure_ranking")


def summarise(per_seed: dict) -> dict:
    """Per model and split, the t-interval over seeds of each measure; and, since every model scored the same rollouts
    of a seed, the paired interval of each model minus the first one (seeds where both are defined)."""
    defined = {name: {split: {k: {i: a[split][k] for i, a in enumerate(rows) if a[split][k] == a[split][k]} for k in ANATOMY_KEYS}
                      for split in ("ID", "OOD")} for name, rows in per_seed.items()}
    out = {name: {split: {k: t_interval(list(v.values())) for k, v in by_key.items()} for split, by_key in splits.items()}
           for name, splits in defined.items()}
    first, *others = defined
    paired = {f"{name} - {first}": {split: {k: paired_interval(defined[name][split][k], defined[first][split][k])
                                            for k in PAIRED_KEYS if set(defined[name][split][k]) & set(defined[first][split][k])}
                                    for split in ("ID", "OOD")} for name in others}
    return {"anatomy": out, "paired": paired}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", default="reproductions/grids/embodied_full.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default: the grid's")
    parser.add_argument("--eval-inits", type=int, nargs="+", default=None, help="default: the grid's held-out inits")
    parser.add_argument("--cache", required=True, help="the grid's cache (progress model and SFT checkpoints)")
    parser.add_argument("--models", nargs="+", default=["progress", "oracle"], choices=["progress", "pixels", "oracle"])
    parser.add_argument("--temperature", type=float, default=None, help="default: the grid's")
    parser.add_argument("--wm-policy-rollouts", type=int, default=None,
                        help="the pixel model's behaviour-policy rollouts per init (default: the grid's; 0: experts only)")
    parser.add_argument("--wm-inits", type=int, default=None, help="training init states per task of the world models (default: the grid's)")
    parser.add_argument("--wm-frame-px", type=int, default=None, help="the pixel model's frame side (default: the grid's)")
    parser.add_argument("--wm-arch", default=None, choices=ARCHS, help="the pixel model's architecture (default: the grid's)")
    parser.add_argument("--from-seeds", nargs="+", default=None,
                        help="summarise the per-seed lines earlier runs wrote to stderr (.jsonl files) instead of running; "
                             "a model already read from an earlier file is named model@file-stem")
    parser.add_argument("--reference", default=None, help="with --from-seeds: the model the others are paired against")
    args = parser.parse_args(argv)
    if args.from_seeds:
        per_seed = {}
        for path in args.from_seeds:
            seen = set(per_seed)
            for line in Path(path).read_text().splitlines():
                row = json.loads(line) if line.startswith('{"seed"') else None
                if row:
                    name = f"{row['model']}@{Path(path).stem}" if row["model"] in seen else row["model"]
                    per_seed.setdefault(name, []).append(
                        {split: {k: math.nan if row[split].get(k) is None else row[split][k] for k in ANATOMY_KEYS} for split in ("ID", "OOD")})
        if args.reference:
            per_seed = {args.reference: per_seed.pop(args.reference), **per_seed}
        print(json.dumps({"from_seeds": args.from_seeds, **summarise(per_seed)}, indent=1))
        return 0
    grid = load_grid(args.grid)
    base = EmbodiedConfig.from_dict({k: v for k, v in expand_grid(grid)[0].params.items() if k != "cache_dir"})
    if args.eval_inits:
        base = replace(base, eval_inits=tuple(args.eval_inits))
    if args.temperature is not None:
        base = replace(base, temperature=args.temperature)
    if args.wm_policy_rollouts is not None:
        base = replace(base, wm_policy_rollouts=args.wm_policy_rollouts)
    for knob in ("wm_inits", "wm_frame_px", "wm_arch"):
        if getattr(args, knob) is not None:
            base = replace(base, **{knob: getattr(args, knob)})
    per_seed = {name: [] for name in args.models}
    for seed in args.seeds if args.seeds is not None else grid["seeds"]:
        config = replace(base, seed=seed)
        pool = EnvPool(config.tasks)
        policy, _ = sft_policy(config, pool, Path(args.cache))
        models = {name: OracleReward("clean", 1.0, seed=17) if name == "oracle"
                  else world_model(replace(config, world_model=name), pool, Path(args.cache))[0] for name in args.models}
        for name, model in models.items():  # the same rollouts for both: evaluate's stream is fixed by (seed, step)
            anatomy = evaluate(policy, config, pool, 0, model)["anatomy"]
            per_seed[name].append(anatomy)
            print(json.dumps({"seed": seed, "model": name, **{s: {k: round(anatomy[s][k], 3) for k in KEYS} for s in anatomy}}),
                  file=sys.stderr)
    print(json.dumps({"grid": args.grid, "seeds": args.seeds or grid["seeds"], "eval_inits": list(base.eval_inits),
                      "temperature": base.temperature, "wm_policy_rollouts": base.wm_policy_rollouts,
                      "wm_inits": base.wm_inits, "wm_frame_px": base.wm_frame_px, "wm_arch": base.wm_arch,
                      "fingerprints": {n: m.fingerprint for n, m in models.items() if n != "oracle"},
                      "rollouts_per_init": base.rollouts_per_init, **summarise(per_seed)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
