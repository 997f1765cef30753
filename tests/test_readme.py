"""README.md and nbs/index.ipynb (the kit's home page) must say the same thing, and CI must run README's test command."""
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_index_notebook_matches_readme():
    notebook = json.loads((ROOT / "nbs" / "index.ipynb").read_text())
    text = "\n\n".join("".join(cell["source"]).strip() for cell in notebook["cells"] if cell["cell_type"] == "markdown")
    assert text.strip() == (ROOT / "README.md").read_text().strip(), "regenerate nbs/index.ipynb from README.md"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"^(make test)\b", readme, flags=re.M).group(1)
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert command in [line.strip() for line in ci], ".ci/run must call exactly the README's test command"


def _python_block(readme: str, heading: str) -> str:
    section = readme.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)


def test_core_snippet_runs_as_printed(tmp_path, monkeypatch):
    "The README's 'Use the core in your own trainer' snippet, exactly as printed, in a fresh namespace and an empty folder."
    code = _python_block((ROOT / "README.md").read_text(), "Use the core in your own trainer")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "README.md snippet", "exec"), namespace)
    import numpy as np
    weights, rows = namespace["loss_weights"], namespace["group_ids"]
    assert np.shape(weights) == np.shape(rows) and np.isfinite(weights).all()
    assert namespace["anchor_rows"].any() and not namespace["anchor_rows"].all(), "the snippet shows both reward paths"


def test_trl_snippet_runs_as_printed(tmp_path, monkeypatch):
    """The README's 'Use WMRL inside TRL' snippet, exactly as printed, from an empty folder outside the repository:
    TRL's real trainer, a real sandbox on the anchors, every path resolved by the package."""
    import pytest
    pytest.importorskip("trl")
    code = _python_block((ROOT / "README.md").read_text(), "Use WMRL inside TRL")
    monkeypatch.chdir(tmp_path)  # an empty folder outside the repository, as a user's own project
    assert not any(tmp_path.iterdir()) and ROOT not in tmp_path.parents
    namespace: dict = {}
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(code, "README.md TRL snippet", "exec"), namespace)
    assert not [w for w in caught if "not fully engaged" in str(w.message)], "the snippet's run calibrates and weights"
    history = namespace["trainer"].wmrl_history
    assert len(history) == 3 and all(h["stats"]["n_anchor_groups"] >= 1 for h in history)
    assert any(a for h in history for a in h["anchor_rows"]), "anchor rows were executed for real"


def test_the_tests_map_names_every_test_file():
    "tests/README.md is a map of tests/ (issue 47): every Python file there is named in it, and nothing that is gone."
    text = (ROOT / "tests" / "README.md").read_text()
    files = {p.name for p in (ROOT / "tests").glob("*.py")}
    named = set(re.findall(r"`([A-Za-z0-9_]+\.py)`", text))
    assert sorted(files - named) == [] and sorted(named - files) == [], (sorted(files - named), sorted(named - files))
