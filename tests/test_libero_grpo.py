"""LIBERO GRPO through its papermill template (issue 28): `wmrl reproduce libero --dry-run` end to end, and a run
killed after its first checkpoint resumes to the unbroken run's log. The stand-ins (LIBERO's interface, a tiny
LlamaForCausalLM of OpenVLA's vocabulary, a progress function with Robometer's keys) are named in nbs/656."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("papermill")

ARGS = ["--dry-run", "--groups", "2", "--rollouts", "2", "--max-steps", "4", "--eval-inits", "40", "41", "--no-progress"]


def reproduce(out: Path, steps: int, **popen):
    command = [sys.executable, "-m", "wmrl.cli", "reproduce", "libero", "--out", str(out), "--steps", str(steps), *ARGS]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            **popen)


def descendants(pid: int) -> list[int]:
    "Every live descendant of `pid`, from /proc (the papermill kernel runs in a session of its own, out of killpg's reach)."
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found, todo = found + kids, todo + kids
    return found


def kill_tree(pid: int) -> None:
    "SIGKILL a process and every descendant, the kernel doing the work included."
    for victim in [pid, *descendants(pid)]:
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass


def strip(log):
    return json.dumps([{k: v for k, v in row.items() if k != "seconds"} for row in log])  # NaN equals NaN here


def test_a_killed_run_resumes_to_the_unbroken_runs_log(tmp_path):
    whole = reproduce(tmp_path / "whole", 3)
    stdout, stderr = whole.communicate(timeout=900)
    assert whole.returncode == 0, stderr[-3000:]
    printed = json.loads(stdout.strip().splitlines()[-1])
    assert printed["steps"] == 3 and set(printed["seconds"]) == {"episodes", "world_model", "update"}
    assert (tmp_path / "whole" / "libero.ipynb").is_file()  # the executed template sits in the run folder

    killed = reproduce(tmp_path / "split", 3)
    checkpoint, deadline = tmp_path / "split" / "checkpoint.pt", time.monotonic() + 600
    while not checkpoint.is_file() and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    kill_tree(killed.pid)  # papermill and its kernel, which trains
    killed.communicate()
    assert killed.returncode == -signal.SIGKILL  # it was still running when killed, not finished
    time.sleep(1.0)  # a survivor would write its next checkpoint by now
    import torch
    at_kill = torch.load(checkpoint, weights_only=False)["step"]
    assert 1 <= at_kill < 3 and not (tmp_path / "split" / "summary.json").exists()  # killed mid-run, not after
    resumed = reproduce(tmp_path / "split", 3)
    stdout, stderr = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, stderr[-3000:]
    summaries = [json.loads((tmp_path / name / "summary.json").read_text()) for name in ("whole", "split")]
    assert strip(summaries[1]["log"]) == strip(summaries[0]["log"])
    evals = [dict(summary["eval"]) for summary in summaries]
    assert evals[1].pop("table3") == pytest.approx(evals[0].pop("table3")) and evals[1] == pytest.approx(evals[0])


def test_bad_input_and_the_real_mode_are_refused_on_stderr(tmp_path):
    done = subprocess.run([sys.executable, "-m", "wmrl.cli", "reproduce", "libero", "--out", str(tmp_path / "x"),
                           "--dry-run", "--rollouts", "0"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "rollouts must be >= 1" in done.stderr and not (tmp_path / "x").exists()
    done = subprocess.run([sys.executable, "-m", "wmrl.cli", "reproduce", "libero", "--out", str(tmp_path / "y")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "the real mode needs LIBERO, MiniVLA and Robometer" in done.stderr


def test_the_models_real_classes_on_rendered_scenes_run_through_the_template(tmp_path):
    "MiniVLA's (from a MiniVLA-format run) and Robometer's classes (tiny), LoRA, Meta-World scenes in processes: one step."
    pytest.importorskip("peft")
    pytest.importorskip("metaworld")
    from wmrl.embodied.prismatic import random_prismatic_state, write_prismatic_run, write_tiny_qwen_tokenizer
    from wmrl.embodied.vla_model import TINY_VLA
    minivla = tmp_path / "minivla"  # a MiniVLA run in openvla-mini's layout, at tiny-vla's size: the policy starts from it
    write_prismatic_run(minivla, random_prismatic_state(TINY_VLA), "prism-qwen25-extra-dinosiglip-224px+0_5b",
                        "extra_action_tokenizer", {"libero_10_no_noops": {"action": {"q01": [-1.0] * 7, "q99": [1.0] * 7}}})
    tokenizer = write_tiny_qwen_tokenizer(tmp_path / "qwen", TINY_VLA)  # Qwen2's class, tiny-vla's vocabulary shape
    out = tmp_path / "scenes"
    done = subprocess.run([sys.executable, "-m", "wmrl.cli", "reproduce", "libero", "--out", str(out), "--steps", "1",
                           "--dry-run", "--groups", "1", "--rollouts", "2", "--max-steps", "2", "--eval-inits", "40",
                           "--policy", "tiny-vla", "--scenes", "reach-v3", "--progress-model", "tiny-robometer",
                           "--lora-rank", "4", "--env-processes", "--policy-checkpoint", str(minivla),
                           "--tokenizer", str(tokenizer), "--no-progress"],
                          capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["policy"] == "tiny-vla" and summary["log"][0]["rows"] == 2 * 2  # 2 episodes x 2 ticks
    assert summary["config"]["policy_checkpoint"] == str(minivla) and summary["config"]["tokenizer"] == str(tokenizer)
    assert summary["eval"]["episodes"] == 2 and summary["seconds"]["world_model"] > 0
    import torch
    saved = torch.load(out / "checkpoint.pt", weights_only=False)["model"]
    assert saved and all("lora_" in name for name in saved)  # the checkpoint holds the adapters, not the frozen 1B


@pytest.mark.parametrize("arm", ["wmrl", "grpo_real"])
def test_the_readmes_table3_command_passes_every_check_up_to_the_progress_service(capsys, tmp_path, arm):
    """docs/gpu.md's LIBERO-Long commands (both arms, the release's protocol), shell variables filled in: every knob parses
    and validates, the real mode's requirements and the tasks' names included, and each stops at the progress service,
    which does not answer here."""
    import re
    import shlex

    from wmrl.embodied.libero import suite_tasks
    from wmrl.embodied.libero_cli import cli_reproduce_libero
    text = (Path(__file__).resolve().parent.parent / "docs" / "gpu.md").read_text()
    start = text.index(f".venv/bin/wmrl reproduce libero --out runs/libero_long_{arm} ")
    command = re.sub(r"\\\n\s*", " ", text[start:text.index("--eval-inits $(seq 16 49)", start) + len("--eval-inits $(seq 16 49)")])
    release = {"--method": arm, "--anchor-fraction": "1.0", "--groups": "1", "--rollouts": "8", "--lora-rank": "16",
               "--lora-alpha": "32", "--rows-per-rollout": "12", "--grad-clip": "1.0", "--temperature": "1.0", "--lr": "1e-5",
               "--anchor-reward": "calib" if arm == "wmrl" else "sparse"}  # the release's protocol, spelt out in each command
    words = command.split()
    assert {k: words[words.index(k) + 1] for k in release} == release
    command = command.replace("$TASKS", " ".join(t.name for t in suite_tasks("libero_10")))
    command = re.sub(r"\$\(seq (\d+) (\d+)\)", lambda m: " ".join(map(str, range(int(m[1]), int(m[2]) + 1))), command)
    from wmrl.embodied.prismatic import random_prismatic_state, write_prismatic_run, write_tiny_qwen_tokenizer
    from wmrl.embodied.vla_model import TINY_VLA
    run = write_prismatic_run(tmp_path / "run", random_prismatic_state(TINY_VLA), "prism-qwen25-extra-dinosiglip-224px+0_5b",
                              "extra_action_tokenizer", {"libero_10_no_noops": {"action": {"q01": [-1.0] * 7, "q99": [1.0] * 7}}})
    qwen = write_tiny_qwen_tokenizer(tmp_path / "qwen", TINY_VLA)  # the real mode checks that both exist
    command = command.replace("$RUN", str(run.parents[1])).replace("$QWEN", str(qwen))
    argv = shlex.split(command.replace("127.0.0.1:8001", "127.0.0.1:9"))[3:]  # port 9: nothing answers
    assert cli_reproduce_libero(argv) == 2
    err = capsys.readouterr().err
    assert "no progress-model service answers" in err, err  # the last check before any episode


def test_a_vq_minivla_run_samples_and_trains_over_its_codes(tmp_path):
    """A VQ MiniVLA run (libero_vq_extra_action_tokenizer) with its VQ-VAE folder: the loop's sampler draws 7 codes among
    the last 128 ids, and the update's log-probs are over those same 128 (over 256 they would differ, silently)."""
    pytest.importorskip("peft")
    import torch

    from wmrl.embodied.action_codecs import VQ_TOKENIZERS, write_vq_folder
    from wmrl.embodied.env_workers import FakeLiberoEnv
    from wmrl.embodied.libero_grpo import LiberoRunConfig, _sampler, _setup, _update_batch
    from wmrl.embodied.prismatic import random_prismatic_state, write_prismatic_run
    from wmrl.embodied.vector_env import run_lockstep
    from wmrl.embodied.vla_grpo import action_log_probs
    from wmrl.embodied.vla_model import TINY_VLA
    stats = {"libero_10_no_noops": {"action": {"q01": [-1.0] * 7, "q99": [1.0] * 7}}}
    run = write_prismatic_run(tmp_path / "run", random_prismatic_state(TINY_VLA), "prism-qwen25-extra-dinosiglip-224px+0_5b",
                              "libero_vq_extra_action_tokenizer", stats).parents[1]
    vq = write_vq_folder(tmp_path / "vq" / VQ_TOKENIZERS["libero_vq_extra_action_tokenizer"][0], latent=32)
    with pytest.raises(ValueError, match="pass that folder as vq_dir"):
        _setup(LiberoRunConfig(policy="tiny-vla", policy_checkpoint=str(run), lora_rank=4))
    config = LiberoRunConfig(policy="tiny-vla", policy_checkpoint=str(run), vq_dir=str(vq), lora_rank=4)
    state = _setup(config)
    sampler = _sampler(state, config, ["put the bowl on the plate"] * 2, seed=0)
    run_lockstep([FakeLiberoEnv() for _ in range(2)], state["inits"][:2], sampler, max_steps=2)
    tokens = torch.stack([r[3] for r in sampler.rows])
    assert tokens.shape == (4, 7) and int(tokens.min()) >= TINY_VLA["text_vocab"] - 128
    tensors, extra = _update_batch(state, config, sampler.rows)
    assert extra["bins"] == 128 and extra["vocab_size"] == TINY_VLA["text_vocab"]
    with torch.no_grad():
        again = action_log_probs(state["model"], *tensors[:3], config.temperature, **extra)
        wrong = action_log_probs(state["model"], *tensors[:3], config.temperature, **{**extra, "bins": 256})
    old = torch.stack([r[4] for r in sampler.rows])
    assert torch.allclose(again, old, atol=1e-5) and not torch.allclose(wrong, old, atol=1e-3)
    with pytest.raises(ValueError, match="needs that run as policy_checkpoint"):
        LiberoRunConfig(policy="tiny-vla", vq_dir=str(vq))


