"""The widget chapter (nbs/020_bandit_explorer) executes headless, as a reader runs it: `jupyter nbconvert --execute`
with a cell timeout, several times in a row, each run checked for a stall.

Why a stall and not a failure: the chapter once hung under `nbconvert --execute` with the kernel idle. Its panel
captured the figure's display message into an `Output` widget (`ipywidgets.interactive_output`), which makes nbclient
act as the widget's front end and write the outputs back to the kernel in the middle of a cell, on the shell socket
where it is waiting for the cell's reply; that raw write can consume the socket's wake-up, and the reply then sits
unread until the cell timeout (with nbconvert's default of no timeout: forever). With a timeout set the run still
ends well, only late, so each run is checked for the wait itself: the kernel's own timestamps (recorded in the
executed notebook) show when it sent a cell's reply and when the next cell reached it. The chapter now sets the
figure as the widget's state from the kernel, so the client never writes; the debug log is checked for the routing
message that starts a captured display (`msg_id` set on an Output widget), which makes the check deterministic.
"""
import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "nbs" / "020_bandit_explorer.ipynb"
RUNS = int(os.environ.get("WMRL_WIDGET_RUNS", "3"))  # one run is about 30 s on 2 loaded cores
CELL_TIMEOUT = 120  # seconds; a missed reply surfaces as a wait of exactly this long
STALL = CELL_TIMEOUT / 2  # no healthy wait comes near it: between cells it is well under a second, even loaded


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _widget_figures(notebook: dict) -> list[str]:
    "The PNG outputs held by Output widgets in the executed notebook's saved widget state."
    state = notebook["metadata"].get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    return [output["data"]["image/png"] for model in state.values() if model.get("model_name") == "OutputModel"
            for output in model["state"].get("outputs", []) if "image/png" in output.get("data", {})]


def _execute(out: Path) -> tuple[dict, str, float]:
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}  # the inline backend, as a reader's run has it
    start = time.time()
    done = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", str(NOTEBOOK),
                           "--output-dir", str(out), f"--ExecutePreprocessor.timeout={CELL_TIMEOUT}", "--debug"],
                          cwd=NOTEBOOK.parent, env=env, capture_output=True, text=True, timeout=CELL_TIMEOUT * 5)
    wall = time.time() - start
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / NOTEBOOK.name).read_text()), done.stderr, wall


@pytest.mark.parametrize("run", range(RUNS))
def test_widget_chapter_executes_headless_without_a_stall(tmp_path, run):
    notebook, log, wall = _execute(tmp_path)
    cells = [c for c in notebook["cells"] if c["cell_type"] == "code" and c["metadata"].get("execution")]
    assert len(cells) == sum(c["cell_type"] == "code" for c in notebook["cells"]), "every code cell ran"
    timing = [c["metadata"]["execution"] for c in cells]
    waits = [_seconds(b["iopub.execute_input"]) - _seconds(a["shell.execute_reply"]) for a, b in zip(timing, timing[1:])]
    assert max(waits) < STALL, f"the client sat {max(waits):.0f} s on a reply the kernel had sent (cell timeout {CELL_TIMEOUT} s)"
    kernel_span = _seconds(timing[-1]["shell.execute_reply"]) - _seconds(timing[0]["iopub.execute_input"])
    assert wall - kernel_span < STALL, f"{wall - kernel_span:.0f} s outside the cells: a missed reply on the last cell?"
    assert "Timeout waiting for IOPub output" not in log
    captured = re.findall(r"'state': \{'msg_id': '[0-9a-f]", log)
    assert not captured, "an Output widget captured a display: nbclient writes outputs back to the kernel mid-cell"
    assert _widget_figures(notebook), "the panel's figure reached its Output widget"
