"""Build the kit's reading site: every notebook as an HTML page, the teaching chapters with their outputs so their
tables and figures are there to read without running anything, and a home page with the reading path.

    python docs/build.py                 # -> docs/_build/index.html (the teaching chapters with their outputs)
    python docs/build.py --execute all   # every notebook executed (as nbdev-test runs them: slow/gpu cells skipped)
    python docs/build.py --out DIR --only 010_bandit 130_debias
    python docs/build.py --force         # ignore the cache: every page built again

Notebooks run with nbdev's own engine (execnb's CaptureShell, the one `nbdev-test` uses), in their own folder so
relative paths resolve as in JupyterLab, each in a fresh process. nbconvert turns the executed copies into pages;
`#|` directives are dropped from the rendered source. Nothing under nbs/ is written. A teaching chapter whose stored
outputs are current (`make chapters` writes them: docs/outputs.py; `outputs_current` below) is shown with them and not
run again; `--run NAME` or `--execute all` runs it anyway.

Only what changed is built again: OUT/.build-cache.json holds, for each page, a hash of everything the page is made
from (the notebook, this script, the tool versions, its neighbours' titles, the list of chapters, and for an executed
chapter the package's source; not the data files a chapter reads: --force after changing those) and the seconds it
took; a page whose hash matches is kept, a page that failed is built again. Before it starts the build
prints what it will do and an estimate from those seconds (or, for a page never built here, from MEASURED below);
then one progress line per page (a bar on a terminal).
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import html
import json
import multiprocessing
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT / "nbs"

# The reading path: (part title, why it is there, the hundreds digit of its chapters). A chapter's number names its
# subpackage (tests/test_layers.py); numbers x80-x99 of every part and 9xx form the engineering appendix.
PATH = [
    ("1. Why", "the toy bandit: what a biased world model costs, and what the corrections buy back", "0"),
    ("2. The method", "advantages, anchors, isotonic debiasing, denoising, the correction step that joins them, "
     "paired statistics", "1"),
    ("3. Execution and grading", "task folders, metrics and leaderboards, the sandbox, pools of real executions, "
     "the task suite", "2"),
    ("4. The world model", "eight checks with strict verdicts, prompts, the static tier, backends, fidelity, the "
     "prior, positive controls", "3"),
    ("5. AutoResearch", "the whole loop on CPU: a program-writing policy, a ledger, the loop, a grid", "4"),
    ("6. Full scale", "TRL, resource plans, MLE-Dojo, DSBench and the embodied track", "56"),
    ("Appendix: engineering", "settings, benchmarks of the core, the sandbox plumbing and backends, the warm sandbox "
     "server, Ray, the command line", None),
]


def is_appendix(name: str) -> bool:
    "x80-x99 in every part, and the 9xx entry points."
    return name[0] == "9" or name[1] in "89"


# Chapters executed by default: fast, and the ones whose figures a reader looks for first.
TEACHING = ["010_bandit", "020_bandit_explorer", "110_advantages", "120_anchors", "130_debias", "140_denoise", "147_ppi",
            "150_correction", "155_oracle", "430_loop"]


# --- stored outputs: the teaching chapters keep their outputs in nbs/ (`make chapters`, docs/outputs.py, writes them)
OUTPUTS_KEY = "wmrl"  # the notebook metadata key that holds what the stored outputs were made from (pyproject's
# allowed_metadata_keys keeps it through nbdev-clean and the pre-save hook)


def _imported(text: str, module: str | None = None, package: bool = False) -> set[str]:
    """Dotted names a piece of Python imports from wmrl (and, for `from X import y`, X.y, which may be a module).
    `module` resolves relative imports: the file's own dotted name, `package` when it is an `__init__.py`. Lines of
    IPython magic (`%`, `!`) are read as comments, so a notebook cell parses as Python."""
    import ast
    text = "\n".join("#" + line if line.lstrip().startswith(("%", "!")) else line for line in text.splitlines())
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "wmrl"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if module is None:
                    continue
                parts = module.split(".")
                base = parts[:len(parts) - node.level + (1 if package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "wmrl":
                found |= {target} | {f"{target}.{alias.name}" for alias in node.names}
    return found


def _module_file(name: str) -> Path | None:
    path = ROOT.joinpath(*name.split("."))
    return next((p for p in (path.with_suffix(".py"), path / "__init__.py") if p.is_file()), None)


def chapter_modules(name: str) -> list[Path]:
    """Every file of the package chapter NAME's code runs when executed: the wmrl modules its cells import, what those
    import in turn, and the packages' `__init__.py` files on the way (Python runs them first)."""
    cells = json.loads((NBS / f"{name}.ipynb").read_text())["cells"]
    todo = set().union(*(_imported("".join(c["source"])) for c in cells if c["cell_type"] == "code"))
    seen: dict[str, Path] = {}
    while todo:
        dotted = todo.pop()
        parts = dotted.split(".")
        for i in range(1, len(parts) + 1):  # wmrl, wmrl.core, wmrl.core.paired: each package's __init__ runs
            prefix = ".".join(parts[:i])
            path = _module_file(prefix)
            if path is not None and prefix not in seen:
                seen[prefix] = path
                todo |= _imported(path.read_text(), prefix, package=path.name == "__init__.py")
    return sorted(set(seen.values()))


