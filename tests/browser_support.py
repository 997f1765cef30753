"""What the browser tests share: Debian chromium through Playwright, a JupyterLab server on a free local port, and
a static file server for the built docs. Never a downloaded browser; every server stops with its test."""
from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
NEEDS_CHROMIUM = [pytest.mark.browser,
                  pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                     reason="BROWSER TEST SKIPPED: /usr/bin/chromium is missing "
                                            "(apt-get install -y --no-install-recommends chromium)")]


def needs_chromium(test):
    "Both marks of NEEDS_CHROMIUM on one test (for modules that also hold tests without a browser)."
    for mark in reversed(NEEDS_CHROMIUM):
        test = mark(test)
    return test


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_lab(url: str, process: subprocess.Popen, timeout: float = 300.0) -> None:
    "Up to 5 min: a JupyterLab server on a loaded 2-core machine can take minutes to import and answer."
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


@contextlib.contextmanager
def jupyter_lab(root: Path, extra: tuple = ()):
    """JupyterLab serving `root` on 127.0.0.1 (no token, no news toast), its working folder `root`, with `extra`
    command-line options; yields its URL; stops it by its PID."""
    settings_dir = root / "settings"
    (settings_dir / "@jupyterlab" / "apputils-extension").mkdir(parents=True, exist_ok=True)
    (settings_dir / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}')
    port = free_port()
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings_dir), JUPYTER_RUNTIME_DIR=str(root / "runtime"),
               MPLBACKEND="module://matplotlib_inline.backend_inline")
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               "--allow-root", "--ServerApp.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root}",
               "--ServerApp.disable_check_xsrf=True", *extra]
    log = open(root / "lab.log", "w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=root)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_for_lab(url, process)
        yield url
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)  # the server's own session: it and its kernels, nothing else
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        log.close()


@contextlib.contextmanager
def static_server(folder: Path):
    "A plain HTTP server for `folder` on 127.0.0.1, in a thread; yields its URL."
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def chromium_page(width: int = 1400, height: int = 1000):
    "A fresh headless Debian chromium page (Playwright gives it a fresh profile)."
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def shots_dir(default: Path) -> Path:
    "Where screenshots go: $WMRL_BROWSER_SHOTS when set (to keep them), else the test's own folder."
    shots = Path(os.environ.get("WMRL_BROWSER_SHOTS", default))
    shots.mkdir(parents=True, exist_ok=True)
    return shots


def copy_tree_notebook(source: Path, root: Path) -> Path:
    "A byte-for-byte copy of a notebook, so the test sees exactly what the repository ships."
    target = root / source.name
    shutil.copyfile(source, target)
    return target
