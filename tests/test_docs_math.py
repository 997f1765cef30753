"""Every formula of the reading site is drawn: docs/build.py turns each notebook's (and each markdown page's) LaTeX into
MathML at build time, and no backslash command may be left in the prose for a reader to see as code (the site once
showed `\\arg min` raw on 125_isotonic and 130_debias, and formulas that wrapped a line on five other pages)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("latex2mathml", reason="latex2mathml is in the dev extra: make setup")
spec = importlib.util.spec_from_file_location("docs_build", ROOT / "docs" / "build.py")
build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build)


def raw_commands(markdown: str) -> list[str]:
    "Backslash commands left in the prose once the formulas are MathML (code spans and blocks are code: left out)."
    html = build.math_to_mathml(markdown)
    prose = "".join(part for i, part in enumerate(build.CODE.split(html)) if i % 2 == 0)
    return build.RAW_COMMAND.findall(prose)


def sources() -> list[tuple[str, str]]:
    out = [(nb.stem, "".join(c["source"])) for nb in sorted((ROOT / "nbs").glob("*.ipynb"))
           for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "markdown"]
    return out + [(path.name, path.read_text()) for path in build.PAGES.values()]


def test_no_page_leaves_latex_raw():
    left = {}
    for name, text in sources():
        if found := raw_commands(text):
            left.setdefault(name, set()).update(found)
    assert not left, f"raw LaTeX left in the site's prose: {left}"


def test_the_aliases_and_a_wrapped_formula_are_drawn():
    assert raw_commands(r"least squares, $f = \arg\min_{f} \sum_i w_i$ here") == []
    assert raw_commands("the level $T = \\frac{1}{m}\\sum_j\n\\bar x_j$ of the reference") == []  # wraps a line
    assert "\\arg" in build.math_to_mathml(r"`$\arg\min$` in code") and raw_commands(r"`\arg`") == []  # code stays code
    assert raw_commands("two lines $a\n\nb$ apart") == []  # a blank line ends a paragraph: no formula, no command either