def test_the_readmes_sft_command_runs_and_the_loop_starts_from_its_folder(tmp_path, capsys):
    """Item 8's SFT command on tiny files in LIBERO's layout (a tiny MiniVLA run, one demonstration file per libero_10
    task, Qwen2's tokenizer class): it trains, and the GRPO loop's policy from the SFT folder acts with the SFT's
    statistics (the public runs are LIBERO-90's: without this step Table 3's start cannot be made)."""
    pytest.importorskip("peft")
    pytest.importorskip("h5py")
    import re
    import shlex

    import numpy as np

    from wmrl.embodied.libero import suite_tasks
    from wmrl.embodied.libero_grpo import LiberoRunConfig, _setup
    from wmrl.embodied.prismatic import random_prismatic_state, write_prismatic_run, write_tiny_qwen_tokenizer
    from wmrl.embodied.sft import cli_sft_libero, write_demo_file
    from wmrl.embodied.vla_model import TINY_VLA
    text = (Path(__file__).resolve().parent.parent / "docs" / "gpu.md").read_text()
    start = text.index(".venv/bin/wmrl sft libero")
    command = re.sub(r"\\\n\s*", " ", text[start:text.index("\n", text.index("--demos-per-task", start))])
    names = [t.name for t in suite_tasks("libero_10")]
    rng = np.random.default_rng(0)
    for name in names:
        actions = np.column_stack([rng.uniform(-1, 1, (6, 6)), np.where(np.arange(6) < 3, -1.0, 1.0)])
        write_demo_file(tmp_path / f"{name}_demo.hdf5", name.lower(), [(rng.integers(0, 256, (6, 32, 32, 3)), actions)])
    run90 = write_prismatic_run(tmp_path / "run90", random_prismatic_state(TINY_VLA), "prism-qwen25-extra-dinosiglip-224px+0_5b",
                                "extra_action_tokenizer", {"libero_90": {"action": {"q01": [-1.0] * 7, "q99": [1.0] * 7}}})
    qwen = write_tiny_qwen_tokenizer(tmp_path / "qwen", TINY_VLA)
    command = (command.replace("$RUN90", str(run90.parents[1])).replace("$DEMOS/libero_10", str(tmp_path))
               .replace("$TASKS", " ".join(names)).replace("$QWEN", str(qwen))
               .replace("runs/minivla_sft", str(tmp_path / "sft")).replace("--device cuda", "--device cpu"))
    argv = shlex.split(command)[3:] + ["--policy", "tiny-vla", "--epochs", "1", "--lora-rank", "4", "--no-progress"]
    assert cli_sft_libero(argv) == 0, capsys.readouterr().err
    printed = json.loads(capsys.readouterr().out)
    assert printed["rows"] == len(names) * 6 and len(printed["losses"]) == 1
    with pytest.raises(ValueError, match="trained on minivla prompts"):  # the SFT saw Qwen's prompts: so must the loop
        _setup(LiberoRunConfig(policy="tiny-vla", policy_checkpoint=str(tmp_path / "sft"), lora_rank=4))
    state = _setup(LiberoRunConfig(policy="tiny-vla", policy_checkpoint=str(tmp_path / "sft"), tokenizer=str(qwen), lora_rank=4))
    saved = json.loads((tmp_path / "sft" / "dataset_statistics.json").read_text())["libero_10_no_noops"]["action"]
    assert list(state["unnorm"][0]) == saved["q01"] and list(state["unnorm"][1]) == saved["q99"]
    assert sum("lora_" in n for n, _ in state["model"].named_parameters()) > 0  # GRPO's own adapters on the merged policy