def outputs_key(name: str) -> str:
    """The hash of what chapter NAME's outputs are made from: its code cells (not its prose) and the package files
    they run (chapter_modules). Not the data files a chapter reads: `make chapters FORCE=1` after changing those."""
    cells = json.loads((NBS / f"{name}.ipynb").read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    return _digest(code, *[(str(p.relative_to(ROOT)), p.read_bytes()) for p in chapter_modules(name)])


def stored_outputs(name: str) -> tuple[str | None, int]:
    "(the key chapter NAME's stored outputs were made from, or None; how many outputs it stores)."
    nb = json.loads((NBS / f"{name}.ipynb").read_text())
    count = sum(len(c.get("outputs", [])) for c in nb["cells"] if c["cell_type"] == "code")
    return nb["metadata"].get(OUTPUTS_KEY, {}).get("outputs_of"), count


def outputs_current(name: str) -> bool:
    "Chapter NAME stores outputs made from its present code and modules: the site shows them without running it."
    key, count = stored_outputs(name)
    return count > 0 and key == outputs_key(name)


def execute(path: Path) -> tuple[dict, float]:
    "Run one notebook as nbdev-test does (its skip flags honoured) and return it with its outputs, and the seconds."
    from execnb.shell import CaptureShell
    from fastcore.foundation import working_directory
    from nbdev.config import get_config
    from nbdev.process import NBProcessor
    from nbdev.test import _skip_cell  # nbdev's own rule for cells `nbdev-test` leaves out (slow, gpu, eval: false)

    flags = get_config(path.parent).tst_flags
    nb = NBProcessor(path, rm_directives=False, process=True).nb
    start = time.time()
    with working_directory(path.parent):
        CaptureShell(path).run_all(nb, exc_stop=True, preproc=_skip_cell(nb, flags.split() if isinstance(flags, str) else flags))
    return nb, time.time() - start


def _page_body(nb) -> dict:
    "The notebook as plain nbformat JSON with directive lines (`#| export`, ...) dropped from the shown source."
    import json
    data = json.loads(json.dumps(nb, default=dict))
    keep = {"code": ("cell_type", "id", "metadata", "source", "outputs", "execution_count"),
            "markdown": ("cell_type", "id", "metadata", "source", "attachments"), "raw": ("cell_type", "id", "metadata", "source")}
    cells = []
    for cell in data["cells"]:
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        cell["source"] = "\n".join(line for line in text.splitlines() if not line.startswith("#|")).strip("\n")
        cell["metadata"] = {k: v for k, v in cell.get("metadata", {}).items() if k == "tags"}  # drop execnb timings
        if cell["cell_type"] == "markdown":
            cell["source"] = math_to_mathml(cell["source"])
        if cell["cell_type"] == "code":
            cell.setdefault("outputs", []); cell.setdefault("execution_count", None)
            cell["outputs"] = [_joined(output) for output in cell["outputs"]]
        if not cell["source"].strip() and not cell.get("outputs"):
            continue  # a cell that held only directives (`#| default_exp ...`) would show as an empty box
        cells.append({k: cell[k] for k in keep[cell["cell_type"]] if k in cell})
    kernel = {"name": "python3", "display_name": "python3", "language": "python"}
    return {"cells": cells, "metadata": {"kernelspec": kernel}, "nbformat": 4, "nbformat_minor": 5}


def _joined(output: dict) -> dict:
    "execnb keeps text outputs as lists of lines; nbconvert would print such a list as a Python list, `\\n` and all."
    if isinstance(output.get("text"), list):
        output["text"] = "".join(output["text"])
    if isinstance(output.get("data"), dict):
        output["data"] = {k: "".join(v) if isinstance(v, list) else v for k, v in output["data"].items()}
    return output


# $$block$$, or $inline$ (which may wrap across lines, never across a blank one)
MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$\w])\$(?=\S)((?:[^$\n]|\n(?!\s*\n))+?)(?<=\S)\$(?![\w$])", re.S)
# LaTeX the converter writes out as text (`\arg` became <mi>\arg</mi>), spelled as commands it draws
LATEX_ALIASES = ((re.compile(r"\\arg\s*\\(min|max)(?![A-Za-z])"), r"\\mathop{\\mathrm{arg\\,\1}}"),
                 (re.compile(r"\\operatorname\*?\{([^}]*)\}"), r"\\mathop{\\mathrm{\1}}"),
                 (re.compile(r"\\arg(?![A-Za-z])"), r"\\mathrm{arg}"))
