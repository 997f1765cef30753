"""The layer rule: importing any wmrl module must not import torch, trl, vllm or docker.

Heavy frameworks live inside the functions of their adapters and backends, so a CPU user (and `wmrl --help`)
never pays for them. Each module is imported in a fresh interpreter, because an earlier test may already have
imported torch into this one.
"""
import json
import pkgutil
import subprocess
import sys

import pytest

import wmrl

HEAVY = ("torch", "trl", "vllm", "docker", "transformers")
MODULES = sorted(f"wmrl.{m.name}" for m in pkgutil.iter_modules(wmrl.__path__) if not m.name.startswith("_"))


def _heavy_imported_by(module: str) -> list[str]:
    code = f"import json, sys, {module}; print(json.dumps(sorted(set(m.split('.')[0] for m in sys.modules))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    return sorted(loaded & set(HEAVY))


def test_there_are_modules_to_check():
    assert "wmrl.settings" in MODULES and len(MODULES) >= 2


@pytest.mark.parametrize("module", ["wmrl", *MODULES])
def test_module_imports_no_heavy_framework(module):
    assert _heavy_imported_by(module) == [], f"{module} imports a heavy framework at import time"


def test_cli_help_is_light():
    code = ("import sys; from wmrl.cli import main; main(['--help']); "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
