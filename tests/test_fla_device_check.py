"""The next device check, prepared (issue 45): reproductions/fla_device_check.sh runs gpu_check.py with
`--fla-unguarded`, which switches fla's Hopper guard off in the run's private copy of the real fla 0.6.0 wheel, puts
fla on the trainer's and world model's path only where CUDA is, and fits one call of the device tool."""
import os
import py_compile
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from test_trl_gpu_check import load_script  # gpu_check.py loaded fresh, as that file tests it

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "reproductions" / "gpu_check.py"
DEVICE_SCRIPT = REPO / "reproductions" / "fla_device_check.sh"
FLA_WHEELS = ("fla-core==0.6.0", "flash-linear-attention==0.6.0")  # as `make gpu-wheels` stages them


@pytest.fixture(scope="module")
def fla_wheels(tmp_path_factory) -> Path:
    """The real fla wheels from PyPI (pure Python, 1 MB), as `make gpu-wheels` downloads them; kept in pip's cache. No
    stand-in: the guard must be found in fla's own file, so a machine that cannot reach PyPI fails here, loudly."""
    given = os.environ.get("WMRL_FLA_WHEELS")  # a folder already holding them (gpu-wheels/), else a fresh download
    folder = Path(given) if given else tmp_path_factory.mktemp("fla-wheels")
    if not list(folder.glob("fla_core-0.6.0-*.whl")):
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(folder),
                               *FLA_WHEELS], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"pip could not download the fla wheels from PyPI: {done.stderr[-1000:]}"
    return folder


def unpacked(wheels: Path, site: Path) -> Path:
    for wheel in wheels.glob("*.whl"):
        zipfile.ZipFile(wheel).extractall(site)
    return site


def test_the_guard_is_switched_off_in_the_private_copy_only(fla_wheels, tmp_path):
    module = load_script()
    site = unpacked(fla_wheels, tmp_path / "site-fla")
    path = site / module.FLA_GUARD_FILE
    before = path.read_text().splitlines()
    record = module.unguard_fla(site)
    after = path.read_text().splitlines()
    assert record["already"] is False and record["was"].endswith("not TRITON_ABOVE_3_7_1")
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    assert len(before) == len(after) and changed == [record["line"] - 1]  # one line, the guard's `if`
    assert after[changed[0]].strip().startswith("if False:") and "raise RuntimeError(" in after[changed[0] + 1]
    py_compile.compile(str(path), doraise=True)
    assert module.unguard_fla(site) == {"file": str(module.FLA_GUARD_FILE), "already": True}


def test_a_guard_written_otherwise_is_refused(fla_wheels, tmp_path):
    "Another fla release (or an edited file) is not what the measurement was prepared for: no silent half-patch."
    module = load_script()
    site = unpacked(fla_wheels, tmp_path / "site-fla")
    path = site / module.FLA_GUARD_FILE
    path.write_text(path.read_text().replace("not TRITON_ABOVE_3_7_1", "not TRITON_ABOVE_3_8_0"))
    with pytest.raises(RuntimeError, match="not in .* as fla 0.6.0 writes it"):
        module.unguard_fla(site)
    with pytest.raises(RuntimeError, match="missing"):
        module.unguard_fla(tmp_path / "nothing")


@pytest.mark.parametrize("cuda", [False, True])
def test_fla_joins_the_trainer_path_only_where_cuda_is(fla_wheels, tmp_path, monkeypatch, cuda):
    "On CPU fla's Triton kernels cannot run, so the trainer keeps the torch fallback; on a GPU it gets fla."
    module = load_script()
    monkeypatch.setattr(module, "_cuda", lambda: cuda)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "")
    args = module.parse_args(["--wheels", str(fla_wheels), "--fla-unguarded", "--out", str(tmp_path / "check.json"),
                              "--phase", "trainer"])
    module.prepare_environment(args)
    site_fla = str(tmp_path / "check" / "site-fla")
    assert (site_fla in sys.path) is cuda and (tmp_path / "check" / "fla_guard.json").is_file()
    assert "if False:" in (tmp_path / "check" / "site-fla" / module.FLA_GUARD_FILE).read_text()


def test_unguarded_needs_the_wheels():
    done = subprocess.run([sys.executable, str(SCRIPT), "--fla-unguarded", "--dry-run"], capture_output=True, text=True)
    assert done.returncode == 2 and "--fla-unguarded: needs --wheels" in done.stderr


def test_the_activation_term_is_the_peak_less_the_other_terms():
    module = load_script()
    terms = {"weights": 15.0, "grads": 15.0, "optimizer": 11.0, "activations": 12.0, "logits": 3.0, "autocast": 8.0}
    term = module.activation_term({"plan_terms_gib": terms, "torch_peak_allocated_gib": 60.0, "fla_imported": True})
    assert term == {"kernels": "fla", "plan_gib": 12.0, "implied_gib": 8.0}
    assert module.activation_term({"plan_terms_gib": terms, "torch_peak_allocated_gib": 60.0})["kernels"] == "torch fallback"


def test_the_device_script_fits_one_call_of_the_device_tool():
    "Its phases' limits times its --scale stay under 600 s (the device tool's one command), as its header says."
    module = load_script()
    text = DEVICE_SCRIPT.read_text()
    phases = re.search(r"--phases (\S+)", text).group(1).split(",")
    scale = float(re.search(r"--scale (\S+)", text).group(1))
    total = sum(module.LIMITS_S[p] for p in phases) * scale
    assert set(phases) == {"versions", "build", "fla", "trainer", "world_model"} and "--fla-unguarded" in text
    assert total <= 570 and f"= {total:.0f} s" in text
    assert subprocess.run(["bash", "-n", str(DEVICE_SCRIPT)]).returncode == 0


@pytest.mark.slow
def test_the_cpu_rehearsal_of_the_device_script(fla_wheels, tmp_path):
    "The script as the device runs it, on CPU with the 4B's miniature: what CPU allows (fla skipped by nature)."
    env = {**os.environ, "OUT": str(tmp_path), "WHEELS": str(fla_wheels), "PYTHON": sys.executable,
           "FLA_CHECK_ARGS": "--arch tiny-qwen3.5 --config qwen3.5-4b --shape-tokens 512 --completion-tokens 16"}
    done = subprocess.run(["bash", str(DEVICE_SCRIPT)], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:]
    import json
    report = json.loads((tmp_path / "fla_unguarded.json").read_text())
    assert report["fla_guard"]["line"] > 0 and "no CUDA" in report["skipped"]["fla"]
    assert report["phases"]["trainer"]["ok"] and report["phases"]["trainer"]["fla_imported"] is False