RAW_COMMAND = re.compile(r"\\[A-Za-z]+")  # a backslash command left in the page: LaTeX a reader sees as code
CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)


def math_to_mathml(markdown: str) -> str:
    """Formulas rendered to MathML at build time, which the browser draws itself: no MathJax from a CDN, so the site
    reads the same with no network. Code spans keep their dollars; a formula the converter cannot read stays as written."""
    from latex2mathml.converter import convert

    def one(match: re.Match) -> str:
        block, inline = match.group(1), match.group(2)
        latex = (block or inline).strip()
        for pattern, spelled in LATEX_ALIASES:
            latex = pattern.sub(spelled, latex)
        try:
            return convert(latex, display="block" if block else "inline")
        except Exception:
            return match.group(0)
    return "".join(part if i % 2 else MATH.sub(one, part) for i, part in enumerate(CODE.split(markdown)))


def render(name: str, out: Path, run: bool, nav: tuple = (None, None)) -> tuple[str, float, bool]:
    "Write out/NAME.html; executed first when `run`. Returns (name, seconds, executed): the seconds of the whole page."
    import nbformat
    from fastcore.nbio import read_nb
    from nbconvert import HTMLExporter
    start = time.time()
    path = NBS / f"{name}.ipynb"
    nb = execute(path)[0] if run else read_nb(path)
    page = nbformat.from_dict(_page_body(nb))
    title = chapter_title(name)
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(page, resources={"metadata": {"name": title}})
    (out / f"{name}.html").write_text(offline_page(body, nav))
    return name, time.time() - start, run


REMOTE_SCRIPT = re.compile(r"<script[^>]*\ssrc=\"https?://[^\"]*\"[^>]*>\s*</script>")
LINK = re.compile(r'<a href="(?!https?:|#|mailto:)([^"]+)"([^>]*)>(.*?)</a>', re.S)


# Markdown pages of the repository the site shows beside the chapters: (page name, source), the README's "elsewhere"
PAGES = {"results": ROOT / "reproductions" / "results" / "README.md", "gpu": ROOT / "docs" / "gpu.md"}


