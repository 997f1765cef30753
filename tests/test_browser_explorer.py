"""The bandit explorer as a person uses it: JupyterLab in Debian chromium, Run All, move a slider, see a new figure.

Playwright drives /usr/bin/chromium through `executable_path` (never a downloaded browser). JupyterLab runs on
127.0.0.1 with a free port in a temporary root holding a copy of nbs/020_bandit_explorer.ipynb, and is stopped by
its PID. Skips (loudly) only when /usr/bin/chromium is missing: `apt-get install -y --no-install-recommends chromium`.
"""
import json
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from browser_support import NEEDS_CHROMIUM, chromium_page, jupyter_lab, shots_dir

NOTEBOOK = Path(__file__).resolve().parent.parent / "nbs" / "020_bandit_explorer.ipynb"

pytestmark = NEEDS_CHROMIUM


@pytest.fixture
def lab():
    root = Path(tempfile.mkdtemp(prefix="wmrl-lab-"))
    notebook = json.loads(NOTEBOOK.read_text())
    (root / "explorer.ipynb").write_text(json.dumps(notebook))
    try:
        with jupyter_lab(root) as url:
            yield url, root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _figure_src(page) -> str:
    "The data URL of the figure inside the widget's output area (empty if none yet)."
    images = page.locator(".jupyter-widgets-output-area img, .widget-output img")
    return images.last.get_attribute("src") if images.count() else ""


def test_slider_redraws_the_figure(lab):
    url, root = lab
    with chromium_page() as page:
        page.goto(url + "lab/tree/explorer.ipynb")
        page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-Cell').length > 10", timeout=90_000)
        page.wait_for_function("document.body.innerText.includes('| Idle')", timeout=90_000)  # kernel started
        page.click(".lm-MenuBar-itemLabel:text-is('Run')", timeout=30_000)
        page.click(".lm-Menu-itemLabel:text-is('Run All Cells')", timeout=30_000)
        page.wait_for_selector(".widget-slider", timeout=180_000)
        deadline = time.time() + 180
        while not _figure_src(page) and time.time() < deadline:
            time.sleep(1)
        before = _figure_src(page)
        assert before.startswith("data:image/png"), "the explorer never drew its figure"
        page.wait_for_function("document.body.innerText.includes('| Idle')", timeout=180_000)  # Run All finished
        before = _figure_src(page)
        readout_before = page.locator(".widget-slider .widget-readout").first.inner_text().strip()
        handle = page.locator(".widget-slider .noUi-handle").first
        handle.click()
        for _ in range(5):
            page.keyboard.press("ArrowLeft")  # lower the bias B by 0.05: a visibly lower pure-WM floor
        deadline = time.time() + 120
        after = before
        while after == before and time.time() < deadline:
            time.sleep(1)
            after = _figure_src(page)
        shots = shots_dir(root)  # set WMRL_BROWSER_SHOTS to keep the screenshot
        page.screenshot(path=str(shots / "explorer_after_slider.png"), full_page=True)
        assert after.startswith("data:image/png") and after != before, "moving the bias slider did not redraw the figure"
        readout = page.locator(".widget-slider .widget-readout").first.inner_text().strip()
        assert float(readout) < float(readout_before), f"the slider did not move ({readout_before} -> {readout})"
