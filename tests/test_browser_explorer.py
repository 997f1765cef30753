"""The bandit explorer as a person uses it: JupyterLab in Debian chromium, Run All, move a slider, see a new figure.

Playwright drives /usr/bin/chromium through `executable_path` (never a downloaded browser). JupyterLab runs on
127.0.0.1 with a free port in a temporary root holding a copy of nbs/070_bandit_explorer.ipynb, and is stopped by
its PID. Skips (loudly) only when /usr/bin/chromium is missing: `apt-get install -y --no-install-recommends chromium`.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
NOTEBOOK = Path(__file__).resolve().parent.parent / "nbs" / "070_bandit_explorer.ipynb"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                 reason="BROWSER TEST SKIPPED: /usr/bin/chromium is missing "
                                        "(apt-get install -y --no-install-recommends chromium)")]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for_server(url: str, process: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited early with code {process.returncode}")
        try:
            with urllib.request.urlopen(url + "api/status", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"jupyter lab did not answer at {url} within {timeout} s")


@pytest.fixture
def lab():
    root = Path(tempfile.mkdtemp(prefix="wmrl-lab-"))
    notebook = json.loads(NOTEBOOK.read_text())
    notebook["metadata"]["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    (root / "explorer.ipynb").write_text(json.dumps(notebook))  # a cleaned notebook names no kernel: pick the venv's
    settings_dir = root / "settings"
    (settings_dir / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings_dir / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}')  # no news toast over the output
    port = _free_port()
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings_dir), JUPYTER_RUNTIME_DIR=str(root / "runtime"),
               MPLBACKEND="module://matplotlib_inline.backend_inline")
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               "--allow-root", "--ServerApp.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root}",
               "--ServerApp.disable_check_xsrf=True"]
    log = open(root / "lab.log", "w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_for_server(url, process)
        yield url, root
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)  # the server's own session: it and its kernels, nothing else
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def _figure_src(page) -> str:
    "The data URL of the figure inside the widget's output area (empty if none yet)."
    images = page.locator(".jupyter-widgets-output-area img, .widget-output img")
    return images.last.get_attribute("src") if images.count() else ""


def test_slider_redraws_the_figure(lab):
    playwright_api = pytest.importorskip("playwright.sync_api")
    url, root = lab
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=FLAGS)  # Playwright gives it a fresh profile
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
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
            shots = Path(os.environ.get("WMRL_BROWSER_SHOTS", root))  # set it to keep the screenshot
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / "explorer_after_slider.png"), full_page=True)
            assert after.startswith("data:image/png") and after != before, "moving the bias slider did not redraw the figure"
            readout = page.locator(".widget-slider .widget-readout").first.inner_text().strip()
            assert float(readout) < float(readout_before), f"the slider did not move ({readout_before} -> {readout})"
        finally:
            browser.close()