def local_link(match: re.Match) -> str:
    """A link to a chapter notebook goes to its page, the README to readme.html, one of PAGES to its page; a repository
    file the site does not hold is named, not linked."""
    target, attributes, text = match.groups()
    path = target.split("#")[0]
    stem = Path(path).name
    if stem.endswith(".ipynb") and (NBS / stem).is_file():
        return f'<a href="{stem[:-6]}.html"{attributes}>{text}</a>'
    if stem == "README.md" and path in ("README.md", "../README.md", "../../README.md"):
        return f'<a href="readme.html"{attributes}>{text}</a>'
    page = next((name for name, source in PAGES.items() if path and source.as_posix().endswith(path.lstrip("./"))), None)
    if page:
        return f'<a href="{page}.html"{attributes}>{text}</a>'
    if stem.endswith(".html") and (NBS / f"{stem[:-5]}.ipynb").is_file():
        return match.group(0)
    return f'<span class="repo-path" title="{html.escape(target)} in the repository">{text}</span>'


def offline_page(body: str, nav: tuple) -> str:
    "No script from the network (formulas are MathML already), links that resolve inside the site, and a bar to move on."
    previous, following = nav
    links = ['<a href="index.html">&#8962; all chapters</a>']
    links += [f'<a href="{n}.html" rel="{r}">{a} {html.escape(chapter_title(n))}</a>' for n, r, a in
              ((previous, "prev", "&larr;"), (following, "next", "&rarr;")) if n]
    bar = ('<nav class="wmrl-nav" style="font-family:system-ui,sans-serif;display:flex;gap:1.5rem;padding:.6rem 1rem;'
           f'border-bottom:1px solid #ddd;background:#fafafa">{"".join(links)}</nav>')
    body = LINK.sub(local_link, REMOTE_SCRIPT.sub("", body))
    for anchor in set(re.findall(r'<h[1-6] id="([^"]+)"', body)):  # GitHub's slugs are lower case: so are the site's
        body = body.replace(f'id="{anchor}"', f'id="{anchor.lower()}"').replace(f'href="#{anchor}"', f'href="#{anchor.lower()}"')
    body = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + bar, body, count=1)
    return body.replace("</body>", bar.replace("border-bottom", "border-top") + "</body>", 1)


@functools.cache  # read for a page's own title, its neighbours' in the nav bar and the index
def chapter_title(name: str) -> str:
    "The notebook's `# Title` line, which every chapter starts with."
    import json
    cells = json.loads((NBS / f"{name}.ipynb").read_text())["cells"]
    first = "".join(cells[0]["source"]) if cells else ""
    return next((line.lstrip("# ").strip() for line in first.splitlines() if line.startswith("# ")), name)


def reading_path(names: list[str]) -> list[tuple[str, str, list[str]]]:
    "Parts of the reading path with the chapters present, in number order; anything else goes to a last part."
    chapters = [n for n in names if n[:3].isdigit()]
    parts = [(title, why, [n for n in chapters if (digits is None) == is_appendix(n) and (digits is None or n[0] in digits)])
             for title, why, digits in PATH]
    placed = {n for _, _, part in parts for n in part}
    rest = [n for n in names if n not in placed and n != "index"]
    return parts + ([("Other chapters", "", rest)] if rest else [])


def index_page(names: list[str], executed: set[str]) -> str:
    "The home page: what the kit is, then the chapters in reading order, marking those shown with their outputs."
    rows = []
    for title, why, chapters in reading_path(names):
        items = "".join(f'<li><a href="{n}.html">{html.escape(chapter_title(n))}</a> <code>{n}</code>'
                        f'{" &middot; <em>with outputs</em>" if n in executed else ""}</li>' for n in chapters)
        rows.append(f"<h2>{html.escape(title)}</h2><p>{html.escape(why)}</p><ol>{items}</ol>")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>wmrl: start here</title>"
            "<style>body{font-family:system-ui,sans-serif;max-width:56rem;margin:2rem auto;line-height:1.5}"
            "code{color:#555}</style></head><body><h1>wmrl: World Model RL, notebook by notebook</h1>"
            "<p><strong>Start here.</strong> Read the parts in order: the bandit shows why a world model needs "
            "correcting, the method chapters build the correction, and the later parts run it on real executions. "
            "The project's <a href='readme.html'>README</a> has the measured results and the commands.</p>"
            + "".join(rows) + "</body></html>")


