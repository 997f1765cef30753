"""What a reader meets first, in a real browser: the built docs show figures without running anything, and a
notebook from nbs/ opens in JupyterLab with its kernel, no "Select Kernel" dialog.

`make docs` builds the site from the repository as it is (here only the chapters the tests open are executed, by
nbdev's engine; `make docs` alone executes every teaching chapter); the pages are served on 127.0.0.1 and opened in Debian chromium through Playwright. Screenshots land in
$WMRL_BROWSER_SHOTS when it is set (docs/screenshots/ holds the committed ones). Skips loudly without chromium.
"""
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from browser_support import chromium_page, copy_tree_notebook, jupyter_lab, needs_chromium, shots_dir, static_server

ROOT = Path(__file__).resolve().parent.parent
MATH_PAGES = ["140_denoise", "130_debias"]  # executed teaching chapters with formulas in their text
FIGURE_PAGES = ["010_bandit", "130_debias", "430_loop"]  # the reading path's first figure of each part


def test_every_notebook_is_valid_and_names_its_kernel():
    "JupyterLab asks 'Select Kernel' for a notebook with no kernelspec (nbdev-clean keeps the key once it is there)."
    import nbformat
    for path in sorted([*ROOT.glob("nbs/*.ipynb"), *ROOT.glob("reproductions/*.ipynb")]):
        nbformat.validate(nbformat.read(path, as_version=4))  # e.g. a cell typed "md" opens as an error
        kernel = json.loads(path.read_text())["metadata"].get("kernelspec", {})
        assert kernel.get("name") == "python3", f"{path.relative_to(ROOT)} names no python3 kernel: {kernel}"


@pytest.fixture(scope="module")
def site():
    out = Path(tempfile.mkdtemp(prefix="wmrl-docs-"))
    try:
        # only the chapters these tests open are executed (every chapter is still rendered, so every link is checked);
        # the teaching chapters all run under nbdev-test, with the same engine
        run = " ".join(sorted({*FIGURE_PAGES, *MATH_PAGES}))
        done = subprocess.run(["make", "-s", "docs", f"DOCS_OUT={out}", f"DOCS_ARGS=--run {run}"], cwd=ROOT,
                              capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, f"make docs failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        yield out
    finally:
        shutil.rmtree(out, ignore_errors=True)


@pytest.mark.parametrize("page_name", FIGURE_PAGES)
@needs_chromium
def test_docs_page_shows_a_figure(site, page_name):
    "With the network off, as every page of the site must read: figures are inline PNGs."
    with static_server(site) as url, chromium_page() as page:
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith((url, "data:")) else route.abort())
        page.goto(url + "index.html")
        page.click(f"a[href='{page_name}.html']")  # reached from the home page's reading path, as a reader would
        page.wait_for_load_state("load")
        figures = page.locator("img[src^='data:image/png']")
        assert figures.count() >= 1, f"{page_name}.html shows no figure"
        figures.first.scroll_into_view_if_needed()
        width = figures.first.evaluate("img => img.complete ? img.naturalWidth : 0")
        assert width > 100, f"the first figure of {page_name}.html did not decode (width {width})"
        assert figures.first.is_visible()
        figures.first.screenshot(path=str(shots_dir(site) / f"docs_{page_name}_figure.png"))


@needs_chromium
def test_notebook_opens_with_its_kernel_and_no_dialog():
    root = Path(tempfile.mkdtemp(prefix="wmrl-lab-"))
    try:
        copy_tree_notebook(ROOT / "nbs" / "130_debias.ipynb", root)
        with jupyter_lab(root) as url, chromium_page() as page:
            page.goto(url + "lab/tree/130_debias.ipynb")
            page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-Cell').length > 5", timeout=90_000)
            page.wait_for_function("document.body.innerText.includes('| Idle')", timeout=90_000)  # its kernel runs
            dialogs = page.locator(".jp-Dialog")
            assert dialogs.count() == 0, f"a dialog opened: {dialogs.first.inner_text()[:200]}"
            page.screenshot(path=str(shots_dir(root) / "lab_130_debias_opened.png"))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_every_link_of_the_site_resolves_inside_it(site):
    "No dead link: every relative href of every page names a file the site holds (repository files are named, not linked)."
    import re
    dead = []
    for page in sorted(site.glob("*.html")):
        for target in re.findall(r'<a [^>]*href="([^"]+)"', page.read_text()):
            if target.startswith(("http://", "https://", "#", "mailto:", "data:")):
                continue
            if not (site / target.split("#")[0]).is_file():
                dead.append(f"{page.name} -> {target}")
    assert not dead, f"{len(dead)} dead links, first: {dead[:5]}"


@pytest.mark.parametrize("page_name", MATH_PAGES)
@needs_chromium
def test_a_chapter_reads_with_the_network_off(site, page_name):
    """With every request outside the local server refused: formulas drawn (MathML, no CDN), printed outputs shown as
    text (not a Python list of lines), the bar to the index and the next chapter, the chapter's title."""
    with static_server(site) as url, chromium_page() as page:
        refused = []
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith((url, "data:"))
                   else (refused.append(route.request.url), route.abort()))
        page.goto(url + f"{page_name}.html")
        page.wait_for_load_state("load")
        formulas = page.locator(".jp-MarkdownOutput math")
        assert formulas.count() >= 3, f"{page_name}.html shows {formulas.count()} formulas"
        box = formulas.first.bounding_box()
        assert box and box["height"] > 5 and box["width"] > 5, f"the first formula is not drawn: {box}"
        prose = page.evaluate("""() => [...document.querySelectorAll('.jp-MarkdownOutput')].map(e => {
            const c = e.cloneNode(true); c.querySelectorAll('code, pre').forEach(x => x.remove()); return c.innerText; })""")
        raw = sorted({m for t in prose for m in re.findall(r"\\[A-Za-z]+", t)})  # any backslash command outside code
        assert not raw and not [t for t in prose if "$$" in t], f"raw LaTeX left in the text: {raw}"
        printed = page.locator(".jp-OutputArea-output pre").all_inner_texts()
        assert printed, f"{page_name}.html shows no printed output"
        assert not [t for t in printed if t.lstrip().startswith("['") or "\\n" in t], f"outputs as lists: {printed[:2]}"
        assert page.title() and page.title() != page_name, "the page's title is the chapter's, not its file name"
        nav = page.locator("nav.wmrl-nav").first
        assert nav.locator("a[href='index.html']").count() == 1
        page.locator("nav.wmrl-nav a[rel='next']").first.click()
        page.wait_for_load_state("load")
        assert page.url.endswith(".html") and not page.url.endswith(f"{page_name}.html")
        page.go_back()
        formulas.first.scroll_into_view_if_needed()
        page.screenshot(path=str(shots_dir(site) / f"docs_{page_name}_offline.png"))
        assert all("127.0.0.1" not in u for u in refused), refused[:3]
