"""The toy bandit under each correction rule of issue 12: s² measured in sample (the release: after this step's
pairs were pushed and the map refitted) or out of sample (with the map from before them), and the anchor weight's
EMA started by its first value (the release) or bias-corrected. Every combination runs the same seeds and streams
(common random numbers), so each rule change is compared seed by seed: final gap J* − J (mean over the last 10%
of steps) per seed, paired mean difference with a paired-bootstrap 95% CI and t-test p (wmrl.core.paired).

    python reproductions/bench/bandit_rules.py [--seeds 32] [--steps 2000] [--noise 0.0 0.5] [--out DIR]
"""
import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=32)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.5], help="world-model noise sigma settings")
    parser.add_argument("--refit-every", type=int, default=64, help="new pairs between refits (8 = every anchor group)")
    parser.add_argument("--min-pairs", type=int, default=200, help="pairs before the first fit")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    from wmrl.core.paired import paired_contrast
    from wmrl.toy.bandit import BanditConfig, final_gap, risky_problem, simulate
    variants = ("mixed_uncorrected", "denoise_only", "wmrl")
    rules = {"release (in-sample s², first-value EMA)": ("in_sample", "official"),
             "out-of-sample s²": ("out_of_sample", "official"),
             "bias-corrected EMA": ("in_sample", "bias_corrected"),
             "both (kit default)": ("out_of_sample", "bias_corrected")}
    out = {"seeds": args.seeds, "steps": args.steps, "refit_every": args.refit_every, "min_pairs": args.min_pairs,
           "command": "python reproductions/bench/bandit_rules.py " + " ".join(sys.argv[1:]), "settings": {}}
    for sigma in args.noise:
        gaps, weights = {}, {}
        for label, (s2_rule, scale) in rules.items():
            config = BanditConfig(seeds=args.seeds, steps=args.steps, noise=sigma, variants=variants, s2_rule=s2_rule,
                                  weight_scale=scale, refit_every=args.refit_every, min_pairs=args.min_pairs)
            run = simulate(risky_problem(), config)
            gap = final_gap(run)  # (variants, seeds)
            for i, variant in enumerate(variants):
                gaps[(label, variant)] = {s: float(gap[i, s]) for s in range(args.seeds)}
                weights[(label, variant)] = float(run.anchor_weight[-1][i].mean())
        setting = {}
        for variant in ("denoise_only", "wmrl"):
            base = gaps[(next(iter(rules)), variant)]
            rows = {}
            for label in rules:
                row = {"final_gap_mean": sum(gaps[(label, variant)].values()) / args.seeds,
                       "final_anchor_weight": weights[(label, variant)]}
                if label != next(iter(rules)):
                    c = paired_contrast(gaps[(label, variant)], base)
                    row["minus_release"] = {k: c[k] for k in ("mean", "ci_low", "ci_high", "p")}
                rows[label] = row
            setting[variant] = rows
        setting["mixed_uncorrected_final_gap"] = sum(gaps[(next(iter(rules)), "mixed_uncorrected")].values()) / args.seeds
        out["settings"][f"sigma={sigma}"] = setting
    text = json.dumps(out, indent=1)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        name = "bandit_rules.json" if args.refit_every == 64 else f"bandit_rules_refit{args.refit_every}.json"
        (Path(args.out) / name).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
