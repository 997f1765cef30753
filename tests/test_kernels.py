"""The kernel check (wmrl.adapters.kernels, nbs/542_kernels.ipynb): on Hopper, a Gated-DeltaNet run whose Triton/fla
pair would raise at the first backward or fall back to torch is refused before any model loads (issue 45). The pairs
are the ones that ran or were named: torch 2.11 (the lent H200's image) and 2.12 with the Triton they pin, and 2.13."""
import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import wmrl.adapters.kernels as kernels
from wmrl.adapters.kernels import FIXED, TORCH_TRITON, KernelError, check_kernels, kernel_problem
from wmrl.adapters.plan import load_architecture
from wmrl.adapters.train import cli_train

REPO = Path(__file__).resolve().parent.parent
HOPPER, AMPERE = (9, 0), (8, 0)
FLA = "0.6.0"


def image(torch: str, **more) -> dict:
    "A box with this torch, the Triton its PyPI wheel pins, and fla 0.6.0."
    return {"torch": torch, "triton": TORCH_TRITON[torch[:4]], "flash-linear-attention": FLA, **more}


@pytest.mark.parametrize("torch, refused", [("2.11.0", True), ("2.12.0", True), ("2.13.0", False)])
def test_the_named_pairs_on_hopper(torch, refused):
    problem = kernel_problem(HOPPER, image(torch))
    assert (problem is not None) == refused
    if refused:  # one line naming the versions at fault and the install that fixes them
        assert "\n" not in problem and f"torch {torch} pins Triton {TORCH_TRITON[torch[:4]]}" in problem
        assert "raises in its backward" in problem
        assert problem.endswith("fix: pip install " + " ".join(f"{k}=={v}" for k, v in FIXED.items()))


@pytest.mark.parametrize("torch", ["2.11.0", "2.12.0", "2.13.0"])
def test_a_device_that_is_not_hopper_passes(torch):
    assert kernel_problem(AMPERE, image(torch)) is None
    assert kernel_problem(None, image(torch, **{"flash-linear-attention": None})) is None  # a CPU run


def test_a_missing_fla_is_the_silent_fallback():
    problem = kernel_problem(HOPPER, image("2.13.0", **{"flash-linear-attention": None}))
    assert "torch fallback" in problem and "flash-linear-attention==0.6.0" in problem


def test_the_fix_is_a_pair_that_passes_and_the_kits_own_pins():
    "The message's fix passes the check, its torch is constraints.txt's, and that torch pins the fix's Triton."
    assert kernel_problem(HOPPER, dict(FIXED)) is None
    assert f"torch=={FIXED['torch']}" in (REPO / "constraints.txt").read_text().split()
    assert TORCH_TRITON[FIXED["torch"][:4]] == FIXED["triton"]


def test_the_gpu_extra_installs_a_pair_that_passes():
    "pyproject's gpu extra: its floors for fla and Triton, with the constrained torch, pass on Hopper."
    text = (REPO / "pyproject.toml").read_text()
    extra = text.split("\ngpu = [", 1)[1].split("]", 1)[0]
    floors = dict(re.findall(r'"([a-z-]+)>=([\d.]+)', extra))
    box = {"torch": FIXED["torch"], "triton": floors["triton"], "flash-linear-attention": floors["flash-linear-attention"]}
    assert kernel_problem(HOPPER, box) is None, floors


def test_the_rehearsal_uses_the_lent_images_versions():
    "make gpu-rehearsal pins what the H200's image had (its report's `versions`), which is a pair the check refuses."
    report = json.loads((REPO / "reproductions/results/gpu_check/h200_qwen3.5-4b.json").read_text())
    makefile = (REPO / "Makefile").read_text()
    packages = makefile.split("IMAGE_PACKAGES :=", 1)[1].split("\ngpu-rehearsal:", 1)[0]
    pins = dict(re.findall(r"([a-z-]+)==([\d.]+)", packages))
    for name in ("torch", "transformers", "accelerate", "peft"):
        assert pins[name] == report["versions"][name].split("+")[0], name
    assert "raises in its backward" in kernel_problem(HOPPER, image(pins["torch"]))


@pytest.fixture
def lent_hopper(monkeypatch):
    "This process seen as the lent H200 with its torch 2.11.0 / Triton 3.6.0, and fla 0.6.0 added."
    monkeypatch.setattr(kernels, "device_capability", lambda: HOPPER)
    monkeypatch.setattr(kernels, "installed_versions", lambda: image("2.11.0"))
    monkeypatch.delenv(kernels.SKIP, raising=False)


def test_wmrl_train_refuses_before_anything_is_built(lent_hopper, tmp_path):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli_train(["qwen3.5-4b", f"output_dir={tmp_path / 'run'}"])
    assert code == 2 and "KernelError: refusing a Gated-DeltaNet run" in json.loads(err.getvalue())["error"]
    assert not (tmp_path / "run").exists()  # no run folder, tasks or model


def test_cpu_runs_and_models_without_the_layers_pass(lent_hopper):
    check_kernels(load_architecture("tiny-qwen3"))  # a plain transformer
    check_kernels(load_architecture("qwen3.5-4b"), use_cpu=True)
    check_kernels(load_architecture("qwen3.5-4b"), environ={kernels.SKIP: "off"})  # the device check's own switch
    with pytest.raises(KernelError):
        check_kernels(load_architecture("qwen3.5-4b"))


def test_the_check_and_the_time_plan_load_no_torch():
    code = ("import sys, wmrl.adapters.kernels, wmrl.adapters.plan_time; "
            "print([m for m in ('torch', 'trl', 'vllm', 'transformers') if m in sys.modules])")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
