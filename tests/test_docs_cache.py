"""`make docs` builds only what changed: docs/build.py keeps a page whose inputs hash the same as at the last build
(OUT/.build-cache.json), prints an estimate before it starts and a line per page while it runs."""
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("docs_build", ROOT / "docs" / "build.py")
build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build)


def _build(out: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "docs/build.py", "--out", str(out), "--only", "180_settings", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_second_build_keeps_the_pages_and_says_so(tmp_path):
    first = _build(tmp_path, "--execute", "none")
    assert "estimate ~" in first.splitlines()[0], "the estimate comes first"
    assert "docs: [1/2] " in first and "180_settings rendered in" in first, "a line per page as it lands"
    cache = json.loads((tmp_path / build.CACHE).read_text())["pages"]
    assert set(cache) == {"180_settings", build.README} and cache["180_settings"]["kind"] == "render"
    page = (tmp_path / "180_settings.html").stat().st_mtime_ns
    second = _build(tmp_path, "--execute", "none")
    assert "0 pages built, 1 kept" in second and (tmp_path / "180_settings.html").stat().st_mtime_ns == page
    third = _build(tmp_path, "--execute", "none", "--force")
    assert "2 pages built, 0 kept" in third


def test_page_key_follows_every_input(tmp_path, monkeypatch):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    for name in ("180_settings", "190_bench"):
        shutil.copy(ROOT / "nbs" / f"{name}.ipynb", nbs)
    monkeypatch.setattr(build, "NBS", nbs)
    build.chapter_title.cache_clear()
    names = ["180_settings", "190_bench"]
    key = build.page_key("180_settings", False, (None, "190_bench"), names)
    assert build.page_key("180_settings", False, (None, "190_bench"), names) == key, "the same inputs, the same key"
    assert build.page_key("180_settings", True, (None, "190_bench"), names) != key, "executed or not"
    assert build.page_key("180_settings", False, (None, None), names) != key, "its neighbours in the nav bar"
    assert build.page_key("180_settings", False, (None, "190_bench"), names + ["200_x"]) != key, "the chapters linked"
    notebook = json.loads((nbs / "180_settings.ipynb").read_text())
    notebook["cells"][-1]["source"] = "".join(notebook["cells"][-1]["source"]) + "\n"
    (nbs / "180_settings.ipynb").write_text(json.dumps(notebook))
    assert build.page_key("180_settings", False, (None, "190_bench"), names) != key, "the notebook itself"
    build.chapter_title.cache_clear()


def test_estimate_uses_the_last_measured_seconds():
    "Pages dealt longest first to the workers, each at its last measured seconds (else the measured defaults)."
    todo = [("a", "execute"), ("b", "execute"), ("c", "execute"), ("d", "render"), ("e", "render")]
    cache = {"a": {"kind": "execute", "seconds": 100.0}, "b": {"kind": "execute", "seconds": 30.0},
             "c": {"kind": "execute", "seconds": 20.0}, "d": {"kind": "render", "seconds": 4.0}}
    assert build.estimate(todo, cache, workers=2) == 100.0  # a alone on one worker, the rest on the other
    assert build.estimate(todo, cache, workers=1) == 154.0 + build.MEASURED["render"]
    assert build.estimate([("e", "render")] * 30, {}, workers=3) == 10 * build.MEASURED["render"]
    assert build.estimate([("010_bandit", "execute")], {}, workers=3) == build.MEASURED_CHAPTERS["010_bandit"]
    assert build.estimate([], {}, workers=2) == 0.0
