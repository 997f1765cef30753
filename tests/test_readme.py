"""README.md and nbs/index.ipynb (the kit's home page) must say the same thing, and CI must run README's test command."""
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_index_notebook_matches_readme():
    notebook = json.loads((ROOT / "nbs" / "index.ipynb").read_text())
    text = "\n".join("".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "markdown")
    assert text.strip() == (ROOT / "README.md").read_text().strip(), "regenerate nbs/index.ipynb from README.md"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"^(make test)\b", readme, flags=re.M).group(1)
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert command in [line.strip() for line in ci], ".ci/run must call exactly the README's test command"


def _python_block(readme: str, heading: str) -> str:
    section = readme.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)


def test_core_snippet_runs_as_printed():
    "The README's 'Use the core in your own trainer' snippet, exactly as printed, in a fresh namespace."
    code = _python_block((ROOT / "README.md").read_text(), "Use the core in your own trainer")
    namespace: dict = {}
    exec(compile(code, "README.md snippet", "exec"), namespace)
    import numpy as np
    weights, rows = namespace["loss_weights"], namespace["group_ids"]
    assert np.shape(weights) == np.shape(rows) and np.isfinite(weights).all()
    assert namespace["anchor_rows"].any() and not namespace["anchor_rows"].all(), "the snippet shows both reward paths"