# Seconds a page took in `make docs` from a fresh clone on this project's machine (2 cores shared with a long run, load
# 6-7; 3 workers), as the build's own lines printed: the teaching chapters executed (each its own figure; 60 s for
# another chapter), 82 pages rendered (2.9 s each on average), the README's pages. Used for a page never built in OUT,
# to order the work (longest first) and for the estimate; after a build, each page's own last seconds. On an idle
# machine the same build took a third of this (1 min 36 s against 4 min 41 s).
MEASURED = {"execute": 60.0, "render": 3.0, "readme": 12.0}
MEASURED_CHAPTERS = {"010_bandit": 203.0, "140_denoise": 142.0, "020_bandit_explorer": 55.0, "155_oracle": 45.0,
                     "150_correction": 29.0, "130_debias": 27.0, "120_anchors": 25.0, "110_advantages": 23.0,
                     "147_ppi": 20.0}
CACHE = ".build-cache.json"
README = "readme"  # the cache entry for readme.html and the PAGES, built as one unit


def _digest(*parts) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else json.dumps(part, sort_keys=True, default=str).encode())
        digest.update(b"\0")
    return digest.hexdigest()


@functools.cache
def _common_inputs() -> str:
    "What every page is made from: this script and the versions of the tools that build it."
    from importlib.metadata import PackageNotFoundError, version

    def installed(package):
        try:
            return version(package)
        except PackageNotFoundError:
            return None
    tools = {p: installed(p) for p in ("nbconvert", "nbformat", "latex2mathml", "nbdev", "execnb", "mistune", "pygments")}
    return _digest(Path(__file__).read_bytes(), tools, sys.version)


@functools.cache
def _package_source() -> str:
    "The package an executed chapter imports: any change to it runs the executed chapters again."
    files = sorted(p for p in (ROOT / "wmrl").rglob("*.py") if p.name != "_modidx.py")
    return _digest(*[(str(p.relative_to(ROOT)), p.read_bytes()) for p in files])


def page_key(name: str, run: bool, nav: tuple, names: list[str]) -> str:
    "The hash of everything chapter NAME's page is made from: equal hashes, equal pages."
    neighbours = [(n, chapter_title(n)) for n in nav if n]
    return _digest(_common_inputs(), (NBS / f"{name}.ipynb").read_bytes(), run, neighbours, names,
                   _package_source() if run else None)


def readme_key() -> str:
    return _digest(_common_inputs(), (NBS / "index.ipynb").read_bytes(), *[p.read_bytes() for p in PAGES.values()])


def _load_cache(out: Path) -> dict:
    try:
        return json.loads((out / CACHE).read_text())["pages"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _save_cache(out: Path, pages: dict) -> None:
    partial = out / (CACHE + ".tmp")
    partial.write_text(json.dumps({"pages": pages}, indent=1, sort_keys=True))
    partial.replace(out / CACHE)  # whole or not at all, if the build is stopped


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60)} s" if seconds >= 60 else f"{seconds:.0f} s"


def last_seconds(name: str, kind: str, cache: dict) -> float:
    "The seconds page NAME took at its last build in this folder, else its measured default."
    last = cache.get(name, {})
    if last.get("kind") == kind:
        return last["seconds"]
    return MEASURED_CHAPTERS.get(name, MEASURED[kind]) if kind == "execute" else MEASURED[kind]


