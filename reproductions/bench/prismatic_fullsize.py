"""MiniVLA-1B in openvla-mini's checkpoint layout, at its real size, through the kit's loader (issue 28): random
weights written as a Prismatic run (timm towers one block deeper than read, a fused projector, Qwen2.5 with 256 extra
tokens), loaded with `wmrl.embodied.prismatic.load_prismatic`, and its towers held to timm's own ViTs on random
images. Needs timm, which imports torchvision, whose PyPI wheel needs CUDA's torch: run it in timm-check's venv
(`make timm-check` builds it) or on the GPU image. About 2 min and 16 GB of host memory on 2 cores.

    PYTHONPATH=. .venv/timm/bin/python reproductions/bench/prismatic_fullsize.py \
        --out reproductions/results/prismatic/minivla_fullsize_cpu.json
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="the JSON record to write")
    p.add_argument("--scale", type=float, default=0.02, help="std of the random weights (small: the 23 blocks stay finite)")
    args = p.parse_args(argv)
    import torch

    from wmrl.embodied import prismatic as pm
    from wmrl.embodied.vla_model import MINIVLA_1B
    folder, times = Path(tempfile.mkdtemp()) / "minivla", {}
    try:
        t0 = time.perf_counter()
        saved = pm.random_prismatic_state(MINIVLA_1B, scale=args.scale)
        times["make_s"], t0 = time.perf_counter() - t0, time.perf_counter()
        path = pm.write_prismatic_run(folder, saved, "prism-qwen25-extra-dinosiglip-224px+0_5b", "extra_action_tokenizer",
                                      {"libero_10_no_noops": {"action": {"q01": [-1.0] * 7, "q99": [1.0] * 7}}})
        times["write_s"], t0 = time.perf_counter() - t0, time.perf_counter()
        model, settings = pm.load_prismatic(folder)
        times["load_s"] = time.perf_counter() - t0
        loaded = sum(p.numel() for p in model.parameters())
        del model
        t0 = time.perf_counter()
        parity = pm.timm_parity(saved, MINIVLA_1B)
        times["parity_s"] = time.perf_counter() - t0
        record = {"command": " ".join(sys.argv), "torch": torch.__version__, "checkpoint_gib": path.stat().st_size / 2 ** 30,
                  "parameters_loaded": loaded, "text_vocab": settings["text_vocab"], "embedding_rows": settings["rows"],
                  "timm_parity_max_abs": parity, **{k: round(v, 1) for k, v in times.items()}}
    finally:
        shutil.rmtree(folder.parent, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record))
    return 0 if "skipped" not in parity and max(parity["dino"], parity["siglip"]) < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
