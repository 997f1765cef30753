"""Error anatomy of each world model on the AutoResearch suite's fidelity cases (issue 12): which share of the squared
error is a per-task offset, a monotone distortion (fitted leave one task out), blind spots, false alarms, ranking
noise among working programs, or a wrong failure rung. Reads the cases that wm_fidelity_suite.py executed for real
(cases.csv: real reward and each prior's prediction per program), applies the positive controls of wmrl.world_model.controls
to the fitted static world model's prediction (no execution), and writes anatomy.json, anatomy.md and anatomy.png.

Usage: python reproductions/bench/wm_fidelity_anatomy.py [--cases reproductions/results/wm_fidelity_suite/cases.csv]
           [--out reproductions/results/wm_fidelity_suite] [--B 0.25] [--sigma 0.15]
"""
import argparse
import json
import os
from pathlib import Path

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"): os.environ.setdefault(var, "1")

ROOT = Path(__file__).resolve().parents[2]
LABELS = {"offset": "offset (centring removes it)", "monotone": "monotone shape (isotonic, leave one task out)",
          "blind_spot": "blind spots (predicted to run, fails)", "false_alarm": "false alarms (predicted to fail, runs)",
          "ranking_noise": "ranking noise (both run)", "wrong_rung": "wrong failure rung (both fail)"}


def anatomies(frame, bias: float, sigma: float) -> dict:
    "world model name -> error_anatomy on the cases (the controls transform the fitted prior's prediction)."
    from wmrl.world_model.controls import ControlledWorldModel
    from wmrl.world_model.fidelity import error_anatomy
    real_ok = (frame["real_status"] == "ok").to_numpy()
    tasks, real = frame["task"].to_numpy(), frame["real_reward"].to_numpy(float)
    keys = [f"{t}:{i}" for i, t in enumerate(tasks)]
    out = {}
    for name in ("hand", "fitted"):
        out[f"static ({name} prior)"] = error_anatomy(tasks, frame[f"{name}_pred_reward"].to_numpy(float), real,
                                                       (frame[f"{name}_pred_status"] == "ok").to_numpy(), real_ok)
    fitted, fitted_ok = frame["fitted_pred_reward"].to_numpy(float), (frame["fitted_pred_status"] == "ok").to_numpy()
    for spec in ({"name": "static+monotone", "B": bias}, {"name": "static+noise", "sigma": sigma},
                 {"name": "static+monotone+noise", "B": bias, "sigma": sigma}):
        control = ControlledWorldModel(None, spec)
        label = control.spec.name + "(" + ", ".join(f"{k}={v}" for k, v in spec.items() if k != "name") + ")"
        out[label] = error_anatomy(tasks, control.transform(fitted, keys), real, fitted_ok, real_ok)
    return out


def markdown(results: dict) -> str:
    head = ["world model", "MSE", *[LABELS[k] for k in LABELS], "monotone in-sample", "monotone / centred error"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name, a in results.items():
        shares = [f"{100 * a['shares'][k]:.1f}%" for k in LABELS]
        lines.append("| " + " | ".join([name, f"{a['mse']:.4f}", *shares, f"{100 * a['monotone_share_in_sample']:.1f}%",
                                        f"{100 * a['monotone_share_of_centred']:.1f}%"]) + " |")
    counts = next(iter(results.values()))["counts"]
    return ("# Error anatomy of each world model on the suite's fidelity cases\n\n"
            f"{next(iter(results.values()))['n']} programs on 27 tasks, executed for real (cases.csv). Shares of the "
            "mean squared error between predicted and real reward; they add up to 100%. Case counts (fitted prior): "
            f"{counts}. Controls transform the fitted static world model's score (wmrl.world_model.controls) and keep its "
            "statuses, so their blind spots and false alarms are the same cases. Command: `python "
            "reproductions/bench/wm_fidelity_anatomy.py`.\n\n" + "\n".join(lines) + "\n")


def plot(results: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(10, 0.6 * len(results) + 1.8))
    names = list(results)
    left = [0.0] * len(names)
    for part, label in LABELS.items():
        widths = [100 * max(results[n]["shares"][part], 0.0) for n in names]
        ax.barh(names, widths, left=left, label=label)
        left = [a + b for a, b in zip(left, widths)]
    ax.set_xlabel("share of the squared error (%; a negative share is drawn as 0)")
    ax.invert_yaxis()
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.4, -0.22), ncol=2)
    ax.set_title("What isotonic debiasing can undo (offset + monotone) and what it cannot")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    import pandas as pd
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=str(ROOT / "reproductions/results/wm_fidelity_suite/cases.csv"))
    parser.add_argument("--out", default=str(ROOT / "reproductions/results/wm_fidelity_suite"))
    parser.add_argument("--B", type=float, default=0.25, help="distortion strength of the monotone control")
    parser.add_argument("--sigma", type=float, default=0.15, help="noise of the noise control")
    args = parser.parse_args(argv)
    frame = pd.read_csv(args.cases)
    results = anatomies(frame, args.B, args.sigma)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "anatomy.json").write_text(json.dumps(results, indent=1))
    (out / "anatomy.md").write_text(markdown(results))
    plot(results, out / "anatomy.png")
    print(json.dumps({name: {k: round(v, 3) for k, v in a["shares"].items()} for name, a in results.items()}, indent=1))


if __name__ == "__main__":
    main()
