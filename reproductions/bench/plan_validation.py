"""The plan's memory model against a measurement: one fp32 forward/backward/AdamW step of the tiny policy on CPU.

    python reproductions/bench/plan_validation.py [--out reproductions/results/plan_validation/tiny_cpu.json]

For each (micro-batch, sequence, completion tokens, gradient checkpointing) case, `wmrl.adapters.plan.measure_step` runs the
step in a fresh subprocess and reads the kernel's peak resident memory over it (VmHWM reset just before the step);
`wmrl.adapters.plan.estimate_step` gives the plan's figure for the same step. Prints one JSON line per case.
"""
import argparse
import json
from pathlib import Path

from wmrl.adapters.plan import estimate_step, measure_step

CASES = [(8, 1024, 512, False), (8, 2048, 1024, False), (4, 2048, 2000, False), (8, 1024, 512, True),
         (16, 512, 256, False), (8, 4096, 512, False), (8, 4096, 512, True), (2, 8192, 4096, True),
         (2, 8192, 4096, False)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results/plan_validation/tiny_cpu.json"))
    args = parser.parse_args(argv)
    rows = []
    for batch, seq, completion, checkpointing in CASES:
        measured = measure_step("tiny-qwen3", batch, seq, completion, checkpointing)["delta"]
        planned = estimate_step("tiny-qwen3", batch, seq, completion, checkpointing)
        rows.append({"batch": batch, "seq": seq, "completion": completion, "checkpointing": checkpointing,
                     "measured_mib": measured / 2**20, "plan_mib": planned / 2**20, "ratio": planned / measured})
        print(json.dumps(rows[-1]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"command": "python reproductions/bench/plan_validation.py",
                                          "architecture": "tiny-qwen3", "cases": rows,
                                          "within_25_percent": sum(0.75 <= r["ratio"] <= 1.25 for r in rows)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
