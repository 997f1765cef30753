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
