"""Robometer's environment (`make setup-robometer`) checked from inside it, against the kit's reward service.

Runs with Robometer's interpreter and the repository on PYTHONPATH (the Makefile does both):

    PYTHONPATH=. .venv/robometer/bin/python reproductions/robometer_check.py [--gpu]

1. **Imports**: the pinned stack imports Robometer's eval helpers, its sample types and `load_model_from_hf` (whose
   signature the README's server command relies on). `--gpu` also imports `robometer.evals.eval_server`, which imports
   unsloth, which refuses to import without an accelerator: so only on the GPU box.
2. **The request**: the kit's `encode_request` body (what `RewardClient` sends) goes through the server's own parsing,
   in the server's order: starlette's multipart parser (`await request.form()`, as FastAPI's route does),
   `parse_npy_form_data`, `reconstruct_payload_from_npy` with the route's trajectory keys, and pydantic's
   `ProgressSample`, the type `process_batch_helper` builds. Frames, instructions and `use_frame_steps` must come out
   as they went in.
3. **The answer**: the stand-in server's response (`wmrl serve progress`) read by Robometer's own client helpers
   (`extract_rewards_from_output`, `extract_success_probs_from_output`) gives the last frame's values the kit's client
   reads. Those helpers turn anything unexpected into 0.0, so the values are drawn away from 0.

Prints one JSON object; exits 1 when a check fails.
"""
import argparse
import asyncio
import json
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import numpy as np


def check_imports(gpu: bool) -> dict:
    import inspect

    import torch
    import transformers
    from robometer.data.dataset_types import ProgressSample  # noqa: F401
    from robometer.evals import eval_utils  # noqa: F401
    from robometer.utils.save import load_model_from_hf
    out = {"torch": torch.__version__, "transformers": transformers.__version__,
           "load_model_from_hf": str(inspect.signature(load_model_from_hf))}
    if gpu:
        from robometer.evals import eval_server  # unsloth: needs an accelerator
        source = inspect.getsource(eval_server.create_app)  # the routes RewardClient calls
        out["eval_server_routes"] = [r for r in ("/health", "/evaluate_batch_npy") if f'"{r}"' in source]
        assert len(out["eval_server_routes"]) == 2, f"the eval server's routes moved: {out['eval_server_routes']}"
    return out


async def _server_side(body: bytes, content_type: str) -> tuple:
    "The /evaluate_batch_npy route's parsing, step by step, on the kit's body."
    from robometer.data.dataset_types import ProgressSample
    from robometer.evals.eval_utils import parse_npy_form_data, reconstruct_payload_from_npy
    from starlette.requests import Request
    sent = False

    async def receive():
        nonlocal sent
        chunk, sent = (b"" if sent else body), True
        return {"type": "http.request", "body": chunk, "more_body": False}
    scope = {"type": "http", "method": "POST", "path": "/evaluate_batch_npy", "query_string": b"",
             "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]}
    form = await Request(scope, receive).form()
    arrays, other = await parse_npy_form_data(form)
    use_frame_steps = other.pop("use_frame_steps", False)
    samples = reconstruct_payload_from_npy(arrays, other, trajectory_keys=[
        "chosen_trajectory", "rejected_trajectory", "reference_trajectory", "traj_sim_trajectory",
        "traj_diff_trajectory", "trajectory"], convert_embeddings_to_torch=True)
    return [ProgressSample(**s) for s in samples], use_frame_steps


def check_request() -> dict:
    from wmrl.embodied.reward_service import encode_request
    rng = np.random.default_rng(0)
    clips = [rng.integers(0, 256, (8, 48, 64, 3), dtype=np.uint8) for _ in range(3)]
    texts = ["put both the alphabet soup and the tomato sauce in the basket", "turn on the stove", "ünïcode: 把碗放在盘子上"]
    out = {}
    for flag in (False, True):
        samples, use_frame_steps = asyncio.run(_server_side(*encode_request(clips, texts, use_frame_steps=flag)))
        assert use_frame_steps is flag, f"use_frame_steps {flag} arrived as {use_frame_steps!r}"
        assert len(samples) == len(clips), f"{len(clips)} clips arrived as {len(samples)} samples"
        for s, frames, text in zip(samples, clips, texts):
            assert s.sample_type == "progress" and s.trajectory.task == text, (s.sample_type, s.trajectory.task)
            assert isinstance(s.trajectory.frames, np.ndarray) and np.array_equal(s.trajectory.frames, frames)
        out[f"use_frame_steps={flag}"] = {"samples": len(samples), "frames": list(samples[0].trajectory.frames.shape)}
    return out


def check_answer() -> dict:
    from robometer.evals.eval_utils import extract_rewards_from_output, extract_success_probs_from_output

    from wmrl.embodied.reward_service import RewardClient, encode_request, make_server
    rng = np.random.default_rng(1)
    progress, success = rng.uniform(0.2, 0.9, (4, 8)), rng.uniform(0.2, 0.9, (4, 8))
    server = make_server(lambda clips, texts: (progress[:len(clips)], success[:len(clips)]))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        client = RewardClient(url, frames=8, flip=False)
        ours = client.score([rng.integers(0, 256, (8, 32, 32, 3), dtype=np.uint8) for _ in range(4)], ["t"] * 4)
        body, kind = encode_request([np.zeros((8, 32, 32, 3), np.uint8)] * 4, ["t"] * 4)
        request = urllib.request.Request(url + "/evaluate_batch_npy", data=body, headers={"Content-Type": kind})
        raw = json.loads(urllib.request.urlopen(request, timeout=60).read())
    finally:
        server.shutdown()
    theirs = extract_rewards_from_output(raw), extract_success_probs_from_output(raw)
    np.testing.assert_allclose(theirs[0], np.clip(ours["progress"][:, -1], 0, 1), atol=1e-6)
    np.testing.assert_allclose(theirs[1], ours["success_probs"][:, -1], atol=1e-6)
    return {"clips": len(theirs[0]), "last_progress": [round(float(v), 4) for v in theirs[0]]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", action="store_true", help="also import the eval server (unsloth needs an accelerator)")
    args = parser.parse_args()
    report, failed = {"python": sys.version.split()[0]}, False
    try:
        commit = subprocess.run(["git", "-C", str(Path(__import__("robometer").__file__).parents[1]), "rev-parse", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except Exception:  # an installed (not editable) robometer has no git folder
        commit = ""
    report["robometer_commit"] = commit
    for name, check in (("imports", lambda: check_imports(args.gpu)), ("request", check_request), ("answer", check_answer)):
        try:
            report[name] = check()
        except Exception as err:  # every check reports; the exit status says whether all held
            report[name], failed = {"failed": f"{type(err).__name__}: {err}"}, True
    print(json.dumps(report, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
