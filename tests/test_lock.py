"""A fresh clone gets the versions the committed results were made with: `make setup` installs the CPU stack through
requirements/cpu.lock (pip-compile output; `make lock` refreshes it), and what a run folder records must be what the
lock says."""
import importlib.metadata
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "cpu.lock"
SETUP_EXTRAS = ("dev", "train", "suite", "scale", "embodied")  # the extras `make setup` installs


def _pins() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)", line)
        if match:
            pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return pins


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement).group(0)).lower()


def test_lock_covers_every_dependency_make_setup_installs():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r) for r in project["dependencies"]}
    for extra in SETUP_EXTRAS:
        wanted |= {_name(r) for r in project["optional-dependencies"][extra]}
    missing = sorted(wanted - set(_pins()) - {"torch"})  # torch: pinned by constraints.txt, not by the lock
    assert not missing, f"requirements/cpu.lock lacks {missing}: run `make lock` and commit it"
    assert "torch" not in _pins(), "torch belongs to constraints.txt (the CPU wheel), not to the lock"


def test_installed_versions_are_the_locked_ones():
    "What `make setup` installed (and what run folders record, wmrl.autoresearch.runner.provenance) is what the lock pins."
    from wmrl.autoresearch.runner import PROVENANCE_PACKAGES, provenance
    pins = _pins()
    differ = {}
    for name, version in pins.items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            differ[name] = (version, None)
            continue
        if installed != version:
            differ[name] = (version, installed)
    assert not differ, f"installed packages differ from requirements/cpu.lock (locked, installed): {differ}; run make setup"
    recorded = provenance()["versions"]
    for name in PROVENANCE_PACKAGES:
        if name != "wmrl":
            assert recorded[name] == pins[_name(name)], f"a run folder would record {name} {recorded[name]}"
