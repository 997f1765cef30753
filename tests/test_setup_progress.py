"""`make setup` prints an estimate before it installs anything and a progress line while pip runs
(requirements/pip_progress.py reads pip's output; these tests feed it pip's own lines)."""
import importlib.util
import io
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("pip_progress", ROOT / "requirements" / "pip_progress.py")
pip_progress = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pip_progress)


def test_the_makefile_prints_the_estimate_before_it_installs():
    recipe = (ROOT / "Makefile").read_text().split("$(VENV)/.installed:", 1)[1].split("\n\n", 1)[0]
    lines = [line.strip() for line in recipe.splitlines()[1:]]
    assert lines[0].startswith("@python3 requirements/pip_progress.py --estimate"), "the estimate comes first"
    assert "requirements/pip_progress.py --lock" in recipe and "pip install -q -c" not in recipe


def test_estimate_names_the_measured_figure(tmp_path):
    fresh = subprocess.run([sys.executable, "requirements/pip_progress.py", "--estimate", "requirements/cpu.lock",
                            str(tmp_path / "venv")], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert fresh.count("\n") == 1 and "creating" in fresh and pip_progress.MEASURED_FRESH[1] in fresh
    assert f": {pip_progress.locked_packages(ROOT / 'requirements' / 'cpu.lock')} locked packages" in fresh
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").touch()
    update = pip_progress.estimate(ROOT / "requirements" / "cpu.lock", tmp_path / "venv")
    assert "updating" in update and pip_progress.MEASURED_UPDATE[1] in update


def test_progress_reads_pip_lines(tmp_path):
    progress = pip_progress.Progress(expected=4, site_packages=tmp_path)
    lines = ["Obtaining file:///repo", "Collecting numpy==2.3.1 (from wmrl==0.1)", "Requirement already satisfied: pip",
             "  Processing /opt/wheels/numpy-2.3.1.whl", "Collecting torch==2.13.0"]
    assert [progress.read(line) for line in lines] == [None] * len(lines)
    assert progress.status().startswith("setup: 3 of ~4 packages collected, last torch (")
    started = progress.read("Installing collected packages: numpy, torch")
    assert started.startswith("setup: installing 2 packages (collected in ")
    assert progress.status().startswith("setup: installing 2 packages (")
    (tmp_path / "numpy-2.3.1.dist-info").mkdir()
    assert progress.status().startswith("setup: 1 of 2 packages installed (")
    progress.read("Successfully installed numpy-2.3.1 torch-2.13.0")
    assert progress.installed == 2


def test_each_kind_of_warning_once(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    hidden = [0]
    pip_progress.warnings_once(io.StringIO(
        "WARNING: Location 'file:///a/' is ignored: it is neither a file nor a directory.\n"
        "WARNING: Location 'file:///b/' is ignored: it is neither a file nor a directory.\n"
        "ERROR: No matching distribution found for x\n"), hidden)
    assert err.getvalue().count("WARNING") == 1 and "ERROR: No matching distribution" in err.getvalue() and hidden == [1]
