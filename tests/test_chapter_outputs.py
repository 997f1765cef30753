"""The teaching chapters store their outputs, and they are current: each one's figures are in the repository's notebook,
made from the chapter's present code and the package files it runs (`make chapters` writes them; docs/outputs.py). Every
other chapter stores none. The stored form is the one JupyterLab and nbdev-clean write, so a save changes nothing."""
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("docs_outputs", ROOT / "docs" / "outputs.py")
outputs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(outputs)
build = outputs.build


def _outputs(name: str) -> list[dict]:
    cells = json.loads((ROOT / "nbs" / f"{name}.ipynb").read_text())["cells"]
    return [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]


@pytest.mark.parametrize("name", build.TEACHING)
def test_teaching_chapter_stores_current_outputs_with_a_figure(name):
    key, count = build.stored_outputs(name)
    assert count, f"{name} stores no outputs: run `make chapters` and commit nbs/{name}.ipynb"
    assert key == build.outputs_key(name), (
        f"{name}'s stored outputs were made from other code (its cells or a module it runs changed): run `make chapters`")
    assert any("image/png" in o.get("data", {}) for o in _outputs(name)), f"{name} stores no figure"


def test_every_other_chapter_stores_no_outputs():
    others = sorted(p.stem for p in (ROOT / "nbs").glob("*.ipynb") if p.stem not in build.TEACHING)
    stray = [n for n in others if _outputs(n) or build.OUTPUTS_KEY in json.loads((ROOT / "nbs" / f"{n}.ipynb").read_text())["metadata"]]
    assert not stray, (f"{stray} store outputs: only the teaching chapters do; "
                       f"`nbdev-clean --clear-all --fname nbs/{stray[0]}.ipynb` empties one")


@pytest.mark.parametrize("name", build.TEACHING)
def test_stored_form_is_what_jupyterlab_and_nbdev_clean_write(name):
    "Jupyter's server writes with nbformat; the pre-save hook cleans with nbdev: both leave the file as it is."
    from nbdev.clean import clean_nb
    text = (ROOT / "nbs" / f"{name}.ipynb").read_text()
    assert nbformat.writes(nbformat.reads(text, as_version=4)) + "\n" == text
    nb = json.loads(text)
    clean_nb(nb, allowed_metadata_keys=[build.OUTPUTS_KEY], allowed_cell_metadata_keys=["tags"])
    assert nb == json.loads(text)


def test_the_key_follows_code_and_the_modules_run_not_prose(tmp_path, monkeypatch):
    "The negative control: the currency check can fail, and only for what the outputs are made from."
    shutil.copytree(ROOT / "wmrl", tmp_path / "wmrl")
    (tmp_path / "nbs").mkdir()
    shutil.copy(ROOT / "nbs" / "130_debias.ipynb", tmp_path / "nbs")
    monkeypatch.setattr(build, "ROOT", tmp_path)
    monkeypatch.setattr(build, "NBS", tmp_path / "nbs")
    path = tmp_path / "nbs" / "130_debias.ipynb"
    base = build.outputs_key("130_debias")

    def edited(change) -> str:
        before = path.read_text()
        nb = json.loads(before)
        change(nb)
        path.write_text(json.dumps(nb))
        try:
            return build.outputs_key("130_debias")
        finally:
            path.write_text(before)

    def first(nb, kind):
        return next(c for c in nb["cells"] if c["cell_type"] == kind)

    assert edited(lambda nb: first(nb, "markdown")["source"].append("\nMore prose.")) == base
    assert edited(lambda nb: first(nb, "code")["source"].append("\nx = 1")) != base
    assert tmp_path / "wmrl" / "core" / "isotonic.py" in build.chapter_modules("130_debias")
    unrelated = tmp_path / "wmrl" / "execution" / "sandbox.py"
    assert unrelated not in build.chapter_modules("130_debias")
    unrelated.write_text(unrelated.read_text() + "\n# edited\n")
    assert build.outputs_key("130_debias") == base
    module = tmp_path / "wmrl" / "core" / "isotonic.py"  # imported by wmrl.core.debias, which the chapter imports
    module.write_text(module.read_text() + "\n# edited\n")
    assert build.outputs_key("130_debias") != base


def test_relative_imports_resolve_from_modules_and_packages():
    assert build._imported("from ..core.paired import x", "wmrl.autoresearch.ledger") >= {"wmrl.core.paired"}
    assert build._imported("from . import lanes", "wmrl.toy", package=True) >= {"wmrl.toy.lanes"}
    assert build._imported("%matplotlib inline\nimport wmrl.core.isotonic as iso\nimport numpy") == {"wmrl.core.isotonic"}


def test_outputs_are_saved_as_jupyterlab_saves_them():
    streams = [{"output_type": "stream", "name": "stdout", "text": ["a\n"]},
               {"output_type": "stream", "name": "stdout", "text": "b\nc"},
               {"output_type": "stream", "name": "stderr", "text": "warn\n"},
               {"output_type": "display_data", "metadata": {},
                "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "x"}, "text/plain": "Slider(...)"}},
               {"output_type": "display_data", "metadata": {},
                "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "y"}}},
               {"output_type": "execute_result", "execution_count": 7, "metadata": {}, "data": {"text/plain": ["1\n", "2"]}}]
    saved = outputs.saved_outputs(streams)
    assert saved[0] == {"output_type": "stream", "name": "stdout", "text": ["a\n", "b\n", "c"]}
    assert saved[1]["name"] == "stderr"
    assert saved[2]["data"] == {"text/plain": ["Slider(...)"]}
    assert saved[3]["execution_count"] is None and len(saved) == 4
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        outputs.saved_outputs([{"output_type": "error", "ename": "ZeroDivisionError", "evalue": "", "traceback": []}])


def test_check_command_passes_and_refuses_a_chapter_that_is_not_teaching():
    ok = subprocess.run([sys.executable, "docs/outputs.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, "docs/outputs.py", "180_settings"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not a teaching chapter" in bad.stderr
