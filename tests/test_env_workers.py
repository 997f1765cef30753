"""Scenes in LIBERO's own interpreter (wmrl.embodied.env_workers, nbs/653; issue 28): robosuite's scenes, with
LIBERO's arm, controller, rate and camera, stepped by `.venv/libero`'s Python (robosuite 1.4.0, MuJoCo < 3.4,
numpy < 2) for a parent that runs numpy 2, over the pickle-free pipe. CI does not build that venv, so these skip
there with the reason; they run wherever `make setup-embodied` has run (this machine's sessions run them)."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from wmrl.embodied.env_workers import VenvEnvs
from wmrl.embodied.vector_env import run_lockstep

LIBERO_PYTHON = Path(__file__).resolve().parent.parent / ".venv" / "libero" / "bin" / "python"
pytestmark = pytest.mark.skipif(not LIBERO_PYTHON.exists(), reason="no .venv/libero: `make setup-embodied` builds it")
LIFT = {"factory": "wmrl.embodied.env_workers:RobosuiteScene", "kwargs": {"env_name": "Lift", "resolution": 64}}


def play(inits, seed=0, ticks=12):
    rng = np.random.default_rng(seed)
    moves = [rng.uniform(-1, 1, (len(inits), 7)) for _ in range(ticks)]
    it = iter(moves)
    with VenvEnvs([LIFT] * len(inits), python=LIBERO_PYTHON) as envs:
        return run_lockstep(envs, inits, lambda observations, active: next(it), max_steps=ticks)


def test_the_two_interpreters_hold_different_numpys():
    there = subprocess.run([str(LIBERO_PYTHON), "-c", "import numpy; print(numpy.__version__)"], capture_output=True,
                           text=True, check=True).stdout.strip()
    assert there.startswith("1.") and np.__version__.startswith("2."), (there, np.__version__)


def test_robosuite_scenes_step_in_lockstep_across_interpreters():
    success, steps, frames = play([3, 4])
    assert steps.tolist() == [12, 12] and not success.any()  # random arm motions lift nothing in 12 ticks
    assert frames[0][0].shape == (64, 64, 3) and frames[0][0].dtype == np.uint8
    assert len(frames[0]) == 13  # the settled frame, then one a tick
    assert np.abs(frames[0][0].astype(int) - frames[1][0].astype(int)).mean() > 1  # two init states, two placements
    assert np.abs(frames[0][-1].astype(int) - frames[0][0].astype(int)).mean() > 1  # the arm moved in the picture


def test_the_same_init_and_actions_replay_the_same_frames():
    first, again = play([7]), play([7])
    for a, b in zip(first[2][0], again[2][0]):
        np.testing.assert_array_equal(a, b)


def test_a_missing_simulator_or_scene_is_named_in_the_error():
    no_such = {"factory": "wmrl.embodied.env_workers:RobosuiteScene", "kwargs": {"env_name": "NoSuchScene"}}
    with pytest.raises(RuntimeError, match="environment 0: .*NoSuchScene"):
        VenvEnvs([no_such], python=LIBERO_PYTHON)
    with pytest.raises(RuntimeError, match="ModuleNotFoundError|No module named 'robosuite'"):
        VenvEnvs([LIFT], python=sys.executable)  # the models' interpreter has no robosuite


def test_a_grpo_step_on_two_robosuite_tasks_in_libero_s_interpreter(tmp_path):
    "The kit's loop with the models here (numpy 2) and a group on each of two robosuite tasks in LIBERO's venv."
    import json
    pytest.importorskip("peft")
    out = tmp_path / "two"
    done = subprocess.run([sys.executable, "-m", "wmrl.cli", "reproduce", "libero", "--out", str(out), "--steps", "1",
                           "--dry-run", "--groups", "2", "--rollouts", "2", "--max-steps", "3", "--eval-inits", "40",
                           "--policy", "tiny-vla", "--scenes", "robosuite", "--tasks", "Lift", "Stack",
                           "--progress-model", "tiny-robometer", "--lora-rank", "4", "--frame-px", "64",
                           "--env-python", str(LIBERO_PYTHON), "--no-progress"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["log"][0]["rows"] == 2 * 2 * 3  # 2 groups x 2 episodes x 3 ticks, every scene of a tick at once
    assert summary["eval"]["episodes"] == 2 * 2 and summary["config"]["tasks"] == ["Lift", "Stack"]  # each task evaluated


def test_the_real_mode_reaches_libero_in_its_interpreter(tmp_path):
    """Every real input present (a tiny MiniVLA run, a tokenizer of Qwen2's class, a progress service): the run goes as
    far as building LIBERO's scene in LIBERO's venv, and stops there naming the missing assets (they are on the hub)."""
    import threading

    from wmrl.embodied.libero import suite_tasks
    from wmrl.embodied.prismatic import random_prismatic_state, write_prismatic_run, write_tiny_qwen_tokenizer
    from wmrl.embodied.reward_service import make_server
    from wmrl.embodied.vla_model import TINY_VLA
    run = tmp_path / "minivla"
    write_prismatic_run(run, random_prismatic_state(TINY_VLA), "prism-qwen25-extra-dinosiglip-224px+0_5b",
                        "extra_action_tokenizer", {"libero_10_no_noops": {"action": {"q01": [-1.0] * 7, "q99": [1.0] * 7}}})
    tokenizer = write_tiny_qwen_tokenizer(tmp_path / "qwen", TINY_VLA)
    server = make_server(lambda clips, texts: (np.zeros((len(clips), 8)), np.zeros((len(clips), 8))))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        task = suite_tasks("libero_10")[0].name
        env = {k: v for k, v in os.environ.items() if k != "LIBERO_ASSETS"}
        done = subprocess.run([sys.executable, "-m", "wmrl.cli", "reproduce", "libero", "--out", str(tmp_path / "real"),
                               "--steps", "1", "--groups", "1", "--rollouts", "2", "--max-steps", "2", "--eval-inits", "40",
                               "--policy", "tiny-vla", "--policy-checkpoint", str(run), "--tokenizer", str(tokenizer),
                               "--scenes", "libero:libero_10", "--tasks", task, "--frame-px", "64", "--no-progress",
                               "--progress-url", f"http://127.0.0.1:{server.server_address[1]}",
                               "--env-python", str(LIBERO_PYTHON)], capture_output=True, text=True, timeout=900, env=env)
    finally:
        server.shutdown()
    assert done.returncode != 0
    assert "LiberoAssetsMissing: LIBERO assets not found" in done.stderr, done.stderr[-3000:]  # raised in the worker