def estimate(todo: list[tuple[str, str]], cache: dict, workers: int) -> float:
    """Wall seconds for the pages to build: each page's last seconds (last_seconds), dealt out longest first to the
    workers, as the build deals them; a page's seconds were measured with the other workers busy."""
    loads = [0.0] * max(1, workers)
    for seconds in sorted((last_seconds(name, kind, cache) for name, kind in todo), reverse=True):
        loads[loads.index(min(loads))] += seconds
    return max(loads) if todo else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="docs/build.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "_build", help="output folder (default docs/_build)")
    parser.add_argument("--execute", choices=["teaching", "all", "none"], default="teaching",
                        help="which chapters run before rendering (default: the teaching chapters)")
    parser.add_argument("--only", nargs="*", default=None, help="render only these chapters (names without .ipynb)")
    parser.add_argument("--run", nargs="*", default=None,
                        help="execute exactly these chapters, the rest shown as written (overrides --execute)")
    parser.add_argument("--workers", type=int, default=3,
                        help="pages built at once (default 3: on 2 cores, a third fills the gaps of the other two)")
    parser.add_argument("--page", help=argparse.SUPPRESS)  # internal: execute and render one chapter, in a fresh process
    parser.add_argument("--force", action="store_true", help=f"build every page again, ignoring OUT/{CACHE}")
    args = parser.parse_args(argv)
    started = time.time()
    names = sorted(p.stem for p in NBS.glob("[0-9]*.ipynb"))
    order = [n for _, _, part in reading_path(names) for n in part]  # previous / next follow the reading path
    nav = {n: (order[i - 1] if i else None, order[i + 1] if i + 1 < len(order) else None) for i, n in enumerate(order)}
    if args.page:
        return _execute_one(args.page, args.out, nav.get(args.page, (None, None)))
    unknown = sorted(set(args.only or []).union(args.run or []) - set(names))
    if unknown:
        print(f"docs/build.py: no chapter {unknown[0]!r} in nbs/; chapters are named like {names[0]!r}", file=sys.stderr)
        return 2
    chosen = args.only or names
    run = {n: n in args.run if args.run is not None else args.execute == "all" or (args.execute == "teaching" and n in TEACHING)
           for n in chosen}
    # a teaching chapter whose stored outputs are current is shown with them, not run again (`make chapters` stores them)
    stored = {n for n in chosen if run[n] and args.run is None and args.execute == "teaching" and outputs_current(n)}
    run = {n: run[n] and n not in stored for n in chosen}
    args.out.mkdir(parents=True, exist_ok=True)
    cache = {} if args.force else _load_cache(args.out)
    keys = {n: page_key(n, run[n], nav.get(n, (None, None)), names) for n in chosen}
    keys[README] = readme_key()

    def fresh(name: str) -> bool:
        page = "readme.html" if name == README else f"{name}.html"
        return cache.get(name, {}).get("key") == keys[name] and (args.out / page).is_file()

    kind = {n: "execute" if run[n] else "render" for n in chosen} | {README: "readme"}
    todo = sorted(((n, kind[n]) for n in [*chosen, README] if not fresh(n)),  # the longest first, as last measured
                  key=lambda item: -last_seconds(*item, cache))
    counts = {k: sum(1 for _, kk in todo if kk == k) for k in ("execute", "render")}
    kept = len(chosen) - counts["execute"] - counts["render"]
    if todo:
        print(f"docs: {len(chosen)} chapters into {args.out}: {counts['execute']} to execute and render, {counts['render']} "
              f"to render, {kept} unchanged since the last build (kept); estimate ~"
              f"{_minutes(estimate(todo, cache, args.workers) + 5)} on {args.workers} workers (from the seconds each page "
              "took at its last build here; a page never built here: as on 2 cores at load 6-7)", flush=True)
    else:
        print(f"docs: nothing changed since the last build in {args.out}: all {len(chosen)} chapters kept "
              "(DOCS_ARGS=--force builds them again)", flush=True)
    failed = _build(todo, args.out, nav, cache, keys, max(1, args.workers))
    bad = {f.split(":")[0] for f in failed}
    (args.out / "index.html").write_text(index_page(names, ({n for n in chosen if run[n]} | stored) - bad))
    for line in failed:
        print(f"docs/build.py: chapter failed to build: {line}", file=sys.stderr)
    print(f"docs: {args.out / 'index.html'} ({len(chosen) - len(bad - {README})} chapters, {sum(run.values())} executed, "
          f"{len(stored)} with their stored outputs; "
          f"{len(todo) - len(failed)} pages built, {kept} kept) in {_minutes(time.time() - started)}")
    return 1 if failed else 0


