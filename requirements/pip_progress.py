"""`make setup`'s install, with an estimate first and progress while it runs (standard library only).

    python3 requirements/pip_progress.py --estimate requirements/cpu.lock .venv   # one line: what and how long
    python requirements/pip_progress.py -- python -m pip install ...              # pip, one progress line a while

pip runs without -q and with its progress bars off; its output is read here and shown as a line every
`--every` seconds (packages collected so far, then packages installed so far, counted in site-packages), a line when
it starts installing, and one at the end. pip's errors pass through as they come, and each kind of warning once (a
machine whose pip configuration names a missing index gets one warning per package otherwise); if pip fails, its last
lines of output are printed.
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

# `make setup` on this project's machine (2 cores shared with other work), as its closing line printed: from fresh
# clones (a new venv, 209 packages from a local wheel mirror) 4 min 31 s and 2 min 52 s at load 4-5, and
# 13 s after `touch pyproject.toml` with .venv there. Downloading the wheels from PyPI adds what the network takes.
MEASURED_FRESH = ("3 to 5 min", "measured from fresh clones on 2 shared cores at load 4-5: 4 min 31 s and 2 min 52 s; "
                  "more on a busier machine or with downloads")
MEASURED_UPDATE = ("under a minute", "measured: 13 s when .venv is already there")


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60)} s" if seconds >= 60 else f"{seconds:.0f} s"


def _packages(n: int) -> str:
    return f"{n} package{'' if n == 1 else 's'}"


def locked_packages(lock: Path) -> int:
    return sum(1 for line in lock.read_text().splitlines() if re.match(r"^[A-Za-z0-9._-]+==", line))


def estimate(lock: Path, venv: Path) -> str:
    packages = locked_packages(lock)
    fresh = not (venv / "bin" / "python").exists()
    duration, source = MEASURED_FRESH if fresh else MEASURED_UPDATE
    what = "creating" if fresh else "updating"
    return (f"setup: {what} {venv}: {packages} locked packages ({lock}) and the kit; estimate {duration} ({source});"
            " a progress line every 30 s")


class Progress:
    "What pip has said so far, read from its output lines, and what it has put in site-packages."

    def __init__(self, expected: int, site_packages: Path | None = None):
        self.expected, self.collected, self.satisfied, self.installing = expected, 0, 0, 0
        self.installed, self.last, self.start = 0, "", time.time()
        self.tail: collections.deque[str] = collections.deque(maxlen=30)
        self.site_packages = site_packages
        self.present = self.distributions()

    def distributions(self) -> int:
        "Packages installed in site-packages now (one .dist-info folder each)."
        if self.site_packages is None:
            return 0
        try:
            return sum(1 for p in self.site_packages.iterdir() if p.name.endswith(".dist-info"))
        except OSError:
            return 0

    def read(self, line: str) -> str | None:
        "Take one line of pip's output; return a line to print now (a change of phase), else None."
        self.tail.append(line)
        if match := re.match(r"\s*Collecting (\S+)", line):
            self.collected += 1
            self.last = re.split(r"[<>=!~\[ ;(]", match.group(1))[0]
        elif line.startswith("Requirement already satisfied"):
            self.satisfied += 1
        elif line.startswith("Installing collected packages:"):
            self.installing = len(line.split(":", 1)[1].split(","))
            collected = _minutes(self.elapsed())
            return f"setup: installing {_packages(self.installing)} (collected in {collected}; the longest step)"
        elif line.startswith("Successfully installed"):
            self.installed = len(line.split()) - 2
        return None

    def elapsed(self) -> float:
        return time.time() - self.start

    def status(self) -> str:
        if self.installing:
            done = max(0, self.distributions() - self.present) if self.site_packages else 0
            so_far = f"{min(done, self.installing)} of {_packages(self.installing)} installed" if done else \
                f"installing {_packages(self.installing)}"
            return f"setup: {so_far} ({_minutes(self.elapsed())})"
        done = self.collected + self.satisfied
        return (f"setup: {done} of ~{_packages(self.expected)} collected{', last ' + self.last if self.last else ''}"
                f" ({_minutes(self.elapsed())})")


def site_packages(python: str) -> Path | None:
    "Where the pip command's interpreter installs packages."
    try:
        found = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, timeout=60)
        return Path(found.stdout.strip()) if found.returncode == 0 and found.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def warnings_once(stream, hidden: list[int]) -> None:
    "pip's stderr to ours: errors as they come, each kind of warning once (quoted names make no new kind)."
    seen = set()
    for line in stream:
        if line.startswith(("WARNING:", "DEPRECATION:")):
            kind = re.sub(r"'[^']*'|\"[^\"]*\"", "...", line.strip())
            if kind in seen:
                hidden[0] += 1
                continue
            seen.add(kind)
        sys.stderr.write(line)
        sys.stderr.flush()


def run(command: list[str], expected: int, every: float) -> int:
    progress = Progress(expected, site_packages(command[0]))
    process = subprocess.Popen(command + ["--progress-bar", "off"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, bufsize=1)
    stop, hidden = threading.Event(), [0]

    def tick():
        while not stop.wait(every):
            print(progress.status(), flush=True)
    threading.Thread(target=tick, daemon=True).start()
    errors = threading.Thread(target=warnings_once, args=(process.stderr, hidden), daemon=True)
    errors.start()
    assert process.stdout is not None
    for line in process.stdout:
        now = progress.read(line.rstrip("\n"))
        if now:
            print(now, flush=True)
    code = process.wait()
    stop.set()
    errors.join(timeout=10)
    if hidden[0]:
        print(f"setup: {hidden[0]} more pip warnings of the kinds shown above, not repeated", file=sys.stderr)
    if code:
        print(f"setup: pip failed (exit {code}) after {_minutes(progress.elapsed())}; its last lines:", file=sys.stderr)
        print("\n".join(progress.tail), file=sys.stderr)
    else:
        installed = f"{_packages(progress.installed)} installed" if progress.installed else "nothing new to install"
        print(f"setup: {installed}, {progress.satisfied} already there, in {_minutes(progress.elapsed())}", flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="requirements/pip_progress.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--estimate", nargs=2, metavar=("LOCK", "VENV"), type=Path, help="print the estimate and exit")
    parser.add_argument("--lock", type=Path, default=Path(__file__).with_name("cpu.lock"), help="the lock pip installs")
    parser.add_argument("--every", type=float, default=30.0, help="seconds between progress lines (default 30)")
    parser.add_argument("command", nargs="*", help="the pip command, after --")
    args = parser.parse_args(argv)
    if args.estimate:
        print(estimate(*args.estimate), flush=True)
        return 0
    if not args.command:
        parser.error("give the pip command after --")
    return run(args.command, locked_packages(args.lock), args.every)


if __name__ == "__main__":
    sys.exit(main())
