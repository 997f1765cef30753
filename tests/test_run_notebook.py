"""A neighbour that takes a kernel's ports between jupyter_client choosing them and the kernel binding them.

jupyter_client writes a kernel's five TCP ports into its connection file before the kernel starts; a process that
binds one of them first makes the kernel die before its first reply (`Kernel died before replying to kernel_info`,
which failed a CI run of `wmrl reproduce embodied`). The thief here reads every new connection file and binds its
ports at once: a known answer for plain papermill (the kernel dies), and none for `run_notebook`, whose kernel
listens on Unix sockets in a folder of its own.
"""
import json
import multiprocessing
import socket
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
import pytest

from wmrl.core.settings import run_notebook


def _notebook(folder: Path) -> Path:
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell("import os\nanswer = 6 * 7\nprint(answer, os.getpid())")]
    path = folder / "probe.ipynb"
    nbformat.write(nb, path)
    return path


class PortThief(threading.Thread):
    "Binds the TCP ports of every connection file that appears in `runtime` (what a busy neighbour does by chance)."

    def __init__(self, runtime: Path):
        super().__init__(daemon=True)
        self.runtime, self.stop, self.held, self.files = runtime, threading.Event(), [], set()

    def run(self):
        while not self.stop.is_set():
            for path in self.runtime.glob("*.json"):
                if path in self.files:
                    continue
                try:
                    info = json.loads(path.read_text())
                except (OSError, ValueError):
                    continue  # half written: read it again next turn
                self.files.add(path)
                if info.get("transport") != "tcp":
                    continue
                for key in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"):
                    s = socket.socket()
                    try:
                        s.bind((info["ip"], info[key])); s.listen(1); self.held.append(s)
                    except OSError:
                        s.close()
            time.sleep(0.001)

    def __exit__(self, *exc):
        self.stop.set(); self.join()
        for s in self.held:
            s.close()

    def __enter__(self):
        self.start()
        return self


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    "A temporary folder of the test's own, where jupyter_client writes connection files (tempfile.mkstemp)."
    folder = tmp_path / "runtime"; folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))  # spawned processes
    monkeypatch.setattr(tempfile, "tempdir", str(folder))  # this one (tempfile caches the folder)
    return folder


def test_plain_papermill_loses_its_kernel_to_the_thief(tmp_path, runtime):
    "The positive control: with TCP ports the thief wins and the kernel dies before it runs a cell."
    import papermill
    probe = _notebook(tmp_path)
    with PortThief(runtime) as thief:
        with pytest.raises(RuntimeError, match="Kernel died|didn't respond"):
            papermill.execute_notebook(str(probe), str(tmp_path / "out.ipynb"), progress_bar=False, start_timeout=30)
    assert thief.held, "the thief bound no port: the control did not run"


def test_run_notebook_keeps_its_kernel_beside_the_thief(tmp_path, runtime):
    probe = _notebook(tmp_path)
    with PortThief(runtime) as thief:
        done = run_notebook(probe, tmp_path / "out.ipynb", cwd=tmp_path, progress_bar=False)
    assert thief.files and not thief.held  # it saw the connection file and found no port to take
    assert done.cells[-1].outputs[0]["text"].split()[0] == "42"
    assert not list(runtime.iterdir()), "a connection file or socket folder outlived the kernel"


def _run(args):
    probe, out, cwd = args
    done = run_notebook(probe, out, cwd=cwd, progress_bar=False)
    return done.cells[-1].outputs[0]["text"].split()


def test_parallel_kernels_in_one_folder(tmp_path, runtime):
    "Six kernels from three processes in one working folder (jupyter's own IPC default would share socket names)."
    probe = _notebook(tmp_path)
    jobs = [(probe, tmp_path / f"out{i}.ipynb", tmp_path) for i in range(6)]
    with PortThief(runtime), ProcessPoolExecutor(3, mp_context=multiprocessing.get_context("spawn")) as pool:
        answers = list(pool.map(_run, jobs))
    assert [a[0] for a in answers] == ["42"] * 6
    assert len({a[1] for a in answers}) == 6  # six kernels, none answered for another