def _build(todo: list[tuple[str, str]], out: Path, nav: dict, cache: dict, keys: dict, workers: int) -> list[str]:
    """Build the pages of `todo`, longest first, on workers that stay up (their imports paid once); an executed chapter
    runs in a fresh interpreter of its own, started by its worker. Reports each page as it lands and records it in the
    cache; returns one line per failure."""
    if not todo:
        return []
    from tqdm import tqdm
    bar = tqdm(total=len(todo), unit="page", file=sys.stderr, dynamic_ncols=True) if sys.stderr.isatty() else None
    failures = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_page, name, kind, out, nav.get(name, (None, None))): (name, kind) for name, kind in todo}
        for done, future in enumerate(as_completed(futures), 1):
            name, kind = futures[future]
            try:
                seconds, failed = future.result()
            except Exception as error:  # the worker itself died
                seconds, failed = 0.0, f"{type(error).__name__}: {error}"
            if failed:  # no key: built again next time; its seconds still serve the estimate
                cache[name] = {"seconds": round(seconds, 1), "kind": kind, "failed": failed}
                failures.append(f"{name}: {failed}")
                line = f"{name} FAILED"
            else:
                cache[name] = {"key": keys[name], "seconds": round(seconds, 1), "kind": kind}
                line = f"{name} {'executed' if kind == 'execute' else 'rendered'} in {seconds:.0f} s"
            _save_cache(out, cache)
            if bar is not None:
                bar.set_postfix_str(line, refresh=False)
                bar.update()
            else:
                print(f"docs: [{done}/{len(todo)}] {line}", flush=True)
    if bar is not None:
        bar.close()
    return failures


FAILED = "docs/build.py --page failed: "


def _page(name: str, kind: str, out: Path, nav: tuple) -> tuple[float, str | None]:
    "One page, on a worker: (seconds, None), or (seconds, what failed). An executed chapter gets a fresh interpreter."
    import subprocess
    start = time.time()
    try:
        if kind == "readme":
            render_readme(out)
        elif kind == "render":
            render(name, out, False, nav)
        else:  # as nbdev-test gives each notebook: nothing left over from another chapter
            done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--out", str(out), "--page", name],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if done.returncode:
                marked = [line[len(FAILED):] for line in done.stderr.splitlines() if line.startswith(FAILED)]
                return time.time() - start, (marked or done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    except Exception as error:
        return time.time() - start, f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    return time.time() - start, None


def _execute_one(name: str, out: Path, nav: tuple) -> int:
    "`--page NAME`: execute and render one chapter in this process; a failure ends with one FAILED line on stderr."
    try:
        render(name, out, True, nav)
    except Exception as error:
        import traceback
        traceback.print_exc()
        print(f"{FAILED}{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}", file=sys.stderr)
        return 1
    return 0


def render_markdown(nb, out: Path, name: str, title: str) -> None:
    "One page from a notebook of markdown, with the site's offline rules and links."
    import nbformat
    from nbconvert import HTMLExporter
    page = nbformat.from_dict(_page_body(nb))
    body = HTMLExporter(template_name="lab").from_notebook_node(page, resources={"metadata": {"name": title}})[0]
    (out / f"{name}.html").write_text(offline_page(body, (None, None)))


def render_readme(out: Path) -> None:
    """README.md as readme.html (through nbs/index.ipynb, which holds the same text), and each of PAGES as its own page,
    so the README's links to the results ledger and the GPU box resolve inside the site."""
    import nbformat
    render_markdown(nbformat.read(NBS / "index.ipynb", as_version=4), out, "readme", "wmrl: README")
    for name, source in PAGES.items():
        text = source.read_text()
        title = next((line.lstrip("# ").strip() for line in text.splitlines() if line.startswith("# ")), name)
        render_markdown(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text)]), out, name, f"wmrl: {title}")


if __name__ == "__main__":
    sys.exit(main())
