"""Robometer's environment (`make setup-robometer`, issue 28): its pinned stack imports, and Robometer's own server-side
parsing reads the kit's requests as sent and its client helpers read the kit's stand-in answers
(reproductions/robometer_check.py, run with Robometer's interpreter). CI does not build that environment (Python 3.10,
about 12 GB with CUDA's torch, and Robometer's source is on GitHub), so the check skips there with that reason; it runs
wherever `make setup-robometer` has run, and with ROBOMETER_CHECK=--gpu on the GPU box. The lock's shape is checked
everywhere."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv" / "robometer" / "bin" / "python"


def test_the_lock_pins_every_package_and_robometers_own_torch():
    lines = [line for line in (ROOT / "requirements" / "robometer.lock").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    loose = [line for line in lines if not re.fullmatch(r"[A-Za-z0-9_.\-]+(\[[^\]]+\])?==[^\s=]+", line)]
    assert not loose, f"unpinned lines: {loose[:3]}"
    pins = dict(line.split("==") for line in lines)
    assert pins["torch"] == "2.8.0" and pins["xformers"] == "0.0.32.post2" and pins["trl"] == "0.20.0"  # robometer's pins
    assert "robometer" not in pins  # its source is installed with --no-deps from the pinned commit


@pytest.mark.skipif(not PYTHON.exists(), reason="Robometer's environment is not built here: `make setup-robometer`")
def test_robometers_environment_reads_the_kits_requests_and_answers():
    extra = os.environ.get("ROBOMETER_CHECK", "").split()  # --gpu on the GPU box: the eval server imports unsloth
    done = subprocess.run([str(PYTHON), "-W", "ignore", "reproductions/robometer_check.py", *extra], cwd=ROOT, text=True,
                          capture_output=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    report = json.loads(done.stdout)
    assert report["python"].startswith("3.10") and report["imports"]["torch"].startswith("2.8.0")
    assert report["request"]["use_frame_steps=True"]["samples"] == 3 and report["answer"]["clips"] == 4