def test_a_checkpoint_resumes_only_its_own_run(tmp_path):
    "Another method or seed in the same folder would train on this run's corrector and adapters: refused, by name."
    from wmrl.embodied.libero_grpo import LiberoRunConfig, run_libero
    small = dict(steps=1, groups=1, rollouts=2, max_steps=2, eval_inits=[40])
    run_libero(LiberoRunConfig(**small), tmp_path, progress=False)
    with pytest.raises(ValueError, match="another run's.*'method': 'wmrl'"):
        run_libero(LiberoRunConfig(**small, method="grpo_real"), tmp_path, progress=False)
    assert run_libero(LiberoRunConfig(**{**small, "steps": 2}), tmp_path, progress=False)["log"][-1]["step"] == 1  # more steps resume


@pytest.mark.parametrize("mode", ["calib", "mix", "sparse"])
def test_each_anchor_reward_mode_runs_the_template_in_the_releases_regime(tmp_path, mode):
    """The papermill template with the models' real classes (tiny-vla with LoRA r 16 / alpha 32, tiny-robometer) on a
    rendered Meta-World scene, every group an anchor, for each anchor_reward: each step logs its mode and no anchor
    weight, 12 rows drawn a rollout at most, the gradient clipped, and both evaluations record their decoding."""
    pytest.importorskip("peft")
    pytest.importorskip("metaworld")
    out = tmp_path / mode
    done = subprocess.run([sys.executable, "-m", "wmrl.cli", "reproduce", "libero", "--out", str(out), "--steps", "2",
                           "--dry-run", "--groups", "1", "--rollouts", "2", "--max-steps", "14", "--eval-inits", "40",
                           "--policy", "tiny-vla", "--scenes", "reach-v3", "--progress-model", "tiny-robometer",
                           "--anchor-fraction", "1.0", "--anchor-reward", mode, "--no-progress"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    config = summary["config"]
    assert (config["anchor_reward"], config["lora_rank"], config["lora_alpha"], config["rows_per_rollout"],
            config["grad_clip"]) == (mode, 16, 32.0, 12, 1.0)  # the release's knobs are the defaults
    for row in summary["log"]:
        assert (row["anchor_reward"], row["anchor_weight"], row["anchor_groups"]) == (mode, 1.0, 1)
        assert row["rows"] <= 2 * 14 and row["rows_trained"] <= 2 * 12  # 12 of each rollout's (up to) 14 ticks at most
        assert row["rows_trained"] == 0 or row["grad_norm"] == row["grad_norm"]  # a trained step logs its norm
    assert (summary["eval"]["decoding"], summary["eval"]["temperature"], summary["eval"]["episodes_per_init"]) == ("sampled", 1.0, 2)
    assert (summary["eval_greedy"]["decoding"], summary["eval_greedy"]["temperature"],
            summary["eval_greedy"]["episodes_per_init"]) == ("greedy", 0.0, 1)
