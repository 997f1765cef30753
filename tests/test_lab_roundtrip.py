"""Opening and saving a chapter in a real JupyterLab (driven through Debian chromium) changes no byte of it, with the
server run as `make lab` runs it; without the kit's pre-save hook the same save does change it (the check can fail)."""
import json
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from browser_support import chromium_page, copy_tree_notebook, jupyter_lab, needs_chromium

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ("010_bandit.ipynb", "130_debias.ipynb", "147_ppi.ipynb")
pytestmark = pytest.mark.browser


def lab_flags() -> tuple:
    "The options `make lab` gives JupyterLab (LAB_FLAGS in the Makefile): the test runs what the user runs."
    return tuple(re.search(r"^LAB_FLAGS = (.*)$", (ROOT / "Makefile").read_text(), flags=re.M).group(1).split())


def settled(path: Path, timeout_s: float = 30.0) -> bytes:
    """The file once the save has finished: a chapter that stores its figures is written over a moment (the server
    truncates, then writes), so the bytes are read when they parse as a notebook and stay the same for 0.5 s."""
    deadline, last = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        data = path.read_bytes()
        try:
            json.loads(data)
        except ValueError:
            data = None
        if data is not None and data == last:
            return data
        last = data
        time.sleep(0.5)
    return path.read_bytes()


def open_and_save(names, extra) -> dict:
    "Each chapter opened in JupyterLab, its kernel idle, saved with Ctrl+S: {name: (bytes before, bytes after)}."
    root = Path(tempfile.mkdtemp(prefix="wmrl-roundtrip-"))
    try:
        shutil.copyfile(ROOT / "pyproject.toml", root / "pyproject.toml")  # nbdev's settings, as in the checkout
        (root / "nbs").mkdir()
        copies = {name: copy_tree_notebook(ROOT / "nbs" / name, root / "nbs") for name in names}
        out = {}
        with jupyter_lab(root, extra) as url, chromium_page() as page:
            for i, (name, path) in enumerate(copies.items()):
                before, stamp = path.read_bytes(), path.stat().st_mtime_ns
                # a workspace of its own: only this chapter is open, so the status bar's kernel state is its kernel's
                page.goto(url + f"lab/workspaces/roundtrip{i}/tree/nbs/{name}")
                page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-Cell').length > 3", timeout=300_000)
                page.wait_for_function("document.body.innerText.includes('| Idle')", timeout=300_000)
                deadline = time.monotonic() + 90
                while path.stat().st_mtime_ns == stamp and time.monotonic() < deadline:
                    page.locator(".jp-Notebook .jp-Cell").first.click()  # the notebook has the keyboard
                    page.keyboard.press("Control+s")
                    pressed = time.monotonic()
                    while path.stat().st_mtime_ns == stamp and time.monotonic() < min(pressed + 15, deadline):
                        time.sleep(0.2)
                assert path.stat().st_mtime_ns != stamp, f"{name} was not saved within 90 s"
                out[name] = (before, settled(path))
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


@needs_chromium
def test_saving_from_jupyterlab_changes_nothing():
    for name, (before, after) in open_and_save(CHAPTERS, lab_flags()).items():
        assert after == before, f"saving {name} from JupyterLab changed it"


@needs_chromium
def test_without_the_hook_a_save_changes_the_file():
    "The negative control: JupyterLab's own save writes its kernelspec and language_info, which the check sees."
    (before, after), = open_and_save(CHAPTERS[:1], ()).values()
    assert after != before and b"language_info" in after
